//! Capability requests: an agent asks another for one of its capabilities
//! (docs/governance.md#capability-requests). The bundle decides the capability itself
//! (responsibility locks, Guardrail 3, the inputs it declares); the request is also a governed handoff from the asker to the agent it asks: it needs an
//! interaction-matrix edge, and its inputs are scoped and recorded as `handoff.allowed`
//! (or `handoff.denied`, which blocks the run) like any other handoff.

use super::handoff::Crossing;
use super::*;

impl Batch<'_> {
    /// Decides `agent`'s request for `capability_code` from `target`, and schedules the
    /// call when it is allowed. Returns false when the flow stopped.
    pub(super) fn request_capability(
        &mut self,
        agent: &str,
        origin: &AgentRequest,
        target: &str,
        (capability_code, priority): (&str, Option<docket_protocol::Priority>),
        inputs: &serde_json::Map<String, Value>,
    ) -> bool {
        let request_id = &origin.request_id;
        let inputs = Value::Object(inputs.clone());
        let d = self.bundle.decide_capability(&CapabilityRequest {
            source_agent: agent.to_owned(),
            target_agent: target.to_owned(),
            capability_code: capability_code.to_owned(),
            inputs_json: inputs.clone(),
            priority: priority.map(policy_priority),
            timeout_ms: None,
        });
        let allowed = d.decision.is_allowed();
        let rule = d.decision.rule_id.to_string();
        let reason = d.decision.reason.to_string();
        let capability = d.decision.clone();
        self.push(RunEvent::PolicyDecided {
            subject: request_id.to_string(),
            decision: d.decision,
        });
        if !allowed {
            let error = seed_error(
                request_id,
                agent,
                "policy_violation",
                &reason,
                json!({ "capability": capability_code, "target": target, "ruleId": rule }),
                origin.attempt.saturating_sub(1),
            );
            let why = refusal_detail(&reason, agent, capability_code);
            self.block(
                &rule,
                format!("{agent} may not obtain {capability_code} from {target}: {why}"),
                error,
            );
            return false;
        }
        let Some(delivered) = self.govern_capability_inputs(
            agent,
            origin,
            target,
            capability_code,
            &inputs,
            capability,
        ) else {
            return false;
        };
        let mut request = self
            .new_request(agent, target, capability_code)
            .with_decision_input(agent, capability_code, delivered);
        request.timeout_ms = d.timeout_ms;
        if self.state.decider_version() >= crate::events::PRIORITIES {
            request.priority = protocol_priority(d.priority);
        }
        self.schedule(request, Some(request_id.clone()), None, None);
        true
    }

    /// The interaction matrix and context scoping for a capability request's inputs:
    /// the scoped inputs, recorded as `handoff.allowed`, or `None` after
    /// `handoff.denied` blocked the run.
    fn govern_capability_inputs(
        &mut self,
        agent: &str,
        origin: &AgentRequest,
        target: &str,
        capability_code: &str,
        inputs: &Value,
        capability: PolicyDecision,
    ) -> Option<Value> {
        let bundle = self.bundle;
        let matrix = bundle.decide_handoff(agent, target, InputKind::Decision);
        if !matrix.decision.is_allowed() {
            self.deny_handoff(
                agent,
                target,
                capability_code,
                matrix.decision,
                "policy_violation",
                Some(origin),
            );
            return None;
        }
        let scoped = self
            .scoping()
            .scope_context(agent, target, InputKind::Decision, inputs);
        let crossing = Crossing::by(
            agent,
            target,
            (capability_code, InputKind::Decision),
            matrix.decision,
        );
        let delivered = self.record_allowed(crossing, capability, scoped);
        Some(Value::clone(&delivered))
    }
}

/// What a refusal's reason adds to "X may not obtain Y from Z": a responsibility lock's
/// reason starts with "X may not obtain `Y`: ", which the stop reason already says.
fn refusal_detail<'r>(reason: &'r str, agent: &str, capability_code: &str) -> &'r str {
    reason
        .strip_prefix(&format!("{agent} may not obtain `{capability_code}`: "))
        .unwrap_or(reason)
}
