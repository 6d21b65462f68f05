//! The handoff context (seed 003's HANDOFF CONTEXT, seed 001's context parts): what the
//! engine tells every agent about the run it works in, beyond its inputs — the session,
//! where the workflow stands, which agents worked before, the human decisions made and
//! the original request. From decider version 7 it is `context.handoff` of every request;
//! its content parts (the original request, the humans' words) cross the gate like any
//! content, so blocked fields never reach an agent this way either: once per agent, and
//! again when they change (a new decision).
//! See docs/agent-protocol.md#the-handoff-context.

use super::handoff::Crossing;
use super::*;
use crate::event::HANDOFF_CONTEXT;
use crate::ids::AgentId;
use docket_policies::RuleStep;
use serde_json::Map;

/// Agents whose outputs are not another agent's work: the caller, a person, the tools.
const NOT_AGENTS: [&str; 3] = [EXTERNAL, "human", "tools"];

impl Batch<'_> {
    /// From decider version 7, sets `context.handoff` of `request` (replacing any carried
    /// over from a copied request), recording what its content parts let cross.
    pub(super) fn attach_handoff_context(&mut self, request: &mut AgentRequest) {
        if self.state.decider_version() < HANDOFF_CONTEXT {
            return;
        }
        let Some(run) = self.state.run.clone() else {
            return;
        };
        let to = request.target_agent.to_string();
        let mut handoff = Map::new();
        handoff.insert("session_id".to_owned(), json!(run.run_id));
        handoff.insert("workflow".to_owned(), json!(run.workflow.name));
        handoff.insert("position".to_owned(), self.position());
        handoff.insert("prior_agents".to_owned(), json!(self.prior_agents()));
        let authority = |rule: &str, reason: String| PolicyDecision {
            kind: DecisionKind::ContextScope,
            verdict: Verdict::Allow,
            rule_id: rule.into(),
            reason: reason.into(),
            bundle_hash: self.bundle.hash(),
            chain: vec![RuleStep::new(rule, StepOutcome::Applied, "handoff context")],
        };
        let told = self
            .state
            .context_told
            .get(&request.target_agent)
            .cloned()
            .unwrap_or_default();
        let decisions = self.human_decisions();
        if !decisions.is_empty() {
            let crossed = match told.decisions {
                Some((count, crossed)) if count == decisions.len() => crossed,
                _ => {
                    let why = authority(
                        "context.decisions",
                        format!("{to} is told the human decisions made in this run"),
                    );
                    Arc::new(self.gate_content(
                        "human",
                        &to,
                        ("decisions", InputKind::Context),
                        &json!({ "decisions": decisions }),
                        &why,
                    ))
                }
            };
            handoff.insert(
                "decisions".to_owned(),
                crossed.get("decisions").cloned().unwrap_or(json!([])),
            );
        }
        // The original request reaches the agent as the pair it is reached from allows
        // (a minimal handoff passes none of it): scoped under `source → to`, recorded as
        // content from `external`.
        let source = request.source_agent.to_string();
        let original = match told.original_request.get(source.as_str()) {
            Some(crossed) => Value::clone(crossed),
            None => {
                let why = authority(
                    "context.original_request",
                    format!("{to} is told the run's original request, as {source} → {to} allows"),
                );
                let scoped = self.bundle.scope_authorised(&source, &to, &run.input, &why);
                let contract = scoped.decision.clone();
                let crossing =
                    Crossing::by(EXTERNAL, &to, ("original_request", InputKind::Context), why);
                Value::clone(&self.record_allowed(crossing, contract, scoped))
            }
        };
        handoff.insert("original_request".to_owned(), original);
        request
            .context
            .insert("handoff".to_owned(), Value::Object(handoff));
    }

    /// Where the workflow stands: in a sequential flow, the step of `flow_order` (from 1,
    /// without `external`) and how many there are; otherwise how many handoffs so far.
    fn position(&self) -> Value {
        let order = &self.bundle.spec().interactions.flow_order;
        if self.bundle.spec().interactions.sequential_flow && order.len() > 2 {
            let step = self.state.flow_position();
            let agent = order.get(step as usize).map(String::as_str).unwrap_or("");
            return json!({ "step": step, "of": order.len() - 2, "agent": agent });
        }
        let handoffs = self
            .state
            .handoffs
            .iter()
            .filter(|h| h.allowed && h.input == InputKind::Decision)
            .count();
        json!({ "handoffs": handoffs })
    }

    /// The agents whose outputs crossed to another agent so far, in the order they first
    /// did.
    fn prior_agents(&self) -> Vec<AgentId> {
        let mut seen: Vec<AgentId> = Vec::new();
        for h in &self.state.handoffs {
            let agent = h.from.as_str();
            if h.allowed
                && h.input == InputKind::Decision
                && !NOT_AGENTS.contains(&agent)
                && !seen.iter().any(|s| s == agent)
            {
                seen.push(h.from.clone());
            }
        }
        seen
    }

    /// The decisions people made on this run's tickets, in ticket order.
    fn human_decisions(&self) -> Vec<Value> {
        self.state
            .tickets
            .iter()
            .filter_map(|(id, t)| {
                let d = t.decision.as_ref()?;
                let mut v = json!({
                    "ticket": id,
                    "asked": t.reason,
                    "by": d.by,
                    "approved": d.approved,
                    "reason": d.reason,
                });
                if let Some(choice) = d.choice {
                    v["choice"] = json!(choice);
                }
                if let Some(answer) = &d.answer {
                    v["answer"] = json!(answer);
                }
                Some(v)
            })
            .collect()
    }
}
