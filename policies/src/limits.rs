//! Count limits of a bundle (docs/governance.md#limits): checked on the parsed bundle
//! before any other check, so that what checking, compiling and deciding cost is bounded
//! by the bundle's size and these counts. Above a limit the bundle is refused with a
//! `hard maximum exceeded` diagnostic naming the list, its length and the limit.

use serde_json::Value;

use crate::error::DiagnosticCode as Code;
use crate::locate::Pointer;
use crate::model::BundleSpec;
use crate::validate::Issue;

/// Agents in the registry (`[[agents]]`).
pub const MAX_AGENTS: usize = 10_000;
/// Entries of `interactions.flow_order` (an agent may appear more than once).
pub const MAX_FLOW_ORDER: usize = 20_000;
/// Rules in one section's list: edges of each kind, handoff rules, tool patterns,
/// output types, domains, locks, side-effect policies, provenance rules.
pub const MAX_RULES: usize = 100_000;
/// Entries of any list inside an agent or a rule (capabilities, tool patterns, scopes,
/// field paths, requesters, an embedded JSON Schema's lists).
pub const MAX_ENTRIES: usize = 10_000;
/// Problems listed when a bundle is refused; the rest are counted.
pub const MAX_PROBLEMS: usize = 100;

/// Every list of `spec` longer than its limit, each named by its pointer; empty when
/// every count is within its limit.
pub(crate) fn check(spec: &BundleSpec) -> Vec<Issue> {
    let mut issues = Vec::new();
    if let Ok(doc) = serde_json::to_value(spec) {
        walk(&doc, &mut Pointer::root(), &mut issues);
    }
    issues
}

/// The limit of the list at `p` and the words that name it.
fn limit(p: &Pointer) -> (usize, &'static str) {
    match p.to_string().as_str() {
        "/agents" => (MAX_AGENTS, "agents"),
        "/interactions/flow_order" => (MAX_FLOW_ORDER, "entries in the flow order"),
        _ if p.0.len() <= 2 => (MAX_RULES, "rules in one list"),
        _ => (MAX_ENTRIES, "entries in one list"),
    }
}

fn walk(v: &Value, p: &mut Pointer, issues: &mut Vec<Issue>) {
    match v {
        Value::Array(items) => {
            let (max, what) = limit(p);
            if items.len() > max {
                issues.push(Issue {
                    pointer: p.clone(),
                    code: Code::HardMaximumExceeded,
                    message: format!(
                        "{} {what}: more than the limit of {max} (docs/governance.md#limits)",
                        items.len()
                    ),
                });
                return;
            }
            for (i, item) in items.iter().enumerate() {
                p.0.push(crate::locate::Seg::Index(i));
                walk(item, p, issues);
                p.0.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                p.0.push(crate::locate::Seg::Key(k.clone()));
                walk(item, p, issues);
                p.0.pop();
            }
        }
        _ => {}
    }
}
