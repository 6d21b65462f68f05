//! `docket serve` over a PostgreSQL store (docs/postgres.md, "Serving"): two API servers
//! over one database and one `docket worker`. A run started through one server is driven
//! by the worker, its ticket decided through the other, and it completes; both servers
//! see the same runs, events and workers, take the same tokens, and neither drives a run.
//! Tokens, browser sessions and the request log are the database's: a token made with
//! `docket token create --store URL`, and a session opened on one server, are taken by
//! both, and end on both when the token is revoked; both servers' requests are in one log.

use std::process::{Command, Stdio};

use docket_serve::Role;
use docket_store_postgres::TestCluster;
use serde_json::{Value, json};

use crate::served::Served;

/// A request log's entries (`GET /api/requests`) as (by, path, status).
fn requests_of(log: &Value) -> Vec<(&str, &str, u64)> {
    log["requests"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|r| {
            (
                r["by"].as_str().unwrap_or_default(),
                r["path"].as_str().unwrap_or_default(),
                r["status"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

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
            "leases": [{ "run_id": "shared-1", "queued": true, "priority": "NORMAL", "epoch": 0, "holder": null, "expires_in_ms": null, "due_in_ms": null }],
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

    // Both servers' requests in the one request log of the database, read through
    // either; no request log (nor token file) in the data directory.
    let admin = Some(a.token(Role::Admin));
    let (status, logged) = b.call("GET", "/api/requests", admin, None);
    assert_eq!(status, 200, "{logged}");
    assert_eq!(
        requests_of(&logged),
        vec![
            ("operator-user", "/api/runs", 202),
            (
                "approver-user",
                "/api/runs/shared-1/tickets/ticket-1/approve",
                202
            ),
        ]
    );
    assert_eq!(a.call("GET", "/api/requests", admin, None), (200, logged));
    assert!(!data.join("api/requests.jsonl").exists());
    assert!(!data.join("api/tokens.json").exists());

    let _ = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    let stopped = worker.wait().expect("the worker stops");
    assert!(stopped.success(), "{stopped:?}");
}

#[test]
fn tokens_sessions_and_the_request_log_are_shared_by_servers_over_one_database() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let url = db.url.as_str();
    let dir = tempfile::tempdir().expect("tempdir");
    // Each server with a data directory of its own: nothing they share is in one.
    let (data_a, data_b) = (dir.path().join("a"), dir.path().join("b"));
    let asks =
        docket_tests::one_agent_workflow(dir.path(), "pg-auth", "asks", TEST_AGENT, &["ask"]);
    let a = Served::start_with(&data_a, &["--store", url]);
    let b = a.beside(&data_b, &["--store", url]);
    let (operator, admin) = (Some(a.token(Role::Operator)), Some(a.token(Role::Admin)));

    // A token made by the command, in the database, after both servers started.
    let made = docket_tests::docket_on(
        &data_b,
        &[
            "token", "create", "--store", url, "--name", "alice", "--role", "approver",
        ],
    );
    assert_eq!(docket_tests::exit_code(&made), 0, "{made:?}");
    let alice = docket_tests::stdout_text(&made).trim().to_owned();
    for server in [&a, &b] {
        let (status, body) = server.call("GET", "/api/runs", Some(&alice), None);
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = b.call("GET", "/api/runs", Some("dkt_not-a-token"), None);
    assert_eq!(status, 401, "{body}");

    // A run to stream (queued: no worker drives it).
    let (status, started) = a.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": asks, "input": { "task": "x" }, "run_id": "auth-1" })),
    );
    assert_eq!(status, 202, "{started}");
    let stream = "/api/runs/auth-1/events/stream";

    // A session opened on A is taken by B, and by A.
    let opened = a.with_headers(
        "POST",
        "/api/session",
        &format!("Authorization: Bearer {alice}\r\n"),
    );
    assert_eq!(opened.status, 200, "{:?}", opened.body);
    let cookie = opened
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_owned();
    assert!(cookie.starts_with("docket_session="), "{cookie}");
    let with_cookie = format!("Cookie: {cookie}\r\n");
    for server in [&b, &a] {
        let answer = server.with_headers("GET", stream, &with_cookie);
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        assert_eq!(answer.header("content-type"), Some("text/event-stream"));
    }
    // A session id no server made is refused by both.
    for server in [&a, &b] {
        let answer = server.with_headers("GET", stream, "Cookie: docket_session=00ff\r\n");
        assert_eq!(answer.status, 401, "{:?}", answer.body);
        assert_eq!(answer.error(), ("unauthenticated", "cookie.docket_session"));
    }

    // A request through B, refused for its role: recorded all the same.
    let (status, body) = b.call(
        "POST",
        "/api/runs/auth-1/cancel",
        Some(&alice),
        Some(&json!({ "reason": "not mine to cancel" })),
    );
    assert_eq!(status, 403, "{body}");

    // Both servers' requests, in order, in the one log both read.
    let expected = vec![
        ("operator-user", "/api/runs", 202),
        ("alice", "/api/session", 200),
        ("alice", "/api/runs/auth-1/cancel", 403),
    ];
    let (status, logged) = a.call("GET", "/api/requests", admin, None);
    assert_eq!(status, 200, "{logged}");
    assert_eq!(requests_of(&logged), expected);
    let (_, through_b) = b.call("GET", "/api/requests", admin, None);
    assert_eq!(through_b, logged);

    // Revoked (by a command with yet another data directory): both servers refuse the
    // token and the session at once.
    let revoked = docket_tests::docket_on(
        &dir.path().join("c"),
        &["token", "revoke", "alice", "--store", url],
    );
    assert_eq!(docket_tests::exit_code(&revoked), 0, "{revoked:?}");
    for server in [&a, &b] {
        let (status, body) = server.call("GET", "/api/runs", Some(&alice), None);
        assert_eq!(status, 401, "{body}");
        assert_eq!(body["error"]["where"], "header.authorization", "{body}");
        let answer = server.with_headers("GET", stream, &with_cookie);
        assert_eq!(answer.status, 401, "{:?}", answer.body);
        assert_eq!(answer.error(), ("unauthenticated", "cookie.docket_session"));
    }
    // Refused requests of an unknown token name no one: the log is as it was.
    let (_, after) = b.call("GET", "/api/requests", admin, None);
    assert_eq!(requests_of(&after), expected);

    // Nothing of it in either data directory.
    for data in [&data_a, &data_b] {
        assert!(!data.join("api/tokens.json").exists(), "{}", data.display());
        assert!(
            !data.join("api/requests.jsonl").exists(),
            "{}",
            data.display()
        );
    }
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

/// With its database gone, a server refuses every request it cannot check: `503`
/// `unavailable` naming the database, never a way through (not even for a token it saw a
/// moment before); once the database is back, the same token is taken again.
#[test]
fn a_server_whose_database_is_down_refuses_and_lets_nothing_through() {
    // A cluster of its own: stopping it must not reach the other tests' databases.
    let Some(cluster) = TestCluster::private() else {
        return;
    };
    let db = cluster.database();
    let url = db.url.as_str();
    let dir = tempfile::tempdir().expect("tempdir");
    let a = Served::start_with(&dir.path().join("data"), &["--store", url]);
    let viewer = Some(a.token(Role::Viewer));
    let (status, body) = a.call("GET", "/api/runs", viewer, None);
    assert_eq!(status, 200, "{body}");

    cluster.stop();
    for token in [viewer, Some("dkt_not-a-token"), None] {
        let (status, body) = a.call("GET", "/api/runs", token, None);
        if token.is_none() {
            // No token at all needs no database to refuse.
            assert_eq!(status, 401, "{body}");
            continue;
        }
        assert_eq!(
            (status, &body["error"]["code"]),
            (503, &json!("unavailable")),
            "{body}"
        );
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("PostgreSQL at postgres://docket@"),
            "{message}"
        );
    }

    cluster.resume();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, body) = a.call("GET", "/api/runs", viewer, None);
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{body}");
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not take the token again within 30 s of the database's return: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
