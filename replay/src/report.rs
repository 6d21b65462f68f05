//! Replaying one run's log: every batch decided again from its recorded input, with the
//! bundle the run recorded and the decider version that recorded it (docs/replay.md).

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use docket_decider::{
    Command, RunEvent, RunState, RunStatus, UnsupportedDecider, batches, decide_in_place,
    recorded_bundle, same_decisions,
};

use crate::diff::{Difference, differences};

/// Error code of a batch the decider now decides differently (docs/errors/R001.md).
pub const DIVERGENCE: &str = "R001";
/// Error code of a recorded input the decider now refuses (docs/errors/R002.md).
pub const REJECTED: &str = "R002";

/// How many differing places a divergence lists.
const DIFFERENCES_SHOWN: usize = 20;
/// How many reworded decisions a report lists (it counts them all).
const REWORDINGS_SHOWN: usize = 20;

/// Why a log could not be replayed at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The log is empty or does not open with `run.requested`.
    #[error("the log does not start with run.requested, so it is not a run's log")]
    NotARun,
    /// A batch does not open with a recorded input.
    #[error("event {seq} ({kind}) should open a batch with a recorded input")]
    NotAnInput {
        /// 1-based sequence in the run's log.
        seq: u64,
        /// Its kind.
        kind: &'static str,
    },
    /// The bundle text the run recorded no longer compiles.
    #[error("the policy bundle this run recorded ({name}) no longer compiles: {message}")]
    Bundle {
        /// The bundle's recorded name.
        name: String,
        /// The compiler's error.
        message: String,
    },
    /// The run was recorded by a decider version this build does not decide as.
    #[error(transparent)]
    Version(#[from] UnsupportedDecider),
}

/// A decision this build words otherwise: the same decision, its words for people
/// (`docket_decider::WORDING`: reasons, rule notes, error messages) changed
/// (docs/replay.md#wording). Not a divergence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rewording {
    /// 1-based sequence of the recorded event.
    pub seq: u64,
    /// Its kind.
    pub kind: &'static str,
    /// The places worded otherwise (JSON pointers into the event).
    pub differences: Vec<Difference>,
}

/// The first batch whose decisions differ from the recorded ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    /// [`DIVERGENCE`] or [`REJECTED`]: a stable code with a help page under `docs/errors/`.
    pub code: &'static str,
    /// 1-based sequence of the batch's recorded input.
    pub seq: u64,
    /// The input's event kind.
    pub input: &'static str,
    /// The kinds recorded after the input.
    pub recorded_kinds: Vec<&'static str>,
    /// The kinds decided now (empty when the input is refused).
    pub decided_kinds: Vec<&'static str>,
    /// Where the first differing event differs (JSON pointers into it).
    pub differences: Vec<Difference>,
    /// Position of that event in the batch (0: the first decided event).
    pub at_event: usize,
    /// What it means.
    pub why: String,
}

/// What replaying a run found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// The run.
    pub run_id: String,
    /// The decider version the run was recorded by (and replayed with).
    pub decider_version: u32,
    /// Events in the log.
    pub events: usize,
    /// Recorded inputs (the start, agent answers and failures, human decisions, effect
    /// results), each opening a batch.
    pub inputs: usize,
    /// Events decided of them: re-derived and compared, or (`not_rederivable`) taken as
    /// recorded.
    pub decisions: usize,
    /// Of `decisions`, those decided again and found as recorded (their words for people
    /// may differ: `reworded_decisions`).
    pub reproduced_decisions: usize,
    /// Of `reproduced_decisions`, those this build words otherwise.
    pub reworded_decisions: usize,
    /// The first of them (at most 20), with the places worded otherwise.
    pub rewordings: Vec<Rewording>,
    /// Of `decisions`, those that depend on values `docket shred` erased: taken as
    /// recorded, not re-derived (docs/replay.md#shredded-values).
    pub not_rederivable: usize,
    /// Where the run stands by the replayed log: its result.
    pub status: RunStatus,
    /// Why it stopped, for a blocked or failed run.
    pub stop_reason: Option<String>,
    /// The run's output, once completed.
    pub output: Option<Value>,
    /// The first batch decided differently; `None`: every decision reproduced.
    pub divergence: Option<Divergence>,
}

impl ReplayReport {
    /// Every decision was reproduced.
    #[must_use]
    pub fn reproduced(&self) -> bool {
        self.divergence.is_none()
    }
}

fn json(event: &RunEvent) -> Value {
    serde_json::to_value(event).unwrap_or(Value::Null)
}

/// Replays `events`, a run's log in order, batch by batch: each recorded input is decided
/// again, with the bundle compiled from the run's recorded text, and compared with what
/// the log holds. A log cut after a whole batch (a run in progress) replays.
///
/// # Errors
/// [`ReplayError`] when the log cannot be replayed at all; a batch decided differently is
/// not an error but the report's [`Divergence`].
pub fn replay(events: &[RunEvent]) -> Result<ReplayReport, ReplayError> {
    replay_with_progress(events, |_| {})
}

/// [`replay`], calling `progress` with the number of events replayed after each batch
/// (a long replay's progress bar).
///
/// # Errors
/// As [`replay`].
pub fn replay_with_progress(
    events: &[RunEvent],
    progress: impl FnMut(usize),
) -> Result<ReplayReport, ReplayError> {
    replay_with_shredded(events, &BTreeSet::new(), progress)
}

/// [`replay_with_progress`] of a run some of whose values `docket shred` erased:
/// `shredded` holds the sequence numbers (from 1) of the events that hold a shredded
/// value's marker in its place. A batch holding one is not decided again: its recorded
/// events are taken as given and folded, and its decisions counted as not re-derivable.
/// Once one has been, the state the decider reads holds markers where values were, so a
/// later batch decided otherwise than recorded is taken as recorded and counted the same
/// way (it may rest on an erased value) instead of diverging (docs/replay.md#shredded-values).
///
/// # Errors
/// As [`replay`].
pub fn replay_with_shredded(
    events: &[RunEvent],
    shredded: &BTreeSet<u64>,
    mut progress: impl FnMut(usize),
) -> Result<ReplayReport, ReplayError> {
    let Some(RunEvent::RunRequested(run)) = events.first() else {
        return Err(ReplayError::NotARun);
    };
    UnsupportedDecider::check(run.decider_version)?;
    let bundle = recorded_bundle(run).map_err(|e| ReplayError::Bundle {
        name: run.bundle_source_name.clone(),
        message: e.to_string(),
    })?;
    let mut state = RunState::default();
    let mut report = ReplayReport {
        run_id: run.run_id.to_string(),
        decider_version: run.decider_version,
        events: events.len(),
        inputs: 0,
        decisions: 0,
        reproduced_decisions: 0,
        reworded_decisions: 0,
        rewordings: Vec::new(),
        not_rederivable: 0,
        status: RunStatus::Running,
        stop_reason: None,
        output: None,
        divergence: None,
    };
    // Whether a batch taken as recorded (an erased value) has been folded.
    let mut tainted = false;
    for (start, recorded) in batches(events) {
        let first = &recorded[0];
        let end = start + recorded.len();
        let seq = start as u64 + 1;
        let command = Command::from_event(first).ok_or(ReplayError::NotAnInput {
            seq,
            kind: first.kind(),
        })?;
        report.inputs += 1;
        let decisions = recorded.len() - 1;
        if shredded.range(seq..=end as u64).next().is_some() {
            // The recorded input or what was decided of it holds an erased value: what
            // the decider would make of it cannot be known. Take the batch as recorded.
            for event in recorded {
                state.apply(event);
            }
            tainted = true;
            report.decisions += decisions;
            report.not_rederivable += decisions;
            progress(end);
            continue;
        }
        // After an erased value entered the state, keep a copy to fall back on: a batch
        // decided otherwise may rest on the marker, not on a change of behaviour.
        let before = tainted.then(|| state.clone());
        // Deciding in place leaves `state` folded with the decided batch, which equals
        // the recorded one whenever replay goes on (a divergence stops it): no copy of
        // the whole run per batch, no second fold.
        let found = match decide_in_place(&mut state, &bundle, command) {
            Err(rejection) => Some(Divergence {
                code: REJECTED,
                seq,
                input: first.kind(),
                recorded_kinds: recorded
                    .get(1..)
                    .unwrap_or_default()
                    .iter()
                    .map(RunEvent::kind)
                    .collect(),
                decided_kinds: Vec::new(),
                differences: Vec::new(),
                at_event: 0,
                why: format!(
                    "the decider now refuses this recorded input ({rejection}); the run's \
                     later decisions rest on it"
                ),
            }),
            Ok(decided) if decided.as_slice() == recorded => None,
            Ok(decided) if same_decisions(recorded, &decided) => {
                reworded(&mut report, seq, recorded, &decided);
                None
            }
            Ok(decided) => Some(divergence(seq, recorded, &decided)),
        };
        match (found, before) {
            (None, _) => report.reproduced_decisions += decisions,
            (Some(_), Some(mut before)) => {
                for event in recorded {
                    before.apply(event);
                }
                state = before;
                report.not_rederivable += decisions;
            }
            (Some(divergence), None) => {
                report.divergence = Some(divergence);
                break;
            }
        }
        report.decisions += decisions;
        progress(end);
    }
    report.status = state.status();
    report.stop_reason = state.stop_reason().map(str::to_owned);
    report.output = state.output().cloned();
    Ok(report)
}

/// Counts the events of a batch this build words otherwise, and lists the first.
fn reworded(report: &mut ReplayReport, seq: u64, recorded: &[RunEvent], decided: &[RunEvent]) {
    for (i, (r, d)) in recorded.iter().zip(decided).enumerate() {
        if r == d {
            continue;
        }
        report.reworded_decisions += 1;
        if report.rewordings.len() < REWORDINGS_SHOWN {
            report.rewordings.push(Rewording {
                seq: seq + i as u64,
                kind: r.kind(),
                differences: differences(&json(r), &json(d), DIFFERENCES_SHOWN),
            });
        }
    }
}

/// The first differing event of a batch, and what its difference means.
fn divergence(seq: u64, recorded: &[RunEvent], decided: &[RunEvent]) -> Divergence {
    let input = recorded.first().map_or("", RunEvent::kind);
    // Both start with the input itself; compare what was decided of it.
    let (recorded, decided) = (
        recorded.get(1..).unwrap_or_default(),
        decided.get(1..).unwrap_or_default(),
    );
    let at = recorded
        .iter()
        .zip(decided)
        .position(|(r, d)| r != d)
        .unwrap_or(recorded.len().min(decided.len()));
    let (r, d) = (recorded.get(at), decided.get(at));
    let differences = match (r, d) {
        (Some(r), Some(d)) => differences(&json(r), &json(d), DIFFERENCES_SHOWN),
        (Some(r), None) => vec![Difference {
            path: String::new(),
            recorded: Some(json(r)),
            decided: None,
        }],
        (None, Some(d)) => vec![Difference {
            path: String::new(),
            recorded: None,
            decided: Some(json(d)),
        }],
        (None, None) => Vec::new(),
    };
    let why = match (r, d) {
        (Some(r), Some(d)) if r.kind() != d.kind() => format!(
            "the decider now records {} where the log records {}: the run would have taken \
             another path from here",
            d.kind(),
            r.kind()
        ),
        (Some(r), Some(_)) => format!(
            "the decider now records a different {}: the same step, decided with other \
             content (see the differences)",
            r.kind()
        ),
        (Some(r), None) => format!(
            "the log records a {} that the decider no longer makes",
            r.kind()
        ),
        (None, Some(d)) => format!(
            "the decider now also records a {} that the log does not hold",
            d.kind()
        ),
        (None, None) => "the batches differ".to_owned(),
    };
    Divergence {
        code: DIVERGENCE,
        seq,
        input,
        recorded_kinds: recorded.iter().map(RunEvent::kind).collect(),
        decided_kinds: decided.iter().map(RunEvent::kind).collect(),
        differences,
        at_event: at,
        why,
    }
}
