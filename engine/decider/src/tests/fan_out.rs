//! `decide/fan_out.rs`: parallel branches, their held outputs, conflicts and the join.

use serde_json::{Value, json};

use super::*;
use crate::{Rejection, RunEvent, RunStatus};
use docket_protocol::{
    Action, Confidence, ConflictingOutput, DecisionInput, SettledConflict, Settlement,
};
use std::sync::Arc;

/// `agent`'s branch answers with `confidence`, handing `payload` to sink.
fn branch(agent: &str, confidence: Confidence, payload: Value) -> Response {
    respond(vec![handoff("sink", "verdict", payload)])
        .by(agent)
        .confidence(confidence)
        .at(1)
}

#[test]
pub(crate) fn fan_out_conflicts_prefer_higher_confidence_and_archive_the_loser() {
    let mut run = fanned_out("prefer_higher_confidence");
    assert_eq!(run.state.pending.len(), 2, "two branches run in parallel");
    run.when(branch("left", Confidence::Low, json!({"v": "left"})))
        .then_kinds(&["agent.responded", "handoff.allowed", "output.held"]);
    run.when(branch("right", Confidence::High, json!({"v": "right"})))
        .then_kinds(&[
            "agent.responded",
            "handoff.allowed",
            "output.conflict_detected",
            "output.archived",
            "fanout.joined",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let RunEvent::OutputArchived { delivery, .. } = &events[3] else {
                panic!("archived")
            };
            assert_eq!(*delivery.payload, json!({"v": "left"}));
        });
    let sink = run.state.pending_requests()[0].clone();
    assert_eq!(sink.target_agent, "sink");
    assert_eq!(sink.decision_inputs.len(), 1);
    assert_eq!(*sink.decision_inputs[0].payload, json!({"v": "right"}));
    run.replays();
}

#[test]
pub(crate) fn fan_out_conflicts_go_to_a_human_who_picks_the_output() {
    let mut run = fanned_out("human");
    run.when(branch("left", Confidence::High, json!({"v": "left"})));
    run.when(branch("right", Confidence::Low, json!({"v": "right"})));
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    let bad = approve("ticket-1").because("r").choice(3).at(2);
    assert!(matches!(
        run.when_rejected(bad),
        Rejection::InvalidChoice { count: 2, .. }
    ));
    run.when(
        approve("ticket-1")
            .because("right is current")
            .choice(2)
            .at(2),
    );
    let sink = run.state.pending_requests()[0].clone();
    assert_eq!(*sink.decision_inputs[0].payload, json!({"v": "right"}));
    run.replays();
}

#[test]
pub(crate) fn fan_out_with_agreeing_outputs_delivers_once() {
    let mut run = fanned_out("human");
    run.when(branch("left", Confidence::High, json!({"v": 1})));
    run.when(branch("right", Confidence::Low, json!({"v": 1})))
        .then(|events| assert!(!kinds(events).contains(&"output.conflict_detected")));
    assert_eq!(run.state.pending_requests()[0].decision_inputs.len(), 1);
}

/// The fan-out bundle going on without a failed branch (decider version 7).
const PARTIAL: &str = "fan_out_partial = true";

/// The pending call of `agent` in `run`.
fn call_of(run: &History, agent: &str) -> String {
    run.state
        .pending_requests()
        .iter()
        .find(|r| r.target_agent == agent)
        .map(|r| r.request_id.to_string())
        .expect("a pending call")
}

/// `agent`'s branch crashes until the ladder gives up (retry, then escalate).
fn crash_until_given_up(run: &mut History, agent: &str) {
    let first = call_of(run, agent);
    run.when(crash().to(&first)).then_kinds(&[
        "agent.call_failed",
        "policy.decided",
        "agent.call_scheduled",
    ]);
    let second = call_of(run, agent);
    run.when(crash().to(&second));
}

#[test]
pub(crate) fn a_failed_branch_is_a_gap_the_join_goes_on_without() {
    let mut run = fanned_out_with("human", PARTIAL);
    run.when(branch("left", Confidence::High, json!({"v": 1})))
        .then_kinds(&["agent.responded", "handoff.allowed", "output.held"]);
    crash_until_given_up(&mut run, "right");
    run.then_kinds(&[
        "agent.call_failed",
        "policy.decided",
        "fanout.branch_failed",
        "fanout.joined",
        "handoff.allowed",
        "agent.call_scheduled",
    ])
    .then(|events| {
        let RunEvent::FanoutBranchFailed { gap, .. } = &events[2] else {
            panic!("fanout.branch_failed");
        };
        assert_eq!(gap.agent, "right");
        assert_eq!(gap.error_code, "AGENT_CRASHED");
        assert_eq!(gap.attempts, 2);
        let RunEvent::HandoffAllowed { decision, .. } = &events[4] else {
            panic!("the gap crosses the gate");
        };
        assert_eq!(&*decision.rule_id, "multi_agent_handoffs.fan_out_partial");
    });
    assert_eq!(run.state.status, RunStatus::Running);
    let sink = run.pending();
    assert_eq!(sink.target_agent, "sink");
    assert_eq!(sink.decision_inputs.len(), 2, "{:?}", sink.decision_inputs);
    assert_eq!(*sink.decision_inputs[0].payload, json!({"v": 1}));
    let gap = &sink.decision_inputs[1];
    assert_eq!(gap.source_agent, "right");
    assert_eq!(gap.output_type, "branch_failed");
    assert_eq!(gap.payload["error_class"], "agent_error");
    assert_eq!(gap.payload["error_message"], "exit code 3");
    run.replays();
}

#[test]
pub(crate) fn a_branch_that_fails_first_waits_for_the_others_then_the_join_tells_the_gap() {
    let mut run = fanned_out_with("human", PARTIAL);
    crash_until_given_up(&mut run, "right");
    run.then_kinds(&[
        "agent.call_failed",
        "policy.decided",
        "fanout.branch_failed",
    ]);
    assert_eq!(run.state.status, RunStatus::Running);
    assert_eq!(run.pending().target_agent, "left", "left still runs");
    run.when(branch("left", Confidence::High, json!({"v": 1})))
        .then_kinds(&[
            "agent.responded",
            "handoff.allowed",
            "fanout.joined",
            "handoff.allowed",
            "agent.call_scheduled",
        ]);
    let sink = run.pending();
    assert_eq!(sink.target_agent, "sink");
    assert_eq!(sink.decision_inputs[1].output_type, "branch_failed");
    assert!(run.state.gaps.is_empty(), "the join settles the gap");
    run.replays();
}

#[test]
pub(crate) fn without_fan_out_partial_a_failed_branch_goes_up_the_ladder() {
    let mut run = fanned_out_with("human", "");
    run.when(branch("left", Confidence::High, json!({"v": 1})));
    crash_until_given_up(&mut run, "right");
    run.then_kinds(&["agent.call_failed", "policy.decided", "human.escalated"]);
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    run.replays();
}

#[test]
pub(crate) fn when_no_branch_is_left_to_go_on_with_the_ladder_decides() {
    let mut run = fanned_out_with("human", PARTIAL);
    crash_until_given_up(&mut run, "right");
    run.then_kinds(&[
        "agent.call_failed",
        "policy.decided",
        "fanout.branch_failed",
    ]);
    crash_until_given_up(&mut run, "left");
    run.then_kinds(&["agent.call_failed", "policy.decided", "human.escalated"]);
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    run.replays();
}

/// The conflict of left's `{"v": "left"}` (low confidence) and right's `{"v": "right"}`
/// (high) over sink's verdict, settled as `settled_by` (a person: who, and the ticket),
/// right's output kept.
fn right_kept(settled_by: Settlement, person: Option<(&str, &str)>) -> SettledConflict {
    let output = |agent: &str, confidence, kept| ConflictingOutput {
        source_agent: agent.into(),
        confidence_level: Some(confidence),
        kept,
        payload: Some(Arc::new(json!({ "v": agent }))),
    };
    SettledConflict {
        output_type: "verdict".into(),
        receiver: "sink".into(),
        settled_by,
        decided_by: person.map(|(by, _)| by.to_owned()),
        ticket: person.map(|(_, ticket)| ticket.to_owned()),
        outputs: vec![
            output("left", Confidence::Low, false),
            output("right", Confidence::High, true),
        ],
    }
}

/// Sink's decision input when `note` settled the conflict: right's output, labelled.
fn kept_input(note: &SettledConflict) -> DecisionInput {
    DecisionInput {
        confidence_level: Some(Confidence::High),
        conflict: Some(note.clone()),
        ..DecisionInput::new("right", "verdict", Arc::new(json!({"v": "right"})))
    }
}

/// Sink finishes; the run's completion reports `note` without the outputs' content.
fn sink_finishes_reporting(run: &mut History, note: &SettledConflict) {
    run.when(
        respond(vec![Action::Finish {
            output: json!({"verdict": "right"}),
        }])
        .by("sink"),
    )
    .then(|events| {
        assert_eq!(
            events.last(),
            Some(&RunEvent::RunCompleted {
                output: json!({"verdict": "right"}),
                conflicts: vec![note.without_payloads()],
            })
        );
    });
    let reported = &run.state.settled_conflicts()[0];
    assert_eq!(reported, note, "the state keeps the note whole");
}

#[test]
pub(crate) fn the_aggregator_is_told_of_a_conflict_settled_by_confidence() {
    let mut run = fanned_out("prefer_higher_confidence");
    run.when(branch("left", Confidence::Low, json!({"v": "left"})));
    let note = right_kept(Settlement::HigherConfidence, None);
    run.when(branch("right", Confidence::High, json!({"v": "right"})))
        .then(|events| {
            let joined = events
                .iter()
                .find_map(|e| match e {
                    RunEvent::FanoutJoined { deliveries, .. } => Some(deliveries),
                    _ => None,
                })
                .expect("joined");
            assert_eq!(joined.len(), 1);
            assert_eq!(joined[0].conflict.as_ref(), Some(&note));
        });
    assert_eq!(run.pending().decision_inputs, vec![kept_input(&note)]);
    sink_finishes_reporting(&mut run, &note);
    run.replays();
}

#[test]
pub(crate) fn the_aggregator_is_told_who_settled_a_conflict() {
    let mut run = fanned_out("human");
    run.when(branch("left", Confidence::Low, json!({"v": "left"})));
    run.when(branch("right", Confidence::High, json!({"v": "right"})));
    run.when(
        approve("ticket-1")
            .by("dana")
            .because("right is current")
            .choice(2)
            .at(2),
    );
    let note = right_kept(Settlement::Person, Some(("dana", "ticket-1")));
    assert_eq!(run.pending().decision_inputs, vec![kept_input(&note)]);
    sink_finishes_reporting(&mut run, &note);
    run.replays();
}

#[test]
pub(crate) fn a_run_of_version_13_delivers_the_kept_output_alone() {
    let mut run = fanned_out_recorded_by("prefer_higher_confidence", "", 13);
    run.when(branch("left", Confidence::Low, json!({"v": "left"})));
    run.when(branch("right", Confidence::High, json!({"v": "right"})));
    assert_eq!(
        run.pending().decision_inputs,
        vec![DecisionInput::new(
            "right",
            "verdict",
            Arc::new(json!({"v": "right"}))
        )]
    );
    run.when(
        respond(vec![Action::Finish {
            output: json!({"verdict": "right"}),
        }])
        .by("sink"),
    )
    .then(|events| {
        assert!(matches!(
            events.last(),
            Some(RunEvent::RunCompleted { conflicts, .. }) if conflicts.is_empty()
        ));
    });
    run.replays();
}
