//! Forensic replay (docs/replay.md): a recorded run's decisions re-derived, and a log
//! whose decision was changed found, with where and what differs.

use std::path::Path;

use docket_decider::RunEvent;
use docket_replay::{DIVERGENCE, replay};
use docket_runtime::Runtime;
use docket_store::{EmbeddedStore, StoreConfig};
use docket_tests::{docket_on, exit_code, stdout_text, workspace_root};

/// A copy of the geo golden log of the current decider version, in `dir`.
fn golden_geo(dir: &Path) {
    let from = workspace_root()
        .join("tests/golden")
        .join(format!("v{}", docket_decider::DECIDER_VERSION))
        .join("geo");
    for file in ["DOCKET-STORE", "log/00000000000000000001.seg"] {
        let to = dir.join(file);
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        std::fs::copy(from.join(file), to).expect("copy the golden log");
    }
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
    let out = docket_on(dir.path(), &["replay", "--all", "--json"]);
    let report: serde_json::Value =
        serde_json::from_str(stdout_text(&out).trim()).expect("one JSON report");
    assert_eq!(report["run_id"], "golden-geo");
    assert!(report["divergence"].is_null());
}
