//! Data contracts (docs/governance.md#data-contracts), the `[[output_types]]` section:
//! versioned output types with their JSON Schemas, which an edge of the interaction matrix
//! may name; a payload that does not match the type its edge carries stops the flow.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::model::BundleSpec;
use crate::rules::handoff::InputKind;
use crate::validate::{Checker, Issue};

/// A versioned output type with its JSON Schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputTypeSpec {
    pub id: String,
    #[serde(default = "one")]
    pub version: u32,
    pub schema: Value,
}

fn one() -> u32 {
    1
}

/// Each `id@version` is declared once and its schema is a valid JSON Schema.
pub(crate) fn check(c: &mut Checker<'_>) {
    let mut seen = BTreeSet::new();
    let spec = c.spec;
    for (i, t) in spec.output_types.iter().enumerate() {
        let p = ptr!["output_types", i];
        if !seen.insert((t.id.as_str(), t.version)) {
            c.push(
                p.key("id"),
                Code::Duplicate,
                format!("output type `{}@{}` is declared twice", t.id, t.version),
            );
        }
        c.json_schema(p.key("schema"), &t.schema);
    }
}

/// Normal form: output types sorted by `(id, version)`.
pub(crate) fn normalize(s: &mut BundleSpec) {
    s.output_types
        .sort_by(|a, b| (&a.id, a.version).cmp(&(&b.id, b.version)));
}

/// Output-type validators by `(id, version)`.
pub(crate) type Schemas = BTreeMap<(String, u32), Arc<jsonschema::Validator>>;

/// Compiles every output type's schema once per bundle.
pub(crate) fn compile(spec: &BundleSpec) -> Result<Schemas, Vec<Issue>> {
    let mut output_schemas = BTreeMap::new();
    for (i, t) in spec.output_types.iter().enumerate() {
        let compiled = jsonschema::validator_for(&t.schema).map_err(|e| {
            vec![Issue {
                pointer: Pointer::root().key("output_types").index(i).key("schema"),
                code: Code::InvalidValue,
                message: format!("not a valid JSON Schema: {e}"),
            }]
        })?;
        output_schemas.insert((t.id.clone(), t.version), Arc::new(compiled));
    }
    Ok(output_schemas)
}

/// Most schema violations listed in a decision.
const MAX_ERRORS: usize = 8;

impl PolicyBundle {
    /// Resolves `id` (highest version) or `id@version` to its validator.
    pub(crate) fn output_schema(&self, type_ref: &str) -> Option<(String, &jsonschema::Validator)> {
        let (id, version) = match type_ref.split_once('@') {
            Some((id, v)) => (id, Some(v.parse::<u32>().ok()?)),
            None => (type_ref, None),
        };
        self.output_schemas
            .iter()
            .filter(|((i, v), _)| i == id && version.is_none_or(|want| want == *v))
            .max_by_key(|((_, v), _)| *v)
            .map(|((i, v), val)| (format!("{i}@{v}"), &**val))
    }

    /// Does `payload` satisfy the versioned output type the edge `from → to` declares?
    /// A mismatch stops the flow. Denied handoffs are denied here too.
    pub fn check_output(
        &self,
        from: &str,
        to: &str,
        input: InputKind,
        payload: &serde_json::Value,
    ) -> PolicyDecision {
        let k = DecisionKind::DataContract;
        let h = self.decide_handoff(from, to, input);
        if h.decision.verdict != Verdict::Allow {
            return PolicyDecision {
                kind: k,
                ..h.decision
            };
        }
        let mut chain = h.decision.chain.clone();
        let Some(type_ref) = h.output_type.as_deref() else {
            return conclude(
                k,
                Verdict::Allow,
                self.hash,
                h.decision.rule_id.clone(),
                format!("{from} → {to} declares no output type"),
                chain,
            );
        };
        let Some((key, validator)) = self.output_schema(type_ref) else {
            // Validation guarantees every reference resolves; stay safe if it did not.
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                "output_types",
                format!("unknown output type `{type_ref}`"),
                chain,
            );
        };
        let rule = format!("output_types.{key}");
        let mut errors: Vec<String> = validator
            .iter_errors(payload)
            .map(|e| {
                format!(
                    "{}: {}",
                    schema_place(&e.instance_path().to_string(), "payload"),
                    e
                )
            })
            .collect();
        errors.sort();
        errors.truncate(MAX_ERRORS);
        if errors.is_empty() {
            chain.push(RuleStep::new(
                rule.as_str(),
                StepOutcome::Applied,
                "payload matches",
            ));
            return conclude(
                k,
                Verdict::Allow,
                self.hash,
                rule,
                format!("payload satisfies {key}"),
                chain,
            );
        }
        chain.push(RuleStep::new(
            rule.as_str(),
            StepOutcome::Applied,
            "schema mismatch",
        ));
        conclude(
            k,
            Verdict::Deny,
            self.hash,
            rule,
            format!(
                "schema mismatch against {key}, the flow stops: {}",
                errors.join("; ")
            ),
            chain,
        )
    }
}

/// Where in `what` (the payload, the inputs) a schema error is: its JSON pointer, or the
/// whole of it at the root (whose pointer is empty).
pub(crate) fn schema_place(pointer: &str, what: &str) -> String {
    if pointer.is_empty() {
        format!("the {what}")
    } else {
        pointer.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_payload_must_match_the_type_its_edge_carries() {
        let src = r#"
            bundle = { id = "t" }
            agents = [{ id = "a" }, { id = "b" }]
            output_types = [{ id = "o", version = 2, schema = { type = "object", required = ["score"] } }]
            interactions.allowed = [{ from = "a", to = "b", output_type = "o" }]
        "#;
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        let ok = b.check_output("a", "b", InputKind::Decision, &json!({ "score": 1 }));
        assert_eq!(
            (ok.verdict, &*ok.rule_id),
            (Verdict::Allow, "output_types.o@2")
        );
        let bad = b.check_output("a", "b", InputKind::Decision, &json!({}));
        assert_eq!(bad.verdict, Verdict::Deny);
        assert!(
            bad.reason.contains("schema mismatch against o@2"),
            "{}",
            bad.reason
        );
        let denied = b.check_output("b", "a", InputKind::Decision, &json!({}));
        assert_eq!(
            (denied.kind, denied.verdict),
            (DecisionKind::DataContract, Verdict::Deny)
        );
    }
}
