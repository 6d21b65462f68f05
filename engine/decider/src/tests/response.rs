//! `decide/response.rs`: an agent's answer and its actions: finish, escalate, tool calls.
//! (A finish that completes the run is in `handoff.rs`'s pipeline; capability requests
//! are in `capability.rs`.)

use serde_json::json;

use super::*;
use crate::RunEvent;
use docket_protocol::Action;

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

/// `run-1` under the test bundle with `from → to` refusing partial outputs (edge
/// `accept_partial = false`), or with `interactions.partial_outputs = "refuse"` when
/// `edge` is None, recorded by `version`.
fn refusing_partial(edge: Option<&str>) -> History {
    let src = match edge {
        Some(edge) => BUNDLE.replace(edge, &edge.replace(" }", ", accept_partial = false }")),
        None => BUNDLE.replace(
            "flow_order = [",
            "partial_outputs = \"refuse\"\nflow_order = [",
        ),
    };
    assert_ne!(src, BUNDLE);
    started_under(&src, "t.toml", |_| {})
}

fn partial(actions: Vec<docket_protocol::Action>) -> Response {
    respond(actions).status(docket_protocol::ResponseStatus::Partial)
}

#[test]
pub(crate) fn a_partial_answer_across_a_refusing_edge_fails_the_agent() {
    let mut run = refusing_partial(Some("{ from = \"a\", to = \"b\" }"));
    let crossed = run.history().handoffs().len();
    run.when(partial(vec![handoff("b", "out", json!({"k": 1}))]))
        .then_kinds(&["agent.responded", "policy.decided", "agent.call_scheduled"]);
    let retry = run.pending();
    assert_eq!(retry.target_agent, "a");
    assert_eq!(retry.attempt, 2);
    let note = &retry.context["previous_attempt"];
    assert_eq!(note["error_code"], "PARTIAL_OUTPUT_REFUSED");
    assert_eq!(note["error_class"], "partial_output");
    let message = note["error_message"].as_str().unwrap_or_default();
    assert!(message.contains("allow:a->b"), "{message}");
    assert_eq!(run.history().handoffs().len(), crossed, "nothing crossed");
    // A complete answer on the retry goes on.
    run.when(respond(vec![handoff("b", "out", json!({"k": 1}))]));
    assert_eq!(run.pending().target_agent, "b");
    run.replays();
}

#[test]
pub(crate) fn a_partial_answer_goes_on_where_the_edge_accepts_it() {
    // a → b refuses; b → c keeps the default (accept): b's PARTIAL answer goes on.
    let mut run = refusing_partial(Some("{ from = \"a\", to = \"b\" }"));
    run.when(respond(vec![handoff("b", "out", json!({"k": 1}))]));
    // (c also gets a's output as read-only context: the second `handoff.allowed`.)
    run.when(partial(vec![handoff("c", "out", json!({"keep": 1}))]))
        .then_kinds(&[
            "agent.responded",
            "handoff.allowed",
            "handoff.allowed",
            "agent.call_scheduled",
        ]);
    assert_eq!(run.pending().target_agent, "c");
    run.replays();
}

#[test]
pub(crate) fn a_bundle_refusing_partial_outputs_refuses_a_partial_finish_at_the_exit() {
    let mut run = refusing_partial(None);
    run.when(respond(vec![handoff("b", "out", json!({"k": 1}))]));
    run.when(respond(vec![handoff("c", "out", json!({"keep": 1}))]));
    run.when(
        respond(vec![docket_protocol::Action::Finish {
            output: json!({"keep": 2}),
        }])
        .status(docket_protocol::ResponseStatus::Timeout),
    )
    .then_kinds(&["agent.responded", "policy.decided", "agent.call_scheduled"]);
    let note = &run.pending().context["previous_attempt"];
    assert_eq!(note["error_code"], "PARTIAL_OUTPUT_REFUSED");
    assert!(
        note["error_message"]
            .as_str()
            .unwrap_or_default()
            .contains("c → external refuses partial outputs (rule interactions.partial_outputs)"),
        "{note}"
    );
    run.replays();
}
