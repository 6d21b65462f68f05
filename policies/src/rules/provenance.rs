//! Provenance checkpoint rules (docs/governance.md#provenance-rules), the `[[provenance]]`
//! section: what a handoff's items cite must have been produced by a named agent earlier in the
//! run — every recommendation cites a gap Reasoning found, never an Intelligence metric. The
//! caller supplies the ids that agent produced (plain data); nothing here reads a log.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::model::BundleSpec;
use crate::validate::Checker;

/// A provenance rule: on the handoff `at`, every item of the array at `items` must cite,
/// in its field `cites`, an id that `produced_by.agent` delivered earlier in the run.
///
/// ```toml
/// [[provenance]]
/// id = "guardrail-2-provenance"
/// at = { from = "strategy", to = "governance" }
/// items = "/recommendations"
/// cites = "gap_id"
/// produced_by = { agent = "reasoning", output_type = "gaps_and_opportunities", ids = "/gaps/*/id" }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceRule {
    pub id: String,
    /// The handoff checked.
    pub at: HandoffPoint,
    /// JSON pointer to the array of citing items in the handoff's payload (`""` for a
    /// payload that is itself the array).
    pub items: String,
    /// Field of each item holding the cited id (a string, or an array of strings that
    /// must all resolve).
    pub cites: String,
    /// Where citable ids come from.
    pub produced_by: ProducedBy,
    /// Said in the denial, e.g. the guardrail's wording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One handoff edge, by its two agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffPoint {
    pub from: String,
    pub to: String,
}

/// The output whose ids may be cited: what `agent` delivered as `output_type` earlier in
/// the run, read at `ids`, a JSON pointer where `*` stands for every element or member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProducedBy {
    pub agent: String,
    /// `id` or `id@version` of an output type.
    pub output_type: String,
    /// e.g. `/gaps/*/id`.
    pub ids: String,
}

/// Every agent and output type a rule names is declared, its pointers are JSON pointers,
/// it names the citing field, and some allowed edge carries what it cites.
pub(crate) fn check(c: &mut Checker<'_>) {
    let spec = c.spec;
    if spec.provenance.is_empty() {
        return;
    }
    let type_id = |t: &str| t.split('@').next().unwrap_or(t).to_owned();
    // (sender, output type id) of every allowed edge that carries a type.
    let carried: BTreeSet<(&str, String)> = spec
        .interactions
        .allowed
        .iter()
        .filter_map(|e| Some((e.from.as_str(), type_id(e.output_type.as_deref()?))))
        .collect();
    for (i, r) in spec.provenance.iter().enumerate() {
        let p = ptr!["provenance", i];
        c.agent_ref(p.key("at").key("from"), &r.at.from, false);
        c.agent_ref(p.key("at").key("to"), &r.at.to, false);
        c.agent_ref(
            p.key("produced_by").key("agent"),
            &r.produced_by.agent,
            false,
        );
        c.output_type_ref(
            p.key("produced_by").key("output_type"),
            &r.produced_by.output_type,
        );
        if !(r.items.is_empty() || r.items.starts_with('/')) {
            c.push(
                p.key("items"),
                Code::InvalidValue,
                format!(
                    "`{}` is not a JSON pointer: write `/recommendations`, or `` for the whole payload",
                    r.items
                ),
            );
        }
        if !r.produced_by.ids.starts_with('/') {
            c.push(
                p.key("produced_by").key("ids"),
                Code::InvalidValue,
                format!(
                    "`{}` is not a JSON pointer: write e.g. `/gaps/*/id` (`*` for every element)",
                    r.produced_by.ids
                ),
            );
        }
        if r.cites.trim().is_empty() {
            c.push(
                p.key("cites"),
                Code::InvalidValue,
                "cites must name the field of each item that holds the cited id",
            );
        }
        let produces = carried.contains(&(
            r.produced_by.agent.as_str(),
            type_id(&r.produced_by.output_type),
        ));
        if c.agents.contains(r.produced_by.agent.as_str()) && !produces {
            c.push(
                p.key("produced_by"),
                Code::Contradiction,
                format!(
                    "no allowed edge from `{}` carries `{}`, so no id could ever be cited",
                    r.produced_by.agent, r.produced_by.output_type
                ),
            );
        }
    }
}

/// The provenance rules' ids.
pub(crate) fn rule_ids(spec: &BundleSpec, ids: &mut Vec<(String, Pointer)>) {
    ids.extend(
        spec.provenance
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), ptr!["provenance", i, "id"])),
    );
}

/// Normal form: rules sorted by id.
pub(crate) fn normalize(s: &mut BundleSpec) {
    s.provenance.sort_by(|a, b| a.id.cmp(&b.id));
}

/// Most violations named in one decision.
const MAX_VIOLATIONS: usize = 8;
/// Most produced ids quoted back in a denial.
const MAX_QUOTED: usize = 8;

impl PolicyBundle {
    /// The provenance rules checked on the handoff `from → to`, in id order.
    pub fn provenance_rules<'a>(
        &'a self,
        from: &'a str,
        to: &'a str,
    ) -> impl Iterator<Item = &'a ProvenanceRule> + 'a {
        self.spec
            .provenance
            .iter()
            .filter(move |r| r.at.from == from && r.at.to == to)
    }

    /// Does every item of `payload` at `rule.items` cite an id in `produced`, the ids that
    /// `rule.produced_by.agent` delivered earlier in the run (`None`: it never delivered
    /// that output)? A denial names each offending item by pointer and the id it cited.
    pub fn decide_provenance(
        &self,
        rule: &ProvenanceRule,
        payload: &Value,
        produced: Option<&BTreeSet<String>>,
    ) -> PolicyDecision {
        let k = DecisionKind::Provenance;
        let id = rule.id.as_str();
        let src = &rule.produced_by;
        let because = rule
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        let deny = |note: &str, reason: String| {
            conclude(
                k,
                Verdict::Deny,
                self.hash,
                id,
                format!("{reason}{because}"),
                vec![RuleStep::new(id, StepOutcome::Applied, note)],
            )
        };
        let Some(items) = payload.pointer(&rule.items).and_then(Value::as_array) else {
            return deny(
                "no items",
                format!(
                    "the payload has no array at `{}` to check against {}'s {}",
                    rule.items, src.agent, src.output_type
                ),
            );
        };
        let empty = BTreeSet::new();
        let known = produced.unwrap_or(&empty);
        let mut violations = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let at = format!("{}/{i}", rule.items);
            match cited(item.get(&rule.cites)) {
                None => violations.push(format!("{at} cites nothing in `{}`", rule.cites)),
                Some(ids) => {
                    violations.extend(ids.into_iter().filter(|c| !known.contains(c)).map(|c| {
                        format!(
                            "{at} cites {} `{c}`, which {} did not deliver in this run",
                            rule.cites, src.agent
                        )
                    }))
                }
            }
        }
        if produced.is_none() && !items.is_empty() {
            return deny(
                "producer never delivered",
                format!(
                    "{} never delivered {} in this run, so nothing at `{}` can cite it: {}",
                    src.agent,
                    src.output_type,
                    rule.items,
                    violations.first().map_or("", String::as_str)
                ),
            );
        }
        if violations.is_empty() {
            return conclude(
                k,
                Verdict::Allow,
                self.hash,
                id,
                format!(
                    "all {} items at `{}` cite ids {} produced",
                    items.len(),
                    rule.items,
                    src.agent
                ),
                vec![RuleStep::new(
                    id,
                    StepOutcome::Applied,
                    "every item cites a produced id",
                )],
            );
        }
        let count = violations.len();
        violations.truncate(MAX_VIOLATIONS);
        let quoted: Vec<&str> = known.iter().take(MAX_QUOTED).map(String::as_str).collect();
        deny(
            "unproduced citation",
            format!(
                "{count} item(s) cite ids {} did not produce in {}: {}; produced ids: [{}]",
                src.agent,
                src.output_type,
                violations.join("; "),
                quoted.join(", ")
            ),
        )
    }
}

impl ProvenanceRule {
    /// The citable ids in one output of `produced_by.agent`, read at `produced_by.ids`
    /// (`*` stands for every element or member). Strings and integers count; other values
    /// are not ids.
    #[must_use]
    pub fn produced_ids(&self, output: &Value) -> BTreeSet<String> {
        let segments: Vec<String> = self
            .produced_by
            .ids
            .split('/')
            .skip(1)
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect();
        let mut out = BTreeSet::new();
        collect(output, &segments, &mut out);
        out
    }
}

fn collect(v: &Value, path: &[String], out: &mut BTreeSet<String>) {
    let Some((head, rest)) = path.split_first() else {
        if let Some(id) = id_text(v) {
            out.insert(id);
        }
        return;
    };
    match (head.as_str(), v) {
        ("*", Value::Array(items)) => items.iter().for_each(|i| collect(i, rest, out)),
        ("*", Value::Object(map)) => map.values().for_each(|i| collect(i, rest, out)),
        (key, Value::Object(map)) => {
            if let Some(inner) = map.get(key) {
                collect(inner, rest, out);
            }
        }
        (index, Value::Array(items)) => {
            if let Some(inner) = index.parse::<usize>().ok().and_then(|i| items.get(i)) {
                collect(inner, rest, out);
            }
        }
        _ => {}
    }
}

fn id_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// The ids an item cites: one id, or a non-empty list of ids; `None` when it cites nothing.
fn cited(v: Option<&Value>) -> Option<Vec<String>> {
    match v? {
        Value::Array(list) if !list.is_empty() => list.iter().map(id_text).collect(),
        other => id_text(other).map(|id| vec![id]),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use crate::compiled::PolicyBundle;
    use crate::decision::{DecisionKind, Verdict};

    const BUNDLE: &str = r#"
bundle = { id = "t" }
agents = [{ id = "intelligence" }, { id = "reasoning" }, { id = "strategy" }, { id = "governance" }]
output_types = [{ id = "gaps", schema = { type = "object" } }, { id = "recs", schema = { type = "object" } }]
[interactions]
allowed = [
  { from = "reasoning", to = "strategy", output_type = "gaps" },
  { from = "strategy", to = "governance", output_type = "recs" },
]
[[provenance]]
id = "guardrail-2-provenance"
at = { from = "strategy", to = "governance" }
items = "/recommendations"
cites = "gap_id"
produced_by = { agent = "reasoning", output_type = "gaps", ids = "/gaps/*/id" }
reason = "Guardrail 2"
"#;

    fn bundle() -> PolicyBundle {
        PolicyBundle::from_toml_str(BUNDLE, "t.toml").unwrap()
    }

    fn ids(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn produced_ids_follow_the_wildcard_pointer() {
        let b = bundle();
        let rule = b.provenance_rules("strategy", "governance").next().unwrap();
        let out = json!({ "gaps": [{ "id": "gap-1" }, { "id": "gap-2" }, { "topic": "x" }, { "id": 7 }] });
        assert_eq!(rule.produced_ids(&out), ids(&["7", "gap-1", "gap-2"]));
        assert!(rule.produced_ids(&json!({ "gaps": "none" })).is_empty());
        assert_eq!(b.provenance_rules("reasoning", "strategy").count(), 0);
    }

    #[test]
    fn allows_when_every_item_cites_a_produced_id() {
        let b = bundle();
        let rule = b.provenance_rules("strategy", "governance").next().unwrap();
        let payload =
            json!({ "recommendations": [{ "gap_id": "gap-1" }, { "gap_id": ["gap-1", "gap-2"] }] });
        let d = b.decide_provenance(rule, &payload, Some(&ids(&["gap-1", "gap-2"])));
        assert_eq!(d.verdict, Verdict::Allow, "{}", d.reason);
        assert_eq!(d.kind, DecisionKind::Provenance);
        assert_eq!(&*d.rule_id, "guardrail-2-provenance");
        let none = json!({ "recommendations": [] });
        assert!(b.decide_provenance(rule, &none, None).is_allowed());
    }

    #[test]
    fn denies_naming_the_item_and_the_unknown_id() {
        let b = bundle();
        let rule = b.provenance_rules("strategy", "governance").next().unwrap();
        let payload = json!({ "recommendations": [
            { "gap_id": "gap-1" }, { "gap_id": "geo_score" }, { "topic": "no citation" }
        ] });
        let d = b.decide_provenance(rule, &payload, Some(&ids(&["gap-1"])));
        assert_eq!(d.verdict, Verdict::Deny);
        assert_eq!(&*d.rule_id, "guardrail-2-provenance");
        assert!(
            d.reason
                .contains("/recommendations/1 cites gap_id `geo_score`"),
            "{}",
            d.reason
        );
        assert!(
            d.reason.contains("/recommendations/2 cites nothing"),
            "{}",
            d.reason
        );
        assert!(!d.reason.contains("/recommendations/0"), "{}", d.reason);
        assert!(d.reason.contains("Guardrail 2"), "{}", d.reason);
    }

    #[test]
    fn denies_when_the_producer_never_delivered_or_items_are_missing() {
        let b = bundle();
        let rule = b.provenance_rules("strategy", "governance").next().unwrap();
        let payload = json!({ "recommendations": [{ "gap_id": "gap-1" }] });
        let d = b.decide_provenance(rule, &payload, None);
        assert_eq!(d.verdict, Verdict::Deny);
        assert!(
            d.reason.contains("reasoning never delivered gaps"),
            "{}",
            d.reason
        );
        let d = b.decide_provenance(rule, &json!({ "recs": [] }), Some(&ids(&["gap-1"])));
        assert_eq!(d.verdict, Verdict::Deny);
        assert!(
            d.reason.contains("no array at `/recommendations`"),
            "{}",
            d.reason
        );
    }

    #[test]
    fn validation_locates_unknown_agents_output_types_and_bad_pointers() {
        let bad = BUNDLE
            .replace("agent = \"reasoning\"", "agent = \"oracle\"")
            .replace("output_type = \"gaps\", ids", "output_type = \"nope\", ids")
            .replace(
                "items = \"/recommendations\"",
                "items = \"recommendations\"",
            )
            .replace("to = \"governance\" }\nitems", "to = \"ghost\" }\nitems");
        let err = PolicyBundle::from_toml_str(&bad, "t.toml")
            .expect_err("invalid provenance rule")
            .to_string();
        for want in ["`oracle`", "`nope`", "`ghost`", "not a JSON pointer"] {
            assert!(err.contains(want), "missing {want} in {err}");
        }
        assert!(err.contains("t.toml:"), "errors carry a location: {err}");
    }

    #[test]
    fn a_producer_that_never_hands_off_the_type_is_a_contradiction() {
        let bad = BUNDLE.replace("agent = \"reasoning\"", "agent = \"intelligence\"");
        let err = PolicyBundle::from_toml_str(&bad, "t.toml")
            .expect_err("intelligence never hands off gaps")
            .to_string();
        assert!(err.contains("no allowed edge from `intelligence`"), "{err}");
    }

    #[test]
    fn a_bundle_without_provenance_keeps_its_hash_and_rules_change_it() {
        let without = BUNDLE.split("[[provenance]]").next().unwrap();
        let plain = PolicyBundle::from_toml_str(without, "t.toml").unwrap();
        let spec = plain.spec().clone();
        let text = String::from_utf8(plain.canonical_bytes()).unwrap();
        assert!(!text.contains("provenance"), "{text}");
        assert!(spec.provenance.is_empty());
        assert_ne!(plain.hash(), bundle().hash());
    }
}
