//! Failures: a call that gave no usable answer goes up the failure ladder (retry,
//! escalate to a human, block) and counts toward the agent's circuit breaker.
//! See docs/governance.md#failure-ladder and #guardrail-1-retry-hard-stop.

use super::*;
use crate::ids::CallId;

impl Batch<'_> {
    /// Retry → escalate → block, as the bundle's escalation ladder says (Guardrail 1).
    pub(super) fn on_failure(&mut self, request_id: &CallId, code: &str, message: &str) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        // Side effects: a verifier that fails sends the effect to a human.
        if let Some(effect_id) = self.state.verifier_calls.get(request_id).cloned() {
            let failure = format!("{code}: {message}");
            let verifier = call.request.target_agent.clone();
            self.on_verifier_answer(&effect_id, &verifier, None, Some(&failure));
            return;
        }
        let agent = call.request.target_agent.clone();
        let failures = call.request.attempt;
        let esc = self
            .bundle
            .decide_escalation(failures, Some(&code.to_lowercase()));
        let action = esc.action;
        let rule = esc.decision.rule_id.to_string();
        let ladder_reason = esc.decision.reason.to_string();
        self.push(RunEvent::PolicyDecided {
            subject: request_id.to_string(),
            decision: esc.decision,
        });
        use docket_policies::EscalationAction;
        match action {
            None | Some(EscalationAction::Retry) => self.retry(
                request_id,
                json!({ "request_id": request_id, "error_code": code, "error_message": message }),
            ),
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
                let error = seed_error(
                    request_id,
                    &agent,
                    "retry_limit_exceeded",
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
        let mut request = AgentRequest::clone(&call.request);
        request.request_id = self.next_request_id();
        request.attempt += 1;
        request.context.insert("previous_attempt".to_owned(), note);
        self.schedule(request, call.reply_to, call.classifies, call.branch_of);
    }
}
