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
}

/// Every tool pattern of the bundle, parsed once; agents' lists by agent position.
pub(crate) struct Patterns {
    deny: Vec<PatternRule>,
    review: Vec<PatternRule>,
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
        Self {
            deny: patterns(&spec.deny_patterns),
            review: patterns(&spec.review_patterns),
            allowed,
            must_not,
        }
    }
}

fn patterns(rules: &[ToolPatternRule]) -> Vec<PatternRule> {
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
        if let Some(r) = self.tools.deny.iter().find(|r| r.pattern.matches(&parsed)) {
            chain.push(RuleStep::new(
                r.id.clone(),
                StepOutcome::Applied,
                format!("deny pattern `{}`", r.text),
            ));
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
        if let Some(r) = self
            .tools
            .review
            .iter()
            .find(|r| r.pattern.matches(&parsed))
        {
            chain.push(RuleStep::new(
                r.id.clone(),
                StepOutcome::Applied,
                format!("review pattern `{}`", r.text),
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
}
