//! docket's wire protocols: what the engine sends an agent and what the agent answers,
//! what an effect executor is asked and answers, what a tool executor is given and
//! answers, and the typed ids those documents carry.
//!
//! An agent, effect executor or tool executor written in Rust links this crate and nothing
//! else of docket: it depends on serde and serde_json only. The engine's checks of what it
//! receives (parsing with the path of a bad field, the protocol's rules beyond the JSON
//! shape, accepting an executor's answer) are the decider's, beside the decisions that use
//! them.
//!
//! The wire format is JSON with snake_case field names and upper-case enum
//! values (`SUCCESS`, `HIGH`, ...). `docs/agent-protocol.md` and `docs/effect-protocol.md`
//! describe it for authors; with the feature `schema`, `agent_protocol_schema` and
//! `effect_protocol_schema` generate `docs/agent-protocol.schema.json` and
//! `docs/effect-protocol.schema.json` from these types.

// A library reports every failure as an error value naming what and where; it never
// aborts its caller. (Tests are exempt: see clippy.toml.)
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conflict;
mod effect;
mod effect_wire;
mod episode;
mod ids;
mod request;
mod response;
#[cfg(feature = "schema")]
mod schema;
mod tool;

pub use conflict::{ConflictingOutput, SettledConflict, Settlement};
pub use effect::{
    DriftEvidence, DryRunReport, EffectCallError, EffectReceipt, EffectRequest, EffectTarget,
    UNSTABLE_SELECTORS, Verification,
};
pub use effect_wire::{EffectAnswer, EffectCall, EffectErrorBody, EffectOp};
pub use episode::{BudgetRequest, EpisodeResult, EpisodeStatus};
pub use ids::{
    AgentId, CallId, EffectId, EpisodeId, InvalidRunId, ROOT_EPISODE, RunId, SignalId, TicketId,
    TimerId, ToolCallId,
};
pub use request::{AgentRequest, ContextInput, DEFAULT_TIMEOUT_MS, DecisionInput, Priority};
pub use response::{
    Action, AgentResponse, Confidence, IntentClassification, IntentTarget, ResponseStatus,
    TaskRestrictions, ToolCall, Usage,
};
#[cfg(feature = "schema")]
pub use schema::{
    agent_protocol_schema, agent_protocol_schema_pretty, effect_protocol_schema,
    effect_protocol_schema_pretty,
};
pub use tool::{ToolAnswer, ToolErrorBody, ToolRequest};
