//! `docket serve` through HTTP (issue 17 points 2, 5 and 7; docs/api.md): a server started
//! on an ephemeral port, every route refused without a token (401) and for a role without
//! permission (403); a run started through the API that waits for a human, approved by an
//! approver, completes with the token's name as `by`; server-sent events in order, and
//! after a reconnect with Last-Event-ID only the later ones; `docket status` and `runs`
//! read while the server drives; cancelling, through the API and `docket cancel`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use docket_serve::Role;
use docket_serve::routes::ROUTES;
use docket_tests::{docket_on as docket, exit_code as code, stdout_text as stdout};
use serde_json::{Value, json};

use crate::served::Served;

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

/// A one-agent workflow whose agent runs `test-agent ARGS`.
fn workflow(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    docket_tests::one_agent_workflow(dir, "api", name, TEST_AGENT, args)
}

/// Table-driven: every route of the route table (the one the OpenAPI description is made
/// from), with no token, a wrong token and each role's.
#[test]
fn every_route_checks_the_token_and_the_role() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Served::start(&dir.path().join("data"));
    let (status, openapi) = server.call(
        "GET",
        "/api/openapi.json",
        Some(server.token(Role::Viewer)),
        None,
    );
    assert_eq!(status, 200);
    for route in ROUTES {
        let path = route
            .path
            .replace("{run}", "no-such-run")
            .replace("{ticket}", "ticket-1")
            .replace("{switch}", "lane-x")
            .replace("{name}", "no-such-schedule")
            .replace("{hash}", "0000")
            .replace("{from_agent}", "external")
            .replace("{to_agent}", "governance")
            .replace("{domain}", "summaries");
        assert!(
            openapi["paths"][route.path][route.method.to_lowercase()].is_object(),
            "{} {} is not in /api/openapi.json",
            route.method,
            route.path
        );
        let body = (route.method == "POST" || route.method == "PUT").then(|| json!({}));
        let (status, answer) = server.call(route.method, &path, None, body.as_ref());
        assert_eq!(
            status, 401,
            "{} {path} without a token: {answer}",
            route.method
        );
        assert_eq!(answer["error"]["code"], "unauthenticated");
        assert_eq!(answer["error"]["where"], "header.authorization");
        let (status, _) = server.call(route.method, &path, Some("dkt_not-a-token"), body.as_ref());
        assert_eq!(status, 401, "{} {path} with an unknown token", route.method);
        for role in Role::ALL {
            let (status, answer) =
                server.call(route.method, &path, Some(server.token(role)), body.as_ref());
            if role.allows(route.role) {
                assert!(
                    status != 401 && status != 403,
                    "{} {path} as {role}: {status} {answer}",
                    route.method
                );
                assert!(
                    status < 500,
                    "{} {path} as {role}: {status} {answer}",
                    route.method
                );
            } else {
                assert_eq!(status, 403, "{} {path} as {role}: {answer}", route.method);
                assert_eq!(answer["error"]["code"], "forbidden");
            }
        }
    }
    // A run that does not exist is named; a bad parameter is named.
    let viewer = Some(server.token(Role::Viewer));
    let (status, answer) = server.call("GET", "/api/runs/no-such-run", viewer, None);
    assert_eq!(status, 404);
    assert_eq!(answer["error"]["where"], "run no-such-run", "{answer}");
    let (status, answer) = server.call("GET", "/api/runs?limit=0", viewer, None);
    assert_eq!(
        (status, answer["error"]["where"].clone()),
        (400, json!("query.limit"))
    );
    let (status, answer) = server.call("DELETE", "/api/runs", viewer, None);
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (405, json!("method_not_allowed"))
    );
    let (status, answer) = server.call("GET", "/api/nothing-here", viewer, None);
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (404, json!("not_found"))
    );
    let (status, answer) = server.call("GET", "/api/runs?colour=red", viewer, None);
    assert_eq!(
        (status, answer["error"]["where"].clone()),
        (400, json!("query.colour"))
    );
    // Revoked, a token stops working at once.
    let out = docket(
        &dir.path().join("data"),
        &["token", "revoke", "viewer-user"],
    );
    assert_eq!(code(&out), 0);
    let (status, _) = server.call("GET", "/api/runs", viewer, None);
    assert_eq!(status, 401);
}

/// Seed 001's governance API over the registered geo bundle: the rules, one pair, and a
/// replacement an admin makes, recorded as the next version by the token's name.
#[test]
fn handoff_rules_are_read_and_replaced_through_the_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let geo = docket_tests::workspace_root().join("examples/geo/policy.toml");
    let out = docket(
        &data,
        &[
            "policy",
            "register",
            geo.to_str().expect("utf-8"),
            "--by",
            "alice",
            "--reason",
            "as shipped",
        ],
    );
    assert_eq!(code(&out), 0, "{out:?}");
    let server = Served::start(&data);
    let viewer = Some(server.token(Role::Viewer));
    let (status, listed) = server.call("GET", "/api/governance/handoff-rules", viewer, None);
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["version"], 1);
    let rules = listed["rules"].as_array().expect("a list of rules").clone();
    assert!(!rules.is_empty(), "{listed}");

    let (status, pair) = server.call(
        "GET",
        "/api/governance/handoff-rules/intelligence/strategy",
        viewer,
        None,
    );
    assert_eq!(status, 200, "{pair}");
    assert_eq!(
        (pair["bundle"].is_string(), pair["version"].as_u64()),
        (true, Some(1))
    );
    let (status, unknown) = server.call(
        "GET",
        "/api/governance/handoff-rules/nobody/strategy",
        viewer,
        None,
    );
    assert_eq!(
        (status, unknown["error"]["where"].clone()),
        (404, json!("path.from_agent"))
    );

    // The same rules again: nothing to register. Without a reason: named.
    let admin = Some(server.token(Role::Admin));
    let same = Value::Array(rules.clone());
    let (status, answer) = server.call(
        "PUT",
        "/api/governance/handoff-rules?reason=again",
        admin,
        Some(&same),
    );
    assert_eq!(status, 409, "{answer}");
    let (status, answer) = server.call("PUT", "/api/governance/handoff-rules", admin, Some(&same));
    assert_eq!(
        (status, answer["error"]["where"].clone()),
        (400, json!("query.reason"))
    );
    // An invalid rule: each problem named.
    let bad = json!([{"from_agent_id": "nobody", "to_agent_id": "strategy"}]);
    let (status, answer) = server.call(
        "PUT",
        "/api/governance/handoff-rules?reason=broken",
        admin,
        Some(&bad),
    );
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["error"]["problems"][0]["field"], "from_agent_id",
        "{answer}"
    );
    // A tightening: version 2, by the admin token's name, with the diff.
    let mut tightened = rules;
    tightened.push(json!({
        "from_agent_id": "external",
        "to_agent_id": "governance",
        "blocked_context_fields": ["regions"]
    }));
    let body = json!({ "rules": tightened, "reason": "no regions" });
    let (status, answer) = server.call("PUT", "/api/governance/handoff-rules", admin, Some(&body));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["registered"]["version"], 2);
    assert_eq!(answer["registered"]["by"], "admin-user");
    assert_eq!(answer["registered"]["reason"], "no regions");
    assert!(
        !answer["diff"]["rules"].as_array().expect("diff").is_empty(),
        "{answer}"
    );
    let (_, listed) = server.call("GET", "/api/governance/handoff-rules", viewer, None);
    assert_eq!(listed["version"], 2);
}

#[test]
fn a_run_started_through_the_api_is_approved_and_completes_while_sse_follows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let asks = workflow(dir.path(), "asks", &["escalate_then_finish"]);
    let server = Served::start(&data);
    let operator = Some(server.token(Role::Operator));
    let approver = Some(server.token(Role::Approver));

    let (status, started) = server.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": asks, "input": { "task": "x" }, "run_id": "asks-1" })),
    );
    assert!(status == 200 || status == 202, "{status} {started}");
    assert_eq!(started["run_id"], "asks-1");

    // Every event up to the question, in order, from the first.
    let first = server.sse("asks-1", None, "human.escalated");
    let ids: Vec<u64> = first.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    assert_eq!(first[0].1, "run.requested");
    server.until("asks-1", |r| r["status"] == "waiting_for_human");

    // Readers work while the server holds the directory; a writer is told to use the API.
    let out = docket(&data, &["status", "asks-1"]);
    assert_eq!(code(&out), 0, "{out:?}");
    assert!(
        stdout(&out).contains("waiting for a human"),
        "{}",
        stdout(&out)
    );
    let out = docket(&data, &["runs"]);
    assert!(
        stdout(&out).contains("asks-1\tasks\twaiting for a human"),
        "{}",
        stdout(&out)
    );
    let out = docket(
        &data,
        &[
            "approve", "asks-1", "ticket-1", "--by", "x", "--reason", "y",
        ],
    );
    assert_eq!(code(&out), 1);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("use its API"), "{said}");

    // Listed, filtered.
    let (_, waiting) = server.call("GET", "/api/runs?status=waiting_for_human", operator, None);
    assert_eq!(waiting["runs"][0]["run_id"], "asks-1", "{waiting}");
    let (_, none) = server.call("GET", "/api/runs?status=completed", operator, None);
    assert_eq!(none["runs"], json!([]));

    // An operator may not decide; an approver does, and is recorded as who.
    let approve = "/api/runs/asks-1/tickets/ticket-1/approve";
    let reason = json!({ "reason": "looks right" });
    let (status, _) = server.call("POST", approve, operator, Some(&reason));
    assert_eq!(status, 403);
    let (status, approved) = server.call("POST", approve, approver, Some(&reason));
    assert!(status == 200 || status == 202, "{status} {approved}");
    let done = server.until("asks-1", |r| {
        r["status"] == "completed" && r["driven"] == false
    });
    assert!(done["output"].is_object(), "{done}");
    let (status, again) = server.call("POST", approve, approver, Some(&reason));
    assert_eq!(status, 409, "{again}");

    // From the question on, after a reconnect: only the later events, in order.
    let escalated = first.last().expect("events").0;
    let rest = server.sse("asks-1", Some(escalated), "run.completed");
    let ids: Vec<u64> = rest.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(
        ids,
        (escalated + 1..=escalated + ids.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(rest[0].1, "human.decided");
    assert_eq!(rest[0].2["payload"]["by"], "approver-user");
    assert_eq!(rest[0].2["payload"]["reason"], "looks right");

    // The same events as GET .../events gives.
    let (_, events) = server.call("GET", "/api/runs/asks-1/events", operator, None);
    let all = events["events"].as_array().expect("events");
    assert_eq!(all.len(), first.len() + rest.len());
    let (_, after) = server.call(
        "GET",
        &format!("/api/runs/asks-1/events?after={escalated}"),
        operator,
        None,
    );
    assert_eq!(after["events"][0]["kind"], "human.decided");

    // Verification, replay, state, export of the finished run.
    let (status, v) = server.call("GET", "/api/runs/asks-1/verification", operator, None);
    assert_eq!(
        (status, v["chain"]["sound"].clone()),
        (200, json!(true)),
        "{v}"
    );
    let (status, replay) = server.call("GET", "/api/runs/asks-1/replay", operator, None);
    assert_eq!(status, 200, "{replay}");
    assert!(replay["divergence"].is_null(), "{replay}");
    let (status, state) = server.call(
        "GET",
        "/api/runs/asks-1/state?at=first-escalation",
        operator,
        None,
    );
    assert_eq!(status, 200, "{state}");
    let (status, export) = server.call(
        "GET",
        "/api/runs/asks-1/export?format=jsonl",
        operator,
        None,
    );
    assert_eq!(status, 200);
    let lines = export.as_str().map_or(0, |t| t.lines().count());
    assert!(lines > all.len(), "one line per event and more: {lines}");

    // The recorded bundle is listed, and explained.
    let (_, bundles) = server.call("GET", "/api/policies", operator, None);
    let hash = bundles["bundles"][0]["hash"]
        .as_str()
        .expect("a bundle hash")
        .to_owned();
    assert_eq!(bundles["bundles"][0]["runs"], 1);
    let (status, explained) = server.call(
        "GET",
        &format!("/api/policies/{hash}/explain?from=external&to=worker"),
        operator,
        None,
    );
    assert_eq!(status, 200, "{explained}");
    assert_eq!(
        explained["handoff"]["decision"]["verdict"], "allow",
        "{explained}"
    );

    // Mutating requests are in the request log with their principal.
    let (status, log) = server.call(
        "GET",
        "/api/requests",
        Some(server.token(Role::Admin)),
        None,
    );
    assert_eq!(status, 200);
    let entries = log["requests"].as_array().expect("requests");
    assert!(
        entries.iter().any(|e| e["by"] == "approver-user"
            && e["path"] == approve
            && (e["status"] == 200 || e["status"] == 202)),
        "{log}"
    );
    assert!(
        entries
            .iter()
            .any(|e| e["by"] == "operator-user" && e["status"] == 403),
        "{log}"
    );
}

/// A run whose bundle would empty content off the interaction matrix (here a person's
/// answers to the worker, under `scoped` with no rule for them) starts, and the answer to
/// `POST /api/runs` says so, as `docket run` does on stderr.
#[test]
fn starting_a_run_says_what_its_bundle_would_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let asks = workflow(dir.path(), "asks", &["escalate_then_finish"]);
    let plain_dir = dir.path().join("plain");
    std::fs::create_dir(&plain_dir).expect("plain dir");
    let plain = workflow(&plain_dir, "plain", &["finish"]);
    let bundle = dir.path().join("policy.toml");
    let full = std::fs::read_to_string(&bundle).expect("bundle");
    // The matrix's two edges cross whole; anything else falls to `scoped`.
    let scoped = full.replace("\"full\"", "\"scoped\"")
        + "[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"in\"\nfrom_agent_id = \"external\"\n\
           to_agent_id = \"worker\"\nhandoff_mode = \"full\"\n\
           [[multi_agent_handoffs.agent_handoff_rules]]\nid = \"out\"\nfrom_agent_id = \"worker\"\n\
           to_agent_id = \"external\"\nhandoff_mode = \"full\"\n";
    std::fs::write(&bundle, scoped).expect("bundle");
    let server = Served::start(&data);
    let operator = Some(server.token(Role::Operator));

    let (status, started) = server.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": asks, "run_id": "warned-1" })),
    );
    assert!(status == 200 || status == 202, "{status} {started}");
    let warnings = started["warnings"].as_array().expect("warnings");
    assert!(
        warnings.iter().any(|w| {
            let w = w.as_str().unwrap_or_default();
            w.contains("policy.toml") && w.contains("human") && w.contains("worker")
        }),
        "{started}"
    );
    server.until("warned-1", |r| r["status"] == "waiting_for_human");

    // A bundle that empties nothing: no `warnings` at all.
    let (status, started) = server.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": plain, "run_id": "plain-1" })),
    );
    assert!(status == 200 || status == 202, "{status} {started}");
    assert!(started.get("warnings").is_none(), "{started}");
}

/// docs/agent-protocol.md#waiting-wait, "Who fires it": a run started through the API whose
/// agent waits is not held by a drive while it waits (`driven` false, not `interrupted`,
/// `timer_due_at_ms` said); the server drives it again when the timer is due, which fires
/// once.
#[test]
fn a_run_waiting_on_a_timer_is_kept_by_the_server_not_a_drive_and_fired_when_due() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let waits = workflow(dir.path(), "waits", &["wait", "--for", "3s"]);
    let server = Served::start(&data);
    let operator = Some(server.token(Role::Operator));
    let (status, started) = server.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": waits, "run_id": "waits-1" })),
    );
    assert!(status == 200 || status == 202, "{status} {started}");
    let waiting = server.until("waits-1", |r| {
        r["timer_due_at_ms"].is_i64() && r["driven"] == false
    });
    assert_eq!(waiting["status"], "running", "{waiting}");
    assert_eq!(waiting["interrupted"], false, "{waiting}");
    let (_, listed) = server.call("GET", "/api/runs", operator, None);
    let row = listed["runs"]
        .as_array()
        .and_then(|runs| runs.iter().find(|r| r["run_id"] == "waits-1"))
        .cloned()
        .unwrap_or_default();
    assert!(
        row["interrupted"] == false || row["status"] == "completed",
        "a run the server keeps waiting is not listed as interrupted: {listed}"
    );
    if row["status"] == "running" {
        assert_eq!(
            row["timers"][0]["due_at_ms"], waiting["timer_due_at_ms"],
            "{listed}"
        );
    }
    let done = server.until("waits-1", |r| r["status"] == "completed");
    assert!(done["timer_due_at_ms"].is_null(), "{done}");
    let events = docket(&data, &["events", "waits-1", "--json"]);
    let fired = stdout(&events)
        .lines()
        .filter(|l| l.contains("\"kind\":\"timer.fired\""))
        .count();
    assert_eq!(fired, 1, "{}", stdout(&events));
}

/// docs/events.md#outside-events through the API: a run whose agent waits for an event
/// is neither driven nor interrupted and says what it waits for; `POST .../events` records
/// the token's name as the sender and drives the run on; the same key again answers 200
/// naming the first event and records nothing; a body without a name is refused, naming
/// the field.
#[test]
fn an_outside_event_sent_through_the_api_reaches_the_waiting_agent_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let waits = workflow(dir.path(), "events", &["wait_event"]);
    let bundle = dir.path().join("policy.toml");
    let text = std::fs::read_to_string(&bundle).expect("bundle");
    std::fs::write(
        &bundle,
        format!(
            "{text}\n[[signals]]\nname = \"comment\"\nsenders = [\"operator-user\"]\nagents = [\"worker\"]\n"
        ),
    )
    .expect("bundle");
    let server = Served::start(&data);
    let operator = Some(server.token(Role::Operator));
    let (status, started) = server.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": waits, "run_id": "ev-1" })),
    );
    assert!(status == 200 || status == 202, "{status} {started}");
    let waiting = server.until("ev-1", |r| {
        r["waiting_for_events"]
            .as_array()
            .is_some_and(|w| !w.is_empty())
            && r["driven"] == false
    });
    assert_eq!(waiting["interrupted"], false, "{waiting}");
    assert_eq!(
        waiting["waiting_for_events"][0]["name"], "comment",
        "{waiting}"
    );
    // The list says the same: what the run waits for, and not interrupted.
    let (_, listed) = server.call("GET", "/api/runs", operator, None);
    let row = listed["runs"]
        .as_array()
        .and_then(|runs| runs.iter().find(|r| r["run_id"] == "ev-1"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["interrupted"], false, "{listed}");
    assert_eq!(row["awaited_events"][0]["name"], "comment", "{listed}");
    assert!(row.get("timers").is_none(), "{listed}");

    let (status, refused) = server.call(
        "POST",
        "/api/runs/ev-1/events",
        operator,
        Some(&json!({ "payload": {} })),
    );
    assert_eq!(status, 400, "{refused}");
    assert!(refused.to_string().contains("name"), "{refused}");

    let first = json!({ "name": "comment", "payload": { "text": "a" }, "idempotency_key": "k-1" });
    let (status, sent) = server.call("POST", "/api/runs/ev-1/events", operator, Some(&first));
    assert!(status == 200 || status == 202, "{status} {sent}");
    assert_eq!(sent["signal"]["signal_id"], "ev-1/signal-1", "{sent}");
    assert_eq!(sent["signal"]["by"], "operator-user", "{sent}");
    assert_eq!(sent["signal"]["delivered_to"], "worker", "{sent}");
    let (status, again) = server.call("POST", "/api/runs/ev-1/events", operator, Some(&first));
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["duplicate"], true, "{again}");
    assert_eq!(again["signal"]["signal_id"], "ev-1/signal-1", "{again}");
    server.until("ev-1", |r| {
        r["waiting_for_events"]
            .as_array()
            .is_some_and(|w| !w.is_empty())
            && r["driven"] == false
    });
    let (status, sent) = server.call(
        "POST",
        "/api/runs/ev-1/events",
        operator,
        Some(&json!({ "name": "comment", "payload": { "text": "b" } })),
    );
    assert!(status == 200 || status == 202, "{status} {sent}");
    let done = server.until("ev-1", |r| r["status"] == "completed");
    let texts: Vec<&str> = done["output"]["events"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|e| e["payload"]["text"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(texts, ["a", "b"], "{done}");
    let received = stdout(&docket(&data, &["events", "ev-1", "--json"]))
        .lines()
        .filter(|l| l.contains("\"kind\":\"signal.received\""))
        .count();
    assert_eq!(received, 2);
}

/// docs/governance.md#a-person-writes-a-domain: `POST .../domains/{domain}` records the
/// token's name as the person writing in a role of the run's bundle (201, the version as
/// kept, redacted); a role that is not a person's is a 422 naming the roles that may, and
/// records nothing; a blank reason is a 400 naming the field.
#[test]
fn a_person_writes_a_domain_through_the_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let asks = workflow(dir.path(), "asks", &["ask"]);
    let bundle = dir.path().join("policy.toml");
    std::fs::write(
        &bundle,
        r#"
bundle = { id = "api" }
agents = [{ id = "external" }, { id = "worker", read_scopes = ["summaries"] },
          { id = "operator", authority = "human", write_scopes = ["summaries"] }]
domains = [{ id = "summaries", redact = ["raw_ref"] }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#,
    )
    .expect("bundle");
    let server = Served::start(&data);
    let operator = Some(server.token(Role::Operator));
    let (status, started) = server.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": asks, "run_id": "dw-1" })),
    );
    assert!(status == 200 || status == 202, "{status} {started}");
    server.until("dw-1", |r| {
        r["status"] == "waiting_for_human" && r["driven"] == false
    });
    let path = "/api/runs/dw-1/domains/summaries";
    let (status, refused) = server.call(
        "POST",
        path,
        operator,
        Some(&json!({ "role": "operator", "reason": " ", "content": {} })),
    );
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["where"], "body.reason", "{refused}");
    let (status, refused) = server.call(
        "POST",
        path,
        operator,
        Some(&json!({ "role": "worker", "reason": "fix", "content": {} })),
    );
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("roles that may: operator")),
        "{refused}"
    );
    let (_, before) = server.call("GET", "/api/runs/dw-1/events", operator, None);
    let body = json!({ "role": "operator", "reason": "summarised the call",
                       "content": { "summary": "wants a refund", "raw_ref": "s3://raw/1" } });
    let (status, written) = server.call("POST", path, operator, Some(&body));
    assert_eq!(status, 201, "{written}");
    assert_eq!(written["domain"]["by"], "operator-user", "{written}");
    assert_eq!(written["domain"]["written"]["version"], 1, "{written}");
    assert_eq!(
        written["domain"]["written"]["content"],
        json!({ "summary": "wants a refund", "raw_ref": "[redacted]" })
    );
    let (_, after) = server.call("GET", "/api/runs/dw-1/events", operator, None);
    let count = |v: &serde_json::Value| v["events"].as_array().map_or(0, Vec::len);
    assert_eq!(count(&after), count(&before) + 2, "{after}");
}

/// docs/events.md#runpaused: a pause recorded while the server drives the run and the
/// agent holds its call: the answer in flight is recorded when it comes (after the
/// pause, not lost and asked again), its timer fires while paused, and nothing new
/// starts (no second call is made) until the unpause, after which the run completes.
#[test]
fn a_pause_lets_the_call_in_flight_settle_and_starts_nothing_until_unpaused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let gate = dir.path().join("gate");
    let held = workflow(
        dir.path(),
        "held",
        &[
            "wait",
            "--for",
            "1s",
            "--gate",
            gate.to_str().expect("utf-8"),
        ],
    );
    let server = Served::start(&data);
    let operator = Some(server.token(Role::Operator));
    let (status, started) = server.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": held, "input": {}, "run_id": "p-1" })),
    );
    assert_eq!(status, 202, "{started}");
    let waiting = dir.path().join("gate.waiting");
    let start = Instant::now();
    while !waiting.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the agent was never called"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let (status, paused) = server.call(
        "POST",
        "/api/runs/p-1/pause",
        operator,
        Some(&json!({ "reason": "look first" })),
    );
    assert_eq!(status, 200, "{paused}");
    // The agent answers after the pause: its answer is recorded, then its timer fires.
    std::fs::write(&gate, b"").expect("open the gate");
    let kinds = || -> Vec<String> {
        let (_, events) = server.call("GET", "/api/runs/p-1/events", operator, None);
        events["events"]
            .as_array()
            .map(|e| {
                e.iter()
                    .filter_map(|e| e["kind"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let start = Instant::now();
    while !kinds().iter().any(|k| k == "timer.fired") {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the timer never fired: {:?}",
            kinds()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let during = server.until("p-1", |r| r["driven"] == false);
    assert_eq!(during["status"], "running", "{during}");
    assert!(during["paused"].is_object(), "{during}");
    let (_, listed) = server.call("GET", "/api/runs", operator, None);
    assert_eq!(listed["runs"][0]["paused"], true, "{listed}");
    let log = kinds();
    let at = |kind: &str| log.iter().position(|k| k == kind).expect(kind);
    assert!(at("run.paused") < at("agent.responded"), "{log:?}");
    let responded = |log: &[String]| log.iter().filter(|k| *k == "agent.responded").count();
    assert_eq!(
        responded(&log),
        1,
        "nothing new called while paused: {log:?}"
    );

    let (status, _) = server.call(
        "POST",
        "/api/runs/p-1/unpause",
        operator,
        Some(&json!({ "reason": "fine" })),
    );
    assert!(status == 200 || status == 202);
    let done = server.until("p-1", |r| r["status"] == "completed");
    assert!(done["paused"].is_null(), "{done}");
    let (_, listed) = server.call("GET", "/api/runs", operator, None);
    assert_eq!(listed["runs"][0]["paused"], false, "{listed}");
    assert_eq!(responded(&kinds()), 2);
}

#[test]
fn a_run_is_cancelled_through_the_api_while_driven_and_with_docket_cancel() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let gate = dir.path().join("gate");
    let held = workflow(
        dir.path(),
        "held",
        &["finish", "--gate", gate.to_str().expect("utf-8")],
    );
    {
        let server = Served::start(&data);
        let operator = Some(server.token(Role::Operator));
        let (status, started) = server.call(
            "POST",
            "/api/runs",
            operator,
            Some(&json!({ "workflow": held, "input": {}, "run_id": "held-1" })),
        );
        assert_eq!(status, 202, "{started}");
        // The agent holds the call: the server drives the run, readers see it running.
        let waiting = dir.path().join("gate.waiting");
        let start = Instant::now();
        while !waiting.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the agent was never called"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = docket(&data, &["status", "held-1"]);
        assert!(
            stdout(&out).starts_with("run held-1 (held): running"),
            "{}",
            stdout(&out)
        );
        let (_, run) = server.call("GET", "/api/runs/held-1", operator, None);
        assert_eq!(
            (run["driven"].clone(), run["interrupted"].clone()),
            (json!(true), json!(false))
        );

        let (status, refused) = server.call(
            "POST",
            "/api/runs/held-1/cancel",
            operator,
            Some(&json!({ "reason": " " })),
        );
        assert_eq!(
            (status, refused["error"]["where"].clone()),
            (400, json!("body.reason"))
        );
        let (status, cancelled) = server.call(
            "POST",
            "/api/runs/held-1/cancel",
            operator,
            Some(&json!({ "reason": "wrong input" })),
        );
        assert_eq!(status, 200, "{cancelled}");
        assert_eq!(cancelled["status"], "cancelled");
        // The agent answers late: nothing more is recorded, the run stays cancelled.
        std::fs::write(&gate, b"").expect("open the gate");
        let after = server.until("held-1", |r| r["driven"] == false);
        assert_eq!(after["status"], "cancelled", "{after}");
        let (_, events) = server.call("GET", "/api/runs/held-1/events", operator, None);
        let last = events["events"]
            .as_array()
            .and_then(|e| e.last())
            .cloned()
            .expect("events");
        assert_eq!(last["kind"], "run.cancelled");
        assert_eq!(last["payload"]["by"], "operator-user");
        let (status, _) = server.call(
            "POST",
            "/api/runs/held-1/cancel",
            operator,
            Some(&json!({ "reason": "again" })),
        );
        assert_eq!(status, 409);
    }
    // With the server gone, `docket cancel` records as the server did.
    let asks = workflow(dir.path(), "asks", &["escalate_then_finish"]);
    let out = docket(
        &data,
        &["run", asks.to_str().expect("utf-8"), "--run-id", "asks-2"],
    );
    assert_eq!(code(&out), 3, "{out:?}");
    let out = docket(
        &data,
        &["cancel", "asks-2", "--by", "ana", "--reason", "not needed"],
    );
    assert_eq!(code(&out), 0, "{out:?}");
    assert!(
        stdout(&out).starts_with("run asks-2 (asks): cancelled"),
        "{}",
        stdout(&out)
    );
    let out = docket(&data, &["events", "asks-2"]);
    assert!(stdout(&out).contains("run.cancelled"), "{}", stdout(&out));
    let out = docket(&data, &["replay", "asks-2"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let out = docket(
        &data,
        &["cancel", "asks-2", "--by", "ana", "--reason", "again"],
    );
    assert_eq!(code(&out), 1);
}

/// Files a request names (issue 28 rows 1, 3 and 4): read only from under the server's
/// directory, never from its data directory, never hidden ones, only regular files; no
/// error quotes what a file holds; a FIFO or a device answers at once and blocks no route.
#[test]
fn files_a_request_names_are_confined_bounded_and_never_quoted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let asks = workflow(dir.path(), "asks", &["escalate_then_finish"]);
    let server = Served::start(&data);
    let operator = Some(server.token(Role::Operator));
    // A secret in the data directory, beside the tokens; one outside the server's
    // directory; one in a hidden file; one in a file under it that is not a workflow.
    std::fs::write(data.join("secret.toml"), "s3cret-in-data = 1\n").expect("write");
    let outside = tempfile::tempdir().expect("tempdir");
    let outside_file = outside.path().join("secret.toml");
    std::fs::write(&outside_file, "s3cret-outside\n").expect("write");
    std::fs::write(dir.path().join(".env"), "TOKEN = \"s3cret-hidden\"\n").expect("write");
    std::fs::write(dir.path().join("notes.toml"), "password: s3cret-notes\n").expect("write");
    std::os::unix::fs::symlink(&outside_file, dir.path().join("link.toml")).expect("symlink");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.toml")).expect("symlink");
    let fifo = dir.path().join("fifo.toml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let tokens = data.join("api").join("tokens.json");

    let cases: Vec<(String, &str)> = vec![
        (
            data.join("secret.toml").display().to_string(),
            "data directory",
        ),
        ("data/secret.toml".to_owned(), "data directory"),
        ("data/api/tokens.json".to_owned(), "data directory"),
        (tokens.display().to_string(), "data directory"),
        (
            outside_file.display().to_string(),
            "outside the server's directory",
        ),
        (
            "../secret.toml".to_owned(),
            "outside the server's directory",
        ),
        ("link.toml".to_owned(), "outside the server's directory"),
        ("/etc/passwd".to_owned(), "outside the server's directory"),
        (
            "/proc/self/environ".to_owned(),
            "outside the server's directory",
        ),
        ("/dev/zero".to_owned(), "outside the server's directory"),
        ("zero.toml".to_owned(), "outside the server's directory"),
        (".env".to_owned(), "hidden"),
        ("fifo.toml".to_owned(), "not a regular file (it is a FIFO)"),
        ("notes.toml".to_owned(), "notes.toml:1:"),
        // Paths that can name no file: the request's fault, never the server's.
        ("a\0b.toml".to_owned(), "cannot read"),
        (format!("{}.toml", "w".repeat(300)), "cannot read"),
        ("asks.workflow.toml/inner.toml".to_owned(), "cannot read"),
    ];
    for (path, says) in &cases {
        let (status, body) = server.call(
            "POST",
            "/api/runs",
            operator,
            Some(&json!({ "workflow": path, "input": {} })),
        );
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["error"]["where"], "body.workflow", "{path}: {body}");
        let message = body["error"]["message"].as_str().expect("a message");
        assert!(message.contains(says), "{path}: {message}");
        assert!(
            !message.contains("s3cret"),
            "{path} quoted its file: {message}"
        );
        // No route waits behind what the request named.
        let (status, _) = server.call("GET", "/api/runs", operator, None);
        assert_eq!(status, 200, "after {path}");
    }
    // A what-if's bundle is read by the same rules.
    let (status, _) = server.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": asks, "run_id": "confined-1" })),
    );
    assert!(status == 200 || status == 202, "{status}");
    for (path, says) in [
        ("data/secret.toml", "data directory"),
        ("/etc/passwd", "outside the server's directory"),
        ("fifo.toml", "FIFO"),
        ("a\0b.toml", "cannot read"),
    ] {
        let (status, body) = server.call(
            "POST",
            "/api/runs/confined-1/what-if",
            operator,
            Some(&json!({ "policies": path })),
        );
        assert_eq!(status, 400, "{path}: {body}");
        let message = body["error"]["message"].as_str().expect("a message");
        assert!(message.contains(says), "{path}: {message}");
        assert!(!message.contains("s3cret"), "{message}");
    }
    // A workflow under the directory, named relative to it, runs.
    let (status, body) = server.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": "asks.workflow.toml", "run_id": "relative-1" })),
    );
    assert!(status == 200 || status == 202, "{status} {body}");
}

/// A run id already taken is refused (issue 28 row 8): 409, and the request's input is
/// recorded nowhere.
#[test]
fn a_run_id_already_taken_is_refused_and_nothing_is_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let asks = workflow(dir.path(), "asks", &["escalate_then_finish"]);
    let server = Served::start(&data);
    let operator = Some(server.token(Role::Operator));
    let start = |input: Value| {
        server.call(
            "POST",
            "/api/runs",
            operator,
            Some(&json!({ "workflow": asks, "input": input, "run_id": "taken-1" })),
        )
    };
    let (status, body) = start(json!({ "task": "first" }));
    assert!(status == 200 || status == 202, "{status} {body}");
    server.until("taken-1", |r| r["status"] == "waiting_for_human");
    let (_, before) = server.call("GET", "/api/runs/taken-1/events", operator, None);
    let (status, body) = start(json!({ "task": "second" }));
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["where"], "run taken-1", "{body}");
    let (_, after) = server.call("GET", "/api/runs/taken-1/events", operator, None);
    assert_eq!(before, after);
    assert!(!after.to_string().contains("second"), "{after}");
}

/// Two people deciding one ticket at the same moment (issue 28 row 5): one decision is
/// recorded and answered 2xx, the other is answered 409 naming the one recorded, and the
/// request log says what each got. Tried on several runs, each with both requests
/// released together.
#[test]
fn of_two_decisions_on_one_ticket_one_is_recorded_and_the_other_is_409() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let asks = workflow(dir.path(), "asks", &["escalate_then_finish"]);
    let server = Served::start(&data);
    let operator = Some(server.token(Role::Operator));
    let approver = server.token(Role::Approver).to_owned();
    const RUNS: usize = 6;
    for i in 0..RUNS {
        let run = format!("race-{i}");
        let (status, body) = server.call(
            "POST",
            "/api/runs",
            operator,
            Some(&json!({ "workflow": asks, "input": { "task": "x" }, "run_id": run })),
        );
        assert!(status == 200 || status == 202, "{status} {body}");
        server.until(&run, |r| r["status"] == "waiting_for_human");
        let barrier = std::sync::Barrier::new(2);
        let (approved, denied) = std::thread::scope(|s| {
            let decide = |verb: &'static str| {
                let (barrier, approver, run) = (&barrier, &approver, &run);
                let server = &server;
                s.spawn(move || {
                    barrier.wait();
                    server.call(
                        "POST",
                        &format!("/api/runs/{run}/tickets/ticket-1/{verb}"),
                        Some(approver),
                        Some(&json!({ "reason": format!("{verb} it") })),
                    )
                })
            };
            let a = decide("approve");
            let d = decide("deny");
            (a.join().expect("approve"), d.join().expect("deny"))
        });
        let ok = |s: u16| s == 200 || s == 202;
        assert!(
            ok(approved.0) != ok(denied.0),
            "{run}: exactly one decision is acknowledged: {approved:?} {denied:?}"
        );
        let (winner, loser, won) = if ok(approved.0) {
            (approved, denied, "approved")
        } else {
            (denied, approved, "denied")
        };
        assert_eq!(loser.0, 409, "{run}: {loser:?}");
        let message = loser.1["error"]["message"].as_str().expect("a message");
        assert!(
            message.contains(&format!("already decided ({won} by approver-user")),
            "{run}: {message}"
        );
        assert!(ok(winner.0));
        let (_, events) = server.call("GET", &format!("/api/runs/{run}/events"), operator, None);
        let decided: Vec<&Value> = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["kind"] == "human.decided")
            .collect();
        assert_eq!(decided.len(), 1, "{run}: {events}");
        assert_eq!(
            decided[0]["payload"]["approved"],
            json!(won == "approved"),
            "{run}: {events}"
        );
    }
    // The request log: per run, one acknowledged decision and one 409.
    let log = std::fs::read_to_string(data.join("api").join("requests.jsonl")).expect("log");
    for i in 0..RUNS {
        let statuses: Vec<u64> = log
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
            .filter(|l| {
                l["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with(&format!("/api/runs/race-{i}/tickets/")))
            })
            .map(|l| l["status"].as_u64().expect("status"))
            .collect();
        let mut sorted = statuses.clone();
        sorted.sort_unstable();
        assert!(
            sorted.len() == 2 && sorted[1] == 409 && (sorted[0] == 200 || sorted[0] == 202),
            "race-{i}: {statuses:?}"
        );
    }
}

/// Loopback only, unless told: a remote address is refused with what to do, before
/// anything is created.
#[test]
fn a_remote_address_is_refused_without_allow_remote() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let out = docket(&data, &["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(code(&out), 1, "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("not a loopback address") && said.contains("--allow-remote"),
        "{said}"
    );
    assert!(!data.exists(), "nothing was created");
}

/// The user's next message (docs/agent-protocol.md#sessions): refused (409, naming the
/// status) while the run waits; once it finished, two messages sent at once start one
/// turn (201 naming the new run) and the other is a 409; a message to the first turn
/// then names the latest; a viewer may not send one. The new run's agent is told the
/// first turn's request.
#[test]
fn a_message_to_a_finished_run_starts_one_next_turn_and_the_rest_are_409() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let asks = workflow(dir.path(), "asks", &["escalate_then_finish"]);
    let server = Served::start(&data);
    let operator = Some(server.token(Role::Operator));
    let (status, body) = server.call(
        "POST",
        "/api/runs",
        operator,
        Some(&json!({ "workflow": asks, "input": { "task": "first" }, "run_id": "talk-1" })),
    );
    assert!(status == 200 || status == 202, "{status} {body}");
    server.until("talk-1", |r| r["status"] == "waiting_for_human");
    let send = |run: &str, token: &str| {
        server.call(
            "POST",
            &format!("/api/runs/{run}/messages"),
            Some(token),
            Some(&json!({ "message": "and then?" })),
        )
    };
    let operator_token = server.token(Role::Operator).to_owned();
    let (status, body) = send("talk-1", &operator_token);
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["where"], "run talk-1", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("waiting for a human")),
        "{body}"
    );
    let (status, body) = server.call(
        "POST",
        "/api/runs/talk-1/tickets/ticket-1/approve",
        Some(server.token(Role::Approver)),
        Some(&json!({ "reason": "go on" })),
    );
    assert!(status == 200 || status == 202, "{status} {body}");
    server.until("talk-1", |r| r["status"] == "completed");

    let (status, body) = send("talk-1", server.token(Role::Viewer));
    assert_eq!(status, 403, "{body}");

    let barrier = std::sync::Barrier::new(2);
    let (a, b) = std::thread::scope(|s| {
        let one = || {
            let (barrier, token, send) = (&barrier, &operator_token, &send);
            s.spawn(move || {
                barrier.wait();
                send("talk-1", token)
            })
        };
        let a = one();
        let b = one();
        (a.join().expect("a"), b.join().expect("b"))
    });
    let (won, lost) = if a.0 == 201 { (a, b) } else { (b, a) };
    assert_eq!(won.0, 201, "{won:?} {lost:?}");
    assert_eq!(lost.0, 409, "{won:?} {lost:?}");
    assert_eq!(won.1["run_id"], "talk-1.2", "{won:?}");
    assert_eq!(won.1["session"]["id"], "talk-1", "{won:?}");
    assert_eq!(won.1["session"]["turn"], 2, "{won:?}");
    assert_eq!(won.1["session"]["by"], "operator-user", "{won:?}");
    server.until("talk-1.2", |r| r["status"] != "running");

    let (status, body) = send("talk-1", &operator_token);
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("latest turn is run talk-1.2")),
        "{body}"
    );
    let (status, body) = server.call("GET", "/api/runs?limit=10", operator, None);
    assert_eq!(status, 200, "{body}");
    let listed = body.to_string();
    assert!(!listed.contains("talk-1.3"), "one turn started: {listed}");

    let (_, events) = server.call("GET", "/api/runs/talk-1.2/events", operator, None);
    let first_call = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["kind"] == "agent.call_scheduled")
        .expect("a call")
        .clone();
    let handoff = &first_call["payload"]["request"]["context"]["handoff"];
    assert_eq!(handoff["session_id"], "talk-1", "{handoff}");
    assert_eq!(
        handoff["session"]["told_us"][0]["request"]["task"], "first",
        "{handoff}"
    );
    assert_eq!(
        handoff["session"]["decisions"][0]["by"], "approver-user",
        "{handoff}"
    );
    let input = events["events"][0]["payload"]["input"].clone();
    assert_eq!(input, json!({ "task": "first", "message": "and then?" }));
}
