//! Human decisions: a ticket approved, denied or answered, and what it releases (a retry,
//! held actions, an answer to the agent that asked, a chosen output of a conflict, an
//! episode review, an effect step). See docs/governance.md#escalation-and-tickets and
//! #humans-answer.

use super::*;
use docket_protocol::{Settlement, TicketId};

/// What a human said on a ticket.
pub(super) struct HumanWords<'a> {
    pub(super) approved: bool,
    pub(super) by: &'a str,
    pub(super) reason: &'a str,
    /// The chosen output of a conflict or option of a question (from 1).
    pub(super) choice: Option<u32>,
    /// An answer to a question, in the human's words.
    pub(super) answer: Option<&'a str>,
}

/// How many options a ticket offers to choose from: a conflict's outputs, a question's
/// choices; `None` when it offers none.
pub(super) fn options_offered(subject: &TicketSubject) -> Option<usize> {
    match subject {
        TicketSubject::Conflict { conflicts, .. } => Some(conflicts.first().map_or(0, Vec::len)),
        TicketSubject::Question { choices, .. } if !choices.is_empty() => Some(choices.len()),
        _ => None,
    }
}

/// A decision names who decides, a choice is one the ticket
/// offers, and an answer answers a question (and is not a denial).
pub(super) fn check_words(
    ticket: &TicketId,
    subject: &TicketSubject,
    approved: bool,
    by: &str,
    choice: Option<u32>,
    answer: Option<&String>,
) -> Result<(), Rejection> {
    if by.trim().is_empty() {
        return Err(Rejection::Anonymous(ticket.to_string()));
    }
    let question = matches!(subject, TicketSubject::Question { .. });
    if choice.is_some() && options_offered(subject).is_none() {
        return Err(Rejection::NoChoiceOffered {
            ticket: ticket.to_string(),
            asks: if question {
                TicketAsks::Words
            } else {
                TicketAsks::Approval
            },
        });
    }
    if answer.is_some() && !question {
        return Err(Rejection::DoesNotAnswer {
            ticket: ticket.to_string(),
            why: "it asks for approval, not an answer: approve or deny it".to_owned(),
        });
    }
    if !approved && (answer.is_some() || choice.is_some()) {
        return Err(Rejection::DoesNotAnswer {
            ticket: ticket.to_string(),
            why: "a denial stops the run and carries no answer or choice".to_owned(),
        });
    }
    Ok(())
}

impl Batch<'_> {
    pub(super) fn on_human(&mut self, ticket: &TicketId, words: &HumanWords<'_>) {
        let Some(t) = self.state.tickets.get(ticket).cloned() else {
            return;
        };
        let HumanWords {
            approved,
            by,
            reason,
            choice,
            ..
        } = *words;
        // Side effects: approving or denying continues the effect's path.
        if let TicketSubject::Effect { effect_id, step } = &t.subject {
            self.on_effect_ticket(effect_id, *step, approved, by, reason);
            return;
        }
        // Governed tools: a reviewed call runs or is refused; the run goes on either way.
        if matches!(t.subject, TicketSubject::Tool { .. }) {
            self.on_tool_ticket(&t.subject, ticket, approved, by, reason);
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
                let note = self.human_words_to(
                    &request_id,
                    ticket,
                    ("previous_attempt", InputKind::Context),
                    &note,
                );
                self.retry(&request_id, Arc::unwrap_or_clone(note));
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
            TicketSubject::Question {
                request_id,
                question,
                choices,
                ..
            } => {
                let mut answer = json!({
                    "ticket": ticket,
                    "question": question,
                    "approved": true,
                    "by": by,
                    "reason": reason,
                });
                let chosen = choice.and_then(|c| choices.get(c.saturating_sub(1) as usize));
                if let Some(option) = chosen {
                    answer["choice"] = json!(option);
                }
                if let Some(text) = words.answer {
                    answer["answer"] = json!(text);
                }
                let answer = self.human_words_to(
                    &request_id,
                    ticket,
                    ("human_answer", InputKind::Decision),
                    &answer,
                );
                self.call_again(
                    &request_id,
                    DecisionInput::new("human", "human_answer", answer),
                );
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
                        proceed.push(self.kept(&list, i, Settlement::Person, Some((by, ticket))));
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
            // Side effects and governed tools: decided above (a denial does not block).
            TicketSubject::Effect { .. } | TicketSubject::Tool { .. } => {}
        }
    }

    /// A human's words on their way to the agent of `request_id`: through the gate, as
    /// content from `human` (scoped for that agent and recorded as `handoff.allowed`
    /// naming the ticket).
    fn human_words_to(
        &mut self,
        request_id: &CallId,
        ticket: &TicketId,
        what: (&str, InputKind),
        words: &Value,
    ) -> Arc<Value> {
        let Some(agent) = self
            .state
            .calls
            .get(request_id)
            .map(|c| c.recorded.target_agent.clone())
        else {
            return Arc::new(words.clone());
        };
        let authority = PolicyDecision {
            kind: DecisionKind::Escalation,
            verdict: Verdict::Allow,
            rule_id: "human".into(),
            reason: format!("a human decided {ticket}; the decision returns to {agent}").into(),
            bundle_hash: self.bundle.hash(),
            chain: Vec::new(),
        };
        self.gate_content("human", &agent, what, words, &authority)
    }
}
