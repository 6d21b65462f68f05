//! Spawning a child episode (docs/governance.md#recursion-limits,
//! docs/governance.md#stop-conditions, docs/governance.md#budgets), the `[recursion]` section:
//! recursion limits, child types, stop conditions and the budget rules (a child gets at most 50%
//! of its parent's remaining budget; past 70% an episode must finalize or escalate, not recurse).

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::sort_dedup;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::model::BundleSpec;
use crate::rules::recursion_class::RecursionClasses;
use crate::validate::Checker;

/// Recursion depth no bundle can raise: `max_depth` defaults to 2 and never exceeds 4
/// (docs/governance.md#recursion-limits).
pub const HARD_MAX_DEPTH: u32 = 4;

/// Recursion policies: a default plus named policies for given parent agents.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecursionSection {
    #[serde(default)]
    pub default: RecursionPolicy,
    #[serde(default)]
    pub policies: Vec<RecursionPolicy>,
    #[serde(default)]
    pub budget: BudgetRules,
    /// What each class of child episode is for (`recursion_class.rs`).
    #[serde(default, skip_serializing_if = "RecursionClasses::is_default")]
    pub classes: RecursionClasses,
}

/// A recursion policy (docs/governance.md#recursion-limits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecursionPolicy {
    #[serde(default = "default_recursion_id")]
    pub id: String,
    /// Parent agents this policy governs (empty for the default policy).
    #[serde(default)]
    pub agents: Vec<String>,
    /// Default 2; never more than 4.
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
    #[serde(default = "default_max_children")]
    pub max_children: u32,
    #[serde(default = "default_max_total_episodes")]
    pub max_total_episodes: u32,
    /// Deny by default: only these child types may be spawned.
    #[serde(default)]
    pub allowed_child_types: Vec<String>,
    #[serde(default)]
    pub forbidden_child_types: Vec<String>,
    #[serde(default = "default_stop_conditions")]
    pub stop_conditions: Vec<StopCondition>,
    /// "No new information": this many consecutive children without delta stop recursion.
    #[serde(default = "default_no_delta_limit")]
    pub no_delta_limit: u32,
    /// "Failure repeats": the same error class this many times stops recursion.
    #[serde(default = "default_failure_repeat_limit")]
    pub failure_repeat_limit: u32,
}

impl Default for RecursionPolicy {
    fn default() -> Self {
        Self {
            id: default_recursion_id(),
            agents: Vec::new(),
            max_depth: default_max_depth(),
            max_children: default_max_children(),
            max_total_episodes: default_max_total_episodes(),
            allowed_child_types: Vec::new(),
            forbidden_child_types: Vec::new(),
            stop_conditions: default_stop_conditions(),
            no_delta_limit: default_no_delta_limit(),
            failure_repeat_limit: default_failure_repeat_limit(),
        }
    }
}

fn default_recursion_id() -> String {
    "recursion.default".to_owned()
}

fn default_max_depth() -> u32 {
    2
}

fn default_max_children() -> u32 {
    6
}

fn default_max_total_episodes() -> u32 {
    12
}

fn default_no_delta_limit() -> u32 {
    2
}

fn default_failure_repeat_limit() -> u32 {
    3
}

fn default_stop_conditions() -> Vec<StopCondition> {
    vec![
        StopCondition::BudgetExhausted,
        StopCondition::DepthExceeded,
        StopCondition::NoNewInformation,
        StopCondition::FailureRepeats,
        StopCondition::PolicyBlocks,
        StopCondition::SuccessAchieved,
    ]
}

/// The six stop conditions of an episode (docs/governance.md#stop-conditions).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StopCondition {
    BudgetExhausted,
    DepthExceeded,
    NoNewInformation,
    FailureRepeats,
    PolicyBlocks,
    SuccessAchieved,
}

/// Budget rules (docs/governance.md#budgets).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetRules {
    /// A child may take at most this share of its parent's remaining budget.
    #[serde(default = "default_child_share")]
    pub child_max_share_percent: u8,
    /// An episode past this share of its budget must finalize or escalate.
    #[serde(default = "default_escalate_at")]
    pub finalize_or_escalate_at_percent: u8,
}

impl Default for BudgetRules {
    fn default() -> Self {
        Self {
            child_max_share_percent: default_child_share(),
            finalize_or_escalate_at_percent: default_escalate_at(),
        }
    }
}

fn default_child_share() -> u8 {
    50
}

fn default_escalate_at() -> u8 {
    70
}

/// Limits stay under the hard maximum, child types are not both allowed and forbidden,
/// every named policy governs agents of its own, and budget shares are percentages.
pub(crate) fn check(c: &mut Checker<'_>) {
    let spec = c.spec;
    let rs = &spec.recursion;
    check_policy(c, ptr!["recursion", "default"], &rs.default);
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for (i, r) in rs.policies.iter().enumerate() {
        let p = ptr!["recursion", "policies", i];
        check_policy(c, p.clone(), r);
        if r.agents.is_empty() {
            c.push(
                p.key("agents"),
                Code::InvalidValue,
                "a named recursion policy must name the agents it governs",
            );
        }
        for (j, a) in r.agents.iter().enumerate() {
            if let Some(prev) = owner.insert(a.as_str(), r.id.as_str()) {
                c.push(
                    p.key("agents").index(j),
                    Code::Duplicate,
                    format!("agent `{a}` is governed by both `{prev}` and `{}`", r.id),
                );
            }
        }
    }
    for (field, v) in [
        ("child_max_share_percent", rs.budget.child_max_share_percent),
        (
            "finalize_or_escalate_at_percent",
            rs.budget.finalize_or_escalate_at_percent,
        ),
    ] {
        if v == 0 || v > 100 {
            c.push(
                ptr!["recursion", "budget", field],
                Code::InvalidValue,
                format!("{field} must be between 1 and 100"),
            );
        }
    }
}

fn check_policy(c: &mut Checker<'_>, p: Pointer, r: &RecursionPolicy) {
    if r.max_depth > HARD_MAX_DEPTH {
        c.push(
            p.key("max_depth"),
            Code::HardMaximumExceeded,
            format!(
                "max_depth {} exceeds the hard maximum of {HARD_MAX_DEPTH}",
                r.max_depth
            ),
        );
    }
    let forbidden: BTreeSet<&String> = r.forbidden_child_types.iter().collect();
    for (j, t) in r.allowed_child_types.iter().enumerate() {
        if forbidden.contains(t) {
            c.push(
                p.key("allowed_child_types").index(j),
                Code::Contradiction,
                format!("child type `{t}` is both allowed and forbidden"),
            );
        }
    }
    for (j, a) in r.agents.iter().enumerate() {
        c.agent_ref(p.key("agents").index(j), a, false);
    }
}

/// The recursion policies' rule ids.
pub(crate) fn rule_ids(spec: &BundleSpec, ids: &mut Vec<(String, Pointer)>) {
    ids.push((
        spec.recursion.default.id.clone(),
        ptr!["recursion", "default"],
    ));
    ids.extend(
        spec.recursion
            .policies
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), ptr!["recursion", "policies", i, "id"])),
    );
}

/// Normal form: named policies sorted by id; each policy's agents, child types and stop
/// conditions sorted.
pub(crate) fn normalize(s: &mut BundleSpec) {
    normalize_policy(&mut s.recursion.default);
    s.recursion.policies.iter_mut().for_each(normalize_policy);
    s.recursion.policies.sort_by(|a, b| a.id.cmp(&b.id));
}

fn normalize_policy(r: &mut RecursionPolicy) {
    sort_dedup(&mut r.agents);
    sort_dedup(&mut r.allowed_child_types);
    sort_dedup(&mut r.forbidden_child_types);
    r.stop_conditions.sort();
    r.stop_conditions.dedup();
}

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
        if stops.contains(&StopCondition::BudgetExhausted)
            && let Some((dim, _)) = req.parent_budget.iter().find(|(_, m)| m.remaining() == 0)
        {
            return stop(
                StopCondition::BudgetExhausted,
                pid,
                format!("stop: budget exhausted ({dim})"),
                chain,
            );
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

    #[test]
    fn hard_max_depth_cannot_be_raised() {
        let s: BundleSpec =
            toml::from_str("bundle = { id = \"t\" }\n[recursion.default]\nmax_depth = 5\n")
                .unwrap();
        let issues = crate::validate::validate(&s);
        assert!(issues.iter().any(|i| i.code == Code::HardMaximumExceeded
            && i.pointer.to_string() == "/recursion/default/max_depth"));
    }
}
