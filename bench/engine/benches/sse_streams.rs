//! Live event streams under many idle ones (issue 28 row 9): how long a new subscriber of
//! `GET /api/runs/{run}/events/stream` waits for its run's backlog while `N` other streams
//! are open and idle, against the same with none open (the baseline, measured in the same
//! run), and what the idle streams cost the process in threads and memory.
//!
//! 1. A data directory with `DOCKET_BENCH_RUNS` finished runs (default 100; each 7 events),
//!    served in process (`docket serve`'s `Server`), its stream limits raised above `N`.
//! 2. For each `N` of `DOCKET_BENCH_IDLE` (default `0,600,2000`): `N` streams opened on the
//!    runs in turn, each read until its backlog has arrived, then held without reading;
//!    then `DOCKET_BENCH_PROBES` new subscribers (default 50), one after the other, each
//!    timed from connecting to its backlog's last event, p50/p95; the process's threads and
//!    resident memory with the `N` streams open.
//!
//! Run with `cargo bench -p docket-bench-engine --bench sse_streams`.
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use docket_app::Store;
use docket_decider::{Action, AgentRequest, AgentResponse, Confidence, WorkflowSpec};
use docket_runtime::{InProcessExecutor, Runtime, Workflow};
use docket_store::{EmbeddedStore, StoreConfig};

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BUNDLE: &str = r#"
bundle = { id = "streams" }
agents = [{ id = "external" }, { id = "worker" }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

fn workflow() -> Workflow {
    let text = "name = \"streams\"\npolicy = \"streams.toml\"\nentry = \"worker\"\n[agents.worker]\nin_process = true\n";
    Workflow {
        spec: WorkflowSpec::parse(text, Path::new("streams.workflow.toml")).expect("workflow"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "streams.toml".into(),
    }
}

fn runtime(store: EmbeddedStore) -> Runtime<Store> {
    let rt = Runtime::new(Store::from(store));
    rt.register_agent(
        "worker",
        Arc::new(InProcessExecutor::new(|r: &AgentRequest| {
            AgentResponse::success(
                r.request_id.clone(),
                Confidence::High,
                vec![Action::Finish {
                    output: json!({ "done": true }),
                }],
            )
        })),
    );
    rt
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `VmRSS` (MB) and `Threads` of this process.
fn process() -> (f64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:") as f64 / 1024.0, field("Threads:"))
}

/// Opens `run`'s event stream and reads until event `last` has arrived: the connection,
/// held open.
async fn subscribe(addr: SocketAddr, token: &str, run: &str, last: u64) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connects");
    s.write_all(
        format!("GET /api/runs/{run}/events/stream HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n")
            .as_bytes(),
    )
    .await
    .expect("writes");
    let wanted = format!("id: {last}\n");
    let mut seen = Vec::new();
    let mut buf = [0u8; 16 << 10];
    loop {
        let n = s.read(&mut buf).await.expect("reads");
        assert!(
            n > 0,
            "the stream of {run} closed: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
        if !seen.starts_with(b"HTTP/1.1 200") && seen.len() >= 12 {
            panic!("refused: {}", String::from_utf8_lossy(&seen));
        }
        if seen.windows(wanted.len()).any(|w| w == wanted.as_bytes()) {
            return s;
        }
    }
}

fn main() {
    let runs = env_or("DOCKET_BENCH_RUNS", 100);
    let probes = env_or("DOCKET_BENCH_PROBES", 50);
    let idle: Vec<usize> = std::env::var("DOCKET_BENCH_IDLE")
        .unwrap_or_else(|_| "0,600,2000".to_owned())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let most = idle.iter().copied().max().unwrap_or(0);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tokio.block_on(async move {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
            .await
            .expect("store");
        let rt = runtime(store);
        let wf = workflow();
        let mut last = 0;
        for i in 0..runs {
            let outcome = rt
                .start(&wf, json!({}), Some(format!("run-{i:04}").into()))
                .await
                .expect("run");
            last = outcome.state.version();
        }
        let token = docket_serve::tokens::create(dir.path(), "bench", docket_serve::Role::Viewer, 0)
            .expect("token");
        let server = docket_serve::Server::bind(
            rt.clone(),
            dir.path(),
            dir.path(),
            "127.0.0.1:0".parse().expect("addr"),
            false,
        )
        .await
        .expect("binds")
        .limit_streams(docket_serve::StreamLimits {
            total: most + probes + 10,
            per_token: most + probes + 10,
        });
        let addr = server.local_addr().expect("addr");
        tokio::spawn(server.serve(std::future::pending()));
        println!(
            "{runs} finished runs of {last} events; {probes} new subscribers per figure, one after the other"
        );
        println!("| idle streams | backlog p50 (ms) | p95 (ms) | p50 / baseline p50 | threads | RSS (MB) |");
        println!("|---|---|---|---|---|---|");
        let mut held = Vec::new();
        let mut baseline = f64::NAN;
        for n in idle {
            while held.len() < n {
                let run = format!("run-{:04}", held.len() % runs);
                held.push(subscribe(addr, &token, &run, last).await);
            }
            held.truncate(n);
            let mut samples = Vec::with_capacity(probes);
            for i in 0..probes {
                let run = format!("run-{:04}", (i * 7) % runs);
                let t = Instant::now();
                let s = subscribe(addr, &token, &run, last).await;
                samples.push(t.elapsed().as_secs_f64() * 1000.0);
                drop(s);
            }
            samples.sort_by(f64::total_cmp);
            let (p50, p95) = (percentile(&samples, 0.5), percentile(&samples, 0.95));
            if n == 0 || baseline.is_nan() {
                baseline = p50;
            }
            let (rss, threads) = process();
            println!(
                "| {n} | {p50:.2} | {p95:.2} | {:.2}x | {threads} | {rss:.0} |",
                p50 / baseline
            );
        }
    });
}
