//! Semantic checks of a parsed bundle. Each problem names the JSON pointer of the
//! offending value, which `load` turns into a line and column of the source text.
//!
//! Each rule's checks are in its file under `rules/` (`check`, and `rule_ids` for the ids
//! its section declares); here are what they share (`Checker`: references to agents and
//! output types, field paths, JSON Schemas), the checks of the bundle's identity, request
//! defaults and agent registry, the uniqueness of rule ids across sections, and the order
//! the rules' checks run in, which is the order problems are reported in.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::error::DiagnosticCode as Code;
use crate::fieldpath;
use crate::limits::{self, MAX_PROBLEMS};
use crate::locate::{Pointer, ptr};
use crate::model::BundleSpec;
use crate::rules::{
    authority, capability, circuit_breaker, context_parts, contract, domain, escalation, handoff,
    intent, provenance, recursion, recursion_class, scope, side_effect, signals, tools, waiting,
};

/// One semantic problem, located by pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub pointer: Pointer,
    pub code: Code,
    pub message: String,
}

/// What every rule's checks share: the bundle, its agent ids, and the problems found so far.
pub(crate) struct Checker<'a> {
    pub(crate) spec: &'a BundleSpec,
    pub(crate) agents: BTreeSet<&'a str>,
    /// The versions declared of each output type id.
    output_types: BTreeMap<&'a str, BTreeSet<u32>>,
    issues: Vec<Issue>,
    /// Problems found beyond the first [`MAX_PROBLEMS`], counted, not kept.
    more: usize,
}

/// Every problem in `spec`, in the order of the checks (empty when valid): the first
/// [`MAX_PROBLEMS`], then, when there were more, one saying how many
/// ([`Code::MoreProblems`]). A list longer than its limit (`limits.rs`) is reported
/// alone, before any other check runs, so that checking costs what the bundle's size
/// allows.
pub fn validate(spec: &BundleSpec) -> Vec<Issue> {
    let mut over = limits::check(spec);
    if !over.is_empty() {
        over.truncate(MAX_PROBLEMS);
        return over;
    }
    let agents = spec.agents.iter().map(|a| a.id.as_str()).collect();
    let mut output_types: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for t in &spec.output_types {
        output_types
            .entry(t.id.as_str())
            .or_default()
            .insert(t.version);
    }
    let mut c = Checker {
        spec,
        agents,
        output_types,
        issues: Vec::new(),
        more: 0,
    };
    // One line per rule; the order is the order problems are reported in.
    c.bundle();
    circuit_breaker::check(&mut c);
    c.agents();
    contract::check(&mut c);
    domain::check(&mut c);
    tools::check(&mut c);
    handoff::check(&mut c);
    capability::check(&mut c);
    scope::check(&mut c);
    context_parts::check(&mut c);
    recursion::check(&mut c);
    recursion_class::check(&mut c);
    side_effect::check(&mut c);
    escalation::check(&mut c);
    provenance::check(&mut c);
    authority::check(&mut c);
    waiting::check(&mut c);
    signals::check(&mut c);
    intent::check(&mut c);
    c.rule_ids();
    if c.more > 0 {
        c.issues.push(Issue {
            pointer: Pointer::root(),
            code: Code::MoreProblems,
            message: format!(
                "{} more problems not listed (the first {MAX_PROBLEMS} are)",
                c.more
            ),
        });
    }
    c.issues
}

impl<'a> Checker<'a> {
    pub(crate) fn push(&mut self, pointer: Pointer, code: Code, message: impl Into<String>) {
        if self.is_full() {
            self.more += 1;
            return;
        }
        self.issues.push(Issue {
            pointer,
            code,
            message: message.into(),
        });
    }

    /// Whether [`MAX_PROBLEMS`] problems are listed already: a check whose message costs
    /// more than finding the problem may then only count it ([`Self::count`]).
    pub(crate) fn is_full(&self) -> bool {
        self.issues.len() >= MAX_PROBLEMS
    }

    /// Counts a problem beyond those listed.
    pub(crate) fn count(&mut self) {
        self.more += 1;
    }

    /// An agent reference: an id the registry declares (or `*` where `wildcard_ok`).
    pub(crate) fn agent_ref(&mut self, p: Pointer, id: &str, wildcard_ok: bool) {
        if wildcard_ok && id == "*" {
            return;
        }
        if !self.agents.contains(id) {
            self.push(
                p,
                Code::UnknownReference,
                format!("unknown agent `{id}`: declare it under [[agents]]"),
            );
        }
    }

    /// The sender a handoff rule names (`from_agent_id`): an agent reference, `*`, or a
    /// [content source](crate::CONTENT_SOURCES) that is no agent (a person, docket's tools),
    /// whose content reaches agents through the same gate.
    pub(crate) fn source_ref(&mut self, p: Pointer, id: &str) {
        if id == "*" || self.agents.contains(id) || scope::is_content_source(id) {
            return;
        }
        self.push(
            p,
            Code::UnknownReference,
            format!(
                "unknown agent `{id}`: declare it under [[agents]], or name `human` (a \
                 person's answers and decisions) or `tools` (the results of tools docket runs)"
            ),
        );
    }

    /// A receiver a handoff rule names (`to_agent_id`): as [`Self::agent_ref`], with a
    /// clearer word for a content source named as a receiver.
    pub(crate) fn receiver_ref(&mut self, p: Pointer, id: &str) {
        if scope::is_content_source(id) && !self.agents.contains(id) {
            self.push(
                p,
                Code::InvalidValue,
                format!(
                    "`{id}` sends content but never receives it: name it as from_agent_id, \
                     or declare an agent `{id}` under [[agents]]"
                ),
            );
            return;
        }
        self.agent_ref(p, id, true);
    }

    /// Every path of a list of field paths parses.
    pub(crate) fn field_paths(&mut self, p: &Pointer, paths: &[String]) {
        for (i, path) in paths.iter().enumerate() {
            if let Err(e) = fieldpath::parse(path) {
                self.push(p.index(i), Code::InvalidValue, e);
            }
        }
    }

    /// The bundle's id and request defaults.
    fn bundle(&mut self) {
        if self.spec.bundle.id.trim().is_empty() {
            self.push(
                ptr!["bundle", "id"],
                Code::InvalidValue,
                "bundle id must not be empty",
            );
        }
        if self.spec.defaults.timeout_ms == 0 {
            self.push(
                ptr!["defaults", "timeout_ms"],
                Code::InvalidValue,
                "timeout_ms must be positive",
            );
        }
    }

    /// The registry: usable, unique agent ids; then, agent by agent, the checks of the rules
    /// that own agent fields of their own.
    fn agents(&mut self) {
        let mut seen = BTreeSet::new();
        let spec = self.spec;
        for (i, a) in spec.agents.iter().enumerate() {
            let p = ptr!["agents", i];
            if a.id.is_empty() || a.id == "*" || a.id.contains(char::is_whitespace) {
                self.push(
                    p.key("id"),
                    Code::InvalidValue,
                    format!("`{}` is not a usable agent id", a.id),
                );
            }
            if !seen.insert(a.id.as_str()) {
                self.push(
                    p.key("id"),
                    Code::Duplicate,
                    format!("agent `{}` is declared twice", a.id),
                );
            }
            capability::check_agent(self, &p, a);
            scope::check_receiver(self, &p, a);
        }
    }

    /// An embedded JSON Schema compiles.
    pub(crate) fn json_schema(&mut self, p: Pointer, schema: &Value) {
        if let Err(e) = jsonschema::validator_for(schema) {
            self.push(
                p,
                Code::InvalidValue,
                format!("not a valid JSON Schema: {e}"),
            );
        }
    }

    /// An output type reference, `id` or `id@version`, names a declared type.
    pub(crate) fn output_type_ref(&mut self, p: Pointer, r: &str) {
        let (id, version) = match r.split_once('@') {
            Some((id, v)) => (id, v.parse::<u32>().ok()),
            None => (r, None),
        };
        let found = self
            .output_types
            .get(id)
            .is_some_and(|versions| version.is_none_or(|v| versions.contains(&v)));
        if !found {
            self.push(
                p,
                Code::UnknownReference,
                format!("unknown output type `{r}`: declare it under [[output_types]]"),
            );
        }
    }

    /// Rule ids must be unique across the bundle so a decision's `rule_id` names one rule.
    fn rule_ids(&mut self) {
        let spec = self.spec;
        let mut ids: Vec<(String, Pointer)> = Vec::new();
        tools::rule_ids(spec, &mut ids);
        handoff::rule_ids(spec, &mut ids);
        capability::rule_ids(spec, &mut ids);
        scope::rule_ids(spec, &mut ids);
        recursion::rule_ids(spec, &mut ids);
        side_effect::rule_ids(spec, &mut ids);
        escalation::rule_ids(spec, &mut ids);
        provenance::rule_ids(spec, &mut ids);
        let mut seen = BTreeSet::new();
        for (id, p) in ids {
            if id.trim().is_empty() {
                self.push(p, Code::InvalidValue, "rule id must not be empty");
            } else if !seen.insert(id.clone()) {
                self.push(
                    p,
                    Code::Duplicate,
                    format!("rule id `{id}` is used twice; decisions name rules by id"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_ids_are_unique_across_sections() {
        let s: BundleSpec = toml::from_str(
            r#"
            bundle = { id = "t" }
            agents = [{ id = "a", side_effects = ["publish"] }]
            deny_patterns = [{ id = "same", pattern = "Bash(rm *)" }]
            [[side_effects]]
            id = "same"
            kind = "publish"
            "#,
        )
        .unwrap();
        let issues = validate(&s);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].code, Code::Duplicate);
        assert_eq!(issues[0].pointer.to_string(), "/side_effects/0/id");
    }
}
