//! `decide/failure.rs`: the failure ladder (retry, escalate, hard stop) and the circuit
//! breaker.

use super::*;
use crate::{RunEvent, RunStatus};

#[test]
pub(crate) fn failures_go_retry_escalate_block() {
    let mut run = started();
    run.when(crash()).then_kinds(&[
        "agent.call_failed",
        "policy.decided",
        "agent.call_scheduled",
    ]);
    assert_eq!(run.state.pending_requests()[0].attempt, 2);
    assert_eq!(run.state.pending_requests()[0].request_id, "run-1/call-2");
    assert_eq!(
        run.state.pending_requests()[0].context["previous_attempt"]["error_code"],
        "AGENT_CRASHED",
        "the retry carries what happened to the last attempt"
    );
    run.when(crash())
        .then_kinds(&["agent.call_failed", "policy.decided", "human.escalated"]);
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    run.when(approve("ticket-1").because("try once more").at(3_000));
    assert_eq!(run.state.status, RunStatus::Running);
    assert_eq!(run.state.pending_requests()[0].attempt, 3);
    run.when(crash())
        .then_kinds(&[
            "agent.call_failed",
            "policy.decided",
            "episode.stopped",
            "run.blocked",
        ])
        .then(|events| {
            let RunEvent::RunBlocked { error, .. } = &events[3] else {
                panic!("blocked");
            };
            assert_eq!(error["errorType"], "retry_limit_exceeded");
            assert_eq!(error["retryCount"], 2);
        });
    assert_eq!(run.state.status, RunStatus::Blocked);
    run.replays();
}

#[test]
pub(crate) fn an_open_circuit_blocks_the_next_call_to_a_failing_agent() {
    let src = format!(
        "{BUNDLE}\n[defaults.circuit_breaker]\nfailure_threshold = 1\nprobe_interval_ms = 60000\n"
    );
    let b = PolicyBundle::from_toml_str(&src, "t.toml").expect("valid");
    let mut request = run_requested(&b);
    request.bundle_source = src;
    let given = start_events(&b, request);
    let mut run = History::new(b).given(&given).clock(2_000, 0);
    run.when(crash())
        // The ladder says retry; the circuit (1 failure, threshold 1, probe after 60 s) says no.
        .then_kinds(&[
            "agent.call_failed",
            "policy.decided",
            "policy.decided",
            "episode.stopped",
            "run.blocked",
        ])
        .then(|events| {
            let RunEvent::RunBlocked { rule_id, error, .. } = &events[4] else {
                panic!("blocked");
            };
            assert_eq!(rule_id, "defaults.circuit_breaker");
            assert_eq!(error["errorType"], "circuit_open");
        });
}
