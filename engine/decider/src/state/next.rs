//! What the runtime must do next for a run, as the decider sees it: the shell asks this
//! instead of reading the state's fields, so the order of work (effects before calls,
//! nothing while a human is asked) is decided in one place.

use std::sync::Arc;

use super::{EffectRecord, EffectWork, RunState, RunStatus, TimerRecord, ToolCallRecord};
use docket_protocol::AgentRequest;

/// The next thing the runtime must do for a run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NextStep<'a> {
    /// Carry out this piece of effect work and record its result (effects first: their
    /// results are what the waiting agents are called back with).
    Effect(&'a EffectRecord, EffectWork),
    /// Run this governed tool call and record its outcome (`tool.returned` or
    /// `tool.failed`): the asking agent waits for it.
    Tool(&'a ToolCallRecord),
    /// Call these agents, in the order their calls were scheduled, and record each answer.
    Call(Vec<Arc<AgentRequest>>),
    /// Nothing until a human decides an open ticket (`docket approve` / `docket deny`).
    WaitForHuman,
    /// Nothing until this timer is due: then record `timer.fired` with the time it fires.
    WaitForTimer(&'a TimerRecord),
    /// Nothing until an outside event an agent waits for is received (`docket signal`),
    /// with no timeout timer to fire before.
    WaitForSignal,
    /// Paused by a person: nothing new starts until `docket unpause`.
    Paused,
    /// The run is over: completed, blocked or failed.
    Done(RunStatus),
    /// Running, with no call pending and no effect due: nothing the runtime can do; the
    /// run stays resumable as it is.
    Idle,
}

impl RunState {
    /// What the runtime must do next.
    #[must_use]
    pub fn next_step(&self) -> NextStep<'_> {
        match self.status {
            RunStatus::Running => {}
            RunStatus::WaitingForHuman => return NextStep::WaitForHuman,
            status => return NextStep::Done(status),
        }
        // Paused: timers still fire (and are recorded); nothing else starts.
        if self.paused.is_some() {
            return self
                .next_timer()
                .map_or(NextStep::Paused, NextStep::WaitForTimer);
        }
        if let Some((record, work)) = self.pending_effects().first() {
            return NextStep::Effect(record, *work);
        }
        if let Some(tool) = self.due_tool_call() {
            return NextStep::Tool(tool);
        }
        let calls = self.pending_requests();
        if !calls.is_empty() {
            return NextStep::Call(calls);
        }
        match self.next_timer() {
            Some(timer) => NextStep::WaitForTimer(timer),
            None if !self.signal_waits.is_empty() => NextStep::WaitForSignal,
            None => NextStep::Idle,
        }
    }
}
