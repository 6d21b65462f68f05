//! Retry → escalate → block (docs/governance.md#failure-ladder) with a hard stop that needs
//! a human (docs/governance.md#guardrail-1-retry-hard-stop): the `[escalation]` section.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::sort_dedup;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::model::BundleSpec;
use crate::validate::Checker;

/// What the orchestrator does after an agent fails.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum EscalationAction {
    Retry,
    Escalate,
    Block,
}

/// One rung of the ladder: from `after_failures` failures on, take `action`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EscalationStep {
    pub id: String,
    pub after_failures: u32,
    pub action: EscalationAction,
}

/// The failure ladder, retry → escalate → block (docs/governance.md#failure-ladder), whose
/// last rung is the hard stop of docs/governance.md#guardrail-1-retry-hard-stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EscalationPolicy {
    /// Must end in `block`: the hard stop that needs a human.
    #[serde(default = "default_ladder")]
    pub ladder: Vec<EscalationStep>,
    /// Error classes that skip retrying and escalate at once ("non-recoverable").
    #[serde(default)]
    pub non_retryable_errors: Vec<String>,
}

impl Default for EscalationPolicy {
    fn default() -> Self {
        Self {
            ladder: default_ladder(),
            non_retryable_errors: Vec::new(),
        }
    }
}

fn default_ladder() -> Vec<EscalationStep> {
    vec![
        EscalationStep {
            id: "retry".to_owned(),
            after_failures: 1,
            action: EscalationAction::Retry,
        },
        EscalationStep {
            id: "escalate".to_owned(),
            after_failures: 2,
            action: EscalationAction::Escalate,
        },
        EscalationStep {
            id: "block".to_owned(),
            after_failures: 3,
            action: EscalationAction::Block,
        },
    ]
}

/// Rungs act after distinct, positive failure counts, and the ladder ends in `block`.
pub(crate) fn check(c: &mut Checker<'_>) {
    // The ladder is ordered by `after_failures`, not by how it was written.
    let ladder = &c.spec.escalation.ladder;
    let mut seen = BTreeSet::new();
    for (i, step) in ladder.iter().enumerate() {
        if step.after_failures == 0 {
            c.push(
                ptr!["escalation", "ladder", i, "after_failures"],
                Code::InvalidValue,
                "after_failures must be at least 1",
            );
        }
        if !seen.insert(step.after_failures) {
            c.push(
                ptr!["escalation", "ladder", i, "after_failures"],
                Code::Duplicate,
                format!("two steps act after {} failures", step.after_failures),
            );
        }
    }
    if ladder
        .iter()
        .max_by_key(|s| s.after_failures)
        .map(|s| s.action)
        != Some(EscalationAction::Block)
    {
        c.push(
            ptr!["escalation", "ladder"],
            Code::Contradiction,
            "the ladder must end in `block`: retries cannot go on without a hard stop that needs a human (Guardrail 1)",
        );
    }
}

/// The ladder's rule ids.
pub(crate) fn rule_ids(spec: &BundleSpec, ids: &mut Vec<(String, Pointer)>) {
    ids.extend(
        spec.escalation
            .ladder
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), ptr!["escalation", "ladder", i, "id"])),
    );
}

/// Normal form: the ladder ordered by `after_failures` (not by how it was written), the
/// non-retryable error classes sorted.
pub(crate) fn normalize(s: &mut BundleSpec) {
    s.escalation.ladder.sort_by_key(|x| x.after_failures);
    sort_dedup(&mut s.escalation.non_retryable_errors);
}

/// What to do after a failure, and the decision behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EscalationDecision {
    pub decision: PolicyDecision,
    /// `None` when there has been no failure.
    pub action: Option<EscalationAction>,
}

impl PolicyBundle {
    /// After `failures` consecutive failures (the last of class `error_class`), what next?
    pub fn decide_escalation(
        &self,
        failures: u32,
        error_class: Option<&str>,
    ) -> EscalationDecision {
        let e = &self.spec.escalation;
        let k = DecisionKind::Escalation;
        let Some(step) = e.ladder.iter().rev().find(|s| s.after_failures <= failures) else {
            return EscalationDecision {
                decision: conclude(
                    k,
                    Verdict::Allow,
                    self.hash,
                    "escalation.ladder",
                    "no failure to act on",
                    Vec::new(),
                ),
                action: None,
            };
        };
        let mut chain = vec![RuleStep::new(
            step.id.as_str(),
            StepOutcome::Applied,
            format!("{failures} failure(s)"),
        )];
        let mut action = step.action;
        let mut rule = step.id.clone();
        if action == EscalationAction::Retry
            && error_class.is_some_and(|c| e.non_retryable_errors.iter().any(|x| x == c))
        {
            chain.push(RuleStep::new(
                "escalation.non_retryable_errors",
                StepOutcome::Applied,
                "non-recoverable error class",
            ));
            action = EscalationAction::Escalate;
            rule = "escalation.non_retryable_errors".to_owned();
        }
        let (verdict, reason) = match action {
            EscalationAction::Retry => (
                Verdict::Allow,
                format!("retry with more context (failure {failures})"),
            ),
            EscalationAction::Escalate => (
                Verdict::NeedsApproval,
                format!("escalate to a human (failure {failures})"),
            ),
            EscalationAction::Block => (
                Verdict::Deny,
                format!(
                    "hard stop after {failures} failures: the workflow stops and needs explicit human intervention"
                ),
            ),
        };
        EscalationDecision {
            decision: conclude(k, verdict, self.hash, rule, reason, chain),
            action: Some(action),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ladder_is_retry_escalate_block() {
        let b = PolicyBundle::from_toml_str("bundle = { id = \"t\" }", "t.toml").unwrap();
        let actions: Vec<_> = (1..=4)
            .map(|n| b.decide_escalation(n, None).action)
            .collect();
        use EscalationAction::*;
        assert_eq!(
            actions,
            [Some(Retry), Some(Escalate), Some(Block), Some(Block)]
        );
    }

    #[test]
    fn escalation_ladder_must_end_in_block() {
        let s: BundleSpec = toml::from_str(
            "bundle = { id = \"t\" }\n[escalation]\nladder = [{ id = \"r\", after_failures = 1, action = \"retry\" }]\n",
        )
        .unwrap();
        assert!(
            crate::validate::validate(&s)
                .iter()
                .any(|i| i.code == Code::Contradiction)
        );
    }
}
