//! Runs whose agent waits (a sleep standing for a model call), served through child
//! processes against the same runs with the agent in-process, measured in the same run:
//! `DOCKET_BENCH_CONCURRENT` runs (default 1,000) started at once, each one agent call
//! that waits `DOCKET_BENCH_WAIT_MS` (default 100) before it finishes, on the durable
//! default store. The child-process agent is `waiting-agent` (the example kit's
//! `run_at_once`) with `processes` and `requests_per_process` as the workflow says
//! (`DOCKET_BENCH_PROCESSES`, default the machine's cores; `DOCKET_BENCH_PER_PROCESS`,
//! default enough for every run at once); a third line runs it one request at a time per
//! process, as before `requests_per_process` existed. Prints runs/s of each and the
//! ratio to in-process (docs/workflow.md#agents).
//!
//! Run with `cargo bench -p docket-bench-engine --bench agent_wait`.
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use docket_decider::{Action, AgentRequest, AgentResponse, Confidence, RunStatus, WorkflowSpec};
use docket_runtime::{InProcessExecutor, Runtime, Workflow};
use docket_store::{EmbeddedStore, StoreConfig};
use serde_json::json;

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BUNDLE: &str = r#"
bundle = { id = "agent-wait" }
agents = [{ id = "external" }, { id = "worker" }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn workflow(agent: &str) -> Workflow {
    let text = format!(
        "name = \"agent-wait\"\npolicy = \"agent-wait.toml\"\nentry = \"worker\"\n[agents.worker]\n{agent}\n"
    );
    Workflow {
        spec: WorkflowSpec::parse(&text, Path::new("agent-wait.workflow.toml"))
            .expect("workflow parses"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "agent-wait.toml".into(),
    }
}

/// Starts `runs` runs of `wf` at once and waits for all: runs/s.
async fn measure(label: &str, runtime: &Runtime<EmbeddedStore>, wf: &Workflow, runs: usize) -> f64 {
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(runs);
    for i in 0..runs {
        let runtime = runtime.clone();
        let wf = wf.clone();
        let id = format!("{label}-{i}");
        tasks.push(tokio::spawn(async move {
            runtime
                .start(&wf, json!({ "task": i }), Some(id.into()))
                .await
        }));
    }
    for task in tasks {
        let outcome = task.await.expect("joined").expect("the run");
        assert_eq!(outcome.state.status(), RunStatus::Completed, "{label}");
    }
    let elapsed = start.elapsed();
    let rate = runs as f64 / elapsed.as_secs_f64();
    println!(
        "{label:<44} {runs:>6} runs  {:>8.2} s  {rate:>9.1} runs/s",
        elapsed.as_secs_f64()
    );
    rate
}

fn main() {
    let runs = setting("DOCKET_BENCH_CONCURRENT", 1000);
    let wait = Duration::from_millis(setting("DOCKET_BENCH_WAIT_MS", 100) as u64);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let processes = setting("DOCKET_BENCH_PROCESSES", cores).max(1);
    let per_process = setting("DOCKET_BENCH_PER_PROCESS", runs.div_ceil(processes)).max(1);
    let agent = docket_tests::test_program("waiting-agent");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .enable_all()
        .build()
        .expect("tokio");
    println!(
        "{runs} concurrent runs, one agent call each waiting {} ms; {cores} worker threads",
        wait.as_millis()
    );
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
            .await
            .expect("store");
        let runtime = Runtime::new(store);
        runtime.register_agent(
            "worker",
            std::sync::Arc::new(InProcessExecutor::from_async_fn(move |request: AgentRequest| async move {
                tokio::time::sleep(wait).await;
                AgentResponse::success(
                    request.request_id.clone(),
                    Confidence::High,
                    vec![Action::Finish { output: json!({ "code": request.capability_code }) }],
                )
            })),
        );
        let in_process = measure("in-process agent (baseline)", &runtime, &workflow("in_process = true"), runs).await;

        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
            .await
            .expect("store");
        let runtime = Runtime::new(store);
        let command = |at_once: usize, processes: usize| {
            workflow(&format!(
                "command = {:?}\nargs = [\"--at-once\", \"{at_once}\", \"--wait-ms\", \"{}\"]\nprocesses = {processes}\nrequests_per_process = {at_once}\ntimeout_ms = 600000",
                agent.display().to_string(),
                wait.as_millis()
            ))
        };
        let pooled = measure(
            &format!("child processes: {processes} x {per_process} at once"),
            &runtime,
            &command(per_process, processes),
            runs,
        )
        .await;
        println!("  child processes against in-process: {:.2}x (target at least 0.5x)", pooled / in_process);
        let single = measure(
            &format!("child processes: {processes} x 1 at once"),
            &runtime,
            &command(1, processes),
            runs.min(100),
        )
        .await;
        println!("  one request per process against in-process: {:.3}x", single / in_process);
    });
}
