//! Agent calls: scheduled with their exact request, answered by a response or a
//! failure, and each agent's consecutive failures for its circuit breaker
//! (docs/governance.md#circuit-breaker).

use crate::ids::CallId;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::RunState;
use crate::event::{Classifies, RunEvent};

/// The failure code of a call an open circuit refused (decider version 6).
pub const CIRCUIT_OPEN_CODE: &str = "CIRCUIT_OPEN";
use crate::protocol::{AgentRequest, AgentResponse, ResponseStatus};

/// One scheduled agent call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// The exact request (shared with its `agent.call_scheduled` event and the runtime).
    pub request: Arc<AgentRequest>,
    /// A capability call answers to this request's agent.
    pub reply_to: Option<CallId>,
    /// A classifier call classifies this response.
    pub classifies: Option<Classifies>,
    /// A branch of this fan-out group.
    pub branch_of: Option<String>,
    /// The recorded response, once answered (classifiers are shown it).
    pub response: Option<Arc<AgentResponse>>,
    /// Whether a response or a failure is recorded.
    pub answered: bool,
    /// The error code of a failed call (the executor's, or the agent's `error_code`;
    /// `AGENT_TIMEOUT` or `AGENT_ERROR` when an agent gave none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Consecutive failures of one agent in this run (for its circuit breaker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentHealth {
    /// Failures since its last successful response.
    pub consecutive_failures: u32,
    /// Recorded time of the last failure, ms since the Unix epoch.
    pub last_failure_ms: i64,
}

impl RunState {
    pub(super) fn apply_call(&mut self, event: &RunEvent) {
        match event {
            RunEvent::AgentCallScheduled {
                request,
                reply_to,
                classifies,
                branch_of,
                again_of,
            } => {
                self.calls_scheduled += 1;
                self.pending.insert(request.request_id.clone());
                let request = match again_of {
                    Some(asked) => self.whole_request(asked, request),
                    None => request.clone(),
                };
                self.calls.insert(
                    request.request_id.clone(),
                    Call {
                        request,
                        reply_to: reply_to.clone(),
                        classifies: classifies.clone(),
                        branch_of: branch_of.clone(),
                        response: None,
                        answered: false,
                        failure: None,
                    },
                );
            }
            RunEvent::AgentResponded {
                request_id,
                response,
                at_ms,
            } => {
                let failed = matches!(response.status, ResponseStatus::Error)
                    || (response.status == ResponseStatus::Timeout && response.actions.is_empty());
                self.answer(request_id, failed, *at_ms);
                if let Some(call) = self.calls.get_mut(request_id) {
                    call.response = Some(response.clone());
                    call.failure = failed.then(|| response.failure_code());
                }
            }
            // Not made: the call is settled, and (the agent was not reached) its health is
            // not touched.
            RunEvent::CallDegraded { request_id, .. } => {
                self.pending.remove(request_id);
                if let Some(call) = self.calls.get_mut(request_id) {
                    call.answered = true;
                    call.failure = Some(CIRCUIT_OPEN_CODE.to_owned());
                }
            }
            RunEvent::AgentCallFailed {
                request_id,
                code,
                at_ms,
                ..
            } => {
                self.answer(request_id, true, *at_ms);
                if let Some(call) = self.calls.get_mut(request_id) {
                    call.failure = Some(code.clone());
                }
            }
            _ => {}
        }
    }

    /// The request a call made again (decider version 9) was sent: `asked`'s decision
    /// inputs, then the ones `recorded` adds; the rest as recorded. (A log whose `asked`
    /// is unknown was not written by docket; its recorded request is kept as it is.)
    fn whole_request(&self, asked: &CallId, recorded: &Arc<AgentRequest>) -> Arc<AgentRequest> {
        let Some(before) = self.calls.get(asked) else {
            return recorded.clone();
        };
        let mut whole = AgentRequest::clone(recorded);
        whole.decision_inputs = before
            .request
            .decision_inputs
            .iter()
            .chain(&recorded.decision_inputs)
            .cloned()
            .collect();
        Arc::new(whole)
    }

    fn answer(&mut self, request_id: &CallId, failed: bool, at_ms: i64) {
        self.pending.remove(request_id);
        let Some(call) = self.calls.get_mut(request_id) else {
            return;
        };
        call.answered = true;
        let health = self
            .health
            .entry(call.request.target_agent.clone())
            .or_default();
        if failed {
            health.consecutive_failures += 1;
            health.last_failure_ms = at_ms;
        } else {
            health.consecutive_failures = 0;
        }
    }

    /// Whether the runtime reads this run's circuit breakers across runs and records what
    /// it read (decider version 6 and later); earlier runs keep the breaker in the run.
    #[must_use]
    pub fn reads_circuits_across_runs(&self) -> bool {
        self.decider_version() >= crate::event::CIRCUITS_ACROSS_RUNS
    }

    /// Calls scheduled but not answered, in request-id order of scheduling.
    #[must_use]
    pub fn pending_requests(&self) -> Vec<&AgentRequest> {
        self.pending_calls().map(|c| &*c.request).collect()
    }

    /// [`Self::pending_requests`] as shared handles, which the runtime holds across its
    /// agent calls without copying the requests.
    #[must_use]
    pub fn pending_requests_shared(&self) -> Vec<Arc<AgentRequest>> {
        self.pending_calls().map(|c| c.request.clone()).collect()
    }

    fn pending_calls(&self) -> impl Iterator<Item = &Call> {
        self.pending.iter().filter_map(|id| self.calls.get(id))
    }
}
