//! The recorded inputs' payloads: each struct is both the event's payload and what
//! `decide` is handed (`Command` wraps it), so an input is defined once. `run.requested`
//! (`RunRequested`), the effect inputs (`effect.rs`) and the tool inputs (`tool.rs`) are
//! the others.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use docket_protocol::{AgentId, AgentResponse, CallId, TicketId};

/// `agent.responded`: the agent answered (any status).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResponded {
    /// The call answered.
    pub request_id: CallId,
    /// The response as parsed and checked by the executor (shared with the run state's
    /// call).
    pub response: Arc<AgentResponse>,
    /// Wall time it was received, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `agent.call_failed`: the call failed without a usable response (timeout, crash,
/// malformed, oversized...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCallFailed {
    /// The call that failed.
    pub request_id: CallId,
    /// The executor's stable error code (`AGENT_TIMEOUT`...).
    pub code: String,
    /// What went wrong, for people.
    pub message: String,
    /// Wall time of the failure, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `human.decided`: a person decided a ticket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanDecided {
    /// The ticket.
    pub ticket: TicketId,
    /// Approved (true) or denied.
    pub approved: bool,
    /// Who decided.
    pub by: String,
    /// Why.
    pub reason: String,
    /// For a conflict ticket: the chosen output; for a question: the chosen option
    /// (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<u32>,
    /// For a question: the human's answer in their own words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `human.overrode`: a person overrode the rule that blocked the run
/// (docs/governance.md#human-override); what the block stopped continues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanOverrode {
    /// Who.
    pub by: String,
    /// The role they act in: an entry of the bundle's registry.
    pub role: String,
    /// The rule overridden: the block's `rule_id`.
    pub rule_id: String,
    /// Why.
    pub reason: String,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `human.wrote_domain`: a person wrote a new version of a domain, in a role of the
/// bundle's registry that may write it (docs/governance.md#a-person-writes-a-domain).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanWroteDomain {
    /// Who (a name given by the person, or the API token's name).
    pub by: String,
    /// The role they write in: a person's entry of the bundle's registry
    /// (`authority = "human"`) whose `write_scopes` hold the domain.
    pub role: String,
    /// The domain.
    pub domain: String,
    /// The content written, before the domain's redaction.
    pub content: Value,
    /// Why.
    pub reason: String,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `run.cancelled`: a person cancelled the run; it ends `cancelled` and nothing more
/// happens in it (docs/events.md#runcancelled).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCancelled {
    /// Who cancelled it (a name given by the person, or the API token's name).
    pub by: String,
    /// Why.
    pub reason: String,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `run.paused` and `run.unpaused`: a person paused the run, or let a paused run go on
/// (docs/events.md#runpaused). Paused, nothing new starts: no call, no effect, no tool
/// call; what was in flight is recorded as it settles, and timers fire and are recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPause {
    /// Who (a name given by the person, or the API token's name).
    pub by: String,
    /// Why.
    pub reason: String,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `agent.circuit_checked`: the agent's circuit breaker as the runtime read it from the
/// data directory's circuits stream before calling, recorded when its recent failures
/// reached the bundle's rate (docs/governance.md#circuit-breaker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircuitReading {
    /// The call about to be made.
    pub request_id: CallId,
    /// Its target agent, whose breaker was read.
    pub agent: AgentId,
    /// Consecutive failures of the agent across runs, as read.
    pub consecutive_failures: u32,
    /// When the last of them was recorded, ms since the Unix epoch.
    pub last_failure_ms: i64,
    /// When the last half-open probe was let through, if one was since that failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_ms: Option<i64>,
    /// The agent's calls answered within the bundle's `window_ms` before the reading, and
    /// how many failed: what decider version 13 decides by. Absent in readings of version
    /// 12, which decide by `consecutive_failures`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<CircuitWindow>,
    /// When it was read, ms since the Unix epoch.
    pub at_ms: i64,
}

/// The calls to an agent counted by its circuit breaker: those answered in the last
/// `window_ms` (docs/governance.md#circuit-breaker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircuitWindow {
    /// How far back the calls counted go, ms.
    pub window_ms: u64,
    /// The calls answered (or failed) within it, across runs.
    pub calls: u32,
    /// How many of them failed.
    pub failures: u32,
}

impl CircuitReading {
    /// Milliseconds since the last failure or probe, whichever is later (0 when the clock
    /// went back).
    #[must_use]
    pub fn ms_since_last_attempt(&self) -> u64 {
        let last = self
            .last_probe_ms
            .map_or(self.last_failure_ms, |p| p.max(self.last_failure_ms));
        u64::try_from(self.at_ms.saturating_sub(last)).unwrap_or(0)
    }
}
