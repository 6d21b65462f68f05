//! docket's pure core: a governed multi-agent run as a state machine.
//!
//! This crate holds everything a run's decisions depend on, and nothing that does I/O, so
//! that audit replay links it without an async runtime, a network stack or the store:
//! - the wire protocols' documents and ids are `docket_protocol`'s (re-exported here);
//!   this crate parses and validates what agents send and accepts what effect and tool
//!   executors answer;
//! - workflows as data ([`WorkflowSpec`], parsed from a workflow file's text);
//!
//! - [`decide`]`(&RunState, &PolicyBundle, Command) -> Result<Vec<RunEvent>, Rejection>`:
//!   a recorded input (run requested, agent responded, agent call failed, human decided)
//!   and the current state in; out comes a batch whose first event records the input and
//!   whose other events are the decisions it caused (handoffs allowed with their scoping
//!   audit or denied with their error object, calls scheduled with their exact
//!   request, escalation steps, tickets, completion, block, failure).
//! - [`RunState::apply`] / [`RunState::evolve`]: fold one event.
//! - [`replay_check`]: re-decide every batch of a log and compare its decisions (the
//!   words for people in them, [`WORDING`], may differ).
//!
//! Invariants: no tokio, clock, store, I/O, randomness or hash-map iteration order in here
//! (BTreeMap and Vec only). Time enters only inside recorded inputs (`at_ms`); request ids
//! (`{run}/call-N`) and ticket ids (`ticket-N`) come from counters in the state; the run id
//! is chosen by the runtime and recorded in `run.requested`. The transition table, with
//! the tests covering each row, is code: `transitions.rs`.

// A library reports every failure as an error value naming what and where; it never
// aborts its caller. (Tests are exempt: see clippy.toml.)
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The layers, bottom up; each imports only the ones below it.
//
// The wire documents and ids are `docket_protocol`'s; `protocol/` is the engine's side of
// them (parsing, validation, accepting executors' answers, `[tools.NAME]` sections).
mod protocol;
// The vocabulary of a run's log: every event and payload type, the workflow spec recorded
// in `run.requested`, and the payload encodings (content stored once, values committed
// apart).
mod events;
// The run's state: one file per concern folding its events; snapshots; the run's history.
mod state;
// `decide`: a recorded input and the state in, the batch of events it causes out.
mod decide;
// Audit: every batch of a log decided again and compared.
mod replay;

/// Random runs for property tests (feature `testing`; the decider's own tests use it too).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transitions;

// Ids and wire documents (`docket_protocol`), and the engine's checks of what it receives.
pub use docket_protocol::{
    Action, AgentId, AgentRequest, AgentResponse, BudgetRequest, CallId, Confidence,
    ConflictingOutput, ContextInput, DEFAULT_TIMEOUT_MS, DecisionInput, DriftEvidence,
    DryRunReport, EffectAnswer, EffectCall, EffectCallError, EffectErrorBody, EffectId, EffectOp,
    EffectReceipt, EffectRequest, EffectTarget, EpisodeId, EpisodeResult, EpisodeStatus,
    IntentClassification, IntentTarget, InvalidRunId, Priority, ResponseStatus, RunId,
    SettledConflict, Settlement, SignalId, TaskRestrictions, TicketId, TimerId, ToolAnswer,
    ToolCall, ToolCallId, ToolErrorBody, ToolRequest, UNSTABLE_SELECTORS, Usage, Verification,
    agent_protocol_schema, agent_protocol_schema_pretty, effect_protocol_schema,
    effect_protocol_schema_pretty,
};
pub use protocol::{
    DEFAULT_TOOL_TIMEOUT_MS, MAX_ACTIONS, MAX_LIST_ENTRIES, MalformedResponse, ToolAnswerError,
    ToolSpec, ValidateRequest, ValidateResponse, ValidationError, ValidationProblem,
    accept_effect_answer, accept_tool_answer, parse_response, wait_due_ms, wait_duration_ms,
};

// Events: the log's vocabulary and the decider version that recorded it.
pub use events::effect::{
    DryRunOutcome, EFFECT_RESULT_TYPE, EFFECTS_SOURCE, EffectAdmitted, EffectApplied,
    EffectDeduplicated, EffectDryRun, EffectFailed, EffectKillSwitchChecked, EffectReady,
    EffectRefused, EffectRequested, EffectSandboxRan, EffectSandboxStarted, EffectSettled,
    EffectStarted, EffectTicketStep, EffectVerification, EffectVerifierCalled, ReadyBecause,
    SandboxOutcome, SettledBy, SettledStatus, VERIFY_EFFECT_CAPABILITY,
};
pub use events::overrides::{HeldStep, Overridable};
pub use events::signal::{
    EVENT_TIMED_OUT_TYPE, EVENT_TYPE, EVENTS_SOURCE, SignalAwaited, SignalDelivered, SignalKept,
    SignalReceived, SignalRefused, SignalTimedOut,
};
pub use events::timer::{TIMER_FIRED_TYPE, TIMERS_SOURCE, TimerFired, TimerSet};
pub use events::tool::{
    TOOL_INTERRUPTED, TOOL_RESULT_TYPE, TOOLS_SOURCE, ToolCallScheduled, ToolDenied, ToolFailed,
    ToolReturned,
};
pub use events::workflow::{
    AgentSpec, DEFAULT_BUDGET_TOKENS, DEFAULT_BUDGET_TOOL_CALLS, DEFAULT_BUDGET_WALL_TIME_MS,
    DEFAULT_EFFECT_TIMEOUT_MS, EffectSpec, ExecutorSpec, MAX_AGENT_PROCESSES, WorkflowBudget,
    WorkflowError, WorkflowEvidence, WorkflowSpec, is_loopback_host,
};
pub use events::{
    AgentCallFailed, AgentResponded, Batches, BranchGap, CIRCUIT_RATE, CircuitReading,
    CircuitWindow, Classifies, DECIDER_VERSION, DecodeError, Delivery, ForkedFrom, HumanDecided,
    HumanOverrode, HumanWroteDomain, KIND_VERSION, OLDEST_DECIDER_VERSION, OutputOverride,
    RiskVerdict, RunCancelled, RunEvent, RunPause, RunRequested, Scheduled, Session, SessionTurn,
    TicketSubject, UnsupportedDecider, WORDING, batches, is_wording, same_decisions,
};
// Payload encodings 2 (content stored once) and 3 (values committed apart).
pub use events::commit::{
    COMMITTED_PAYLOAD, CommittedEvent, CommittedPayload, CommittedSlot, Disclosure,
    DisclosureDigest, DisclosureLookup, OpenedDisclosure, OpenedPayload, SALT_BYTES, SHREDDED,
    digest_text, disclosed_pointer, disclosure_digest, open_disclosure, parse_digest,
    pointer_touches,
};
pub use events::content::{
    CONTENT_POSITIONS, ContentRef, PLAIN_PAYLOAD, REFERENCE_FROM_BYTES, REFERENCED_PAYLOAD,
    ReferencedContent, ReferencedEvent, ReferencedPayload, content_pointers,
};

// State: the fold, its snapshots and the run's history.
pub use state::episode::{
    DomainVersion, Episode, EpisodePhase, EpisodeTree, ROOT_EPISODE, condition_name,
};
pub use state::{
    CIRCUIT_OPEN_CODE, Call, EffectPhase, EffectRecord, EffectWork, HandoffRecord, NextStep,
    RunHistory, RunState, RunStatus, SNAPSHOT_EVERY, SNAPSHOT_FORMAT, SignalPhase, SignalRecord,
    SnapshotError, Ticket, TicketDecision, TimerRecord, ToolCallRecord, ToolPhase, snapshot_due,
    snapshot_interval,
};

// Decide: the recorded inputs and the decision function.
pub use decide::{
    Command, EXTERNAL, EffectInput, INTENT_POLICY_VIOLATION, MAX_SIGNAL_KEY_BYTES, PersonAct,
    Rejection, TicketAsks, ToolInput, decide, decide_in_place,
};

// Replay: audit of a recorded log.
pub use replay::{ReplayMismatch, Reworded, recorded_bundle, replay_check};
