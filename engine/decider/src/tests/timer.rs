//! `decide/timer.rs`: durable timers. Given `run-1` under the `t` bundle (a's call
//! pending, inputs recorded at 10,000 ms unless they say), a's `wait` sets a timer due
//! from the response's recorded time; its firing, recorded by the runtime, calls a again.
//! Each log is checked with `replay_check`.

use serde_json::json;

use super::*;
use crate::{
    NextStep, Rejection, RunEvent, RunStatus, TIMER_FIRED_TYPE, TIMERS_SOURCE, TimerFired, TimerSet,
};
use docket_protocol::{Action, DecisionInput, EpisodeId};

const T1: &str = "run-1/timer-1";

fn wait_for(duration: &str) -> Action {
    Action::Wait {
        until: None,
        duration: Some(duration.to_owned()),
        event: None,
        reason: "the slot opens later".to_owned(),
    }
}

fn fire(timer: &str, at_ms: i64) -> Command {
    Command::FireTimer(TimerFired {
        timer_id: timer.into(),
        at_ms,
    })
}

fn waiting_run(bundle_extra: &str) -> History {
    let source = format!("{}\n{bundle_extra}", super::BUNDLE);
    started_under(&source, "t.toml", |_| {}).clock(10_000, 0)
}

/// The root episode's wall time used so far.
fn wall_used(run: &History) -> u64 {
    run.state
        .episodes()
        .get(&EpisodeId::root())
        .expect("root")
        .budget[crate::state::episode::WALL_TIME_MS]
        .used
}

/// When the agent waits `duration`, the wait is refused by `rule`: decided, recorded as a
/// refused action of the episode, and the agent called again.
fn refused_by(run: &mut History, duration: &str, rule: &str) {
    run.when(respond(vec![wait_for(duration)]))
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "episode.action_denied",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
                panic!("decided");
            };
            assert_eq!(decision.verdict, docket_policies::Verdict::Deny);
            assert_eq!(&*decision.rule_id, rule);
        });
}

#[test]
pub(crate) fn a_wait_sets_a_timer_and_its_firing_calls_the_agent_again() {
    let mut run = waiting_run("");
    let asked = run.pending().request_id;
    run.when(respond(vec![wait_for("90s")]))
        .then_kinds(&["agent.responded", "policy.decided", "timer.set"])
        .then(|events| {
            let RunEvent::PolicyDecided { subject, decision } = &events[1] else {
                panic!("decided");
            };
            assert_eq!(subject, T1);
            assert_eq!(decision.verdict, docket_policies::Verdict::Allow);
            assert_eq!(&*decision.rule_id, "waiting.max_wait_ms");
            assert_eq!(
                events[2],
                RunEvent::TimerSet(TimerSet {
                    timer_id: T1.into(),
                    request_id: asked.clone(),
                    agent: "a".into(),
                    episode_id: EpisodeId::root(),
                    due_at_ms: 100_000,
                    reason: "the slot opens later".to_owned(),
                    counts_against_wall_time: false,
                    effect_id: None,
                })
            );
        });
    // Nothing is called while the timer runs, and the run neither ends nor fails.
    assert_eq!(run.state.status, RunStatus::Running);
    assert!(run.state.pending_requests().is_empty());
    assert!(matches!(
        run.state.next_step(),
        NextStep::WaitForTimer(t) if t.set.timer_id.as_str() == T1 && t.set.due_at_ms == 100_000
    ));
    // A firing before it is due, or of no such timer, is refused; nothing is recorded.
    assert!(matches!(
        run.when_rejected(fire(T1, 99_999)),
        Rejection::TimerNotDue {
            due_at_ms: 100_000,
            at_ms: 99_999,
            ..
        }
    ));
    assert!(matches!(
        run.when_rejected(fire("run-1/timer-9", 100_000)),
        Rejection::UnknownTimer(_)
    ));
    // Fired 5 s late (docket was down): the agent is told when it was due and how late.
    run.when(fire(T1, 105_000))
        .then_kinds(&["timer.fired", "agent.call_scheduled"]);
    let request = run.pending();
    assert_eq!(
        request.decision_inputs.last(),
        Some(&DecisionInput::new(
            TIMERS_SOURCE,
            TIMER_FIRED_TYPE,
            std::sync::Arc::new(json!({
                    "timer_id": T1,
                    "reason": "the slot opens later",
                    "due_at_ms": 100_000,
                    "fired_at_ms": 105_000,
                    "late_ms": 5_000,
            }))
        ))
    );
    assert!(matches!(
        run.when_rejected(fire(T1, 106_000)),
        Rejection::TimerFired { at_ms: 105_000, .. }
    ));
    // The agent goes on from there: its handoff is decided as any other.
    run.when(respond(vec![handoff("b", "post", json!({"posted": true}))]));
    assert_eq!(run.pending().target_agent.as_str(), "b");
    run.replays();
}

#[test]
pub(crate) fn a_wait_longer_than_the_bundle_allows_is_refused_and_the_agent_told() {
    let mut run = waiting_run("[waiting]\nmax_wait_ms = 60000\n");
    refused_by(&mut run, "2m", "waiting.max_wait_ms");
    assert!(run.state.timers().is_empty(), "no timer is set");
    let told = run.pending();
    let input = told.decision_inputs.last().expect("told");
    assert_eq!(input.output_type, "action_denied");
    assert_eq!(input.payload["action"], "wait");
    assert_eq!(input.payload["rule_id"], "waiting.max_wait_ms");
    run.replays();
}

#[test]
pub(crate) fn time_on_a_timer_is_left_out_of_wall_time_unless_the_bundle_counts_it() {
    let two_hours = 7_200_000;
    let mut uncounted = waiting_run("");
    let mut counted = waiting_run("[waiting]\ncounts_against_wall_time = true\n");
    for run in [&mut uncounted, &mut counted] {
        run.when(respond(vec![wait_for("2h")]));
        run.when(fire(T1, 10_000 + two_hours));
        run.when(respond(vec![handoff("b", "post", json!({}))]).at(10_000 + two_hours + 1_000));
    }
    // Started at 1,000 ms, answered at 10,000 ms, then a second after the timer fired:
    // the wait of two hours is not charged by default, and the run goes on under the
    // default one-hour budget.
    assert_eq!(wall_used(&uncounted), 10_000);
    assert_eq!(uncounted.pending().target_agent.as_str(), "b");
    // Counted, it is charged in full, and the one-hour budget is exhausted.
    assert_eq!(wall_used(&counted), 10_000 + two_hours as u64);
    assert!(
        counted.state.pending_requests().is_empty(),
        "the episode stopped"
    );
    uncounted.replays();
    counted.replays();
}

#[test]
pub(crate) fn a_run_of_decider_12_is_told_it_cannot_wait() {
    let mut run =
        started_under(super::BUNDLE, "t.toml", |r| r.decider_version = 12).clock(10_000, 0);
    refused_by(&mut run, "1m", "decider_version");
    assert!(run.state.timers().is_empty());
    run.replays();
}
