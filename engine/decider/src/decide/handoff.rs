//! Handoffs: an agent's output offered to another agent, decided by the interaction
//! matrix and the data contract, scoped by the handoff rules, and recorded as
//! `handoff.allowed` (with what crossed) or `handoff.denied` (which blocks the run).
//! See docs/governance.md#interaction-matrix and #handoff-modes.

use super::*;
use crate::events::{DELIVERED_AUDITS, LABELLED_INPUTS};
use docket_policies::{
    FlowStep, HandoffAudit, HandoffMode, PriorOutputs, ScopedContext, Scoper, ScopingRules,
};
use docket_protocol::AgentId;
use docket_protocol::TaskRestrictions;

impl<'a> Batch<'a> {
    /// The bundle's scoping under the rules of the decider version that recorded the run:
    /// from version 13 the audit says what was delivered
    /// ([`DELIVERED_AUDITS`]).
    pub(super) fn scoping(&self) -> Scoper<'a> {
        self.bundle
            .scoping(if self.state.decider_version() >= DELIVERED_AUDITS {
                ScopingRules::Delivered
            } else {
                ScopingRules::Baseline
            })
    }

    /// Content that crosses `from → to` by a rule other than a handoff (`authority`):
    /// scoped for the pair and recorded as `handoff.allowed` with `output_type` naming
    /// what it is; what the receiver gets (docs/governance.md#one-gate).
    pub(super) fn gate_content(
        &mut self,
        from: &str,
        to: &str,
        (output_type, input): (&str, InputKind),
        payload: &Value,
        authority: &PolicyDecision,
    ) -> Arc<Value> {
        self.gate_content_in(from, to, (output_type, input), payload, authority, None)
    }

    /// An agent's output crossing by a rule other than the matrix (a capability's answer
    /// returning to its asker, a handoff a person's override let through):
    /// [`Self::gate_content`], labelled with what the answering call said of it.
    pub(super) fn gate_labelled(
        &mut self,
        answering: Option<&CallId>,
        (from, to): (&str, &str),
        output_type: &str,
        payload: &Value,
        authority: &PolicyDecision,
    ) -> (Arc<Value>, Labels) {
        let scoped = self
            .scoping()
            .scope_authorised_in(from, to, payload, authority, None);
        let contract = scoped.decision.clone();
        let labels = self.labels_of(answering);
        let crossing = Crossing {
            labels: labels.clone(),
            ..Crossing::by(
                from,
                to,
                (output_type, InputKind::Decision),
                authority.clone(),
            )
        };
        (self.record_allowed(crossing, contract, scoped), labels)
    }

    /// What the call `answering` said of its output, which travels with it from decider
    /// version 14 ([`LABELLED_INPUTS`]; nothing before): the confidence of the response
    /// being carried out and its warnings.
    pub(super) fn labels_of(&self, answering: Option<&CallId>) -> Labels {
        if self.state.decider_version() < LABELLED_INPUTS {
            return Labels::default();
        }
        let warnings = answering
            .and_then(|id| self.state.calls.get(id))
            .and_then(|c| c.response.as_ref())
            .map(|r| r.warnings.clone())
            .unwrap_or_default();
        Labels {
            confidence: self.confidence,
            warnings,
        }
    }

    /// [`Self::gate_content`] in `mode` when one is given (a context part set to `full`).
    pub(super) fn gate_content_in(
        &mut self,
        from: &str,
        to: &str,
        (output_type, input): (&str, InputKind),
        payload: &Value,
        authority: &PolicyDecision,
        mode: Option<HandoffMode>,
    ) -> Arc<Value> {
        let scoped = self
            .scoping()
            .scope_authorised_in(from, to, payload, authority, mode);
        let contract = scoped.decision.clone();
        let crossing = Crossing::by(from, to, (output_type, input), authority.clone());
        self.record_allowed(crossing, contract, scoped)
    }

    /// The latest outputs of the agents the receiver requires
    /// (`context_requirements.requires_prior_outputs`), each scoped in its
    /// `context_scope` mode and recorded, as read-only context inputs `prior:TYPE`
    /// (replacing any carried over from a copied request).
    pub(super) fn attach_prior_outputs(&mut self, request: &mut AgentRequest) {
        request
            .context_inputs
            .retain(|c| !c.output_type.starts_with("prior:"));
        let to = request.target_agent.to_string();
        let bundle = self.bundle;
        let required = bundle.required_prior_outputs(&to);
        // The context parts choose whose outputs cross.
        let parts = self.context_parts(request);
        let chosen: Vec<(String, String, String, &str)> =
            match Some(&parts.prior_outputs).filter(|s| s.value != PriorOutputs::default()) {
                None => required
                    .iter()
                    .map(|from| {
                        (
                            from.clone(),
                            format!("agents.{to}.context_requirements.requires_prior_outputs"),
                            format!("{to} requires {from}'s latest outputs"),
                            "required prior output",
                        )
                    })
                    .collect(),
                Some(setting) => self
                    .state
                    .outputs
                    .keys()
                    .map(AgentId::as_str)
                    .filter(|a| *a != to && !NOT_AGENTS.contains(a))
                    .filter(|a| setting.value.admits(a, required))
                    .map(|from| {
                        (
                            from.to_owned(),
                            setting.rule_id.clone(),
                            format!(
                                "prior_outputs = {} lets {from}'s latest outputs reach {to}",
                                setting.value.describe()
                            ),
                            "prior output the context parts let cross",
                        )
                    })
                    .collect(),
            };
        for (from, rule, why, detail) in chosen {
            let from = from.as_str();
            let Some(outputs) = self.state.outputs.get(from).cloned() else {
                continue;
            };
            let authority = PolicyDecision {
                kind: DecisionKind::ContextScope,
                verdict: Verdict::Allow,
                rule_id: rule.as_str().into(),
                reason: why.into(),
                bundle_hash: bundle.hash(),
                chain: vec![RuleStep::new(rule, StepOutcome::Applied, detail)],
            };
            for (output_type, payload) in outputs {
                let scoped = self
                    .scoping()
                    .scope_prior_output(from, &to, &payload, &authority);
                let contract = scoped.decision.clone();
                let output_type = format!("prior:{output_type}");
                let crossing = Crossing::by(
                    from,
                    &to,
                    (&output_type, InputKind::Context),
                    authority.clone(),
                );
                let delivered = self.record_allowed(crossing, contract, scoped);
                request.context_inputs.push(ContextInput {
                    source_agent: from.into(),
                    output_type,
                    payload: delivered,
                });
            }
        }
    }

    /// Records `handoff.allowed` for content that crosses as `scoped` says (its audit as
    /// recorded for this run's decider version); what the receiver gets.
    pub(super) fn record_allowed(
        &mut self,
        crossing: Crossing<'_>,
        contract: PolicyDecision,
        scoped: ScopedContext,
    ) -> Arc<Value> {
        let delivered = Arc::new(scoped.context);
        let audit = self.audit_as_recorded(scoped.audit);
        let Labels {
            confidence,
            warnings,
        } = crossing.labels;
        self.push(RunEvent::HandoffAllowed {
            from: crossing.from.into(),
            to: crossing.to.into(),
            output_type: crossing.output_type.to_owned(),
            input: crossing.input,
            decision: crossing.decision,
            contract,
            audit,
            delivered: delivered.clone(),
            provenance: crossing.provenance,
            flow_position: crossing.flow_position,
            confidence_level: confidence,
            warnings,
        });
        delivered
    }

    /// The audit of a scoping decision as recorded: flagged when every field of a
    /// non-empty payload was removed (docs/governance.md#handoff-modes).
    fn audit_as_recorded(&self, mut audit: HandoffAudit) -> HandoffAudit {
        let after = &audit.context_after_scoping;
        audit.every_field_removed =
            after.fields_included.is_empty() && !after.fields_excluded.is_empty();
        audit
    }

    pub(super) fn deny_handoff(
        &mut self,
        from: &str,
        to: &str,
        output_type: &str,
        decision: PolicyDecision,
        error_type: &str,
        origin: Option<&AgentRequest>,
    ) {
        let request_id =
            origin.map_or_else(|| self.run_id().to_string(), |r| r.request_id.to_string());
        let retry_count = origin.map_or(0, |r| r.attempt.saturating_sub(1));
        let reason = decision.reason.to_string();
        let rule = decision.rule_id.to_string();
        let error = seed_error(
            &request_id,
            from,
            error_type,
            &reason,
            json!({ "from": from, "to": to, "outputType": output_type, "ruleId": rule }),
            retry_count,
        );
        self.push(RunEvent::HandoffDenied {
            from: from.into(),
            to: to.into(),
            output_type: output_type.to_owned(),
            decision,
            error: error.clone(),
        });
        self.block(&rule, format!("{from} → {to} denied: {reason}"), error);
    }

    /// A governed handoff: matrix, data contract, provenance rules, scoping, context edges, then the call
    /// (or the run's completion for a handoff to `external`). Returns false when the flow
    /// stopped.
    pub(super) fn handoff(
        &mut self,
        from: &str,
        to: &str,
        output_type: &str,
        payload: &Value,
        origin: Option<&AgentRequest>,
    ) -> bool {
        let bundle = self.bundle;
        let matrix = bundle.decide_handoff(from, to, InputKind::Decision);
        if !matrix.decision.is_allowed() {
            self.hold_handoff(from, to, output_type, payload, origin);
            self.deny_handoff(
                from,
                to,
                output_type,
                matrix.decision,
                "policy_violation",
                origin,
            );
            return false;
        }
        // A sequential flow: only the next step from where the run is.
        let flow_position = match bundle.decide_flow_step(from, to, self.state.flow_position()) {
            FlowStep::Free => None,
            FlowStep::Next(position) => Some(position),
            FlowStep::Denied(decision) => {
                self.hold_handoff(from, to, output_type, payload, origin);
                self.deny_handoff(from, to, output_type, decision, "policy_violation", origin);
                return false;
            }
        };
        if let Some(declared) = matrix.output_type.as_deref()
            && declared != output_type
        {
            let rule: std::sync::Arc<str> = format!("output_types.{declared}").into();
            let decision = PolicyDecision {
                kind: DecisionKind::DataContract,
                verdict: Verdict::Deny,
                rule_id: rule.clone(),
                reason: format!(
                    "{from} → {to} carries {declared}, not {output_type}: the flow stops"
                )
                .into(),
                bundle_hash: bundle.hash(),
                chain: vec![RuleStep::new(
                    rule,
                    StepOutcome::Applied,
                    "output type mismatch",
                )],
            };
            self.hold_handoff(from, to, output_type, payload, origin);
            self.deny_handoff(from, to, output_type, decision, "validation_error", origin);
            return false;
        }
        let contract = bundle.check_output(from, to, InputKind::Decision, payload);
        if !contract.is_allowed() {
            self.hold_handoff(from, to, output_type, payload, origin);
            self.deny_handoff(from, to, output_type, contract, "validation_error", origin);
            return false;
        }
        let mut provenance = Vec::new();
        for rule in bundle.provenance_rules(from, to) {
            let produced = self
                .state
                .delivered_output(&rule.produced_by.agent, &rule.produced_by.output_type)
                .map(|output| rule.produced_ids(output));
            let d = bundle.decide_provenance(rule, payload, produced.as_ref());
            if !d.is_allowed() {
                self.hold_handoff(from, to, output_type, payload, origin);
                self.deny_handoff(from, to, output_type, d, "validation_error", origin);
                return false;
            }
            provenance.push(d);
        }
        let scoped = self
            .scoping()
            .scope_context(from, to, InputKind::Decision, payload);
        let labels = self.labels_of(origin.map(|r| &r.request_id));
        let crossing = Crossing {
            provenance,
            flow_position,
            labels: labels.clone(),
            ..Crossing::by(
                from,
                to,
                (output_type, InputKind::Decision),
                matrix.decision,
            )
        };
        let delivered = self.record_allowed(crossing, contract, scoped);
        if to == EXTERNAL {
            self.complete_run(Value::clone(&delivered), Some(from));
            return false;
        }
        self.outbox.push(Delivery {
            from: from.into(),
            to: to.into(),
            output_type: output_type.to_owned(),
            confidence: self.confidence,
            payload: delivered,
            task: None,
            warnings: labels.warnings,
            conflict: None,
        });
        true
    }

    /// The task a handoff action gives its receiver goes with the delivery just governed
    /// (and so with the call it makes).
    pub(super) fn give_task(&mut self, to: &str, task: Option<&TaskRestrictions>) {
        if let Some(d) = self.outbox.last_mut().filter(|d| d.to == to) {
            d.task = task.cloned();
        }
    }

    /// Read-only context inputs for `to` from the bundle's context edges (Guardrail 2),
    /// each scoped and recorded.
    pub(super) fn context_inputs(&mut self, to: &str) -> Vec<ContextInput> {
        let bundle = self.bundle;
        let mut inputs = Vec::new();
        for edge in bundle
            .spec()
            .interactions
            .context
            .iter()
            .filter(|e| e.to == to)
        {
            let Some(outputs) = self.state.outputs.get(edge.from.as_str()).cloned() else {
                continue;
            };
            for (output_type, payload) in outputs {
                if edge.output_type.as_ref().is_some_and(|t| *t != output_type) {
                    continue;
                }
                let scoped =
                    self.scoping()
                        .scope_context(&edge.from, to, InputKind::Context, &payload);
                if !scoped.decision.is_allowed() {
                    self.push(RunEvent::PolicyDecided {
                        subject: format!("context {} → {to}", edge.from),
                        decision: scoped.decision,
                    });
                    continue;
                }
                let matrix = bundle.decide_handoff(&edge.from, to, InputKind::Context);
                let contract = PolicyDecision {
                    kind: DecisionKind::DataContract,
                    ..scoped.decision.clone()
                };
                let crossing = Crossing::by(
                    &edge.from,
                    to,
                    (&output_type, InputKind::Context),
                    matrix.decision,
                );
                let delivered = self.record_allowed(crossing, contract, scoped);
                inputs.push(ContextInput {
                    source_agent: AgentId::from(&edge.from),
                    output_type,
                    payload: delivered,
                });
            }
        }
        inputs
    }
}

/// What one `handoff.allowed` says besides the scoping: who to whom, what, and the
/// decision that let it cross.
pub(super) struct Crossing<'a> {
    pub(super) from: &'a str,
    pub(super) to: &'a str,
    pub(super) output_type: &'a str,
    pub(super) input: InputKind,
    pub(super) decision: PolicyDecision,
    pub(super) provenance: Vec<PolicyDecision>,
    pub(super) flow_position: Option<u32>,
    /// What the sender said of the content, recorded with it and told to the receiver.
    pub(super) labels: Labels,
}

/// What an answer says of its output besides the output (decider version 14): carried
/// with it to the receiver and recorded in `handoff.allowed`
/// (docs/agent-protocol.md#labelled-inputs).
#[derive(Debug, Clone, Default)]
pub(super) struct Labels {
    /// The confidence the answer was given with.
    pub(super) confidence: Option<Confidence>,
    /// The answer's warnings (a PARTIAL answer's limitations).
    pub(super) warnings: Vec<String>,
}

impl<'a> Crossing<'a> {
    /// `from → to` carrying `output_type` as `input`, let through by `decision`.
    pub(super) fn by(
        from: &'a str,
        to: &'a str,
        (output_type, input): (&'a str, InputKind),
        decision: PolicyDecision,
    ) -> Self {
        Self {
            from,
            to,
            output_type,
            input,
            decision,
            provenance: Vec::new(),
            flow_position: None,
            labels: Labels::default(),
        }
    }
}
