//! The tool protocol (docs/agent-protocol.md#tool-executors): the exact request a tool
//! executor receives and the answer it gives.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{AgentId, EpisodeId, RunId, ToolCallId};

/// Exactly what a tool executor is given, recorded in `tool.call_scheduled` before it
/// runs (docs/agent-protocol.md#tool-executors).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    /// The run.
    pub run_id: RunId,
    /// The asking agent's episode.
    pub episode_id: EpisodeId,
    /// `{run}/tool-N`; echoed in the answer.
    pub tool_call_id: ToolCallId,
    /// The asking agent.
    pub agent: AgentId,
    /// The tool as the executor knows it (for an MCP section, the server's tool name).
    pub tool: String,
    /// The arguments, as the agent gave them.
    #[serde(default)]
    pub arguments: Value,
    /// docket stops waiting after this long.
    pub timeout_ms: u64,
}

/// A tool executor's answer: the call's `tool_call_id` and exactly one of `result` or
/// `error`. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolAnswer {
    /// The call's id, echoed.
    pub tool_call_id: ToolCallId,
    /// What the tool returned (any JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The tool refused or failed the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolErrorBody>,
}

/// A tool's own error: a stable upper-case `code` and a `message`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolErrorBody {
    /// `NOT_FOUND`, `INVALID_ARGUMENTS`...
    pub code: String,
    /// For people.
    pub message: String,
}
