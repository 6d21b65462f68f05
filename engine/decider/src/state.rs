//! The state of a run, folded from its events. Everything is ordered (BTreeMap, Vec), so
//! two folds of the same log are equal and so are the decisions taken from them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use docket_policies::InputKind;

use super::decide::effect::EffectRecord;
use super::event::{Classifies, Delivery, RunEvent, RunRequested, TicketSubject};
use crate::protocol::{AgentRequest, AgentResponse, ResponseStatus};

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
}

impl RunStatus {
    /// Completed, blocked or failed: nothing more will happen.
    #[must_use]
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Blocked | Self::Failed)
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
        }
    }
}

/// One scheduled agent call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// The exact request (shared with its `agent.call_scheduled` event and the runtime).
    pub request: Arc<AgentRequest>,
    /// A capability call answers to this request's agent.
    pub reply_to: Option<String>,
    /// A classifier call classifies this response.
    pub classifies: Option<Classifies>,
    /// A branch of this fan-out group.
    pub branch_of: Option<String>,
    /// The recorded response, once answered (classifiers are shown it).
    pub response: Option<Arc<AgentResponse>>,
    /// Whether a response or a failure is recorded.
    pub answered: bool,
}

/// One handoff as decided (allowed or denied).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffRecord {
    /// Sender.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// Output type.
    pub output_type: String,
    /// Decision or context input.
    pub input: InputKind,
    /// Allowed or denied.
    pub allowed: bool,
    /// The deciding rule.
    pub rule_id: String,
    /// Why.
    pub reason: String,
}

/// A human ticket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    /// What the person is asked.
    pub reason: String,
    /// What approving does.
    pub subject: TicketSubject,
    /// Still waiting for a decision.
    pub open: bool,
}

/// Consecutive failures of one agent in this run (for its circuit breaker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentHealth {
    /// Failures since its last successful response.
    pub consecutive_failures: u32,
    /// Recorded time of the last failure, ms since the Unix epoch.
    pub last_failure_ms: i64,
}

/// The state of one run. `version` is the number of events folded, which is the log
/// sequence the next batch must be appended after.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunState {
    /// Events folded so far.
    pub version: u64,
    /// The recorded request (workflow, bundle, input).
    pub run: Option<Arc<RunRequested>>,
    /// Where the run stands.
    pub status: RunStatus,
    /// Calls scheduled so far (the next request id is `{run}/call-{calls_scheduled+1}`).
    pub calls_scheduled: u32,
    /// Tickets opened so far.
    pub tickets_opened: u32,
    /// Every call, by request id.
    pub calls: BTreeMap<String, Call>,
    /// Calls scheduled and not yet answered.
    pub pending: BTreeSet<String>,
    /// The last delivered output of each agent by output type, for context edges.
    pub outputs: BTreeMap<String, BTreeMap<String, Arc<Value>>>,
    /// Every handoff decision, in order.
    pub handoffs: Vec<HandoffRecord>,
    /// Fan-out outputs waiting for their group's other branches.
    pub held: BTreeMap<String, Vec<Delivery>>,
    /// Human tickets, by id.
    pub tickets: BTreeMap<String, Ticket>,
    /// Per-agent failure counts.
    pub health: BTreeMap<String, AgentHealth>,
    /// The final output, once completed.
    pub output: Option<Value>,
    /// Why the run was blocked or failed.
    pub stop_reason: Option<String>,
    // Episodes (seed 004)
    /// The episode tree: budgets, usage, results, stop counters, domain versions.
    #[serde(default)]
    pub episodes: super::episode::EpisodeTree,
    // Side effects (seed 004 §1, §8)
    /// Effects requested so far (the next id is `{run}/effect-{effects_requested+1}`).
    pub effects_requested: u32,
    /// Every side effect, by id.
    pub effects: BTreeMap<String, EffectRecord>,
    /// Verifier calls in flight: request id → the effect they re-check.
    pub verifier_calls: BTreeMap<String, String>,
}

impl RunState {
    /// The run id, once requested.
    #[must_use]
    pub fn run_id(&self) -> Option<&str> {
        self.run.as_ref().map(|r| r.run_id.as_str())
    }

    /// Folds one event.
    #[must_use]
    pub fn evolve(mut self, event: &RunEvent) -> Self {
        self.apply(event);
        self
    }

    /// Folds one event in place.
    pub fn apply(&mut self, event: &RunEvent) {
        self.version += 1;
        match event {
            RunEvent::RunRequested(run) => {
                self.run = Some(run.clone());
                self.status = RunStatus::Running;
            }
            RunEvent::AgentCallScheduled {
                request,
                reply_to,
                classifies,
                branch_of,
            } => {
                self.calls_scheduled += 1;
                self.pending.insert(request.request_id.clone());
                self.calls.insert(
                    request.request_id.clone(),
                    Call {
                        request: request.clone(),
                        reply_to: reply_to.clone(),
                        classifies: classifies.clone(),
                        branch_of: branch_of.clone(),
                        response: None,
                        answered: false,
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
                }
            }
            RunEvent::AgentCallFailed {
                request_id, at_ms, ..
            } => self.answer(request_id, true, *at_ms),
            RunEvent::HandoffAllowed {
                from,
                to,
                output_type,
                input,
                decision,
                delivered,
                ..
            } => {
                if *input == InputKind::Decision {
                    self.outputs
                        .entry(from.clone())
                        .or_default()
                        .insert(output_type.clone(), delivered.clone());
                }
                self.handoffs.push(HandoffRecord {
                    from: from.clone(),
                    to: to.clone(),
                    output_type: output_type.clone(),
                    input: *input,
                    allowed: true,
                    rule_id: decision.rule_id.to_string(),
                    reason: decision.reason.to_string(),
                });
            }
            RunEvent::HandoffDenied {
                from,
                to,
                output_type,
                decision,
                ..
            } => self.handoffs.push(HandoffRecord {
                from: from.clone(),
                to: to.clone(),
                output_type: output_type.clone(),
                input: InputKind::Decision,
                allowed: false,
                rule_id: decision.rule_id.to_string(),
                reason: decision.reason.to_string(),
            }),
            RunEvent::PolicyDecided { .. }
            | RunEvent::RiskClassified { .. }
            | RunEvent::ConflictDetected { .. }
            | RunEvent::OutputArchived { .. } => {}
            RunEvent::OutputHeld { group, delivery } => {
                self.held
                    .entry(group.clone())
                    .or_default()
                    .push(delivery.clone());
            }
            RunEvent::FanoutJoined { group, .. } => {
                self.held.remove(group);
            }
            RunEvent::Escalated {
                ticket,
                reason,
                subject,
            } => {
                // Side effects (seed 004 §1, §8): an effect ticket holds its effect.
                self.apply_effect(event);
                self.tickets_opened += 1;
                self.tickets.insert(
                    ticket.clone(),
                    Ticket {
                        reason: reason.clone(),
                        subject: subject.clone(),
                        open: true,
                    },
                );
                self.status = RunStatus::WaitingForHuman;
            }
            RunEvent::HumanDecided { ticket, .. } => {
                if let Some(t) = self.tickets.get_mut(ticket) {
                    t.open = false;
                }
                if self.status == RunStatus::WaitingForHuman
                    && !self.tickets.values().any(|t| t.open)
                {
                    self.status = RunStatus::Running;
                }
            }
            RunEvent::RunCompleted { output } => {
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
            // Episodes (seed 004): folded below.
            RunEvent::EpisodeStarted { .. }
            | RunEvent::EpisodeActionDenied { .. }
            | RunEvent::EpisodeFinished { .. }
            | RunEvent::EpisodeStopped { .. }
            | RunEvent::DomainWritten { .. }
            | RunEvent::DomainWriteDenied { .. } => {}
            // Side effects (seed 004 §1, §8)
            RunEvent::EffectRequested(_)
            | RunEvent::EffectDeduplicated(_)
            | RunEvent::EffectAdmitted(_)
            | RunEvent::EffectRefused(_)
            | RunEvent::EffectReady(_)
            | RunEvent::EffectStarted(_)
            | RunEvent::EffectVerifierCalled(_)
            | RunEvent::EffectSettled(_)
            | RunEvent::EffectDryRun(_)
            | RunEvent::EffectKillSwitchChecked(_)
            | RunEvent::EffectApplied(_)
            | RunEvent::EffectFailed(_)
            | RunEvent::EffectVerified(_)
            | RunEvent::EffectRecovered(_) => self.apply_effect(event),
        }
        super::episode::fold(self, event);
    }

    fn answer(&mut self, request_id: &str, failed: bool, at_ms: i64) {
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
        let mut calls: Vec<&Call> = self
            .pending
            .iter()
            .filter_map(|id| self.calls.get(id))
            .collect();
        calls.sort_by_key(|c| call_number(&c.request.request_id));
        calls.into_iter()
    }

    /// Open tickets, by id.
    pub fn open_tickets(&self) -> impl Iterator<Item = (&String, &Ticket)> {
        self.tickets.iter().filter(|(_, t)| t.open)
    }
}

/// The counter at the end of `{run}/call-N`, for ordering.
fn call_number(request_id: &str) -> u64 {
    request_id
        .rsplit("call-")
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}
