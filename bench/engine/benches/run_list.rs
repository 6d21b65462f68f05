//! The run list over 100,000 runs, and live events while 1,000 runs are driven (issue 17
//! point 8), each against a baseline measured in the same run.
//!
//! 1. A data directory of `DOCKET_BENCH_RUNS` runs (default 100,000; two workflows; about
//!    half completed, a quarter waiting for a human, a quarter blocked), built once through
//!    the runtime, 1000 at a time, and kept under the target directory
//!    (`bench-data/run-list-N`) for the next run; the time to build it is printed.
//! 2. `docket serve` (in process) over it: the time to load the run list (from the log the
//!    first time, from the digests kept beside the log after), then `GET /api/runs` pages for each
//!    filter, p50/p95 over `DOCKET_BENCH_PAGES` requests (default 200), against the old
//!    path: reading every run's summary from the log (`run_summaries_from_log`).
//! 3. Live events: a subscriber of `GET /api/runs/{run}/events/stream` on a run waiting for
//!    a human; the run is approved and each new event's delay from its `recorded_at_ns` to
//!    its arrival at the subscriber is taken, p50/p95 over `DOCKET_BENCH_PROBES` approvals
//!    (default 100), with one run driven, then while 1,000 runs are driven by the same
//!    server (`DOCKET_BENCH_DRIVEN`).
//!
//! Run with `cargo bench -p docket-bench-engine --bench run_list`.
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use docket_app::Store;
use docket_decider::{Action, AgentRequest, AgentResponse, Confidence, WorkflowSpec};
use docket_runtime::{HumanDecision, InProcessExecutor, Runtime, Workflow};
use docket_store::{EmbeddedStore, EventStore as _, StoreConfig};

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        "name = {name:?}\npolicy = \"listing.toml\"\nentry = \"worker\"\n[agents.worker]\nin_process = true\n"
    );
    Workflow {
        spec: WorkflowSpec::parse(&text, Path::new("listing.workflow.toml")).expect("workflow"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "listing.toml".into(),
    }
}

/// Escalates on `"escalate"`, hands off to an agent the bundle forbids on `"forbidden"`
/// (the run is blocked), finishes otherwise.
fn agent() -> Arc<InProcessExecutor> {
    Arc::new(InProcessExecutor::new(|r: &AgentRequest| {
        let input = r
            .decision_inputs
            .first()
            .map(|i| i.payload.clone())
            .unwrap_or_default();
        let mut actions = Vec::new();
        if input["forbidden"] == true {
            actions.push(Action::Handoff {
                to: "auditor".into(),
                output_type: "report".into(),
                payload: json!({}),
                task: None,
            });
        } else {
            if input["escalate"] == true {
                actions.push(Action::Escalate {
                    reason: "a human signs off".into(),
                    choices: Vec::new(),
                });
            }
            actions.push(Action::Finish {
                output: json!({ "done": true }),
            });
        }
        AgentResponse::success(r.request_id.clone(), Confidence::High, actions)
    }))
}

fn runtime(store: EmbeddedStore) -> Runtime<Store> {
    let rt = Runtime::new(Store::from(store));
    rt.register_agent("worker", agent());
    rt
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn input(i: usize) -> Value {
    match i % 4 {
        0 => json!({ "escalate": true }),
        1 => json!({ "forbidden": true }),
        _ => json!({}),
    }
}

/// Starts `runs` runs, `concurrent` at a time, named from `prefix`.
async fn start_runs(rt: &Runtime<Store>, prefix: &str, runs: usize, concurrent: usize) {
    let flows = Arc::new([workflow("alpha"), workflow("beta")]);
    let mut tasks = JoinSet::new();
    for i in 0..runs {
        while tasks.len() >= concurrent {
            tasks.join_next().await.expect("a task").expect("task");
        }
        let (rt, flows) = (rt.clone(), flows.clone());
        let id = format!("{prefix}-{i:07}");
        tasks.spawn(async move {
            rt.start(&flows[i % 2], input(i), Some(id.into()))
                .await
                .expect("run starts");
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
}

/// The cached directory of `runs` runs, built if missing.
async fn data_dir(runs: usize) -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let dir = target.join("bench-data").join(format!("run-list-{runs}"));
    let done = dir.join("bench-complete");
    if done.exists() {
        println!("data directory: {} (cached)", dir.display());
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creates the data directory");
    let store = EmbeddedStore::open(&dir, StoreConfig::default())
        .await
        .expect("store");
    let rt = runtime(store.clone());
    let t = Instant::now();
    start_runs(&rt, "order", runs, 1000).await;
    let stats = store.stats();
    println!(
        "built {} with {runs} runs ({} events) in {:.1} s",
        dir.display(),
        stats.events,
        t.elapsed().as_secs_f64()
    );
    drop(rt);
    store.close().await;
    std::fs::write(&done, b"").expect("marks the directory built");
    dir
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn p50_p95(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    (percentile(&samples, 0.5), percentile(&samples, 0.95))
}

/// One `GET` on a new connection; the body.
async fn get(addr: SocketAddr, token: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connects");
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .expect("writes");
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.expect("reads");
    assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
    answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

async fn serve(rt: &Runtime<Store>, dir: &Path) -> (SocketAddr, String) {
    // A cached directory keeps the last run's token: revoke it (only its hash is stored, so
    // it cannot be read back) and make a new one.
    let _ = docket_serve::tokens::revoke(dir, "bench");
    let token =
        docket_serve::tokens::create(dir, "bench", docket_serve::Role::Admin, 0).expect("token");
    let server = docket_serve::Server::bind(
        rt.clone(),
        dir,
        dir,
        "127.0.0.1:0".parse().expect("addr"),
        false,
    )
    .await
    .expect("binds");
    let addr = server.local_addr().expect("addr");
    tokio::spawn(server.serve(std::future::pending()));
    (addr, token)
}

async fn run_list(runs: usize, pages: usize) {
    let dir = data_dir(runs).await;
    let store = EmbeddedStore::open(&dir, StoreConfig::default())
        .await
        .expect("store");
    let rt = runtime(store.clone());
    let had_digests = !store.digests().await.expect("digests").is_empty();
    let t = Instant::now();
    rt.load_run_list().await.expect("loads the list");
    println!(
        "run list loaded in {:.2} s ({})",
        t.elapsed().as_secs_f64(),
        if had_digests {
            "from the digests kept beside the log"
        } else {
            "from the log; digests written for the next start"
        }
    );
    let (addr, token) = serve(&rt, &dir).await;
    // The first page, to warm the server's paths up.
    get(addr, &token, "/api/runs").await;

    let mid = {
        let body = get(addr, &token, "/api/runs?limit=1").await;
        let v: Value = serde_json::from_str(&body).expect("json");
        v["runs"][0]["started_at_ms"].as_i64().unwrap_or(0)
    };
    let filters: Vec<(&str, String)> = vec![
        ("first page (limit 50)", "/api/runs".into()),
        ("status=completed", "/api/runs?status=completed".into()),
        (
            "status=waiting_for_human",
            "/api/runs?status=waiting_for_human".into(),
        ),
        ("status=blocked", "/api/runs?status=blocked".into()),
        (
            "status=interrupted (none match)",
            "/api/runs?status=interrupted".into(),
        ),
        ("workflow=beta", "/api/runs?workflow=beta".into()),
        (
            "started_after",
            format!("/api/runs?started_after={}", mid + 5_000),
        ),
        (
            "started_before (none match)",
            "/api/runs?started_before=0".into(),
        ),
        ("waiting=true", "/api/runs?waiting=true".into()),
        (
            "cursor in the middle, limit 500",
            format!("/api/runs?cursor=order-{:07}&limit=500", runs / 2),
        ),
    ];
    println!("\nGET /api/runs over {runs} runs, {pages} requests each (ms):");
    println!("| filter | p50 | p95 | runs in page |");
    println!("|---|---|---|---|");
    let mut p50s = Vec::new();
    for (name, path) in &filters {
        let mut samples = Vec::with_capacity(pages);
        let mut listed = 0;
        for _ in 0..pages {
            let t = Instant::now();
            let body = get(addr, &token, path).await;
            samples.push(t.elapsed().as_secs_f64() * 1e3);
            listed = serde_json::from_str::<Value>(&body).expect("json")["runs"]
                .as_array()
                .map_or(0, Vec::len);
        }
        let (p50, p95) = p50_p95(samples);
        p50s.push(p50);
        println!("| {name} | {p50:.2} | {p95:.2} | {listed} |");
    }

    // The old path: every run's summary read from the log, per request.
    let rounds = 3;
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let all = docket_runtime::testing::run_summaries_from_log(&rt, false)
            .await
            .expect("reads the log");
        assert_eq!(all.len(), runs);
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (base50, base95) = p50_p95(samples);
    let worst = p50s.iter().copied().fold(0.0, f64::max);
    println!(
        "\nbaseline: every run's summary read from the log (the old GET /api/runs), {rounds} rounds: \
         p50 {base50:.0} ms, p95 {base95:.0} ms; the slowest filter's p50 is {:.0}x faster",
        base50 / worst
    );
    drop(rt);
    store.close().await;
}

/// Starts, in a loop, runs that finish at once, keeping `driven` of them going, until told
/// to stop; returns how many were started.
fn drive_in_background(
    rt: &Runtime<Store>,
    driven: usize,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<usize> {
    let rt = rt.clone();
    tokio::spawn(async move {
        let wf = Arc::new(workflow("load"));
        let mut tasks = JoinSet::new();
        let mut n = 0usize;
        while !stop.load(Ordering::Relaxed) {
            while tasks.len() >= driven {
                tasks.join_next().await.expect("a task").expect("task");
            }
            let (rt, wf) = (rt.clone(), wf.clone());
            let id = format!("load-{n:08}");
            n += 1;
            tasks.spawn(async move {
                rt.start(&wf, json!({}), Some(id.into()))
                    .await
                    .expect("load run");
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("task");
        }
        n
    })
}

/// Approves `probes` waiting runs one after another, each watched by an SSE subscriber;
/// each new event's delay (ms) from when it was recorded to when the subscriber read it.
async fn probe(
    rt: &Runtime<Store>,
    addr: SocketAddr,
    token: &str,
    tag: &str,
    probes: usize,
) -> Vec<f64> {
    let wf = workflow("probe");
    let mut delays = Vec::new();
    for i in 0..probes {
        let id = format!("probe-{tag}-{i:05}");
        let waiting = rt
            .start(&wf, json!({ "escalate": true }), Some(id.clone().into()))
            .await
            .expect("probe starts");
        let after = waiting.state.version();
        let mut s = TcpStream::connect(addr).await.expect("connects");
        s.write_all(
            format!("GET /api/runs/{id}/events/stream?after={after} HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\nAuthorization: Bearer {token}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .expect("writes");
        let mut lines = BufReader::new(s).lines();
        // The answer's head: once read, the subscription is in place.
        while let Some(line) = lines.next_line().await.expect("reads") {
            if line.is_empty() {
                break;
            }
        }
        let decide = {
            let rt = rt.clone();
            let id = id.clone();
            tokio::spawn(async move {
                rt.decide_ticket(
                    &id.into(),
                    "ticket-1",
                    HumanDecision::approve("bench", "ok"),
                )
                .await
                .expect("approves")
            })
        };
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("an event within 30 s")
                .expect("reads")
                .expect("the stream stays open");
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            let arrived = now_ns();
            let event: Value = serde_json::from_str(data).expect("event json");
            let recorded = event["recorded_at_ns"].as_i64().unwrap_or(arrived);
            delays.push((arrived - recorded) as f64 / 1e6);
            if event["kind"] == "run.completed" {
                break;
            }
        }
        decide.await.expect("decided");
    }
    delays
}

async fn live_events(probes: usize, driven: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store");
    let rt = runtime(store.clone());
    let (addr, token) = serve(&rt, dir.path()).await;
    probe(&rt, addr, &token, "warm", 5).await;

    let (one50, one95) = p50_p95(probe(&rt, addr, &token, "alone", probes).await);
    let stop = Arc::new(AtomicBool::new(false));
    let load = drive_in_background(&rt, driven, stop.clone());
    // Let the load reach its level.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t = Instant::now();
    let before = store.stats().events;
    let loaded = probe(&rt, addr, &token, "loaded", probes).await;
    let secs = t.elapsed().as_secs_f64();
    let events = store.stats().events - before;
    stop.store(true, Ordering::Relaxed);
    let started = load.await.expect("load");
    let (load50, load95) = p50_p95(loaded);
    println!(
        "\nSSE: a new event's delay from recorded_at_ns to the subscriber (ms), {probes} approvals, \
         {} events each:",
        4
    );
    println!("| runs driven | p50 | p95 |");
    println!("|---|---|---|");
    println!("| 1 (the probe) | {one50:.2} | {one95:.2} |");
    println!("| {driven} + the probe | {load50:.2} | {load95:.2} |");
    println!(
        "with {driven} driven: {started} load runs started, the store took {:.0} events/s while \
         probing; p50 ratio {:.1}x the one-run latency",
        events as f64 / secs,
        load50 / one50
    );
    drop(rt);
    store.close().await;
}

fn main() {
    let runs = env_or("DOCKET_BENCH_RUNS", 100_000);
    let pages = env_or("DOCKET_BENCH_PAGES", 200);
    let probes = env_or("DOCKET_BENCH_PROBES", 100);
    let driven = env_or("DOCKET_BENCH_DRIVEN", 1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        if std::env::var_os("DOCKET_BENCH_SKIP_LIST").is_none() {
            run_list(runs, pages).await;
        }
        live_events(probes, driven).await;
    });
}
