//! docket on PostgreSQL against the embedded default, measured in the same run on this
//! machine, with PostgreSQL (a private cluster that syncs its WAL on commit, as production
//! servers do) sharing its cores (docs/postgres.md):
//! - governed GEO pipeline runs/s at `DOCKET_BENCH_CONCURRENT` (1000) concurrent runs: the
//!   embedded default (each run started and driven by the process that records it), then
//!   runs queued in the database and driven by one worker, then by two (each with its own
//!   store and connections, as two processes would have);
//! - p50/p99 of one governed handoff appended to PostgreSQL (decision, data contract,
//!   scoping, sealing and the transaction), against a plain `INSERT … COMMIT` of the same
//!   bytes on the same database;
//! - takeover: a worker holding runs stops without giving anything back (as a killed one
//!   does); the time until another worker holds them all, against its lease plus its poll.
//!
//! Run with `cargo bench -p docket-bench-engine --bench postgres_pipeline`; needs
//! PostgreSQL's server programs (Debian's `postgresql`, or `DOCKET_PG_BIN`).
#![allow(clippy::print_stdout)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_app::{App, Store, WorkerConfig, work};
use docket_decider::{AgentResponded, Command, RunEvent, RunRequested, RunState, decide};
use docket_example_geo::governance;
use docket_policies::PolicyBundle;
use docket_runtime::{Runtime, Workflow};
use docket_store::{EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime};
use docket_store_postgres::{
    DEFAULT_PRIORITY_AGING, PostgresConfig, PostgresStore, RunPriority, TestCluster,
};

use common::{input, input_naming, percentile, register, workflow};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

async fn postgres(url: &str, connections: usize) -> PostgresStore {
    let mut config = PostgresConfig::new(url);
    config.connections = connections;
    PostgresStore::open(config)
        .await
        .expect("the database opens")
}

fn app(store: PostgresStore, data: &std::path::Path) -> App {
    let runtime = Runtime::new(Store::Postgres(store));
    register(&runtime);
    App::new(runtime, data, docket_evidence::KeyPlace::default(), |_| {})
}

/// `runs` runs started and driven concurrently on the embedded default.
async fn embedded(wf: &Workflow, runs: usize) -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store");
    let runtime = Runtime::new(store);
    register(&runtime);
    let input = input();
    let started = Instant::now();
    let tasks: Vec<_> = (0..runs)
        .map(|i| {
            let (runtime, wf) = (runtime.clone(), wf.clone());
            let input = input_naming(&input, format!("Brand e {i}"));
            tokio::spawn(async move {
                runtime
                    .start(&wf, input, Some(format!("e-{i}").into()))
                    .await
            })
        })
        .collect();
    for task in tasks {
        let outcome = task.await.expect("task").expect("run");
        assert_eq!(outcome.state.status().as_str(), "completed");
    }
    started.elapsed()
}

/// `runs` runs recorded and queued in the database, driven by `workers` workers; the time
/// from the first record to the last run settled.
async fn by_workers(
    url: &str,
    wf: &Workflow,
    runs: usize,
    workers: usize,
    prefix: &str,
) -> Duration {
    let data = tempfile::tempdir().expect("tempdir");
    let starter = app(postgres(url, 8).await, data.path());
    let shared = starter
        .runtime()
        .store()
        .postgres()
        .expect("postgres")
        .clone();
    let mut stops = Vec::new();
    let mut handles = Vec::new();
    for w in 0..workers {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        stops.push(stop);
        let config = WorkerConfig {
            concurrency: runs,
            ..WorkerConfig::new(format!("bench-{w}"))
        };
        let worker = app(postgres(url, 8).await, data.path());
        handles.push(tokio::spawn(work(worker, config, async {
            let _ = stopped.await;
        })));
    }
    let input = input();
    let started = Instant::now();
    let queued: Vec<_> = (0..runs)
        .map(|i| {
            let (starter, shared, wf) = (starter.clone(), shared.clone(), wf.clone());
            let input = input_naming(&input, format!("Brand {prefix} {i}"));
            let id = format!("{prefix}-{i}");
            tokio::spawn(async move {
                let _recorded = starter
                    .runtime()
                    .record_start(&wf, input, Some(id.as_str().into()))
                    .await
                    .expect("recorded");
                shared
                    .enqueue(&StreamId::new(id).expect("id"), RunPriority::Normal)
                    .await
                    .expect("queued");
            })
        })
        .collect();
    for q in queued {
        q.await.expect("queued");
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let leases = shared.leases().await.expect("leases");
        let settled = leases
            .iter()
            .filter(|l| l.stream.as_str().starts_with(prefix) && !l.runnable && l.holder.is_none())
            .count();
        if settled == runs {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{settled} of {runs} runs settled in 600 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    for stop in stops {
        let _ = stop.send(());
    }
    for h in handles {
        let report = h.await.expect("joins").expect("worked");
        assert_eq!(report.failed, 0, "{report:?}");
    }
    for i in 0..runs {
        let state = starter
            .runtime()
            .state(&format!("{prefix}-{i}").into())
            .await
            .expect("state");
        assert_eq!(state.status().as_str(), "completed");
    }
    elapsed
}

fn new_events(events: &[RunEvent]) -> Vec<NewEvent> {
    events
        .iter()
        .map(|e| NewEvent {
            kind: e.kind().to_owned(),
            kind_version: 1,
            recorded_at: WallTime(0),
            policy: None,
            payload: e.encode(),
        })
        .collect()
}

/// A governed handoff's latencies: the whole, the decision alone and the append alone.
struct Handoffs {
    governed: Vec<Duration>,
    decide: Vec<Duration>,
    append: Vec<Duration>,
    plain: Vec<Duration>,
    bytes: usize,
}

/// One governed handoff decided and appended to PostgreSQL, against a plain
/// `INSERT … COMMIT` of as many bytes into a table of its own.
async fn handoff_latency(url: &str, wf: &Workflow, samples: usize) -> Handoffs {
    let store = postgres(url, 4).await;
    let bundle =
        PolicyBundle::from_toml_str(&wf.bundle_source, &wf.bundle_source_name).expect("bundle");
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    client
        .batch_execute("CREATE TABLE plain (id bigint PRIMARY KEY, bytes bytea NOT NULL)")
        .await
        .expect("table");
    let insert = client
        .prepare("INSERT INTO plain (id, bytes) VALUES ($1, $2)")
        .await
        .expect("prepared");
    let (mut governed, mut plain, mut bytes) = (Vec::new(), Vec::new(), 0);
    let (mut decided, mut appended) = (Vec::new(), Vec::new());
    for i in 0..samples {
        let run_id = format!("lat-{i}");
        let stream = StreamId::new(run_id.clone()).expect("id");
        let mut state = RunState::default();
        let start = Command::Start(Arc::new(RunRequested {
            run_id: run_id.into(),
            workflow: wf.spec.clone(),
            bundle_source: wf.bundle_source.clone(),
            bundle_source_name: wf.bundle_source_name.clone(),
            bundle_hash: bundle.hash().to_hex(),
            input: input(),
            at_ms: 0,
            decider_version: docket_decider::DECIDER_VERSION,
            forked_from: None,
            scheduled: None,
            session: None,
        }));
        let events = decide(&state, &bundle, start).expect("start");
        store
            .append(&stream, 0, new_events(&events))
            .await
            .expect("append");
        for e in &events {
            state.apply(e);
        }
        let request = state.pending_requests()[0].clone();
        let command = Command::RecordResponse(AgentResponded {
            request_id: request.request_id.clone(),
            response: governance(&request).into(),
            at_ms: 1,
        });
        let t = Instant::now();
        let events = decide(&state, &bundle, command).expect("handoff");
        let d = t.elapsed();
        store
            .append(&stream, state.version(), new_events(&events))
            .await
            .expect("append");
        let whole = t.elapsed();
        governed.push(whole);
        decided.push(d);
        appended.push(whole - d);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, RunEvent::HandoffAllowed { .. }))
        );
        bytes = events.iter().map(|e| e.encode().len()).sum();
        let payload = vec![b'x'; bytes];
        let t = Instant::now();
        client
            .execute(&insert, &[&(i as i64), &payload])
            .await
            .expect("insert");
        plain.push(t.elapsed());
    }
    for v in [&mut governed, &mut decided, &mut appended, &mut plain] {
        v.sort();
    }
    Handoffs {
        governed,
        decide: decided,
        append: appended,
        plain,
        bytes,
    }
}

/// A worker holding `runs` runs vanishes; how long until another holds them all.
async fn takeover(url: &str, runs: usize, lease: Duration) -> Duration {
    let doomed_store = postgres(url, 4).await;
    let survivor_store = postgres(url, 4).await;
    for i in 0..runs {
        doomed_store
            .enqueue(
                &StreamId::new(format!("t-{i}")).expect("id"),
                RunPriority::Normal,
            )
            .await
            .expect("queued");
    }
    let doomed = doomed_store
        .register_worker("doomed")
        .await
        .expect("registers");
    let held = doomed_store
        .claim(&doomed, runs, lease, DEFAULT_PRIORITY_AGING)
        .await
        .expect("claims");
    assert_eq!(held.len(), runs);
    drop(doomed_store);
    let died = Instant::now();
    let survivor = survivor_store
        .register_worker("survivor")
        .await
        .expect("registers");
    let mut wakeups = survivor_store.runnable_wakeups();
    let mut taken = 0;
    while taken < runs {
        taken += survivor_store
            .claim(&survivor, runs, lease, DEFAULT_PRIORITY_AGING)
            .await
            .expect("claims")
            .len();
        if taken < runs {
            // As a worker waits: a notification or its poll.
            survivor_store.runnable_changed(&mut wakeups).await;
        }
    }
    died.elapsed()
}

fn main() {
    docket_runtime::prefer_small_pages().expect("transparent huge pages off");
    let concurrent: usize = std::env::var("DOCKET_BENCH_CONCURRENT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let Some(cluster) = TestCluster::durable() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let wf = workflow();
        // Warm up: the bundle compiled, pages faulted in, on both backends.
        embedded(&wf, 20).await;
        let warm = cluster.database();
        by_workers(&warm.url, &wf, 20, 1, "warm").await;

        let e = embedded(&wf, concurrent).await;
        let db = cluster.database();
        let one = by_workers(&db.url, &wf, concurrent, 1, "one").await;
        let db = cluster.database();
        let two = by_workers(&db.url, &wf, concurrent, 2, "two").await;
        let rate = |d: Duration| concurrent as f64 / d.as_secs_f64();
        println!("{concurrent} concurrent GEO runs:");
        println!("  embedded default:            {:>7.1} runs/s", rate(e));
        println!("  PostgreSQL, 1 worker:        {:>7.1} runs/s ({:.2}x the embedded default; target at least 0.40x)", rate(one), rate(one) / rate(e));
        println!("  PostgreSQL, 2 workers:       {:>7.1} runs/s ({:.2}x)", rate(two), rate(two) / rate(e));

        let db = cluster.database();
        let h = handoff_latency(&db.url, &wf, 200).await;
        let bytes = h.bytes;
        let (g50, g99) = (percentile(&h.governed, 0.5), percentile(&h.governed, 0.99));
        let (p50, p99) = (percentile(&h.plain, 0.5), percentile(&h.plain, 0.99));
        println!("governed handoff on PostgreSQL ({bytes} B batch): p50 {g50:?} p99 {g99:?}");
        println!("  of which the decision p50 {:?}, the append (sealing, the statement, COMMIT) p50 {:?}",
            percentile(&h.decide, 0.5), percentile(&h.append, 0.5));
        println!("plain INSERT … COMMIT of {bytes} B:             p50 {p50:?} p99 {p99:?}");
        println!("ratio governed / plain: p50 {:.2}x (target at most 1.3x), p99 {:.2}x",
            g50.as_secs_f64() / p50.as_secs_f64(), g99.as_secs_f64() / p99.as_secs_f64());

        let db = cluster.database();
        let lease = Duration::from_secs(3);
        let poll = PostgresConfig::new("").poll_interval;
        let took = takeover(&db.url, 100, lease).await;
        println!("takeover of 100 runs after their worker vanished: {took:?} (lease {lease:?} + poll {poll:?} = {:?})", lease + poll);
    });
}
