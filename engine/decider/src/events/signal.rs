//! The payloads of the `signal.*` events (docs/events.md#outside-events): an outside event
//! received by a run, whether the bundle kept it, an agent's wait for one, and its
//! delivery (`decide/signal.rs` decides them, `state/signal.rs` folds them).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use docket_protocol::{AgentId, CallId, EpisodeId, SignalId, TimerId};

/// The `source_agent` of an outside event's content, and the content source handoff
/// rules name for it (`from_agent_id = "events"`).
pub const EVENTS_SOURCE: &str = "events";
/// The output type of an outside event delivered to the agent that waited for it.
pub const EVENT_TYPE: &str = "event";
/// The output type handed back when a wait for an event timed out.
pub const EVENT_TIMED_OUT_TYPE: &str = "event_timed_out";

/// `signal.received` (input): an outside event sent to the run (`docket signal`, `POST
/// /api/runs/{run}/events`), with who sent it. Numbered `{run}/signal-N` in the order
/// received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalReceived {
    /// The event's name (the bundle's `[[signals]]`).
    pub name: String,
    /// Its content (JSON).
    pub payload: Value,
    /// Who sent it, as the sender named itself (checked against the signal's `senders`).
    pub by: String,
    /// The sender's key for this event: sent again with the same key, it is recorded once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// When it was received, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `signal.kept`: the bundle admitted the event; it is kept for the run until an agent
/// waiting for it receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalKept {
    /// The event.
    pub signal_id: SignalId,
    /// Its name.
    pub name: String,
}

/// `signal.refused`: the bundle refused the event (an unknown name, a sender it does not
/// list, a payload over its limit); it reaches no agent and no domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalRefused {
    /// The event.
    pub signal_id: SignalId,
    /// Its name.
    pub name: String,
    /// Why, as the `policy.decided` before it says.
    pub reason: String,
}

/// `signal.awaited`: an agent's `wait` for an event, allowed, with none kept to hand it:
/// it is called again when one is received, or when its timeout timer fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalAwaited {
    /// The call whose response waits (its agent is called again).
    pub request_id: CallId,
    /// The waiting agent.
    pub agent: AgentId,
    /// Its episode.
    pub episode_id: EpisodeId,
    /// The event waited for.
    pub name: String,
    /// The agent's reason.
    pub reason: String,
    /// The timer set for its timeout (`until` or `for`), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<TimerId>,
    /// Whether the time waited counts against the episodes' wall-time budgets (the
    /// bundle's `[waiting] counts_against_wall_time`, as it was then).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counts_against_wall_time: bool,
}

/// `signal.delivered`: a kept event handed to an agent that waits for it; its content
/// follows through the gate (`handoff.allowed` from `events`) and the agent is called
/// again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalDelivered {
    /// The event.
    pub signal_id: SignalId,
    /// Its name.
    pub name: String,
    /// The call whose response waited for it.
    pub request_id: CallId,
    /// The agent it is delivered to.
    pub agent: AgentId,
}

/// `signal.timed_out`: a wait for an event ended by its timeout, its timer having fired
/// before any such event was kept; the agent is called again with `event_timed_out`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalTimedOut {
    /// The call whose response waited.
    pub request_id: CallId,
    /// The agent that waited.
    pub agent: AgentId,
    /// The event it waited for.
    pub name: String,
    /// The timeout's timer.
    pub timer_id: TimerId,
}
