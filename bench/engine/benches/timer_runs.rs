//! What runs waiting on timers cost in one process (issue 32 point 8), kept as
//! `docket serve` keeps them: each drive ends at its timer (`set_timers_elsewhere`), the run
//! kept as one entry of `docket_app::DueTimers` and driven again when due. On the durable
//! default store in a temporary directory, with a one-agent workflow whose in-process agent
//! waits, then finishes once its timer fired:
//!
//! 1. N runs (default 100,000; `DOCKET_BENCH_RUNS`) started and left waiting an hour, at
//!    most `DOCKET_BENCH_CONCURRENT` (default 1000) at a time: resident memory (VmRSS)
//!    before and after, per waiting run, against the 1 GiB target; and the rate of starting
//!    them against the baseline, the same number of runs whose agent finishes at once,
//!    started in the same process first.
//! 2. `DOCKET_BENCH_SAMPLES` (default 100) runs, one at a time, each waiting 100 ms, while
//!    the N wait: from its timer's due time to its agent's second call, p50 and p99,
//!    against the 50 ms target.
//! 3. `DOCKET_BENCH_DUE` (default 10,000) runs whose timers are all due in the same second:
//!    from then until every one's agent was called again, against the 5 s target, and as a
//!    ratio of the time the baseline took to start as many runs.
//!
//! Run with `cargo bench -p docket-bench-engine --bench timer_runs`.
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::task::JoinSet;

use docket_app::DueTimers;
use docket_decider::{Action, AgentRequest, AgentResponse, Confidence, RunId, RunStatus};
use docket_decider::{TIMER_FIRED_TYPE, WorkflowSpec};
use docket_policies::Priority;
use docket_runtime::{AgentExecutor, InProcessExecutor, Runtime, Workflow};
use docket_store::{EmbeddedStore, StoreConfig};

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BUNDLE: &str = r#"
bundle = { id = "slots" }
agents = [{ id = "external" }, { id = "poster" }]
[interactions]
allowed = [{ from = "external", to = "poster" }, { from = "poster", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
[waiting]
max_wait_ms = 86400000
"#;

fn workflow(name: &str) -> Workflow {
    let text = format!(
        "name = \"{name}\"\npolicy = \"slots.toml\"\nentry = \"poster\"\n[agents.poster]\nin_process = true\n"
    );
    Workflow {
        spec: WorkflowSpec::parse(&text, Path::new("slots.workflow.toml")).expect("workflow"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "slots.toml".into(),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What the agent is told to do, and what it saw.
#[derive(Default)]
struct Plan {
    /// 0: finish at once (the baseline); else wait until then (ms since the epoch).
    until_ms: AtomicI64,
    /// Per second call: (ms from due to the call, when it was made).
    called_again: Mutex<Vec<(i64, Instant)>>,
}

/// Waits until the plan's time, and finishes once its timer fired.
fn agent(plan: Arc<Plan>) -> Arc<dyn AgentExecutor> {
    Arc::new(InProcessExecutor::new(move |r: &AgentRequest| {
        let fired = r
            .decision_inputs
            .iter()
            .find(|d| d.output_type == TIMER_FIRED_TYPE);
        let until = plan.until_ms.load(Ordering::Relaxed);
        let action = match fired {
            Some(input) => {
                let due = input.payload["due_at_ms"].as_i64().unwrap_or(0);
                plan.called_again
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((now_ms() - due, Instant::now()));
                Action::Finish {
                    output: json!({ "posted": true }),
                }
            }
            None if until == 0 => Action::Finish {
                output: json!({ "posted": true }),
            },
            None => Action::Wait {
                until: None,
                duration: Some(format!("{}ms", (until - now_ms()).max(0))),
                event: None,
                reason: "the post goes out at its slot".into(),
            },
        };
        AgentResponse::success(r.request_id.clone(), Confidence::High, vec![action])
    }))
}

/// VmRSS in bytes.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kb| kb * 1024)
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

/// Starts `runs` runs named `{prefix}-N`, at most `concurrent` at a time; those whose
/// drive ends at a timer are kept in `timers`. The seconds it took.
async fn start(
    rt: &Runtime<EmbeddedStore>,
    timers: &Arc<DueTimers>,
    prefix: &str,
    runs: usize,
    concurrent: usize,
) -> f64 {
    let wf = Arc::new(workflow(prefix));
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for i in 0..runs {
        while tasks.len() >= concurrent {
            tasks.join_next().await.expect("a task").expect("joined");
        }
        let (rt, wf, timers) = (rt.clone(), wf.clone(), timers.clone());
        let id = RunId::from(format!("{prefix}-{i:07}"));
        tasks.spawn(async move {
            let outcome = rt.start(&wf, json!({ "n": i }), Some(id.clone())).await;
            let state = outcome.expect("the run starts").state;
            if let Some(due) = state.waits_until_ms() {
                timers.insert(id, due, Priority::Normal);
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("joined");
    }
    started.elapsed().as_secs_f64()
}

/// `docket serve`'s timer loop: every run due is driven again, at most 32 at once
/// (`DOCKET_BENCH_FIRING`), and kept again if its drive ends at another timer.
fn fire(rt: Runtime<EmbeddedStore>, timers: Arc<DueTimers>) {
    let at_once = Arc::new(tokio::sync::Semaphore::new(env_or(
        "DOCKET_BENCH_FIRING",
        32,
    )));
    tokio::spawn(async move {
        loop {
            let permit = at_once.clone().acquire_owned().await.expect("open");
            let run = timers.due(now_ms).await;
            let (rt, timers) = (rt.clone(), timers.clone());
            tokio::spawn(async move {
                let _permit = permit;
                let state = rt.resume(&run).await.expect("resumed").state;
                if let Some(due) = state.waits_until_ms() {
                    timers.insert(run, due, Priority::Normal);
                }
            });
        }
    });
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(0)
}

fn main() {
    let runs = env_or("DOCKET_BENCH_RUNS", 100_000);
    let concurrent = env_or("DOCKET_BENCH_CONCURRENT", 1000).max(1);
    let samples = env_or("DOCKET_BENCH_SAMPLES", 100).max(1);
    let due_together = env_or("DOCKET_BENCH_DUE", 10_000).max(1);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
            .await
            .expect("store");
        let rt = Runtime::new(store);
        rt.set_timers_elsewhere();
        let plan = Arc::new(Plan::default());
        rt.register_agent("poster", agent(plan.clone()));
        let timers = Arc::new(DueTimers::default());
        fire(rt.clone(), timers.clone());

        // Baseline: runs whose agent finishes at once.
        let base_runs = runs.min(due_together.max(10_000));
        let base_secs = start(&rt, &timers, "plain", base_runs, concurrent).await;
        let base_rate = base_runs as f64 / base_secs;
        println!(
            "baseline: {base_runs} runs whose agent finishes at once: {base_secs:.1} s ({base_rate:.0} runs/s)"
        );

        // 1. N runs waiting an hour.
        let rss0 = resident();
        plan.until_ms.store(now_ms() + 3_600_000, Ordering::Relaxed);
        let secs = start(&rt, &timers, "slot", runs, concurrent).await;
        let rss1 = resident();
        assert_eq!(timers.len(), runs, "every run waits on its timer");
        let rate = runs as f64 / secs;
        println!(
            "{runs} runs started and waiting on a timer: {secs:.1} s ({rate:.0} runs/s, {:.2}x the baseline's rate)",
            rate / base_rate
        );
        println!(
            "resident: {:.1} MiB before, {:.1} MiB with {runs} waiting ({:.0} B per waiting run); target at most 1024 MiB: {}",
            mib(rss0),
            mib(rss1),
            rss1.saturating_sub(rss0) as f64 / runs as f64,
            if mib(rss1) <= 1024.0 { "met" } else { "NOT met" }
        );

        // 2. One at a time, each due in 100 ms, while the N wait.
        let mut lateness = Vec::with_capacity(samples);
        for i in 0..samples {
            plan.called_again
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
            plan.until_ms.store(now_ms() + 100, Ordering::Relaxed);
            start(&rt, &timers, &format!("sample{i}"), 1, 1).await;
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let got = plan
                    .called_again
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .first()
                    .map(|(ms, _)| *ms);
                if let Some(ms) = got {
                    lateness.push(ms);
                    break;
                }
                assert!(Instant::now() < deadline, "sample {i} not called again in 10 s");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        lateness.sort_unstable();
        let p50 = percentile(&lateness, 0.5);
        println!(
            "due to called again, {samples} runs one at a time: p50 {p50} ms, p99 {} ms, max {} ms; target p50 at most 50 ms: {}",
            percentile(&lateness, 0.99),
            lateness.last().copied().unwrap_or(0),
            if p50 <= 50 { "met" } else { "NOT met" }
        );

        // 3. Many due in the same second: set far enough ahead to start them all first.
        plan.called_again
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let lead_ms = (due_together as f64 / base_rate * 1000.0 * 2.0) as i64 + 2_000;
        let due_at = now_ms() + lead_ms;
        plan.until_ms.store(due_at, Ordering::Relaxed);
        let secs = start(&rt, &timers, "burst", due_together, concurrent).await;
        assert!(
            now_ms() < due_at,
            "the runs took {secs:.1} s to start, past their due time: raise the lead"
        );
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let n = plan
                .called_again
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len();
            if n == due_together {
                break;
            }
            assert!(Instant::now() < deadline, "{n} of {due_together} called again after 120 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let called = plan
            .called_again
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let last_late = called.iter().map(|(ms, _)| *ms).max().unwrap_or(0);
        let base_for_as_many = due_together as f64 / base_rate;
        println!(
            "{due_together} timers due in the same second: every agent called again within {:.2} s of the due time ({:.2}x the {:.2} s the baseline takes to start as many runs); target at most 5 s: {}",
            last_late as f64 / 1000.0,
            (last_late as f64 / 1000.0) / base_for_as_many,
            base_for_as_many,
            if last_late <= 5_000 { "met" } else { "NOT met" }
        );
        let done = rt.state(&RunId::from("burst-0000000")).await.expect("state");
        assert_eq!(done.status(), RunStatus::Completed);
    });
}
