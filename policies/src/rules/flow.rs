//! What the declared flow order (`interactions.flow_order`) says about a pair of agents:
//! next, skip, circular, reverse or unrelated (docs/governance.md#flow-order-skip-reverse-circular).
//! The interaction matrix (`handoff.rs`) denies what it forbids and rejects an allowed edge
//! that contradicts it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict};
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::rules::handoff::{AllowedEdge, InteractionMatrix};
use crate::validate::Checker;

/// The rule id of a handoff the run's position in a sequential flow denies.
pub const POSITION_RULE: &str = "flow_order.position";

/// What a sequential flow says about one handoff at the run's current position
/// (docs/governance.md#sequential-flow).
#[derive(Debug, Clone, PartialEq)]
pub enum FlowStep {
    /// The bundle's flow is not sequential: the interaction matrix alone decides.
    Free,
    /// The handoff is the flow's next step: the run moves to this position (0-based
    /// index into `flow_order`).
    Next(u32),
    /// Not the next step from where the run is.
    Denied(PolicyDecision),
}

impl PolicyBundle {
    /// Decides `from → to` when the run is at `position` of a sequential flow (0: the
    /// first entry of `flow_order`, where a run starts).
    #[must_use]
    pub fn decide_flow_step(&self, from: &str, to: &str, position: u32) -> FlowStep {
        let m = &self.spec().interactions;
        if !m.sequential_flow {
            return FlowStep::Free;
        }
        let order = &m.flow_order;
        let at = usize::try_from(position).unwrap_or(usize::MAX);
        let here = order.get(at).map(String::as_str);
        let next = order.get(at.saturating_add(1)).map(String::as_str);
        if here == Some(from) && next == Some(to) {
            return FlowStep::Next(position.saturating_add(1));
        }
        let reason = match (here, next) {
            (Some(here), Some(next)) if here == from => format!(
                "{from} → {to} is not the next step of the flow: {from} is at position {} of \
                 {} (after {}), where the only next agent is {next}",
                at + 1,
                order.len(),
                order[..at].join(", "),
            ),
            (Some(here), _) if here != from => format!(
                "{from} may not hand off now: the flow is at {here} (position {} of {})",
                at + 1,
                order.len(),
            ),
            _ => format!(
                "{from} → {to}: the flow has ended (position {} of {})",
                at + 1,
                order.len()
            ),
        };
        let rule: Arc<str> = POSITION_RULE.into();
        FlowStep::Denied(PolicyDecision {
            kind: DecisionKind::Handoff,
            verdict: Verdict::Deny,
            rule_id: rule.clone(),
            reason: reason.into(),
            bundle_hash: self.hash(),
            chain: vec![RuleStep::new(
                rule,
                StepOutcome::Applied,
                "interactions.sequential_flow: one next agent per position",
            )],
        })
    }

    /// The position a run is at after going through `path` (the agents it visited, in
    /// order, from the first entry of `flow_order`), or why `path` is not a prefix of the
    /// flow. For explaining a handoff at a position.
    ///
    /// # Errors
    /// When the flow is not sequential or `path` does not follow it.
    pub fn flow_position_after(&self, path: &[&str]) -> Result<u32, String> {
        let m = &self.spec().interactions;
        if !m.sequential_flow {
            return Err(
                "the bundle's flow is not sequential (interactions.sequential_flow)".into(),
            );
        }
        for (i, agent) in path.iter().enumerate() {
            match m.flow_order.get(i) {
                Some(expected) if expected == agent => {}
                Some(expected) => {
                    return Err(format!(
                        "the flow goes through {expected} at position {}, not {agent}",
                        i + 1
                    ));
                }
                None => {
                    return Err(format!(
                        "the flow has only {} positions",
                        m.flow_order.len()
                    ));
                }
            }
        }
        u32::try_from(path.len()).map_err(|_| "too long a path".to_owned())
    }
}

/// A sequential flow starts at `external` (where a run's input comes from) and can go
/// from each position to the next: every consecutive pair of the order is an allowed
/// edge, or a position would have no way out and the ones after it could never be
/// reached.
pub(crate) fn check_sequential(c: &mut Checker<'_>, m: &InteractionMatrix) {
    let order = &m.flow_order;
    let allowed: BTreeSet<(&str, &str)> = m
        .allowed
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    if order.first().map(String::as_str) != Some("external") {
        c.push(
            ptr!["interactions", "flow_order"],
            Code::InvalidValue,
            "a sequential flow starts where a run's input comes from: its flow_order must begin with `external`".to_owned(),
        );
    }
    for (i, pair) in order.windows(2).enumerate() {
        let (from, to) = (&pair[0], &pair[1]);
        if !allowed.contains(&(from.as_str(), to.as_str())) {
            c.push(
                ptr!["interactions", "flow_order", i + 1],
                Code::Contradiction,
                format!(
                    "position {} ({from}) has no way out: the flow's next step {from} → {to} is not an allowed edge, so positions {} to {} can never be reached",
                    i + 1,
                    i + 2,
                    order.len()
                ),
            );
        }
    }
}

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
#[cfg(test)]
pub fn relation(order: &[String], from: &str, to: &str) -> FlowRelation {
    FlowIndex::new(order).relation(order, from, to)
}

/// Where each agent stands in a flow order, so that classifying a pair costs lookups in
/// the two agents' positions rather than a walk of the whole order: a bundle is checked
/// against every allowed edge, and any pair may be decided.
#[derive(Debug, Clone, Default)]
pub(crate) struct FlowIndex {
    /// Each agent's positions in the order, ascending.
    positions: BTreeMap<Arc<str>, Vec<usize>>,
}

impl FlowIndex {
    pub(crate) fn new(order: &[String]) -> Self {
        let mut positions: BTreeMap<Arc<str>, Vec<usize>> = BTreeMap::new();
        for (i, a) in order.iter().enumerate() {
            match positions.get_mut(a.as_str()) {
                Some(list) => list.push(i),
                None => {
                    positions.insert(Arc::from(a.as_str()), vec![i]);
                }
            }
        }
        Self { positions }
    }

    /// Classifies `from → to` against `order`, the order this index was built from.
    pub(crate) fn relation(&self, order: &[String], from: &str, to: &str) -> FlowRelation {
        match self.classify(from, to) {
            Class::Next => FlowRelation::Next,
            Class::Skip(i, j) => FlowRelation::Skip {
                via: order
                    .get(i + 1..j)
                    .map(<[String]>::to_vec)
                    .unwrap_or_default(),
            },
            Class::Circular => FlowRelation::Circular,
            Class::Reverse => FlowRelation::Reverse,
            Class::Unrelated => FlowRelation::Unrelated,
        }
    }

    /// As [`Self::relation`], a skip named by its two positions rather than the agents
    /// between them.
    fn classify(&self, from: &str, to: &str) -> Class {
        let (Some(pf), Some(pt)) = (self.positions.get(from), self.positions.get(to)) else {
            return Class::Unrelated;
        };
        if adjacent(pf, pt) {
            return Class::Next;
        }
        // Nearest forward occurrence, if any: a skip over the agents in between.
        if let Some((_, i, j)) = nearest_forward(pf, pt) {
            return Class::Skip(i, j);
        }
        if adjacent(pt, pf) {
            Class::Circular
        } else {
            Class::Reverse
        }
    }

    /// Whether the order forbids `from → to` (a skip, a reverse or a circular handoff).
    pub(crate) fn forbids(&self, from: &str, to: &str) -> bool {
        !matches!(self.classify(from, to), Class::Next | Class::Unrelated)
    }
}

/// [`FlowRelation`] with a skip's positions in the order.
enum Class {
    Next,
    Skip(usize, usize),
    Circular,
    Reverse,
    Unrelated,
}

/// Whether some position of `a` is directly followed by one of `b` (both ascending),
/// searching the longer list for each entry of the shorter.
fn adjacent(a: &[usize], b: &[usize]) -> bool {
    if a.len() <= b.len() {
        a.iter().any(|&i| b.binary_search(&(i + 1)).is_ok())
    } else {
        b.iter()
            .any(|&j| j > 0 && a.binary_search(&(j - 1)).is_ok())
    }
}

/// The closest pair `i < j` with `i` from `pf` and `j` from `pt` (both ascending), as
/// `(j - i, i, j)`, the smallest `i` among equally close ones; each entry of the shorter
/// list is paired with its nearest partner in the longer one, which finds every closest
/// pair.
fn nearest_forward(pf: &[usize], pt: &[usize]) -> Option<(usize, usize, usize)> {
    if pf.len() <= pt.len() {
        pf.iter()
            .filter_map(|&i| {
                let at = pt.partition_point(|&j| j <= i);
                pt.get(at).map(|&j| (j - i, i, j))
            })
            .min()
    } else {
        pt.iter()
            .filter_map(|&j| {
                let at = pf.partition_point(|&i| i < j);
                at.checked_sub(1)
                    .and_then(|k| pf.get(k))
                    .map(|&i| (j - i, i, j))
            })
            .min()
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
    index: &FlowIndex,
    e: &AllowedEdge,
) {
    if !index.forbids(&e.from, &e.to) {
        return;
    }
    // The reason names the agents a skip passes over: written only for listed problems.
    if c.is_full() {
        c.count();
        return;
    }
    let rel = index.relation(order, &e.from, &e.to);
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
