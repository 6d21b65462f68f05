//! `decide/reassign.rs`: a boundary violation hands the task to the agent the violating
//! agent's entry names in `reassign_to` (decider version 15). Given a run whose entry
//! agent `a` (its task reassigned to `a2`) got `{"x": 1}` from `external`.

use serde_json::json;

use super::*;
use crate::{RunEvent, RunStatus};
use docket_protocol::Action;

const REASSIGNING: &str = r#"
bundle = { id = "reassign" }
[[agents]]
id = "external"
[[agents]]
id = "a"
allowed_tools = ["Read"]
reassign_to = "a2"
[[agents]]
id = "a2"
allowed_tools = ["Read"]
[[agents]]
id = "b"

[interactions]
allowed = [
  { from = "external", to = "a" }, { from = "external", to = "a2" },
  { from = "a", to = "b" }, { from = "a2", to = "b" }, { from = "b", to = "external" },
]

[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// `run-1` under the reassigning bundle, recorded by decider `version`; a2 has an
/// executor.
fn reassigning(version: u32) -> History {
    started_under(REASSIGNING, "r.toml", |run| {
        run.decider_version = version;
        run.workflow.agents.insert("a2".into(), in_process());
    })
}

/// An answer that reports a tool call outside the agent's allowed tools.
fn violating() -> Response {
    respond(vec![handoff("b", "out", json!({"k": 1}))]).tool_call("Bash", "curl evil")
}

#[test]
pub(crate) fn a_boundary_violation_reassigns_the_task_with_the_same_input() {
    let mut run = reassigning(DECIDER_VERSION);
    let first = run.pending();
    run.when(violating())
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "policy.decided",
            "task.reassigned",
            "handoff.allowed",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let RunEvent::PolicyDecided { decision, .. } = &events[2] else {
                panic!("the reassignment decided");
            };
            assert_eq!(&*decision.rule_id, "agents.a.reassign_to");
            assert_eq!(decision.chain.len(), 2, "{:?}", decision.chain);
            let RunEvent::TaskReassigned {
                request_id,
                from,
                to,
                rule_id,
                error_code,
                error_class,
                ..
            } = &events[3]
            else {
                panic!("task.reassigned");
            };
            assert_eq!(request_id, &first.request_id);
            assert_eq!((from.as_str(), to.as_str()), ("a", "a2"));
            assert_eq!(rule_id, "agents.a.reassign_to");
            assert_eq!(
                (error_code.as_str(), error_class.as_str()),
                ("BOUNDARY_VIOLATION", "boundary_violation")
            );
            let RunEvent::HandoffAllowed { decision, .. } = &events[4] else {
                panic!("the input crosses the gate");
            };
            assert_eq!(&*decision.rule_id, "agents.a.reassign_to");
        });
    let taken = run.pending();
    assert_eq!(taken.target_agent, "a2");
    assert_eq!(taken.attempt, 1);
    assert_eq!(taken.source_agent, first.source_agent);
    assert_eq!(taken.decision_inputs.len(), first.decision_inputs.len());
    assert_eq!(
        taken.decision_inputs[0].payload,
        first.decision_inputs[0].payload
    );
    assert_eq!(taken.context["reassigned"]["agent"], "a");
    assert_eq!(
        taken.context["reassigned"]["error_code"],
        "BOUNDARY_VIOLATION"
    );
    // The rejected output was never delivered: b has not been called.
    assert!(run.history().handoffs().iter().all(|h| h.to != "b"));
    // The new agent's answer goes on.
    run.when(respond(vec![handoff("b", "out", json!({"k": 2}))]).by("a2"))
        .then_kinds(&["agent.responded", "handoff.allowed", "agent.call_scheduled"]);
    assert_eq!(run.pending().target_agent, "b");
    run.replays();
}

#[test]
pub(crate) fn a_reassigned_task_is_not_reassigned_again_its_violations_climb_the_ladder() {
    let mut run = reassigning(DECIDER_VERSION);
    run.when(violating());
    // a2 violates too: retried (the ladder), not sent back to a.
    run.when(violating().by("a2")).then_kinds(&[
        "agent.responded",
        "policy.decided",
        "policy.decided",
        "agent.call_scheduled",
    ]);
    let retry = run.pending();
    assert_eq!((retry.target_agent.as_str(), retry.attempt), ("a2", 2));
    assert!(
        retry.context.contains_key("reassigned"),
        "the retry keeps the note"
    );
    run.when(violating().by("a2"))
        .then(|events| assert!(!kinds(events).contains(&"task.reassigned")));
    assert_eq!(run.state.status, RunStatus::WaitingForHuman, "escalated");
    run.replays();
}

#[test]
pub(crate) fn an_agents_own_boundary_code_reassigns_other_failures_retry() {
    let mut run = reassigning(DECIDER_VERSION);
    run.when(fail("SCOPE_POLICY_BREACH", "asked outside its scope"))
        .then_kinds(&[
            "agent.call_failed",
            "policy.decided",
            "task.reassigned",
            "handoff.allowed",
            "agent.call_scheduled",
        ]);
    assert_eq!(run.pending().target_agent, "a2");
    let mut crashed = reassigning(DECIDER_VERSION);
    crashed.when(crash()).then_kinds(&[
        "agent.call_failed",
        "policy.decided",
        "agent.call_scheduled",
    ]);
    assert_eq!(crashed.pending().target_agent, "a");
    run.replays();
}

#[test]
pub(crate) fn runs_of_version_14_retry_the_violating_agent() {
    let mut run = reassigning(14);
    run.when(violating()).then_kinds(&[
        "agent.responded",
        "policy.decided",
        "policy.decided",
        "agent.call_scheduled",
    ]);
    assert_eq!(run.pending().target_agent, "a");
    run.replays();
}

#[test]
pub(crate) fn a_task_whose_new_agent_has_no_executor_climbs_the_ladder() {
    let mut run = started_under(REASSIGNING, "r.toml", |_| {});
    run.when(violating());
    assert_eq!(run.pending().target_agent, "a");
}

#[test]
fn reassign_to_must_name_another_agent_that_may_receive_the_same_input() {
    let problems = |src: &str| match PolicyBundle::from_toml_str(src, "r.toml") {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    };
    assert_eq!(problems(REASSIGNING), "");
    let unknown = problems(&REASSIGNING.replace("reassign_to = \"a2\"", "reassign_to = \"zz\""));
    assert!(unknown.contains("unknown agent `zz`"), "{unknown}");
    let itself = problems(&REASSIGNING.replace("reassign_to = \"a2\"", "reassign_to = \"a\""));
    assert!(itself.contains("cannot be reassigned"), "{itself}");
    let no_edge = problems(&REASSIGNING.replace(", { from = \"external\", to = \"a2\" }", ""));
    assert!(
        no_edge.contains("no allowed edge external → a2"),
        "{no_edge}"
    );
    // Unset, it is left out of the canonical form (the golden logs keep their hashes).
    let plain =
        PolicyBundle::from_toml_str(&REASSIGNING.replace("reassign_to = \"a2\"\n", ""), "r.toml")
            .expect("valid");
    assert!(!String::from_utf8_lossy(&plain.canonical_bytes()).contains("reassign_to"));
}

#[test]
fn a_reported_tool_call_allowed_is_no_violation() {
    let mut run = reassigning(DECIDER_VERSION);
    run.when(respond(vec![Action::Finish { output: json!({}) }]).tool_call("Read", "x"))
        .then(|events| assert!(!kinds(events).contains(&"task.reassigned")));
}
