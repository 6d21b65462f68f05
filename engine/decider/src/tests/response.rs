//! `decide/response.rs`: an agent's answer and its actions: finish, escalate, tool calls.
//! (A finish that completes the run is in `handoff.rs`'s pipeline; capability requests
//! are in `capability.rs`.)

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
            choices: Vec::new(),
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
