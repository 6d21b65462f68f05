//! The agent protocol: what the engine sends an agent and what the agent answers.
//!
//! The wire format is JSON with snake_case field names and the seed's upper-case enum
//! values (`SUCCESS`, `HIGH`, ...). `docs/agent-protocol.md` describes it for agent
//! authors; `docs/agent-protocol.schema.json` is generated from these types by
//! [`json_schema`].

mod episode;
mod parse;
mod request;
mod response;
mod schema;
mod validate;

pub use episode::{BudgetRequest, EpisodeResult, EpisodeStatus};
pub use parse::{MalformedResponse, parse_response};
pub use request::{AgentRequest, ContextInput, DEFAULT_TIMEOUT_MS, DecisionInput, Priority};
pub use response::{Action, AgentResponse, Confidence, ResponseStatus, ToolCall, Usage};
pub use schema::{json_schema, json_schema_pretty};
pub use validate::{ValidationError, ValidationProblem};
