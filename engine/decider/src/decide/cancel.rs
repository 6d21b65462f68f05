//! Cancelling a run: a person ends a run that is not finished. The
//! input's own event, `run.cancelled`, is the whole batch; its fold ends the run
//! (`cancelled`) and its open episodes, so no later input is accepted. What was in flight
//! (a call, an effect, a tool call) stays as recorded: an answer arriving after the
//! cancellation is refused (`Rejection::Finished`) and nothing is recorded of it.

use super::{Batch, Command, PersonAct, Rejection};

/// Whether a run may be cancelled by `by` for `reason` (its status was checked not final).
pub(super) fn check_cancel(by: &str, reason: &str) -> Result<(), Rejection> {
    if by.trim().is_empty() {
        return Err(Rejection::Unnamed(PersonAct::Cancellation));
    }
    if reason.trim().is_empty() {
        return Err(Rejection::Unexplained(PersonAct::Cancellation));
    }
    Ok(())
}

impl Batch<'_> {
    /// Records the cancellation; its fold ends the run.
    pub(super) fn on_cancel(&mut self, command: Command) {
        self.push(command.to_event());
    }
}
