//! What a run did, as status, inspect, diff and the demo show it: every call with its
//! whole request and its answer, and every handoff decision in order. No decision reads
//! it, so the run's state ([`RunState`](super::RunState)) and its snapshot do not keep it
//! (docs/replay.md#long-runs); it is folded from the log when it is shown.

use crate::events::{AgentCallFailed, AgentResponded};
use docket_protocol::CallId;
use std::collections::BTreeMap;

use super::call::{CIRCUIT_OPEN_CODE, Call};
use super::handoff::HandoffRecord;
use crate::events::RunEvent;

/// Every call and every handoff decision of a run, folded from its events. Cheap to fold:
/// it shares each call's recorded request and answer with its event, and a call made again
/// with the call it repeats.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunHistory {
    calls: BTreeMap<CallId, Call>,
    handoffs: Vec<HandoffRecord>,
}

impl RunHistory {
    /// Folds a run's log (or its first events: the history up to a point).
    #[must_use]
    pub fn fold<'a>(events: impl IntoIterator<Item = &'a RunEvent>) -> Self {
        let mut history = Self::default();
        for event in events {
            history.apply(event);
        }
        history
    }

    /// Folds one event.
    pub fn apply(&mut self, event: &RunEvent) {
        match event {
            RunEvent::AgentCallScheduled {
                request,
                reply_to,
                classifies,
                branch_of,
                again_of,
            } => {
                let call =
                    super::RunState::new_call(&self.calls, request.clone(), again_of.as_ref());
                self.calls.insert(
                    request.request_id.clone(),
                    Call {
                        reply_to: reply_to.clone(),
                        classifies: classifies.clone(),
                        branch_of: branch_of.clone(),
                        ..call
                    },
                );
            }
            RunEvent::AgentResponded(AgentResponded {
                request_id,
                response,
                ..
            }) => {
                if let Some(call) = self.calls.get_mut(request_id) {
                    call.answered = true;
                    call.response = Some(response.clone());
                    call.failure = super::call::failure_of(response);
                }
            }
            RunEvent::CallDegraded { request_id, .. } => {
                if let Some(call) = self.calls.get_mut(request_id) {
                    call.answered = true;
                    call.failure = Some(CIRCUIT_OPEN_CODE.to_owned());
                }
            }
            RunEvent::AgentCallFailed(AgentCallFailed {
                request_id, code, ..
            }) => {
                if let Some(call) = self.calls.get_mut(request_id) {
                    call.answered = true;
                    call.failure = Some(code.clone());
                }
            }
            _ => self.handoffs.extend(HandoffRecord::of(event)),
        }
    }

    /// Every call of the run, by request id, with its recorded request and answer
    /// ([`Call::request`] rebuilds the whole request of a call made again).
    #[must_use]
    pub fn calls(&self) -> &BTreeMap<CallId, Call> {
        &self.calls
    }

    /// Every handoff decision, in order.
    #[must_use]
    pub fn handoffs(&self) -> &[HandoffRecord] {
        &self.handoffs
    }
}
