//! Pausing a run (docs/events.md#runpaused): a person stops a run without ending it. The
//! input's own event, `run.paused` or `run.unpaused`, is the whole batch; its fold sets or
//! clears the pause, and the state's next step while paused starts nothing new
//! (`state/next.rs`): what was in flight is recorded as it settles, and timers fire and
//! are recorded, but the calls they lead to wait for the unpause.

use super::{Batch, Command, PersonAct, Rejection};
use crate::events::{PAUSES, RunPause};
use crate::state::RunState;

fn named(act: PersonAct, input: &RunPause) -> Result<(), Rejection> {
    if input.by.trim().is_empty() {
        return Err(Rejection::Unnamed(act));
    }
    if input.reason.trim().is_empty() {
        return Err(Rejection::Unexplained(act));
    }
    Ok(())
}

/// Whether the run (checked not finished) may be paused: recorded by a decider version
/// that knows pauses, not paused already, and the pause names who and why.
pub(super) fn check_pause(state: &RunState, input: &RunPause) -> Result<(), Rejection> {
    let version = state.decider_version();
    if version < PAUSES {
        return Err(Rejection::PauseUnknownTo(version));
    }
    if let Some(p) = &state.paused {
        return Err(Rejection::AlreadyPaused {
            by: p.by.clone(),
            reason: p.reason.clone(),
        });
    }
    named(PersonAct::Pause, input)
}

/// Whether the run may be unpaused: it is paused, and the unpause names who and why.
pub(super) fn check_unpause(state: &RunState, input: &RunPause) -> Result<(), Rejection> {
    if state.paused.is_none() {
        return Err(Rejection::NotPaused);
    }
    named(PersonAct::Unpause, input)
}

impl Batch<'_> {
    /// Records the pause or its end; its fold does the rest.
    pub(super) fn on_pause(&mut self, command: Command) {
        self.push(command.to_event());
    }
}
