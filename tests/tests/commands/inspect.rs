//! `docket inspect` (docs/replay.md#inspect): the run at any point, and for a call or a
//! handoff exactly the request the receiving agent was sent, with a hash recomputed here
//! from the exported log alone.

use crate::canned::{Recorder, WORKER_BUNDLE, golden};
use docket_decider::{Action, DECIDER_VERSION, RunEvent};
use docket_replay::{inspect, point_in};
use docket_tests::{docket_on, exit_code, stdout_text};
use serde_json::{Value, json};

/// Compact JSON with object keys sorted at every depth, written here rather than taken
/// from docket: what an auditor's own tool would do.
fn sorted(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), sorted(&map[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(sorted).collect::<Vec<_>>().join(",")
        ),
        scalar => scalar.to_string(),
    }
}

fn events_json(dir: &std::path::Path, run: &str) -> Vec<Value> {
    let out = docket_on(dir, &["events", run, "--json"]);
    stdout_text(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

#[test]
fn a_handoff_shows_the_request_its_receiver_got_with_a_hash_recomputed_from_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    golden(dir.path(), DECIDER_VERSION, "geo");
    let events = events_json(dir.path(), "golden-geo");
    let handoff = events
        .iter()
        .find(|e| e["kind"] == "handoff.allowed" && e["payload"]["to"] == "strategy")
        .expect("reasoning → strategy");
    let seq = handoff["seq"].as_u64().expect("seq").to_string();
    let out = docket_on(
        dir.path(),
        &["inspect", "golden-geo", "--at", &seq, "--json"],
    );
    assert_eq!(exit_code(&out), 0);
    let found: Value = serde_json::from_str(&stdout_text(&out)).expect("JSON");
    let received = &found["received"];
    // The call that carried it: the next call to strategy, as the log exports it.
    let call = events
        .iter()
        .find(|e| {
            e["kind"] == "agent.call_scheduled"
                && e["seq"].as_u64() > handoff["seq"].as_u64()
                && e["payload"]["request"]["target_agent"] == "strategy"
        })
        .expect("strategy's call");
    assert_eq!(received["seq"], call["seq"]);
    assert_eq!(received["request"], call["payload"]["request"]);
    let at = received["delivered_at"].as_str().expect("where it sits");
    assert_eq!(
        received["request"].pointer(at),
        Some(&handoff["payload"]["delivered"]),
        "{at}"
    );
    // The hash is BLAKE3 of the exported request's canonical JSON.
    let recomputed = blake3::hash(sorted(&call["payload"]["request"]).as_bytes());
    assert_eq!(received["request_hash"], recomputed.to_hex().as_str());
    // The handoff context the receiver got is part of it.
    assert_eq!(
        received["request"]["context"]["handoff"]["position"]["agent"],
        "strategy"
    );
    // State at that point: the flow's position, the root episode's budget with what is
    // left, nothing pending (the call comes in the same batch, after this event).
    assert_eq!(found["flow"]["agent"], "strategy");
    let tokens = &found["episodes"][0]["budgets"]
        .as_array()
        .expect("budgets")
        .iter()
        .find(|b| b["dimension"] == "tokens")
        .expect("tokens")
        .clone();
    assert_eq!(
        tokens["left"].as_u64(),
        Some(tokens["limit"].as_u64().expect("limit") - tokens["used"].as_u64().expect("used"))
    );
    let text = stdout_text(&docket_on(
        dir.path(),
        &["inspect", "golden-geo", "--at", &seq],
    ));
    assert!(
        text.contains("what strategy received with it")
            && text.contains(received["request_hash"].as_str().expect("hash"))
            && text.contains("left)"),
        "{text}"
    );
}

#[test]
fn semantic_points_name_the_events_they_find_and_say_when_a_run_has_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    golden(dir.path(), DECIDER_VERSION, "fallback");
    let events = events_json(dir.path(), "golden-fallback");
    let seq = |pred: &dyn Fn(&Value) -> bool| {
        events.iter().find(|e| pred(e)).expect("found")["seq"]
            .as_u64()
            .expect("seq")
    };
    let first_failure =
        seq(&|e| e["kind"] == "agent.responded" && e["payload"]["response"]["status"] == "ERROR");
    let last_handoff = events
        .iter()
        .rev()
        .find(|e| e["kind"] == "handoff.allowed")
        .expect("a handoff")["seq"]
        .as_u64()
        .expect("seq");
    for (point, expected) in [
        ("first-failure", first_failure),
        ("last-handoff", last_handoff),
        ("first-call", seq(&|e| e["kind"] == "agent.call_scheduled")),
        ("first-escalation", 0),
    ] {
        let out = docket_on(
            dir.path(),
            &["inspect", "golden-fallback", "--at", point, "--json"],
        );
        if expected == 0 {
            assert_eq!(exit_code(&out), 1, "{point}");
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("this run has no escalation"),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        }
        let found: Value = serde_json::from_str(&stdout_text(&out)).expect("JSON");
        assert_eq!(found["seq"].as_u64(), Some(expected), "{point}");
    }
    // An answer shows the request it answered.
    let out = docket_on(
        dir.path(),
        &[
            "inspect",
            "golden-fallback",
            "--at",
            "first-failure",
            "--json",
        ],
    );
    let found: Value = serde_json::from_str(&stdout_text(&out)).expect("JSON");
    assert_eq!(found["received"]["seq"].as_u64(), Some(first_failure - 1));
    let out = docket_on(
        dir.path(),
        &["inspect", "golden-fallback", "--at", "first-overrride"],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("first-override"),
        "an unknown point lists the known ones"
    );
}

#[test]
fn circuit_readings_tool_calls_and_tickets_as_they_stood() {
    // The worker's breaker read open (50 failures across runs, the last just now): its
    // call is not made, and the run waits for a human.
    let mut run = Recorder::worker(WORKER_BUNDLE);
    run.circuit_read(50);
    let log = run.log.clone();
    let last = point_in(&log, "last").expect("last");
    let found = inspect(&log, last);
    assert_eq!(found.circuits.len(), 1, "{found:#?}");
    let c = &found.circuits[0];
    assert_eq!(
        (
            c.agent.as_str(),
            c.state,
            c.consecutive_failures,
            c.degraded_calls
        ),
        ("worker", "open", 50, 1),
        "{c:?}"
    );
    assert_eq!(c.rule, "defaults.circuit_breaker");
    assert_eq!(c.window.map(|w| (w.calls, w.failures)), Some((50, 50)));
    assert_eq!(
        c.read_at,
        point_in(&log, "first-circuit").expect("read") as u64
    );
    assert_eq!(found.status, "waiting for a human", "{found:#?}");
    assert_eq!(found.open_tickets.len(), 1);
    // Before the reading, no circuit is recorded.
    assert!(inspect(&log, 3).circuits.is_empty());

    // A tool call scheduled and not returned yet is pending at its scheduling.
    let mut run = Recorder::worker(WORKER_BUNDLE);
    run.respond(
        vec![Action::CallTool {
            name: "probe".into(),
            arguments: json!("x"),
        }],
        0,
    );
    let log = run.log.clone();
    let scheduled = log
        .iter()
        .position(|e| matches!(e, RunEvent::ToolCallScheduled(_)))
        .expect("scheduled")
        + 1;
    let found = inspect(&log, scheduled);
    assert_eq!(found.pending_tools.len(), 1, "{found:#?}");
    assert_eq!(found.pending_tools[0].name, "probe");
    assert_eq!(found.pending_tools[0].phase, "scheduled");
    // The call whose answer asked for it is no longer pending.
    assert!(found.pending_calls.is_empty(), "{found:#?}");
}
