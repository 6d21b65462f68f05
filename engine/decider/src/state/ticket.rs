//! Human tickets: opened by an escalation, closed by a human decision; the run waits
//! while any is open (docs/governance.md#escalation-and-tickets).

use crate::ids::TicketId;
use serde::{Deserialize, Serialize};

use super::{RunState, RunStatus};
use crate::event::{RunEvent, TicketSubject};

/// A human ticket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    /// What the person is asked.
    pub reason: String,
    /// What approving does.
    pub subject: TicketSubject,
    /// Still waiting for a decision.
    pub open: bool,
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
                    },
                );
                self.status = RunStatus::WaitingForHuman;
            }
            RunEvent::HumanDecided { ticket, .. } => {
                if let Some(t) = self.tickets.get_mut(ticket) {
                    t.open = false;
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
