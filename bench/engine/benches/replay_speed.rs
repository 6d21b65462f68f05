//! Forensic replay on long runs (issue targets: replay of a 100,000-event run ≤ 1 s,
//! what-if over 100,000 events ≤ 1 s, resuming a 1,000,000-event run from its snapshot
//! ≤ 100 ms), each against the floor measured in the same run on the same events: bare
//! decoding of the recorded bytes plus BLAKE3 hashing of them, which any reader of the
//! log must do before it can decide anything.
//!
//! The run is built in memory by the decider itself: an `asker` agent asks a `helper`
//! agent for a capability again and again (each round trip records the answer, its gate
//! crossing and the next call), then finishes. Nothing here touches a disk.
//!
//! Run with `cargo bench -p docket-bench-engine --bench replay_speed`
//! (`DOCKET_BENCH_EVENTS` sets the sizes, comma-separated; default 1000,2000,4000,8000).
//! From decider version 9 a call made again records only the input it adds, so the log
//! grows linearly with the rounds; the state still keeps every call's whole request, so
//! the fold and the snapshot still grow with their square (see bench/RESULTS.md).
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use docket_decider::{
    Action, AgentResponse, AgentSpec, Command, Confidence, DECIDER_VERSION, ExecutorSpec, RunEvent,
    RunRequested, RunState, WorkflowSpec, decide_in_place,
};
use docket_policies::PolicyBundle;
use serde_json::json;

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BUNDLE: &str = r#"
bundle = { id = "long-run" }
[[agents]]
id = "external"
[[agents]]
id = "asker"
[[agents]]
id = "helper"
[[agents.capabilities]]
code = "lookup"
[interactions]
allowed = [
  { from = "external", to = "asker" },
  { from = "asker", to = "helper" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// A bundle that changes nothing the run decides but has another hash: what-if of it
/// decides every input again and compares.
fn same_rules_other_text() -> String {
    format!("{BUNDLE}\n# the same rules, another text\n")
}

fn in_process() -> AgentSpec {
    AgentSpec {
        executor: ExecutorSpec::InProcess { in_process: true },
        timeout_ms: None,
        classifiers: Vec::new(),
        cwd: None,
        max_response_bytes: None,
    }
}

/// A run of at least `events` events, recorded by the decider as the runtime would.
fn long_run(events: usize) -> Vec<RunEvent> {
    let bundle = PolicyBundle::from_toml_str(BUNDLE, "long-run.toml").expect("bundle");
    let run = RunRequested {
        run_id: "long".into(),
        workflow: WorkflowSpec {
            name: "long".into(),
            policy: "long-run.toml".into(),
            entry: "asker".into(),
            input_type: None,
            goal: None,
            budget: Default::default(),
            input: None,
            agents: ["asker", "helper"]
                .into_iter()
                .map(|a| (a.into(), in_process()))
                .collect(),
            effects: Default::default(),
            tools: Default::default(),
        },
        bundle_source: BUNDLE.into(),
        bundle_source_name: "long-run.toml".into(),
        bundle_hash: bundle.hash().to_hex(),
        input: json!({"topic": "long-running job", "round": 0}),
        at_ms: 1_000,
        decider_version: DECIDER_VERSION,
        forked_from: None,
    };
    let mut state = RunState::default();
    let mut log = decide_in_place(&mut state, &bundle, Command::Start(run)).expect("starts");
    let mut round = 0u64;
    loop {
        let request = state.pending_requests()[0].clone();
        let finishing = log.len() >= events;
        let actions = match (request.target_agent.as_str(), finishing) {
            ("asker", false) => {
                round += 1;
                let serde_json::Value::Object(inputs) =
                    json!({"question": format!("what is item {round}?"), "round": round})
                else {
                    unreachable!()
                };
                vec![Action::RequestCapability {
                    target_agent: "helper".into(),
                    capability_code: "lookup".into(),
                    inputs,
                }]
            }
            ("asker", true) => vec![Action::Finish {
                output: json!({"rounds": round}),
            }],
            _ => vec![Action::Finish {
                output: json!({"answer": format!("item {round} is fine"), "round": round}),
            }],
        };
        let response =
            AgentResponse::success(request.request_id.clone(), Confidence::High, actions);
        let batch = decide_in_place(
            &mut state,
            &bundle,
            Command::RecordResponse {
                request_id: request.request_id.clone(),
                response,
                at_ms: 2_000,
            },
        )
        .expect("decided");
        log.extend(batch);
        if state.status().is_final() {
            assert!(
                finishing,
                "the run stopped early: {:?}",
                state.stop_reason()
            );
            return log;
        }
    }
}

fn best_of(times: usize, mut f: impl FnMut()) -> Duration {
    (0..times)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let sizes: Vec<usize> = std::env::var("DOCKET_BENCH_EVENTS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 2_000, 4_000, 8_000]);
    let other = same_rules_other_text();
    let other_bundle = PolicyBundle::from_toml_str(&other, "other.toml").expect("bundle");
    for size in sizes {
        let built = Instant::now();
        let events = long_run(size);
        let built = built.elapsed();
        let recorded: Vec<(&'static str, Vec<u8>)> =
            events.iter().map(|e| (e.kind(), e.encode())).collect();
        let bytes: usize = recorded.iter().map(|(_, b)| b.len()).sum();
        println!(
            "\n== a run of {} events ({:.1} MB recorded, {} bytes per event; built in {}) ==",
            events.len(),
            bytes as f64 / 1e6,
            bytes / events.len(),
            ms(built)
        );
        let floor = best_of(3, || {
            let mut hasher = blake3::Hasher::new();
            for (kind, b) in &recorded {
                hasher.update(b);
                std::hint::black_box(RunEvent::decode(kind, b).expect("decodes"));
            }
            std::hint::black_box(hasher.finalize());
        });
        let fold = best_of(3, || {
            std::hint::black_box(RunState::fold(events.iter()));
        });
        let replay = best_of(3, || {
            let report = docket_replay::replay(&events).expect("replays");
            assert!(report.reproduced(), "{:?}", report.divergence);
        });
        let what_if = best_of(3, || {
            let r = docket_replay::what_if(&events, &other_bundle, &other, "other.toml")
                .expect("what-if");
            std::hint::black_box(r);
        });
        let state = RunState::fold(events.iter());
        let snapshot = serde_json::to_vec(&state).expect("state encodes");
        let from_snapshot = best_of(3, || {
            let s: RunState = serde_json::from_slice(&snapshot).expect("state decodes");
            std::hint::black_box(s);
        });
        let floor_s = floor.as_secs_f64();
        let row = |what: &str, d: Duration, target: &str| {
            println!(
                "{what:<38} {:>10}  {:>6.2}x the floor   target {target}",
                ms(d),
                d.as_secs_f64() / floor_s
            );
        };
        row("floor: decode + BLAKE3 of every event", floor, "-");
        row("fold (the state, no decisions)", fold, "-");
        row(
            "replay (every decision re-derived)",
            replay,
            "≤ 1 s at 100,000",
        );
        row(
            "what-if (same rules, other bundle)",
            what_if,
            "≤ 1 s at 100,000",
        );
        println!(
            "{:<38} {:>10}  {:>6.2}x the floor   target ≤ 100 ms at 1,000,000 (state {:.1} MB as JSON)",
            "state from its snapshot (JSON)",
            ms(from_snapshot),
            from_snapshot.as_secs_f64() / floor_s,
            snapshot.len() as f64 / 1e6
        );
    }
}
