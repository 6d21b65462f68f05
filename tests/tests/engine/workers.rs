//! Workers over PostgreSQL (docs/postgres.md, "Workers"): two workers share the runs of
//! one database; one dies mid-run without giving anything back, and its runs go on under
//! the other, every effect applied once (counted by the executor's own ledger), every
//! chain sound and every log replaying; and the database restarted at once mid-run, after
//! which the worker reconnects and every run completes, nothing acknowledged lost; and a
//! run cancelled while a worker is inside one of its effects ends at the cancellation.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use docket_app::{App, Store, WorkerConfig, work};
use docket_decider::{
    Action, AgentRequest, AgentResponse, Confidence, DryRunReport, EffectReceipt, EffectRequest,
    RunStatus, Verification, WorkflowSpec, recorded_bundle, replay_check,
};
use docket_runtime::{EffectExecutor, EffectFuture, InProcessExecutor, Runtime, Workflow};
use docket_store::{EventStore, StreamId};
use docket_store_postgres::{PostgresConfig, PostgresStore, TestCluster};

const BUNDLE: &str = r#"
bundle = { id = "shared-effects" }
[[agents]]
id = "external"
[[agents]]
id = "publisher"
side_effects = ["publish"]

[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = false
retry_cap = 1

[interactions]
allowed = [
  { from = "external", to = "publisher" },
  { from = "publisher", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const WORKFLOW: &str = r#"
name = "shared-effects"
policy = "shared-effects.toml"
entry = "publisher"
[agents.publisher]
in_process = true
"#;

/// Publishes per run.
const POSTS: usize = 3;

fn workflow() -> Workflow {
    Workflow {
        spec: WorkflowSpec::parse(WORKFLOW, Path::new("shared-effects.workflow.toml"))
            .expect("workflow parses"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "shared-effects.toml".into(),
    }
}

/// Applications per idempotency key, kept by the executor: docket must keep each at 1.
#[derive(Default)]
struct Ledger(Mutex<BTreeMap<String, u32>>);

impl Ledger {
    fn applied(&self, key: &str) -> u32 {
        self.0
            .lock()
            .expect("ledger")
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

/// Applies on every `execute` it gets, so a count above 1 would be docket's fault; it
/// yields first, so a worker can die with an execution in flight.
struct Publisher(Arc<Ledger>);

impl EffectExecutor for Publisher {
    fn supports_dry_run(&self) -> bool {
        false
    }

    fn dry_run<'a>(&'a self, _: &'a EffectRequest) -> EffectFuture<'a, DryRunReport> {
        Box::pin(async move {
            Ok(DryRunReport {
                ok: true,
                preview: Value::Null,
                message: None,
            })
        })
    }

    fn execute<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, EffectReceipt> {
        Box::pin(async move {
            tokio::task::yield_now().await;
            *self
                .0
                .0
                .lock()
                .expect("ledger")
                .entry(request.idempotency_key.clone())
                .or_default() += 1;
            Ok(EffectReceipt {
                result: json!({ "post": request.idempotency_key }),
                drift: None,
            })
        })
    }

    fn verify<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, Verification> {
        Box::pin(async move {
            Ok(if self.0.applied(&request.idempotency_key) > 0 {
                Verification::Applied {
                    result: json!({ "post": request.idempotency_key }),
                }
            } else {
                Verification::NotApplied
            })
        })
    }
}

/// Asks for [`POSTS`] publishes, keyed by its run, one after another; then finishes.
fn agent() -> Arc<InProcessExecutor> {
    Arc::new(InProcessExecutor::new(move |r: &AgentRequest| {
        let done = r
            .decision_inputs
            .iter()
            .filter(|i| i.output_type == "effect_result")
            .count();
        let action = if done < POSTS {
            Action::RequestEffect {
                kind: "publish".into(),
                lane: "api".into(),
                idempotency_key: Some(format!("{}-{done}", r.run_id)),
                params: json!({ "n": done }),
                not_before: None,
            }
        } else {
            Action::Finish {
                output: json!({ "posts": done }),
            }
        };
        AgentResponse::success(r.request_id.clone(), Confidence::High, vec![action])
    }))
}

async fn app(url: &str, ledger: &Arc<Ledger>, data: &Path) -> App {
    app_publishing(url, Arc::new(Publisher(ledger.clone())), data).await
}

/// [`app`] with the publishes made by `publisher`.
async fn app_publishing(url: &str, publisher: Arc<dyn EffectExecutor>, data: &Path) -> App {
    let store = PostgresStore::open(PostgresConfig::new(url))
        .await
        .expect("the database opens");
    let runtime = Runtime::new(Store::Postgres(store));
    runtime.register_agent("publisher", agent());
    runtime.register_effect("publish", publisher);
    App::new(runtime, data, docket_evidence::KeyPlace::default(), |_| {})
}

/// A [`Publisher`] whose first publish of a run waits, once it has said so, until the
/// test lets it go: a person can cancel the run while its worker is inside an effect.
struct Held {
    publisher: Publisher,
    entered: Arc<tokio::sync::Notify>,
    open: Arc<tokio::sync::Semaphore>,
}

impl EffectExecutor for Held {
    fn supports_dry_run(&self) -> bool {
        false
    }

    fn dry_run<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, DryRunReport> {
        self.publisher.dry_run(request)
    }

    fn execute<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, EffectReceipt> {
        Box::pin(async move {
            if request.idempotency_key.ends_with("-0") {
                self.entered.notify_one();
                self.open.acquire().await.expect("the gate").forget();
            }
            self.publisher.execute(request).await
        })
    }

    fn verify<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, Verification> {
        self.publisher.verify(request)
    }
}

/// Runs recorded and queued for workers, and what the test checks them with.
struct Queued {
    data: tempfile::TempDir,
    ledger: Arc<Ledger>,
    starter: App,
    shared: PostgresStore,
    runs: Vec<String>,
}

/// `count` runs named `PREFIX-NN` recorded in the database at `url` (not driven: the
/// workers drive them) and queued.
async fn queued(url: &str, prefix: &str, count: usize) -> Queued {
    let data = tempfile::tempdir().expect("tempdir");
    let ledger = Arc::new(Ledger::default());
    let starter = app(url, &ledger, data.path()).await;
    let shared = starter
        .runtime()
        .store()
        .postgres()
        .expect("postgres")
        .clone();
    let runs: Vec<String> = (0..count).map(|i| format!("{prefix}-{i:02}")).collect();
    for run in &runs {
        let _recorded = starter
            .runtime()
            .record_start(&workflow(), json!({}), Some(run.as_str().into()))
            .await
            .expect("the run is recorded");
        shared
            .enqueue(
                &StreamId::new(run.as_str()).expect("id"),
                docket_store_postgres::RunPriority::Normal,
            )
            .await
            .expect("queued");
    }
    Queued {
        data,
        ledger,
        starter,
        shared,
        runs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_workers_runs_go_on_under_another_and_no_effect_is_applied_twice() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let Queued {
        data,
        ledger,
        starter,
        shared,
        runs,
    } = queued(&db.url, "run", 24).await;
    let config = |name: &str| WorkerConfig {
        concurrency: 4,
        lease: Duration::from_secs(1),
        renew_every: Duration::from_millis(250),
        ..WorkerConfig::new(name)
    };
    let doomed = tokio::spawn(work(
        app(&db.url, &ledger, data.path()).await,
        config("doomed"),
        std::future::pending(),
    ));
    // The doomed worker dies once it holds runs: nothing is given back, its leases lapse.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let workers = shared.workers().await.expect("workers");
        if workers.iter().any(|w| w.name == "doomed" && w.holds > 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the first worker claimed nothing in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    doomed.abort();
    let _ = doomed.await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let survivor = tokio::spawn(work(
        app(&db.url, &ledger, data.path()).await,
        config("survivor"),
        async {
            let _ = stopped.await;
        },
    ));
    // Every run finishes, within the lease plus the time to drive them.
    let deadline = Instant::now() + Duration::from_secs(90);
    for run in &runs {
        loop {
            let state = starter
                .runtime()
                .state(&run.as_str().into())
                .await
                .expect("state");
            if state.status() == RunStatus::Completed {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "run {run} is still {:?} after 90 s",
                state.status()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let _ = stop.send(());
    let report = survivor.await.expect("joins").expect("the survivor worked");
    assert!(report.claimed > 0, "{report:?}");
    for run in &runs {
        for n in 0..POSTS {
            assert_eq!(ledger.applied(&format!("{run}-{n}")), 1, "{run}, post {n}");
        }
        let stream = StreamId::new(run.as_str()).expect("id");
        let verified = shared.verify(&stream).await.expect("verifies");
        assert!(verified.is_sound(), "{run}: {verified:?}");
        let events: Vec<_> = starter
            .runtime()
            .events(&run.as_str().into())
            .await
            .expect("events")
            .into_iter()
            .map(|e| e.event)
            .collect();
        let Some(docket_decider::RunEvent::RunRequested(requested)) = events.first() else {
            panic!("{run} starts with run.requested");
        };
        let bundle = recorded_bundle(requested).expect("the recorded bundle compiles");
        replay_check(&events, &bundle).expect("the log replays");
    }
    // Nothing is held once the survivor stopped.
    assert!(
        shared
            .leases()
            .await
            .expect("leases")
            .iter()
            .all(|l| l.holder.is_none()),
        "leases are given back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_restarted_mid_run_loses_nothing_and_the_runs_go_on() {
    // A cluster of its own: the restart must not reach the other tests' databases.
    let Some(cluster) = TestCluster::private() else {
        return;
    };
    let db = cluster.database();
    let Queued {
        data,
        ledger,
        starter,
        shared,
        runs,
    } = queued(&db.url, "restart", 12).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(work(
        app(&db.url, &ledger, data.path()).await,
        WorkerConfig {
            concurrency: 3,
            lease: Duration::from_secs(2),
            renew_every: Duration::from_millis(300),
            ..WorkerConfig::new("steady")
        },
        async {
            let _ = stopped.await;
        },
    ));
    // Once some effect was applied, the server goes down at once and comes back.
    let deadline = Instant::now() + Duration::from_secs(30);
    while ledger.0.lock().expect("ledger").is_empty() {
        assert!(Instant::now() < deadline, "no effect applied in 30 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cluster.restart();
    let deadline = Instant::now() + Duration::from_secs(120);
    for run in &runs {
        loop {
            let state = match starter.runtime().state(&run.as_str().into()).await {
                Ok(state) => state,
                // The starter's own connections are re-made as they are used.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            if state.status() == RunStatus::Completed {
                break;
            }
            if Instant::now() >= deadline {
                let leases = shared.leases().await;
                panic!(
                    "run {run} is still {:?} after 120 s; leases {leases:?}",
                    state.status()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let _ = stop.send(());
    worker.await.expect("joins").expect("the worker worked");
    for run in &runs {
        for n in 0..POSTS {
            assert_eq!(ledger.applied(&format!("{run}-{n}")), 1, "{run}, post {n}");
        }
        let stream = StreamId::new(run.as_str()).expect("id");
        assert!(
            shared.verify(&stream).await.expect("verifies").is_sound(),
            "{run}"
        );
    }
}

/// A person cancels a run (from another process) while a worker is inside its first
/// effect: the worker's next append is refused as written after the cancellation, no
/// later effect is applied, and nothing follows `run.cancelled` in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cancelled_while_a_worker_drives_it_ends_there() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let Queued {
        data,
        ledger,
        starter,
        shared,
        runs,
    } = queued(&db.url, "cancelled", 1).await;
    let run = runs[0].as_str();
    let (entered, open) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Semaphore::new(0)),
    );
    let held = Held {
        publisher: Publisher(ledger.clone()),
        entered: entered.clone(),
        open: open.clone(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(work(
        app_publishing(&db.url, Arc::new(held), data.path()).await,
        WorkerConfig {
            concurrency: 1,
            lease: Duration::from_secs(5),
            renew_every: Duration::from_millis(250),
            ..WorkerConfig::new("busy")
        },
        async {
            let _ = stopped.await;
        },
    ));
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the worker reached the first effect in 30 s");
    let cancelled = starter
        .runtime()
        .cancel(&run.into(), "ana", "wrong audience")
        .await
        .expect("the cancellation is recorded");
    assert_eq!(cancelled.state.status(), RunStatus::Cancelled);
    let at_cancel = shared
        .head(&StreamId::new(run).expect("id"))
        .await
        .expect("head")
        .expect("the run")
        .seq;
    open.add_permits(1);
    // The worker gives the run back; nobody holds it or waits to.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let leases = shared.leases().await.expect("leases");
        let lease = leases.iter().find(|l| l.stream.as_str() == run);
        if lease.is_some_and(|l| l.holder.is_none() && !l.runnable) {
            break;
        }
        assert!(Instant::now() < deadline, "{run} is still held: {leases:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(());
    let report = worker.await.expect("joins").expect("the worker worked");
    let events: Vec<_> = starter
        .runtime()
        .events(&run.into())
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        events.len() as u64,
        at_cancel,
        "nothing appended after the cancellation: {:?}",
        events
            .iter()
            .skip(usize::try_from(at_cancel).unwrap_or(0))
            .collect::<Vec<_>>()
    );
    assert!(
        matches!(
            events.last(),
            Some(docket_decider::RunEvent::RunCancelled(_))
        ),
        "{:?}",
        events.last()
    );
    assert_eq!(
        ledger.applied(&format!("{run}-1")),
        0,
        "no later post: {report:?}"
    );
    let stream = StreamId::new(run).expect("id");
    assert!(shared.verify(&stream).await.expect("verifies").is_sound());
    let Some(docket_decider::RunEvent::RunRequested(requested)) = events.first() else {
        panic!("{run} starts with run.requested");
    };
    let bundle = recorded_bundle(requested).expect("the recorded bundle compiles");
    replay_check(&events, &bundle).expect("the log replays");
}
