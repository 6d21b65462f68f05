//! What changed between two bundles: per agent pair (the handoff verdict) and per rule.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::{BundleHash, json_text};
use crate::compiled::PolicyBundle;
use crate::decision::Verdict;
use crate::rules::handoff::InputKind;

/// A handoff verdict before or after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairVerdict {
    pub verdict: Verdict,
    pub rule_id: String,
    pub reason: String,
}

/// A pair whose handoff verdict or deciding rule changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairChange {
    pub from: String,
    pub to: String,
    pub input: InputKind,
    pub old: PairVerdict,
    pub new: PairVerdict,
}

/// How a rule changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleChangeKind {
    Added,
    Removed,
    Changed,
}

/// A rule (or setting) that was added, removed or changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleChange {
    /// Where in the bundle, e.g. `interactions.forbidden`.
    pub section: String,
    /// The rule's id, or the setting's name.
    pub id: String,
    pub change: RuleChangeKind,
}

/// Everything that differs between two bundles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleDiff {
    pub old_hash: BundleHash,
    pub new_hash: BundleHash,
    pub pairs: Vec<PairChange>,
    pub rules: Vec<RuleChange>,
}

impl BundleDiff {
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty() && self.rules.is_empty()
    }
}

/// Compares `old` with `new`.
pub fn diff(old: &PolicyBundle, new: &PolicyBundle) -> BundleDiff {
    let agents: BTreeSet<&str> = old.agent_ids().chain(new.agent_ids()).collect();
    let mut pairs = Vec::new();
    for from in &agents {
        for to in &agents {
            for input in [InputKind::Decision, InputKind::Context] {
                let a = old.decide_handoff(from, to, input).decision;
                let b = new.decide_handoff(from, to, input).decision;
                if a.verdict != b.verdict || a.rule_id != b.rule_id || a.reason != b.reason {
                    let v = |d: crate::decision::PolicyDecision| PairVerdict {
                        verdict: d.verdict,
                        rule_id: d.rule_id.to_string(),
                        reason: d.reason.to_string(),
                    };
                    pairs.push(PairChange {
                        from: (*from).to_owned(),
                        to: (*to).to_owned(),
                        input,
                        old: v(a),
                        new: v(b),
                    });
                }
            }
        }
    }
    let mut rules = Vec::new();
    let a = serde_json::to_value(old.spec()).unwrap_or(Value::Null);
    let b = serde_json::to_value(new.spec()).unwrap_or(Value::Null);
    compare("", &a, &b, &mut rules);
    BundleDiff {
        old_hash: old.hash(),
        new_hash: new.hash(),
        pairs,
        rules,
    }
}

/// Lists of objects with ids are compared by id; objects one level down by key; the rest whole.
fn compare(section: &str, a: &Value, b: &Value, out: &mut Vec<RuleChange>) {
    let keys: BTreeSet<&String> = a
        .as_object()
        .into_iter()
        .chain(b.as_object())
        .flat_map(|m| m.keys())
        .collect();
    for k in keys {
        let (x, y) = (
            a.get(k).unwrap_or(&Value::Null),
            b.get(k).unwrap_or(&Value::Null),
        );
        if x == y {
            continue;
        }
        let path = if section.is_empty() {
            k.clone()
        } else {
            format!("{section}.{k}")
        };
        let by_id = |v: &Value| -> Option<BTreeMap<String, String>> {
            let items = v.as_array()?;
            items
                .iter()
                .map(|i| Some((id_of(i)?, json_text(i))))
                .collect()
        };
        match (
            by_id(x).or_else(|| x.is_null().then(BTreeMap::new)),
            by_id(y).or_else(|| y.is_null().then(BTreeMap::new)),
        ) {
            (Some(xa), Some(ya)) if !(xa.is_empty() && ya.is_empty()) => {
                let ids: BTreeSet<&String> = xa.keys().chain(ya.keys()).collect();
                for id in ids {
                    let change = match (xa.get(id), ya.get(id)) {
                        (None, Some(_)) => RuleChangeKind::Added,
                        (Some(_), None) => RuleChangeKind::Removed,
                        (Some(p), Some(q)) if p != q => RuleChangeKind::Changed,
                        _ => continue,
                    };
                    out.push(RuleChange {
                        section: path.clone(),
                        id: id.clone(),
                        change,
                    });
                }
            }
            _ if x.is_object() && y.is_object() && section.is_empty() => compare(&path, x, y, out),
            _ => {
                let change = if x.is_null() {
                    RuleChangeKind::Added
                } else if y.is_null() {
                    RuleChangeKind::Removed
                } else {
                    RuleChangeKind::Changed
                };
                out.push(RuleChange {
                    section: section.to_owned(),
                    id: k.clone(),
                    change,
                });
            }
        }
    }
}

fn id_of(v: &Value) -> Option<String> {
    let id = v.get("id").or_else(|| v.get("code"))?.as_str()?;
    Some(match v.get("version").and_then(Value::as_u64) {
        Some(ver) if v.get("schema").is_some() => format!("{id}@{ver}"),
        _ => id.to_owned(),
    })
}
