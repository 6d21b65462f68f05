//! Spawning a child episode (docs/governance.md#recursion-limits,
//! docs/governance.md#stop-conditions, docs/governance.md#budgets): recursion limits, child types,
//! stop conditions and the budget rules (a child gets at most 50% of its parent's remaining budget;
//! past 70% an episode must finalize or escalate, not recurse).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::model::{HARD_MAX_DEPTH, RecursionPolicy, StopCondition};

/// Usage of one budget dimension (tokens, tool_calls, time_ms...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meter {
    pub limit: u64,
    pub used: u64,
}

impl Meter {
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
    fn crossed(&self, percent: u8) -> bool {
        u128::from(self.used) * 100 >= u128::from(self.limit) * u128::from(percent)
    }
}

/// A request to spawn a child episode, with the parent's current state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnRequest {
    pub parent_agent: String,
    pub child_type: String,
    /// Depth of the parent episode (the root episode is 0).
    pub parent_depth: u32,
    /// Children the parent has spawned so far.
    pub children_spawned: u32,
    /// Episodes in the whole run so far, the root included.
    pub total_episodes: u32,
    /// The parent's budget per dimension.
    #[serde(default)]
    pub parent_budget: BTreeMap<String, Meter>,
    /// What the child asks for per dimension.
    #[serde(default)]
    pub child_budget: BTreeMap<String, u64>,
    /// Consecutive children that returned "no delta".
    #[serde(default)]
    pub consecutive_no_delta: u32,
    /// Times the same error class has repeated.
    #[serde(default)]
    pub same_error_repeats: u32,
    /// A human explicitly authorised a normally forbidden child type.
    #[serde(default)]
    pub human_authorized: bool,
}

/// The spawn verdict plus what the child may have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnDecision {
    pub decision: PolicyDecision,
    pub child_depth: u32,
    /// Most the child may take per dimension (the share of the parent's remaining budget).
    pub max_child_budget: BTreeMap<String, u64>,
    /// On a denial: the stop condition it stands for (`depth_exceeded`,
    /// `budget_exhausted`, `no_new_information`, `failure_repeats`; every other refusal
    /// is `policy_blocks`). `None` when allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_condition: Option<StopCondition>,
}

impl PolicyBundle {
    /// The recursion policy governing episodes of `agent`.
    pub fn recursion_policy(&self, agent: &str) -> &RecursionPolicy {
        let r = &self.spec.recursion;
        r.policies
            .iter()
            .find(|p| p.agents.iter().any(|a| a == agent))
            .unwrap_or(&r.default)
    }

    /// May the parent spawn this child episode?
    pub fn decide_spawn(&self, req: &SpawnRequest) -> SpawnDecision {
        let policy = self.recursion_policy(&req.parent_agent);
        let budget = &self.spec.recursion.budget;
        let pid = policy.id.as_str();
        let child_depth = req.parent_depth.saturating_add(1);
        let share = u64::from(budget.child_max_share_percent);
        let max_child_budget: BTreeMap<String, u64> = req
            .parent_budget
            .iter()
            .map(|(k, m)| (k.clone(), m.remaining().saturating_mul(share) / 100))
            .collect();
        let mut chain = vec![RuleStep::new(
            pid,
            StepOutcome::Applied,
            format!("recursion policy for `{}`", req.parent_agent),
        )];
        let verdict = |v, rule: &str, reason: String, mut chain: Vec<RuleStep>| {
            if rule != pid {
                chain.push(RuleStep::new(rule, StepOutcome::Applied, reason.as_str()));
            }
            SpawnDecision {
                decision: conclude(DecisionKind::Spawn, v, self.hash, rule, reason, chain),
                child_depth,
                max_child_budget: max_child_budget.clone(),
                stop_condition: None,
            }
        };
        let stop = |condition: StopCondition, rule: &str, reason: String, chain| SpawnDecision {
            stop_condition: Some(condition),
            ..verdict(Verdict::Deny, rule, reason, chain)
        };
        let deny = |rule: &str, reason: String, chain| {
            stop(StopCondition::PolicyBlocks, rule, reason, chain)
        };

        if self.agent(&req.parent_agent).is_none() {
            return deny(
                "agents.unknown",
                format!("unknown agent `{}`", req.parent_agent),
                chain,
            );
        }
        let max_depth = policy.max_depth.min(HARD_MAX_DEPTH);
        if child_depth > max_depth {
            let cap = if policy.max_depth > HARD_MAX_DEPTH {
                format!(" (hard maximum {HARD_MAX_DEPTH})")
            } else {
                String::new()
            };
            return stop(
                StopCondition::DepthExceeded,
                pid,
                format!("depth exceeded: child depth {child_depth} > max_depth {max_depth}{cap}"),
                chain,
            );
        }
        if req.children_spawned >= policy.max_children {
            return deny(
                pid,
                format!("max_children {} reached", policy.max_children),
                chain,
            );
        }
        if req.total_episodes >= policy.max_total_episodes {
            return deny(
                pid,
                format!("max_total_episodes {} reached", policy.max_total_episodes),
                chain,
            );
        }
        let stops = &policy.stop_conditions;
        if stops.contains(&StopCondition::NoNewInformation)
            && req.consecutive_no_delta >= policy.no_delta_limit
        {
            return stop(
                StopCondition::NoNewInformation,
                pid,
                format!(
                    "stop: no new information ({} consecutive children without delta)",
                    req.consecutive_no_delta
                ),
                chain,
            );
        }
        if stops.contains(&StopCondition::FailureRepeats)
            && req.same_error_repeats >= policy.failure_repeat_limit
        {
            return stop(
                StopCondition::FailureRepeats,
                pid,
                format!(
                    "stop: the same failure repeated {} times",
                    req.same_error_repeats
                ),
                chain,
            );
        }
        if stops.contains(&StopCondition::BudgetExhausted) {
            if let Some((dim, _)) = req.parent_budget.iter().find(|(_, m)| m.remaining() == 0) {
                return stop(
                    StopCondition::BudgetExhausted,
                    pid,
                    format!("stop: budget exhausted ({dim})"),
                    chain,
                );
            }
        }
        let at = budget.finalize_or_escalate_at_percent;
        if let Some((dim, m)) = req.parent_budget.iter().find(|(_, m)| m.crossed(at)) {
            return deny(
                "recursion.budget.finalize_or_escalate_at_percent",
                format!(
                    "parent has used {}/{} {dim} (≥ {at}%): it must finalize or escalate, not recurse",
                    m.used, m.limit
                ),
                chain,
            );
        }
        if policy.forbidden_child_types.contains(&req.child_type) {
            if req.human_authorized {
                chain.push(RuleStep::new(
                    pid,
                    StepOutcome::Overridden,
                    format!(
                        "`{}` is forbidden, but a human authorised it",
                        req.child_type
                    ),
                ));
            } else {
                return deny(
                    pid,
                    format!(
                        "child type `{}` is forbidden unless a human explicitly authorises it",
                        req.child_type
                    ),
                    chain,
                );
            }
        } else if !policy.allowed_child_types.contains(&req.child_type) {
            return deny(
                pid,
                format!(
                    "child type `{}` is not in allowed_child_types (recursion is deny-by-default)",
                    req.child_type
                ),
                chain,
            );
        }
        for (dim, want) in &req.child_budget {
            let Some(cap) = max_child_budget.get(dim) else {
                return deny(
                    "recursion.budget.child_max_share_percent",
                    format!("child asks for {dim}, which the parent's budget does not have"),
                    chain,
                );
            };
            if want > cap {
                return deny(
                    "recursion.budget.child_max_share_percent",
                    format!(
                        "child asks for {want} {dim}; at most {share}% of the parent's remaining ({cap}) is allowed"
                    ),
                    chain,
                );
            }
        }
        verdict(
            Verdict::Allow,
            pid,
            format!(
                "`{}` may spawn a `{}` child at depth {child_depth}",
                req.parent_agent, req.child_type
            ),
            chain,
        )
    }

    /// Whether an episode with this budget usage may go on, must finalize or escalate, or stop.
    pub fn decide_budget(&self, budget: &BTreeMap<String, Meter>) -> PolicyDecision {
        let at = self.spec.recursion.budget.finalize_or_escalate_at_percent;
        let rule = "recursion.budget.finalize_or_escalate_at_percent";
        if let Some((dim, m)) = budget.iter().find(|(_, m)| m.remaining() == 0) {
            let chain = vec![RuleStep::new(
                "stop_conditions.budget_exhausted",
                StepOutcome::Applied,
                dim.as_str(),
            )];
            return conclude(
                DecisionKind::Budget,
                Verdict::Deny,
                self.hash,
                "stop_conditions.budget_exhausted",
                format!("budget exhausted: {}/{} {dim}", m.used, m.limit),
                chain,
            );
        }
        if let Some((dim, m)) = budget.iter().find(|(_, m)| m.crossed(at)) {
            let chain = vec![RuleStep::new(rule, StepOutcome::Applied, dim.as_str())];
            return conclude(
                DecisionKind::Budget,
                Verdict::NeedsApproval,
                self.hash,
                rule,
                format!(
                    "{}/{} {dim} used (≥ {at}%): produce a final answer or escalate to a human with a handoff ticket",
                    m.used, m.limit
                ),
                chain,
            );
        }
        conclude(
            DecisionKind::Budget,
            Verdict::Allow,
            self.hash,
            rule,
            format!("under {at}% of every budget"),
            Vec::new(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_seed_004s() {
        let b = PolicyBundle::from_toml_str(
            "bundle = { id = \"t\" }\nagents = [{ id = \"a\" }]",
            "t.toml",
        )
        .unwrap();
        let p = b.recursion_policy("a");
        assert_eq!(
            (p.max_depth, p.max_children, p.max_total_episodes),
            (2, 6, 12)
        );
        // Deny-by-default recursion: no allowed child types declared.
        let req = SpawnRequest {
            parent_agent: "a".into(),
            child_type: "verify".into(),
            parent_depth: 0,
            children_spawned: 0,
            total_episodes: 1,
            parent_budget: BTreeMap::new(),
            child_budget: BTreeMap::new(),
            consecutive_no_delta: 0,
            same_error_repeats: 0,
            human_authorized: false,
        };
        let d = b.decide_spawn(&req);
        assert_eq!(d.decision.verdict, Verdict::Deny);
        assert_eq!(d.stop_condition, Some(StopCondition::PolicyBlocks));
    }

    #[test]
    fn denials_name_their_stop_condition() {
        let b = PolicyBundle::from_toml_str(
            "bundle = { id = \"t\" }\nagents = [{ id = \"a\" }]\n[recursion.default]\nallowed_child_types = [\"verify\"]\n",
            "t.toml",
        )
        .unwrap();
        let base = SpawnRequest {
            parent_agent: "a".into(),
            child_type: "verify".into(),
            parent_depth: 0,
            children_spawned: 0,
            total_episodes: 1,
            parent_budget: BTreeMap::from([(
                "tokens".to_owned(),
                Meter {
                    limit: 100,
                    used: 0,
                },
            )]),
            child_budget: BTreeMap::new(),
            consecutive_no_delta: 0,
            same_error_repeats: 0,
            human_authorized: false,
        };
        assert_eq!(b.decide_spawn(&base).stop_condition, None);
        let deep = SpawnRequest {
            parent_depth: 2,
            ..base.clone()
        };
        assert_eq!(
            b.decide_spawn(&deep).stop_condition,
            Some(StopCondition::DepthExceeded)
        );
        let spent = SpawnRequest {
            parent_budget: BTreeMap::from([(
                "tokens".to_owned(),
                Meter {
                    limit: 100,
                    used: 100,
                },
            )]),
            ..base.clone()
        };
        assert_eq!(
            b.decide_spawn(&spent).stop_condition,
            Some(StopCondition::BudgetExhausted)
        );
        let same = SpawnRequest {
            consecutive_no_delta: 2,
            ..base.clone()
        };
        assert_eq!(
            b.decide_spawn(&same).stop_condition,
            Some(StopCondition::NoNewInformation)
        );
        let failing = SpawnRequest {
            same_error_repeats: 3,
            ..base.clone()
        };
        assert_eq!(
            b.decide_spawn(&failing).stop_condition,
            Some(StopCondition::FailureRepeats)
        );
        let greedy = SpawnRequest {
            child_budget: BTreeMap::from([("tokens".to_owned(), 51)]),
            ..base
        };
        let d = b.decide_spawn(&greedy);
        assert_eq!(d.stop_condition, Some(StopCondition::PolicyBlocks));
        assert_eq!(
            &*d.decision.rule_id,
            "recursion.budget.child_max_share_percent"
        );
    }

    #[test]
    fn meters_cross_thresholds_without_overflow() {
        let m = Meter {
            limit: u64::MAX,
            used: u64::MAX / 10 * 7 + 10,
        };
        assert!(m.crossed(70));
        assert!(!Meter { limit: 10, used: 6 }.crossed(70));
    }
}
