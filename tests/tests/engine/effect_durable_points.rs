//! Where an effect's path becomes durable (issue 5 point 7: two writes per effect), seen by
//! the executor itself: during the dry run the agent's answer is not yet acknowledged; when
//! `execute` is called everything up to `effect.started` is; the result is acknowledged
//! with its verification. A crash before a write loses only what a resume decides again,
//! and the key is still applied exactly once by the executor's own ledger.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::sync::Notify;

use docket_decider::WorkflowSpec;
use docket_decider::{Action, AgentRequest, AgentResponse, Confidence};
use docket_decider::{DryRunReport, EffectReceipt, EffectRequest, Verification};
use docket_decider::{RunEvent, RunStatus, recorded_bundle, replay_check};
use docket_runtime::InProcessExecutor;
use docket_runtime::Runtime;
use docket_runtime::Workflow;
use docket_runtime::{EffectExecutor, EffectFuture};
use docket_store::{EmbeddedStore, EventStore, StoreConfig, StreamId};
use futures::StreamExt;

const BUNDLE: &str = r#"
bundle = { id = "held" }
[[agents]]
id = "external"
[[agents]]
id = "publisher"
side_effects = ["publish"]

[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = true

[interactions]
allowed = [
  { from = "external", to = "publisher" },
  { from = "publisher", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const WORKFLOW: &str = r#"
name = "held"
policy = "held.toml"
entry = "publisher"
[agents.publisher]
in_process = true
"#;

fn workflow() -> Workflow {
    Workflow {
        spec: WorkflowSpec::parse(WORKFLOW, Path::new("held.workflow.toml"))
            .expect("workflow parses"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "held.toml".into(),
    }
}

/// Which executor call never answers (a crash while it runs).
#[derive(Clone, Copy, PartialEq)]
enum Hang {
    Never,
    InDryRun,
    InVerify,
}

/// Keeps its own ledger of applications, and notes the run's last acknowledged event kind
/// whenever it is called.
struct Publisher {
    store: EmbeddedStore,
    applied: Arc<Mutex<u32>>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
    hang: Hang,
    entered: Arc<Notify>,
}

impl Publisher {
    async fn note(&self, op: &str, request: &EffectRequest) {
        let stream = StreamId::new(request.run_id.clone()).expect("run id");
        let head = self
            .store
            .head(&stream)
            .await
            .expect("head")
            .map_or(0, |h| h.seq);
        let last: Vec<_> = self.store.read(&stream, head..=head).collect().await;
        let kind = match last.as_slice() {
            [Ok(event)] => event.kind.clone(),
            _ => String::new(),
        };
        self.seen.lock().expect("seen").push((op.to_owned(), kind));
    }

    async fn maybe_hang(&self, at: Hang) {
        if self.hang == at {
            self.entered.notify_one();
            std::future::pending::<()>().await;
        }
    }
}

impl EffectExecutor for Publisher {
    fn supports_dry_run(&self) -> bool {
        true
    }

    fn dry_run<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, DryRunReport> {
        Box::pin(async move {
            self.note("dry_run", request).await;
            self.maybe_hang(Hang::InDryRun).await;
            Ok(DryRunReport {
                ok: true,
                preview: json!({}),
                message: None,
            })
        })
    }

    fn execute<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, EffectReceipt> {
        Box::pin(async move {
            self.note("execute", request).await;
            *self.applied.lock().expect("ledger") += 1;
            Ok(EffectReceipt {
                result: json!({ "post": 1 }),
                drift: None,
            })
        })
    }

    fn verify<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, Verification> {
        Box::pin(async move {
            self.note("verify", request).await;
            self.maybe_hang(Hang::InVerify).await;
            Ok(if *self.applied.lock().expect("ledger") > 0 {
                Verification::Applied {
                    result: json!({ "post": 1 }),
                }
            } else {
                Verification::NotApplied
            })
        })
    }
}

/// Asks for one publish, then finishes with its result; notes every request id it gets.
fn agent(calls: Arc<Mutex<Vec<String>>>) -> Arc<InProcessExecutor> {
    Arc::new(InProcessExecutor::new(move |r: &AgentRequest| {
        calls.lock().expect("calls").push(r.request_id.to_string());
        let done = r
            .decision_inputs
            .iter()
            .any(|i| i.output_type == "effect_result");
        let action = if done {
            Action::Finish {
                output: json!({ "published": true }),
            }
        } else {
            Action::RequestEffect {
                kind: "publish".into(),
                lane: "api".into(),
                idempotency_key: Some("post-1".into()),
                params: json!({ "text": "hello" }),
                not_before: None,
            }
        };
        AgentResponse::success(r.request_id.clone(), Confidence::High, vec![action])
    }))
}

struct Setup {
    runtime: Runtime<EmbeddedStore>,
    applied: Arc<Mutex<u32>>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
    calls: Arc<Mutex<Vec<String>>>,
    entered: Arc<Notify>,
}

fn setup(store: &EmbeddedStore, hang: Hang, applied: Arc<Mutex<u32>>) -> Setup {
    let runtime = Runtime::new(store.clone());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let entered = Arc::new(Notify::new());
    let publisher = Publisher {
        store: store.clone(),
        applied: applied.clone(),
        seen: seen.clone(),
        hang,
        entered: entered.clone(),
    };
    runtime.register_effect("publish", Arc::new(publisher));
    runtime.register_agent("publisher", agent(calls.clone()));
    Setup {
        runtime,
        applied,
        seen,
        calls,
        entered,
    }
}

async fn log(runtime: &Runtime<EmbeddedStore>, run: &str) -> Vec<RunEvent> {
    runtime
        .events(&run.into())
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.event)
        .collect()
}

fn replays(events: &[RunEvent]) {
    let Some(RunEvent::RunRequested(run)) = events.first() else {
        panic!("the log starts with run.requested");
    };
    let bundle = recorded_bundle(run).expect("bundle");
    replay_check(events, &bundle).expect("the log replays");
}

#[tokio::test]
async fn started_is_durable_before_execute_and_the_read_only_steps_share_its_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store");
    let s = setup(&store, Hang::Never, Arc::new(Mutex::new(0)));
    let outcome = s
        .runtime
        .start(&workflow(), json!({}), Some("run-h".into()))
        .await
        .expect("runs");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    assert_eq!(*s.applied.lock().expect("ledger"), 1);
    let seen = s.seen.lock().expect("seen").clone();
    let at = |op: &str| {
        seen.iter()
            .find(|(o, _)| o == op)
            .map(|(_, last)| last.clone())
            .unwrap_or_default()
    };
    // The agent's request and the dry run are not yet in the log during the dry run...
    assert_eq!(at("dry_run"), "agent.call_scheduled");
    // ...but everything up to `effect.started` is when `execute` is called...
    assert_eq!(at("execute"), "effect.started");
    // ...and the result is appended with its verification.
    assert_eq!(at("verify"), "effect.started");
    let events = log(&s.runtime, "run-h").await;
    assert_eq!(events.last().map(RunEvent::kind), Some("run.completed"));
    replays(&events);
}

#[tokio::test]
async fn a_crash_during_the_dry_run_loses_only_what_resume_decides_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store");
    let applied = Arc::new(Mutex::new(0));
    let first = setup(&store, Hang::InDryRun, applied.clone());
    let driving = first.runtime.clone();
    let task = tokio::spawn(async move {
        driving
            .start(&workflow(), json!({}), Some("run-d".into()))
            .await
            .map(|o| o.state.status())
    });
    first.entered.notified().await;
    task.abort();
    assert!(task.await.is_err_and(|e| e.is_cancelled()));
    let cut = log(&first.runtime, "run-d").await;
    assert_eq!(
        cut.iter().map(RunEvent::kind).collect::<Vec<_>>(),
        ["run.requested", "handoff.allowed", "agent.call_scheduled"],
        "the agent's answer was not yet written"
    );

    let second = setup(&store, Hang::Never, applied.clone());
    let outcome = second
        .runtime
        .resume(&"run-d".into())
        .await
        .expect("resumes");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    assert_eq!(*applied.lock().expect("ledger"), 1, "applied exactly once");
    // The unrecorded call was made again with the same request id.
    let first_calls = first.calls.lock().expect("calls").clone();
    let second_calls = second.calls.lock().expect("calls").clone();
    assert_eq!(first_calls.len(), 1);
    assert_eq!(second_calls.first(), first_calls.first());
    replays(&log(&second.runtime, "run-d").await);
}

#[tokio::test]
async fn a_crash_after_execute_before_the_result_is_durable_is_verified_not_re_executed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store");
    let applied = Arc::new(Mutex::new(0));
    let first = setup(&store, Hang::InVerify, applied.clone());
    let driving = first.runtime.clone();
    let task = tokio::spawn(async move {
        driving
            .start(&workflow(), json!({}), Some("run-v".into()))
            .await
            .map(|o| o.state.status())
    });
    first.entered.notified().await;
    task.abort();
    assert!(task.await.is_err_and(|e| e.is_cancelled()));
    assert_eq!(
        log(&first.runtime, "run-v")
            .await
            .last()
            .map(RunEvent::kind),
        Some("effect.started"),
        "applied, but the result is written with the verification"
    );

    let second = setup(&store, Hang::Never, applied.clone());
    let outcome = second
        .runtime
        .resume(&"run-v".into())
        .await
        .expect("resumes");
    assert_eq!(outcome.state.status(), RunStatus::Completed);
    assert_eq!(*applied.lock().expect("ledger"), 1, "never executed again");
    let ops: Vec<String> = second
        .seen
        .lock()
        .expect("seen")
        .iter()
        .map(|(op, _)| op.clone())
        .collect();
    assert!(!ops.contains(&"execute".to_owned()), "{ops:?}");
    let events = log(&second.runtime, "run-v").await;
    assert!(
        events.iter().any(|e| e.kind() == "effect.recovered"),
        "the resume verified the started effect"
    );
    replays(&events);
}
