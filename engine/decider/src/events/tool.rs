//! The payloads of the `tool.*` events (docs/events.md): a governed tool call scheduled
//! with exactly what its executor is given, denied, returned or failed
//! (`decide/tool.rs` decides them, `state/tool.rs` folds them).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use docket_protocol::{AgentId, CallId, EpisodeId, ToolCallId, ToolRequest};

/// The `source_agent` of the `tool_result` decision inputs (and the sender scoping sees).
pub const TOOLS_SOURCE: &str = "tools";
/// The output type of a tool call's outcome, handed back to the agent that asked.
pub const TOOL_RESULT_TYPE: &str = "tool_result";
/// The code of a call found started without a result on resume, not run again.
pub const TOOL_INTERRUPTED: &str = "TOOL_INTERRUPTED";

/// `tool.call_scheduled`: an allowed call, with exactly what its executor is given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallScheduled {
    /// `{run}/tool-N`.
    pub tool_call_id: ToolCallId,
    /// The call whose response asked (its agent gets the outcome).
    pub request_id: CallId,
    /// The tool as the agent named it.
    pub name: String,
    /// The `[tools.NAME]` section that serves it.
    pub section: String,
    /// Whether the section is `read_only` (run again after a crash).
    pub read_only: bool,
    /// What the executor is given.
    pub request: ToolRequest,
}

/// `tool.denied`: a call refused before it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDenied {
    /// `{run}/tool-N`.
    pub tool_call_id: ToolCallId,
    /// The asking call.
    pub request_id: CallId,
    /// The asking agent.
    pub agent: AgentId,
    /// Its episode.
    pub episode_id: EpisodeId,
    /// The tool as the agent named it.
    pub name: String,
    /// The arguments as given.
    #[serde(default)]
    pub arguments: Value,
    /// The deciding rule (a deny pattern's id, `agents.X.must_not_tools`,
    /// `agents.X.allowed_tools`, a review pattern's id, `workflow.tools`, a budget rule).
    pub rule_id: String,
    /// Why.
    pub reason: String,
}

/// `tool.returned` (input).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolReturned {
    /// The call.
    pub tool_call_id: ToolCallId,
    /// What the tool returned.
    pub result: Value,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `tool.failed` (input).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolFailed {
    /// The call.
    pub tool_call_id: ToolCallId,
    /// `TOOL_TIMEOUT`, `TOOL_UNAVAILABLE`, `TOOL_MALFORMED_ANSWER`, `TOOL_INTERRUPTED`,
    /// or the tool's own code.
    pub code: String,
    /// What happened.
    pub message: String,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}
