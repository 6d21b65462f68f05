//! Authority (docs/governance.md#authority-and-precedence): who may override whom. Levels run from
//! 1 (human) to 6 (specialist); only a strictly higher level overrides a lower one, so conflicts
//! between peers go up (to the orchestrator, then a human) instead of being settled between them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};

/// Authority levels, highest first (docs/governance.md#authority-and-precedence).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    Human,
    GlobalRules,
    SafetySkill,
    Orchestrator,
    CoordinationSkill,
    #[default]
    Specialist,
}

impl Authority {
    /// 1 (highest, human) to 6 (lowest, specialist), as in
    /// docs/governance.md#authority-and-precedence.
    pub fn level(self) -> u8 {
        self as u8 + 1
    }
}

impl PolicyBundle {
    /// May `actor` override a decision or output of `subject`?
    pub fn decide_override(&self, actor: &str, subject: &str) -> PolicyDecision {
        let k = DecisionKind::Override;
        let find = |id: &str| self.agent(id).and_then(|i| self.spec.agents.get(i));
        let (Some(a), Some(s)) = (find(actor), find(subject)) else {
            let who = if find(actor).is_none() {
                actor
            } else {
                subject
            };
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                "agents.unknown",
                format!("unknown agent `{who}`"),
                Vec::new(),
            );
        };
        let (la, ls) = (a.authority.level(), s.authority.level());
        let rule = format!("agents.{actor}.authority");
        let chain = vec![
            RuleStep::new(
                rule.as_str(),
                StepOutcome::Applied,
                format!("`{actor}` is level {la} ({:?})", a.authority),
            ),
            RuleStep::new(
                format!("agents.{subject}.authority"),
                StepOutcome::Applied,
                format!("`{subject}` is level {ls} ({:?})", s.authority),
            ),
        ];
        if la < ls {
            conclude(
                k,
                Verdict::Allow,
                self.hash,
                rule,
                format!("level {la} overrides level {ls}"),
                chain,
            )
        } else {
            let reason = format!(
                "level {la} cannot override level {ls}: escalate to a higher authority (ultimately a human)"
            );
            conclude(k, Verdict::Deny, self.hash, rule, reason, chain)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_higher_authority_overrides() {
        let src = r#"
            bundle = { id = "t" }
            agents = [{ id = "human", authority = "human" }, { id = "orc", authority = "orchestrator" }, { id = "be" }, { id = "fe" }]
        "#;
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        assert_eq!(b.decide_override("human", "orc").verdict, Verdict::Allow);
        assert_eq!(b.decide_override("orc", "be").verdict, Verdict::Allow);
        assert_eq!(b.decide_override("be", "fe").verdict, Verdict::Deny);
        assert_eq!(b.decide_override("be", "orc").verdict, Verdict::Deny);
    }
}
