//! The engine's side of the wire protocols (the documents themselves are
//! `docket_protocol`'s): parsing an agent's bytes with the path of a bad field, the rules
//! a request or response must follow beyond its JSON shape (a task's denied tools are
//! checked with the bundle's tool-pattern parser), accepting an effect or tool executor's
//! answer, and the workflow's `[tools.NAME]` sections with the text a tool call is
//! matched against.

mod effect;
mod parse;
// Governed tools: `[tools.NAME]` sections, the invocation text, accepting an answer.
mod tool;
mod validate;
// Durable timers: a `wait`'s time.
mod wait;

pub use effect::accept_answer as accept_effect_answer;
pub use parse::{MalformedResponse, parse_response};
pub use tool::{
    DEFAULT_TOOL_TIMEOUT_MS, ToolAnswerError, ToolSpec, accept_tool_answer, resolve_tool,
    tool_invocation,
};
pub use validate::{
    MAX_ACTIONS, MAX_LIST_ENTRIES, ValidateRequest, ValidateResponse, ValidationError,
    ValidationProblem,
};
pub(crate) use wait::time_ms;
pub use wait::{duration_ms as wait_duration_ms, wait_due_ms};
