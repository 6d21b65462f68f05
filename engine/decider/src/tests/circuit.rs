//! `decide/circuit.rs`: circuit breakers across runs. The runtime records what it read of
//! the target's breaker (`agent.circuit_checked`): from decider version 13 its calls and
//! failures in the bundle's window; version 12 read its failures in a row. The decider
//! decides half-open (the call goes) or open (the call is degraded: a capability's asker
//! is told `capability_failed`, a handoff's call waits for a human, or with `on_open =
//! "block"` the run is blocked).

use serde_json::json;

use super::*;
use crate::{CircuitReading, CircuitWindow, RunStatus};
use docket_policies::Verdict;
use docket_protocol::Action;

/// The breaker of the one pending call's target, read at 100,000 ms: `failures` of twice
/// as many calls in the default 600 s window (50%, the default rate), none in a row (a
/// success came last), the last failure `ago_ms` before the reading.
pub(crate) fn circuit(failures: u32, ago_ms: i64) -> impl FnOnce(&mut History) -> Command {
    move |history: &mut History| {
        let pending = history.pending();
        Command::RecordCircuit(CircuitReading {
            request_id: pending.request_id,
            agent: pending.target_agent,
            consecutive_failures: 0,
            last_failure_ms: 100_000 - ago_ms,
            last_probe_ms: None,
            window: Some(window(failures * 2, failures)),
            at_ms: 100_000,
        })
    }
}

fn window(calls: u32, failures: u32) -> CircuitWindow {
    CircuitWindow {
        window_ms: 600_000,
        calls,
        failures,
    }
}

fn ask_b() -> Action {
    let serde_json::Value::Object(inputs) = json!({"topics": ["t"]}) else {
        unreachable!("an object");
    };
    Action::RequestCapability {
        target_agent: "b".into(),
        capability_code: "questions".into(),
        inputs,
        priority: None,
    }
}

fn decision_of(events: &[RunEvent]) -> &docket_policies::PolicyDecision {
    events
        .iter()
        .find_map(|e| match e {
            RunEvent::PolicyDecided { decision, .. } => Some(decision),
            _ => None,
        })
        .expect("a policy decision")
}

/// An open circuit (5 failures across runs, the last 1 s ago, probe after 60 s) answers a
/// capability call's asker with `capability_failed`, class `circuit_open`, through the
/// gate: the agent asked is never called and the run goes on.
#[test]
pub(crate) fn an_open_circuit_answers_a_capability_asker_with_capability_failed() {
    let mut run = started();
    run.when(respond(vec![ask_b()]));
    assert_eq!(run.pending().target_agent, "b");
    run.when(circuit(5, 1_000))
        .then_kinds(&[
            "agent.circuit_checked",
            "policy.decided",
            "agent.call_degraded",
            "handoff.allowed",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let d = decision_of(events);
            assert_eq!(d.verdict, Verdict::Deny);
            assert_eq!(&*d.rule_id, "defaults.circuit_breaker");
            let RunEvent::CallDegraded { error, agent, .. } = &events[2] else {
                panic!("agent.call_degraded");
            };
            assert_eq!(agent, "b");
            assert_eq!(error["errorType"], "circuit_open");
            assert_eq!(error["details"]["failuresInWindow"], 5);
            assert_eq!(error["details"]["callsInWindow"], 10);
            assert_eq!(error["details"]["windowMs"], 600_000);
            assert_eq!(error["details"]["failureRatePercent"], 50);
        });
    let back = run.pending();
    assert_eq!(back.target_agent, "a", "the asker is called again");
    let failure = back.decision_inputs.last().expect("the degradation");
    assert_eq!(failure.output_type, "capability_failed");
    assert_eq!(failure.payload["error_class"], "circuit_open");
    assert_eq!(failure.payload["error_code"], "CIRCUIT_OPEN");
    assert_eq!(failure.payload["agent"], "b");
    assert_eq!(run.state.status, RunStatus::Running);
    // The asker falls back and the run goes on.
    run.when(respond(vec![handoff("b", "ab", json!({"fallback": true}))]));
    assert_eq!(run.pending().target_agent, "b");
    run.replays();
}

/// An asker that keeps asking an agent whose circuit is open stops on `failure_repeats`
/// (each refused call counts as `circuit_open` in its episode) instead of looping.
#[test]
pub(crate) fn an_asker_that_keeps_asking_an_open_circuit_stops() {
    let mut run = started();
    let limit = run.bundle.recursion_policy("a").failure_repeat_limit;
    for _ in 1..limit {
        run.when(respond(vec![ask_b()]));
        run.when(circuit(5, 1_000));
        assert_eq!(run.pending().target_agent, "a");
    }
    run.when(respond(vec![ask_b()]));
    run.when(circuit(5, 1_000)).then(|events| {
        assert!(
            events.iter().any(|e| matches!(
                e,
                RunEvent::EpisodeStopped { condition, .. }
                    if *condition == docket_policies::StopCondition::FailureRepeats
            )),
            "{:?}",
            kinds(events)
        );
    });
    assert!(run.state.status.is_final(), "{:?}", run.state.status);
    run.replays();
}

/// An open circuit at a handoff's receiver: nobody asked who could fall back, so the
/// degradation is recorded and the run waits for a human; approving tries again (a new
/// call, read again by the runtime).
#[test]
pub(crate) fn an_open_circuit_at_a_handoff_waits_for_a_human() {
    let mut run = started();
    run.when(circuit(7, 1_000))
        .then_kinds(&[
            "agent.circuit_checked",
            "policy.decided",
            "agent.call_degraded",
            "human.escalated",
        ])
        .then(|events| {
            let RunEvent::Escalated {
                reason, subject, ..
            } = &events[3]
            else {
                panic!("human.escalated");
            };
            assert!(
                reason.contains("circuit is open 7 of its 14 calls in the last 600 s failed"),
                "{reason}"
            );
            assert!(matches!(subject, crate::TicketSubject::Retry { .. }));
        });
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    assert!(run.state.pending_requests().is_empty(), "a was not called");
    run.when(approve("ticket-1").at(200_000)).then_kinds(&[
        "human.decided",
        "handoff.allowed",
        "agent.call_scheduled",
    ]);
    let again = run.pending();
    assert_eq!((again.target_agent.as_str(), again.attempt), ("a", 2));
    run.replays();
}

/// `on_open = "block"`: an open circuit blocks the run, as the per-run breaker did.
#[test]
pub(crate) fn on_open_block_blocks_the_run() {
    let src = format!("{BUNDLE}\n[defaults.circuit_breaker]\non_open = \"block\"\n");
    let mut run = started_under(&src, "t.toml", |_| {});
    run.when(circuit(5, 1_000))
        .then_kinds(&[
            "agent.circuit_checked",
            "policy.decided",
            "agent.call_degraded",
            "episode.stopped",
            "run.blocked",
        ])
        .then(|events| {
            let RunEvent::RunBlocked { rule_id, error, .. } = &events[4] else {
                panic!("run.blocked");
            };
            assert_eq!(rule_id, "defaults.circuit_breaker");
            assert_eq!(error["errorType"], "circuit_open");
        });
    run.replays();
}

/// Once the cool-down has passed since the last failure, the circuit is half-open: the
/// call is let through as the one probe (nothing is settled), and its success goes on
/// like any answer. A probe let through since (`last_probe_ms`) starts the cool-down
/// again, so a second call finds the circuit open.
#[test]
pub(crate) fn a_half_open_probe_goes_through_and_its_success_goes_on() {
    let mut run = started();
    run.when(circuit(5, 60_000))
        .then_kinds(&["agent.circuit_checked", "policy.decided"])
        .then(|events| {
            let d = decision_of(events);
            assert_eq!(d.verdict, Verdict::Allow);
            assert!(d.reason.contains("half-open"), "{}", d.reason);
        });
    assert_eq!(run.pending().target_agent, "a", "the probe is made");
    run.when(respond(vec![handoff("b", "ab", json!({"y": 1}))]))
        .then_kinds(&["agent.responded", "handoff.allowed", "agent.call_scheduled"]);
    assert_eq!(run.pending().target_agent, "b");
    // b's breaker: the cool-down passed since its last failure, but a probe went 1 s ago.
    run.when(|h: &mut History| {
        let pending = h.pending();
        Command::RecordCircuit(CircuitReading {
            request_id: pending.request_id,
            agent: pending.target_agent,
            consecutive_failures: 5,
            last_failure_ms: 0,
            last_probe_ms: Some(99_000),
            window: Some(window(5, 5)),
            at_ms: 100_000,
        })
    })
    .then(|events| assert_eq!(decision_of(events).verdict, Verdict::Deny));
    run.replays();
}

/// A reading is refused, with nothing recorded, for another agent than the call's, or for
/// a call answered.
#[test]
pub(crate) fn readings_that_do_not_apply_are_refused() {
    let mut run = started();
    let err = run.when_rejected(|h: &mut History| {
        Command::RecordCircuit(CircuitReading {
            request_id: h.pending().request_id,
            agent: "b".into(),
            consecutive_failures: 5,
            last_failure_ms: 0,
            last_probe_ms: None,
            window: None,
            at_ms: 1,
        })
    });
    assert!(
        err.to_string()
            .contains("is to `a`; a reading of `b`'s circuit"),
        "{err}"
    );
    let answered = run.pending().request_id;
    run.when(respond(vec![handoff("b", "ab", json!({}))]));
    let err = run.when_rejected(Command::RecordCircuit(CircuitReading {
        request_id: answered,
        agent: "a".into(),
        consecutive_failures: 5,
        last_failure_ms: 0,
        last_probe_ms: None,
        window: None,
        at_ms: 1,
    }));
    assert!(matches!(err, Rejection::AlreadyAnswered(_)), "{err}");
}

/// The run's own failures open no circuit in the decider (the runtime reads the breaker
/// across runs): with a threshold of 1, a crash is retried by the ladder.
#[test]
pub(crate) fn a_runs_own_failures_leave_the_breaker_to_the_reading() {
    let src = format!(
        "{BUNDLE}\n[defaults.circuit_breaker]\nfailure_threshold = 1\nprobe_interval_ms = 60000\n"
    );
    let mut run = started_under(&src, "t.toml", |_| {});
    run.when(crash()).then_kinds(&[
        "agent.call_failed",
        "policy.decided",
        "agent.call_scheduled",
    ]);
    run.replays();
}

/// The pending call's breaker read at 100,000 ms, its last failure a second before:
/// `in_a_row` failures in a row and, from version 13, the window's counts.
fn read_at_100s(
    in_a_row: u32,
    window: Option<CircuitWindow>,
) -> impl FnOnce(&mut History) -> Command {
    move |h: &mut History| {
        let pending = h.pending();
        Command::RecordCircuit(CircuitReading {
            request_id: pending.request_id,
            agent: pending.target_agent,
            consecutive_failures: in_a_row,
            last_failure_ms: 99_000,
            last_probe_ms: None,
            window,
            at_ms: 100_000,
        })
    }
}

/// Decider version 13 decides by the failure rate over the window: below the rate the
/// call goes (the reading says why), whatever failed in a row; at it the circuit is open,
/// whatever success came last.
#[test]
pub(crate) fn the_rate_over_the_window_decides_not_the_failures_in_a_row() {
    let reading = |calls, failures, in_a_row| read_at_100s(in_a_row, Some(window(calls, failures)));
    let mut run = started();
    run.when(reading(10, 4, 4))
        .then_kinds(&["agent.circuit_checked", "policy.decided"])
        .then(|events| {
            let d = decision_of(events);
            assert_eq!(d.verdict, Verdict::Allow);
            assert_eq!(
                &*d.reason,
                "circuit closed: 4 of 10 calls failed in the last 600 s (it opens at 50% of at least 5)"
            );
        });
    assert_eq!(run.pending().target_agent, "a", "the call goes");
    let mut run = started();
    run.when(reading(10, 5, 0))
        .then(|events| assert_eq!(decision_of(events).verdict, Verdict::Deny));
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    run.replays();
}

/// A run recorded by decider version 12 was read by its failures in a row (no window):
/// replayed and resumed, it decides by `failure_threshold` as it did.
#[test]
pub(crate) fn a_version_12_reading_decides_by_failures_in_a_row() {
    let in_a_row = |failures| read_at_100s(failures, None);
    let mut run = started_under(BUNDLE, "t.toml", |r| r.decider_version = 12);
    run.when(in_a_row(4))
        .then(|events| assert_eq!(decision_of(events).verdict, Verdict::Allow));
    run.when(respond(vec![handoff("b", "ab", json!({}))]));
    run.when(in_a_row(5)).then(|events| {
        assert_eq!(decision_of(events).verdict, Verdict::Deny);
        let RunEvent::CallDegraded { error, .. } = &events[2] else {
            panic!("agent.call_degraded");
        };
        assert_eq!(error["details"]["consecutiveFailures"], 5);
        assert_eq!(error["details"]["threshold"], 5);
    });
    run.replays();
}
