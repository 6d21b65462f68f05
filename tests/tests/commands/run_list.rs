//! The run list kept in memory (issue 17 point 8): a page of `list_runs` is the same
//! whether the list was kept current while the runs were driven, loaded from the
//! digests kept beside the log by a later writer or a read-only view, or computed by reading
//! every run's log (`docket_runtime::testing::run_summaries_from_log`, the old path), for runs in every status and
//! every filter of `GET /api/runs`; a missing or stale digest is read again and rewritten.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use docket_decider::{Action, AgentRequest, AgentResponse, Confidence, RunStatus, WorkflowSpec};
use docket_runtime::{
    HumanDecision, InProcessExecutor, ListedStatus, RunPage, RunQuery, RunSummary, Runtime,
    Workflow,
};
use docket_store::{EmbeddedStore, EventStore as _, NewEvent, StoreConfig, StreamId};

const BUNDLE: &str = r#"
bundle = { id = "listing" }
agents = [{ id = "external" }, { id = "worker" }, { id = "auditor" }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

fn workflow(name: &str) -> Workflow {
    let text = format!(
        "name = {name:?}\npolicy = \"listing.toml\"\nentry = \"worker\"\n[agents.worker]\nin_process = true\n[agents.auditor]\nin_process = true\n"
    );
    Workflow {
        spec: WorkflowSpec::parse(&text, Path::new("listing.workflow.toml"))
            .expect("workflow parses"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "listing.toml".into(),
    }
}

/// Escalates `"escalate": n` times, fails on `"fail"`, hands off to an agent the bundle
/// forbids on `"forbidden"`, and finishes otherwise.
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
        if input["forbidden"] == true {
            return AgentResponse::success(
                r.request_id.clone(),
                Confidence::High,
                vec![Action::Handoff {
                    to: "auditor".into(),
                    output_type: "report".into(),
                    payload: json!({}),
                    task: None,
                }],
            );
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

fn runtime(store: EmbeddedStore) -> Runtime<EmbeddedStore> {
    let rt = Runtime::new(store);
    rt.register_agent("worker", agent());
    rt.register_agent("auditor", agent());
    rt
}

/// The first runs: one completed, and one whose driver died after recording its request
/// (running, driven by no one: its `run.requested` copied alone into a new stream, past
/// the runtime). Returns the latter's id.
async fn seed(rt: &Runtime<EmbeddedStore>) -> &'static str {
    let done = rt
        .start(&workflow("alpha"), json!({}), Some("r-done".into()))
        .await
        .expect("starts");
    assert_eq!(done.state.status(), RunStatus::Completed);
    let first = rt.events(&"r-done".into()).await.expect("events");
    let requested = &first[0];
    let payload = serde_json::to_vec(&requested.event.to_value()).expect("payload");
    rt.store()
        .append(
            &StreamId::new("r-running").expect("stream id"),
            0,
            vec![NewEvent {
                kind: "run.requested".into(),
                kind_version: 1,
                recorded_at: docket_store::WallTime(requested.recorded_at_ns),
                policy: None,
                payload,
            }],
        )
        .await
        .expect("appends");
    "r-running"
}

/// Runs in every other status, two workflows, driven by `rt`.
async fn drive_every_status(rt: &Runtime<EmbeddedStore>) {
    let (a, b) = (workflow("alpha"), workflow("beta"));
    let start = |wf: &Workflow, id: &str, input: serde_json::Value| {
        let (rt, wf, id) = (rt.clone(), wf.clone(), id.to_owned());
        async move { rt.start(&wf, input, Some(id.into())).await.expect("starts") }
    };
    let status = |o: docket_runtime::RunOutcome| o.state.status();
    assert_eq!(
        status(start(&b, "r-wait", json!({ "escalate": 1 })).await),
        RunStatus::WaitingForHuman
    );
    assert_eq!(
        status(start(&a, "r-two", json!({ "escalate": 2 })).await),
        RunStatus::WaitingForHuman
    );
    rt.decide_ticket(
        &"r-two".into(),
        "ticket-1",
        HumanDecision::approve("ana", "ok"),
    )
    .await
    .expect("decides one of two");
    start(&b, "r-failed", json!({ "fail": true })).await;
    let failed = rt
        .decide_ticket(
            &"r-failed".into(),
            "ticket-1",
            HumanDecision::deny("ana", "stop"),
        )
        .await
        .expect("denies the retry");
    assert!(failed.state.status().is_final());
    let blocked = status(start(&a, "r-blocked", json!({ "forbidden": true })).await);
    assert_eq!(blocked, RunStatus::Blocked);
    start(&b, "r-cancelled", json!({ "escalate": 1 })).await;
    assert_eq!(
        status(
            rt.cancel(&"r-cancelled".into(), "ana", "not needed")
                .await
                .expect("cancels")
        ),
        RunStatus::Cancelled
    );
}

fn queries() -> Vec<RunQuery> {
    let mut out = vec![RunQuery::default()];
    for status in [
        RunStatus::Running,
        RunStatus::WaitingForHuman,
        RunStatus::Completed,
        RunStatus::Blocked,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        out.push(RunQuery {
            status: Some(ListedStatus::Is(status)),
            ..RunQuery::default()
        });
    }
    out.push(RunQuery {
        status: Some(ListedStatus::Interrupted),
        ..RunQuery::default()
    });
    out.push(RunQuery {
        waiting: true,
        ..RunQuery::default()
    });
    out.push(RunQuery {
        workflow: Some("beta".into()),
        ..RunQuery::default()
    });
    out.push(RunQuery {
        started_after: Some(0),
        started_before: Some(i64::MAX),
        ..RunQuery::default()
    });
    out.push(RunQuery {
        started_before: Some(0),
        ..RunQuery::default()
    });
    out.push(RunQuery {
        cursor: Some("r-done".into()),
        limit: Some(2),
        ..RunQuery::default()
    });
    out
}

/// What a query keeps of every run's summary read from the log: the slow path, filtered
/// here the way `GET /api/runs` documents it.
fn expected(all: &[RunSummary], q: &RunQuery, interrupted: &str) -> RunPage {
    let mut all: Vec<&RunSummary> = all.iter().collect();
    all.sort_by(|a, b| a.run_id.as_str().cmp(b.run_id.as_str()));
    let kept: Vec<docket_runtime::ListedRun> = all
        .into_iter()
        .filter(|s| {
            q.cursor
                .as_ref()
                .is_none_or(|c| s.run_id.as_str() > c.as_str())
        })
        .map(|s| docket_runtime::ListedRun {
            summary: s.clone(),
            interrupted: s.run_id == interrupted,
        })
        .filter(|r| {
            let s = &r.summary;
            (match q.status {
                None => true,
                Some(ListedStatus::Interrupted) => r.interrupted,
                Some(ListedStatus::Is(st)) => s.status == st,
            }) && (!q.waiting || s.status == RunStatus::WaitingForHuman)
                && q.workflow.as_ref().is_none_or(|w| *w == s.workflow)
                && q.started_after
                    .is_none_or(|t| s.started_at_ms.is_some_and(|a| a >= t))
                && q.started_before
                    .is_none_or(|t| s.started_at_ms.is_some_and(|a| a < t))
        })
        .collect();
    let limit = q.limit.unwrap_or(usize::MAX);
    let next_cursor = (kept.len() > limit).then(|| kept[limit - 1].summary.run_id.to_string());
    RunPage {
        runs: kept.into_iter().take(limit).collect(),
        next_cursor,
        unreadable: Vec::new(),
    }
}

async fn check_every_query(rt: &Runtime<EmbeddedStore>, slow: &[RunSummary], running: &str) {
    for q in queries() {
        let page = rt.list_runs(&q, |run| run != running).await.expect("lists");
        assert_eq!(page, expected(slow, &q, running), "{q:?}");
    }
}

#[tokio::test]
async fn the_kept_list_the_digests_a_view_and_the_log_agree_for_every_status_and_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store opens");
    let rt = runtime(store.clone());
    let running = seed(&rt).await;
    // Loaded now: every batch below is folded in as it is appended.
    rt.load_run_list().await.expect("loads");
    drive_every_status(&rt).await;
    let slow = docket_runtime::testing::run_summaries_from_log(&rt, false)
        .await
        .expect("reads the log");
    assert_eq!(slow.len(), 7);
    let statuses: std::collections::BTreeSet<&str> =
        slow.iter().map(|s| s.status.as_str()).collect();
    assert!(statuses.len() >= 5, "{statuses:?}");
    assert!(slow.iter().all(|s| s.started_at_ms.is_some()));
    check_every_query(&rt, &slow, running).await;

    // A later writer loads from the digests, and so does a view (it reads the writer's file).
    drop(rt);
    store.close().await;
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store reopens");
    let digests = store.digests().await.expect("digests");
    assert_eq!(digests.len(), slow.len(), "every run has its digest");
    let rt = runtime(store.clone());
    check_every_query(&rt, &slow, running).await;
    drop(rt);
    store.close().await;
    let view = EmbeddedStore::open_read_only(dir.path())
        .await
        .expect("view opens");
    assert_eq!(view.digests().await.expect("digests"), digests);
    check_every_query(&runtime(view), &slow, running).await;
}

#[tokio::test]
async fn a_missing_or_stale_digest_is_read_again_and_rewritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store opens");
    let rt = runtime(store.clone());
    let running = seed(&rt).await;
    rt.load_run_list().await.expect("loads");
    drive_every_status(&rt).await;
    drop(rt);
    store.close().await;

    // Stale: a process that keeps no list approves a ticket; the digest stays behind.
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store reopens");
    let rt = runtime(store.clone());
    let done = rt
        .decide_ticket(
            &"r-wait".into(),
            "ticket-1",
            HumanDecision::approve("ana", "ok"),
        )
        .await
        .expect("approves");
    assert_eq!(done.state.status(), RunStatus::Completed);
    let head = store
        .head(&StreamId::new("r-wait").expect("id"))
        .await
        .expect("head")
        .expect("a run");
    let digest_of = |digests: &[docket_store::StreamDigest]| {
        digests
            .iter()
            .find(|d| d.stream.as_str() == "r-wait")
            .map(|d| d.seq)
    };
    let behind = digest_of(&store.digests().await.expect("digests")).expect("a digest");
    assert!(behind < head.seq, "{behind} < {}", head.seq);
    drop(rt);
    store.close().await;

    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store reopens");
    let rt = runtime(store.clone());
    let slow = docket_runtime::testing::run_summaries_from_log(&rt, false)
        .await
        .expect("reads the log");
    assert_eq!(
        slow.iter().find(|s| s.run_id == "r-wait").map(|s| s.status),
        Some(RunStatus::Completed)
    );
    check_every_query(&rt, &slow, running).await;
    assert_eq!(
        digest_of(&store.digests().await.expect("digests")),
        Some(head.seq),
        "the stale digest was rewritten at the run's head"
    );
    drop(rt);
    store.close().await;

    // Missing: the digests file (a cache) is deleted; the list is read from the log and its
    // digests written again.
    std::fs::remove_file(dir.path().join("digests")).expect("removes the digests");
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store reopens");
    assert!(store.digests().await.expect("digests").is_empty());
    let rt = runtime(store.clone());
    check_every_query(&rt, &slow, running).await;
    assert_eq!(store.digests().await.expect("digests").len(), slow.len());

    // A digest the log does not continue (a different event hash at its sequence) is not
    // believed.
    let wrong = docket_store::StreamDigest {
        stream: StreamId::new("r-done").expect("id"),
        seq: 1,
        event_hash: docket_store::Hash([7; 32]),
        bytes: br#"{"v":1,"run_id":"r-done","workflow":"forged","status":"running","events":1,"open_tickets":[],"overridable":false}"#.to_vec(),
    };
    store.put_digests(vec![wrong]).await.expect("writes");
    drop(rt);
    let rt = runtime(store.clone());
    check_every_query(&rt, &slow, running).await;
}
