//! `decide/cancel.rs`: a person cancels a run (decider version 10).

use super::*;
use crate::RunCancelled;
use crate::RunStatus;

fn cancel(by: &str, reason: &str) -> Command {
    Command::Cancel(RunCancelled {
        by: by.into(),
        reason: reason.into(),
        at_ms: 5_000,
    })
}

/// Given a running run with a call in flight, when a person cancels it, then
/// `run.cancelled` alone is recorded, the run is cancelled with who and why, and the
/// call's late answer is refused.
#[test]
pub(crate) fn a_running_run_is_cancelled_and_takes_no_later_input() {
    let mut run = started();
    run.when(cancel("ana", "wrong input"))
        .then_kinds(&["run.cancelled"])
        .then(|events| {
            assert_eq!(
                events[0],
                RunEvent::RunCancelled(RunCancelled {
                    by: "ana".into(),
                    reason: "wrong input".into(),
                    at_ms: 5_000
                })
            );
        });
    assert_eq!(run.state.status, RunStatus::Cancelled);
    assert!(run.state.status.is_final());
    assert_eq!(
        run.state.stop_reason(),
        Some("cancelled by ana: wrong input")
    );
    assert_eq!(
        run.when_rejected(respond(Vec::new())),
        Rejection::Finished("cancelled")
    );
    assert_eq!(
        run.when_rejected(cancel("bo", "again")),
        Rejection::Finished("cancelled")
    );
    run.replays();
}

/// A run waiting for a human can be cancelled instead of decided; its ticket is then
/// refused.
#[test]
pub(crate) fn a_run_waiting_for_a_human_is_cancelled() {
    let mut run = started();
    run.when(crash());
    run.when(crash());
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    run.when(cancel("ana", "not needed any more"))
        .then_kinds(&["run.cancelled"]);
    assert_eq!(run.state.status, RunStatus::Cancelled);
    assert_eq!(
        run.when_rejected(approve("ticket-1")),
        Rejection::Finished("cancelled")
    );
    run.replays();
}

/// Refused, nothing recorded: a cancellation naming nobody or giving no reason, one of a
/// finished run.
#[test]
pub(crate) fn cancellations_that_do_not_apply_are_refused() {
    let mut run = started();
    assert!(matches!(
        run.when_rejected(cancel(" ", "why")),
        Rejection::Unnamed(crate::PersonAct::Cancellation)
    ));
    assert!(matches!(
        run.when_rejected(cancel("ana", "")),
        Rejection::Unexplained(crate::PersonAct::Cancellation)
    ));
    run.when(crash());
    run.when(crash());
    run.when(deny("ticket-1"));
    assert_eq!(
        run.when_rejected(cancel("ana", "why")),
        Rejection::Finished("blocked by policy")
    );
}
