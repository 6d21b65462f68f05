//! `decide/failure.rs`: the failure ladder (retry, escalate, hard stop) and the circuit
//! breaker.

use super::*;
use crate::events::MAX_TIMEOUT_GROWTH;
use crate::{RunEvent, RunStatus};
use docket_protocol::AgentResponse;

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
pub(crate) fn version_5_an_open_circuit_blocks_the_next_call_to_a_failing_agent() {
    let src = format!(
        "{BUNDLE}\n[defaults.circuit_breaker]\nfailure_threshold = 1\nprobe_interval_ms = 60000\n"
    );
    let b = PolicyBundle::from_toml_str(&src, "t.toml").expect("valid");
    let mut request = run_requested(&b);
    request.bundle_source = src;
    // Versions 1 to 5 keep the breaker in the run (from 6 it is read across runs).
    request.decider_version = 5;
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

/// `run-1` under the test bundle with `escalation` appended, recorded by `version`.
fn with_escalation(escalation: &str, version: u32) -> History {
    let src = format!("{BUNDLE}\n[escalation]\n{escalation}\n");
    started_under(&src, "t.toml", |run| run.decider_version = version)
}

fn agent_error(code: &str) -> Response {
    respond_with(AgentResponse::error("", code, "the request is not valid"))
}

/// From decider version 5 an agent's error code is classed before the ladder reads it:
/// `INPUT_VALIDATION_FAILED` is a `validation_error`, so a bundle that names that class
/// as non-retryable escalates at once (version 4 compared the code in lower case and
/// retried).
#[test]
pub(crate) fn error_codes_are_classed_for_the_ladder() {
    let ladder = "non_retryable_errors = [\"validation_error\"]";
    let mut run = with_escalation(ladder, DECIDER_VERSION);
    run.when(agent_error("INPUT_VALIDATION_FAILED"))
        .then_kinds(&["agent.responded", "policy.decided", "human.escalated"])
        .then(|events| {
            let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
                panic!("policy.decided");
            };
            assert_eq!(&*decision.rule_id, "escalation.non_retryable_errors");
        });
    run.replays();

    let mut old = with_escalation(ladder, 4);
    old.when(agent_error("INPUT_VALIDATION_FAILED"))
        .then_kinds(&["agent.responded", "policy.decided", "agent.call_scheduled"]);
    old.replays();
}

/// A class in `stop_on_errors` stops the flow at once, the error returned as that class
/// (seed 000: a validation error stops the flow at its checkpoint).
#[test]
pub(crate) fn a_class_that_stops_the_flow_blocks_at_once() {
    let mut run = with_escalation("stop_on_errors = [\"validation_error\"]", DECIDER_VERSION);
    run.when(agent_error("INPUT_VALIDATION_FAILED"))
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "episode.stopped",
            "run.blocked",
        ])
        .then(|events| {
            let RunEvent::RunBlocked { rule_id, error, .. } = &events[3] else {
                panic!("blocked");
            };
            assert_eq!(rule_id, "escalation.stop_on_errors");
            assert_eq!(error["errorType"], "validation_error");
            assert_eq!(error["retryCount"], 0);
        });
    run.replays();
}

/// A retry after a timeout waits twice as long, at most four times the agent's own
/// timeout; a retry after a crash waits as long as before.
#[test]
pub(crate) fn retries_after_timeouts_wait_longer() {
    let ladder = "ladder = [{ id = \"retry\", after_failures = 1, action = \"retry\" }, \
                  { id = \"stop\", after_failures = 5, action = \"block\" }]";
    let mut run = with_escalation(ladder, DECIDER_VERSION);
    let base = run.pending().timeout_ms;
    let mut seen = Vec::new();
    for _ in 0..3 {
        run.when(fail("AGENT_TIMEOUT", "no answer in time"));
        seen.push(run.pending().timeout_ms);
    }
    assert_eq!(seen, [base * 2, base * 4, base * MAX_TIMEOUT_GROWTH]);
    run.when(crash());
    assert_eq!(run.pending().timeout_ms, base * MAX_TIMEOUT_GROWTH);
    run.replays();

    let mut old = with_escalation(ladder, 4);
    old.when(fail("AGENT_TIMEOUT", "no answer in time"));
    assert_eq!(old.pending().timeout_ms, base);
}
