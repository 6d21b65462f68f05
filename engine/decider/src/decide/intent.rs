//! Intent classification as a contract (docs/governance.md#intent-classification): the
//! calls of the bundle's classifying agent that carry the run's input tell it the
//! contract (`context.intent_classification`), and its answers to them are held to their
//! `intent` classification before any action is carried out. The decision is recorded
//! (`policy.decided`, kind `intent_classification`); a refusal fails the call, which the
//! failure ladder retries with the refusal in `previous_attempt`.

use super::*;
use docket_policies::{IntentAnswer, IntentClaim, IntentTarget};

/// The key of a classifying call's request context that holds the contract it is held to
/// (docs/agent-protocol.md#intent-classification).
pub(crate) const INTENT_CONTEXT: &str = "intent_classification";

/// The error code of an answer whose routing its classification does not allow; its
/// class is `boundary_violation` (the code says `POLICY`), as for a denied tool call.
pub const INTENT_POLICY_VIOLATION: &str = "INTENT_POLICY_VIOLATION";

impl Batch<'_> {
    /// Tells a classifying call its contract: a call of the bundle's classifying agent
    /// whose decision inputs (with those of `again_of`, the call it repeats) include the
    /// run's input, from `external`. Runs before decider version 14 are told nothing.
    pub(super) fn attach_intent_contract(
        &self,
        request: &mut AgentRequest,
        again_of: Option<&CallId>,
    ) {
        if self.state.decider_version() < crate::events::INTENT_CLASSIFICATION {
            return;
        }
        let Some(policy) = self.bundle.intent_classification() else {
            return;
        };
        // A copied request keeps the context of the call it copies; decided afresh here.
        request.context.remove(INTENT_CONTEXT);
        if request.target_agent != policy.agent.as_str() {
            return;
        }
        let from_caller =
            |inputs: &[DecisionInput]| inputs.iter().any(|i| i.source_agent == EXTERNAL);
        let carries_input = from_caller(&request.decision_inputs)
            || again_of.is_some_and(|asked| from_caller(&self.state.decision_inputs_of(asked)));
        if carries_input {
            request.context.insert(
                INTENT_CONTEXT.to_owned(),
                json!({
                    "confidence_threshold": policy.confidence_threshold,
                    "secondary_targets_required": policy.secondary_targets_required,
                }),
            );
        }
    }

    /// Holds the answer to a classifying call to its classification: the decision is
    /// recorded, and a refusal fails the call (the failure ladder). Whether it was refused.
    pub(super) fn intent_refused(
        &mut self,
        request_id: &CallId,
        call: &crate::state::Call,
        response: &AgentResponse,
    ) -> bool {
        if self.state.decider_version() < crate::events::INTENT_CLASSIFICATION
            || !call.recorded.context.contains_key(INTENT_CONTEXT)
        {
            return false;
        }
        let claim = response.intent.as_ref().map(|i| IntentClaim {
            primary_intent: &i.primary_intent,
            confidence: i.intent_confidence,
            target: i.target_agent.as_ref().map(|agent| IntentTarget {
                agent,
                capability: i.target_capability.as_deref(),
            }),
            secondary_intents: i.secondary_intents.iter().map(String::as_str).collect(),
            secondary_targets: i
                .secondary_targets
                .iter()
                .map(|t| IntentTarget {
                    agent: &t.agent,
                    capability: t.capability.as_deref(),
                })
                .collect(),
        });
        let answer = IntentAnswer {
            routes: response
                .actions
                .iter()
                .filter_map(|action| match action {
                    Action::Handoff { to, .. } if to != EXTERNAL => Some(IntentTarget {
                        agent: to,
                        capability: None,
                    }),
                    Action::RequestCapability {
                        target_agent,
                        capability_code,
                        ..
                    } => Some(IntentTarget {
                        agent: target_agent,
                        capability: Some(capability_code),
                    }),
                    _ => None,
                })
                .collect(),
            asks: matches!(response.actions.last(), Some(Action::Escalate { .. })),
        };
        let classifier = call.recorded.target_agent.as_str();
        let Some(decision) = self
            .bundle
            .decide_intent(classifier, claim.as_ref(), &answer)
        else {
            return false;
        };
        let refusal = (!decision.is_allowed())
            .then(|| format!("{} (rule {})", decision.reason, decision.rule_id));
        self.push(RunEvent::PolicyDecided {
            subject: request_id.to_string(),
            decision,
        });
        match refusal {
            Some(message) => {
                self.on_failure(request_id, INTENT_POLICY_VIOLATION, &message);
                true
            }
            None => false,
        }
    }
}
