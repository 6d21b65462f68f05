//! Domain reads and writes (docs/governance.md#write-domains), the `[[domains]]` section and
//! each agent's `write_scopes` and `read_scopes`: only the designated writer may write a
//! domain, and only one agent may write it per episode. Writes are append-only versions,
//! and a domain's content rules (size, output type, required references) hold for each.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::sort_dedup;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::fieldpath;
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
    /// The output type (`id` or `id@version`, of `[[output_types]]`) every version's content
    /// must satisfy: its JSON Schema is the domain's content schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Field paths (dotted, `*` for any key, arrays transparent) every version must fill:
    /// present and not `null`, `""`, `[]` or `{}` wherever the path leads, in every element
    /// of an array on the way (an empty array on the way holds nothing to require). The
    /// references a reader follows: the pointers a plan node cites, an edge's evidence, an
    /// asset's prompt and provider config.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_refs: Vec<String>,
    /// The most bytes a version's content may take, as canonical JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Field paths (as `required_refs`) whose values are replaced by `"[redacted]"` in
    /// every version kept: raw payload pointers readers must not follow. The content rules
    /// are checked on the content as kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redact: Vec<String>,
    /// Agents that attach fields to the latest version without writing the domain: a
    /// version one of them writes must equal the latest outside its `fields` (a publisher
    /// attaching its payload snapshot refs to the creator's assets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachers: Vec<Attacher>,
}

/// An agent that may attach `fields` to a domain's latest version
/// (docs/governance.md#domain-content).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Attacher {
    /// The attaching agent.
    pub agent: String,
    /// The field paths (as `required_refs`) it may set; everything else stays as it was.
    pub fields: Vec<String>,
}

/// What a redacted value becomes in a domain's version.
pub const REDACTED: &str = "[redacted]";

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
        check_content_rules(c, i, d);
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

/// A domain's content rules name a declared output type, parse, and can be met.
fn check_content_rules(c: &mut Checker<'_>, i: usize, d: &DomainSpec) {
    let p = ptr!["domains", i];
    if let Some(t) = &d.content_type {
        c.output_type_ref(p.key("content_type"), t);
    }
    c.field_paths(&p.key("required_refs"), &d.required_refs);
    c.field_paths(&p.key("redact"), &d.redact);
    for (j, a) in d.attachers.iter().enumerate() {
        let at = p.key("attachers").index(j);
        c.field_paths(&at.key("fields"), &a.fields);
        if a.fields.is_empty() {
            c.push(
                at.key("fields"),
                Code::InvalidValue,
                "an attacher attaches at least one field",
            );
        }
        let agent = c.spec.agents.iter().find(|x| x.id == a.agent);
        match agent {
            None => c.push(
                at.key("agent"),
                Code::UnknownReference,
                format!("unknown agent `{}`", a.agent),
            ),
            Some(x) if x.write_scopes.contains(&d.id) => c.push(
                at.key("agent"),
                Code::Contradiction,
                format!(
                    "`{}` writes `{}` already (write_scopes); an attacher is an agent that does not",
                    a.agent, d.id
                ),
            ),
            Some(_) => {}
        }
    }
    if d.max_bytes == Some(0) {
        c.push(
            p.key("max_bytes"),
            Code::InvalidValue,
            "max_bytes must be positive: no content fits in 0 bytes",
        );
    }
}

/// Normal form: domains sorted by id, each agent's scopes sorted.
pub(crate) fn normalize(s: &mut BundleSpec) {
    s.domains.sort_by(|a, b| a.id.cmp(&b.id));
    for d in &mut s.domains {
        sort_dedup(&mut d.required_refs);
        sort_dedup(&mut d.redact);
        d.attachers.sort_by(|a, b| a.agent.cmp(&b.agent));
        for a in &mut d.attachers {
            sort_dedup(&mut a.fields);
        }
    }
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

    /// Does `content` meet `domain`'s content rules (docs/governance.md#domain-content)?
    /// `allowed` is the write's decision (the writer's scope): returned as it is for a
    /// domain without content rules, with a step per rule met for one with, or turned into
    /// a refusal naming the first rule broken and where in the content.
    pub fn check_domain_content(
        &self,
        domain: &str,
        content: &serde_json::Value,
        allowed: PolicyDecision,
    ) -> PolicyDecision {
        let Some(d) = self.spec.domains.iter().find(|d| d.id == domain) else {
            return allowed;
        };
        if d.content_type.is_none() && d.required_refs.is_empty() && d.max_bytes.is_none() {
            return allowed;
        }
        let mut chain = allowed.chain.clone();
        let refuse = |rule: String, reason: String, mut chain: Vec<RuleStep>| {
            chain.push(RuleStep::new(
                rule.as_str(),
                StepOutcome::Applied,
                "content refused",
            ));
            conclude(
                DecisionKind::DomainWrite,
                Verdict::Deny,
                self.hash,
                rule,
                format!("content of `{domain}` refused: {reason}"),
                chain,
            )
        };
        if let Some(max) = d.max_bytes {
            let bytes = crate::canonical_json_text(content).len();
            if u64::try_from(bytes).unwrap_or(u64::MAX) > max {
                return refuse(
                    format!("domains.{domain}.max_bytes"),
                    format!("the content takes {bytes} bytes, more than the {max} allowed"),
                    chain,
                );
            }
            chain.push(RuleStep::new(
                format!("domains.{domain}.max_bytes"),
                StepOutcome::Applied,
                format!("{bytes} of at most {max} bytes"),
            ));
        }
        if let Some(type_ref) = &d.content_type {
            let Some((key, validator)) = self.output_schema(type_ref) else {
                // Validation guarantees the reference resolves; stay safe if it did not.
                return refuse(
                    format!("domains.{domain}.content_type"),
                    format!("unknown output type `{type_ref}`"),
                    chain,
                );
            };
            let mut errors: Vec<String> = validator
                .iter_errors(content)
                .map(|e| {
                    format!(
                        "{}: {e}",
                        crate::rules::contract::schema_place(
                            &e.instance_path().to_string(),
                            "content"
                        )
                    )
                })
                .collect();
            errors.sort();
            errors.truncate(MAX_ERRORS);
            if !errors.is_empty() {
                return refuse(
                    format!("domains.{domain}.content_type"),
                    format!("it does not match {key}: {}", errors.join("; ")),
                    chain,
                );
            }
            chain.push(RuleStep::new(
                format!("domains.{domain}.content_type"),
                StepOutcome::Applied,
                format!("content matches {key}"),
            ));
        }
        for path in &d.required_refs {
            let Ok(segs) = fieldpath::parse(path) else {
                continue;
            };
            if let Some(at) = unfilled(content, &segs, String::new()) {
                return refuse(
                    format!("domains.{domain}.required_refs"),
                    format!(
                        "{} is missing or empty (required reference `{path}`)",
                        shown(&at)
                    ),
                    chain,
                );
            }
        }
        if !d.required_refs.is_empty() {
            chain.push(RuleStep::new(
                format!("domains.{domain}.required_refs"),
                StepOutcome::Applied,
                format!(
                    "every required reference filled ({})",
                    d.required_refs.join(", ")
                ),
            ));
        }
        PolicyDecision { chain, ..allowed }
    }

    /// Whether `agent` holds `domain` in its `write_scopes` (an attacher, a person's
    /// role without it, an outside event's sender do not).
    #[must_use]
    pub fn writes_domain(&self, agent: &str, domain: &str) -> bool {
        self.agent(agent)
            .and_then(|i| self.spec.agents.get(i))
            .is_some_and(|a| a.write_scopes.iter().any(|d| d == domain))
    }

    /// May `agent` attach fields to `domain`'s `latest` version by writing `content`?
    /// `None` when `agent` is not one of the domain's attachers (its write is an ordinary
    /// one); else allowed when `content` equals `latest` outside the attacher's `fields`,
    /// refused naming the first place it differs, or when there is no version to attach to
    /// (docs/governance.md#domain-content).
    #[must_use]
    pub fn decide_domain_attach(
        &self,
        agent: &str,
        domain: &str,
        latest: Option<(u32, &serde_json::Value)>,
        content: &serde_json::Value,
    ) -> Option<PolicyDecision> {
        let d = self.spec.domains.iter().find(|d| d.id == domain)?;
        let a = d.attachers.iter().find(|a| a.agent == agent)?;
        let rule = format!("domains.{domain}.attachers.{agent}");
        let fields = a.fields.join(", ");
        let decide = |verdict, reason: String| {
            let chain = vec![RuleStep::new(
                rule.as_str(),
                if verdict == Verdict::Allow {
                    StepOutcome::Applied
                } else {
                    StepOutcome::NotApplicable
                },
                format!("attaches {fields}"),
            )];
            conclude(
                DecisionKind::DomainWrite,
                verdict,
                self.hash,
                rule.as_str(),
                reason,
                chain,
            )
        };
        let Some((version, latest)) = latest else {
            return Some(decide(
                Verdict::Deny,
                format!(
                    "`{agent}` attaches {fields} to `{domain}`, which has no version yet to attach to"
                ),
            ));
        };
        let before = fieldpath::remove(latest.clone(), &a.fields);
        let after = fieldpath::remove(content.clone(), &a.fields);
        Some(match first_difference(&before, &after, String::new()) {
            None => decide(
                Verdict::Allow,
                format!(
                    "`{agent}` attaches {fields} to `{domain}` version {version}, the rest unchanged"
                ),
            ),
            Some(at) => decide(
                Verdict::Deny,
                format!(
                    "`{agent}` may only attach {fields} to `{domain}`: {} differs from version {version}",
                    shown(&at)
                ),
            ),
        })
    }

    /// May a person acting as `role` write `domain`? The role must be a person's entry of
    /// the registry (`authority = "human"`) whose `write_scopes` hold the domain; the
    /// single-owner rule within an episode is the agents' and does not apply to a person
    /// (docs/governance.md#a-person-writes-a-domain).
    #[must_use]
    pub fn decide_person_domain_write(&self, role: &str, domain: &str) -> PolicyDecision {
        let person = self
            .agent(role)
            .and_then(|i| self.spec.agents.get(i))
            .is_some_and(|a| a.authority == crate::Authority::Human);
        if !person {
            let people: Vec<&str> = self
                .spec
                .agents
                .iter()
                .filter(|a| a.authority == crate::Authority::Human)
                .filter(|a| a.write_scopes.iter().any(|d| d == domain))
                .map(|a| a.id.as_str())
                .collect();
            let may = if people.is_empty() {
                format!("no person's role of the registry writes `{domain}`")
            } else {
                format!("roles that may: {}", people.join(", "))
            };
            return conclude(
                DecisionKind::DomainWrite,
                Verdict::Deny,
                self.hash,
                format!("agents.{role}.authority"),
                format!(
                    "`{role}` is not a person's role: a person writes a domain in a registry entry with authority = \"human\" ({may})"
                ),
                Vec::new(),
            );
        }
        self.decide_domain_write(role, domain, None)
    }

    /// `content` as `domain` keeps it: each value its `redact` paths reach replaced by
    /// [`REDACTED`], with the JSON pointers of the places redacted (in the order met,
    /// empty when nothing was). `None` when the domain redacts nothing.
    #[must_use]
    pub fn redact_domain_content(
        &self,
        domain: &str,
        content: &serde_json::Value,
    ) -> Option<(serde_json::Value, Vec<String>)> {
        let d = self.spec.domains.iter().find(|d| d.id == domain)?;
        if d.redact.is_empty() {
            return None;
        }
        let mut kept = content.clone();
        let mut places = Vec::new();
        for path in &d.redact {
            if let Ok(segs) = fieldpath::parse(path) {
                redact_at(&mut kept, &segs, String::new(), &mut places);
            }
        }
        Some((kept, places))
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

/// Most schema violations listed in a refusal.
const MAX_ERRORS: usize = 8;

/// The JSON pointer of the first place, in key order, where `segs` (from `at`) leads to
/// nothing or to an empty value; arrays on the way are entered element by element.
fn unfilled(v: &serde_json::Value, segs: &[&str], at: String) -> Option<String> {
    use serde_json::Value;
    if let Value::Array(items) = v {
        return items
            .iter()
            .enumerate()
            .find_map(|(i, item)| unfilled(item, segs, format!("{at}/{i}")));
    }
    let Some((first, rest)) = segs.split_first() else {
        let empty = match v {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        };
        return empty.then_some(at);
    };
    let Value::Object(fields) = v else {
        return Some(at);
    };
    if *first == "*" {
        return fields
            .iter()
            .find_map(|(k, child)| unfilled(child, rest, format!("{at}/{}", escaped(k))));
    }
    let place = format!("{at}/{}", escaped(first));
    match fields.get(*first) {
        None => Some(place),
        // An empty array where the path ends fills nothing; one on the way has no element
        // to hold the rest of the path.
        Some(serde_json::Value::Array(items)) if items.is_empty() && rest.is_empty() => Some(place),
        Some(child) => unfilled(child, rest, place),
    }
}

/// Replaces what `segs` reach (from `at`) by [`REDACTED`], recording each place; arrays
/// on the way, and at the end, are entered element by element. Nulls and values already
/// redacted are left as they are.
fn redact_at(v: &mut serde_json::Value, segs: &[&str], at: String, places: &mut Vec<String>) {
    use serde_json::Value;
    if let Value::Array(items) = v {
        for (i, item) in items.iter_mut().enumerate() {
            redact_at(item, segs, format!("{at}/{i}"), places);
        }
        return;
    }
    let Some((first, rest)) = segs.split_first() else {
        if !v.is_null() && v.as_str() != Some(REDACTED) {
            *v = Value::String(REDACTED.to_owned());
            places.push(at);
        }
        return;
    };
    let Value::Object(fields) = v else {
        return;
    };
    for (key, child) in fields.iter_mut() {
        if *first == "*" || key == first {
            let place = format!("{at}/{}", escaped(key));
            redact_at(child, rest, place, places);
        }
    }
}

/// The JSON pointer of the first place, in key order, where `a` and `b` differ.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: String) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let place = format!("{at}/{}", escaped(k));
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => first_difference(p, q, place),
                    _ => Some(place),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, format!("{at}/{i}"))),
        _ => (a != b).then_some(at),
    }
}

/// A key as a JSON pointer's segment (RFC 6901).
fn escaped(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A place in the content as people read it: its JSON pointer, or the whole content.
fn shown(pointer: &str) -> String {
    if pointer.is_empty() {
        "the content".to_owned()
    } else {
        pointer.to_owned()
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

    const CONTENT_RULES: &str = r#"
        bundle = { id = "t" }
        agents = [{ id = "planner", write_scopes = ["plan"] }]
        output_types = [{ id = "plan_graph", schema = { type = "object", required = ["nodes"], properties = { nodes = { type = "array" } } } }]
        domains = [{ id = "plan", content_type = "plan_graph", max_bytes = 200, required_refs = ["nodes.metadata.pointers", "edges.rationale"] }]
    "#;

    #[test]
    fn content_that_meets_the_rules_is_allowed_with_a_step_per_rule() {
        let b = PolicyBundle::from_toml_str(CONTENT_RULES, "t.toml").unwrap();
        let allowed = b.decide_domain_write("planner", "plan", None);
        let content = serde_json::json!({
            "nodes": [{"id": "n1", "metadata": {"pointers": ["capsule:7"]}}],
            "edges": [{"rationale": "n1 feeds n2"}],
        });
        let d = b.check_domain_content("plan", &content, allowed.clone());
        assert!(d.is_allowed(), "{}", d.reason);
        assert_eq!(d.rule_id, allowed.rule_id);
        let rules: Vec<&str> = d.chain.iter().map(|s| &*s.rule_id).collect();
        assert_eq!(
            rules,
            [
                "agents.planner.write_scopes",
                "domains.plan.max_bytes",
                "domains.plan.content_type",
                "domains.plan.required_refs"
            ]
        );
    }

    #[test]
    fn content_that_breaks_a_rule_is_refused_naming_the_rule_and_the_place() {
        let b = PolicyBundle::from_toml_str(CONTENT_RULES, "t.toml").unwrap();
        let allowed = || b.decide_domain_write("planner", "plan", None);
        let refused = |content: serde_json::Value| {
            let d = b.check_domain_content("plan", &content, allowed());
            assert!(!d.is_allowed());
            (d.rule_id.to_string(), d.reason.to_string())
        };
        // The second node cites no pointer.
        let (rule, reason) = refused(serde_json::json!({
            "nodes": [{"metadata": {"pointers": ["c:1"]}}, {"metadata": {"pointers": []}}],
            "edges": [],
        }));
        assert_eq!(rule, "domains.plan.required_refs");
        assert_eq!(
            reason,
            "content of `plan` refused: /nodes/1/metadata/pointers is missing or empty \
             (required reference `nodes.metadata.pointers`)"
        );
        // An edge without its rationale.
        let (_, reason) = refused(serde_json::json!({
            "nodes": [], "edges": [{"evidence": ["e:1"]}],
        }));
        assert!(reason.contains("/edges/0/rationale is missing"), "{reason}");
        // Not the content type.
        let (rule, reason) = refused(serde_json::json!({"nodes": "n1"}));
        assert_eq!(rule, "domains.plan.content_type");
        assert!(reason.contains("/nodes: "), "{reason}");
        assert!(reason.contains("plan_graph@1"), "{reason}");
        // Too big, said before the schema is read.
        let (rule, reason) = refused(serde_json::json!({"nodes": ["x".repeat(300)]}));
        assert_eq!(rule, "domains.plan.max_bytes");
        assert!(reason.contains("more than the 200 allowed"), "{reason}");
    }

    #[test]
    fn a_domain_without_content_rules_decides_as_before() {
        let src = r#"
            bundle = { id = "t" }
            domains = [{ id = "d" }]
            agents = [{ id = "w", write_scopes = ["d"] }]
        "#;
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        let allowed = b.decide_domain_write("w", "d", None);
        let d = b.check_domain_content("d", &serde_json::json!(null), allowed.clone());
        assert_eq!(d, allowed);
    }

    #[test]
    fn redaction_replaces_each_value_a_path_reaches_and_names_its_place() {
        let src = r#"
            bundle = { id = "t" }
            agents = [{ id = "w", write_scopes = ["s", "open"] }]
            domains = [{ id = "s", redact = ["threads.raw_ref", "source.*"], exclusive = false }, { id = "open" }]
        "#;
        let b = PolicyBundle::from_toml_str(src, "t.toml").expect("valid");
        let content = serde_json::json!({
            "threads": [{"summary": "asks for a refund", "raw_ref": "s3://raw/c-1.json"},
                        {"summary": "thanks", "raw_ref": null},
                        {"summary": "no pointer"}],
            "source": {"bucket": "raw", "key": "c-1"},
            "note": "kept"
        });
        let (kept, places) = b.redact_domain_content("s", &content).expect("s redacts");
        assert_eq!(
            kept,
            serde_json::json!({
                "threads": [{"summary": "asks for a refund", "raw_ref": REDACTED},
                            {"summary": "thanks", "raw_ref": null},
                            {"summary": "no pointer"}],
                "source": {"bucket": REDACTED, "key": REDACTED},
                "note": "kept"
            })
        );
        assert_eq!(
            places,
            ["/source/bucket", "/source/key", "/threads/0/raw_ref"]
        );
        // Redacting again changes nothing; a domain without `redact` is left alone.
        let (again, none) = b.redact_domain_content("s", &kept).expect("s redacts");
        assert_eq!((again, none.len()), (kept, 0));
        assert!(b.redact_domain_content("open", &content).is_none());
        let bad = PolicyBundle::from_toml_str(&src.replace("\"source.*\"", "\"a..b\""), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(bad.contains("redact"), "{bad}");
    }

    #[test]
    fn an_attacher_is_a_known_agent_that_does_not_write_the_domain_and_names_fields() {
        let src = r#"
            bundle = { id = "t" }
            agents = [{ id = "c", write_scopes = ["assets"] }, { id = "p" }]
            domains = [{ id = "assets", attachers = [{ agent = "c", fields = ["x"] }, { agent = "ghost", fields = [] }] }]
        "#;
        let e = PolicyBundle::from_toml_str(src, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`c` writes `assets` already"), "{e}");
        assert!(e.contains("unknown agent `ghost`"), "{e}");
        assert!(e.contains("at least one field"), "{e}");
        let ok = src.replace(
            r#"{ agent = "c", fields = ["x"] }, { agent = "ghost", fields = [] }"#,
            r#"{ agent = "p", fields = ["x"] }"#,
        );
        let b = PolicyBundle::from_toml_str(&ok, "t.toml").expect("valid");
        let v1 = serde_json::json!({"a": 1});
        let d = b
            .decide_domain_attach(
                "p",
                "assets",
                Some((1, &v1)),
                &serde_json::json!({"a": 1, "x": "s"}),
            )
            .expect("p attaches");
        assert!(d.is_allowed(), "{d:?}");
        assert!(
            b.decide_domain_attach("c", "assets", Some((1, &v1)), &v1)
                .is_none()
        );
    }

    #[test]
    fn content_rules_name_a_declared_type_and_valid_paths() {
        let src = r#"
            bundle = { id = "t" }
            agents = [{ id = "w", write_scopes = ["d"] }]
            domains = [{ id = "d", content_type = "nowhere", required_refs = ["a..b"], max_bytes = 0 }]
        "#;
        let e = PolicyBundle::from_toml_str(src, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nowhere"), "{e}");
        assert!(e.contains("max_bytes must be positive"), "{e}");
        assert!(e.contains("required_refs"), "{e}");
    }
}
