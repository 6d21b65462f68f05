//! The HTML report of one run (`docket export RUN --format html`, docs/report.md): one
//! self-contained page an auditor can open offline, print or archive with the log.
//!
//! ```text
//! the run's events (with seq, time, hash) ──▶ model: the replay crate's readings of
//!   + what verifying found (chain, checkpoint)     the log (fold, decisions, denials,
//!                                                  episode tree, replay result)
//!                                                    │
//!                                                    ▼
//!                                        html: every value escaped, no script
//! ```
//!
//! Nothing here interprets an event a second time: the state comes from the decider's
//! fold, each decision is classed as `docket replay --policies` classes it
//! (`docket_replay::decision_of`), a denial is what `docket inspect --at last-denial`
//! finds, the episode tree is inspect's, and the replay result is `docket replay`'s.

use docket_decider::RunEvent;
use docket_store::VerifyReport;

mod dates;
mod html;
mod model;
#[cfg(test)]
mod tests;

pub use dates::{date_ms, date_ns};

/// One event of a run's log as the store returned it: its place, its time and its hash
/// in the chain, and the decoded event.
#[derive(Debug, Clone)]
pub struct LoggedEvent {
    /// Position in the run's log, from 1.
    pub seq: u64,
    /// When it was appended, ns since the Unix epoch.
    pub recorded_at_ns: i64,
    /// Its hash in the run's chain (hex).
    pub hash: String,
    /// The event.
    pub event: RunEvent,
}

/// What checking the run's log found, as the caller checked it when the report was made.
/// The report shows it as given: it reads the store through no one but its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportVerification {
    /// The hash chain, as the store's `verify` found it.
    pub chain: ChainCheck,
    /// The run's signed checkpoint, when one exists.
    pub checkpoint: Option<CheckpointCheck>,
}

/// The hash chain of a run's log, checked link by link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainCheck {
    /// Every link and hash of events 1 to `events` checked and sound.
    Sound {
        /// Events checked.
        events: u64,
    },
    /// The first thing wrong.
    Broken {
        /// Events checked sound before it.
        verified: u64,
        /// The sequence at which the chain is wrong.
        seq: u64,
        /// What is wrong there, in the store's words.
        what: String,
    },
}

impl From<&VerifyReport> for ChainCheck {
    fn from(report: &VerifyReport) -> Self {
        match &report.first_break {
            None => Self::Sound {
                events: report.verified,
            },
            Some(b) => Self::Broken {
                verified: report.verified,
                seq: b.seq(),
                what: b.to_string(),
            },
        }
    }
}

/// A signed checkpoint of the run and what checking it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointCheck {
    /// The checkpoint as kept (a signed note: origin, tree size, root, signatures).
    pub note: String,
    /// What checking its signature and the log against it found, in words.
    pub outcome: String,
    /// Whether it checked out.
    pub sound: bool,
}

/// Why no report could be made of a log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The log is empty or does not open with `run.requested`.
    #[error("the log does not start with run.requested, so it is not a run's log")]
    NotARun,
    /// The events are not numbered 1, 2, 3... in order.
    #[error(
        "event {position} of the log given carries sequence {seq}: a report needs the whole log, in order"
    )]
    OutOfOrder {
        /// 1-based position in the slice given.
        position: u64,
        /// The sequence it carries.
        seq: u64,
    },
}

/// The HTML report of the run whose whole log is `events` (in order, from sequence 1),
/// with what verifying it found.
///
/// # Errors
/// [`ReportError`] when `events` is not a run's whole log.
pub fn html_report(
    events: &[LoggedEvent],
    verification: &ReportVerification,
) -> Result<String, ReportError> {
    let report = model::Report::read(events, verification)?;
    Ok(html::render(&report))
}
