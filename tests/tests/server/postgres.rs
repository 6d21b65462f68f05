//! `docket serve` over a PostgreSQL store (docs/postgres.md, "Serving"): two API servers
//! over one database and one `docket worker`. A run started through one server is driven
//! by the worker, its ticket decided through the other, and it completes; both servers
//! see the same runs, events and workers, take the same tokens, and neither drives a run.

use std::process::{Command, Stdio};

use docket_serve::Role;
use docket_store_postgres::TestCluster;
use serde_json::{Value, json};

use crate::served::Served;

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

#[test]
fn two_servers_and_a_worker_share_the_runs_of_one_database() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let url = db.url.as_str();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    // It asks a person to choose, and finishes with the answer.
    let asks = docket_tests::one_agent_workflow(dir.path(), "pg-api", "asks", TEST_AGENT, &["ask"]);
    let a = Served::start_with(&data, &["--store", url]);
    let b = a.beside(&data, &["--store", url]);
    let (operator, approver, viewer) = (
        Some(a.token(Role::Operator)),
        Some(a.token(Role::Approver)),
        Some(a.token(Role::Viewer)),
    );

    // No worker yet: the run is recorded and queued, and stays so.
    let (status, started) = a.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": asks, "input": { "task": "x" }, "run_id": "shared-1" })),
    );
    assert_eq!(
        (status, &started["queued"]),
        (202, &json!(true)),
        "{started}"
    );
    assert_eq!(
        (&started["status"], &started["driven"], &started["events"]),
        (&json!("running"), &json!(false), &json!(3)),
        "{started}"
    );
    let (_, leases) = b.call("GET", "/api/workers", viewer, None);
    assert_eq!(
        leases,
        json!({
            "shared": true,
            "workers": [],
            "leases": [{ "run_id": "shared-1", "queued": true, "epoch": 0, "holder": null, "expires_in_ms": null }],
        })
    );

    let mut worker = Command::new(docket_tests::docket_bin())
        .args(["worker", "--store", url, "--name", "api-worker", "--data"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("docket worker");
    // Driven by the worker to the question, seen through the other server.
    let waiting = b.until("shared-1", |r| r["status"] == "waiting_for_human");
    assert_eq!(
        waiting["open_tickets"][0]["ticket"], "ticket-1",
        "{waiting}"
    );
    let (_, seen) = b.call("GET", "/api/workers", viewer, None);
    let workers = seen["workers"].as_array().expect("workers");
    assert_eq!(workers.len(), 1, "{seen}");
    assert_eq!(
        (&workers[0]["name"], &workers[0]["alive"]),
        (&json!("api-worker"), &json!(true)),
        "{seen}"
    );

    // Decided through the second server: recorded, queued, and driven on by the worker.
    let (status, decided) = b.call(
        "POST",
        "/api/runs/shared-1/tickets/ticket-1/approve",
        approver,
        Some(&json!({ "reason": "the fast one", "choose": 1 })),
    );
    assert_eq!(
        (status, &decided["queued"]),
        (202, &json!(true)),
        "{decided}"
    );
    let done = a.until("shared-1", |r| r["status"] == "completed");
    assert_eq!(
        done["output"],
        json!({ "human_answer": {
            "approved": true,
            "by": "approver-user",
            "choice": "fast",
            "question": "which approach should I follow?",
            "reason": "the fast one",
            "ticket": "ticket-1",
        } }),
        "{done}"
    );
    // The whole log, live from the first server, with the decision by its token's name.
    let events = a.sse("shared-1", None, "run.completed");
    let decision = events
        .iter()
        .find(|(_, kind, _)| kind == "human.decided")
        .expect("the decision");
    assert_eq!(
        (
            &decision.2["payload"]["by"],
            &decision.2["payload"]["reason"]
        ),
        (&json!("approver-user"), &json!("the fast one"))
    );
    let (_, runs) = a.call("GET", "/api/runs", viewer, None);
    assert_eq!(runs["runs"][0]["status"], "completed", "{runs}");

    // Both servers' requests in the one request log of their data directory.
    let log = std::fs::read_to_string(data.join("api/requests.jsonl")).expect("request log");
    let requests: Vec<(String, String, u64)> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .map(|l| {
            (
                l["by"].as_str().unwrap_or_default().to_owned(),
                l["path"].as_str().unwrap_or_default().to_owned(),
                l["status"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        requests,
        vec![
            ("operator-user".to_owned(), "/api/runs".to_owned(), 202),
            (
                "approver-user".to_owned(),
                "/api/runs/shared-1/tickets/ticket-1/approve".to_owned(),
                202
            ),
        ]
    );

    let _ = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    let stopped = worker.wait().expect("the worker stops");
    assert!(stopped.success(), "{stopped:?}");
}

/// A switch flipped through one server is the database's: the other server shows it, and
/// so does `docket kill-switch status` from a machine with another data directory (the
/// switch that workers read before every effect).
#[test]
fn a_kill_switch_flipped_through_one_server_is_seen_by_every_process() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let url = db.url.as_str();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let a = Served::start_with(&data, &["--store", url]);
    let b = a.beside(&data, &["--store", url]);
    let (operator, viewer) = (Some(a.token(Role::Operator)), Some(a.token(Role::Viewer)));

    let (status, flipped) = a.call(
        "POST",
        "/api/kill-switches/api/engage",
        operator,
        Some(&json!({ "reason": "posts going wrong" })),
    );
    assert_eq!(status, 200, "{flipped}");
    assert_eq!(
        (&flipped["flip"]["on"], &flipped["flip"]["changed"]),
        (&json!(true), &json!(true)),
        "{flipped}"
    );
    let (_, seen) = b.call("GET", "/api/kill-switches", viewer, None);
    assert_eq!(
        (
            &seen["engaged"]["api"]["by"],
            &seen["engaged"]["api"]["reason"]
        ),
        (&json!("operator-user"), &json!("posts going wrong")),
        "{seen}"
    );
    assert!(
        !data.join("kill-switches.json").exists(),
        "the data directory holds no switch"
    );
    let out = Command::new(docket_tests::docket_bin())
        .args(["kill-switch", "status", "--store", url, "--data"])
        .arg(dir.path().join("elsewhere"))
        .env_remove("DOCKET_STORE")
        .output()
        .expect("docket kill-switch status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("api engaged by operator-user at ")
            && text.ends_with(": posts going wrong\n"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Released through the other server: gone for everyone, both flips in the history.
    let (status, released) = b.call(
        "POST",
        "/api/kill-switches/api/release",
        operator,
        Some(&json!({ "reason": "fixed" })),
    );
    assert_eq!(status, 200, "{released}");
    let (_, seen) = a.call("GET", "/api/kill-switches", viewer, None);
    assert_eq!(seen["engaged"], json!({}), "{seen}");
    let history: Vec<(&Value, &Value)> = seen["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|f| (&f["on"], &f["reason"]))
        .collect();
    assert_eq!(
        history,
        [
            (&json!(true), &json!("posts going wrong")),
            (&json!(false), &json!("fixed"))
        ]
    );
}
