//! `decide`: a recorded input and the current state in, the batch of events it causes out.
//!
//! Transitions (status before → command → status after), all in [`decide`] and the
//! `Batch` methods below it:
//!
//! | from | command | to | covered by |
//! |---|---|---|---|
//! | NotStarted | Start | Running (entry call scheduled) or Blocked (entry handoff denied) | `start_schedules_the_entry_call`, `forbidden_handoffs_block_with_the_seed_reason` |
//! | Running | RecordResponse, handoff allowed | Running (next call scheduled, context inputs attached) | `a_pipeline_runs_to_completion`, `context_edges_arrive_as_context_inputs` |
//! | Running | RecordResponse, handoff denied / contract mismatch | Blocked | `forbidden_handoffs_block_with_the_seed_reason`, `contract_mismatch_stops_the_flow` |
//! | Running | RecordResponse, provenance rule: every item cites an id the producer delivered | Running (next call scheduled, decisions recorded on `handoff.allowed`) | `provenance_allows_citations_of_delivered_ids` |
//! | Running | RecordResponse, provenance rule: an unproduced id, or the producer never delivered | Blocked (`handoff.denied` naming the rule, the item and the id) | `provenance_denies_an_unproduced_id_naming_the_item`, `provenance_denies_when_the_producer_never_delivered` |
//! | Running | RecordResponse, finish (exit) | Completed | `a_pipeline_runs_to_completion` |
//! | Running | RecordResponse, escalate | WaitingForHuman | `escalate_action_waits_and_approval_proceeds` |
//! | Running | RecordResponse, denied tool call | retry path | `denied_tool_call_is_a_boundary_violation` |
//! | Running | RecordResponse, capability locked | Blocked | `guardrail_3_lock_blocks_capability_requests` |
//! | Running | RecordResponse of a classified agent | Running (classifier call scheduled) | `risk_classifier_verdicts` |
//! | Running | classifier SAFE / REVIEW_REQUIRED / DANGEROUS | actions proceed / WaitingForHuman / Blocked | `risk_classifier_verdicts` |
//! | Running | RecordFailure | Running (retry) / WaitingForHuman (escalate) / Blocked (hard stop) | `failures_go_retry_escalate_block` |
//! | Running | RecordResponse with handoffs to several agents | Running (parallel branches) | `fan_out_conflicts_prefer_higher_confidence_and_archive_the_loser` |
//! | Running | last branch answers: outputs agree / conflict by confidence / conflict for a human | Running (joined) / Running (loser archived) / WaitingForHuman | `fan_out_with_agreeing_outputs_delivers_once`, `fan_out_conflicts_prefer_higher_confidence_and_archive_the_loser`, `fan_out_conflicts_go_to_a_human_who_picks_the_output` |
//! | WaitingForHuman | RecordHumanDecision approve | Running (retry or held actions) | `failures_go_retry_escalate_block`, `escalate_action_waits_and_approval_proceeds` |
//! | WaitingForHuman | RecordHumanDecision deny | Blocked | `human_denial_blocks` |
//! | WaitingForHuman (2 tickets) | approve one | WaitingForHuman, its effect decided (calls wait) | `approving_one_of_two_open_tickets_is_not_lost` |
//! | Running | RecordFailure, retry with the circuit open | Blocked | `an_open_circuit_blocks_the_next_call_to_a_failing_agent` |
//! | Completed / Blocked / Failed | any | rejected | `final_runs_reject_commands` |
//! | any | unknown call / ticket, bundle of another hash | rejected | `rejections_are_typed` |
//! | Running | RecordResponse, `spawn` allowed | Running (`episode.started`, the child's call scheduled in `ep-N`) | `an_allowed_spawn_starts_a_child_whose_result_returns_to_the_parent` |
//! | Running | RecordResponse, `spawn` refused (depth, children, total, child type, 50%, 70%) | Running (spawner stopped, failed result to its parent), Blocked (root stopped) or Running (agent told, condition not listed) | `a_spawn_beyond_max_depth_stops_the_spawner_depth_exceeded`, `max_children_and_max_total_episodes_are_enforced`, `forbidden_and_unlisted_child_types_are_refused`, `a_child_gets_at_most_half_of_the_parents_remaining_budget`, `past_70_percent_a_spawn_is_refused_finalize_or_escalate`, `a_refusal_whose_condition_is_not_listed_tells_the_agent_instead_of_stopping` |
//! | Running | RecordResponse, usage exhausts a budget | Running (episode stopped, `budget_exhausted`) or Blocked (root) | `an_exhausted_budget_stops_the_episode_and_its_actions_are_not_carried_out` |
//! | Running | RecordResponse, `finish_episode` ok / failed in a child | Running (result to the parent's agent; parent may stop: `no_new_information`, `failure_repeats`) | `two_children_without_delta_stop_the_parent_no_new_information`, `the_same_error_class_n_times_stops_failure_repeats` |
//! | Running | RecordResponse, root `finish_episode` ok (verified when asked) | Completed (`success_achieved`) | `success_needs_a_passing_verifier_when_verification_is_needed` |
//! | Running | RecordResponse, `finish_episode` needs_review | WaitingForHuman (`episode_review` ticket); approve → as ok, deny → Blocked | `needs_review_opens_a_handoff_ticket_approval_completes_denial_blocks` |
//! | Running | RecordResponse, `write_domain` | Running (`domain.written` vN+1) or episode stopped (`domain.write_denied`) | `only_the_owner_writes_a_domain_each_write_a_new_version_read_by_others` |
//! | Running | RecordFailure in a child episode, ladder's hard stop | Running (child stopped, `failure_repeats`; failed result to the parent) | `a_child_agent_failing_past_the_ladder_stops_its_episode_not_the_run` |
//! | Running | any input that ends the run (completed / blocked / failed) with episodes still open | Completed / Blocked / Failed, each open episode's end recorded first (root finished ok + `success_achieved` / `policy_blocks` / finished failed `run_failed`) | `a_run_completed_by_a_plain_handoff_records_the_root_episodes_success`, `a_blocked_or_failed_run_records_the_end_of_every_open_episode`, `random_agents_never_exceed_a_limit` |
//! | Running | RecordResponse, a spawn / write / effect refused for the `failure_repeat_limit`-th time (condition not listed, so the agent was told before) | Running (episode stopped `failure_repeats`, failed result to its parent) or Failed (root) | `repeated_refusals_stop_the_episode_failure_repeats`, `repeated_effect_refusals_stop_the_episode_failure_repeats` |
//! | Running | RecordResponse of a call whose episode stopped | Running (recorded, not charged, not acted on) | `answers_from_a_stopped_episode_are_recorded_but_not_acted_on` |

use std::sync::Arc;

use serde_json::{Value, json};

// Episodes: spawn, domain writes, results, stop conditions.
mod episode;

use docket_policies::model::ConflictResolution;
use docket_policies::{
    CapabilityRequest, DecisionKind, InputKind, PolicyBundle, PolicyDecision, RuleStep,
    StepOutcome, Verdict,
};

use super::event::{
    Classifies, Delivery, RiskVerdict, RunEvent, RunRequested, TicketSubject, seed_error,
};
// Side effects: a child module, so it extends `Batch` in place.
pub(super) mod effect;
use super::state::{RunState, RunStatus};
use crate::protocol::{
    Action, AgentRequest, AgentResponse, Confidence, ContextInput, DecisionInput, ResponseStatus,
};

/// The agent id that stands for the caller of the run (seed 000's External).
pub const EXTERNAL: &str = "external";

/// A recorded input, handed to [`decide`].
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Start a run.
    Start(RunRequested),
    /// An agent answered.
    RecordResponse {
        /// The call.
        request_id: String,
        /// The answer.
        response: AgentResponse,
        /// When, ms since the Unix epoch.
        at_ms: i64,
    },
    /// A call failed without a usable answer.
    RecordFailure {
        /// The call.
        request_id: String,
        /// The executor's error code.
        code: String,
        /// What went wrong.
        message: String,
        /// When, ms since the Unix epoch.
        at_ms: i64,
    },
    /// A human decided a ticket.
    RecordHumanDecision {
        /// The ticket.
        ticket: String,
        /// Approve (true) or deny.
        approved: bool,
        /// Who.
        by: String,
        /// Why.
        reason: String,
        /// For a conflict ticket: the chosen output (from 1).
        choice: Option<u32>,
        /// When, ms since the Unix epoch.
        at_ms: i64,
    },
    // Side effects (seed 004 §1, §8)
    /// The runtime's answer from an effect executor or the kill switches.
    RecordEffect(effect::EffectInput),
}

impl Command {
    /// The event that records this input (the first event of its batch).
    #[must_use]
    pub fn to_event(&self) -> RunEvent {
        match self.clone() {
            Self::Start(run) => RunEvent::RunRequested(Arc::new(run)),
            Self::RecordResponse {
                request_id,
                response,
                at_ms,
            } => RunEvent::AgentResponded {
                request_id,
                response: Arc::new(response),
                at_ms,
            },
            Self::RecordFailure {
                request_id,
                code,
                message,
                at_ms,
            } => RunEvent::AgentCallFailed {
                request_id,
                code,
                message,
                at_ms,
            },
            Self::RecordHumanDecision {
                ticket,
                approved,
                by,
                reason,
                choice,
                at_ms,
            } => RunEvent::HumanDecided {
                ticket,
                approved,
                by,
                reason,
                choice,
                at_ms,
            },
            // Side effects (seed 004 §1, §8)
            Self::RecordEffect(input) => input.to_event(),
        }
    }

    /// The command a recorded input event stands for (`None` for decisions).
    #[must_use]
    pub fn from_event(event: &RunEvent) -> Option<Self> {
        Some(match event.clone() {
            RunEvent::RunRequested(run) => Self::Start(Arc::unwrap_or_clone(run)),
            RunEvent::AgentResponded {
                request_id,
                response,
                at_ms,
            } => Self::RecordResponse {
                request_id,
                response: Arc::unwrap_or_clone(response),
                at_ms,
            },
            RunEvent::AgentCallFailed {
                request_id,
                code,
                message,
                at_ms,
            } => Self::RecordFailure {
                request_id,
                code,
                message,
                at_ms,
            },
            RunEvent::HumanDecided {
                ticket,
                approved,
                by,
                reason,
                choice,
                at_ms,
            } => Self::RecordHumanDecision {
                ticket,
                approved,
                by,
                reason,
                choice,
                at_ms,
            },
            // Side effects (seed 004 §1, §8)
            other => return effect::EffectInput::from_event(&other).map(Self::RecordEffect),
        })
    }

    fn at_ms(&self) -> i64 {
        match self {
            Self::Start(run) => run.at_ms,
            Self::RecordResponse { at_ms, .. }
            | Self::RecordFailure { at_ms, .. }
            | Self::RecordHumanDecision { at_ms, .. } => *at_ms,
            // Side effects (seed 004 §1, §8)
            Self::RecordEffect(input) => input.at_ms(),
        }
    }
}

/// Why a command cannot be applied to a run. Nothing is recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// `Start` on a run that already has a `run.requested`.
    #[error("run {0} was already started")]
    AlreadyStarted(String),
    /// Anything but `Start` before the run exists.
    #[error("the run has not been started")]
    NotStarted,
    /// The run is completed, blocked or failed.
    #[error("the run is {0}; nothing more can happen in it")]
    Finished(&'static str),
    /// No call with this request id was scheduled.
    #[error("no call {0} was scheduled in this run")]
    UnknownCall(String),
    /// The call's response or failure is already recorded.
    #[error("call {0} is already answered")]
    AlreadyAnswered(String),
    /// No such ticket.
    #[error("no ticket {0} in this run")]
    UnknownTicket(String),
    /// The ticket was already decided.
    #[error("ticket {0} was already decided")]
    TicketClosed(String),
    /// A conflict ticket's choice is not one of its outputs.
    #[error("ticket {ticket} offers outputs 1 to {count}; {choice} is not one of them")]
    InvalidChoice {
        /// The ticket.
        ticket: String,
        /// The choice given.
        choice: u32,
        /// How many outputs it offers.
        count: usize,
    },
    /// The bundle handed to `decide` is not the run's recorded bundle.
    #[error("the policy bundle's hash {actual} is not the run's recorded bundle {expected}")]
    BundleMismatch {
        /// Recorded.
        expected: String,
        /// Given.
        actual: String,
    },
    // Side effects (seed 004 §1, §8)
    /// No effect with this id was requested in this run.
    #[error("no effect {0} was requested in this run")]
    UnknownEffect(String),
    /// The effect is not at the step this input answers.
    #[error("effect {effect_id} is {phase}; a {input} input does not apply to it")]
    EffectNotAwaiting {
        /// The effect.
        effect_id: String,
        /// The input's event kind.
        input: &'static str,
        /// Where the effect stands.
        phase: &'static str,
    },
}

/// Decides what a recorded input causes. The returned batch starts with the input's own
/// event; the rest are the decisions. Pure: same state, bundle and command, same batch.
///
/// # Errors
/// [`Rejection`] when the command does not apply to this state.
pub fn decide(
    state: &RunState,
    bundle: &PolicyBundle,
    command: Command,
) -> Result<Vec<RunEvent>, Rejection> {
    check(state, bundle, &command)?;
    Ok(decide_batch(state.clone(), bundle, command).0)
}

/// [`decide`] without copying the state: on success `state` is left as it is after the
/// returned batch (the runtime's hot path, which would otherwise clone the whole run per
/// batch and then fold the batch a second time). A rejection leaves `state` untouched.
///
/// # Errors
/// [`Rejection`] when the command does not apply to this state.
pub fn decide_in_place(
    state: &mut RunState,
    bundle: &PolicyBundle,
    command: Command,
) -> Result<Vec<RunEvent>, Rejection> {
    check(state, bundle, &command)?;
    let (events, after) = decide_batch(std::mem::take(state), bundle, command);
    *state = after;
    Ok(events)
}

/// Whether `command` applies to `state` under `bundle`.
fn check(state: &RunState, bundle: &PolicyBundle, command: &Command) -> Result<(), Rejection> {
    let hash = bundle.hash().to_hex();
    let recorded_hash = match (command, &state.run) {
        (Command::Start(run), None) => run.bundle_hash.clone(),
        (Command::Start(_), Some(run)) => {
            return Err(Rejection::AlreadyStarted(run.run_id.clone()));
        }
        (_, None) => return Err(Rejection::NotStarted),
        (_, Some(run)) => run.bundle_hash.clone(),
    };
    if recorded_hash != hash {
        return Err(Rejection::BundleMismatch {
            expected: recorded_hash,
            actual: hash,
        });
    }
    if state.status.is_final() {
        return Err(Rejection::Finished(state.status.as_str()));
    }
    match command {
        Command::RecordResponse { request_id, .. } | Command::RecordFailure { request_id, .. } => {
            let call = state
                .calls
                .get(request_id)
                .ok_or_else(|| Rejection::UnknownCall(request_id.clone()))?;
            if call.answered {
                return Err(Rejection::AlreadyAnswered(request_id.clone()));
            }
        }
        Command::RecordHumanDecision { ticket, choice, .. } => {
            let t = state
                .tickets
                .get(ticket)
                .ok_or_else(|| Rejection::UnknownTicket(ticket.clone()))?;
            if !t.open {
                return Err(Rejection::TicketClosed(ticket.clone()));
            }
            if let (TicketSubject::Conflict { conflicts, .. }, Some(choice)) = (&t.subject, choice)
            {
                let count = conflicts.first().map_or(0, Vec::len);
                if *choice == 0 || *choice as usize > count {
                    return Err(Rejection::InvalidChoice {
                        ticket: ticket.clone(),
                        choice: *choice,
                        count,
                    });
                }
            }
        }
        Command::Start(_) => {}
        // Side effects (seed 004 §1, §8)
        Command::RecordEffect(input) => effect::check_input(state, input)?,
    }
    Ok(())
}

/// The batch `command` causes from `state`, and the state after it.
fn decide_batch(
    state: RunState,
    bundle: &PolicyBundle,
    command: Command,
) -> (Vec<RunEvent>, RunState) {
    let mut batch = Batch {
        state,
        bundle,
        now_ms: command.at_ms(),
        events: Vec::new(),
        outbox: Vec::new(),
        confidence: None,
        episode: super::episode::ROOT_EPISODE.to_owned(),
    };
    // The input's own event opens the batch. A run request or a response goes into it
    // behind an `Arc`, shared with the state and with the decisions below, not copied.
    match command {
        Command::Start(run) => {
            let run = Arc::new(run);
            batch.push(RunEvent::RunRequested(run.clone()));
            let input_type = run.workflow.input_type.clone().unwrap_or_else(|| {
                bundle
                    .decide_handoff(EXTERNAL, &run.workflow.entry, InputKind::Decision)
                    .output_type
                    .map_or_else(|| "input".to_owned(), |t| t.to_string())
            });
            batch.handoff(EXTERNAL, &run.workflow.entry, &input_type, &run.input, None);
            let deliveries = std::mem::take(&mut batch.outbox);
            if !batch.stopped() {
                batch.dispatch(None, deliveries);
            }
        }
        Command::RecordResponse {
            request_id,
            response,
            at_ms,
        } => {
            let response = Arc::new(response);
            batch.push(RunEvent::AgentResponded {
                request_id: request_id.clone(),
                response: response.clone(),
                at_ms,
            });
            batch.enter(&request_id);
            if batch.episode_admits(&request_id) {
                batch.on_response(&request_id, &response);
            }
        }
        command => batch.on_other_input(command),
    }
    batch.settle();
    (batch.events, batch.state)
}

/// The batch being built, with the state as it will be after it (so counters advance).
struct Batch<'a> {
    state: RunState,
    bundle: &'a PolicyBundle,
    now_ms: i64,
    events: Vec<RunEvent>,
    /// Handoffs governed in this batch, not yet dispatched.
    outbox: Vec<Delivery>,
    /// Confidence of the response being processed.
    confidence: Option<Confidence>,
    /// The episode new requests belong to: that of the call being answered.
    episode: String,
}

impl Batch<'_> {
    fn push(&mut self, event: RunEvent) {
        self.state.apply(&event);
        self.events.push(event);
    }

    /// A failure, a human decision or an effect input: its event opens the batch, then
    /// what it causes. (A start and a response are decided in [`decide_batch`].)
    fn on_other_input(&mut self, command: Command) {
        self.push(command.to_event());
        self.enter_for(&command);
        match command {
            Command::RecordFailure {
                request_id,
                code,
                message,
                ..
            } => {
                if self.episode_admits(&request_id) {
                    self.on_failure(&request_id, &code, &message);
                }
            }
            Command::RecordHumanDecision {
                ticket,
                approved,
                by,
                reason,
                choice,
                ..
            } => self.on_human(&ticket, approved, &by, &reason, choice),
            // Side effects (seed 004 §1, §8)
            Command::RecordEffect(input) => self.on_effect_input(&input),
            Command::Start(_) | Command::RecordResponse { .. } => {}
        }
    }

    /// Sets the episode new requests belong to: that of the call being answered.
    fn enter(&mut self, request_id: &str) {
        self.episode = self.episode_of_call(request_id);
    }

    /// Sets the episode new requests belong to, from the call the command is about.
    fn enter_for(&mut self, command: &Command) {
        let call = match command {
            Command::RecordResponse { request_id, .. }
            | Command::RecordFailure { request_id, .. } => Some(request_id.clone()),
            Command::RecordHumanDecision { ticket, .. } => {
                self.state.tickets.get(ticket).map(|t| match &t.subject {
                    TicketSubject::Retry { request_id }
                    | TicketSubject::Proceed { request_id, .. }
                    | TicketSubject::EpisodeReview { request_id, .. } => request_id.clone(),
                    TicketSubject::Conflict { origin, .. } => origin.clone(),
                    // Side effects (seed 004 §1, §8): the effect's own episode, below.
                    TicketSubject::Effect { .. } => String::new(),
                })
            }
            Command::Start(_) | Command::RecordEffect(_) => None,
        };
        // Side effects (seed 004 §1, §8): what an effect causes belongs to the episode
        // that asked for it.
        let effect = match command {
            Command::RecordEffect(input) => Some(input.effect_id().to_owned()),
            Command::RecordHumanDecision { ticket, .. } => {
                self.state
                    .tickets
                    .get(ticket)
                    .and_then(|t| match &t.subject {
                        TicketSubject::Effect { effect_id, .. } => Some(effect_id.clone()),
                        _ => None,
                    })
            }
            _ => None,
        };
        if let Some(rec) = effect.and_then(|id| self.state.effects.get(&id)) {
            self.episode = rec.requested.episode_id.clone();
            return;
        }
        if let Some(call) = call {
            self.enter(&call);
        }
    }

    fn run_id(&self) -> String {
        self.state.run_id().unwrap_or_default().to_owned()
    }

    /// Completed, blocked or failed. (A run waiting for a human is not stopped: what an
    /// approval or a fan-out branch causes is still decided, and its calls wait with it.)
    fn stopped(&self) -> bool {
        self.state.status.is_final()
    }

    fn block(&mut self, rule_id: &str, reason: String, error: Value) {
        self.end_run(
            RunEvent::RunBlocked {
                rule_id: rule_id.to_owned(),
                reason,
                error,
            },
            None,
        );
    }

    /// Ends the run with `event` (`run.completed`, `run.blocked` or `run.failed`), first
    /// recording the end of every episode still open, so the tree is closed in the log.
    /// `by`: the agent whose output completed the run.
    fn end_run(&mut self, event: RunEvent, by: Option<&str>) {
        self.close_open_episodes(&event, by);
        self.push(event);
    }

    /// A run with nothing scheduled and nothing waiting cannot go on.
    fn settle(&mut self) {
        if self.state.status == RunStatus::Running
            && self.state.pending.is_empty()
            && self.state.open_tickets().next().is_none()
            && !self.state.effects_in_flight()
        {
            self.end_run(
                RunEvent::RunFailed {
                    reason: "no call is scheduled and no human decision is awaited: the last \
                             agent ended without a handoff or a finish"
                        .to_owned(),
                },
                None,
            );
        }
    }

    fn next_request_id(&self) -> String {
        format!("{}/call-{}", self.run_id(), self.state.calls_scheduled + 1)
    }

    fn next_ticket(&self) -> String {
        format!("ticket-{}", self.state.tickets_opened + 1)
    }

    fn timeout_for(&self, agent: &str) -> u64 {
        self.state
            .run
            .as_ref()
            .and_then(|r| r.workflow.agents.get(agent))
            .and_then(|a| a.timeout_ms)
            .unwrap_or(self.bundle.spec().defaults.timeout_ms)
    }

    fn new_request(&self, from: &str, to: &str, capability: &str) -> AgentRequest {
        let run = self.run_id();
        let mut request = AgentRequest::new(self.next_request_id(), from, to, capability)
            .in_run(run.clone(), self.episode.clone(), run)
            .with_timeout_ms(self.timeout_for(to));
        if let Some(r) = &self.state.run {
            request.context.insert(
                "workflow".to_owned(),
                Value::String(r.workflow.name.clone()),
            );
        }
        request
    }

    /// Schedules a call, unless the target has no executor or its circuit is open.
    fn schedule(
        &mut self,
        mut request: AgentRequest,
        reply_to: Option<String>,
        classifies: Option<Classifies>,
        branch_of: Option<String>,
    ) {
        let target = request.target_agent.clone();
        let known = self
            .state
            .run
            .as_ref()
            .is_some_and(|r| r.workflow.agents.contains_key(&target));
        if !known {
            self.end_run(
                RunEvent::RunFailed {
                    reason: format!("the workflow names no executor for agent `{target}`"),
                },
                None,
            );
            return;
        }
        if let Some(health) = self.state.health.get(&target).copied() {
            if health.consecutive_failures > 0 {
                let since = u64::try_from(self.now_ms - health.last_failure_ms).unwrap_or(0);
                let d = self
                    .bundle
                    .decide_circuit(&target, health.consecutive_failures, since);
                if !d.is_allowed() {
                    let reason = format!("circuit open for {target}: {}", d.reason);
                    let rule = d.rule_id.to_string();
                    let error = seed_error(
                        &request.request_id,
                        &target,
                        "circuit_open",
                        &reason,
                        json!({ "ruleId": rule }),
                        request.attempt.saturating_sub(1),
                    );
                    self.push(RunEvent::PolicyDecided {
                        subject: request.request_id.clone(),
                        decision: d,
                    });
                    self.block(&rule, reason, error);
                    return;
                }
            }
        }
        self.attach_domain_reads(&mut request);
        self.push(RunEvent::AgentCallScheduled {
            request: Arc::new(request),
            reply_to,
            classifies,
            branch_of,
        });
    }

    fn deny_handoff(
        &mut self,
        from: &str,
        to: &str,
        output_type: &str,
        decision: PolicyDecision,
        error_type: &str,
        origin: Option<&AgentRequest>,
    ) {
        let request_id = origin.map_or_else(|| self.run_id(), |r| r.request_id.clone());
        let retry_count = origin.map_or(0, |r| r.attempt.saturating_sub(1));
        let reason = decision.reason.to_string();
        let rule = decision.rule_id.to_string();
        let error = seed_error(
            &request_id,
            from,
            error_type,
            &reason,
            json!({ "from": from, "to": to, "outputType": output_type, "ruleId": rule }),
            retry_count,
        );
        self.push(RunEvent::HandoffDenied {
            from: from.to_owned(),
            to: to.to_owned(),
            output_type: output_type.to_owned(),
            decision,
            error: error.clone(),
        });
        self.block(&rule, format!("{from} → {to} denied: {reason}"), error);
    }

    /// A governed handoff: matrix, data contract, provenance rules, scoping, context edges, then the call
    /// (or the run's completion for a handoff to `external`). Returns false when the flow
    /// stopped.
    fn handoff(
        &mut self,
        from: &str,
        to: &str,
        output_type: &str,
        payload: &Value,
        origin: Option<&AgentRequest>,
    ) -> bool {
        let bundle = self.bundle;
        let matrix = bundle.decide_handoff(from, to, InputKind::Decision);
        if !matrix.decision.is_allowed() {
            self.deny_handoff(
                from,
                to,
                output_type,
                matrix.decision,
                "policy_violation",
                origin,
            );
            return false;
        }
        if let Some(declared) = matrix.output_type.as_deref() {
            if declared != output_type {
                let rule: std::sync::Arc<str> = format!("output_types.{declared}").into();
                let decision = PolicyDecision {
                    kind: DecisionKind::DataContract,
                    verdict: Verdict::Deny,
                    rule_id: rule.clone(),
                    reason: format!(
                        "{from} → {to} carries {declared}, not {output_type}: the flow stops"
                    )
                    .into(),
                    bundle_hash: bundle.hash(),
                    chain: vec![RuleStep::new(
                        rule,
                        StepOutcome::Applied,
                        "output type mismatch",
                    )],
                };
                self.deny_handoff(from, to, output_type, decision, "validation_error", origin);
                return false;
            }
        }
        let contract = bundle.check_output(from, to, InputKind::Decision, payload);
        if !contract.is_allowed() {
            self.deny_handoff(from, to, output_type, contract, "validation_error", origin);
            return false;
        }
        let mut provenance = Vec::new();
        for rule in bundle.provenance_rules(from, to) {
            let produced = self
                .state
                .delivered_output(&rule.produced_by.agent, &rule.produced_by.output_type)
                .map(|output| rule.produced_ids(output));
            let d = bundle.decide_provenance(rule, payload, produced.as_ref());
            if !d.is_allowed() {
                self.deny_handoff(from, to, output_type, d, "validation_error", origin);
                return false;
            }
            provenance.push(d);
        }
        let scoped = bundle.scope_context(from, to, InputKind::Decision, payload);
        let delivered = Arc::new(scoped.context);
        self.push(RunEvent::HandoffAllowed {
            from: from.to_owned(),
            to: to.to_owned(),
            output_type: output_type.to_owned(),
            input: InputKind::Decision,
            decision: matrix.decision,
            contract,
            audit: scoped.audit,
            delivered: delivered.clone(),
            provenance,
        });
        if to == EXTERNAL {
            let output = Value::clone(&delivered);
            self.end_run(RunEvent::RunCompleted { output }, Some(from));
            return false;
        }
        self.outbox.push(Delivery {
            from: from.to_owned(),
            to: to.to_owned(),
            output_type: output_type.to_owned(),
            confidence: self.confidence,
            payload: delivered,
        });
        true
    }

    /// Sends governed outputs on: one call per receiving agent, carrying every output for
    /// it as a decision input plus its read-only context inputs. Several receivers make a
    /// parallel fan-out whose branches are joined before anything goes further.
    fn dispatch(&mut self, origin: Option<&str>, deliveries: Vec<Delivery>) {
        let mut targets: Vec<(String, Vec<Delivery>)> = Vec::new();
        for d in deliveries {
            match targets.iter_mut().find(|(to, _)| *to == d.to) {
                Some((_, list)) => list.push(d),
                None => targets.push((d.to.clone(), vec![d])),
            }
        }
        let branch_of =
            (targets.len() > 1).then(|| origin.map_or_else(|| self.run_id(), str::to_owned));
        let priority = origin
            .and_then(|o| self.state.calls.get(o))
            .map(|c| c.request.priority);
        for (to, list) in targets {
            if self.stopped() {
                return;
            }
            let Some(first) = list.first() else { continue };
            let mut request = self.new_request(&first.from, &to, &first.output_type);
            request.decision_inputs = list
                .iter()
                .map(|d| DecisionInput {
                    source_agent: d.from.clone(),
                    output_type: d.output_type.clone(),
                    payload: Value::clone(&d.payload),
                })
                .collect();
            if let Some(priority) = priority {
                request.priority = priority;
            }
            request.context_inputs = self.context_inputs(&to);
            self.schedule(request, None, None, branch_of.clone());
        }
    }

    /// After a response's actions: hold a branch's outputs until its fan-out's last
    /// branch answers, then join; otherwise dispatch.
    fn flush(&mut self, request_id: &str) {
        let deliveries = std::mem::take(&mut self.outbox);
        if self.stopped() {
            return;
        }
        let branch = self
            .state
            .calls
            .get(request_id)
            .and_then(|c| c.branch_of.clone());
        let Some(group) = branch else {
            self.dispatch(Some(request_id), deliveries);
            return;
        };
        if self.branch_pending(&group) {
            for delivery in deliveries {
                self.push(RunEvent::OutputHeld {
                    group: group.clone(),
                    delivery,
                });
            }
            return;
        }
        let mut all = self.state.held.get(&group).cloned().unwrap_or_default();
        all.extend(deliveries);
        if all.is_empty() {
            self.push(RunEvent::FanoutJoined {
                group,
                deliveries: Vec::new(),
            });
            return;
        }
        self.join(&group, request_id, all);
    }

    fn branch_pending(&self, group: &str) -> bool {
        self.state.pending.iter().any(|id| {
            self.state
                .calls
                .get(id)
                .is_some_and(|c| c.branch_of.as_deref() == Some(group))
        }) || self.state.effects_in_flight_in(group) // Side effects (seed 004 §1, §8)
    }

    /// Aggregates a fan-out's outputs: the same output type for the same agent with
    /// different payloads is a conflict, resolved as the bundle says (seed 003: prefer the
    /// higher confidence; seed 002 §3.4: a human decides), the losers archived.
    fn join(&mut self, group: &str, origin: &str, all: Vec<Delivery>) {
        let mut by_key: Vec<((String, String), Vec<Delivery>)> = Vec::new();
        for d in all {
            let key = (d.to.clone(), d.output_type.clone());
            match by_key.iter_mut().find(|(k, _)| *k == key) {
                Some((_, list)) => list.push(d),
                None => by_key.push((key, vec![d])),
            }
        }
        let resolution = self.bundle.spec().multi_agent_handoffs.conflict_resolution;
        let resolution_name = match resolution {
            ConflictResolution::PreferHigherConfidence => "prefer_higher_confidence",
            ConflictResolution::Human => "human",
        };
        let mut proceed = Vec::new();
        let mut for_human = Vec::new();
        for (_, list) in by_key {
            let Some(first) = list.first().cloned() else {
                continue;
            };
            if list.iter().all(|d| d.payload == first.payload) {
                proceed.push(first);
                continue;
            }
            let best = list.iter().filter_map(|d| d.confidence).max();
            let top: Vec<usize> = (0..list.len())
                .filter(|i| best.is_some() && list[*i].confidence == best)
                .collect();
            let winner = (resolution == ConflictResolution::PreferHigherConfidence
                && top.len() == 1)
                .then(|| top[0]);
            self.push(RunEvent::ConflictDetected {
                group: group.to_owned(),
                candidates: list.clone(),
                resolution: resolution_name.to_owned(),
                winner,
            });
            match winner {
                Some(w) => {
                    for (i, d) in list.iter().enumerate() {
                        if i != w {
                            self.push(RunEvent::OutputArchived {
                                group: group.to_owned(),
                                delivery: d.clone(),
                                reason: format!(
                                    "conflict resolved for {}'s output (higher confidence)",
                                    list[w].from
                                ),
                            });
                        }
                    }
                    proceed.push(list[w].clone());
                }
                None => for_human.push(list),
            }
        }
        self.resolve_or_ask(group, origin, for_human, proceed);
    }

    fn resolve_or_ask(
        &mut self,
        group: &str,
        origin: &str,
        conflicts: Vec<Vec<Delivery>>,
        proceed: Vec<Delivery>,
    ) {
        if let Some(first) = conflicts.first() {
            let options: Vec<String> = first
                .iter()
                .enumerate()
                .map(|(i, d)| format!("{}: {}'s", i + 1, d.from))
                .collect();
            let ticket = self.next_ticket();
            self.push(RunEvent::Escalated {
                ticket,
                reason: format!(
                    "conflicting {} outputs for {} ({}); approve with the number of the one to keep",
                    first[0].output_type,
                    first[0].to,
                    options.join(", ")
                ),
                subject: TicketSubject::Conflict {
                    group: group.to_owned(),
                    origin: origin.to_owned(),
                    conflicts,
                    proceed,
                },
            });
            return;
        }
        self.push(RunEvent::FanoutJoined {
            group: group.to_owned(),
            deliveries: proceed.clone(),
        });
        self.dispatch(Some(origin), proceed);
    }

    /// Read-only context inputs for `to` from the bundle's context edges (Guardrail 2),
    /// each scoped and recorded.
    fn context_inputs(&mut self, to: &str) -> Vec<ContextInput> {
        let bundle = self.bundle;
        let mut inputs = Vec::new();
        for edge in bundle
            .spec()
            .interactions
            .context
            .iter()
            .filter(|e| e.to == to)
        {
            let Some(outputs) = self.state.outputs.get(&edge.from).cloned() else {
                continue;
            };
            for (output_type, payload) in outputs {
                if edge.output_type.as_ref().is_some_and(|t| *t != output_type) {
                    continue;
                }
                let scoped = bundle.scope_context(&edge.from, to, InputKind::Context, &payload);
                if !scoped.decision.is_allowed() {
                    self.push(RunEvent::PolicyDecided {
                        subject: format!("context {} → {to}", edge.from),
                        decision: scoped.decision,
                    });
                    continue;
                }
                let matrix = bundle.decide_handoff(&edge.from, to, InputKind::Context);
                let contract = PolicyDecision {
                    kind: DecisionKind::DataContract,
                    ..scoped.decision.clone()
                };
                inputs.push(ContextInput {
                    source_agent: edge.from.clone(),
                    output_type: output_type.clone(),
                    payload: scoped.context.clone(),
                });
                let delivered = Arc::new(scoped.context);
                self.push(RunEvent::HandoffAllowed {
                    from: edge.from.clone(),
                    to: to.to_owned(),
                    output_type,
                    input: InputKind::Context,
                    decision: matrix.decision,
                    contract,
                    audit: scoped.audit,
                    delivered,
                    provenance: Vec::new(),
                });
            }
        }
        inputs
    }

    fn on_response(&mut self, request_id: &str, response: &AgentResponse) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        let agent = call.request.target_agent.clone();
        self.confidence = response.confidence_level;
        let failed = response.status == ResponseStatus::Error
            || (response.status == ResponseStatus::Timeout && response.actions.is_empty());
        if failed {
            let code = response.error_code.clone().unwrap_or_else(|| {
                if response.status == ResponseStatus::Timeout {
                    "AGENT_TIMEOUT".to_owned()
                } else {
                    "AGENT_ERROR".to_owned()
                }
            });
            let message = response
                .error_message
                .clone()
                .unwrap_or_else(|| format!("{agent} answered {}", response.status));
            self.on_failure(request_id, &code, &message);
            return;
        }
        // Boundary validation (seed 002 §4.3): every tool the agent ran, against deny
        // patterns and its allowed tools.
        let mut violation = None;
        let mut review = None;
        for tool in &response.tool_calls {
            let d = self
                .bundle
                .decide_tool_call(&agent, &tool.invocation(), &[]);
            match d.verdict {
                Verdict::Allow => {}
                Verdict::Deny if violation.is_none() => violation = Some(d.reason.to_string()),
                Verdict::NeedsApproval if review.is_none() => review = Some(d.reason.to_string()),
                _ => {}
            }
            self.push(RunEvent::PolicyDecided {
                subject: request_id.to_owned(),
                decision: d,
            });
        }
        // Side effects (seed 004 §1, §8): a verifier's answer settles its effect; a denied
        // or reviewable tool call in it sends the effect to a human instead.
        if let Some(effect_id) = self.state.verifier_calls.get(request_id).cloned() {
            let doubt = violation.or(review);
            let answer = doubt.is_none().then_some(response);
            self.on_verifier_answer(&effect_id, &agent, answer, doubt.as_deref());
            return;
        }
        if let Some(reason) = violation {
            self.on_failure(
                request_id,
                "BOUNDARY_VIOLATION",
                &format!("output rejected: {reason}"),
            );
            return;
        }
        if let Some(reason) = review {
            let ticket = self.next_ticket();
            self.push(RunEvent::Escalated {
                ticket,
                reason: format!("{agent}'s tool call needs review: {reason}"),
                subject: TicketSubject::Proceed {
                    agent,
                    request_id: request_id.to_owned(),
                    actions: response.actions.clone(),
                },
            });
            return;
        }
        if let Some(of) = call.classifies.clone() {
            self.on_verdict(request_id, &agent, &of, response);
            return;
        }
        if !response.actions.is_empty() && !self.classifiers_of(&agent).is_empty() {
            self.classify(request_id, 0);
            return;
        }
        self.process_actions(&agent, request_id, &response.actions);
    }

    fn classifiers_of(&self, agent: &str) -> Vec<String> {
        self.state
            .run
            .as_ref()
            .and_then(|r| r.workflow.agents.get(agent))
            .map(|a| a.classifiers.clone())
            .unwrap_or_default()
    }

    /// Sends a response to the agent's `index`-th risk classifier.
    fn classify(&mut self, request_id: &str, index: usize) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        let agent = call.request.target_agent.clone();
        let Some(classifier) = self.classifiers_of(&agent).get(index).cloned() else {
            return;
        };
        let shown = serde_json::to_value(&call.response).unwrap_or(Value::Null);
        let request = self
            .new_request(&agent, &classifier, "risk_classification")
            .with_decision_input(&agent, "agent_response", shown);
        self.schedule(
            request,
            None,
            Some(Classifies {
                request_id: request_id.to_owned(),
                index,
            }),
            None,
        );
    }

    /// A classifier answered: SAFE passes to the next classifier or lets the actions
    /// proceed, REVIEW_REQUIRED waits for a human, DANGEROUS blocks (seed 002 §4.2).
    fn on_verdict(
        &mut self,
        classifier_call: &str,
        classifier: &str,
        of: &Classifies,
        response: &AgentResponse,
    ) {
        let output = response.actions.iter().find_map(|a| match a {
            Action::Finish { output } => Some(output.clone()),
            _ => None,
        });
        let verdict = output
            .as_ref()
            .and_then(|o| o.get("verdict"))
            .and_then(|v| serde_json::from_value::<RiskVerdict>(v.clone()).ok());
        let Some(verdict) = verdict else {
            self.on_failure(
                classifier_call,
                "CLASSIFIER_INVALID_VERDICT",
                "a risk classifier must finish with {\"verdict\": \"SAFE\" | \"REVIEW_REQUIRED\" | \"DANGEROUS\"}",
            );
            return;
        };
        let reason = output
            .as_ref()
            .and_then(|o| o.get("reason"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        self.push(RunEvent::RiskClassified {
            request_id: of.request_id.clone(),
            classifier: classifier.to_owned(),
            verdict,
            reason: reason.clone(),
        });
        let Some(classified) = self.state.calls.get(&of.request_id).cloned() else {
            return;
        };
        let agent = classified.request.target_agent.clone();
        let actions = classified
            .response
            .map(|r| r.actions.clone())
            .unwrap_or_default();
        match verdict {
            RiskVerdict::Safe => {
                if of.index + 1 < self.classifiers_of(&agent).len() {
                    self.classify(&of.request_id, of.index + 1);
                } else {
                    self.process_actions(&agent, &of.request_id, &actions);
                }
            }
            RiskVerdict::ReviewRequired => {
                let ticket = self.next_ticket();
                self.push(RunEvent::Escalated {
                    ticket,
                    reason: format!(
                        "{classifier} asks a human to review {agent}'s output: {reason}"
                    ),
                    subject: TicketSubject::Proceed {
                        agent,
                        request_id: of.request_id.clone(),
                        actions,
                    },
                });
            }
            RiskVerdict::Dangerous => {
                let rule = format!("risk_classifier.{classifier}");
                let message =
                    format!("{classifier} classified {agent}'s output DANGEROUS: {reason}");
                let error = seed_error(
                    &of.request_id,
                    &agent,
                    "dangerous_output",
                    &message,
                    json!({ "classifier": classifier, "ruleId": rule }),
                    classified.request.attempt.saturating_sub(1),
                );
                self.block(&rule, message, error);
            }
        }
    }

    fn process_actions(&mut self, agent: &str, request_id: &str, actions: &[Action]) {
        self.run_actions(agent, request_id, actions);
        self.flush(request_id);
    }

    fn run_actions(&mut self, agent: &str, request_id: &str, actions: &[Action]) {
        let Some(origin) = self.state.calls.get(request_id).map(|c| c.request.clone()) else {
            return;
        };
        for (i, action) in actions.iter().enumerate() {
            if self.stopped() {
                return;
            }
            match action {
                Action::Handoff {
                    to,
                    output_type,
                    payload,
                } => {
                    if !self.handoff(agent, to, output_type, payload, Some(&*origin)) {
                        return;
                    }
                }
                Action::RequestCapability {
                    target_agent,
                    capability_code,
                    inputs,
                } => {
                    let d = self.bundle.decide_capability(&CapabilityRequest {
                        source_agent: agent.to_owned(),
                        target_agent: target_agent.clone(),
                        capability_code: capability_code.clone(),
                        inputs_json: Value::Object(inputs.clone()),
                        priority: None,
                        timeout_ms: None,
                    });
                    let allowed = d.decision.is_allowed();
                    let rule = d.decision.rule_id.to_string();
                    let mut reason = d.decision.reason.to_string();
                    if !d.input_errors.is_empty() {
                        reason = format!("{reason}: {}", d.input_errors.join("; "));
                    }
                    self.push(RunEvent::PolicyDecided {
                        subject: request_id.to_owned(),
                        decision: d.decision,
                    });
                    if !allowed {
                        let error = seed_error(
                            request_id,
                            agent,
                            "policy_violation",
                            &reason,
                            json!({ "capability": capability_code, "target": target_agent, "ruleId": rule }),
                            origin.attempt.saturating_sub(1),
                        );
                        self.block(
                            &rule,
                            format!("{agent} may not obtain {capability_code} from {target_agent}: {reason}"),
                            error,
                        );
                        return;
                    }
                    let mut request = self
                        .new_request(agent, target_agent, capability_code)
                        .with_decision_input(agent, capability_code, Value::Object(inputs.clone()));
                    request.timeout_ms = d.timeout_ms;
                    self.schedule(request, Some(request_id.to_owned()), None, None);
                }
                Action::Escalate { reason } => {
                    let ticket = self.next_ticket();
                    self.push(RunEvent::Escalated {
                        ticket,
                        reason: format!("{agent} asks a human: {reason}"),
                        subject: TicketSubject::Proceed {
                            agent: agent.to_owned(),
                            request_id: request_id.to_owned(),
                            actions: actions[i + 1..].to_vec(),
                        },
                    });
                    return;
                }
                Action::Finish { output } => {
                    if !self.episode_plain_finish(agent, request_id, output) {
                        self.finish(agent, request_id, output);
                    }
                }
                // Episodes (seed 004)
                Action::Spawn {
                    agent: child,
                    episode_type,
                    goal,
                    budget,
                    inputs,
                } => {
                    let spawn = episode::Spawn {
                        agent: child,
                        episode_type,
                        goal,
                        budget,
                        inputs,
                    };
                    if !self.episode_spawn(agent, request_id, &spawn) {
                        return;
                    }
                }
                Action::WriteDomain { domain, content } => {
                    if !self.episode_write_domain(agent, request_id, domain, content) {
                        return;
                    }
                }
                Action::FinishEpisode { result } => self.episode_finish(agent, request_id, result),
                // Side effects (seed 004 §1, §8)
                Action::RequestEffect { .. } => self.request_effect(agent, request_id, action),
            }
        }
    }

    /// A `finish`: a capability call's answer goes back to the agent that asked; the last
    /// agent's finish passes the exit checkpoint (its handoff to `external`, when the
    /// bundle has that agent) and completes the run.
    fn finish(&mut self, agent: &str, request_id: &str, output: &Value) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        if let Some(asker_id) = &call.reply_to {
            let Some(asker) = self.state.calls.get(asker_id).cloned() else {
                return;
            };
            let mut request = AgentRequest::clone(&asker.request);
            request.request_id = self.next_request_id();
            request
                .decision_inputs
                .push(crate::protocol::DecisionInput {
                    source_agent: agent.to_owned(),
                    output_type: call.request.capability_code.clone(),
                    payload: output.clone(),
                });
            self.schedule(
                request,
                asker.reply_to.clone(),
                None,
                asker.branch_of.clone(),
            );
            return;
        }
        let held = call
            .branch_of
            .as_ref()
            .is_some_and(|g| self.state.held.get(g).is_some_and(|h| !h.is_empty()));
        if !self.state.pending.is_empty()
            || !self.outbox.is_empty()
            || held
            || self.state.effects_in_flight()
        {
            return;
        }
        let has_external = self.bundle.agent_ids().any(|a| a == EXTERNAL);
        if has_external {
            let output_type = self
                .bundle
                .decide_handoff(agent, EXTERNAL, InputKind::Decision)
                .output_type
                .map_or_else(|| "output".to_owned(), |t| t.to_string());
            self.handoff(agent, EXTERNAL, &output_type, output, Some(&*call.request));
        } else {
            self.end_run(
                RunEvent::RunCompleted {
                    output: output.clone(),
                },
                Some(agent),
            );
        }
    }

    /// Retry → escalate → block, as the bundle's escalation ladder says (Guardrail 1).
    fn on_failure(&mut self, request_id: &str, code: &str, message: &str) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        // Side effects (seed 004 §1, §8): a verifier that fails sends the effect to a human.
        if let Some(effect_id) = self.state.verifier_calls.get(request_id).cloned() {
            let failure = format!("{code}: {message}");
            let verifier = call.request.target_agent.clone();
            self.on_verifier_answer(&effect_id, &verifier, None, Some(&failure));
            return;
        }
        let agent = call.request.target_agent.clone();
        let failures = call.request.attempt;
        let esc = self
            .bundle
            .decide_escalation(failures, Some(&code.to_lowercase()));
        let action = esc.action;
        let rule = esc.decision.rule_id.to_string();
        let ladder_reason = esc.decision.reason.to_string();
        self.push(RunEvent::PolicyDecided {
            subject: request_id.to_owned(),
            decision: esc.decision,
        });
        use docket_policies::model::EscalationAction;
        match action {
            None | Some(EscalationAction::Retry) => self.retry(
                request_id,
                json!({ "request_id": request_id, "error_code": code, "error_message": message }),
            ),
            Some(EscalationAction::Escalate) => {
                let ticket = self.next_ticket();
                self.push(RunEvent::Escalated {
                    ticket,
                    reason: format!(
                        "{agent} failed {failures} time(s), last with {code}: {message}; approve to retry, deny to stop"
                    ),
                    subject: TicketSubject::Retry {
                        request_id: request_id.to_owned(),
                    },
                });
            }
            Some(EscalationAction::Block) => {
                let reason = format!("{agent}: {ladder_reason} (last error {code}: {message})");
                if self.episode_hard_stop(request_id, &rule, &reason) {
                    return;
                }
                let error = seed_error(
                    request_id,
                    &agent,
                    "retry_limit_exceeded",
                    &reason,
                    json!({ "code": code, "ruleId": rule }),
                    failures.saturating_sub(1),
                );
                self.block(&rule, reason, error);
            }
        }
    }

    /// Schedules the step again (new request id, attempt + 1) "with more context" (seed 002
    /// §6.2): the request's `context.previous_attempt` says what happened to the last one.
    fn retry(&mut self, request_id: &str, note: Value) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        let mut request = AgentRequest::clone(&call.request);
        request.request_id = self.next_request_id();
        request.attempt += 1;
        request.context.insert("previous_attempt".to_owned(), note);
        self.schedule(request, call.reply_to, call.classifies, call.branch_of);
    }

    fn on_human(
        &mut self,
        ticket: &str,
        approved: bool,
        by: &str,
        reason: &str,
        choice: Option<u32>,
    ) {
        let Some(t) = self.state.tickets.get(ticket).cloned() else {
            return;
        };
        // Side effects (seed 004 §1, §8): approving or denying continues the effect's path.
        if let TicketSubject::Effect { effect_id, step } = &t.subject {
            self.on_effect_ticket(effect_id, *step, approved, by, reason);
            return;
        }
        if !approved {
            self.episode_review_denied(&t.subject, by, reason);
            let message = format!("{by} denied {ticket} ({}): {reason}", t.reason);
            let error = seed_error(
                &self.run_id(),
                "human",
                "human_denied",
                &message,
                json!({ "ticket": ticket, "by": by }),
                0,
            );
            self.block("human", message, error);
            return;
        }
        match t.subject {
            TicketSubject::Retry { request_id } => {
                let note = json!({
                    "request_id": request_id,
                    "escalated": t.reason,
                    "approved_by": by,
                    "approval_reason": reason,
                });
                self.retry(&request_id, note);
            }
            TicketSubject::Proceed {
                agent,
                request_id,
                actions,
            } => {
                self.confidence = self
                    .state
                    .calls
                    .get(&request_id)
                    .and_then(|c| c.response.as_ref())
                    .and_then(|r| r.confidence_level);
                self.process_actions(&agent, &request_id, &actions);
            }
            TicketSubject::Conflict {
                group,
                origin,
                mut conflicts,
                mut proceed,
            } => {
                let list = if conflicts.is_empty() {
                    Vec::new()
                } else {
                    conflicts.remove(0)
                };
                let pick = choice.map_or(0, |c| c.saturating_sub(1) as usize);
                for (i, d) in list.iter().enumerate() {
                    if i == pick {
                        proceed.push(d.clone());
                    } else {
                        self.push(RunEvent::OutputArchived {
                            group: group.clone(),
                            delivery: d.clone(),
                            reason: format!("{by} chose output {} in {ticket}: {reason}", pick + 1),
                        });
                    }
                }
                self.resolve_or_ask(&group, &origin, conflicts, proceed);
            }
            TicketSubject::EpisodeReview {
                episode_id,
                agent,
                request_id,
                result,
                ..
            } => self.episode_review_approved(&episode_id, &agent, &request_id, &result),
            // Side effects (seed 004 §1, §8): decided above (a denial does not block).
            TicketSubject::Effect { .. } => {}
        }
    }
}
