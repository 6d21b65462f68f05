//! The audit check: rebuild each batch's command from its first event, decide again with
//! the recorded bundle, and compare with what the log holds.

use docket_policies::{BundleError, Format, PolicyBundle};

use super::decide::{Command, Rejection, decide};
use super::state::RunState;
use crate::events::{DECIDER_VERSION, RunEvent, RunRequested, batches};

/// Where a log and a fresh decision disagree.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayMismatch {
    /// The log does not start with `run.requested`, or a batch does not start with a
    /// recorded input.
    #[error("event {index} ({kind}) should open a batch with a recorded input")]
    NotAnInput {
        /// 0-based position in the log.
        index: usize,
        /// Its kind.
        kind: &'static str,
    },
    /// `decide` rejected a recorded input.
    #[error("the recorded input at event {index} is rejected on replay: {rejection}")]
    Rejected {
        /// 0-based position.
        index: usize,
        /// Why.
        rejection: Rejection,
    },
    /// The run was recorded by a decider newer than this build's.
    #[error(
        "the run was recorded by decider version {recorded}; this build decides up to version {supported}: replay it with a newer docket"
    )]
    NewerDecider {
        /// The version in `run.requested`.
        recorded: u32,
        /// [`DECIDER_VERSION`].
        supported: u32,
    },
    /// `decide` produced other events than the log holds.
    #[error(
        "the batch opened by event {index} differs on replay: recorded {recorded:?}, decided {decided:?}"
    )]
    Differs {
        /// 0-based position of the batch's first event.
        index: usize,
        /// Kinds in the log.
        recorded: Vec<&'static str>,
        /// Kinds decided now.
        decided: Vec<&'static str>,
    },
}

/// Checks that every batch of `events` is exactly what `decide` makes of its first event
/// under `bundle`. A log cut after a whole batch (a run in progress) passes.
///
/// # Errors
/// The first [`ReplayMismatch`].
pub fn replay_check(events: &[RunEvent], bundle: &PolicyBundle) -> Result<(), ReplayMismatch> {
    let mut state = RunState::default();
    for (start, recorded) in batches(events) {
        let first = &recorded[0];
        let command = Command::from_event(first).ok_or(ReplayMismatch::NotAnInput {
            index: start,
            kind: first.kind(),
        })?;
        if let Command::Start(run) = &command
            && run.decider_version > DECIDER_VERSION
        {
            return Err(ReplayMismatch::NewerDecider {
                recorded: run.decider_version,
                supported: DECIDER_VERSION,
            });
        }
        let decided =
            decide(&state, bundle, command).map_err(|rejection| ReplayMismatch::Rejected {
                index: start,
                rejection,
            })?;
        if decided != recorded {
            return Err(ReplayMismatch::Differs {
                index: start,
                recorded: recorded.iter().map(RunEvent::kind).collect(),
                decided: decided.iter().map(RunEvent::kind).collect(),
            });
        }
        for event in recorded {
            state.apply(event);
        }
    }
    Ok(())
}

/// The policy bundle a run recorded, compiled from its source text. [`decide`] checks its
/// hash against the recorded one.
///
/// # Errors
/// [`BundleError`] when the recorded text no longer compiles.
pub fn recorded_bundle(run: &RunRequested) -> Result<PolicyBundle, BundleError> {
    let format = Format::from_name(&run.bundle_source_name).unwrap_or(Format::Toml);
    let bundle = docket_policies::parse(&run.bundle_source, &run.bundle_source_name, format)?;
    Ok(bundle)
}
