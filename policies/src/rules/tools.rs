//! Tool calls (docs/governance.md#tools), the `[[deny_patterns]]` and `[[review_patterns]]`
//! sections and each agent's `allowed_tools` and `must_not_tools`: absolute deny patterns > the
//! agent's MUST NOT rules > task restrictions > the agent's allowed tools (deny when none
//! matches) > review patterns (need a human). A deny pattern blocks every agent whatever it is
//! allowed; only a new bundle (a human editing policy) can lift it. Pattern syntax:
//! `toolpattern.rs`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::sort_dedup;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::model::BundleSpec;
use crate::toolpattern::ToolPattern;
use crate::validate::Checker;

/// A tool-call pattern with its reason: `Tool` or `Tool(argument glob)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolPatternRule {
    pub id: String,
    pub pattern: String,
    #[serde(default)]
    pub reason: String,
    /// The pattern's safety tier: when a deny and a review pattern both match a call, the
    /// higher tier decides (docs/governance.md#safety-tiers). Unset, a deny pattern is
    /// `absolute` (`universal` under `[overrides] deny_patterns_overridable`) and a review
    /// pattern `operational`; left out of the canonical form when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
}

/// Safety tiers, highest first: absolute > universal > operational
/// (docs/governance.md#safety-tiers).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Never overridden: by a lower rule, an agent, or a person.
    Absolute,
    /// Holds for every agent; a person whose role outranks it may override the block it
    /// causes.
    Universal,
    /// An operational safety pattern.
    Operational,
}

impl Tier {
    /// The tier's name as the bundle writes it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Absolute => "absolute",
            Self::Universal => "universal",
            Self::Operational => "operational",
        }
    }
}

/// Every deny, review, allowed and MUST NOT pattern parses.
pub(crate) fn check(c: &mut Checker<'_>) {
    let spec = c.spec;
    for (section, rules) in [
        ("deny_patterns", &spec.deny_patterns),
        ("review_patterns", &spec.review_patterns),
    ] {
        for (i, r) in rules.iter().enumerate() {
            if let Err(e) = ToolPattern::parse(&r.pattern) {
                c.push(ptr![section, i, "pattern"], Code::InvalidValue, e);
            }
        }
    }
    for (i, a) in spec.agents.iter().enumerate() {
        for (field, pats) in [
            ("allowed_tools", &a.allowed_tools),
            ("must_not_tools", &a.must_not_tools),
        ] {
            for (j, pat) in pats.iter().enumerate() {
                if let Err(e) = ToolPattern::parse(pat) {
                    c.push(ptr!["agents", i, field, j], Code::InvalidValue, e);
                }
            }
        }
    }
}

/// The deny and review patterns' rule ids.
pub(crate) fn rule_ids(spec: &BundleSpec, ids: &mut Vec<(String, Pointer)>) {
    for (s, rules) in [
        ("deny_patterns", &spec.deny_patterns),
        ("review_patterns", &spec.review_patterns),
    ] {
        ids.extend(
            rules
                .iter()
                .enumerate()
                .map(|(i, r)| (r.id.clone(), ptr![s, i, "id"])),
        );
    }
}

/// Normal form: deny and review patterns sorted by id, each agent's tool lists sorted.
pub(crate) fn normalize(s: &mut BundleSpec) {
    s.deny_patterns.sort_by(|a, b| a.id.cmp(&b.id));
    s.review_patterns.sort_by(|a, b| a.id.cmp(&b.id));
    for a in &mut s.agents {
        sort_dedup(&mut a.allowed_tools);
        sort_dedup(&mut a.must_not_tools);
    }
}

/// A compiled tool pattern with the rule it comes from.
#[derive(Debug, Clone)]
pub(crate) struct PatternRule {
    pub id: Arc<str>,
    pub pattern: ToolPattern,
    pub text: Arc<str>,
    pub reason: Arc<str>,
    /// Its tier, the default filled in.
    pub tier: Tier,
}

/// Every tool pattern of the bundle, parsed once; agents' lists by agent position.
pub(crate) struct Patterns {
    deny: Vec<PatternRule>,
    review: Vec<PatternRule>,
    /// Whether any pattern sets its tier: only then do decisions name tiers.
    tiers: bool,
    allowed: Vec<Vec<ToolPattern>>,
    must_not: Vec<Vec<(Arc<str>, ToolPattern)>>,
}

impl Patterns {
    pub(crate) fn compile(spec: &BundleSpec) -> Self {
        let allowed = spec
            .agents
            .iter()
            .map(|a| {
                a.allowed_tools
                    .iter()
                    .filter_map(|p| ToolPattern::parse(p).ok())
                    .collect()
            })
            .collect();
        let must_not = spec
            .agents
            .iter()
            .map(|a| {
                a.must_not_tools
                    .iter()
                    .filter_map(|p| {
                        ToolPattern::parse(p)
                            .ok()
                            .map(|t| (Arc::from(p.as_str()), t))
                    })
                    .collect()
            })
            .collect();
        let deny_default = if spec.overrides.deny_patterns_overridable {
            Tier::Universal
        } else {
            Tier::Absolute
        };
        let absolute = |id: &str| spec.overrides.absolute.iter().any(|a| a == id);
        let tiered = |rules: &[ToolPatternRule], default: Tier| {
            let mut compiled = patterns(rules, default);
            for r in &mut compiled {
                if absolute(&r.id) {
                    r.tier = Tier::Absolute;
                }
            }
            compiled
        };
        Self {
            deny: tiered(&spec.deny_patterns, deny_default),
            review: tiered(&spec.review_patterns, Tier::Operational),
            tiers: spec
                .deny_patterns
                .iter()
                .chain(&spec.review_patterns)
                .any(|r| r.tier.is_some()),
            allowed,
            must_not,
        }
    }
}

fn patterns(rules: &[ToolPatternRule], default: Tier) -> Vec<PatternRule> {
    rules
        .iter()
        .filter_map(|r| {
            ToolPattern::parse(&r.pattern)
                .ok()
                .map(|pattern| PatternRule {
                    id: r.id.as_str().into(),
                    pattern,
                    text: r.pattern.as_str().into(),
                    reason: r.reason.as_str().into(),
                    tier: r.tier.unwrap_or(default),
                })
        })
        .collect()
}

impl PolicyBundle {
    /// May `agent` make `call` (`Tool` or `Tool(argument)`)? `task_denied` are extra
    /// patterns the current task forbids; a task can restrict, never grant.
    pub fn decide_tool_call(
        &self,
        agent: &str,
        call: &str,
        task_denied: &[String],
    ) -> PolicyDecision {
        let k = DecisionKind::ToolCall;
        let deny = |rule: &str, reason: String, chain| {
            conclude(k, Verdict::Deny, self.hash, rule, reason, chain)
        };
        let Some(ai) = self.agent(agent) else {
            return deny(
                "agents.unknown",
                format!("unknown agent `{agent}`"),
                Vec::new(),
            );
        };
        let parsed = match ToolPattern::parse(call) {
            Ok(p) => p,
            Err(e) => {
                return deny(
                    "deny_by_default",
                    format!("malformed tool call: {e}"),
                    Vec::new(),
                );
            }
        };
        let mut chain = Vec::new();
        let allowed_match = self
            .tools
            .allowed
            .get(ai)
            .and_then(|ps| ps.iter().position(|p| p.matches(&parsed)));
        // The highest tier's pattern of each kind (the first by id among equals).
        let highest = |rules: &'_ [PatternRule]| {
            rules
                .iter()
                .filter(|r| r.pattern.matches(&parsed))
                .min_by_key(|r| r.tier)
                .cloned()
        };
        let denied = highest(&self.tools.deny);
        let reviewed = highest(&self.tools.review);
        let tiers = self.tools.tiers;
        let named = |kind: &str, r: &PatternRule| {
            if tiers {
                format!("{kind} pattern `{}` (tier {})", r.text, r.tier.as_str())
            } else {
                format!("{kind} pattern `{}`", r.text)
            }
        };
        // A review pattern of a strictly higher tier outranks the deny pattern: the call
        // goes on to the agent's own rules, then to a person.
        let outranked = match (&denied, &reviewed) {
            (Some(d), Some(r)) if r.tier < d.tier => {
                chain.push(RuleStep::new(
                    d.id.clone(),
                    StepOutcome::Overridden,
                    format!(
                        "{}, below review pattern `{}` (tier {})",
                        named("deny", d),
                        r.text,
                        r.tier.as_str()
                    ),
                ));
                true
            }
            _ => false,
        };
        if let Some(r) = denied.as_ref().filter(|_| !outranked) {
            chain.push(RuleStep::new(
                r.id.clone(),
                StepOutcome::Applied,
                named("deny", r),
            ));
            if let Some(rev) = reviewed.as_ref().filter(|_| tiers) {
                chain.push(RuleStep::new(
                    rev.id.clone(),
                    StepOutcome::Overridden,
                    format!(
                        "{}, not above the deny pattern's tier {}",
                        named("review", rev),
                        r.tier.as_str()
                    ),
                ));
            }
            if let Some(i) = allowed_match {
                let text = self
                    .spec
                    .agents
                    .get(ai)
                    .and_then(|a| a.allowed_tools.get(i))
                    .cloned()
                    .unwrap_or_default();
                chain.push(RuleStep::new(
                    format!("agents.{agent}.allowed_tools"),
                    StepOutcome::Overridden,
                    format!("`{text}` cannot override a deny pattern"),
                ));
            }
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                r.id.clone(),
                format!("`{call}` matches deny pattern `{}`: {}", r.text, r.reason),
                chain,
            );
        }
        if let Some((text, _)) = self
            .tools
            .must_not
            .get(ai)
            .and_then(|ps| ps.iter().find(|(_, p)| p.matches(&parsed)))
        {
            let rule = format!("agents.{agent}.must_not_tools");
            chain.push(RuleStep::new(
                rule.as_str(),
                StepOutcome::Applied,
                format!("MUST NOT `{text}`"),
            ));
            return deny(&rule, format!("`{agent}` MUST NOT call `{text}`"), chain);
        }
        for t in task_denied {
            if ToolPattern::parse(t).is_ok_and(|p| p.matches(&parsed)) {
                chain.push(RuleStep::new(
                    "task",
                    StepOutcome::Applied,
                    format!("task forbids `{t}`"),
                ));
                return deny("task", format!("the current task forbids `{t}`"), chain);
            }
        }
        let allow_rule = format!("agents.{agent}.allowed_tools");
        if allowed_match.is_none() {
            chain.push(RuleStep::new(
                allow_rule.as_str(),
                StepOutcome::NotApplicable,
                "no allowed tool matches",
            ));
            return deny(
                &allow_rule,
                format!("`{call}` is not among `{agent}`'s allowed tools"),
                chain,
            );
        }
        chain.push(RuleStep::new(
            allow_rule.as_str(),
            StepOutcome::Applied,
            "allowed tool",
        ));
        if let Some(r) = reviewed {
            chain.push(RuleStep::new(
                r.id.clone(),
                StepOutcome::Applied,
                named("review", &r),
            ));
            return conclude(
                k,
                Verdict::NeedsApproval,
                self.hash,
                r.id.clone(),
                format!("`{call}` needs human review: {}", r.reason),
                chain,
            );
        }
        conclude(
            k,
            Verdict::Allow,
            self.hash,
            allow_rule,
            format!("`{agent}` may call `{call}`"),
            chain,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_pattern_beats_a_matching_allowed_tool() {
        let src = r#"
            bundle = { id = "t" }
            agents = [{ id = "a", allowed_tools = ["Bash"] }]
            deny_patterns = [{ id = "no-rm", pattern = "Bash(rm -rf *)", reason = "never" }]
        "#;
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        assert_eq!(
            b.decide_tool_call("a", "Bash(ls)", &[]).verdict,
            Verdict::Allow
        );
        let d = b.decide_tool_call("a", "Bash(rm -rf /)", &[]);
        assert_eq!((d.verdict, &*d.rule_id), (Verdict::Deny, "no-rm"));
        assert_eq!(d.chain.len(), 2, "the overridden allowed tool is shown");
        assert_eq!(
            b.decide_tool_call("a", "Bash(oops", &[]).verdict,
            Verdict::Deny
        );
    }

    fn tiered(deny_tier: &str, review_tier: &str, extra: &str) -> PolicyBundle {
        let src = format!(
            r#"
            bundle = {{ id = "t" }}
            agents = [{{ id = "lead", authority = "human" }}, {{ id = "a", allowed_tools = ["Bash"] }}]
            deny_patterns = [{{ id = "no-push", pattern = "Bash(git push*)", reason = "no pushes"{deny_tier} }}]
            review_patterns = [{{ id = "review-push", pattern = "Bash(git push*)", reason = "a person looks"{review_tier} }}]
            {extra}
        "#
        );
        PolicyBundle::from_toml_str(&src, "t.toml").unwrap()
    }

    #[test]
    fn the_higher_tier_decides_between_a_deny_and_a_review_pattern() {
        // Default tiers: the deny pattern (absolute) over the review pattern
        // (operational), and the chain as without tiers.
        let plain = tiered("", "", "");
        let d = plain.decide_tool_call("a", "Bash(git push)", &[]);
        assert_eq!((d.verdict, &*d.rule_id), (Verdict::Deny, "no-push"));
        assert_eq!(d.chain[0].note.as_ref(), "deny pattern `Bash(git push*)`");
        // A review pattern of a higher tier outranks the deny pattern: a person decides.
        let b = tiered(", tier = \"operational\"", ", tier = \"universal\"", "");
        let d = b.decide_tool_call("a", "Bash(git push)", &[]);
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::NeedsApproval, "review-push")
        );
        assert_eq!(d.chain[0].outcome, StepOutcome::Overridden);
        assert!(
            d.chain[0].note.contains("tier operational"),
            "{:?}",
            d.chain
        );
        assert!(
            d.chain.last().unwrap().note.contains("tier universal"),
            "{:?}",
            d.chain
        );
        // Equal tiers: the deny pattern wins, the review pattern marked overridden.
        let b = tiered(", tier = \"universal\"", ", tier = \"universal\"", "");
        let d = b.decide_tool_call("a", "Bash(git push)", &[]);
        assert_eq!((d.verdict, &*d.rule_id), (Verdict::Deny, "no-push"));
        assert_eq!(d.chain[1].rule_id.as_ref(), "review-push");
        assert_eq!(d.chain[1].outcome, StepOutcome::Overridden);
        // A tier is hashed only when set.
        assert_ne!(plain.hash(), b.hash());
        assert_eq!(plain.hash(), tiered("", "", "").hash());
    }

    #[test]
    fn only_an_absolute_deny_pattern_is_beyond_a_persons_override() {
        use crate::{Authority, OverrideRequest};
        let req = OverrideRequest {
            role: "lead",
            rule_id: "escalation.block",
            level: Authority::GlobalRules,
            deny_pattern: Some("no-push"),
        };
        let verdict = |b: &PolicyBundle| b.decide_human_override(&req).verdict;
        assert_eq!(verdict(&tiered("", "", "")), Verdict::Deny);
        assert_eq!(
            verdict(&tiered(", tier = \"universal\"", "", "")),
            Verdict::Allow
        );
        let open = "[overrides]\ndeny_patterns_overridable = true";
        assert_eq!(verdict(&tiered("", "", open)), Verdict::Allow);
        assert_eq!(
            verdict(&tiered(", tier = \"absolute\"", "", open)),
            Verdict::Deny,
            "a pattern's own absolute tier holds over the bundle-wide setting"
        );
        let listed = "[overrides]\ndeny_patterns_overridable = true\nabsolute = [\"no-push\"]";
        assert_eq!(verdict(&tiered("", "", listed)), Verdict::Deny);
        let contradiction = "bundle = { id = \"t\" }\ndeny_patterns = [{ id = \"p\", pattern = \"Bash\", tier = \"universal\" }]\n[overrides]\nabsolute = [\"p\"]\n";
        let e = PolicyBundle::from_toml_str(contradiction, "t.toml").unwrap_err();
        assert!(
            e.to_string().contains("its tier is universal")
                || format!("{e:?}").contains("its tier is universal"),
            "{e:?}"
        );
    }
}
