//! Reassignment on a boundary violation: an agent whose output is rejected for a boundary
//! violation (a failure of class `boundary_violation`: a tool call denied, an intent
//! classification refused, an agent's own `BOUNDARY_*` or `*POLICY*` code) hands its task
//! to the agent its registry entry names in `reassign_to`, with the same input, instead of
//! being retried. See docs/governance.md#reassignment-on-a-boundary-violation.

use super::*;
use crate::events::AGENT_AUTHORITY;
use crate::state::Call;
use docket_policies::ErrorClass;
use docket_protocol::CallId;

/// The request context key that tells a reassigned call whose task it took over, and that
/// keeps it (and its retries) from being reassigned again.
pub(crate) const REASSIGNED: &str = "reassigned";

impl Batch<'_> {
    /// From decider version 15 ([`AGENT_AUTHORITY`]): when the failed call's agent names
    /// `reassign_to` and the failure is a boundary violation, the rejected output is
    /// archived and the task sent to that agent (`task.reassigned`, then its call, each
    /// input through the gate). A task is reassigned once: a call that took a task over
    /// (its request says `context.reassigned`), and its retries, go up the failure ladder.
    /// Capability, classifier and verifier calls are not reassigned, nor a task whose new
    /// agent has no executor in the workflow. False: the ladder decides.
    pub(super) fn reassign(
        &mut self,
        request_id: &CallId,
        call: &Call,
        class: &ErrorClass,
        message: &str,
    ) -> bool {
        if self.state.decider_version() < AGENT_AUTHORITY
            || call.reply_to.is_some()
            || call.classifies.is_some()
            || call.recorded.context.contains_key(REASSIGNED)
        {
            return false;
        }
        let from = call.recorded.target_agent.clone();
        let Some((to, decision)) = self.bundle.decide_reassignment(&from, class) else {
            return false;
        };
        let has_executor = self
            .state
            .run
            .as_ref()
            .is_some_and(|r| r.workflow.agents.contains_key(to.as_str()));
        if !has_executor {
            return false;
        }
        let rule_id = decision.rule_id.to_string();
        self.push(RunEvent::PolicyDecided {
            subject: request_id.to_string(),
            decision: decision.clone(),
        });
        self.push(RunEvent::TaskReassigned {
            request_id: request_id.clone(),
            from: from.clone(),
            to: to.as_str().into(),
            rule_id,
            error_code: class.code.clone(),
            error_class: class.class.clone(),
            error_message: message.to_owned(),
        });
        let whole = call.request();
        let mut request = self.new_request(&whole.source_agent, &to, &whole.capability_code);
        for input in &whole.decision_inputs {
            let payload = self.gate_content(
                &input.source_agent,
                &to,
                (&input.output_type, InputKind::Decision),
                &input.payload,
                &decision,
            );
            request.decision_inputs.push(DecisionInput {
                payload,
                ..input.clone()
            });
        }
        request.priority = whole.priority;
        request.task = whole.task.clone();
        request.context_inputs = self.context_inputs(&to);
        request.context.insert(
            REASSIGNED.to_owned(),
            json!({
                "request_id": request_id,
                "agent": from,
                "error_code": class.code,
                "error_class": class.class,
                "error_message": message,
            }),
        );
        self.schedule(request, None, None, call.branch_of.clone());
        true
    }
}
