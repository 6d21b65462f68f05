//! Risk classification: every response of a classified agent passes through its
//! classifiers in order before its actions are accepted (SAFE proceeds, REVIEW_REQUIRED
//! waits for a human, DANGEROUS blocks). See docs/governance.md#escalation-and-tickets.

use super::*;
use docket_protocol::CallId;

impl Batch<'_> {
    pub(super) fn classifiers_of(&self, agent: &str) -> Vec<String> {
        self.state
            .run
            .as_ref()
            .and_then(|r| r.workflow.agents.get(agent))
            .map(|a| a.classifiers.clone())
            .unwrap_or_default()
    }

    /// Sends a response to the agent's `index`-th risk classifier.
    pub(super) fn classify(&mut self, request_id: &CallId, index: usize) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        let agent = call.recorded.target_agent.clone();
        let Some(classifier) = self.classifiers_of(&agent).get(index).cloned() else {
            return;
        };
        let shown = serde_json::to_value(&call.response).unwrap_or(Value::Null);
        let request = self
            .new_request(&agent, &classifier, "risk_classification")
            .with_decision_input(agent.clone(), "agent_response", shown);
        self.schedule(
            request,
            None,
            Some(Classifies {
                request_id: request_id.clone(),
                index,
            }),
            None,
        );
    }

    /// A classifier answered: SAFE passes to the next classifier or lets the actions
    /// proceed, REVIEW_REQUIRED waits for a human, DANGEROUS blocks
    /// (docs/governance.md#output-validation).
    pub(super) fn on_verdict(
        &mut self,
        classifier_call: &CallId,
        classifier: &str,
        of: &Classifies,
        response: &AgentResponse,
    ) {
        let output = response.actions.iter().find_map(|a| match a {
            Action::Finish { output } => Some(output.clone()),
            _ => None,
        });
        let verdict = output
            .as_ref()
            .and_then(|o| o.get("verdict"))
            .and_then(|v| serde_json::from_value::<RiskVerdict>(v.clone()).ok());
        let Some(verdict) = verdict else {
            self.on_failure(
                classifier_call,
                "CLASSIFIER_INVALID_VERDICT",
                "a risk classifier must finish with {\"verdict\": \"SAFE\" | \"REVIEW_REQUIRED\" | \"DANGEROUS\"}",
            );
            return;
        };
        let reason = output
            .as_ref()
            .and_then(|o| o.get("reason"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        self.push(RunEvent::RiskClassified {
            request_id: of.request_id.clone(),
            classifier: classifier.into(),
            verdict,
            reason: reason.clone(),
        });
        let Some(classified) = self.state.calls.get(&of.request_id).cloned() else {
            return;
        };
        let agent = classified.recorded.target_agent.clone();
        let actions = classified
            .response
            .map(|r| r.actions.clone())
            .unwrap_or_default();
        match verdict {
            RiskVerdict::Safe => {
                if of.index + 1 < self.classifiers_of(&agent).len() {
                    self.classify(&of.request_id, of.index + 1);
                } else if self.finalize_or_escalate(&agent, &of.request_id, &actions) {
                    self.process_actions(&agent, &of.request_id, &actions);
                }
            }
            RiskVerdict::ReviewRequired => {
                let ticket = self.next_ticket();
                self.push(RunEvent::Escalated {
                    ticket,
                    reason: format!(
                        "{classifier} asks a human to review {agent}'s output: {reason}"
                    ),
                    subject: TicketSubject::Proceed {
                        agent,
                        request_id: of.request_id.clone(),
                        actions,
                    },
                });
            }
            RiskVerdict::Dangerous => {
                self.hold(
                    crate::events::overrides::HeldStep::Actions {
                        agent: agent.clone(),
                        request_id: of.request_id.clone(),
                        actions,
                    },
                    None,
                );
                let rule = format!("risk_classifier.{classifier}");
                let message =
                    format!("{classifier} classified {agent}'s output DANGEROUS: {reason}");
                let error = seed_error(
                    &of.request_id,
                    &agent,
                    "dangerous_output",
                    &message,
                    json!({ "classifier": classifier, "ruleId": rule }),
                    classified.recorded.attempt.saturating_sub(1),
                );
                self.block(&rule, message, error);
            }
        }
    }
}
