//! `decide/response.rs`: an agent's answer and its actions: finish, escalate, tool calls,
//! capability requests and their locks. (A finish that completes the run is in
//! `handoff.rs`'s pipeline.)

use serde_json::json;

use super::*;
use crate::RunEvent;
use crate::protocol::Action;

#[test]
pub(crate) fn escalate_action_waits_and_approval_proceeds() {
    let mut run = started();
    run.when(respond(vec![
        Action::Escalate {
            reason: "unsure".into(),
        },
        handoff("b", "ab", json!({})),
    ]))
    .then_kinds(&["agent.responded", "human.escalated"]);
    assert!(run.state.pending.is_empty());
    run.when(approve("ticket-1").because("fine").at(3_000))
        .then_kinds(&["human.decided", "handoff.allowed", "agent.call_scheduled"]);
    assert_eq!(run.state.pending_requests()[0].target_agent, "b");
}

#[test]
pub(crate) fn denied_tool_call_is_a_boundary_violation() {
    let mut run = started();
    run.when(respond(vec![handoff("b", "ab", json!({}))]).tool_call("Bash", "rm -rf /"))
        // The tool decision, then the retry path: no handoff was accepted.
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "policy.decided",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
                panic!("tool decision");
            };
            assert_eq!(decision.rule_id.as_ref(), "deny-rm");
        });
    assert_eq!(run.state.pending_requests()[0].target_agent, "a");
}

#[test]
pub(crate) fn guardrail_3_lock_blocks_capability_requests() {
    let mut run = started();
    run.when(respond(vec![handoff("b", "ab", json!({}))]));
    run.when(respond(vec![handoff("c", "bc", json!({}))]));
    run.when(respond(vec![Action::RequestCapability {
        target_agent: "b".into(),
        capability_code: "questions".into(),
        inputs: serde_json::Map::new(),
    }]))
    .then_kinds(&[
        "agent.responded",
        "policy.decided",
        "episode.stopped",
        "run.blocked",
    ])
    .then(|events| {
        let RunEvent::RunBlocked { rule_id, .. } = &events[3] else {
            panic!("blocked");
        };
        assert_eq!(rule_id, "lock");
    });
}

#[test]
pub(crate) fn allowed_capability_answer_returns_to_the_asker() {
    let mut run = started();
    let mut inputs = serde_json::Map::new();
    inputs.insert("topics".into(), json!(["t"]));
    run.when(respond(vec![Action::RequestCapability {
        target_agent: "b".into(),
        capability_code: "questions".into(),
        inputs,
    }]));
    assert_eq!(run.state.pending_requests()[0].target_agent, "b");
    run.when(respond(vec![Action::Finish {
        output: json!({"q": 1}),
    }]));
    let back = run.state.pending_requests()[0].clone();
    assert_eq!(back.target_agent, "a");
    let last = back.decision_inputs.last().expect("the answer");
    assert_eq!(
        (last.source_agent.as_str(), last.output_type.as_str()),
        ("b", "questions")
    );
    assert_eq!(last.payload, json!({"q": 1}));
}
