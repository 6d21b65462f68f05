//! The cost of one governed side effect against one plain durable append (issue 5 point 7,
//! target ≤ 3x), timed per effect inside the run (`effect_cost` times whole runs with and
//! without effects instead), both on the durable default store (every acknowledged append
//! `fdatasync`ed) and measured alternately in the same run.
//!
//! - Governed: a run whose in-process agent asks for one `publish` effect through the real
//!   runtime. Timed from the moment the agent's answer is handed back to the runtime until
//!   the agent is called again with the effect's result: the decision (admission), the dry
//!   run, the kill-switch read and `effect.started` made durable, `execute`, the result
//!   made durable (with the verification the path always ends with), and the next call
//!   scheduled. The executor does nothing (it answers at once), so what is measured is
//!   docket's own cost. The store's sync counter is read at both ends, so the number of
//!   durable appends on the path is printed too.
//! - Plain: one append of one event of the effect's mean event size, on the same store;
//!   and two such appends in a row, the floor of any path with two durable points.
//!
//! Run with `cargo bench -p docket-bench-engine --bench effect_path` (`DOCKET_BENCH_SAMPLES`
//! changes the 300 samples).
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use docket_decider::RunStatus;
use docket_decider::WorkflowSpec;
use docket_decider::{Action, AgentRequest, AgentResponse, Confidence};
use docket_decider::{DryRunReport, EffectReceipt, EffectRequest, Verification};
use docket_runtime::InProcessExecutor;
use docket_runtime::Runtime;
use docket_runtime::Workflow;
use docket_runtime::{EffectExecutor, EffectFuture};
use docket_store::{
    Durability, EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime,
};

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BUNDLE: &str = r#"
bundle = { id = "effect-cost" }
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
name = "effect-cost"
policy = "effect-cost.toml"
entry = "publisher"
[agents.publisher]
in_process = true
"#;

fn workflow() -> Workflow {
    Workflow {
        spec: WorkflowSpec::parse(WORKFLOW, Path::new("effect-cost.workflow.toml"))
            .expect("workflow parses"),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "effect-cost.toml".into(),
    }
}

/// An executor that does nothing: every call answers at once.
struct Noop;

impl EffectExecutor for Noop {
    fn supports_dry_run(&self) -> bool {
        true
    }

    fn dry_run<'a>(&'a self, _request: &'a EffectRequest) -> EffectFuture<'a, DryRunReport> {
        Box::pin(async {
            Ok(DryRunReport {
                ok: true,
                preview: json!({ "would_post": true }),
                message: None,
            })
        })
    }

    fn execute<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, EffectReceipt> {
        Box::pin(async move {
            Ok(EffectReceipt {
                result: json!({ "post_id": request.idempotency_key }),
                drift: None,
            })
        })
    }

    fn verify<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, Verification> {
        Box::pin(async move {
            Ok(Verification::Applied {
                result: json!({ "post_id": request.idempotency_key }),
            })
        })
    }
}

/// When the agent handed back its effect request and when it was called again, with the
/// store's sync count at each.
#[derive(Default)]
struct Clock {
    asked: Option<(Instant, u64)>,
    answered: Option<(Instant, u64)>,
}

/// Asks for one publish, then finishes once the result is in its inputs.
fn agent(clock: Arc<Mutex<Clock>>, store: EmbeddedStore) -> Arc<InProcessExecutor> {
    Arc::new(InProcessExecutor::new(move |r: &AgentRequest| {
        let has_result = r
            .decision_inputs
            .iter()
            .any(|i| i.output_type == "effect_result");
        let mut clock = clock.lock().expect("clock");
        if has_result {
            clock.answered = Some((Instant::now(), store.stats().syncs));
            return AgentResponse::success(
                r.request_id.clone(),
                Confidence::High,
                vec![Action::Finish {
                    output: json!({ "done": true }),
                }],
            );
        }
        let response = AgentResponse::success(
            r.request_id.clone(),
            Confidence::High,
            vec![Action::RequestEffect {
                kind: "publish".into(),
                lane: "api".into(),
                idempotency_key: Some(format!("{}-post", r.run_id)),
                params: json!({ "text": "hello" }),
                not_before: None,
            }],
        );
        clock.asked = Some((Instant::now(), store.stats().syncs));
        response
    }))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Governed and plain latencies (sorted), syncs per governed effect (sorted) and the plain
/// event's size, on a fresh store with `durability`.
struct Measured {
    governed: Vec<Duration>,
    plain: Vec<Duration>,
    /// Two plain appends in a row: the floor of any path with two durable points.
    two_plain: Vec<Duration>,
    syncs: Vec<u64>,
    size: usize,
    kinds: String,
}

async fn measure(durability: Durability, samples: usize) -> Measured {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StoreConfig {
        durability,
        ..StoreConfig::default()
    };
    let store = EmbeddedStore::open(dir.path(), config)
        .await
        .expect("store");
    let runtime = Runtime::new(store.clone());
    let clock = Arc::new(Mutex::new(Clock::default()));
    runtime.register_agent("publisher", agent(clock.clone(), store.clone()));
    runtime.register_effect("publish", Arc::new(Noop));
    let wf = workflow();

    // The effect's events, to size the plain append alike.
    let probe = runtime
        .start(&wf, json!({}), Some("probe".into()))
        .await
        .expect("probe run");
    assert_eq!(probe.state.status(), RunStatus::Completed);
    let events = runtime.events(&"probe".into()).await.expect("events");
    let effect_events: Vec<usize> = events
        .iter()
        .filter(|e| e.event.kind().starts_with("effect."))
        .map(|e| e.event.encode().len())
        .collect();
    let size = effect_events.iter().sum::<usize>() / effect_events.len().max(1);
    let kinds: Vec<&str> = events.iter().map(|e| e.event.kind()).collect();
    let kinds = kinds.join(" ");

    let mut governed = Vec::with_capacity(samples);
    let mut plain = Vec::with_capacity(samples);
    let mut two_plain = Vec::with_capacity(samples);
    let mut syncs = Vec::with_capacity(samples);
    for i in 0..samples {
        let outcome = runtime
            .start(&wf, json!({}), Some(format!("effect-{i}").into()))
            .await
            .expect("run");
        assert_eq!(outcome.state.status(), RunStatus::Completed);
        let c = std::mem::take(&mut *clock.lock().expect("clock"));
        let (Some((t0, s0)), Some((t1, s1))) = (c.asked, c.answered) else {
            panic!("the agent was not called twice");
        };
        governed.push(t1 - t0);
        syncs.push(s1 - s0);

        let stream = StreamId::new(format!("plain-{i}")).expect("stream id");
        let event = || NewEvent {
            kind: "plain".into(),
            kind_version: 1,
            recorded_at: WallTime(0),
            policy: None,
            payload: vec![b'x'; size],
        };
        let t = Instant::now();
        store
            .append(&stream, 0, vec![event()])
            .await
            .expect("plain append");
        plain.push(t.elapsed());
        let t = Instant::now();
        store
            .append(&stream, 1, vec![event()])
            .await
            .expect("plain append");
        store
            .append(&stream, 2, vec![event()])
            .await
            .expect("plain append");
        two_plain.push(t.elapsed());
    }
    governed.sort();
    plain.sort();
    two_plain.sort();
    syncs.sort_unstable();
    Measured {
        governed,
        plain,
        two_plain,
        syncs,
        size,
        kinds,
    }
}

fn main() {
    let samples: usize = std::env::var("DOCKET_BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let m = measure(Durability::Sync, samples).await;
        println!("one run's log: {}", m.kinds);
        let (g50, g99) = (percentile(&m.governed, 0.5), percentile(&m.governed, 0.99));
        let (p50, p99) = (percentile(&m.plain, 0.5), percentile(&m.plain, 0.99));
        println!(
            "governed side effect (decision + dry run + durable start + execute + durable \
             result and verification), {samples} samples: p50 {:.0} µs, p99 {:.0} µs; \
             {} fdatasyncs on the path (median)",
            micros(g50),
            micros(g99),
            m.syncs[m.syncs.len() / 2]
        );
        println!(
            "plain durable append of one {} B event:                          p50 {:.0} µs, p99 {:.0} µs",
            m.size,
            micros(p50),
            micros(p99)
        );
        println!(
            "ratio governed / plain: p50 {:.2}x, p99 {:.2}x (target ≤ 3x)",
            g50.as_secs_f64() / p50.as_secs_f64().max(1e-9),
            g99.as_secs_f64() / p99.as_secs_f64().max(1e-9)
        );
        let t50 = percentile(&m.two_plain, 0.5);
        println!(
            "two plain durable appends in a row (the floor for two durable points): p50 {:.0} µs; \
             governed / two plain: p50 {:.2}x",
            micros(t50),
            g50.as_secs_f64() / t50.as_secs_f64().max(1e-9)
        );
        // Where the time beyond the syncs goes: the same path on a store that never syncs.
        let n = measure(Durability::UnsafeNoSync, samples).await;
        println!(
            "without fdatasync (UnsafeNoSync, CPU and writes only): governed p50 {:.0} µs, \
             plain p50 {:.0} µs",
            micros(percentile(&n.governed, 0.5)),
            micros(percentile(&n.plain, 0.5))
        );
    });
}
