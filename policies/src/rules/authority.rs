//! Authority (docs/governance.md#authority-and-precedence): who may override whom. Levels run from
//! 1 (human) to 6 (specialist); only a strictly higher level overrides a lower one, so conflicts
//! between peers go up (to the orchestrator, then a human) instead of being settled between them.
//!
//! A human override of a run's block (docs/governance.md#human-override) is decided here too:
//! the person's role (an entry of the registry) must outrank the level the blocking rule sits
//! at, and the rule must not be absolute (deny patterns, unless `[overrides]` says otherwise,
//! and every rule id `[overrides] absolute` lists).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::ptr;
use crate::model::BundleSpec;
use crate::rules::escalation::ErrorClass;
use crate::rules::tools::Tier;
use crate::validate::Checker;

/// The error class a failure to keep to a boundary is put in
/// (docs/governance.md#error-classes).
pub const BOUNDARY_VIOLATION: &str = "boundary_violation";

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

impl Authority {
    /// The level's name as the bundle writes it (`global_rules`...).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Human => "human",
            Self::GlobalRules => "global_rules",
            Self::SafetySkill => "safety_skill",
            Self::Orchestrator => "orchestrator",
            Self::CoordinationSkill => "coordination_skill",
            Self::Specialist => "specialist",
        }
    }
}

/// `[overrides]`: what no human override lifts (docs/governance.md#human-override). Deny
/// patterns are absolute without being listed (seed 002 §2.1: absolute rules, never
/// overridden).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverridePolicy {
    /// Rule ids that stay absolute: a run one of them blocked cannot be overridden, only
    /// a new bundle lifts them (e.g. `forbid:strategy->observation`,
    /// `risk_classifier.safety`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absolute: Vec<String>,
    /// Let a human override a hard stop whose last failure was a tool call a deny pattern
    /// denied. Default false: deny patterns stay absolute.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deny_patterns_overridable: bool,
}

impl OverridePolicy {
    /// Nothing set: left out of the canonical form, so bundles without it keep their hash.
    #[must_use]
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

pub(crate) fn check(c: &mut Checker<'_>) {
    check_reassignments(c);
    let spec = c.spec;
    for (section, rules) in [
        ("deny_patterns", &spec.deny_patterns),
        ("review_patterns", &spec.review_patterns),
    ] {
        for (i, r) in rules.iter().enumerate() {
            let lower = r.tier.filter(|t| *t != Tier::Absolute);
            if let Some(tier) = lower
                && spec.overrides.absolute.contains(&r.id)
            {
                c.push(
                    ptr![section, i, "tier"],
                    Code::Contradiction,
                    format!(
                        "`{}` is listed in `[overrides] absolute` but its tier is {}: an absolute rule's tier is absolute",
                        r.id,
                        tier.as_str()
                    ),
                );
            }
        }
    }
    let empty: Vec<usize> = c
        .spec
        .overrides
        .absolute
        .iter()
        .enumerate()
        .filter(|(_, id)| id.trim().is_empty())
        .map(|(i, _)| i)
        .collect();
    for i in empty {
        c.push(
            ptr!["overrides", "absolute", i],
            Code::InvalidValue,
            "an absolute rule id must not be empty",
        );
    }
}

/// Each `reassign_to` names another agent of the registry, not `external`, that may
/// receive what the agent receives: for every allowed edge into the agent, an allowed edge
/// from the same sender into the new agent, carrying the same output type
/// (docs/governance.md#reassignment-on-a-boundary-violation).
fn check_reassignments(c: &mut Checker<'_>) {
    let spec = c.spec;
    for (i, a) in spec.agents.iter().enumerate() {
        let Some(to) = a.reassign_to.as_deref() else {
            continue;
        };
        let p = ptr!["agents", i, "reassign_to"];
        if !c.agents.contains(to) {
            c.push(
                p,
                Code::UnknownReference,
                format!("unknown agent `{to}`: declare it under [[agents]]"),
            );
            continue;
        }
        if to == a.id || to == "external" {
            c.push(
                p,
                Code::InvalidValue,
                format!("`{}`'s task cannot be reassigned to `{to}`: name another agent of the registry", a.id),
            );
            continue;
        }
        let edges = &spec.interactions.allowed;
        let missing = edges.iter().find(|e| {
            e.to == a.id
                && !edges.iter().any(|f| {
                    f.from == e.from
                        && f.to == to
                        && (f.output_type.is_none() || f.output_type == e.output_type)
                })
        });
        if let Some(e) = missing {
            c.push(
                p,
                Code::Contradiction,
                format!(
                    "`{to}` may not receive what `{}` does: no allowed edge {} → {to}{} for the edge {} → {}",
                    a.id,
                    e.from,
                    e.output_type
                        .as_deref()
                        .map(|t| format!(" carrying {t}"))
                        .unwrap_or_default(),
                    e.from,
                    a.id
                ),
            );
        }
    }
}

pub(crate) fn normalize(s: &mut BundleSpec) {
    s.overrides.absolute.sort();
    s.overrides.absolute.dedup();
}

/// A human's request to override the rule that blocked a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverrideRequest<'a> {
    /// The role the person acts in: an agent id of the registry.
    pub role: &'a str,
    /// The rule that blocked the run.
    pub rule_id: &'a str,
    /// The level the blocking rule sits at (docs/governance.md#human-override).
    pub level: Authority,
    /// The deny pattern behind the block, when the block is a hard stop whose last failure
    /// was a tool call a deny pattern denied.
    pub deny_pattern: Option<&'a str>,
}

/// The rule id of an allowed override: what a released handoff names as its deciding rule.
pub const HUMAN_OVERRIDE_RULE: &str = "human.override";

impl PolicyBundle {
    /// The safety tier of the deny pattern `rule_id` (docs/governance.md#safety-tiers): its
    /// own, else `absolute` when `[overrides] absolute` lists it or deny patterns are not
    /// overridable, else `universal`. None when it is not a deny pattern.
    #[must_use]
    pub fn deny_pattern_tier(&self, rule_id: &str) -> Option<Tier> {
        let p = self.spec.deny_patterns.iter().find(|p| p.id == rule_id)?;
        let listed = self.spec.overrides.absolute.iter().any(|a| a == rule_id);
        Some(match p.tier {
            _ if listed => Tier::Absolute,
            Some(tier) => tier,
            None if self.spec.overrides.deny_patterns_overridable => Tier::Universal,
            None => Tier::Absolute,
        })
    }

    /// Whether `rule_id` is one of the bundle's deny patterns.
    #[must_use]
    pub fn is_deny_pattern(&self, rule_id: &str) -> bool {
        self.spec.deny_patterns.iter().any(|p| p.id == rule_id)
    }

    /// The registry's entries whose authority is above `level` (a lower number), highest
    /// first: the roles in which a person may override a rule at `level`.
    #[must_use]
    pub fn roles_outranking(&self, level: Authority) -> Vec<&str> {
        let mut roles: Vec<(Authority, &str)> = self
            .spec
            .agents
            .iter()
            .filter(|a| a.authority < level)
            .map(|a| (a.authority, a.id.as_str()))
            .collect();
        roles.sort();
        roles.into_iter().map(|(_, id)| id).collect()
    }

    /// May a person acting as `req.role` override the rule that blocked a run? Denied when
    /// the rule is absolute (a deny pattern, unless `[overrides] deny_patterns_overridable`;
    /// a rule `[overrides] absolute` lists), when the role is not in the registry, and when
    /// the role's level is not strictly above the rule's (peers do not override each other).
    /// Allowed: rule `human.override`, the chain naming the role's level and the overridden
    /// rule (`overridden`).
    #[must_use]
    pub fn decide_human_override(&self, req: &OverrideRequest<'_>) -> PolicyDecision {
        let k = DecisionKind::Override;
        let rule = req.rule_id;
        let deny = |id: &str, reason: String, chain| {
            conclude(k, Verdict::Deny, self.hash, id, reason, chain)
        };
        let may = || {
            let roles = self.roles_outranking(req.level);
            if roles.is_empty() {
                "no role of the registry outranks it".to_owned()
            } else {
                format!("roles that outrank it: {}", roles.join(", "))
            }
        };
        if let Some(pattern) = req.deny_pattern
            && self.deny_pattern_tier(pattern) == Some(Tier::Absolute)
        {
            let reason = format!(
                "`{rule}` stopped the run after a tool call the deny pattern `{pattern}` denied: \
                     deny patterns are absolute and no override lifts them (only a new bundle, or \
                     `[overrides] deny_patterns_overridable = true`)"
            );
            let chain = vec![RuleStep::new(
                pattern,
                StepOutcome::Applied,
                "deny pattern: absolute",
            )];
            return deny(pattern, reason, chain);
        }
        if self.spec.overrides.absolute.iter().any(|a| a == rule) {
            let reason = format!(
                "`{rule}` is absolute (`[overrides] absolute`): no override lifts it, only a new bundle"
            );
            let chain = vec![RuleStep::new(
                "overrides.absolute",
                StepOutcome::Applied,
                reason.as_str(),
            )];
            return deny("overrides.absolute", reason, chain);
        }
        let Some(role) = self.agent(req.role).and_then(|i| self.spec.agents.get(i)) else {
            let reason = format!(
                "no role `{}` in the bundle's registry: a person overrides in a role of `[[agents]]` (e.g. one with authority = \"human\"); {}",
                req.role,
                may()
            );
            return deny("agents.unknown", reason, Vec::new());
        };
        let (lr, lb) = (role.authority.level(), req.level.level());
        let role_rule = format!("agents.{}.authority", req.role);
        let mut chain = vec![RuleStep::new(
            role_rule.as_str(),
            StepOutcome::Applied,
            format!("`{}` is level {lr} ({})", req.role, role.authority.as_str()),
        )];
        if lr < lb {
            chain.push(RuleStep::new(
                rule,
                StepOutcome::Overridden,
                format!("`{rule}` sits at level {lb} ({})", req.level.as_str()),
            ));
            let reason = format!(
                "`{}` (level {lr}, {}) outranks `{rule}` (level {lb}, {})",
                req.role,
                role.authority.as_str(),
                req.level.as_str()
            );
            conclude(
                k,
                Verdict::Allow,
                self.hash,
                HUMAN_OVERRIDE_RULE,
                reason,
                chain,
            )
        } else {
            chain.push(RuleStep::new(
                rule,
                StepOutcome::Applied,
                format!("`{rule}` sits at level {lb} ({})", req.level.as_str()),
            ));
            let reason = format!(
                "`{}` is level {lr} ({}), not above level {lb} ({}) where `{rule}` sits: {}",
                req.role,
                role.authority.as_str(),
                req.level.as_str(),
                may()
            );
            deny(&role_rule, reason, chain)
        }
    }

    /// Does `agent`'s failure of `class` hand its task over to another agent? Only a
    /// boundary violation does, and only when the agent's entry names `reassign_to`: the
    /// decision (kind `escalation`, rule `agents.AGENT.reassign_to`) says to whom, its chain
    /// naming the class and the rule (docs/governance.md#reassignment-on-a-boundary-violation).
    #[must_use]
    pub fn decide_reassignment(
        &self,
        agent: &str,
        class: &ErrorClass,
    ) -> Option<(String, PolicyDecision)> {
        if class.class != BOUNDARY_VIOLATION {
            return None;
        }
        let entry = self.agent(agent).and_then(|i| self.spec.agents.get(i))?;
        let to = entry.reassign_to.clone()?;
        let rule = format!("agents.{agent}.reassign_to");
        let chain = vec![
            RuleStep::new(
                class.rule_id.as_str(),
                StepOutcome::Applied,
                format!("`{}` is a {}", class.code, class.class),
            ),
            RuleStep::new(
                rule.as_str(),
                StepOutcome::Applied,
                format!("`{agent}`'s task goes to `{to}`"),
            ),
        ];
        let reason = format!(
            "{agent}'s output was rejected for a boundary violation ({}): its task is reassigned to {to}",
            class.code
        );
        let decision = conclude(
            DecisionKind::Escalation,
            Verdict::Allow,
            self.hash,
            rule,
            reason,
            chain,
        );
        Some((to, decision))
    }

    /// The authority of `agent`'s registry entry (`specialist`, the lowest, for an agent
    /// not in the registry).
    #[must_use]
    pub fn authority_of(&self, agent: &str) -> Authority {
        self.agent(agent)
            .and_then(|i| self.spec.agents.get(i))
            .map_or(Authority::Specialist, |a| a.authority)
    }

    /// May `actor` override a decision or output of `subject`? Asked when authority
    /// settles a fan-out's conflict (docs/governance.md#authority-between-agents).
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

    fn overrides(extra: &str) -> PolicyBundle {
        let src = format!(
            r#"
            bundle = {{ id = "t" }}
            agents = [{{ id = "lead", authority = "human" }}, {{ id = "safety", authority = "global_rules" }}, {{ id = "orc", authority = "orchestrator" }}]
            deny_patterns = [{{ id = "no-rm", pattern = "Bash(rm -rf *)", reason = "never" }}]
            {extra}
        "#
        );
        PolicyBundle::from_toml_str(&src, "t.toml").unwrap()
    }

    fn req<'a>(role: &'a str, rule_id: &'a str, level: Authority) -> OverrideRequest<'a> {
        OverrideRequest {
            role,
            rule_id,
            level,
            deny_pattern: None,
        }
    }

    #[test]
    fn a_human_override_needs_a_role_above_the_rule() {
        let b = overrides("");
        let d = b.decide_human_override(&req("lead", "forbid:a->b", Authority::GlobalRules));
        assert_eq!(d.verdict, Verdict::Allow);
        assert_eq!(&*d.rule_id, HUMAN_OVERRIDE_RULE);
        assert_eq!(d.chain[1].outcome, StepOutcome::Overridden);
        // global_rules outranks a safety skill's verdict, not a global rule.
        let d =
            b.decide_human_override(&req("safety", "risk_classifier.c", Authority::SafetySkill));
        assert_eq!(d.verdict, Verdict::Allow);
        let d = b.decide_human_override(&req("safety", "forbid:a->b", Authority::GlobalRules));
        assert_eq!(d.verdict, Verdict::Deny);
        assert!(d.reason.contains("not above level 2"), "{}", d.reason);
        assert!(d.reason.contains("lead"), "names who may: {}", d.reason);
        let d = b.decide_human_override(&req("orc", "risk_classifier.c", Authority::SafetySkill));
        assert_eq!(d.verdict, Verdict::Deny);
        let d = b.decide_human_override(&req("nobody", "forbid:a->b", Authority::GlobalRules));
        assert_eq!(&*d.rule_id, "agents.unknown");
    }

    #[test]
    fn deny_patterns_and_listed_rules_stay_absolute() {
        let b = overrides("");
        let with_pattern = OverrideRequest {
            deny_pattern: Some("no-rm"),
            ..req("lead", "escalation.block", Authority::GlobalRules)
        };
        let d = b.decide_human_override(&with_pattern);
        assert_eq!(d.verdict, Verdict::Deny);
        assert_eq!(&*d.rule_id, "no-rm");
        assert!(b.is_deny_pattern("no-rm"));
        let open = overrides(
            "[overrides]\ndeny_patterns_overridable = true\nabsolute = [\"forbid:a->b\"]",
        );
        assert_eq!(
            open.decide_human_override(&with_pattern).verdict,
            Verdict::Allow
        );
        let d = open.decide_human_override(&req("lead", "forbid:a->b", Authority::GlobalRules));
        assert_eq!(&*d.rule_id, "overrides.absolute");
        assert_ne!(open.hash(), b.hash());
        // Left out when unset: a bundle without `[overrides]` hashes as before.
        assert_eq!(overrides("[overrides]").hash(), b.hash());
    }
}
