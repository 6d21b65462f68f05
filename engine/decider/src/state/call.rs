//! Agent calls: scheduled with their exact request, answered by a response or a
//! failure, and each agent's consecutive failures for its circuit breaker
//! (docs/governance.md#circuit-breaker).
//!
//! A call made again is kept as what its event records, the decision
//! inputs it adds, linked to the inputs of the call it repeats ([`DecisionInputs`]): an
//! agent loop of n rounds folds in time and space linear in n, and the whole request is
//! rebuilt only where it is needed ([`Call::request`]: a pending call about to be sent,
//! inspect, a snapshot's check).
//!
//! The state keeps only the calls later decisions may read (`live.rs`); every call of the
//! run, with its answer, is folded from the log when it is shown ([`super::RunHistory`]).

use crate::events::{AgentCallFailed, AgentResponded};
use docket_protocol::CallId;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::RunState;
use crate::events::{Classifies, RunEvent};

/// The failure code of a call an open circuit refused.
pub const CIRCUIT_OPEN_CODE: &str = "CIRCUIT_OPEN";
use docket_protocol::{AgentRequest, AgentResponse, DecisionInput, ResponseStatus};

/// One scheduled agent call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The request as its `agent.call_scheduled` records it (shared with the event): for a
    /// call made again, every field as sent but `decision_inputs`,
    /// which holds only the inputs it adds. [`Call::request`] is the whole request.
    pub recorded: Arc<AgentRequest>,
    /// Every decision input the call was sent, shared with the call it repeats.
    pub(crate) inputs: DecisionInputs,
    /// The call this one was made again from, when its event records only what it adds.
    pub again_of: Option<CallId>,
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
    pub failure: Option<String>,
}

impl Call {
    /// The whole request the agent was sent: the recorded one, with every inherited
    /// decision input put back for a call made again (a copy, linear in its inputs).
    #[must_use]
    pub fn request(&self) -> Arc<AgentRequest> {
        if self.inputs.inherits() {
            let mut whole = AgentRequest::clone(&self.recorded);
            whole.decision_inputs = self.inputs.to_vec();
            Arc::new(whole)
        } else {
            self.recorded.clone()
        }
    }

    /// How many decision inputs the call was sent, without rebuilding them.
    #[must_use]
    pub fn decision_input_count(&self) -> usize {
        self.inputs.len()
    }
}

/// A call's decision inputs as a chain: those its own event records, after those of the
/// call it repeats. Cloning is O(1); [`DecisionInputs::to_vec`] is linear.
#[derive(Clone, Default)]
pub(crate) struct DecisionInputs(Option<Arc<InputLink>>);

struct InputLink {
    before: DecisionInputs,
    /// The request whose `decision_inputs` are this link's (shared with its event).
    added: Arc<AgentRequest>,
    /// Inputs in the whole chain up to and including this link.
    len: usize,
}

impl DecisionInputs {
    /// `added`'s decision inputs after `before`'s.
    pub(crate) fn after(before: DecisionInputs, added: Arc<AgentRequest>) -> Self {
        let len = before.len() + added.decision_inputs.len();
        Self(Some(Arc::new(InputLink { before, added, len })))
    }

    pub(crate) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |l| l.len)
    }

    /// Whether some inputs come from a call this one repeats.
    fn inherits(&self) -> bool {
        self.0.as_ref().is_some_and(|l| l.before.0.is_some())
    }

    /// Each link's inputs, the last link first.
    fn links(&self) -> impl Iterator<Item = &[DecisionInput]> {
        let mut next = self.0.as_deref();
        std::iter::from_fn(move || {
            let link = next?;
            next = link.before.0.as_deref();
            Some(link.added.decision_inputs.as_slice())
        })
    }

    /// The inputs of the calls this one repeats (all but its own link's), in order.
    fn inherited(&self) -> Vec<DecisionInput> {
        self.0
            .as_ref()
            .map(|l| l.before.to_vec())
            .unwrap_or_default()
    }

    /// The whole list, in the order the agent received it.
    pub(crate) fn to_vec(&self) -> Vec<DecisionInput> {
        let links: Vec<&[DecisionInput]> = self.links().collect();
        let mut all = Vec::with_capacity(self.len());
        for inputs in links.into_iter().rev() {
            all.extend_from_slice(inputs);
        }
        all
    }
}

impl PartialEq for DecisionInputs {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) if Arc::ptr_eq(a, b) => true,
            _ => self.len() == other.len() && self.to_vec() == other.to_vec(),
        }
    }
}

impl std::fmt::Debug for DecisionInputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DecisionInputs({} inputs)", self.len())
    }
}

/// A chain of a long loop is dropped link by link, not by recursion as deep as the loop.
impl Drop for InputLink {
    fn drop(&mut self) {
        let mut next = self.before.0.take();
        while let Some(link) = next {
            match Arc::try_unwrap(link) {
                Ok(mut link) => next = link.before.0.take(),
                Err(_) => break,
            }
        }
    }
}

/// A call as a snapshot holds it: its recorded request and the call it repeats, the
/// inherited inputs linked again on decoding ([`link_calls`]), never copied; when the call
/// it repeats is no longer live (answered, and nothing refers to it), the inputs it
/// inherited from it, listed (`inherited`).
#[derive(Serialize, Deserialize)]
struct StoredCall {
    recorded: Arc<AgentRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    again_of: Option<CallId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inherited: Option<Vec<DecisionInput>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reply_to: Option<CallId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    classifies: Option<Classifies>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    branch_of: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response: Option<Arc<AgentResponse>>,
    answered: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure: Option<String>,
}

/// Encodes a state's calls: a call made again from one still in the map by reference to
/// it, one made again from a call left to the log with the inputs it inherited.
pub(super) fn store_calls<S: serde::Serializer>(
    calls: &std::collections::BTreeMap<CallId, Call>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(calls.len()))?;
    for (id, call) in calls {
        let linked = call
            .again_of
            .as_ref()
            .is_some_and(|a| calls.contains_key(a));
        let inherited = (!linked && call.inputs.inherits()).then(|| call.inputs.inherited());
        let stored = StoredCall {
            recorded: call.recorded.clone(),
            again_of: call.again_of.clone(),
            inherited,
            reply_to: call.reply_to.clone(),
            classifies: call.classifies.clone(),
            branch_of: call.branch_of.clone(),
            response: call.response.clone(),
            answered: call.answered,
            failure: call.failure.clone(),
        };
        map.serialize_entry(id, &stored)?;
    }
    map.end()
}

/// Decodes a state's calls and links each call made again to the inputs of the call it
/// repeats, in request-id order (the order they were scheduled), as the fold did.
pub(super) fn link_calls<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<std::collections::BTreeMap<CallId, Call>, D::Error> {
    let stored = std::collections::BTreeMap::<CallId, StoredCall>::deserialize(deserializer)?;
    let mut calls = std::collections::BTreeMap::new();
    for (id, s) in stored {
        let call = match s.inherited {
            Some(inherited) => {
                let before = AgentRequest {
                    decision_inputs: inherited,
                    ..AgentRequest::clone(&s.recorded)
                };
                let before = DecisionInputs::after(DecisionInputs::default(), Arc::new(before));
                Call {
                    inputs: DecisionInputs::after(before, s.recorded.clone()),
                    recorded: s.recorded,
                    again_of: s.again_of,
                    reply_to: None,
                    classifies: None,
                    branch_of: None,
                    response: None,
                    answered: false,
                    failure: None,
                }
            }
            None => RunState::new_call(&calls, s.recorded, s.again_of.as_ref()),
        };
        calls.insert(
            id,
            Call {
                reply_to: s.reply_to,
                classifies: s.classifies,
                branch_of: s.branch_of,
                response: s.response,
                answered: s.answered,
                failure: s.failure,
                ..call
            },
        );
    }
    Ok(calls)
}

/// The failure code of an answer that counts as a failure (an error, or a timeout with no
/// actions), `None` for one that does not.
#[must_use]
pub(super) fn failure_of(response: &AgentResponse) -> Option<String> {
    let failed = matches!(response.status, ResponseStatus::Error)
        || (response.status == ResponseStatus::Timeout && response.actions.is_empty());
    failed.then(|| response.failure_code())
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
                let call = Self::new_call(&self.calls, request.clone(), again_of.as_ref());
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
                let failure = failure_of(response);
                self.answer(request_id);
                if let Some(call) = self.calls.get_mut(request_id) {
                    call.response = Some(response.clone());
                    call.failure = failure;
                }
            }
            // Not made: the call is settled.
            RunEvent::CallDegraded { request_id, .. } => {
                self.pending.remove(request_id);
                if let Some(call) = self.calls.get_mut(request_id) {
                    call.answered = true;
                    call.failure = Some(CIRCUIT_OPEN_CODE.to_owned());
                }
            }
            RunEvent::AgentCallFailed(AgentCallFailed {
                request_id, code, ..
            }) => {
                self.answer(request_id);
                if let Some(call) = self.calls.get_mut(request_id) {
                    call.failure = Some(code.clone());
                }
            }
            _ => {}
        }
    }

    /// A call just scheduled, unanswered. One made again sends
    /// `asked`'s decision inputs, then the ones `recorded` adds; the rest as recorded. (A
    /// log whose `asked` is unknown was not written by docket; its recorded request is
    /// taken as whole.)
    pub(super) fn new_call(
        calls: &std::collections::BTreeMap<CallId, Call>,
        recorded: Arc<AgentRequest>,
        asked: Option<&CallId>,
    ) -> Call {
        let before = asked.and_then(|a| Some((a, calls.get(a)?)));
        let inputs = DecisionInputs::after(
            before.map(|(_, c)| c.inputs.clone()).unwrap_or_default(),
            recorded.clone(),
        );
        Call {
            recorded,
            inputs,
            again_of: before.map(|(a, _)| a.clone()),
            reply_to: None,
            classifies: None,
            branch_of: None,
            response: None,
            answered: false,
            failure: None,
        }
    }

    /// A copy of `asked`'s request to make it again (a new id and attempt are the
    /// caller's to set) with no decision inputs: the ones the caller pushes are those it
    /// adds to `asked`'s (`Batch::schedule_again`).
    pub(crate) fn request_again(&self, asked: &CallId) -> Option<AgentRequest> {
        let call = self.calls.get(asked)?;
        let r = &call.recorded;
        Some(AgentRequest {
            request_id: r.request_id.clone(),
            correlation_id: r.correlation_id.clone(),
            run_id: r.run_id.clone(),
            episode_id: r.episode_id.clone(),
            attempt: r.attempt,
            source_agent: r.source_agent.clone(),
            target_agent: r.target_agent.clone(),
            capability_code: r.capability_code.clone(),
            timeout_ms: r.timeout_ms,
            priority: r.priority,
            context: r.context.clone(),
            decision_inputs: Vec::new(),
            context_inputs: r.context_inputs.clone(),
            task: r.task.clone(),
        })
    }

    /// Every decision input `asked` was sent, in order (linear in their number).
    pub(crate) fn decision_inputs_of(&self, asked: &CallId) -> Vec<DecisionInput> {
        self.calls
            .get(asked)
            .map(|c| c.inputs.to_vec())
            .unwrap_or_default()
    }

    fn answer(&mut self, request_id: &CallId) {
        self.pending.remove(request_id);
        let Some(call) = self.calls.get_mut(request_id) else {
            return;
        };
        call.answered = true;
    }

    /// The whole requests of the calls scheduled but not answered, in request-id order,
    /// as shared handles the runtime holds across its agent calls.
    #[must_use]
    pub fn pending_requests(&self) -> Vec<Arc<AgentRequest>> {
        self.pending_calls().map(Call::request).collect()
    }

    /// The request ids of the calls scheduled but not answered, in request-id order.
    #[must_use]
    pub fn pending_call_ids(&self) -> Vec<&CallId> {
        self.pending_calls()
            .map(|c| &c.recorded.request_id)
            .collect()
    }

    /// The calls scheduled but not answered, in request-id order (their recorded
    /// requests: [`Call::request`] rebuilds the whole one).
    pub fn pending_calls(&self) -> impl Iterator<Item = &Call> {
        self.pending.iter().filter_map(|id| self.calls.get(id))
    }
}
