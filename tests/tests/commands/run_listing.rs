//! Listing runs without folding them (issue 5 point 7): `run_summaries()` and the run
//! list's waiting runs (`docket_runtime::testing::waiting_runs`) read event kinds only,
//! and must agree with the full fold (`docket_runtime::testing::runs`) on
//! every run's status, size and workflow, whatever state the runs are in; `docket runs
//! [--waiting]` prints them.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use docket_decider::RunStatus;
use docket_decider::WorkflowSpec;
use docket_decider::{Action, AgentRequest, AgentResponse, Confidence};
use docket_runtime::HumanDecision;
use docket_runtime::InProcessExecutor;
use docket_runtime::Runtime;
use docket_runtime::Workflow;
use docket_store::{EmbeddedStore, StoreConfig};

const BUNDLE: &str = r#"
bundle = { id = "listing" }
agents = [{ id = "external" }, { id = "worker" }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const WORKFLOW: &str = r#"
name = "listing"
policy = "listing.toml"
entry = "worker"
[agents.worker]
in_process = true
"#;

fn workflow() -> Workflow {
    Workflow {
        spec: WorkflowSpec::parse(WORKFLOW, Path::new("listing.workflow.toml"))
            .expect("workflow parses"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "listing.toml".into(),
    }
}

/// Escalates when the input says so (`"escalate": n` asks for n sign-offs in one answer),
/// answers an error when it says `"fail": true`, and finishes otherwise.
fn agent() -> Arc<InProcessExecutor> {
    Arc::new(InProcessExecutor::new(|r: &AgentRequest| {
        let input = r
            .decision_inputs
            .first()
            .map(|i| i.payload.clone())
            .unwrap_or_default();
        if input["fail"] == true {
            return AgentResponse::error(r.request_id.clone(), "BOOM", "asked to fail");
        }
        let sign_offs = input["escalate"].as_u64().unwrap_or(0);
        let mut actions: Vec<Action> = (0..sign_offs)
            .map(|n| Action::Escalate {
                reason: format!("sign-off {n}"),
                choices: Vec::new(),
            })
            .collect();
        actions.push(Action::Finish {
            output: json!({ "done": true }),
        });
        AgentResponse::success(r.request_id.clone(), Confidence::High, actions)
    }))
}

#[tokio::test]
async fn summaries_agree_with_the_full_fold_and_waiting_runs_lists_only_open_tickets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store opens");
    let runtime = Runtime::new(store.clone());
    runtime.register_agent("worker", agent());
    let wf = workflow();
    let start = |id: &str, input: serde_json::Value| {
        let runtime = runtime.clone();
        let wf = wf.clone();
        let id = id.to_owned();
        async move {
            runtime
                .start(&wf, input, Some(id.into()))
                .await
                .expect("starts")
        }
    };

    assert_eq!(
        start("r-done", json!({})).await.state.status(),
        RunStatus::Completed
    );
    // A failing agent escalates (approve to retry); denying the retry stops the run.
    let failing = start("r-failed", json!({ "fail": true })).await;
    assert_eq!(failing.state.status(), RunStatus::WaitingForHuman);
    let failed = runtime
        .decide_ticket(
            &"r-failed".into(),
            "ticket-1",
            HumanDecision::deny("ana", "stop"),
        )
        .await
        .expect("denies the retry");
    assert!(
        failed.state.status().is_final(),
        "{:?}",
        failed.state.status()
    );
    assert_eq!(
        start("r-wait", json!({ "escalate": 1 }))
            .await
            .state
            .status(),
        RunStatus::WaitingForHuman
    );
    assert_eq!(
        start("r-two", json!({ "escalate": 2 }))
            .await
            .state
            .status(),
        RunStatus::WaitingForHuman
    );
    assert_eq!(
        start("r-approved", json!({ "escalate": 1 }))
            .await
            .state
            .status(),
        RunStatus::WaitingForHuman
    );
    let approved = runtime
        .decide_ticket(
            &"r-approved".into(),
            "ticket-1",
            HumanDecision::approve("ana", "ok"),
        )
        .await
        .expect("approves");
    assert_eq!(approved.state.status(), RunStatus::Completed);
    start("r-denied", json!({ "escalate": 1 })).await;
    let denied = runtime
        .decide_ticket(
            &"r-denied".into(),
            "ticket-1",
            HumanDecision::deny("ana", "no"),
        )
        .await
        .expect("denies");
    // Approving the first sign-off reaches the second: still waiting, on ticket-2.
    let half = runtime
        .decide_ticket(
            &"r-two".into(),
            "ticket-1",
            HumanDecision::approve("ana", "ok"),
        )
        .await
        .expect("decides one");
    // A person pauses a waiting run: the listing says so, as the fold does.
    runtime
        .record_pause(&"r-wait".into(), "ana", "look first", true)
        .await
        .expect("pauses")
        .drive()
        .await
        .expect("a paused run's drive stops at once");
    let folded = docket_runtime::testing::runs(&runtime).await.expect("runs");
    let summaries = runtime.run_summaries().await.expect("summaries");
    assert_eq!(
        summaries
            .iter()
            .map(|s| s.run_id.as_str())
            .collect::<Vec<_>>(),
        [
            "r-approved",
            "r-denied",
            "r-done",
            "r-failed",
            "r-two",
            "r-wait"
        ]
    );
    assert_eq!(folded.len(), summaries.len());
    for (full, summary) in folded.iter().zip(&summaries) {
        assert_eq!(full.run_id, summary.run_id);
        assert_eq!(full.state.status(), summary.status, "{}", summary.run_id);
        assert_eq!(full.state.version(), summary.events, "{}", summary.run_id);
        assert_eq!(
            full.state.paused().is_some(),
            summary.paused,
            "{}",
            summary.run_id
        );
        assert_eq!(summary.workflow, "listing");
        let open: Vec<&str> = full
            .state
            .tickets()
            .iter()
            .filter(|(_, t)| t.open)
            .map(|(id, _)| id.as_str())
            .collect();
        assert_eq!(
            open,
            summary
                .open_tickets
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            "{}",
            summary.run_id
        );
    }
    assert_eq!(
        summaries
            .iter()
            .filter(|s| s.paused)
            .map(|s| s.run_id.as_str())
            .collect::<Vec<_>>(),
        ["r-wait"]
    );
    assert_eq!(denied.state.status(), folded[1].state.status());
    assert_eq!(half.state.status(), RunStatus::WaitingForHuman);

    let waiting = docket_runtime::testing::waiting_runs(&runtime)
        .await
        .expect("waiting runs");
    let listed: Vec<(&str, Vec<&str>)> = waiting
        .iter()
        .map(|w| {
            (
                w.run_id.as_str(),
                w.open_tickets.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [("r-two", vec!["ticket-2"]), ("r-wait", vec!["ticket-1"])]
    );
    assert!(
        waiting
            .iter()
            .all(|w| w.status == RunStatus::WaitingForHuman)
    );

    // Approving what the listing names completes the run.
    let done = runtime
        .decide_ticket(
            &"r-wait".into(),
            &waiting[1].open_tickets[0],
            HumanDecision::approve("ana", "ok"),
        )
        .await
        .expect("approves");
    assert_eq!(done.state.status(), RunStatus::Completed);
    let waiting = docket_runtime::testing::waiting_runs(&runtime)
        .await
        .expect("waiting runs");
    assert_eq!(waiting.len(), 1);
}

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

fn docket(data: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(docket_tests::docket_bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("docket runs")
}

/// `docket runs --waiting` lists a waiting run with its ticket, and no longer once the
/// ticket is approved; `docket runs` lists both runs with their statuses.
#[test]
fn docket_runs_waiting_lists_open_tickets_through_the_binary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::write(dir.path().join("policy.toml"), BUNDLE).expect("write bundle");
    let input = dir.path().join("input.json");
    std::fs::write(&input, r#"{"task": "x"}"#).expect("write input");
    let policy = dir.path().join("policy.toml");
    let workflow = |name: &str, agent_args: &[&str]| {
        let path = dir.path().join(format!("{name}.workflow.toml"));
        std::fs::write(
            &path,
            format!(
                "name = {name:?}\npolicy = {policy:?}\nentry = \"worker\"\ninput = {input:?}\n[agents.worker]\ncommand = {TEST_AGENT:?}\nargs = {agent_args:?}\n"
            ),
        )
        .expect("write workflow");
        path
    };
    let waits = workflow("waits", &["escalate_then_finish"]);
    let done = workflow("done", &["finish"]);
    let run = |path: &Path, id: &str| {
        let out = docket(
            &data,
            &["run", path.to_str().expect("utf-8"), "--run-id", id],
        );
        out.status.code()
    };
    assert_eq!(run(&waits, "run-a"), Some(3));
    assert_eq!(run(&done, "run-b"), Some(0));

    let listed = |args: &[&str]| String::from_utf8_lossy(&docket(&data, args).stdout).into_owned();
    let all = listed(&["runs"]);
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 2, "{all}");
    assert!(
        lines[0].starts_with("run-a\twaits\twaiting for a human\t"),
        "{all}"
    );
    assert!(lines[0].ends_with("\tticket-1"), "{all}");
    assert!(lines[1].starts_with("run-b\tdone\tcompleted\t"), "{all}");

    let waiting = listed(&["runs", "--waiting"]);
    assert_eq!(waiting.lines().count(), 1, "{waiting}");
    assert!(waiting.starts_with("run-a\t"), "{waiting}");

    let out = docket(
        &data,
        &[
            "approve", "run-a", "ticket-1", "--by", "ana", "--reason", "ok",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(listed(&["runs", "--waiting"]), "");
}
