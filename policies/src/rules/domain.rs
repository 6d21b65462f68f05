//! Domain reads and writes (docs/governance.md#write-domains), the `[[domains]]` section and
//! each agent's `write_scopes` and `read_scopes`: only the designated writer may write a
//! domain, and only one agent may write it per episode. Writes are append-only versions.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::sort_dedup;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::ptr;
use crate::model::BundleSpec;
use crate::validate::Checker;

/// A write domain (docs/governance.md#write-domains).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DomainSpec {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Only one agent in the whole bundle may hold this domain in its `write_scopes`.
    #[serde(default = "yes")]
    pub exclusive: bool,
}

fn yes() -> bool {
    true
}

/// Domains are declared once; agents write and read only declared domains, and an
/// exclusive domain has a single writer.
pub(crate) fn check(c: &mut Checker<'_>) {
    let spec = c.spec;
    let mut ids = BTreeSet::new();
    let mut exclusive_ids = BTreeSet::new();
    for (i, d) in spec.domains.iter().enumerate() {
        if d.exclusive {
            exclusive_ids.insert(d.id.as_str());
        }
        if !ids.insert(d.id.as_str()) {
            c.push(
                ptr!["domains", i, "id"],
                Code::Duplicate,
                format!("domain `{}` is declared twice", d.id),
            );
        }
    }
    let mut writers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (i, a) in spec.agents.iter().enumerate() {
        for (j, d) in a.write_scopes.iter().enumerate() {
            if !ids.contains(d.as_str()) {
                c.push(
                    ptr!["agents", i, "write_scopes", j],
                    Code::UnknownReference,
                    format!("unknown domain `{d}`"),
                );
                continue;
            }
            let exclusive = exclusive_ids.contains(d.as_str());
            let list = writers.entry(d.as_str()).or_default();
            if let (true, Some(owner)) = (exclusive, list.first().copied()) {
                c.push(
                    ptr!["agents", i, "write_scopes", j],
                    Code::Contradiction,
                    format!(
                        "domain `{d}` has a single owner (`{owner}`); `{}` cannot also write it",
                        a.id
                    ),
                );
            } else {
                list.push(a.id.as_str());
            }
        }
        for (j, d) in a.read_scopes.iter().enumerate() {
            if d != "*" && !ids.contains(d.as_str()) {
                c.push(
                    ptr!["agents", i, "read_scopes", j],
                    Code::UnknownReference,
                    format!("unknown domain `{d}`"),
                );
            }
        }
    }
}

/// Normal form: domains sorted by id, each agent's scopes sorted.
pub(crate) fn normalize(s: &mut BundleSpec) {
    s.domains.sort_by(|a, b| a.id.cmp(&b.id));
    for a in &mut s.agents {
        sort_dedup(&mut a.write_scopes);
        sort_dedup(&mut a.read_scopes);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_writer_writes_and_only_one_agent_per_episode() {
        let src = r#"
            bundle = { id = "t" }
            domains = [{ id = "d" }]
            agents = [{ id = "w", write_scopes = ["d"] }, { id = "r", read_scopes = ["*"] }, { id = "x" }]
        "#;
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        assert!(b.decide_domain_write("w", "d", None).is_allowed());
        assert!(b.decide_domain_write("w", "d", Some("w")).is_allowed());
        assert_eq!(
            &*b.decide_domain_write("w", "d", Some("r")).rule_id,
            "single_owner_write"
        );
        assert_eq!(&*b.decide_domain_write("r", "d", None).rule_id, "domains.d");
        assert!(!b.decide_domain_write("w", "nowhere", None).is_allowed());
        assert!(b.decide_domain_read("r", "d").is_allowed());
        assert!(b.decide_domain_read("w", "d").is_allowed());
        assert!(!b.decide_domain_read("x", "d").is_allowed());
    }
}
