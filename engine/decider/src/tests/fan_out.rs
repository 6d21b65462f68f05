//! `decide/fan_out.rs`: parallel branches, their held outputs, conflicts and the join.

use serde_json::{Value, json};

use super::*;
use crate::protocol::Confidence;
use crate::{Rejection, RunEvent, RunStatus};

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
    assert_eq!(sink.decision_inputs[0].payload, json!({"v": "right"}));
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
    assert_eq!(sink.decision_inputs[0].payload, json!({"v": "right"}));
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
