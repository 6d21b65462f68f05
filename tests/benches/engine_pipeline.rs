//! Seed 000's 5-agent GEO pipeline with in-process agents on the durable default store
//! (every batch `fdatasync`ed before it is acknowledged):
//! - pipeline runs/s and events/s with 1 run at a time and with 1000 concurrent runs;
//! - p50/p99 of one governed handoff (decision + data contract + scoping with its token
//!   counts + durable append of the batch), against a plain durable append of one event of
//!   the same size measured in the same run on the same store.
//!
//! Run with `cargo bench -p docket-tests --bench engine_pipeline`
//! (`DOCKET_BENCH_CONCURRENT` changes the 1000).
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_engine::decider::{Command, RunEvent, RunRequested, RunState, decide};
use docket_engine::executor::{AgentExecutor, InProcessExecutor};
use docket_engine::protocol::AgentRequest;
use docket_engine::runtime::Runtime;
use docket_engine::workflow::{ExecutorSpec, Workflow};
use docket_example_geo::{governance, intelligence, observation, reasoning, strategy};
use docket_policies::PolicyBundle;
use docket_store::{EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime};
use docket_tests::{geo_workflow, workspace_root};
use serde_json::Value;

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// User + system CPU time of this process so far (Linux `/proc/self/stat`, clock ticks
/// of 10 ms): CPU per run holds still when other work shares the machine, wall time does not.
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at `) `.
    let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after.split(' ').map(|f| f.parse().unwrap_or(0)).collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn workflow() -> Workflow {
    let mut wf = Workflow::load(&geo_workflow()).expect("geo workflow loads");
    for agent in wf.spec.agents.values_mut() {
        agent.executor = ExecutorSpec::InProcess { in_process: true };
    }
    wf
}

fn register(runtime: &Runtime<EmbeddedStore>) {
    type Handler = fn(&AgentRequest) -> docket_engine::protocol::AgentResponse;
    let agents: [(&str, Handler); 5] = [
        ("governance", governance::handle),
        ("observation", observation::handle),
        ("intelligence", intelligence::handle),
        ("reasoning", reasoning::handle),
        ("strategy", strategy::handle),
    ];
    for (name, handle) in agents {
        let executor: Arc<dyn AgentExecutor> = Arc::new(InProcessExecutor::new(handle));
        runtime.register_agent(name, executor);
    }
}

fn input() -> Value {
    let text = std::fs::read_to_string(workspace_root().join("examples/geo/input.json"))
        .expect("geo input");
    serde_json::from_str(&text).expect("input JSON")
}

async fn pipelines(
    runtime: &Runtime<EmbeddedStore>,
    wf: &Workflow,
    runs: usize,
    prefix: &str,
) -> (Duration, u64) {
    let input = input();
    let started = Instant::now();
    let tasks: Vec<_> = (0..runs)
        .map(|i| {
            let runtime = runtime.clone();
            let wf = wf.clone();
            let input = input.clone();
            let id = format!("{prefix}-{i}");
            tokio::spawn(async move { runtime.start(&wf, input, Some(id)).await })
        })
        .collect();
    let mut events = 0;
    for task in tasks {
        let outcome = task.await.expect("task").expect("run");
        assert_eq!(outcome.state.status.as_str(), "completed");
        events += outcome.state.version;
    }
    (started.elapsed(), events)
}

async fn sequential(
    runtime: &Runtime<EmbeddedStore>,
    wf: &Workflow,
    runs: usize,
    prefix: &str,
) -> (Duration, u64) {
    let input = input();
    let started = Instant::now();
    let mut events = 0;
    for i in 0..runs {
        let outcome = runtime
            .start(wf, input.clone(), Some(format!("{prefix}-{i}")))
            .await
            .expect("run");
        events += outcome.state.version;
    }
    (started.elapsed(), events)
}

/// One governed handoff: Governance's validated scope handed to Observation, decided and
/// durably appended; against a plain durable append of the same number of bytes.
async fn handoff_latency(
    store: &EmbeddedStore,
    wf: &Workflow,
    samples: usize,
) -> (Vec<Duration>, Vec<Duration>, usize) {
    let bundle =
        PolicyBundle::from_toml_str(&wf.bundle_source, &wf.bundle_source_name).expect("bundle");
    let mut governed = Vec::with_capacity(samples);
    let mut plain = Vec::with_capacity(samples);
    let mut batch_bytes = 0;
    for i in 0..samples {
        let run_id = format!("lat-{i}");
        let stream = StreamId::new(run_id.clone()).expect("stream id");
        let mut state = RunState::default();
        let start = Command::Start(RunRequested {
            run_id: run_id.clone(),
            workflow: wf.spec.clone(),
            bundle_source: wf.bundle_source.clone(),
            bundle_source_name: wf.bundle_source_name.clone(),
            bundle_hash: bundle.hash().to_hex(),
            input: input(),
            at_ms: 0,
        });
        let events = decide(&state, &bundle, start).expect("start");
        append(store, &stream, state.version, &events).await;
        for e in &events {
            state.apply(e);
        }
        let request = state.pending_requests()[0].clone();
        let response = governance::handle(&request);
        let command = Command::RecordResponse {
            request_id: request.request_id.clone(),
            response,
            at_ms: 1,
        };
        let t = Instant::now();
        let events = decide(&state, &bundle, command).expect("handoff");
        append(store, &stream, state.version, &events).await;
        governed.push(t.elapsed());
        assert!(
            events
                .iter()
                .any(|e| matches!(e, RunEvent::HandoffAllowed { .. }))
        );
        batch_bytes = events.iter().map(|e| e.encode().len()).sum();

        let plain_stream = StreamId::new(format!("plain-{i}")).expect("stream id");
        let payload = vec![b'x'; batch_bytes];
        let t = Instant::now();
        store
            .append(
                &plain_stream,
                0,
                vec![NewEvent {
                    kind: "plain".into(),
                    kind_version: 1,
                    recorded_at: WallTime(0),
                    policy: None,
                    payload,
                }],
            )
            .await
            .expect("plain append");
        plain.push(t.elapsed());
    }
    governed.sort();
    plain.sort();
    (governed, plain, batch_bytes)
}

async fn append(store: &EmbeddedStore, stream: &StreamId, version: u64, events: &[RunEvent]) {
    let batch = events
        .iter()
        .map(|e| NewEvent {
            kind: e.kind().to_owned(),
            kind_version: 1,
            recorded_at: WallTime(0),
            policy: None,
            payload: e.encode(),
        })
        .collect();
    store.append(stream, version, batch).await.expect("append");
}

fn main() {
    let concurrent: usize = std::env::var("DOCKET_BENCH_CONCURRENT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path(), StoreConfig::default()).await.expect("store");
        let runtime = Runtime::new(store.clone());
        register(&runtime);
        let wf = workflow();
        // Warm up (compile the bundle once, fault in pages).
        sequential(&runtime, &wf, 3, "warm").await;

        let (elapsed, events) = sequential(&runtime, &wf, 30, "seq").await;
        let secs = elapsed.as_secs_f64();
        println!("1 run at a time:   30 runs in {:.2} s: {:.1} runs/s, {:.0} events/s ({} events/run)",
            secs, 30.0 / secs, events as f64 / secs, events / 30);

        let cpu_before = process_cpu();
        let (elapsed, events) = pipelines(&runtime, &wf, concurrent, "conc").await;
        let cpu = process_cpu().saturating_sub(cpu_before);
        let secs = elapsed.as_secs_f64();
        println!("{concurrent} concurrent runs: {:.2} s: {:.1} runs/s, {:.0} events/s; CPU {:.2} s, {:.0} µs per run",
            secs, concurrent as f64 / secs, events as f64 / secs, cpu.as_secs_f64(),
            cpu.as_secs_f64() * 1e6 / concurrent as f64);
        let stats = store.stats();
        println!("store: {} batches, {} syncs, {} events so far", stats.batches, stats.syncs, stats.events);

        let (governed, plain, bytes) = handoff_latency(&store, &wf, 200).await;
        let (g50, g99) = (percentile(&governed, 0.5), percentile(&governed, 0.99));
        let (p50, p99) = (percentile(&plain, 0.5), percentile(&plain, 0.99));
        println!("governed handoff (decide + contract + scoping + durable append, {bytes} B batch): p50 {:?} p99 {:?}", g50, g99);
        println!("plain durable append of {bytes} B:                                              p50 {:?} p99 {:?}", p50, p99);
        println!("ratio governed / plain: p50 {:.2}x, p99 {:.2}x",
            g50.as_secs_f64() / p50.as_secs_f64().max(1e-9), g99.as_secs_f64() / p99.as_secs_f64().max(1e-9));

        // Where the handoff time goes without the disk: the decision alone.
        let bundle = PolicyBundle::from_toml_str(&wf.bundle_source, &wf.bundle_source_name).expect("bundle");
        let mut state = RunState::default();
        let events = decide(&state, &bundle, Command::Start(RunRequested {
            run_id: "cpu".into(), workflow: wf.spec.clone(), bundle_source: wf.bundle_source.clone(),
            bundle_source_name: wf.bundle_source_name.clone(), bundle_hash: bundle.hash().to_hex(), input: input(), at_ms: 0,
        })).expect("start");
        for e in &events { state.apply(e); }
        let request = state.pending_requests()[0].clone();
        let response = governance::handle(&request);
        let mut cpu = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            let _ = decide(&state, &bundle, Command::RecordResponse { request_id: request.request_id.clone(), response: response.clone(), at_ms: 1 });
            cpu.push(t.elapsed());
        }
        cpu.sort();
        println!("decide alone (no I/O): p50 {:?} p99 {:?}", percentile(&cpu, 0.5), percentile(&cpu, 0.99));
    });
}
