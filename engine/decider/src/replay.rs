//! The audit check: rebuild each batch's command from its first event, decide again with
//! the recorded bundle, and compare with what the log holds.

use docket_policies::{BundleError, Format, PolicyBundle};

use super::decide::{Command, Rejection, decide};
use super::state::RunState;
use crate::events::{RunEvent, RunRequested, UnsupportedDecider, batches, same_decisions};

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
    /// The run was recorded by a decider version this build does not decide as.
    #[error(transparent)]
    Version(#[from] UnsupportedDecider),
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

/// A decided event that differs from the recorded one in its words for people only
/// ([`crate::WORDING`]): the same decisions, explained otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reworded {
    /// 0-based position of the recorded event in the log.
    pub index: usize,
    /// Its kind.
    pub kind: &'static str,
}

/// Checks that every batch of `events` holds the decisions `decide` makes of its first
/// event under `bundle`: the same events, but for their wording (docs/replay.md#wording).
/// A log cut after a whole batch (a run in progress) passes.
///
/// # Errors
/// The first [`ReplayMismatch`]; the events worded otherwise are the `Ok` value.
pub fn replay_check(
    events: &[RunEvent],
    bundle: &PolicyBundle,
) -> Result<Vec<Reworded>, ReplayMismatch> {
    let mut reworded = Vec::new();
    let mut state = RunState::default();
    for (start, recorded) in batches(events) {
        let first = &recorded[0];
        let command = Command::from_event(first).ok_or(ReplayMismatch::NotAnInput {
            index: start,
            kind: first.kind(),
        })?;
        if let Command::Start(run) = &command {
            UnsupportedDecider::check(run.decider_version)?;
        }
        let decided =
            decide(&state, bundle, command).map_err(|rejection| ReplayMismatch::Rejected {
                index: start,
                rejection,
            })?;
        if !same_decisions(recorded, &decided) {
            return Err(ReplayMismatch::Differs {
                index: start,
                recorded: recorded.iter().map(RunEvent::kind).collect(),
                decided: decided.iter().map(RunEvent::kind).collect(),
            });
        }
        reworded.extend(
            recorded
                .iter()
                .zip(&decided)
                .enumerate()
                .filter(|(_, (r, d))| r != d)
                .map(|(i, (r, _))| Reworded {
                    index: start + i,
                    kind: r.kind(),
                }),
        );
        for event in recorded {
            state.apply(event);
        }
    }
    Ok(reworded)
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
