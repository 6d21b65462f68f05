//! Retry → escalate → block (docs/governance.md#failure-ladder) with a hard stop that needs
//! a human (docs/governance.md#guardrail-1-retry-hard-stop).

use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::model::EscalationAction;

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
}
