//! Forensic replay (docs/replay.md): a recorded run's decisions re-derived, and a log
//! whose decision was changed found, with where and what differs.

use std::path::Path;

use docket_decider::RunEvent;
use docket_replay::{ChangeKind, DIVERGENCE, replay, what_if};
use docket_runtime::Runtime;
use docket_store::{EmbeddedStore, StoreConfig};
use docket_tests::{docket_on, exit_code, stdout_text};

/// A copy of the geo golden log of the current decider version, in `dir`.
fn golden_geo(dir: &Path) {
    docket_tests::golden_log_copy(&format!("v{}", docket_decider::DECIDER_VERSION), "geo", dir);
}

async fn events(dir: &Path) -> Vec<RunEvent> {
    let store = EmbeddedStore::open(dir, StoreConfig::default())
        .await
        .expect("the store opens");
    let runtime = Runtime::new(store);
    runtime
        .events(&"golden-geo".into())
        .await
        .expect("the run reads")
        .into_iter()
        .map(|e| e.event)
        .collect()
}

#[tokio::test]
async fn a_recorded_run_replays_and_a_changed_decision_is_found_with_what_differs() {
    let dir = tempfile::tempdir().expect("tempdir");
    golden_geo(dir.path());
    let mut log = events(dir.path()).await;
    let report = replay(&log).expect("replays");
    assert!(report.reproduced(), "{report:?}");
    assert_eq!(report.inputs + report.decisions, log.len());
    assert_eq!(report.status.as_str(), "completed");
    assert!(report.output.is_some());

    // Someone edits what Reasoning handed to Strategy: the decider, given the same
    // recorded answer, delivers something else, and replay says where.
    let at = log
        .iter()
        .position(|e| matches!(e, RunEvent::HandoffAllowed { to, .. } if to == "strategy"))
        .expect("a handoff to strategy");
    let RunEvent::HandoffAllowed { delivered, .. } = &mut log[at] else {
        unreachable!()
    };
    *delivered = std::sync::Arc::new(serde_json::json!({"gaps": []}));
    let report = replay(&log).expect("replays");
    let divergence = report.divergence.expect("the change is found");
    assert_eq!(divergence.code, DIVERGENCE);
    let input = log[..at]
        .iter()
        .rposition(RunEvent::is_input)
        .expect("the batch's input");
    assert_eq!(divergence.seq, input as u64 + 1);
    assert!(
        divergence
            .differences
            .iter()
            .any(|d| d.path.starts_with("/delivered")),
        "{divergence:?}"
    );
    assert!(
        divergence.why.contains("handoff.allowed"),
        "{}",
        divergence.why
    );
}

/// A later build may word a decision's reason otherwise: replay reports the decisions
/// reproduced and names the places worded otherwise, with both texts.
#[tokio::test]
async fn a_reason_worded_otherwise_is_reported_as_such_not_as_a_divergence() {
    let dir = tempfile::tempdir().expect("tempdir");
    golden_geo(dir.path());
    let mut log = events(dir.path()).await;
    let at = log
        .iter()
        .position(|e| matches!(e, RunEvent::HandoffAllowed { to, .. } if to == "strategy"))
        .expect("a handoff to strategy");
    let mut value = serde_json::to_value(&log[at]).expect("serializes");
    let recorded = value["decision"]["reason"].clone();
    value["decision"]["reason"] = serde_json::json!("worded by an earlier build");
    log[at] = serde_json::from_value(value).expect("an event");
    let report = replay(&log).expect("replays");
    assert!(report.reproduced(), "{report:?}");
    assert_eq!(report.reproduced_decisions, report.decisions);
    assert_eq!(report.reworded_decisions, 1, "{report:?}");
    let rewording = &report.rewordings[0];
    assert_eq!(
        (rewording.seq, rewording.kind),
        (at as u64 + 1, "handoff.allowed")
    );
    assert_eq!(rewording.differences.len(), 1, "{rewording:?}");
    let difference = &rewording.differences[0];
    assert_eq!(difference.path, "/decision/reason");
    assert_eq!(
        difference.recorded,
        Some(serde_json::json!("worded by an earlier build"))
    );
    assert_eq!(difference.decided, Some(recorded));
}

/// A run recorded by a decider version retired at the release baseline is refused by
/// `docket replay`, naming its version, rather than decided by another behaviour.
#[test]
fn docket_replay_refuses_a_run_of_a_retired_decider_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    docket_tests::golden_log_copy("formats/store-2-encoding-2", "geo", dir.path());
    let out = docket_on(dir.path(), &["replay", "golden-geo"]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned() + &stdout_text(&out);
    assert_ne!(exit_code(&out), 0, "{said}");
    assert!(
        said.contains("decider version 11") && said.contains("no longer decides as"),
        "{said}"
    );
    // Reading it still works: the log is sound.
    let out = docket_on(dir.path(), &["events", "golden-geo"]);
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
}

#[test]
fn docket_replay_reports_a_recorded_run_reproduced() {
    let dir = tempfile::tempdir().expect("tempdir");
    golden_geo(dir.path());
    let out = docket_on(dir.path(), &["replay", "golden-geo"]);
    let text = stdout_text(&out);
    assert_eq!(exit_code(&out), 0, "{text}");
    assert!(
        text.contains("every decision reproduced") && text.contains("result: completed"),
        "{text}"
    );
    // What-if under the very bundle the run recorded: nothing would change.
    let log = docket_on(dir.path(), &["events", "golden-geo", "--json"]);
    let first: serde_json::Value =
        serde_json::from_str(stdout_text(&log).lines().next().expect("run.requested"))
            .expect("JSON");
    let bundle = dir.path().join("recorded.toml");
    std::fs::write(
        &bundle,
        first["payload"]["bundle_source"]
            .as_str()
            .expect("the bundle text"),
    )
    .expect("write bundle");
    let out = docket_on(
        dir.path(),
        &[
            "replay",
            "golden-geo",
            "--policies",
            bundle.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(exit_code(&out), 0);
    assert!(
        stdout_text(&out).contains("nothing would change"),
        "{}",
        stdout_text(&out)
    );
    let out = docket_on(
        dir.path(),
        &[
            "replay",
            "--all",
            "--policies",
            bundle.to_str().expect("utf-8"),
        ],
    );
    assert!(
        stdout_text(&out).contains("1 runs re-decided under")
            && stdout_text(&out).contains("0 would change"),
        "{}",
        stdout_text(&out)
    );
    let out = docket_on(dir.path(), &["replay", "--all", "--json"]);
    let report: serde_json::Value =
        serde_json::from_str(stdout_text(&out).trim()).expect("one JSON report");
    assert_eq!(report["run_id"], "golden-geo");
    assert!(report["divergence"].is_null());
}

#[tokio::test]
async fn what_if_reports_exactly_the_handoffs_a_newly_blocked_field_would_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    golden_geo(dir.path());
    let log = events(dir.path()).await;
    let Some(RunEvent::RunRequested(run)) = log.first() else {
        panic!("a run's log");
    };
    let compile = |source: &str| {
        docket_policies::PolicyBundle::from_toml_str(source, "new.toml").expect("compiles")
    };

    // The same bundle: nothing changes.
    let same = what_if(
        &log,
        &compile(&run.bundle_source),
        &run.bundle_source,
        "new.toml",
    )
    .expect("re-decides");
    assert!(same.unchanged(), "{same:?}");

    // Block `focus_brand` on every handoff: exactly the handoffs that carried it change,
    // and nothing else (no later rule reads it).
    let block = |field: &str| {
        run.bundle_source.replace(
            "[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"",
            &format!(
                "[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\nblocked_context_fields = [\"{field}\"]"
            ),
        )
    };
    let source = block("focus_brand");
    assert_ne!(source, run.bundle_source, "the bundle has the section");
    let report = what_if(&log, &compile(&source), &source, "new.toml").expect("re-decides");
    let carried: Vec<u64> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(e, RunEvent::HandoffAllowed { delivered, .. } if delivered.get("focus_brand").is_some())
        })
        .map(|(i, _)| i as u64 + 1)
        .collect();
    assert!(carried.len() >= 3, "{carried:?}");
    let changed: Vec<u64> = report.changes.iter().map(|c| c.seq).collect();
    assert_eq!(changed, carried, "{report:?}");
    assert!(report.path_change.is_none(), "{report:?}");
    for change in &report.changes {
        assert_eq!(change.kind, ChangeKind::Stricter, "{change:?}");
        assert_eq!(change.fields_newly_removed, ["focus_brand"], "{change:?}");
        assert!(change.fields_newly_passed.is_empty());
    }

    // Block `gaps` instead: Strategy would not see Reasoning's gaps, so its recorded
    // recommendations would cite gaps it was never given, and the provenance rule at
    // the exit checkpoint would have blocked the run: the path changes there, and the
    // recorded completion would not have happened.
    let source = block("gaps");
    let report = what_if(&log, &compile(&source), &source, "new.toml").expect("re-decides");
    let path = report.path_change.as_ref().expect("the path changes");
    assert!(path.decided_kinds.contains(&"run.blocked"), "{path:?}");
    assert_eq!(report.not_as_recorded.get("run.completed"), Some(&1));
    let denied = report.changes.last().expect("the denial");
    assert_eq!(denied.rule_after, "guardrail-2-provenance");
}

#[test]
fn docket_inspect_shows_a_run_at_an_event_and_what_an_agent_received() {
    let dir = tempfile::tempdir().expect("tempdir");
    golden_geo(dir.path());
    let out = docket_on(dir.path(), &["events", "golden-geo", "--json"]);
    let events: Vec<serde_json::Value> = stdout_text(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    // The call that hands Strategy its work: what it received, and the recorded hash.
    let call = events
        .iter()
        .find(|e| {
            e["kind"] == "agent.call_scheduled"
                && e["payload"]["request"]["target_agent"] == "strategy"
        })
        .expect("strategy's call");
    let seq = call["seq"].as_u64().expect("seq").to_string();
    let out = docket_on(dir.path(), &["inspect", "golden-geo", "--at", &seq]);
    let text = stdout_text(&out);
    assert_eq!(exit_code(&out), 0, "{text}");
    assert!(text.contains("what strategy received"), "{text}");
    assert!(
        text.contains("flow: at strategy (position 6 of 8)"),
        "{text}"
    );
    assert!(
        text.contains(call["hash"].as_str().expect("hash")),
        "{text}"
    );
    let out = docket_on(
        dir.path(),
        &["inspect", "golden-geo", "--at", &seq, "--json"],
    );
    let value: serde_json::Value = serde_json::from_str(&stdout_text(&out)).expect("JSON");
    assert_eq!(value["event"]["request"], call["payload"]["request"]);
    // A point the run does not have is an error saying so.
    let out = docket_on(
        dir.path(),
        &["inspect", "golden-geo", "--at", "last-denial"],
    );
    assert_eq!(exit_code(&out), 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("this run has no denial"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
