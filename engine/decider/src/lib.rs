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
//! - [`replay_check`]: re-decide every batch of a log and compare.
//!
//! Invariants: no tokio, clock, store, I/O, randomness or hash-map iteration order in here
//! (BTreeMap and Vec only). Time enters only inside recorded inputs (`at_ms`); request ids
//! (`{run}/call-N`) and ticket ids (`ticket-N`) come from counters in the state; the run id
//! is chosen by the runtime and recorded in `run.requested`. The transition table, with
//! the tests covering each row, is code: `transitions.rs`.

// A library reports every failure as an error value naming what and where; it never
// aborts its caller. (Tests are exempt: see clippy.toml.)
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// Payload encoding 2: content recorded once (issue 15 point 6)
mod commit;
mod content;
mod decide;
mod event;
mod protocol;
mod replay;
mod state;
mod workflow;

/// Random runs for property tests (feature `testing`; the decider's own tests use it too).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transitions;

pub use commit::{
    COMMITTED_PAYLOAD, CommittedEvent, CommittedPayload, CommittedSlot, Disclosure,
    DisclosureDigest, DisclosureLookup, OpenedDisclosure, OpenedPayload, SALT_BYTES, SHREDDED,
    committed_positions, digest_text, disclosed_pointer, disclosure_digest, open_disclosure,
    parse_digest, pointer_touches,
};
pub use content::{
    CONTENT_POSITIONS, ContentRef, PLAIN_PAYLOAD, REFERENCE_FROM_BYTES, REFERENCED_PAYLOAD,
    ReferencedContent, ReferencedEvent, ReferencedPayload, content_pointers, content_positions,
};
pub use decide::effect::{
    DryRunOutcome, EFFECT_RESULT_TYPE, EFFECTS_SOURCE, EffectAdmitted, EffectApplied,
    EffectDeduplicated, EffectDryRun, EffectFailed, EffectInput, EffectKillSwitchChecked,
    EffectReady, EffectRefused, EffectRequested, EffectSettled, EffectStarted, EffectTicketStep,
    EffectVerification, EffectVerifierCalled, ReadyBecause, SettledBy, SettledStatus,
    VERIFY_EFFECT_CAPABILITY,
};
pub use decide::overrides::{HeldStep, Overridable};
pub use decide::tool::{
    TOOL_INTERRUPTED, TOOL_RESULT_TYPE, TOOLS_SOURCE, ToolCallScheduled, ToolDenied, ToolFailed,
    ToolInput, ToolReturned,
};
pub use decide::{CircuitReading, Command, EXTERNAL, Rejection, decide, decide_in_place};
pub use docket_protocol::{
    Action, AgentId, AgentRequest, AgentResponse, BudgetRequest, CallId, Confidence, ContextInput,
    DEFAULT_TIMEOUT_MS, DecisionInput, DryRunReport, EffectAnswer, EffectCall, EffectCallError,
    EffectErrorBody, EffectId, EffectOp, EffectReceipt, EffectRequest, EpisodeId, EpisodeResult,
    EpisodeStatus, InvalidRunId, Priority, ResponseStatus, RunId, TaskRestrictions, TicketId,
    ToolAnswer, ToolCall, ToolCallId, ToolErrorBody, ToolRequest, Usage, Verification,
    agent_protocol_schema, agent_protocol_schema_pretty, effect_protocol_schema,
    effect_protocol_schema_pretty,
};
pub use event::{
    BranchGap, Classifies, DECIDER_VERSION, DecodeError, Delivery, ForkedFrom, KIND_VERSION,
    MAX_TIMEOUT_GROWTH, OutputOverride, RiskVerdict, RunEvent, RunRequested, TicketSubject,
    seed_error,
};
pub use protocol::{
    DEFAULT_TOOL_TIMEOUT_MS, MAX_ACTIONS, MAX_LIST_ENTRIES, MalformedResponse, ToolAnswerError,
    ToolSpec, ValidateRequest, ValidateResponse, ValidationError, ValidationProblem,
    accept_effect_answer, accept_tool_answer, parse_response, resolve_tool, tool_invocation,
};
pub use replay::{ReplayMismatch, recorded_bundle, replay_check};
pub use state::episode::{
    DomainVersion, Episode, EpisodePhase, EpisodeTree, ROOT_EPISODE, condition_name,
};
pub use state::{
    AgentHealth, CIRCUIT_OPEN_CODE, Call, EffectPhase, EffectRecord, EffectWork, HandoffRecord,
    NextStep, RunHistory, RunState, RunStatus, SNAPSHOT_EVERY, SNAPSHOT_FORMAT, SnapshotError,
    Ticket, TicketDecision, ToolCallRecord, ToolPhase, snapshot_due, snapshot_interval,
};
pub use workflow::{
    AgentSpec, DEFAULT_BUDGET_TOKENS, DEFAULT_BUDGET_TOOL_CALLS, DEFAULT_BUDGET_WALL_TIME_MS,
    DEFAULT_EFFECT_TIMEOUT_MS, EffectSpec, ExecutorSpec, MAX_AGENT_PROCESSES, WorkflowBudget,
    WorkflowError, WorkflowEvidence, WorkflowSpec,
};
