//! What every decision returns: a verdict, the rule that decided, why, the bundle hash,
//! and the chain of rules consulted. Serialisable, so the engine can record it as an event.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::canonical::BundleHash;

/// The outcome of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Deny,
    NeedsApproval,
}

/// Which kind of question was decided: one variant per decision of a rule under `rules/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    Handoff,
    ContextScope,
    Spawn,
    Budget,
    DomainWrite,
    DomainRead,
    Capability,
    SideEffect,
    Escalation,
    ToolCall,
    DataContract,
    CircuitBreaker,
    Override,
    Provenance,
    Wait,
    Signal,
    IntentClassification,
}

/// How a rule took part in a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    /// The rule applied and decided (or contributed to) the outcome.
    Applied,
    /// The rule was consulted and did not apply.
    NotApplicable,
    /// The rule applied but a higher-precedence rule won.
    Overridden,
}

/// One link of the rule chain behind a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleStep {
    pub rule_id: Arc<str>,
    pub outcome: StepOutcome,
    pub note: Arc<str>,
}

impl RuleStep {
    pub fn new(
        rule_id: impl Into<Arc<str>>,
        outcome: StepOutcome,
        note: impl Into<Arc<str>>,
    ) -> Self {
        Self {
            rule_id: rule_id.into(),
            outcome,
            note: note.into(),
        }
    }
}

/// A decision, with everything needed to explain and replay it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDecision {
    pub kind: DecisionKind,
    pub verdict: Verdict,
    /// Id of the rule that decided (a bundle rule id, or a built-in one such as `deny_by_default`).
    pub rule_id: Arc<str>,
    pub reason: Arc<str>,
    pub bundle_hash: BundleHash,
    /// Rules consulted, in precedence order.
    pub chain: Vec<RuleStep>,
}

impl PolicyDecision {
    pub fn is_allowed(&self) -> bool {
        self.verdict == Verdict::Allow
    }
}

/// Shorthand for building a decision.
pub(crate) fn conclude(
    kind: DecisionKind,
    verdict: Verdict,
    hash: BundleHash,
    rule_id: impl Into<Arc<str>>,
    reason: impl Into<Arc<str>>,
    chain: Vec<RuleStep>,
) -> PolicyDecision {
    PolicyDecision {
        kind,
        verdict,
        rule_id: rule_id.into(),
        reason: reason.into(),
        bundle_hash: hash,
        chain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiled::PolicyBundle;
    use crate::rules::handoff::InputKind;

    #[test]
    fn decisions_round_trip_through_json_for_the_event_log() {
        let src = "bundle = { id = \"t\" }\nagents = [{ id = \"a\" }, { id = \"b\" }]\ninteractions.allowed = [{ from = \"a\", to = \"b\" }]\n";
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        for (from, to) in [("a", "b"), ("b", "a")] {
            let d = b.decide_handoff(from, to, InputKind::Decision);
            let text = serde_json::to_string(&d).unwrap();
            assert_eq!(
                serde_json::from_str::<crate::rules::handoff::HandoffDecision>(&text).unwrap(),
                d
            );
        }
    }

    #[test]
    fn a_bundle_can_be_shared_across_threads() {
        fn shared<T: Send + Sync + 'static>() {}
        shared::<PolicyBundle>();
        shared::<PolicyDecision>();
    }
}
