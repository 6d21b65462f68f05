//! Outside events (docs/governance.md#outside-events), `[[signals]]`: which named events
//! may reach a run, who may send each, which agents may wait for it, the domain its
//! content is written to (by its senders only) and the domain agents annotate it in.
//!
//! An event's content crosses the same gate as any other: its delivery to an agent is
//! scoped as content from `events` (a [content source](crate::CONTENT_SOURCES)), so
//! handoff rules may name `from_agent_id = "events"`.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::sort_dedup;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::ptr;
use crate::model::BundleSpec;
use crate::validate::Checker;

/// The default `max_payload_bytes`: 64 KiB.
pub const DEFAULT_MAX_SIGNAL_BYTES: u64 = 64 * 1024;

/// The largest `max_payload_bytes` a bundle may set: 1 MiB.
pub const MAX_SIGNAL_BYTES: u64 = 1024 * 1024;

/// One kind of outside event a run may receive (docs/governance.md#outside-events).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalSpec {
    /// The event's name, as `docket signal RUN NAME` and an agent's `wait` name it.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Who may send it: the names senders give as `by` (an ingestion service, a person).
    pub senders: Vec<String>,
    /// The agents that may wait for it and receive its content.
    pub agents: Vec<String>,
    /// A declared domain each received event is written to, as its next version, by its
    /// sender: no agent may hold it in its `write_scopes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// A declared domain, other than `domain`, where agents annotate these events (labels,
    /// risk flags): each write there must name a received event of this name
    /// (`"signal_id"`), and never alters it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<String>,
    /// The largest payload accepted, in bytes of its JSON (default 64 KiB, at most 1 MiB).
    #[serde(default = "default_max_payload_bytes")]
    pub max_payload_bytes: u64,
}

fn default_max_payload_bytes() -> u64 {
    DEFAULT_MAX_SIGNAL_BYTES
}

/// Names are unique and well formed, senders and agents listed and known, domains
/// declared, a signal's domain written by no agent and its annotations in another domain.
pub(crate) fn check(c: &mut Checker<'_>) {
    let spec = c.spec;
    let domains: BTreeSet<&str> = spec.domains.iter().map(|d| d.id.as_str()).collect();
    let mut names = BTreeSet::new();
    for (i, s) in spec.signals.iter().enumerate() {
        let well_formed = !s.name.is_empty()
            && s.name.len() <= 64
            && s.name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '-' | '.'));
        if !well_formed {
            c.push(
                ptr!["signals", i, "name"],
                Code::InvalidValue,
                format!(
                    "signal name {:?} must be 1 to 64 letters, digits, `_`, `-` or `.`",
                    s.name
                ),
            );
        }
        if !names.insert(s.name.as_str()) {
            c.push(
                ptr!["signals", i, "name"],
                Code::Duplicate,
                format!("signal `{}` is declared twice", s.name),
            );
        }
        if s.senders.iter().all(|x| x.trim().is_empty()) {
            c.push(
                ptr!["signals", i, "senders"],
                Code::InvalidValue,
                format!("signal `{}` names no sender: nobody could send it", s.name),
            );
        }
        if s.agents.is_empty() {
            c.push(
                ptr!["signals", i, "agents"],
                Code::InvalidValue,
                format!(
                    "signal `{}` names no agent: nobody could wait for it",
                    s.name
                ),
            );
        }
        for (j, a) in s.agents.iter().enumerate() {
            if !c.agents.contains(a.as_str()) {
                c.push(
                    ptr!["signals", i, "agents", j],
                    Code::UnknownReference,
                    format!("unknown agent `{a}`"),
                );
            }
        }
        if s.max_payload_bytes == 0 || s.max_payload_bytes > MAX_SIGNAL_BYTES {
            c.push(
                ptr!["signals", i, "max_payload_bytes"],
                Code::InvalidValue,
                format!("max_payload_bytes must be 1 to {MAX_SIGNAL_BYTES} (1 MiB)"),
            );
        }
        for (field, domain) in [("domain", &s.domain), ("annotations", &s.annotations)] {
            let Some(domain) = domain else { continue };
            if !domains.contains(domain.as_str()) {
                c.push(
                    ptr!["signals", i, field],
                    Code::UnknownReference,
                    format!("unknown domain `{domain}`"),
                );
            }
        }
        if let (Some(domain), Some(notes)) = (&s.domain, &s.annotations)
            && domain == notes
        {
            c.push(
                ptr!["signals", i, "annotations"],
                Code::Contradiction,
                format!(
                    "signal `{}` is annotated in its own domain `{domain}`: annotations go in another domain, so an event is never altered",
                    s.name
                ),
            );
        }
        if let Some(domain) = &s.domain {
            for (k, a) in spec.agents.iter().enumerate() {
                if let Some(j) = a.write_scopes.iter().position(|d| d == domain) {
                    c.push(
                        ptr!["agents", k, "write_scopes", j],
                        Code::Contradiction,
                        format!(
                            "domain `{domain}` holds signal `{}`, written only by its senders; `{}` cannot write it (agents annotate it in its `annotations` domain)",
                            s.name, a.id
                        ),
                    );
                }
            }
        }
    }
}

/// Normal form: signals sorted by name, their senders and agents sorted.
pub(crate) fn normalize(s: &mut BundleSpec) {
    s.signals.sort_by(|a, b| a.name.cmp(&b.name));
    for signal in &mut s.signals {
        sort_dedup(&mut signal.senders);
        sort_dedup(&mut signal.agents);
    }
}

impl PolicyBundle {
    /// The declared signal `name`.
    #[must_use]
    pub fn signal(&self, name: &str) -> Option<&SignalSpec> {
        self.spec.signals.iter().find(|s| s.name == name)
    }

    /// The signal whose content is written to `domain`, if any.
    #[must_use]
    pub fn signal_writing(&self, domain: &str) -> Option<&SignalSpec> {
        self.spec
            .signals
            .iter()
            .find(|s| s.domain.as_deref() == Some(domain))
    }

    /// The signal annotated in `domain`, if any.
    #[must_use]
    pub fn signal_annotated_in(&self, domain: &str) -> Option<&SignalSpec> {
        self.spec
            .signals
            .iter()
            .find(|s| s.annotations.as_deref() == Some(domain))
    }

    /// Whether `by` may send the event `name` with a payload of `payload_bytes`: it is
    /// declared, `by` is one of its senders, and the payload is within its limit.
    #[must_use]
    pub fn decide_signal(&self, name: &str, by: &str, payload_bytes: usize) -> PolicyDecision {
        let k = DecisionKind::Signal;
        let Some(s) = self.signal(name) else {
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                "deny_by_default",
                format!("the bundle declares no signal `{name}`"),
                Vec::new(),
            );
        };
        if !s.senders.iter().any(|x| x == by) {
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                format!("signals.{name}.senders"),
                format!(
                    "`{by}` may not send `{name}` (senders: {})",
                    s.senders.join(", ")
                ),
                Vec::new(),
            );
        }
        if u64::try_from(payload_bytes).map_or(true, |n| n > s.max_payload_bytes) {
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                format!("signals.{name}.max_payload_bytes"),
                format!(
                    "the payload of `{name}` is {payload_bytes} bytes, over the {} the bundle allows",
                    s.max_payload_bytes
                ),
                Vec::new(),
            );
        }
        conclude(
            k,
            Verdict::Allow,
            self.hash,
            format!("signals.{name}.senders"),
            format!("`{by}` sends `{name}`"),
            Vec::new(),
        )
    }

    /// Whether `agent` may wait for the event `name` (and receive its content).
    #[must_use]
    pub fn decide_signal_wait(&self, agent: &str, name: &str) -> PolicyDecision {
        let k = DecisionKind::Wait;
        let Some(s) = self.signal(name) else {
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                "deny_by_default",
                format!("{agent} waits for `{name}`, which the bundle does not declare"),
                Vec::new(),
            );
        };
        let rule = format!("signals.{name}.agents");
        if !s.agents.iter().any(|a| a == agent) {
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                rule,
                format!(
                    "`{name}` is delivered to {}, not to {agent}",
                    s.agents.join(", ")
                ),
                Vec::new(),
            );
        }
        conclude(
            k,
            Verdict::Allow,
            self.hash,
            rule,
            format!("{agent} may wait for `{name}`"),
            Vec::new(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::validate;

    const BASE: &str = r#"
bundle = { id = "s" }
agents = [{ id = "engage", write_scopes = ["notes"] }, { id = "other" }]
domains = [{ id = "comments" }, { id = "notes" }]
"#;

    fn bundle(signals: &str) -> PolicyBundle {
        PolicyBundle::from_toml_str(&format!("{BASE}{signals}"), "s.toml").unwrap()
    }

    fn problems(signals: &str) -> Vec<(String, String)> {
        let spec: BundleSpec = toml::from_str(&format!("{BASE}{signals}")).unwrap();
        validate(&spec)
            .into_iter()
            .map(|i| (i.pointer.to_string(), i.message))
            .collect()
    }

    const COMMENT: &str = r#"
[[signals]]
name = "comment"
senders = ["ingestion"]
agents = ["engage"]
domain = "comments"
annotations = "notes"
max_payload_bytes = 100
"#;

    #[test]
    fn only_a_sender_sends_and_only_a_listed_agent_waits() {
        let b = bundle(COMMENT);
        let d = b.decide_signal("comment", "ingestion", 10);
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Allow, "signals.comment.senders")
        );
        let d = b.decide_signal("comment", "mallory", 10);
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, "signals.comment.senders")
        );
        assert!(d.reason.contains("ingestion"), "{}", d.reason);
        let d = b.decide_signal("comment", "ingestion", 101);
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, "signals.comment.max_payload_bytes")
        );
        let d = b.decide_signal("dm", "ingestion", 1);
        assert_eq!((d.verdict, &*d.rule_id), (Verdict::Deny, "deny_by_default"));
        assert_eq!(
            b.decide_signal_wait("engage", "comment").verdict,
            Verdict::Allow
        );
        let d = b.decide_signal_wait("other", "comment");
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, "signals.comment.agents")
        );
        assert_eq!(b.signal_writing("comments").unwrap().name, "comment");
        assert_eq!(b.signal_annotated_in("notes").unwrap().name, "comment");
        assert!(b.signal_writing("notes").is_none());
    }

    #[test]
    fn a_signals_domain_has_no_agent_writer_and_is_not_its_own_annotations() {
        let found = problems(
            r#"
[[signals]]
name = "comment"
senders = ["ingestion"]
agents = ["engage"]
domain = "notes"
annotations = "notes"
"#,
        );
        assert!(
            found.iter().any(|(p, m)| p == "/agents/0/write_scopes/0"
                && m.contains("written only by its senders")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|(p, m)| p == "/signals/0/annotations" && m.contains("never altered")),
            "{found:?}"
        );
    }

    #[test]
    fn a_signal_names_its_senders_agents_and_declared_domains() {
        let found = problems(
            r#"
[[signals]]
name = "bad name!"
senders = []
agents = ["nobody"]
domain = "undeclared"
max_payload_bytes = 0
"#,
        );
        let pointers: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            pointers,
            [
                "/signals/0/name",
                "/signals/0/senders",
                "/signals/0/agents/0",
                "/signals/0/max_payload_bytes",
                "/signals/0/domain"
            ],
            "{found:?}"
        );
    }
}
