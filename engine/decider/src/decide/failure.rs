//! Failures: a call that gave no usable answer goes up the failure ladder (retry,
//! escalate to a human, block) and counts toward the agent's circuit breaker.
//! See docs/governance.md#failure-ladder and #guardrail-1-retry-hard-stop.

use super::*;
use crate::events::MAX_TIMEOUT_GROWTH;
use docket_policies::ErrorClass;
use docket_protocol::CallId;

impl Batch<'_> {
    /// Retry → escalate → block, as the bundle's escalation ladder says (Guardrail 1).
    pub(super) fn on_failure(&mut self, request_id: &CallId, code: &str, message: &str) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        // Side effects: a verifier that fails sends the effect to a human.
        if let Some(effect_id) = self.state.verifier_calls.get(request_id).cloned() {
            let failure = format!("{code}: {message}");
            let verifier = call.recorded.target_agent.clone();
            self.on_verifier_answer(&effect_id, &verifier, None, Some(&failure));
            return;
        }
        let agent = call.recorded.target_agent.clone();
        let failures = call.recorded.attempt;
        let class = self.bundle.error_class(code);
        // A boundary violation hands the task to another agent when the bundle says so
        // (docs/governance.md#reassignment-on-a-boundary-violation).
        if self.reassign(request_id, &call, &class, message) {
            return;
        }
        let esc = self.bundle.decide_escalation(failures, Some(&class));
        let action = esc.action;
        let rule = esc.decision.rule_id.to_string();
        let ladder_reason = esc.decision.reason.to_string();
        let decision = esc.decision.clone();
        self.push(RunEvent::PolicyDecided {
            subject: request_id.to_string(),
            decision: esc.decision,
        });
        use docket_policies::EscalationAction;
        let gives_up = matches!(
            action,
            Some(EscalationAction::Escalate | EscalationAction::Block)
        );
        if let (true, Some(asker)) = (gives_up, &call.reply_to) {
            self.return_failure(asker, &call.recorded, &class, message, &decision);
            return;
        }
        let stops_at_once = rule == "escalation.stop_on_errors";
        if gives_up && !stops_at_once && self.branch_gap(request_id, &call, &class, message) {
            return;
        }
        match action {
            None | Some(EscalationAction::Retry) => {
                let note = json!({
                    "request_id": request_id,
                    "error_code": code,
                    "error_message": message,
                    "error_class": class.class,
                });
                self.retry(request_id, note);
            }
            Some(EscalationAction::Escalate) => {
                let ticket = self.next_ticket();
                self.push(RunEvent::Escalated {
                    ticket,
                    reason: format!(
                        "{agent} failed {failures} time(s), last with {code}: {message}; approve to retry, deny to stop"
                    ),
                    subject: TicketSubject::Retry {
                        request_id: request_id.clone(),
                    },
                });
            }
            Some(EscalationAction::Block) => {
                let reason = format!("{agent}: {ladder_reason} (last error {code}: {message})");
                if self.episode_hard_stop(request_id, &rule, &reason) {
                    return;
                }
                let pattern = self.deny_pattern_behind(request_id);
                self.hold(
                    crate::events::overrides::HeldStep::Retry {
                        request_id: request_id.clone(),
                    },
                    pattern,
                );
                // A class that stops the flow at once is returned as itself (seed 000:
                // a validation error stops the flow at its checkpoint).
                let error_type = if stops_at_once {
                    class.class.as_str()
                } else {
                    "retry_limit_exceeded"
                };
                let error = seed_error(
                    request_id,
                    &agent,
                    error_type,
                    &reason,
                    json!({ "code": code, "ruleId": rule }),
                    failures.saturating_sub(1),
                );
                self.block(&rule, reason, error);
            }
        }
    }

    /// Schedules the step again (new request id, attempt + 1) with more context
    /// (docs/governance.md#failure-ladder): the request's `context.previous_attempt` says
    /// what happened to the last one.
    pub(super) fn retry(&mut self, request_id: &CallId, note: Value) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        let Some(mut request) = self.request_again(&call.recorded.request_id) else {
            return;
        };
        request.attempt += 1;
        request.context.insert("previous_attempt".to_owned(), note);
        // A retry after a timeout waits longer (docs/governance.md#failure-ladder), up to
        // MAX_TIMEOUT_GROWTH times the agent's own.
        let timed_out = call
            .failure
            .as_deref()
            .is_some_and(|code| self.bundle.error_class(code).class == "timeout");
        if timed_out {
            let cap = self
                .timeout_for(&request.target_agent)
                .saturating_mul(MAX_TIMEOUT_GROWTH);
            request.timeout_ms = request
                .timeout_ms
                .saturating_mul(2)
                .min(cap)
                .max(request.timeout_ms);
        }
        self.schedule_again(
            request_id,
            request,
            call.reply_to,
            call.classifies,
            call.branch_of,
        );
    }

    /// A capability call that failed past retrying is answered
    /// to the agent that asked, as `capability_failed` through the gate (seed 003: the
    /// calling agent checks the status and falls back), instead of escalating or stopping
    /// the run.
    pub(super) fn return_failure(
        &mut self,
        asker: &CallId,
        failed: &AgentRequest,
        class: &ErrorClass,
        message: &str,
        decision: &PolicyDecision,
    ) {
        let Some(asker_agent) = self
            .state
            .calls
            .get(asker)
            .map(|c| c.recorded.target_agent.clone())
        else {
            return;
        };
        let target = failed.target_agent.as_str();
        let failure = json!({
            "capability": failed.capability_code,
            "agent": target,
            "error_code": class.code,
            "error_class": class.class,
            "error_message": message,
            "attempts": failed.attempt,
        });
        let failure = self.gate_content(
            target,
            &asker_agent,
            ("capability_failed", InputKind::Decision),
            &failure,
            decision,
        );
        self.call_again(
            asker,
            DecisionInput::new(failed.target_agent.clone(), "capability_failed", failure),
        );
    }
}
