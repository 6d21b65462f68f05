//! What runs waiting on a human cost in one process (issue 5 point 7): starts N runs
//! (default 100,000; `DOCKET_BENCH_RUNS` changes it) of a one-agent workflow whose
//! in-process agent escalates, at most `DOCKET_BENCH_CONCURRENT` (default 1000) at a time,
//! on the durable default store in a temporary directory. Prints resident memory (VmRSS and
//! VmHWM from /proc/self/status) before and after, bytes per waiting run, the time taken,
//! what listing the waiting ones (`testing::waiting_runs`), every run's summary
//! (`run_summaries()`) and every run folded (`testing::runs`, last; `DOCKET_BENCH_FOLD=0` skips
//! it) cost, and approves a sample to check they complete.
//!
//! Run with `cargo bench -p docket-bench-engine --bench waiting_runs`.
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio::task::JoinSet;

use docket_decider::RunStatus;
use docket_decider::WorkflowSpec;
use docket_decider::{Action, AgentRequest, AgentResponse, Confidence};
use docket_runtime::HumanDecision;
use docket_runtime::Runtime;
use docket_runtime::Workflow;
use docket_runtime::{AgentExecutor, InProcessExecutor};
use docket_store::{EmbeddedStore, StoreConfig};

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BUNDLE: &str = r#"
bundle = { id = "approvals" }
agents = [{ id = "external" }, { id = "worker" }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const WORKFLOW: &str = r#"
name = "approvals"
policy = "approvals.toml"
entry = "worker"
[agents.worker]
in_process = true
"#;

fn workflow() -> Workflow {
    Workflow {
        spec: WorkflowSpec::parse(WORKFLOW, Path::new("approvals.workflow.toml"))
            .expect("workflow parses"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "approvals.toml".into(),
    }
}

/// Asks for a sign-off, and finishes once it is given.
fn agent() -> Arc<dyn AgentExecutor> {
    Arc::new(InProcessExecutor::new(|r: &AgentRequest| {
        AgentResponse::success(
            r.request_id.clone(),
            Confidence::High,
            vec![
                Action::Escalate {
                    reason: "a human signs off on every order".into(),
                    choices: Vec::new(),
                },
                Action::Finish {
                    output: json!({ "order": r.request_id }),
                },
            ],
        )
    }))
}

/// (VmRSS, VmHWM) in bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn run_id(i: usize) -> docket_decider::RunId {
    format!("order-{i:07}").into()
}

async fn start_waiting(runtime: &Runtime<EmbeddedStore>, runs: usize, concurrent: usize) {
    let wf = Arc::new(workflow());
    let mut tasks = JoinSet::new();
    let mut waiting = 0usize;
    let mut check = |done: Result<RunStatus, tokio::task::JoinError>| {
        let status = done.expect("task");
        assert_eq!(status, RunStatus::WaitingForHuman);
        waiting += 1;
    };
    for i in 0..runs {
        while tasks.len() >= concurrent {
            if let Some(done) = tasks.join_next().await {
                check(done);
            }
        }
        let runtime = runtime.clone();
        let wf = wf.clone();
        tasks.spawn(async move {
            runtime
                .start(&wf, json!({ "order": i }), Some(run_id(i)))
                .await
                .expect("run starts")
                .state
                .status()
        });
    }
    while let Some(done) = tasks.join_next().await {
        check(done);
    }
    assert_eq!(waiting, runs);
}

fn main() {
    let runs = env_or("DOCKET_BENCH_RUNS", 100_000);
    let concurrent = env_or("DOCKET_BENCH_CONCURRENT", 1000).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
            .await
            .expect("store");
        let runtime = Runtime::new(store.clone());
        runtime.register_agent("worker", agent());
        // Warm up: compile the bundle, start the store's threads.
        runtime
            .start(&workflow(), json!({}), Some("warm-up".into()))
            .await
            .expect("warm-up run");

        let (rss0, hwm0) = memory();
        println!(
            "before: VmRSS {:.1} MiB, VmHWM {:.1} MiB",
            mib(rss0),
            mib(hwm0)
        );
        let started = Instant::now();
        start_waiting(&runtime, runs, concurrent).await;
        let secs = started.elapsed().as_secs_f64();
        let (rss1, hwm1) = memory();
        let stats = store.stats();
        println!(
            "{runs} runs started and waiting for a human, {concurrent} at a time: {secs:.1} s \
             ({:.0} runs/s; store: {} events in {} batches, {} syncs)",
            runs as f64 / secs,
            stats.events,
            stats.batches,
            stats.syncs
        );
        println!(
            "after:  VmRSS {:.1} MiB, VmHWM {:.1} MiB",
            mib(rss1),
            mib(hwm1)
        );
        println!(
            "resident per waiting run: {:.0} B (VmRSS after - before) / {runs}; peak {:.0} B \
             (VmHWM after - VmRSS before)",
            rss1.saturating_sub(rss0) as f64 / runs as f64,
            hwm1.saturating_sub(rss0) as f64 / runs as f64,
        );

        let t = Instant::now();
        let waiting = docket_runtime::testing::waiting_runs(&runtime)
            .await
            .expect("waiting runs");
        let waiting_secs = t.elapsed().as_secs_f64();
        let (rss2, _) = memory();
        let ours = waiting
            .iter()
            .filter(|w| w.run_id.starts_with("order-") && w.open_tickets == ["ticket-1"])
            .count();
        assert_eq!(ours, runs);
        println!(
            "waiting_runs() (event kinds, no fold): {waiting_secs:.2} s for {} runs, {:.1} µs \
             per run; VmRSS {:.1} MiB with the list held",
            waiting.len(),
            waiting_secs * 1e6 / waiting.len().max(1) as f64,
            mib(rss2)
        );
        drop(waiting);

        let t = Instant::now();
        let summaries = runtime.run_summaries().await.expect("summaries");
        println!(
            "run_summaries() (what `docket runs` prints): {:.2} s for {} runs",
            t.elapsed().as_secs_f64(),
            summaries.len()
        );
        drop(summaries);

        // A sample approved: each completes, and leaves the waiting list.
        let sample: Vec<usize> = (0..runs).step_by((runs / 10).max(1)).take(10).collect();
        let t = Instant::now();
        for &i in &sample {
            let outcome = runtime
                .decide_ticket(
                    &run_id(i),
                    "ticket-1",
                    HumanDecision::approve("bench", "approved"),
                )
                .await
                .expect("approve");
            assert_eq!(outcome.state.status(), RunStatus::Completed);
        }
        println!(
            "approved {} sampled runs: all completed ({:.1} ms each)",
            sample.len(),
            t.elapsed().as_secs_f64() * 1000.0 / sample.len() as f64
        );
        let still = docket_runtime::testing::waiting_runs(&runtime)
            .await
            .expect("waiting runs");
        assert_eq!(
            still
                .iter()
                .filter(|w| w.run_id.starts_with("order-"))
                .count(),
            runs - sample.len()
        );
        let (rss3, hwm3) = memory();
        println!(
            "end:    VmRSS {:.1} MiB, VmHWM {:.1} MiB",
            mib(rss3),
            mib(hwm3)
        );

        // The full fold, last (it loads every run's state): `DOCKET_BENCH_FOLD=0` skips it.
        if env_or("DOCKET_BENCH_FOLD", 1) == 1 {
            let t = Instant::now();
            let all = docket_runtime::testing::runs(&runtime).await.expect("runs");
            let runs_secs = t.elapsed().as_secs_f64();
            let (rss4, hwm4) = memory();
            println!(
                "runs() (folds every run): {runs_secs:.2} s for {} runs; VmRSS {:.1} MiB, VmHWM \
                 {:.1} MiB with the list held",
                all.len(),
                mib(rss4),
                mib(hwm4)
            );
        }
    });
}
