//! The interaction matrix (docs/governance.md#interaction-matrix): may `from` hand off to `to`?
//! Explicit forbidden edges first, then allowed edges, then what the flow order forbids (skip,
//! reverse, circular), then deny by default. Read-only context edges (Guardrail 2) are a separate
//! kind of input that never counts as a decision input.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::canonical::BundleHash;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::flow::{self, FlowRelation};
use crate::model::BundleSpec;
use crate::validate::edge_id;

/// Whether the receiver may decide from the handed-off input, or only consult it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// Used for prioritisation, ranking, decisions (e.g. Reasoning → Strategy).
    Decision,
    /// Read-only, non-decisive reference (e.g. Intelligence → Strategy).
    Context,
}

/// A handoff decision, with the edge's output type when one is declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffDecision {
    pub decision: PolicyDecision,
    pub input: InputKind,
    pub output_type: Option<Arc<str>>,
    pub flow: FlowRelation,
}

fn covers(pattern: &str, agent: &str) -> bool {
    pattern == "*" || pattern == agent
}

/// Decides one pair from the (normalised) spec; used to fill the compiled table.
pub(crate) fn compute(
    spec: &BundleSpec,
    hash: BundleHash,
    from: &str,
    to: &str,
    input: InputKind,
) -> HandoffDecision {
    let m = &spec.interactions;
    let rel = flow::relation(&m.flow_order, from, to);
    let mut chain = Vec::new();
    let done = |verdict, rule_id: String, reason: String, chain, output_type: Option<&String>| {
        HandoffDecision {
            decision: conclude(DecisionKind::Handoff, verdict, hash, rule_id, reason, chain),
            input,
            output_type: output_type.map(|s| Arc::from(s.as_str())),
            flow: rel.clone(),
        }
    };
    if input == InputKind::Context {
        if let Some(e) = m.context.iter().find(|e| e.from == from && e.to == to) {
            let id = edge_id(&e.id, "context", from, to);
            let uses = if e.permitted_uses.is_empty() {
                String::new()
            } else {
                format!(" (may be used for: {})", e.permitted_uses.join(", "))
            };
            let reason = format!(
                "{from} → {to} is read-only context: non-decisive, {to} must not derive priorities, rankings or decisions from it{uses}"
            );
            chain.push(RuleStep::new(
                id.as_str(),
                StepOutcome::Applied,
                "read-only context edge",
            ));
            return done(Verdict::Allow, id, reason, chain, e.output_type.as_ref());
        }
        chain.push(RuleStep::new(
            "interactions.context",
            StepOutcome::NotApplicable,
            format!("no context edge {from} → {to}"),
        ));
    }
    // Exact forbidden edges first, then wildcards: the most specific reason wins.
    let mut forbidden: Vec<_> = m
        .forbidden
        .iter()
        .filter(|f| covers(&f.from, from) && covers(&f.to, to))
        .collect();
    forbidden.sort_by_key(|f| (f.from == "*", f.to == "*"));
    if let Some(f) = forbidden.first() {
        let id = edge_id(&f.id, "forbid", &f.from, &f.to);
        chain.push(RuleStep::new(
            id.as_str(),
            StepOutcome::Applied,
            "forbidden edge",
        ));
        for other in forbidden.iter().skip(1) {
            chain.push(RuleStep::new(
                edge_id(&other.id, "forbid", &other.from, &other.to),
                StepOutcome::Overridden,
                "less specific forbidden edge",
            ));
        }
        return done(Verdict::Deny, id, f.reason.clone(), chain, None);
    }
    chain.push(RuleStep::new(
        "interactions.forbidden",
        StepOutcome::NotApplicable,
        format!("no forbidden edge matches {from} → {to}"),
    ));
    if let Some(e) = m.allowed.iter().find(|e| e.from == from && e.to == to) {
        let id = edge_id(&e.id, "allow", from, to);
        let trigger = e
            .trigger
            .as_deref()
            .map(|t| format!(" when: {t}"))
            .unwrap_or_default();
        let carries = e
            .output_type
            .as_deref()
            .map(|t| format!(", carrying {t}"))
            .unwrap_or_default();
        chain.push(RuleStep::new(
            id.as_str(),
            StepOutcome::Applied,
            "allowed edge",
        ));
        let what = if input == InputKind::Context {
            "allowed decisive edge (context included)"
        } else {
            "allowed"
        };
        return done(
            Verdict::Allow,
            id,
            format!("{from} → {to} {what}{carries}{trigger}"),
            chain,
            e.output_type.as_ref(),
        );
    }
    chain.push(RuleStep::new(
        "interactions.allowed",
        StepOutcome::NotApplicable,
        format!("no allowed edge {from} → {to}"),
    ));
    if let Some(reason) = flow::reason(&rel, from, to) {
        let id = match rel {
            FlowRelation::Skip { .. } => "flow_order.skip",
            FlowRelation::Circular => "flow_order.circular",
            _ => "flow_order.reverse",
        };
        chain.push(RuleStep::new(
            id,
            StepOutcome::Applied,
            "derived from the declared flow order",
        ));
        return done(Verdict::Deny, id.to_owned(), reason, chain, None);
    }
    chain.push(RuleStep::new(
        "deny_by_default",
        StepOutcome::Applied,
        "every pair not allowed is denied",
    ));
    done(
        Verdict::Deny,
        "deny_by_default".to_owned(),
        format!("no allowed edge from {from} to {to} (deny by default)"),
        chain,
        None,
    )
}

impl PolicyBundle {
    /// May `from` hand work (or, with [`InputKind::Context`], read-only context) to `to`?
    pub fn decide_handoff(&self, from: &str, to: &str, input: InputKind) -> HandoffDecision {
        let n = self.agent_ids.len();
        match (self.agent(from), self.agent(to)) {
            (Some(f), Some(t)) => {
                let table = if input == InputKind::Decision {
                    &self.decisive
                } else {
                    &self.context
                };
                match table.get(f * n + t) {
                    Some(d) => d.clone(),
                    None => self.unknown_agent(from, to, input),
                }
            }
            _ => self.unknown_agent(from, to, input),
        }
    }

    fn unknown_agent(&self, from: &str, to: &str, input: InputKind) -> HandoffDecision {
        let who = if self.agent(from).is_none() { from } else { to };
        let chain = vec![RuleStep::new(
            "agents",
            StepOutcome::Applied,
            format!("`{who}` is not in the agent registry"),
        )];
        HandoffDecision {
            decision: conclude(
                DecisionKind::Handoff,
                Verdict::Deny,
                self.hash,
                "agents.unknown",
                format!("unknown agent `{who}`"),
                chain,
            ),
            input,
            output_type: None,
            flow: FlowRelation::Unrelated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> PolicyBundle {
        let src = r#"
            bundle = { id = "t" }
            agents = [{ id = "a" }, { id = "b" }, { id = "c" }]
            [interactions]
            flow_order = ["a", "b", "c"]
            allowed = [{ from = "a", to = "b", output_type = "o" }, { from = "b", to = "c" }]
            context = [{ from = "a", to = "c" }]
            forbidden = [{ from = "*", to = "a", reason = "a is the entry" }]
            [[output_types]]
            id = "o"
            schema = { type = "object" }
        "#;
        PolicyBundle::from_toml_str(src, "t.toml").unwrap()
    }

    #[test]
    fn order_of_precedence_forbidden_allowed_flow_default() {
        let b = bundle();
        let d = b.decide_handoff("c", "a", InputKind::Decision).decision;
        assert_eq!(
            (d.verdict, &*d.rule_id, &*d.reason),
            (Verdict::Deny, "forbid:*->a", "a is the entry")
        );
        let h = b.decide_handoff("a", "b", InputKind::Decision);
        assert_eq!(
            (h.decision.verdict, h.output_type.as_deref()),
            (Verdict::Allow, Some("o"))
        );
        assert_eq!(
            &*b.decide_handoff("a", "c", InputKind::Decision)
                .decision
                .rule_id,
            "flow_order.skip"
        );
        assert_eq!(
            &*b.decide_handoff("c", "b", InputKind::Decision)
                .decision
                .rule_id,
            "flow_order.circular"
        );
        assert_eq!(
            &*b.decide_handoff("a", "ghost", InputKind::Decision)
                .decision
                .rule_id,
            "agents.unknown"
        );
    }

    #[test]
    fn context_edges_are_a_separate_non_decisive_kind() {
        let b = bundle();
        assert_eq!(
            b.decide_handoff("a", "c", InputKind::Context)
                .decision
                .verdict,
            Verdict::Allow
        );
        assert_eq!(
            b.decide_handoff("a", "c", InputKind::Decision)
                .decision
                .verdict,
            Verdict::Deny
        );
        // A decisive edge also carries context.
        assert_eq!(
            b.decide_handoff("b", "c", InputKind::Context)
                .decision
                .verdict,
            Verdict::Allow
        );
    }
}
