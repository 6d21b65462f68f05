//! The handoff context (seed 003's HANDOFF CONTEXT, seed 001's context parts): what the
//! engine tells every agent about the run it works in, beyond its inputs — the session,
//! where the workflow stands, which agents worked before, the human decisions made and
//! the original request. It is `context.handoff` of every request;
//! its content parts (the original request, the humans' words) cross the gate like any
//! content, so blocked fields never reach an agent this way either: once per agent, and
//! again when they change (a new decision).
//! See docs/agent-protocol.md#the-handoff-context.

use super::handoff::Crossing;
use super::*;
use docket_policies::{AgentIdentity, ContentPart, ContextPartsDecision, RuleStep};
use docket_protocol::AgentId;
use serde_json::Map;

impl Batch<'_> {
    /// Sets `context.handoff` of `request` (replacing any carried over from a copied
    /// request), recording what its content parts let cross.
    pub(super) fn attach_handoff_context(&mut self, request: &mut AgentRequest) {
        let Some(run) = self.state.run.clone() else {
            return;
        };
        let to = request.target_agent.to_string();
        let parts = self.context_parts(request);
        self.record_context_parts(request, &parts);
        let hide_agents = parts.agent_identity.value == AgentIdentity::Hide;
        let mut handoff = Map::new();
        handoff.insert("session_id".to_owned(), json!(run.run_id));
        handoff.insert("workflow".to_owned(), json!(run.workflow.name));
        handoff.insert("position".to_owned(), self.position());
        if !hide_agents {
            handoff.insert("prior_agents".to_owned(), json!(self.prior_agents()));
        }
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
                    self.gate_content(
                        "human",
                        &to,
                        ("decisions", InputKind::Context),
                        &json!({ "decisions": decisions }),
                        &why,
                    )
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
        let original_part = parts.original_input.value;
        let cached = told
            .original_request
            .get(source.as_str())
            .filter(|_| original_part == ContentPart::Scoped);
        let original = match cached {
            _ if original_part == ContentPart::None => Value::Null,
            Some(crossed) => Value::clone(crossed),
            None if original_part == ContentPart::Full => self.original_in_full(
                &source,
                &to,
                &run.input,
                told.original_request.get(source.as_str()),
            ),
            None => {
                let why = authority(
                    "context.original_request",
                    format!("{to} is told the run's original request, as {source} → {to} allows"),
                );
                let scoped = self
                    .scoping()
                    .scope_authorised(&source, &to, &run.input, &why);
                let contract = scoped.decision.clone();
                let crossing =
                    Crossing::by(EXTERNAL, &to, ("original_request", InputKind::Context), why);
                Value::clone(&self.record_allowed(crossing, contract, scoped))
            }
        };
        if original_part != ContentPart::None {
            handoff.insert("original_request".to_owned(), original);
        }
        request
            .context
            .insert("handoff".to_owned(), Value::Object(handoff));
    }

    /// The context parts the bundle sets for the receiver of `request`, decided for the
    /// pair it was reached by (`source_agent → target_agent`).
    pub(super) fn context_parts(&self, request: &AgentRequest) -> ContextPartsDecision {
        self.bundle
            .decide_context_parts(&request.source_agent, &request.target_agent)
    }

    /// Records, before the call, the parts that depart from the defaults (what is hidden
    /// or passed in full, and the rule that says so), so an auditor sees what the agent
    /// was not told.
    fn record_context_parts(&mut self, request: &AgentRequest, parts: &ContextPartsDecision) {
        let departures = parts.departures();
        let Some((_, _, first_rule)) = departures.first() else {
            return;
        };
        let (from, to) = (&request.source_agent, &request.target_agent);
        let said: Vec<String> = departures
            .iter()
            .map(|(part, value, rule)| format!("{part} = {value} ({rule})"))
            .collect();
        let decision = PolicyDecision {
            kind: DecisionKind::ContextScope,
            verdict: Verdict::Allow,
            rule_id: (*first_rule).into(),
            reason: format!("context parts for {from} → {to}: {}", said.join(", ")).into(),
            bundle_hash: self.bundle.hash(),
            chain: departures
                .iter()
                .map(|(part, value, rule)| {
                    RuleStep::new(*rule, StepOutcome::Applied, format!("{part} = {value}"))
                })
                .collect(),
        };
        self.push(RunEvent::PolicyDecided {
            subject: request.request_id.to_string(),
            decision,
        });
    }

    /// The original request passed in full (blocked fields still removed) for `source →
    /// to`: recorded when it differs from what `to` was last told from `source`.
    fn original_in_full(
        &mut self,
        source: &str,
        to: &str,
        input: &Value,
        told: Option<&Arc<Value>>,
    ) -> Value {
        let why = PolicyDecision {
            kind: DecisionKind::ContextScope,
            verdict: Verdict::Allow,
            rule_id: "context.original_request".into(),
            reason: format!("{to} is told the run's original request in full").into(),
            bundle_hash: self.bundle.hash(),
            chain: vec![RuleStep::new(
                "context.original_request",
                StepOutcome::Applied,
                "handoff context",
            )],
        };
        let scoped =
            self.scoping()
                .scope_authorised_in(source, to, input, &why, ContentPart::Full.mode());
        if told.is_some_and(|t| **t == scoped.context) {
            return scoped.context;
        }
        let contract = scoped.decision.clone();
        let crossing = Crossing::by(EXTERNAL, to, ("original_request", InputKind::Context), why);
        Value::clone(&self.record_allowed(crossing, contract, scoped))
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
        json!({ "handoffs": self.state.crossings.count })
    }

    /// The agents whose outputs crossed to another agent so far, in the order they first
    /// did.
    fn prior_agents(&self) -> Vec<AgentId> {
        self.state
            .crossings
            .senders
            .iter()
            .filter(|a| !NOT_AGENTS.contains(&a.as_str()))
            .cloned()
            .collect()
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
