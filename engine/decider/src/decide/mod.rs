//! `decide`: a recorded input and the current state in, the batch of events it causes out.
//!
//! This file routes each input and holds what every concern shares (the batch being
//! built, request and ticket numbering, scheduling a call, blocking and ending a run);
//! each concern's decisions are in a file of their own: `response.rs` (an agent's answer
//! and its actions), `handoff.rs` (the interaction matrix and scoping: a handoff to a
//! forbidden agent is denied there), `fan_out.rs` (parallel branches and their join),
//! `classification.rs` (risk classifiers), `intent.rs` (the classifying agent's intent
//! classification held to its routing), `failure.rs` (the failure ladder),
//! `circuit.rs` (circuit breakers read across runs, version 6), `ticket.rs` (human
//! decisions), `episode.rs` (spawns, domain writes, results, stop
//! conditions) and `effect.rs` (side effects). What each event does to the state is
//! folded in the file of the same name under `state/`.
//!
//! The transition table (state before, recorded input, state after, the events recorded,
//! the file deciding it and the tests covering it) is code, checked by its tests:
//! `transitions.rs` at the crate root.

use docket_protocol::{CallId, EffectId, EpisodeId, RunId, TicketId};
use std::sync::Arc;

use serde_json::{Value, json};

mod capability;
// The handoff context every request carries.
mod context;
// Circuit breakers across runs.
mod circuit;
mod classification;
// Side effects.
mod effect;
// Side effects on a browser lane: sandbox first, drift evidence, manual review.
mod browser;
pub use effect::EffectInput;
// What a domain keeps of a write: content rules and redaction.
mod domain;
// Episodes: spawn, domain writes, results, stop conditions.
mod episode;
mod failure;
mod fan_out;
mod handoff;
// Intent classification: the classifying agent's answers held to their classification.
mod intent;
pub use intent::INTENT_POLICY_VIOLATION;
// Cancelling a run.
mod cancel;
// Human overrides of a block.
mod overrides;
// Pausing a run and letting it go on.
mod pause;
mod reassign;
mod response;
mod ticket;
use ticket::HumanWords;
// Outside events: received, kept or refused, waited for and delivered.
mod signal;
pub use signal::MAX_SIGNAL_KEY_BYTES;
// Durable timers: `wait`, and the timer's firing.
mod timer;
// Governed tools: `call_tool`, decided before it runs.
mod tool;
pub use tool::ToolInput;

use docket_policies::ConflictResolution;
use docket_policies::{
    CapabilityRequest, DecisionKind, InputKind, PolicyBundle, PolicyDecision, RuleStep,
    StepOutcome, Verdict,
};

use super::state::{RunState, RunStatus};
use crate::events::{
    AgentCallFailed, AgentResponded, CircuitReading, Classifies, DECIDER_VERSION, Delivery,
    HumanDecided, HumanOverrode, HumanWroteDomain, RiskVerdict, RunCancelled, RunEvent, RunPause,
    RunRequested, TicketSubject, UnsupportedDecider, seed_error,
};
use docket_protocol::{
    Action, AgentRequest, AgentResponse, Confidence, ContextInput, DecisionInput, ResponseStatus,
};

/// The agent id that stands for the caller of the run (docs/governance.md#the-external-agent).
pub const EXTERNAL: &str = "external";

/// Agents whose outputs are not another agent's work: the caller, a person, the tools.
const NOT_AGENTS: [&str; 4] = [EXTERNAL, "human", "tools", "events"];

/// A recorded input, handed to [`decide`].
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Start a run.
    Start(Arc<RunRequested>),
    /// An agent answered.
    RecordResponse(AgentResponded),
    /// A call failed without a usable answer.
    RecordFailure(AgentCallFailed),
    /// A human decided a ticket.
    RecordHumanDecision(HumanDecided),
    /// A person overrode the rule that blocked the run.
    RecordOverride(HumanOverrode),
    /// A person cancelled the run (`cancel.rs`).
    Cancel(RunCancelled),
    /// A person wrote a domain (`domain.rs`).
    WriteDomain(HumanWroteDomain),
    /// The target agent's circuit breaker, as the runtime read it before calling.
    RecordCircuit(CircuitReading),
    // Side effects
    /// The runtime's answer from an effect executor or the kill switches.
    RecordEffect(effect::EffectInput),
    // Governed tools
    /// The runtime's record of a tool call's outcome.
    RecordTool(tool::ToolInput),
    // Durable timers
    /// A timer fired, at the time the runtime recorded.
    FireTimer(crate::events::timer::TimerFired),
    // Pause
    /// A person paused the run (`pause.rs`).
    Pause(RunPause),
    /// A person let the paused run go on (`pause.rs`).
    Unpause(RunPause),
    // Outside events
    /// An outside event sent to the run (`signal.rs`).
    ReceiveSignal(crate::events::signal::SignalReceived),
}

impl Command {
    /// The event that records this input (the first event of its batch).
    #[must_use]
    pub fn to_event(&self) -> RunEvent {
        match self.clone() {
            Self::Start(run) => RunEvent::RunRequested(run),
            Self::RecordResponse(input) => RunEvent::AgentResponded(input),
            Self::RecordFailure(input) => RunEvent::AgentCallFailed(input),
            Self::RecordHumanDecision(input) => RunEvent::HumanDecided(input),
            Self::RecordOverride(input) => RunEvent::HumanOverrode(input),
            Self::Cancel(input) => RunEvent::RunCancelled(input),
            Self::WriteDomain(input) => RunEvent::HumanWroteDomain(input),
            Self::RecordCircuit(reading) => RunEvent::CircuitChecked(reading),
            // Side effects
            Self::RecordEffect(input) => input.to_event(),
            Self::RecordTool(input) => input.to_event(),
            Self::FireTimer(fired) => RunEvent::TimerFired(fired),
            Self::Pause(input) => RunEvent::RunPaused(input),
            Self::Unpause(input) => RunEvent::RunUnpaused(input),
            Self::ReceiveSignal(input) => RunEvent::SignalReceived(input),
        }
    }

    /// The command a recorded input event stands for (`None` for decisions).
    #[must_use]
    pub fn from_event(event: &RunEvent) -> Option<Self> {
        Some(match event.clone() {
            RunEvent::RunRequested(run) => Self::Start(run),
            RunEvent::AgentResponded(input) => Self::RecordResponse(input),
            RunEvent::AgentCallFailed(input) => Self::RecordFailure(input),
            RunEvent::HumanDecided(input) => Self::RecordHumanDecision(input),
            RunEvent::HumanOverrode(input) => Self::RecordOverride(input),
            RunEvent::RunCancelled(input) => Self::Cancel(input),
            RunEvent::HumanWroteDomain(input) => Self::WriteDomain(input),
            RunEvent::CircuitChecked(reading) => Self::RecordCircuit(reading),
            RunEvent::TimerFired(fired) => Self::FireTimer(fired),
            RunEvent::RunPaused(input) => Self::Pause(input),
            RunEvent::RunUnpaused(input) => Self::Unpause(input),
            RunEvent::SignalReceived(input) => Self::ReceiveSignal(input),
            // Governed tools
            RunEvent::ToolReturned(_) | RunEvent::ToolFailed(_) => {
                return tool::ToolInput::from_event(event).map(Self::RecordTool);
            }
            // Side effects
            other => return effect::EffectInput::from_event(&other).map(Self::RecordEffect),
        })
    }

    fn at_ms(&self) -> i64 {
        match self {
            Self::Start(run) => run.at_ms,
            Self::RecordResponse(input) => input.at_ms,
            Self::RecordFailure(input) => input.at_ms,
            Self::RecordHumanDecision(input) => input.at_ms,
            Self::RecordOverride(input) => input.at_ms,
            Self::Cancel(input) => input.at_ms,
            Self::WriteDomain(input) => input.at_ms,
            Self::RecordCircuit(reading) => reading.at_ms,
            // Side effects
            Self::RecordEffect(input) => input.at_ms(),
            Self::RecordTool(input) => input.at_ms(),
            Self::FireTimer(fired) => fired.at_ms,
            Self::Pause(input) | Self::Unpause(input) => input.at_ms,
            Self::ReceiveSignal(input) => input.at_ms,
        }
    }
}

/// Why a command cannot be applied to a run. Nothing is recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// `Start` on a run that already has a `run.requested`.
    #[error("run {0} was already started")]
    AlreadyStarted(RunId),
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
    /// A human decision that names nobody.
    #[error("ticket {0}: a decision must name who decides")]
    Anonymous(String),
    /// A choice on a ticket that offers none.
    #[error("ticket {ticket} offers no choices: {asks}")]
    NoChoiceOffered {
        /// The ticket.
        ticket: String,
        /// What the ticket asks instead.
        asks: TicketAsks,
    },
    /// An answer, or an approval or denial, that does not fit the ticket: an answer to a
    /// ticket that asks no question, or a denial that carries an answer.
    #[error("ticket {ticket}: {why}")]
    DoesNotAnswer {
        /// The ticket.
        ticket: String,
        /// Why not.
        why: String,
    },
    /// A person's input (an override, a cancellation) that names nobody.
    #[error("{0} must name who {verb}", verb = .0.verb())]
    Unnamed(PersonAct),
    /// A person's input (an override, a cancellation) that does not say why.
    #[error("{0} must say why")]
    Unexplained(PersonAct),
    /// An override of a run that is not blocked.
    #[error("the run is {0}, not blocked: there is nothing to override")]
    NotBlocked(&'static str),
    /// An override the run or the bundle's authority order does not allow: the reason
    /// names the rule, the role and who may.
    #[error("override refused: {0}")]
    OverrideRefused(String),
    /// A person's domain write the bundle does not allow: not a person's role, a domain
    /// outside its write scopes, or content the domain's rules refuse (the reason names
    /// the rule and the place).
    #[error("domain write refused: {0}")]
    DomainWriteRefused(String),
    /// A circuit reading for another agent than the call's target.
    #[error("call {request_id} is to `{target}`; a reading of `{agent}`'s circuit does not apply")]
    CircuitOfAnotherAgent {
        /// The call.
        request_id: String,
        /// Its target.
        target: String,
        /// The agent whose circuit was read.
        agent: String,
    },
    /// The run was recorded by a decider version this build does not decide as.
    #[error(transparent)]
    Version(#[from] UnsupportedDecider),
    /// The bundle handed to `decide` is not the run's recorded bundle.
    #[error("the policy bundle's hash {actual} is not the run's recorded bundle {expected}")]
    BundleMismatch {
        /// Recorded.
        expected: String,
        /// Given.
        actual: String,
    },
    // Side effects
    /// No effect with this id was requested in this run.
    #[error("no effect {0} was requested in this run")]
    UnknownEffect(String),
    /// The effect is not at the step this input answers.
    #[error("effect {effect_id} is {phase}; a {input} input does not apply to it")]
    EffectNotAwaiting {
        /// The effect.
        effect_id: EffectId,
        /// The input's event kind.
        input: &'static str,
        /// Where the effect stands.
        phase: &'static str,
    },
    // Governed tools
    /// No tool call with this id was decided in this run.
    #[error("no tool call {0} was made in this run")]
    UnknownToolCall(String),
    /// The tool call already has its outcome (or was refused).
    #[error("tool call {tool_call_id} is {phase}; no outcome can be recorded for it")]
    ToolCallSettled {
        /// The call.
        tool_call_id: String,
        /// Where it stands.
        phase: &'static str,
    },
    // Durable timers
    /// No timer with this id was set in this run.
    #[error("no timer {0} was set in this run")]
    UnknownTimer(String),
    /// The timer already fired.
    #[error("timer {timer_id} already fired (at {at_ms} ms)")]
    TimerFired {
        /// The timer.
        timer_id: String,
        /// When it fired.
        at_ms: i64,
    },
    // Pause
    /// A pause of a run already paused.
    #[error("the run is already paused (by {by}: {reason})")]
    AlreadyPaused {
        /// Who paused it.
        by: String,
        /// Why.
        reason: String,
    },
    /// An unpause of a run that is not paused.
    #[error("the run is not paused: there is nothing to unpause")]
    NotPaused,
    /// A pause of a run recorded by a decider version before pauses.
    #[error(
        "runs recorded by decider version {0} cannot be paused (pauses came with version {PAUSES})",
        PAUSES = crate::events::PAUSES
    )]
    PauseUnknownTo(u32),
    /// A firing of a timer cleared because the event it was the timeout for came first.
    #[error("timer {0} was the timeout of a wait whose event came first: it does not fire")]
    TimerCleared(String),
    // Outside events
    /// An event sent again with a key that already recorded one: recorded once, so this
    /// is not an error to its sender.
    #[error("this event was already recorded, as {signal_id}")]
    SignalRecorded {
        /// The event the key recorded.
        signal_id: docket_protocol::SignalId,
    },
    /// An event for a run recorded by a decider version before outside events.
    #[error(
        "runs recorded by decider version {0} cannot receive outside events (they came with version {SIGNALS})",
        SIGNALS = crate::events::SIGNALS
    )]
    SignalsUnknownTo(u32),
    /// An event without a name.
    #[error("an event must have a name")]
    SignalUnnamed,
    /// An event that does not say who sent it.
    #[error("event `{0}` must name who sends it")]
    SignalUnsigned(String),
    /// An idempotency key that is empty or too long.
    #[error("an event's idempotency key must be 1 to {MAX_SIGNAL_KEY_BYTES} bytes")]
    SignalKey,
    /// A firing recorded before the timer was due.
    #[error("timer {timer_id} is due at {due_at_ms} ms; it cannot fire at {at_ms} ms")]
    TimerNotDue {
        /// The timer.
        timer_id: String,
        /// When it is due.
        due_at_ms: i64,
        /// The firing's time.
        at_ms: i64,
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

/// What a ticket asks for when a choice was given that it does not offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TicketAsks {
    /// An open question: an answer in words.
    #[error("the agent asked an open question: answer it in words")]
    Words,
    /// Approval: approve or deny.
    #[error("it asks for approval: approve or deny it")]
    Approval,
}

/// A person's input that must name who makes it and say why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PersonAct {
    /// An override of the rule that blocked a run.
    #[error("an override")]
    Override,
    /// A cancellation of a run.
    #[error("a cancellation")]
    Cancellation,
    /// A pause of a run.
    #[error("a pause")]
    Pause,
    /// The end of a run's pause.
    #[error("an unpause")]
    Unpause,
    /// A person's write of a domain.
    #[error("a domain write")]
    DomainWrite,
}

impl PersonAct {
    fn verb(self) -> &'static str {
        match self {
            Self::Override => "overrides",
            Self::Cancellation => "cancels",
            Self::Pause => "pauses",
            Self::Unpause => "unpauses",
            Self::DomainWrite => "writes",
        }
    }
}

/// Whether `command` applies to `state` under `bundle`.
fn check(state: &RunState, bundle: &PolicyBundle, command: &Command) -> Result<(), Rejection> {
    let recorded_hash = match (command, &state.run) {
        (Command::Start(run), None) => &run.bundle_hash,
        (Command::Start(_), Some(run)) => {
            return Err(Rejection::AlreadyStarted(run.run_id.clone()));
        }
        (_, None) => return Err(Rejection::NotStarted),
        (_, Some(run)) => &run.bundle_hash,
    };
    UnsupportedDecider::check(state.request().map_or_else(
        || match command {
            Command::Start(run) => run.decider_version,
            _ => DECIDER_VERSION,
        },
        |run| run.decider_version,
    ))?;
    // Compared without formatting the hash: this runs for every input replayed.
    if !bundle.hash().is_hex(recorded_hash) {
        return Err(Rejection::BundleMismatch {
            expected: recorded_hash.clone(),
            actual: bundle.hash().to_hex(),
        });
    }
    // A blocked run takes one more input: an override by a person who outranks its rule.
    if let Command::RecordOverride(HumanOverrode {
        by,
        role,
        rule_id,
        reason,
        ..
    }) = command
    {
        return overrides::check_override(state, bundle, by, role, rule_id, reason);
    }
    // An event sent again with its key was recorded, whatever the run has done since.
    if let Command::ReceiveSignal(input) = command {
        signal::check_duplicate(state, input)?;
    }
    if state.status.is_final() {
        return Err(Rejection::Finished(state.status.as_str()));
    }
    match command {
        Command::Cancel(RunCancelled { by, reason, .. }) => cancel::check_cancel(by, reason)?,
        Command::RecordResponse(AgentResponded { request_id, .. })
        | Command::RecordFailure(AgentCallFailed { request_id, .. }) => {
            let call = state.calls.get(request_id).ok_or_else(|| {
                // An answered call nothing refers to is left to the log (state/live.rs).
                if state.answered_and_dropped(request_id) {
                    Rejection::AlreadyAnswered(request_id.to_string())
                } else {
                    Rejection::UnknownCall(request_id.to_string())
                }
            })?;
            if call.answered {
                return Err(Rejection::AlreadyAnswered(request_id.to_string()));
            }
        }
        Command::RecordHumanDecision(HumanDecided {
            ticket,
            approved,
            by,
            choice,
            answer,
            ..
        }) => {
            let t = state
                .tickets
                .get(ticket)
                .ok_or_else(|| Rejection::UnknownTicket(ticket.to_string()))?;
            if !t.open {
                return Err(Rejection::TicketClosed(ticket.to_string()));
            }
            let offered = ticket::options_offered(&t.subject);
            if let (Some(count), Some(choice)) = (offered, choice)
                && (*choice == 0 || *choice as usize > count)
            {
                return Err(Rejection::InvalidChoice {
                    ticket: ticket.to_string(),
                    choice: *choice,
                    count,
                });
            }
            ticket::check_words(ticket, &t.subject, *approved, by, *choice, answer.as_ref())?;
        }
        Command::Start(_) | Command::RecordOverride(_) => {}
        Command::RecordCircuit(reading) => circuit::check_reading(state, reading)?,
        // Side effects
        Command::RecordEffect(input) => effect::check_input(state, input)?,
        Command::RecordTool(input) => tool::check_input(state, input)?,
        Command::FireTimer(fired) => timer::check_fired(state, fired)?,
        Command::Pause(input) => pause::check_pause(state, input)?,
        Command::Unpause(input) => pause::check_unpause(state, input)?,
        Command::ReceiveSignal(input) => signal::check_signal(state, input)?,
        Command::WriteDomain(input) => domain::check_person_write(state, bundle, input)?,
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
        episode: EpisodeId::root(),
        held: None,
        acting: None,
        human_authorized: false,
    };
    // The input's own event opens the batch. A run request or a response goes into it
    // behind an `Arc`, shared with the state and with the decisions below, not copied.
    match command {
        Command::Start(run) => {
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
        Command::RecordResponse(input) => {
            let (request_id, response) = (input.request_id.clone(), input.response.clone());
            batch.push(RunEvent::AgentResponded(input));
            batch.enter(&request_id);
            if batch.episode_admits(&request_id) {
                batch.on_response(&request_id, &response);
            }
        }
        command @ Command::RecordOverride(_) => batch.on_override(command),
        command @ Command::Cancel(_) => batch.on_cancel(command),
        command @ (Command::Pause(_) | Command::Unpause(_)) => batch.on_pause(command),
        command => batch.on_other_input(command),
    }
    batch.settle();
    #[cfg(test)]
    crate::transitions::observe(&batch.events);
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
    episode: EpisodeId,
    /// What the block about to be recorded stops, for an override to continue (decider
    /// version 6; `overrides.rs`).
    held: Option<Box<crate::events::overrides::Overridable>>,
    /// The call whose actions are being carried out, and its actions after the current one.
    acting: Option<(CallId, Arc<[Action]>, usize)>,
    /// A person's override authorises the next spawn of a forbidden child type.
    human_authorized: bool,
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
            Command::RecordFailure(AgentCallFailed {
                request_id,
                code,
                message,
                ..
            }) => {
                if self.episode_admits(&request_id) {
                    self.on_failure(&request_id, &code, &message);
                }
            }
            Command::RecordHumanDecision(HumanDecided {
                ticket,
                approved,
                by,
                reason,
                choice,
                answer,
                ..
            }) => self.on_human(
                &ticket,
                &HumanWords {
                    approved,
                    by: &by,
                    reason: &reason,
                    choice,
                    answer: answer.as_deref(),
                },
            ),
            Command::RecordCircuit(reading) => {
                if self.episode_admits(&reading.request_id) {
                    self.on_circuit_checked(&reading);
                }
            }
            // Side effects
            Command::RecordEffect(input) => self.on_effect_input(&input),
            Command::RecordTool(input) => self.on_tool_input(&input),
            Command::FireTimer(fired) => self.on_timer_fired(&fired),
            Command::ReceiveSignal(received) => self.on_signal(&received),
            Command::WriteDomain(input) => self.on_person_write(&input),
            Command::Start(_)
            | Command::RecordResponse(_)
            | Command::RecordOverride(_)
            | Command::Cancel(_)
            | Command::Pause(_)
            | Command::Unpause(_) => {}
        }
    }

    /// Sets the episode new requests belong to: that of the call being answered.
    fn enter(&mut self, request_id: &CallId) {
        self.episode = self.episode_of_call(request_id);
    }

    /// Sets the episode new requests belong to, from the call the command is about.
    fn enter_for(&mut self, command: &Command) {
        let call = match command {
            Command::RecordResponse(AgentResponded { request_id, .. })
            | Command::RecordFailure(AgentCallFailed { request_id, .. }) => {
                Some(request_id.clone())
            }
            Command::RecordCircuit(reading) => Some(reading.request_id.clone()),
            Command::RecordHumanDecision(HumanDecided { ticket, .. }) => {
                self.state.tickets.get(ticket).map(|t| match &t.subject {
                    TicketSubject::Retry { request_id }
                    | TicketSubject::Proceed { request_id, .. }
                    | TicketSubject::Question { request_id, .. }
                    | TicketSubject::EpisodeReview { request_id, .. }
                    | TicketSubject::Tool { request_id, .. } => request_id.clone(),
                    TicketSubject::Conflict { origin, .. } => origin.clone(),
                    // Side effects: the effect's own episode, below.
                    TicketSubject::Effect { .. } => CallId::default(),
                })
            }
            Command::Start(_)
            | Command::RecordEffect(_)
            | Command::RecordTool(_)
            | Command::FireTimer(_)
            | Command::ReceiveSignal(_)
            | Command::WriteDomain(_)
            | Command::RecordOverride(_)
            | Command::Cancel(_)
            | Command::Pause(_)
            | Command::Unpause(_) => None,
        };
        // Side effects: what an effect causes belongs to the episode that asked for it.
        let effect = match command {
            Command::RecordEffect(input) => Some(input.effect_id().to_owned()),
            Command::RecordHumanDecision(HumanDecided { ticket, .. }) => self
                .state
                .tickets
                .get(ticket)
                .and_then(|t| match &t.subject {
                    TicketSubject::Effect { effect_id, .. } => Some(effect_id.clone()),
                    _ => None,
                }),
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

    fn run_id(&self) -> RunId {
        self.state.run_id().cloned().unwrap_or_default()
    }

    /// Completed, blocked or failed. (A run waiting for a human is not stopped: what an
    /// approval or a fan-out branch causes is still decided, and its calls wait with it.)
    fn stopped(&self) -> bool {
        self.state.status.is_final()
    }

    /// Blocks the run; a step held just before (`hold`) is recorded as what an override
    /// continues.
    fn block(&mut self, rule_id: &str, reason: String, error: Value) {
        let overridable = self.held.take();
        self.end_run(
            RunEvent::RunBlocked {
                rule_id: rule_id.to_owned(),
                reason,
                error,
                overridable,
            },
            None,
        );
    }

    /// Ends the run with `event` (`run.completed`, `run.blocked` or `run.failed`), first
    /// recording the end of every episode still open, so the tree is closed in the log.
    /// `by`: the agent whose output completed the run.
    /// Completes the run with `output`, reporting the conflicts settled on the way
    /// without their outputs' content (decider version 14; none are noted before).
    fn complete_run(&mut self, output: Value, by: Option<&str>) {
        let conflicts = self
            .state
            .settled_conflicts
            .iter()
            .map(docket_protocol::SettledConflict::without_payloads)
            .collect();
        self.end_run(RunEvent::RunCompleted { output, conflicts }, by);
    }

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
            && !self.state.tools_in_flight()
            && !self.state.timers_pending()
            && self.state.signal_waits.is_empty()
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

    fn next_request_id(&self) -> CallId {
        CallId::from(format!(
            "{}/call-{}",
            self.run_id(),
            self.state.calls_scheduled + 1
        ))
    }

    fn next_ticket(&self) -> TicketId {
        TicketId::from(format!("ticket-{}", self.state.tickets_opened + 1))
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
        if self.state.decider_version() >= crate::events::PRIORITIES {
            request.priority = protocol_priority(self.bundle.spec().defaults.priority);
        }
        if let Some(r) = &self.state.run {
            request.context.insert(
                "workflow".to_owned(),
                Value::String(r.workflow.name.clone()),
            );
        }
        request
    }

    /// Calls the agent of `asked` again (same capability, same inputs, a new request id)
    /// with one more decision input: a capability's answer, a human's answer.
    fn call_again(&mut self, asked: &CallId, input: DecisionInput) {
        let Some(call) = self.state.calls.get(asked) else {
            return;
        };
        let (reply_to, branch_of) = (call.reply_to.clone(), call.branch_of.clone());
        let Some(mut request) = self.request_again(asked) else {
            return;
        };
        request.decision_inputs.push(input);
        self.schedule_again(asked, request, reply_to, None, branch_of);
    }

    /// A copy of `asked`'s request with a new request id and no decision inputs: those
    /// the caller pushes are the ones it adds to `asked`'s ([`Self::schedule_again`]).
    fn request_again(&self, asked: &CallId) -> Option<AgentRequest> {
        let mut request = self.state.request_again(asked)?;
        request.request_id = self.next_request_id();
        Some(request)
    }

    /// [`Self::schedule`] for a call made again from `again_of`'s request ([`Self::request_again`]),
    /// whose `decision_inputs` are only the ones it adds to `again_of`'s: from decider
    /// version 9 its event records `again_of` and those ([`LINEAR_CALLS_AGAIN`]); before,
    /// the whole list.
    fn schedule_again(
        &mut self,
        again_of: &CallId,
        request: AgentRequest,
        reply_to: Option<CallId>,
        classifies: Option<Classifies>,
        branch_of: Option<String>,
    ) {
        self.schedule_from(Some(again_of), request, reply_to, classifies, branch_of);
    }

    /// Schedules a call, unless the target has no executor. The target's circuit is read
    /// by the runtime across runs, recorded and decided in `circuit.rs`.
    fn schedule(
        &mut self,
        request: AgentRequest,
        reply_to: Option<CallId>,
        classifies: Option<Classifies>,
        branch_of: Option<String>,
    ) {
        self.schedule_from(None, request, reply_to, classifies, branch_of);
    }

    fn schedule_from(
        &mut self,
        again_of: Option<&CallId>,
        mut request: AgentRequest,
        reply_to: Option<CallId>,
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
        self.attach_domain_reads(&mut request);
        self.attach_prior_outputs(&mut request);
        self.attach_handoff_context(&mut request);
        let again_of = again_of.filter(|asked| self.record_added_inputs(asked, &mut request));
        self.attach_intent_contract(&mut request, again_of);
        self.push(RunEvent::AgentCallScheduled {
            request: Arc::new(request),
            reply_to,
            classifies,
            branch_of,
            again_of: again_of.cloned(),
        });
    }

    /// Whether a call made again from `asked` records only the decision inputs it adds
    /// (`again_of`, docs/events.md); when `asked` is not a call of this run, its
    /// decision inputs are put back before them and the request is recorded whole.
    fn record_added_inputs(&self, asked: &CallId, request: &mut AgentRequest) -> bool {
        if self.state.calls.contains_key(asked) {
            return true;
        }
        let mut whole = self.state.decision_inputs_of(asked);
        whole.append(&mut request.decision_inputs);
        request.decision_inputs = whole;
        false
    }
}

/// The bundle's word for a priority as the protocol's.
fn protocol_priority(p: docket_policies::Priority) -> docket_protocol::Priority {
    match p {
        docket_policies::Priority::High => docket_protocol::Priority::High,
        docket_policies::Priority::Normal => docket_protocol::Priority::Normal,
        docket_policies::Priority::Low => docket_protocol::Priority::Low,
    }
}

/// The protocol's word for a priority as the bundle's.
fn policy_priority(p: docket_protocol::Priority) -> docket_policies::Priority {
    match p {
        docket_protocol::Priority::High => docket_policies::Priority::High,
        docket_protocol::Priority::Normal => docket_policies::Priority::Normal,
        docket_protocol::Priority::Low => docket_policies::Priority::Low,
    }
}
