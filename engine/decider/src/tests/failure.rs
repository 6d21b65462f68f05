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

/// `run-1` under the test bundle with `escalation` appended, recorded by `version`.
fn with_escalation(escalation: &str) -> History {
    let src = format!("{BUNDLE}\n[escalation]\n{escalation}\n");
    started_under(&src, "t.toml", |_| {})
}

fn agent_error(code: &str) -> Response {
    respond_with(AgentResponse::error("", code, "the request is not valid"))
}

/// An agent's error code is classed before the ladder reads it: `INPUT_VALIDATION_FAILED`
/// is a `validation_error`, so a bundle that names that class as non-retryable escalates
/// at once.
#[test]
pub(crate) fn error_codes_are_classed_for_the_ladder() {
    let ladder = "non_retryable_errors = [\"validation_error\"]";
    let mut run = with_escalation(ladder);
    run.when(agent_error("INPUT_VALIDATION_FAILED"))
        .then_kinds(&["agent.responded", "policy.decided", "human.escalated"])
        .then(|events| {
            let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
                panic!("policy.decided");
            };
            assert_eq!(&*decision.rule_id, "escalation.non_retryable_errors");
        });
    run.replays();
}

/// A class in `stop_on_errors` stops the flow at once, the error returned as that class
/// (seed 000: a validation error stops the flow at its checkpoint).
#[test]
pub(crate) fn a_class_that_stops_the_flow_blocks_at_once() {
    let mut run = with_escalation("stop_on_errors = [\"validation_error\"]");
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
    let mut run = with_escalation(ladder);
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
}
