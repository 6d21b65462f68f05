//! The cost of one governed side effect against one plain durable append, on the durable
//! default store (every write `fdatasync`ed), measured in alternating rounds in the same
//! process so that both see the same disk:
//! - governed: a run whose in-process agent asks for K publishes one after the other
//!   (policy decision in the agent's answer batch; dry run + kill-switch read + full
//!   decision + `effect.started` in one write; receipt + verification + the call back in
//!   one write; the agent's next answer), minus the same run asking for none, divided by K;
//! - plain: one durable append of one event of the size of an effect's largest write.
//!
//! Also prints durable writes (syncs) per effect. Run with
//! `cargo bench -p docket-bench-engine --bench effect_cost`.
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use docket_decider::WorkflowSpec;
use docket_decider::{Action, AgentRequest, AgentResponse, Confidence};
use docket_decider::{DryRunReport, EffectReceipt, EffectRequest, Verification};
use docket_runtime::InProcessExecutor;
use docket_runtime::Runtime;
use docket_runtime::Workflow;
use docket_runtime::{EffectExecutor, EffectFuture};
use docket_store::{EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime};

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
allowed = [{ from = "external", to = "publisher" }, { from = "publisher", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const WORKFLOW: &str = "name = \"effect-cost\"\npolicy = \"b.toml\"\nentry = \"publisher\"\n[agents.publisher]\nin_process = true\n";

/// Applies nothing anywhere: the bench measures docket, not a platform.
struct Instant_;

impl EffectExecutor for Instant_ {
    fn supports_dry_run(&self) -> bool {
        true
    }
    fn dry_run<'a>(&'a self, _: &'a EffectRequest) -> EffectFuture<'a, DryRunReport> {
        Box::pin(async {
            Ok(DryRunReport {
                ok: true,
                preview: Value::Null,
                message: None,
            })
        })
    }
    fn execute<'a>(&'a self, r: &'a EffectRequest) -> EffectFuture<'a, EffectReceipt> {
        Box::pin(async move {
            Ok(EffectReceipt {
                result: json!({ "post_id": r.idempotency_key }),
                drift: None,
            })
        })
    }
    fn verify<'a>(&'a self, r: &'a EffectRequest) -> EffectFuture<'a, Verification> {
        Box::pin(async move {
            Ok(Verification::Applied {
                result: json!({ "post_id": r.idempotency_key }),
            })
        })
    }
}

/// Asks for `input.effects` publishes, one per call, then finishes.
fn agent() -> Arc<InProcessExecutor> {
    Arc::new(InProcessExecutor::new(|r: &AgentRequest| {
        let wanted = r
            .decision_inputs
            .first()
            .and_then(|i| i.payload["effects"].as_u64())
            .unwrap_or(0);
        let done = r
            .decision_inputs
            .iter()
            .filter(|i| i.output_type == "effect_result")
            .count() as u64;
        let action = if done < wanted {
            Action::RequestEffect {
                kind: "publish".into(),
                lane: "api".into(),
                idempotency_key: Some(format!("{}-{done}", r.run_id)),
                params: json!({ "text": "hello" }),
                not_before: None,
            }
        } else {
            Action::Finish {
                output: json!({ "published": done }),
            }
        };
        AgentResponse::success(r.request_id.clone(), Confidence::High, vec![action])
    }))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    const K: u64 = 20;
    const ROUNDS: usize = 7;
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
        runtime.register_effect("publish", Arc::new(Instant_));
        runtime.register_agent("publisher", agent());
        let wf = Workflow {
            spec: WorkflowSpec::parse(WORKFLOW, Path::new("w.toml")).expect("workflow"),
            bundle_source: BUNDLE.into(),
            bundle_source_name: "b.toml".into(),
        };
        let run = |effects: u64, id: String| {
            let runtime = runtime.clone();
            let wf = wf.clone();
            let store = store.clone();
            async move {
                let syncs = store.stats().syncs;
                let t = Instant::now();
                let outcome = runtime
                    .start(&wf, json!({ "effects": effects }), Some(id.into()))
                    .await
                    .expect("run");
                let elapsed = t.elapsed();
                assert_eq!(
                    outcome.state.output().map(|o| o["published"].clone()),
                    Some(json!(effects))
                );
                (elapsed, store.stats().syncs - syncs)
            }
        };
        // Warm up: the bundle compiles once.
        run(1, "warm".into()).await;

        let largest_write = {
            let events = runtime.events(&"warm".into()).await.expect("events");
            let mut sizes = std::collections::BTreeMap::<i64, usize>::new();
            for e in &events {
                *sizes.entry(e.recorded_at_ns).or_default() += e.event.encode().len();
            }
            sizes.values().copied().max().unwrap_or(0)
        };

        let (mut per_effect, mut plain, mut syncs_per_effect) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let (base, base_syncs) = run(0, format!("base-{round}")).await;
            let (with, with_syncs) = run(K, format!("with-{round}")).await;
            per_effect.push(with.saturating_sub(base).as_secs_f64() / K as f64);
            syncs_per_effect.push((with_syncs - base_syncs) as f64 / K as f64);

            let stream = StreamId::new(format!("plain-{round}")).expect("stream id");
            let mut times = Vec::new();
            for i in 0..K {
                let t = Instant::now();
                store
                    .append(
                        &stream,
                        i,
                        vec![NewEvent {
                            kind: "plain".into(),
                            kind_version: 1,
                            recorded_at: WallTime(0),
                            policy: None,
                            payload: vec![b'x'; largest_write],
                        }],
                    )
                    .await
                    .expect("plain append");
                times.push(t.elapsed().as_secs_f64());
            }
            plain.push(median(times));
        }
        let (g, p) = (median(per_effect), median(plain));
        println!(
            "governed side effect (decision + dry run + kill switch + start + result + verification + the agent's next answer, durable): median {:?} per effect over {ROUNDS} rounds of {K}",
            Duration::from_secs_f64(g)
        );
        println!(
            "plain durable append of {largest_write} B:                                                                             median {:?}",
            Duration::from_secs_f64(p)
        );
        println!(
            "ratio governed / plain: {:.2}x; durable writes per effect: {:.1}",
            g / p.max(1e-12),
            median(syncs_per_effect)
        );
    });
}
