//! Human decisions: a ticket approved or denied, and what it releases (a retry, held
//! actions, a chosen output of a conflict, an episode review, an effect step).
//! See docs/governance.md#escalation-and-tickets.

use super::*;
use crate::ids::TicketId;

impl Batch<'_> {
    pub(super) fn on_human(
        &mut self,
        ticket: &TicketId,
        approved: bool,
        by: &str,
        reason: &str,
        choice: Option<u32>,
    ) {
        let Some(t) = self.state.tickets.get(ticket).cloned() else {
            return;
        };
        // Side effects: approving or denying continues the effect's path.
        if let TicketSubject::Effect { effect_id, step } = &t.subject {
            self.on_effect_ticket(effect_id, *step, approved, by, reason);
            return;
        }
        if !approved {
            self.episode_review_denied(&t.subject, by, reason);
            let message = format!("{by} denied {ticket} ({}): {reason}", t.reason);
            let error = seed_error(
                &self.run_id(),
                "human",
                "human_denied",
                &message,
                json!({ "ticket": ticket, "by": by }),
                0,
            );
            self.block("human", message, error);
            return;
        }
        match t.subject {
            TicketSubject::Retry { request_id } => {
                let note = json!({
                    "request_id": request_id,
                    "escalated": t.reason,
                    "approved_by": by,
                    "approval_reason": reason,
                });
                self.retry(&request_id, note);
            }
            TicketSubject::Proceed {
                agent,
                request_id,
                actions,
            } => {
                self.confidence = self
                    .state
                    .calls
                    .get(&request_id)
                    .and_then(|c| c.response.as_ref())
                    .and_then(|r| r.confidence_level);
                self.process_actions(&agent, &request_id, &actions);
            }
            TicketSubject::Conflict {
                group,
                origin,
                mut conflicts,
                mut proceed,
            } => {
                let list = if conflicts.is_empty() {
                    Vec::new()
                } else {
                    conflicts.remove(0)
                };
                let pick = choice.map_or(0, |c| c.saturating_sub(1) as usize);
                for (i, d) in list.iter().enumerate() {
                    if i == pick {
                        proceed.push(d.clone());
                    } else {
                        self.push(RunEvent::OutputArchived {
                            group: group.clone(),
                            delivery: d.clone(),
                            reason: format!("{by} chose output {} in {ticket}: {reason}", pick + 1),
                        });
                    }
                }
                self.resolve_or_ask(&group, &origin, conflicts, proceed);
            }
            TicketSubject::EpisodeReview {
                episode_id,
                agent,
                request_id,
                result,
                ..
            } => self.episode_review_approved(&episode_id, &agent, &request_id, &result),
            // Side effects: decided above (a denial does not block).
            TicketSubject::Effect { .. } => {}
        }
    }
}
