//! The state of a run, folded from its events. Everything is ordered (BTreeMap, Vec), so
//! two folds of the same log are equal and so are the decisions taken from them.

use crate::events::RunCancelled;
use docket_protocol::{AgentId, CallId, EffectId, RunId, SignalId, TicketId, TimerId, ToolCallId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod call;
mod effect;
pub(crate) mod episode;
mod fan_out;
mod handoff;
mod history;
mod live;
mod next;
mod overrides;
mod snapshot;
mod ticket;
// Outside events
mod signal;
// Durable timers
mod timer;
// Governed tools
mod tool;

pub use call::{CIRCUIT_OPEN_CODE, Call};
pub use effect::{EffectPhase, EffectRecord, EffectWork};
pub use handoff::HandoffRecord;
pub use history::RunHistory;
#[cfg(test)]
pub(crate) use live::{PRUNING, Pruning};
pub use next::NextStep;
pub use signal::{SignalPhase, SignalRecord};
pub use snapshot::{
    SNAPSHOT_EVERY, SNAPSHOT_FORMAT, SnapshotError, snapshot_due, snapshot_interval,
};
pub use ticket::{Ticket, TicketDecision};
pub use timer::TimerRecord;
pub use tool::{ToolCallRecord, ToolPhase};

use crate::events::{DECIDER_VERSION, Delivery, RunEvent, RunRequested};

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// No `run.requested` yet.
    #[default]
    NotStarted,
    /// Calls are scheduled or being answered.
    Running,
    /// A human ticket is open; nothing proceeds until it is decided.
    WaitingForHuman,
    /// Finished with an output.
    Completed,
    /// Stopped by a policy.
    Blocked,
    /// Stopped for another reason.
    Failed,
    /// Cancelled by a person.
    Cancelled,
}

impl RunStatus {
    /// Completed, blocked, failed or cancelled: nothing more will happen.
    #[must_use]
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Blocked | Self::Failed | Self::Cancelled
        )
    }

    /// The word shown to users.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotStarted => "not started",
            Self::Running => "running",
            Self::WaitingForHuman => "waiting for a human",
            Self::Completed => "completed",
            Self::Blocked => "blocked by policy",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The state of one run. `version` is the number of events folded, which is the log
/// sequence the next batch must be appended after.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunState {
    /// Events folded so far.
    pub(crate) version: u64,
    /// The recorded request (workflow, bundle, input).
    pub(crate) run: Option<Arc<RunRequested>>,
    /// Where the run stands.
    pub(crate) status: RunStatus,
    /// Calls scheduled so far (the next request id is `{run}/call-{calls_scheduled+1}`).
    pub(crate) calls_scheduled: u32,
    /// Tickets opened so far.
    pub(crate) tickets_opened: u32,
    /// The calls later decisions may read, by request id: the pending ones and the
    /// answered ones something open still refers to (`live.rs`); the others are left to
    /// the log ([`RunHistory`]).
    #[serde(
        serialize_with = "call::store_calls",
        deserialize_with = "call::link_calls"
    )]
    pub(crate) calls: BTreeMap<CallId, Call>,
    /// How many calls the map may hold before the answered ones nothing refers to are
    /// dropped again (`live.rs`).
    #[serde(default)]
    pub(crate) prune_at: usize,
    /// Calls scheduled and not yet answered.
    pub(crate) pending: BTreeSet<CallId>,
    /// The last delivered output of each agent by output type, for context edges.
    pub(crate) outputs: BTreeMap<AgentId, BTreeMap<String, Arc<Value>>>,
    /// The allowed handoffs of decision inputs, counted, and their senders.
    #[serde(default)]
    pub(crate) crossings: handoff::DecisionCrossings,
    /// What each agent was told of the run in its handoff context:
    /// the original request and the human decisions, as they last crossed the gate.
    #[serde(default)]
    pub(crate) context_told: BTreeMap<AgentId, handoff::ContextTold>,
    /// In a sequential flow, the position (0-based, in `flow_order`) the run is at.
    #[serde(default)]
    pub(crate) flow_position: u32,
    /// Fan-out outputs waiting for their group's other branches.
    pub(crate) held: BTreeMap<String, Vec<Delivery>>,
    /// Fan-out branches that failed past retrying, waiting for their group's join
    /// (`fan_out_partial`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) gaps: BTreeMap<String, Vec<crate::events::BranchGap>>,
    /// Fan-out conflicts settled so far, which the run's final output reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) settled_conflicts: Vec<docket_protocol::SettledConflict>,
    /// Human tickets, by id.
    pub(crate) tickets: BTreeMap<TicketId, Ticket>,
    /// The final output, once completed.
    pub(crate) output: Option<Value>,
    /// Why the run was blocked or failed.
    pub(crate) stop_reason: Option<String>,
    // Episodes
    /// The episode tree: budgets, usage, results, stop counters, domain versions.
    #[serde(default)]
    pub(crate) episodes: episode::EpisodeTree,
    // Side effects
    /// Effects requested so far (the next id is `{run}/effect-{effects_requested+1}`).
    pub(crate) effects_requested: u32,
    /// Every side effect, by id.
    pub(crate) effects: BTreeMap<EffectId, EffectRecord>,
    /// Verifier calls in flight: request id → the effect they re-check.
    pub(crate) verifier_calls: BTreeMap<CallId, EffectId>,
    // Governed tools
    /// Tool calls decided so far (the next id is `{run}/tool-{tool_calls_requested+1}`).
    #[serde(default)]
    pub(crate) tool_calls_requested: u32,
    /// Every governed tool call, by id.
    #[serde(default)]
    pub(crate) tool_calls: BTreeMap<ToolCallId, tool::ToolCallRecord>,
    // Durable timers
    /// Timers set so far (the next id is `{run}/timer-{timers_set+1}`).
    #[serde(default)]
    pub(crate) timers_set: u32,
    /// Every timer, by id.
    #[serde(default)]
    pub(crate) timers: BTreeMap<TimerId, timer::TimerRecord>,
    // Outside events
    /// Every outside event received, by id (the next is `{run}/signal-{len+1}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) signals: BTreeMap<SignalId, signal::SignalRecord>,
    /// The senders' idempotency keys, and the event each recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) signal_keys: BTreeMap<String, SignalId>,
    /// Agents waiting for an event, by the call whose response waits.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) signal_waits: BTreeMap<CallId, crate::events::signal::SignalAwaited>,
    // Pause
    /// The pause in force: who paused the run and why (`decide/pause.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) paused: Option<crate::events::RunPause>,
    // Human overrides
    /// The rule that blocked the run, while it is blocked.
    #[serde(default)]
    pub(crate) blocked_by: Option<String>,
    /// What the block stopped, when a person may override it.
    #[serde(default)]
    pub(crate) overridable: Option<Box<crate::events::overrides::Overridable>>,
}

impl RunState {
    /// Events folded so far: the log sequence the next batch is appended after.
    #[must_use]
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The decider version this run was recorded by (its `run.requested`'s), or this
    /// build's before the run is requested.
    #[must_use]
    pub fn decider_version(&self) -> u32 {
        self.run
            .as_ref()
            .map_or(DECIDER_VERSION, |r| r.decider_version)
    }

    /// The recorded request (workflow, bundle, input), once the run is requested.
    #[must_use]
    pub fn request(&self) -> Option<&RunRequested> {
        self.run.as_deref()
    }

    /// Where the run stands.
    #[must_use]
    pub fn status(&self) -> RunStatus {
        self.status
    }

    /// The pause in force, if a person paused the run: nothing new starts until it is
    /// unpaused ([`NextStep::Paused`]).
    #[must_use]
    pub fn paused(&self) -> Option<&crate::events::RunPause> {
        self.paused.as_ref()
    }

    /// The calls later decisions may read, by request id: every pending call, and the
    /// answered ones something open (a pending call, an effect or tool call in flight, an
    /// open ticket, a running episode, a block that may be overridden) still refers to.
    /// A call just answered stays until the next answer is folded. Every call of the run
    /// is in [`RunHistory::calls`], folded from the log.
    #[must_use]
    pub fn live_calls(&self) -> &BTreeMap<CallId, Call> {
        &self.calls
    }

    /// In a sequential flow, the position (0-based, in the bundle's `flow_order`) the run
    /// is at: 0 until its first handoff (docs/governance.md#sequential-flow).
    #[must_use]
    pub fn flow_position(&self) -> u32 {
        self.flow_position
    }

    /// Human tickets, by id (open and decided).
    #[must_use]
    pub fn tickets(&self) -> &BTreeMap<TicketId, Ticket> {
        &self.tickets
    }

    /// The run's output, once completed.
    #[must_use]
    pub fn output(&self) -> Option<&Value> {
        self.output.as_ref()
    }

    /// The fan-out conflicts settled so far (by confidence or by a person), in the order
    /// they were settled.
    #[must_use]
    pub fn settled_conflicts(&self) -> &[docket_protocol::SettledConflict] {
        &self.settled_conflicts
    }

    /// Why the run was blocked or failed.
    #[must_use]
    pub fn stop_reason(&self) -> Option<&str> {
        self.stop_reason.as_deref()
    }

    /// The episode tree: budgets, usage, results, stop counters, domain versions.
    #[must_use]
    pub fn episodes(&self) -> &episode::EpisodeTree {
        &self.episodes
    }

    /// Every side effect, by id.
    #[must_use]
    pub fn effects(&self) -> &BTreeMap<EffectId, EffectRecord> {
        &self.effects
    }

    /// The session this run continues, when it is a later turn of one
    /// (docs/agent-protocol.md#sessions); `None` for a session's first run.
    #[must_use]
    pub fn session(&self) -> Option<&crate::events::Session> {
        self.run.as_ref().and_then(|r| r.session.as_deref())
    }

    /// The decisions people made on this run's tickets, in ticket order, as the handoff
    /// context tells them.
    #[must_use]
    pub fn human_decisions(&self) -> Vec<Value> {
        self.tickets
            .iter()
            .filter_map(|(id, t)| {
                let d = t.decision.as_ref()?;
                let mut v = serde_json::json!({
                    "ticket": id,
                    "asked": t.reason,
                    "by": d.by,
                    "approved": d.approved,
                    "reason": d.reason,
                });
                if let Some(choice) = d.choice {
                    v["choice"] = serde_json::json!(choice);
                }
                if let Some(answer) = &d.answer {
                    v["answer"] = serde_json::json!(answer);
                }
                Some(v)
            })
            .collect()
    }

    /// This run as an earlier turn of its session, for the run that continues it: its
    /// request, how it ended, its output and the decisions people made. `None` before it
    /// is requested.
    #[must_use]
    pub fn as_session_turn(&self) -> Option<crate::events::SessionTurn> {
        let run = self.run.as_ref()?;
        Some(crate::events::SessionTurn {
            turn: run.session.as_ref().map_or(1, |s| s.turn),
            run_id: run.run_id.clone(),
            request: run.input.clone(),
            status: self.status.as_str().to_owned(),
            output: self.output.clone(),
            decisions: self.human_decisions(),
        })
    }

    /// The run id, once requested.
    #[must_use]
    pub fn run_id(&self) -> Option<&RunId> {
        self.run.as_ref().map(|r| &r.run_id)
    }

    /// Folds one event.
    #[must_use]
    pub fn evolve(mut self, event: &RunEvent) -> Self {
        self.apply(event);
        self
    }

    /// Folds one event in place: each concern folds the events it owns (one file each
    /// under `state/`), so the match below only routes.
    pub fn apply(&mut self, event: &RunEvent) {
        self.version += 1;
        match event {
            // An input's decision reads only what is live before the input is folded.
            RunEvent::AgentResponded(_)
            | RunEvent::AgentCallFailed(_)
            | RunEvent::HumanDecided(_)
            | RunEvent::HumanOverrode(_) => self.prune_calls(),
            _ => {}
        }
        match event {
            RunEvent::RunBlocked { .. } => {
                self.apply_run(event);
                self.apply_override(event);
            }
            RunEvent::RunRequested(_)
            | RunEvent::RunCompleted { .. }
            | RunEvent::RunFailed { .. }
            | RunEvent::RunCancelled(_) => self.apply_run(event),
            RunEvent::HumanOverrode(_) => self.apply_override(event),
            RunEvent::AgentCallScheduled { .. }
            | RunEvent::AgentResponded(_)
            | RunEvent::AgentCallFailed(_)
            | RunEvent::CallDegraded { .. } => self.apply_call(event),
            RunEvent::HandoffAllowed { .. } | RunEvent::HandoffDenied { .. } => {
                self.apply_handoff(event);
            }
            RunEvent::OutputHeld { .. }
            | RunEvent::FanoutJoined { .. }
            | RunEvent::FanoutBranchFailed { .. } => {
                self.apply_fan_out(event);
            }
            RunEvent::Escalated { .. } => {
                // An effect ticket holds its effect.
                self.apply_effect(event);
                self.apply_ticket(event);
            }
            RunEvent::HumanDecided(_) => self.apply_ticket(event),
            // Recorded for the audit; nothing later decisions read.
            RunEvent::PolicyDecided { .. }
            | RunEvent::CircuitChecked(_)
            // A person's domain write: its `domain.written` is what is folded.
            | RunEvent::HumanWroteDomain(_)
            | RunEvent::RiskClassified { .. }
            | RunEvent::ConflictDetected { .. }
            | RunEvent::OutputArchived { .. }
            | RunEvent::TaskReassigned { .. } => {}
            // Episodes: folded below, after every other concern.
            RunEvent::EpisodeStarted { .. }
            | RunEvent::EpisodeActionDenied { .. }
            | RunEvent::EpisodeFinished { .. }
            | RunEvent::EpisodeStopped { .. }
            | RunEvent::DomainWritten { .. }
            | RunEvent::DomainWriteDenied { .. } => {}
            RunEvent::EffectRequested(_)
            | RunEvent::EffectDeduplicated(_)
            | RunEvent::EffectAdmitted(_)
            | RunEvent::EffectRefused(_)
            | RunEvent::EffectReady(_)
            | RunEvent::EffectStarted(_)
            | RunEvent::EffectSandboxStarted(_)
            | RunEvent::EffectSandboxRan(_)
            | RunEvent::EffectVerifierCalled(_)
            | RunEvent::EffectSettled(_)
            | RunEvent::EffectDryRun(_)
            | RunEvent::EffectKillSwitchChecked(_)
            | RunEvent::EffectApplied(_)
            | RunEvent::EffectFailed(_)
            | RunEvent::EffectVerified(_)
            | RunEvent::EffectRecovered(_) => self.apply_effect(event),
            // Governed tools
            RunEvent::ToolCallScheduled(_)
            | RunEvent::ToolDenied(_)
            | RunEvent::ToolReturned(_)
            | RunEvent::ToolFailed(_) => self.apply_tool(event),
            // Durable timers
            RunEvent::TimerSet(_) | RunEvent::TimerFired(_) => self.apply_timer(event),
            // Outside events
            RunEvent::SignalReceived(_)
            | RunEvent::SignalKept(_)
            | RunEvent::SignalRefused(_)
            | RunEvent::SignalAwaited(_)
            | RunEvent::SignalDelivered(_)
            | RunEvent::SignalTimedOut(_) => self.apply_signal(event),
            // Pause
            RunEvent::RunPaused(pause) => self.paused = Some(pause.clone()),
            RunEvent::RunUnpaused(_) => self.paused = None,
        }
        episode::fold(self, event);
    }

    /// The run's own lifecycle: requested, then completed, blocked or failed.
    fn apply_run(&mut self, event: &RunEvent) {
        match event {
            RunEvent::RunRequested(run) => {
                self.run = Some(run.clone());
                self.status = RunStatus::Running;
            }
            RunEvent::RunCompleted { output, .. } => {
                self.output = Some(output.clone());
                self.status = RunStatus::Completed;
            }
            RunEvent::RunBlocked { reason, .. } => {
                self.stop_reason = Some(reason.clone());
                self.status = RunStatus::Blocked;
            }
            RunEvent::RunFailed { reason } => {
                self.stop_reason = Some(reason.clone());
                self.status = RunStatus::Failed;
            }
            RunEvent::RunCancelled(RunCancelled { by, reason, .. }) => {
                self.stop_reason = Some(format!("cancelled by {by}: {reason}"));
                self.status = RunStatus::Cancelled;
            }
            _ => {}
        }
    }

    /// Folds a whole log.
    #[must_use]
    pub fn fold<'a>(events: impl IntoIterator<Item = &'a RunEvent>) -> Self {
        let mut state = Self::default();
        for event in events {
            state.apply(event);
        }
        state
    }

    /// What `agent` last delivered as a decision input of `output_type` (`id` or
    /// `id@version`; versions are not told apart), as its receiver got it. Provenance
    /// rules read citable ids from it.
    #[must_use]
    pub fn delivered_output(&self, agent: &str, output_type: &str) -> Option<&Value> {
        let base = |t: &str| t.split('@').next().unwrap_or(t).to_owned();
        let want = base(output_type);
        self.outputs
            .get(agent)?
            .iter()
            .find(|(t, _)| base(t) == want)
            .map(|(_, v)| &**v)
    }
}
