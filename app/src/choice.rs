//! A person's answer to a question ticket given as one of its options' text: the option's
//! number, as the decider records it (`docket answer --choice`, the API's `choice`).

use docket_decider::{RunState, TicketId, TicketSubject};

/// Why a choice names no option of the ticket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChoiceError {
    /// The run has no such ticket.
    #[error("no ticket {ticket} in this run")]
    UnknownTicket {
        /// The ticket.
        ticket: String,
    },
    /// The ticket asks no question with options.
    #[error("ticket {ticket} asks no question with options: approve or deny it")]
    NoOptions {
        /// The ticket.
        ticket: String,
    },
    /// The text is none of the ticket's options.
    #[error(
        "ticket {ticket} offers {}; `{choice}` is not one of them",
        quoted(choices)
    )]
    NotAnOption {
        /// The ticket.
        ticket: String,
        /// The text given.
        choice: String,
        /// The options the ticket offers, in order (the first is option 1).
        choices: Vec<String>,
    },
}

fn quoted(choices: &[String]) -> String {
    choices
        .iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The option `choice` names on `ticket` of `state`: a number as given (from 1), else the
/// position (from 1) of the option whose text it is.
///
/// # Errors
/// [`ChoiceError`]: no such ticket, no options, or no option with that text.
pub fn option_number(state: &RunState, ticket: &str, choice: &str) -> Result<u32, ChoiceError> {
    if let Ok(n) = choice.parse::<u32>() {
        return Ok(n);
    }
    let t = state
        .tickets()
        .get(&TicketId::from(ticket))
        .ok_or_else(|| ChoiceError::UnknownTicket {
            ticket: ticket.to_owned(),
        })?;
    let TicketSubject::Question { choices, .. } = &t.subject else {
        return Err(ChoiceError::NoOptions {
            ticket: ticket.to_owned(),
        });
    };
    choices
        .iter()
        .position(|c| c == choice)
        .and_then(|i| u32::try_from(i + 1).ok())
        .ok_or_else(|| ChoiceError::NotAnOption {
            ticket: ticket.to_owned(),
            choice: choice.to_owned(),
            choices: choices.clone(),
        })
}
