//! Domain reads and writes (docs/governance.md#write-domains): only the designated writer may write
//! a domain, and only one agent may write it per episode. Writes are append-only versions.

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};

impl PolicyBundle {
    /// May `agent` write `domain`? `episode_writer` is the agent that already wrote this
    /// domain in the current episode, if any (single-owner rule).
    pub fn decide_domain_write(
        &self,
        agent: &str,
        domain: &str,
        episode_writer: Option<&str>,
    ) -> PolicyDecision {
        let k = DecisionKind::DomainWrite;
        let drule = format!("domains.{domain}");
        let Some(a) = self.agent(agent).and_then(|i| self.spec.agents.get(i)) else {
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                "agents.unknown",
                format!("unknown agent `{agent}`"),
                Vec::new(),
            );
        };
        if !self.spec.domains.iter().any(|d| d.id == domain) {
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                "deny_by_default",
                format!("unknown domain `{domain}`"),
                Vec::new(),
            );
        }
        let scope_rule = format!("agents.{agent}.write_scopes");
        if !a.write_scopes.iter().any(|d| d == domain) {
            let chain = vec![RuleStep::new(
                scope_rule.as_str(),
                StepOutcome::NotApplicable,
                format!("`{domain}` not in write_scopes"),
            )];
            let writers: Vec<&str> = self
                .spec
                .agents
                .iter()
                .filter(|x| x.write_scopes.iter().any(|d| d == domain))
                .map(|x| x.id.as_str())
                .collect();
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                drule,
                format!(
                    "`{agent}` may not write `{domain}` (writers: {})",
                    writers.join(", ")
                ),
                chain,
            );
        }
        let mut chain = vec![RuleStep::new(
            scope_rule.as_str(),
            StepOutcome::Applied,
            format!("`{domain}` in write_scopes"),
        )];
        if let Some(w) = episode_writer.filter(|w| *w != agent) {
            chain.push(RuleStep::new(
                "single_owner_write",
                StepOutcome::Applied,
                format!("`{w}` already writes `{domain}` in this episode"),
            ));
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                "single_owner_write",
                format!("only one agent may write `{domain}` per episode, and `{w}` already does"),
                chain,
            );
        }
        conclude(
            k,
            Verdict::Allow,
            self.hash,
            scope_rule,
            format!("`{agent}` writes `{domain}` (append-only: a new version, history unchanged)"),
            chain,
        )
    }

    /// May `agent` read `domain`? Writers read what they write; `*` in read_scopes reads all.
    pub fn decide_domain_read(&self, agent: &str, domain: &str) -> PolicyDecision {
        let k = DecisionKind::DomainRead;
        let Some(a) = self.agent(agent).and_then(|i| self.spec.agents.get(i)) else {
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                "agents.unknown",
                format!("unknown agent `{agent}`"),
                Vec::new(),
            );
        };
        let rule = format!("agents.{agent}.read_scopes");
        let known = self.spec.domains.iter().any(|d| d.id == domain);
        if known
            && a.read_scopes
                .iter()
                .chain(a.write_scopes.iter())
                .any(|d| d == domain || d == "*")
        {
            return conclude(
                k,
                Verdict::Allow,
                self.hash,
                rule,
                format!("`{agent}` may read `{domain}`"),
                Vec::new(),
            );
        }
        conclude(
            k,
            Verdict::Deny,
            self.hash,
            "deny_by_default",
            format!("`{domain}` is not in `{agent}`'s read scopes"),
            Vec::new(),
        )
    }
}
