//! `decide/pause.rs`: a person pauses a run and lets it go on (decider version 13).

use super::*;
use crate::{NextStep, RunPause, RunStatus};

fn pause(by: &str, reason: &str) -> Command {
    Command::Pause(RunPause {
        by: by.into(),
        reason: reason.into(),
        at_ms: 5_000,
    })
}

fn unpause(by: &str, reason: &str) -> Command {
    Command::Unpause(RunPause {
        by: by.into(),
        reason: reason.into(),
        at_ms: 6_000,
    })
}

/// Given a running run with a call in flight, when a person pauses it, then `run.paused`
/// alone is recorded and nothing new starts; the call's answer is still recorded (what it
/// asks for waits); unpaused, the run goes on where it stood.
#[test]
pub(crate) fn a_paused_run_starts_nothing_new_records_what_settles_and_goes_on_when_unpaused() {
    let mut run = started();
    assert!(matches!(run.state.next_step(), NextStep::Call(_)));
    run.when(pause("ana", "the agent posts too often"))
        .then_kinds(&["run.paused"])
        .then(|events| {
            assert_eq!(
                events[0],
                RunEvent::RunPaused(RunPause {
                    by: "ana".into(),
                    reason: "the agent posts too often".into(),
                    at_ms: 5_000
                })
            );
        });
    assert_eq!(run.state.status, RunStatus::Running);
    assert_eq!(
        run.state.paused().map(|p| p.by.as_str()),
        Some("ana"),
        "the run shows as paused, by whom"
    );
    assert_eq!(
        run.state.next_step(),
        NextStep::Paused,
        "the pending call waits"
    );
    // The call in flight settles: its answer is recorded, and the call it leads to waits.
    run.when(respond(vec![handoff(
        "b",
        "draft",
        serde_json::json!({ "n": 1 }),
    )]))
    .then_kinds(&["agent.responded", "handoff.allowed", "agent.call_scheduled"]);
    assert_eq!(run.state.next_step(), NextStep::Paused);
    run.when(unpause("ana", "fixed"))
        .then_kinds(&["run.unpaused"]);
    assert!(run.state.paused().is_none());
    assert!(matches!(run.state.next_step(), NextStep::Call(calls) if calls.len() == 1));
    run.replays();
}

/// Refused, nothing recorded: a pause naming nobody or giving no reason, a second pause,
/// an unpause of a run not paused, a pause of a finished run.
#[test]
pub(crate) fn pauses_that_do_not_apply_are_refused() {
    let mut run = started();
    assert!(matches!(
        run.when_rejected(pause(" ", "why")),
        Rejection::Unnamed(crate::PersonAct::Pause)
    ));
    assert!(matches!(
        run.when_rejected(pause("ana", "")),
        Rejection::Unexplained(crate::PersonAct::Pause)
    ));
    assert_eq!(
        run.when_rejected(unpause("ana", "go")),
        Rejection::NotPaused
    );
    run.when(pause("ana", "look first"));
    assert_eq!(
        run.when_rejected(pause("bo", "again")),
        Rejection::AlreadyPaused {
            by: "ana".into(),
            reason: "look first".into()
        }
    );
    assert!(matches!(
        run.when_rejected(unpause("", "go")),
        Rejection::Unnamed(crate::PersonAct::Unpause)
    ));
    // A paused run can still be cancelled; then nothing more applies.
    run.when(Command::Cancel(crate::RunCancelled {
        by: "ana".into(),
        reason: "not needed".into(),
        at_ms: 7_000,
    }));
    assert_eq!(
        run.when_rejected(unpause("ana", "go")),
        Rejection::Finished("cancelled")
    );
    run.replays();
}
