//! The payloads of the `timer.*` events (docs/events.md): a durable timer set by an
//! agent's `wait`, and its firing, recorded with the time it fired
//! (`decide/timer.rs` decides them, `state/timer.rs` folds them).

use serde::{Deserialize, Serialize};

use docket_protocol::{AgentId, CallId, EffectId, EpisodeId, TimerId};

/// The `source_agent` of the `timer_fired` decision inputs.
pub const TIMERS_SOURCE: &str = "timers";
/// The output type of a timer's firing (or its refusal), handed back to the agent that
/// waited.
pub const TIMER_FIRED_TYPE: &str = "timer_fired";

/// `timer.set`: an agent's `wait`, allowed; it is called again once the timer is due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerSet {
    /// `{run}/timer-N`.
    pub timer_id: TimerId,
    /// The call whose response waited (its agent is called again).
    pub request_id: CallId,
    /// The waiting agent.
    pub agent: AgentId,
    /// Its episode.
    pub episode_id: EpisodeId,
    /// When it is due, ms since the Unix epoch: the `until`, or the response's recorded
    /// time plus the `for`.
    pub due_at_ms: i64,
    /// The agent's reason.
    pub reason: String,
    /// Whether the time waited counts against the episodes' wall-time budgets (the
    /// bundle's `[waiting] counts_against_wall_time`, as it was when the timer was set).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counts_against_wall_time: bool,
    /// For a scheduled side effect: the effect it holds until its `not_before` (it goes
    /// to its execution gate when the timer fires; nobody is called).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect_id: Option<EffectId>,
}

/// `timer.fired` (input): the timer fired at `at_ms`, at or after it was due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerFired {
    /// The timer.
    pub timer_id: TimerId,
    /// When it fired, ms since the Unix epoch (later than due when docket was down or
    /// busy: the waiting agent is told how late).
    pub at_ms: i64,
}
