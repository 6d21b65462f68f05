//! Human tickets: opened by an escalation, closed by a human decision; the run waits
//! while any is open (docs/governance.md#escalation-and-tickets).

use crate::events::HumanDecided;
use docket_protocol::TicketId;
use serde::{Deserialize, Serialize};

use super::{RunState, RunStatus};
use crate::events::{RunEvent, TicketSubject};

/// A human ticket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    /// What the person is asked.
    pub reason: String,
    /// What approving does.
    pub subject: TicketSubject,
    /// Still waiting for a decision.
    pub open: bool,
    /// The decision, once made: who, approved or not, the choice and the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<TicketDecision>,
}

/// A human's decision on a ticket, as `human.decided` recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TicketDecision {
    /// Who decided.
    pub by: String,
    /// Approved (true) or denied.
    pub approved: bool,
    /// Why.
    pub reason: String,
    /// The chosen output or option (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<u32>,
    /// An answer in the human's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl RunState {
    pub(super) fn apply_ticket(&mut self, event: &RunEvent) {
        match event {
            RunEvent::Escalated {
                ticket,
                reason,
                subject,
            } => {
                self.tickets_opened += 1;
                self.tickets.insert(
                    ticket.clone(),
                    Ticket {
                        reason: reason.clone(),
                        subject: subject.clone(),
                        open: true,
                        decision: None,
                    },
                );
                self.status = RunStatus::WaitingForHuman;
                // Governed tools: a reviewed call's id is reserved while it waits.
                self.hold_tool_for_review(subject);
            }
            RunEvent::HumanDecided(HumanDecided {
                ticket,
                approved,
                by,
                reason,
                choice,
                answer,
                ..
            }) => {
                if let Some(t) = self.tickets.get_mut(ticket) {
                    t.open = false;
                    t.decision = Some(TicketDecision {
                        by: by.clone(),
                        approved: *approved,
                        reason: reason.clone(),
                        choice: *choice,
                        answer: answer.clone(),
                    });
                }
                if self.status == RunStatus::WaitingForHuman
                    && !self.tickets.values().any(|t| t.open)
                {
                    self.status = RunStatus::Running;
                }
            }
            _ => {}
        }
    }

    /// Open tickets, by id.
    pub fn open_tickets(&self) -> impl Iterator<Item = (&TicketId, &Ticket)> {
        self.tickets.iter().filter(|(_, t)| t.open)
    }
}
