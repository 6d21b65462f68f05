//! `decide/fan_out.rs`: authority settles a fan-out's conflict before confidence, when the
//! bundle lets it (`authority_settles_conflicts`, decider version 15). Given the fan-out
//! bundle whose hub handed the same job to left and right.

use serde_json::{Value, json};

use super::*;
use crate::{RunEvent, RunStatus};
use docket_protocol::{Confidence, Settlement};

/// `agent`'s branch answers with `confidence`, handing `payload` to sink.
fn branch(agent: &str, confidence: Confidence, payload: Value) -> Response {
    respond(vec![handoff("sink", "verdict", payload)])
        .by(agent)
        .confidence(confidence)
        .at(1)
}

/// The fan-out bundle with left at `left` authority and right at `right`, authority
/// settling conflicts when `settles`, recorded by decider `version`.
fn ranked(left: &str, right: &str, settles: bool, version: u32) -> History {
    let extra = if settles {
        "authority_settles_conflicts = true"
    } else {
        ""
    };
    let (_, src) = fanout_bundle_with("prefer_higher_confidence", extra);
    let src = src
        .replace(
            "{ id = \"left\" }",
            &format!("{{ id = \"left\", authority = \"{left}\" }}"),
        )
        .replace(
            "{ id = \"right\" }",
            &format!("{{ id = \"right\", authority = \"{right}\" }}"),
        );
    fanned_out_under(&src, version)
}

#[test]
pub(crate) fn a_higher_authority_overrides_a_lower_ones_output_whatever_its_confidence() {
    let mut run = ranked("orchestrator", "specialist", true, DECIDER_VERSION);
    run.when(branch("left", Confidence::Low, json!({"v": "left"})));
    run.when(branch("right", Confidence::High, json!({"v": "right"})))
        .then_kinds(&[
            "agent.responded",
            "handoff.allowed",
            "output.conflict_detected",
            "policy.decided",
            "output.archived",
            "fanout.joined",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let RunEvent::ConflictDetected {
                resolution, winner, ..
            } = &events[2]
            else {
                panic!("conflict");
            };
            assert_eq!(
                (resolution.as_str(), *winner),
                ("higher_authority", Some(0))
            );
            let RunEvent::PolicyDecided { decision, .. } = &events[3] else {
                panic!("the override decided");
            };
            assert_eq!(&*decision.rule_id, "agents.left.authority");
            assert!(decision.is_allowed(), "{decision:?}");
            let RunEvent::OutputArchived {
                delivery, reason, ..
            } = &events[4]
            else {
                panic!("archived");
            };
            assert_eq!(*delivery.payload, json!({"v": "right"}));
            assert!(reason.contains("orchestrator over specialist"), "{reason}");
        });
    let sink = run.pending();
    assert_eq!(*sink.decision_inputs[0].payload, json!({"v": "left"}));
    let note = sink.decision_inputs[0]
        .conflict
        .clone()
        .expect("the aggregator is told");
    assert_eq!(note.settled_by, Settlement::HigherAuthority);
    assert_eq!(note.outputs.len(), 2);
    assert!(note.outputs[0].kept && !note.outputs[1].kept);
    run.replays();
}

#[test]
pub(crate) fn peers_do_not_override_each_other_confidence_then_a_person_decides() {
    let mut run = ranked("orchestrator", "orchestrator", true, DECIDER_VERSION);
    run.when(branch("left", Confidence::Low, json!({"v": "left"})));
    run.when(branch("right", Confidence::High, json!({"v": "right"})))
        .then(|events| {
            let RunEvent::ConflictDetected { resolution, .. } = &events[2] else {
                panic!("conflict");
            };
            assert_eq!(resolution, "prefer_higher_confidence");
        });
    let note = run.pending().decision_inputs[0]
        .conflict
        .clone()
        .expect("told");
    assert_eq!(note.settled_by, Settlement::HigherConfidence);
    // Equal confidence between peers goes to a person.
    let mut tied = ranked("orchestrator", "orchestrator", true, DECIDER_VERSION);
    tied.when(branch("left", Confidence::High, json!({"v": "left"})));
    tied.when(branch("right", Confidence::High, json!({"v": "right"})));
    assert_eq!(tied.state.status, RunStatus::WaitingForHuman);
    tied.replays();
}

#[test]
pub(crate) fn authority_settles_nothing_unless_the_bundle_says_or_before_version_15() {
    for run in [
        ranked("orchestrator", "specialist", false, DECIDER_VERSION),
        ranked("orchestrator", "specialist", true, 14),
    ] {
        let mut run = run;
        run.when(branch("left", Confidence::Low, json!({"v": "left"})));
        run.when(branch("right", Confidence::High, json!({"v": "right"})))
            .then(|events| assert!(!kinds(events).contains(&"policy.decided")));
        assert_eq!(
            *run.pending().decision_inputs[0].payload,
            json!({"v": "right"}),
            "the higher confidence wins as before"
        );
        run.replays();
    }
}

#[test]
fn the_setting_is_left_out_of_the_hash_when_false() {
    let (plain, _) = fanout_bundle_with("human", "");
    let (off, _) = fanout_bundle_with("human", "authority_settles_conflicts = false");
    let (on, _) = fanout_bundle_with("human", "authority_settles_conflicts = true");
    assert_eq!(plain.hash(), off.hash());
    assert_ne!(plain.hash(), on.hash());
}
