//! The software-team example (examples/software-team, seed 002) run through the binary:
//! work flows only through the orchestrator's tasks, every specialist output is risk
//! classified, a tool call matching a deny pattern is refused before it runs, two
//! specialists' conflicting outputs are decided by a person with the loser archived, and
//! a failing specialist goes retry → a person → block. Every run replays and exports.

use std::path::Path;
use std::sync::OnceLock;

use docket_tests::{
    docket_on, events_of_kind, example_agents_built, exit_code, replays_and_exports, run_events,
    workspace_root,
};

fn team_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| example_agents_built("docket-example-software-team"));
}

fn run_team(data: &Path, input: &str, id: &str) -> i32 {
    team_built();
    let example = workspace_root().join("examples/software-team");
    let out = docket_on(
        data,
        &[
            "run",
            example.join("workflow.toml").to_str().unwrap(),
            "--input",
            example.join(input).to_str().unwrap(),
            "--run-id",
            id,
        ],
    );
    exit_code(&out)
}

fn approve(data: &Path, run: &str, ticket: &str, extra: &[&str]) -> i32 {
    let mut args = vec![
        "approve", run, ticket, "--by", "lead", "--reason", "decided",
    ];
    args.extend_from_slice(extra);
    exit_code(&docket_on(data, &args))
}

#[test]
fn a_feature_goes_through_tasks_checks_and_a_human_choice() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Backend and frontend disagree on the API: the run waits for a person.
    assert_eq!(run_team(&data, "input.json", "signup"), 3);
    let events = run_events(&data, "signup");
    let conflict = events_of_kind(&events, "output.conflict_detected");
    assert_eq!(conflict.len(), 1, "{conflict:?}");
    assert_eq!(approve(&data, "signup", "ticket-1", &["--choose", "2"]), 0);
    let events = run_events(&data, "signup");

    // Only the orchestrator hands work on, always as a task with its restrictions.
    for handoff in events_of_kind(&events, "handoff.allowed") {
        let p = &handoff["payload"];
        if p["kind"] == "context" || p["from"] == "tools" || p["from"] == "human" {
            continue;
        }
        assert!(
            p["from"] == "orchestrator" || p["to"] == "orchestrator" || p["from"] == "external",
            "{p}"
        );
    }
    let database_call = events_of_kind(&events, "agent.call_scheduled")
        .into_iter()
        .map(|e| &e["payload"]["request"])
        .find(|r| r["target_agent"] == "database")
        .expect("database was given a task");
    assert_eq!(database_call["task"]["id"], "T1");
    assert_eq!(
        database_call["task"]["denied_tools"][0],
        "Bash(psql * DROP *)"
    );

    // Every specialist output went through the risk classifier.
    let classified = events_of_kind(&events, "risk.classified");
    assert!(classified.len() >= 6, "{}", classified.len());
    assert!(classified.iter().all(|e| e["payload"]["verdict"] == "SAFE"));

    // backend's `rm -rf target/` was refused before it ran; its `cargo build` ran.
    let denied = events_of_kind(&events, "tool.denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["payload"]["rule_id"], "deny-rm-rf");
    assert_eq!(denied[0]["payload"]["arguments"], "rm -rf target/");
    let scheduled = events_of_kind(&events, "tool.call_scheduled");
    assert_eq!(
        scheduled.len(),
        1,
        "only the allowed call reached the executor"
    );
    assert_eq!(
        scheduled[0]["payload"]["request"]["arguments"],
        "cargo build"
    );

    // The person chose backend's REST contract; frontend's is archived, not deleted.
    let archived = events_of_kind(&events, "output.archived");
    assert_eq!(archived.len(), 1);
    assert_eq!(archived[0]["payload"]["delivery"]["from"], "frontend");
    let completed = events_of_kind(&events, "run.completed");
    assert_eq!(completed.len(), 1);
    replays_and_exports(&data, "signup");
}

#[test]
fn a_failing_specialist_is_retried_then_escalated_then_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert_eq!(run_team(&data, "flaky.json", "flaky"), 3);
    assert_eq!(approve(&data, "flaky", "ticket-1", &["--choose", "2"]), 3);
    // qa failed twice: a retry, then a person is asked.
    let events = run_events(&data, "flaky");
    let rungs: Vec<&str> = events_of_kind(&events, "policy.decided")
        .into_iter()
        .filter(|e| e["payload"]["decision"]["kind"] == "escalation")
        .map(|e| e["payload"]["decision"]["rule_id"].as_str().unwrap())
        .collect();
    assert_eq!(rungs, ["retry", "escalate"]);
    // The person lets it try once more; the third failure blocks the workflow.
    assert_eq!(approve(&data, "flaky", "ticket-2", &[]), 4);
    let events = run_events(&data, "flaky");
    let blocked = events_of_kind(&events, "run.blocked");
    assert_eq!(blocked.len(), 1);
    let message = blocked[0]["payload"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    let error = &blocked[0]["payload"]["error"];
    assert_eq!(error["agent"], "qa", "{error}");
    assert_eq!(error["details"]["code"], "TEST_SUITE_FAILED", "{error}");
    assert!(
        message.ends_with(
            "(last error TEST_SUITE_FAILED: signup_rejects_duplicate_email failed: expected 409, got 500)"
        ),
        "{error}"
    );
    replays_and_exports(&data, "flaky");
}

/// The run's output (`run.completed`), as the README's "What a run must output" states it.
fn output(data: &Path, run: &str) -> serde_json::Value {
    let events = run_events(data, run);
    let completed = events_of_kind(&events, "run.completed");
    assert_eq!(completed.len(), 1, "{run} completed");
    completed[0]["payload"]["output"].clone()
}

#[test]
fn the_report_names_the_api_contract_the_person_kept() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let kept = [
        (
            "1",
            "GraphQL: mutation signUp(email, password) { id }",
            "frontend",
        ),
        (
            "2",
            "REST: POST /users {email, password} -> 201 {id}",
            "backend",
        ),
    ];
    for (choice, contract, proposed_by) in kept {
        let run = format!("signup-{proposed_by}");
        assert_eq!(run_team(&data, "input.json", &run), 3);
        assert_eq!(approve(&data, &run, "ticket-1", &["--choose", choice]), 0);
        assert_eq!(
            output(&data, &run),
            serde_json::json!({
                "feature": "user signup",
                "tasks": ["T1 migration", "T2 API", "T3 form", "T4 tests", "T5 docs"],
                "api": { "contract": contract, "proposed_by": proposed_by },
                "docs": format!("docs/api/users.md: {contract}"),
            }),
            "--choose {choice}"
        );
    }
}
