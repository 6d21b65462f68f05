//! What agents send about episodes (docs/governance.md#episodes): the budget a spawn asks
//! for, and the `EpisodeResult` every episode ends with.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The budget a `spawn` asks for its child. A dimension left out gets the most the
/// bundle allows: `child_max_share_percent` (50%) of the parent's remaining budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BudgetRequest {
    /// Model tokens (input + output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Tool invocations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<u64>,
    /// Wall time, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_time_ms: Option<u64>,
}

/// How an episode ended (docs/agent-protocol.md#episode-actions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EpisodeStatus {
    /// The goal is met.
    Ok,
    /// A human must look before the result is used: opens a handoff ticket.
    NeedsReview,
    /// The goal could not be met.
    Failed,
}

impl EpisodeStatus {
    /// The wire spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::NeedsReview => "needs_review",
            Self::Failed => "failed",
        }
    }
}

/// What an episode hands back when it ends (docs/agent-protocol.md#episode-actions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct EpisodeResult {
    /// ok, needs_review or failed.
    pub status: EpisodeStatus,
    /// At most 8 lines (3 to 8 read best) for people and for the parent episode.
    #[serde(default)]
    pub summary: String,
    /// Pointers to what the episode produced (ids, domain versions, URLs).
    #[serde(default)]
    pub artifacts_created: Vec<String>,
    /// Decisions taken, with their rationale.
    #[serde(default)]
    pub decisions: Vec<Value>,
    /// True when the result only counts as a success once a `verify` child episode passed.
    #[serde(default)]
    pub verification_needed: bool,
    /// Structured task packets for child episodes or humans.
    #[serde(default)]
    pub next_actions: Vec<Value>,
    /// For a failed result: the error class (e.g. `timeout`, `invalid_payload`), counted
    /// by the parent episode's `failure_repeats` stop condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
}

impl EpisodeResult {
    /// A result with only a status and a summary.
    #[must_use]
    pub fn new(status: EpisodeStatus, summary: impl Into<String>) -> Self {
        Self {
            status,
            summary: summary.into(),
            artifacts_created: Vec::new(),
            decisions: Vec::new(),
            verification_needed: false,
            next_actions: Vec::new(),
            error_class: None,
        }
    }

    /// No delta (the `no_new_information` stop condition,
    /// docs/governance.md#stop-conditions): nothing created and nothing new said. A result
    /// has no delta when `artifacts_created` is empty and its summary is empty or equal to
    /// `previous` (the summary of the child result its parent received before it).
    #[must_use]
    pub fn is_no_delta(&self, previous: Option<&str>) -> bool {
        self.artifacts_created.is_empty()
            && (self.summary.trim().is_empty() || previous == Some(self.summary.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_use_seed_004_field_names() {
        let r: EpisodeResult = serde_json::from_value(json!({
            "status": "needs_review", "summary": "s", "artifacts_created": ["a1"],
            "decisions": [{"why": "x"}], "verification_needed": true, "next_actions": []
        }))
        .expect("parses");
        assert_eq!(r.status, EpisodeStatus::NeedsReview);
        assert!(r.verification_needed);
        let err = serde_json::from_value::<EpisodeResult>(json!({"status": "done"}))
            .expect_err("not a status");
        assert!(err.to_string().contains("done"), "{err}");
    }

    #[test]
    fn no_delta_means_no_artifacts_and_nothing_new_said() {
        let mut r = EpisodeResult::new(EpisodeStatus::Ok, "same");
        assert!(r.is_no_delta(Some("same")));
        assert!(!r.is_no_delta(Some("other")));
        assert!(!r.is_no_delta(None));
        r.summary = "  ".into();
        assert!(r.is_no_delta(None));
        r.artifacts_created.push("x".into());
        assert!(!r.is_no_delta(None));
    }
}
