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
use std::collections::BTreeMap;

use crate::events::{SESSIONS, Session};

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
        let session = run
            .session
            .as_deref()
            .filter(|_| self.state.decider_version() >= SESSIONS);
        let session_id = session.map_or(&run.run_id, |s| &s.id);
        handoff.insert("session_id".to_owned(), json!(session_id));
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
        let decisions = self.state.human_decisions();
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
        if let Some(session) = session {
            let told = told.session;
            let part = self.session_context(session, &to, original_part, &told);
            handoff.insert("session".to_owned(), part);
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

    /// `context.handoff.session` of a later turn (docs/agent-protocol.md#sessions): the
    /// session's id and this turn, and what its earlier turns carried, each part crossing
    /// the gate as content the first time `to` is told it (`told`: what crossed before).
    /// What the user said and what we told them in each earlier turn cross as content from
    /// `external`, one crossing per turn, scoped for `external → to` (left out when the
    /// `original_input` part is `none`); the decisions people made cross from `human`, as
    /// this run's own do.
    fn session_context(
        &mut self,
        session: &Session,
        to: &str,
        original_part: ContentPart,
        told: &BTreeMap<String, Arc<Value>>,
    ) -> Value {
        let mut part = Map::new();
        part.insert("id".to_owned(), json!(session.id));
        part.insert("turn".to_owned(), json!(session.turn));
        let conversation = [
            (
                "told_us",
                "request",
                "the user's request of the session's turn",
            ),
            (
                "we_told",
                "output",
                "what the session's turn answered the user",
            ),
        ];
        for (name, field, what) in conversation {
            if original_part == ContentPart::None {
                break;
            }
            let mut listed = Vec::new();
            for turn in &session.turns {
                let item = match field {
                    "request" => &turn.request,
                    _ => match &turn.output {
                        Some(output) => output,
                        None => continue,
                    },
                };
                let output_type = format!("session.{name}.turn-{}", turn.turn);
                let crossed = match told.get(&output_type) {
                    Some(crossed) => Value::clone(crossed),
                    None => {
                        let why = self.session_authority(
                            &output_type,
                            format!("{to} is told {what} {}", turn.turn),
                        );
                        Value::clone(&self.gate_content(
                            EXTERNAL,
                            to,
                            (&output_type, InputKind::Context),
                            item,
                            &why,
                        ))
                    }
                };
                listed.push(json!({ "turn": turn.turn, field: crossed }));
            }
            part.insert(name.to_owned(), Value::Array(listed));
        }
        let decisions: Vec<Value> = session
            .turns
            .iter()
            .flat_map(|t| {
                t.decisions.iter().map(|d| {
                    let mut d = d.clone();
                    if let Some(o) = d.as_object_mut() {
                        o.insert("turn".to_owned(), json!(t.turn));
                    }
                    d
                })
            })
            .collect();
        let crossed = if decisions.is_empty() {
            json!([])
        } else {
            let output_type = "session.decisions";
            match told.get(output_type) {
                Some(crossed) => crossed.get("decisions").cloned().unwrap_or(json!([])),
                None => {
                    let why = self.session_authority(
                        output_type,
                        format!(
                            "{to} is told the decisions people made in the session's earlier turns"
                        ),
                    );
                    self.gate_content(
                        "human",
                        to,
                        (output_type, InputKind::Context),
                        &json!({ "decisions": decisions }),
                        &why,
                    )
                    .get("decisions")
                    .cloned()
                    .unwrap_or(json!([]))
                }
            }
        };
        part.insert("decisions".to_owned(), crossed);
        Value::Object(part)
    }

    /// What lets a part of the session reach an agent: rule `context.session`.
    fn session_authority(&self, part: &str, reason: String) -> PolicyDecision {
        PolicyDecision {
            kind: DecisionKind::ContextScope,
            verdict: Verdict::Allow,
            rule_id: "context.session".into(),
            reason: reason.into(),
            bundle_hash: self.bundle.hash(),
            chain: vec![RuleStep::new(
                "context.session",
                StepOutcome::Applied,
                format!("handoff context: {part}"),
            )],
        }
    }
}
