//! The wire contracts: what the engine sends an agent and what the agent answers, and
//! what an effect executor is asked and answers.
//!
//! The wire format is JSON with snake_case field names and upper-case enum
//! values (`SUCCESS`, `HIGH`, ...). `docs/agent-protocol.md` describes it for agent
//! authors; `docs/agent-protocol.schema.json` is generated from these types by
//! [`json_schema`].

mod effect;
mod effect_wire;
mod episode;
mod parse;
mod request;
mod response;
mod schema;
// Governed tools: `[tools.NAME]` sections, the executor's request and answer.
mod tool;
mod validate;

pub use effect::{DryRunReport, EffectCallError, EffectReceipt, EffectRequest, Verification};
pub use effect_wire::{
    EffectAnswer, EffectCall, EffectErrorBody, EffectOp, accept_answer as accept_effect_answer,
};
pub use episode::{BudgetRequest, EpisodeResult, EpisodeStatus};
pub use parse::{MalformedResponse, parse_response};
pub use request::{AgentRequest, ContextInput, DEFAULT_TIMEOUT_MS, DecisionInput, Priority};
pub use response::{
    Action, AgentResponse, Confidence, ResponseStatus, TaskRestrictions, ToolCall, Usage,
};
pub use schema::{
    agent_protocol_schema, agent_protocol_schema_pretty, effect_protocol_schema,
    effect_protocol_schema_pretty,
};
pub use tool::{
    DEFAULT_TOOL_TIMEOUT_MS, ToolAnswer, ToolAnswerError, ToolErrorBody, ToolRequest, ToolSpec,
    accept_tool_answer, resolve_tool, tool_invocation,
};
pub use validate::{MAX_ACTIONS, MAX_LIST_ENTRIES, ValidationError, ValidationProblem};
