//! Progress of long replays: a bar on stderr when it is a terminal, nothing when piped
//! or redirected (indicatif hides its bar then), so scripts and `--json` stay clean.

use docket_decider::RunEvent;
use std::collections::BTreeSet;

use docket_replay::{ReplayError, ReplayReport, replay_with_shredded};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Runs shorter than this replay too fast for a bar to help.
const SHOWN_FROM_EVENTS: usize = 20_000;

/// Replays `events`, showing a bar for long runs.
pub(crate) fn replay_shown(
    events: &[RunEvent],
    shredded: &BTreeSet<u64>,
) -> Result<ReplayReport, ReplayError> {
    if events.len() < SHOWN_FROM_EVENTS {
        return replay_with_shredded(events, shredded, |_| {});
    }
    let bar =
        ProgressBar::with_draw_target(Some(events.len() as u64), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("replaying {bar:40} {pos}/{len} events ({eta} left)")
    {
        bar.set_style(style);
    }
    let report = replay_with_shredded(events, shredded, |done| bar.set_position(done as u64));
    bar.finish_and_clear();
    report
}
