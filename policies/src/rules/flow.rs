//! What the declared flow order (`interactions.flow_order`) says about a pair of agents:
//! next, skip, circular, reverse or unrelated (docs/governance.md#flow-order-skip-reverse-circular).
//! The interaction matrix (`handoff.rs`) denies what it forbids and rejects an allowed edge
//! that contradicts it.

use serde::{Deserialize, Serialize};

use crate::error::DiagnosticCode as Code;
use crate::locate::Pointer;
use crate::rules::handoff::AllowedEdge;
use crate::validate::Checker;

/// How a handoff relates to the declared flow order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "relation")]
pub enum FlowRelation {
    /// The receiver directly follows the sender somewhere in the order.
    Next,
    /// The receiver comes later, past the agents in `via` (Rule 2: no skipping).
    Skip { via: Vec<String> },
    /// The receiver is the sender's immediate predecessor: the handoff closes a loop.
    Circular,
    /// The receiver is further upstream (Rule 3: no reverse flow).
    Reverse,
    /// At least one side is not in the flow order; the order says nothing.
    Unrelated,
}

/// Classifies `from → to` against `order` (an agent may appear more than once).
pub fn relation(order: &[String], from: &str, to: &str) -> FlowRelation {
    let pf: Vec<usize> = order
        .iter()
        .enumerate()
        .filter(|(_, a)| *a == from)
        .map(|(i, _)| i)
        .collect();
    let pt: Vec<usize> = order
        .iter()
        .enumerate()
        .filter(|(_, a)| *a == to)
        .map(|(i, _)| i)
        .collect();
    if pf.is_empty() || pt.is_empty() {
        return FlowRelation::Unrelated;
    }
    if pf.iter().any(|i| pt.contains(&(i + 1))) {
        return FlowRelation::Next;
    }
    // Nearest forward occurrence, if any: a skip over the agents in between.
    let forward = pf
        .iter()
        .flat_map(|&i| {
            pt.iter()
                .filter(move |&&j| j > i)
                .map(move |&j| (j - i, i, j))
        })
        .min();
    if let Some((_, i, j)) = forward {
        let via = order
            .get(i + 1..j)
            .map(<[String]>::to_vec)
            .unwrap_or_default();
        return FlowRelation::Skip { via };
    }
    if pf.iter().any(|&i| i > 0 && pt.contains(&(i - 1))) {
        FlowRelation::Circular
    } else {
        FlowRelation::Reverse
    }
}

/// A human-readable reason for a flow relation that forbids a handoff.
pub fn reason(rel: &FlowRelation, from: &str, to: &str) -> Option<String> {
    match rel {
        FlowRelation::Next | FlowRelation::Unrelated => None,
        FlowRelation::Skip { via } => Some(format!(
            "No agent skipping allowed: {from} → {to} must go through {}",
            via.join(" + ")
        )),
        FlowRelation::Circular => Some(format!(
            "Circular dependency: {to} hands off to {from}, so {from} → {to} closes a loop"
        )),
        FlowRelation::Reverse => Some(format!(
            "Reverse flow not allowed: {to} is upstream of {from}"
        )),
    }
}

/// An allowed edge (at `p`) that the flow order forbids contradicts it.
pub(crate) fn check_allowed_edge(
    c: &mut Checker<'_>,
    p: &Pointer,
    order: &[String],
    e: &AllowedEdge,
) {
    let rel = relation(order, &e.from, &e.to);
    if let Some(why) = reason(&rel, &e.from, &e.to) {
        c.push(
            p.key("to"),
            Code::FlowForbidsEdge,
            format!(
                "allowed edge {} → {} contradicts the flow order: {why}",
                e.from, e.to
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Vec<String> {
        [
            "external",
            "governance",
            "observation",
            "intelligence",
            "reasoning",
            "strategy",
            "governance",
            "external",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    #[test]
    fn seed_000_order_derives_skips_and_reversals() {
        let o = geo();
        assert_eq!(
            relation(&o, "governance", "observation"),
            FlowRelation::Next
        );
        assert_eq!(relation(&o, "strategy", "governance"), FlowRelation::Next);
        assert_eq!(relation(&o, "governance", "external"), FlowRelation::Next);
        assert_eq!(
            relation(&o, "intelligence", "governance"),
            FlowRelation::Skip {
                via: vec!["reasoning".into(), "strategy".into()]
            }
        );
        assert_eq!(
            relation(&o, "observation", "reasoning"),
            FlowRelation::Skip {
                via: vec!["intelligence".into()]
            }
        );
        assert_eq!(
            relation(&o, "strategy", "intelligence"),
            FlowRelation::Reverse
        );
        assert_eq!(
            relation(&o, "reasoning", "intelligence"),
            FlowRelation::Circular
        );
        assert_eq!(relation(&o, "strategy", "nobody"), FlowRelation::Unrelated);
    }
}
