//! Tool calls (docs/governance.md#tools): absolute deny patterns > the agent's MUST NOT rules >
//! task restrictions > the agent's allowed tools (deny when none matches) > review patterns (need a
//! human). A deny pattern blocks every agent whatever it is allowed; only a new bundle (a human
//! editing policy) can lift it.

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::toolpattern::ToolPattern;

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
            .allowed_tools
            .get(ai)
            .and_then(|ps| ps.iter().position(|p| p.matches(&parsed)));
        if let Some(r) = self
            .deny_patterns
            .iter()
            .find(|r| r.pattern.matches(&parsed))
        {
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
            .must_not_tools
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
            .review_patterns
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
