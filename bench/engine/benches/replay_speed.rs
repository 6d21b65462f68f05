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
//! (`DOCKET_BENCH_EVENTS` sets the sizes, comma-separated; default 10000,100000;
//! `DOCKET_BENCH_RESUME` the length of the run resumed from its snapshot, default
//! 1000000, 0 to skip). From decider version 9 a call made again records only the input
//! it adds, and the state keeps it so (linked to the call it repeats), so the log, the
//! fold and the snapshot all grow linearly with the rounds (see bench/RESULTS.md).
//!
//! The resumed run is built by the decider in memory like the others, written to an
//! embedded store in a temporary directory in batches of 10,000 events (not by driving
//! agents through the runtime: a million agent calls would take too long on 2 cores),
//! with a snapshot where the runtime would have written its last one before the head
//! and one at the head (a drive that stopped); then `Runtime::state` and the pending
//! request are timed from each.
#![allow(clippy::print_stdout)]

use docket_bench_engine::{best_of, ms, sizes};
use std::time::{Duration, Instant};

use docket_decider::{
    Action, AgentResponse, AgentSpec, Command, Confidence, DECIDER_VERSION, ExecutorSpec, NextStep,
    RunEvent, RunRequested, RunState, WorkflowSpec, decide_in_place, snapshot_interval,
};
use docket_policies::PolicyBundle;
use docket_runtime::Runtime;
use docket_store::{EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime};
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

/// A run of at least `events` events, recorded by the decider as the runtime would;
/// finished, or (`finish` false) stopped with the asker's next call pending.
fn long_run(events: usize, finish: bool) -> Vec<RunEvent> {
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
        if !finish && log.len() >= events {
            return log;
        }
        let Some(request) = state.pending_call_ids().first().map(|id| (*id).clone()) else {
            panic!("a call is pending");
        };
        let target = state.calls()[&request].recorded.target_agent.clone();
        let finishing = log.len() >= events;
        let actions = match (target.as_str(), finishing) {
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
        let response = AgentResponse::success(request.clone(), Confidence::High, actions);
        let batch = decide_in_place(
            &mut state,
            &bundle,
            Command::RecordResponse {
                request_id: request.clone(),
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

fn main() {
    let sizes = sizes(&[10_000, 100_000]);
    let other = same_rules_other_text();
    let other_bundle = PolicyBundle::from_toml_str(&other, "other.toml").expect("bundle");
    for size in sizes {
        let built = Instant::now();
        let events = long_run(size, true);
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
        let snapshot = state.encode_snapshot().expect("state encodes");
        let encode = best_of(3, || {
            std::hint::black_box(state.encode_snapshot().expect("state encodes"));
        });
        let from_snapshot = best_of(3, || {
            let s = RunState::decode_snapshot(&snapshot).expect("state decodes");
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
        row("snapshot written (encoded)", encode, "-");
        println!(
            "{:<38} {:>10}  {:>6.2}x the floor   (snapshot {:.1} MB, {} bytes per event)",
            "state from its snapshot (decoded)",
            ms(from_snapshot),
            from_snapshot.as_secs_f64() / floor_s,
            snapshot.len() as f64 / 1e6,
            snapshot.len() / events.len()
        );
    }
    let resume: usize = std::env::var("DOCKET_BENCH_RESUME")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1_000_000);
    if resume > 0 {
        resume_from_snapshot(resume);
    }
}

/// A run of `size` events written to a store, resumed from its snapshots.
fn resume_from_snapshot(size: usize) {
    let built = Instant::now();
    let events = long_run(size, false);
    let built = built.elapsed();
    let head = events.len() as u64;
    let recorded: Vec<(&'static str, Vec<u8>)> =
        events.iter().map(|e| (e.kind(), e.encode())).collect();
    let bytes: usize = recorded.iter().map(|(_, b)| b.len()).sum();
    println!(
        "\n== resuming a run of {head} events ({:.1} MB recorded; built in {}) ==",
        bytes as f64 / 1e6,
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
    // Where the runtime wrote its last snapshot before the head while driving.
    let every = snapshot_interval(head);
    let before_head = head / every * every;
    let at_before = RunState::fold(&events[..before_head as usize]);
    let at_head = RunState::fold(events.iter());
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
        let stream = StreamId::new("long").expect("stream id");
        let written = Instant::now();
        let mut version = 0u64;
        for chunk in recorded.chunks(10_000) {
            let batch: Vec<NewEvent> = chunk
                .iter()
                .map(|(kind, payload)| NewEvent {
                    kind: (*kind).to_owned(),
                    kind_version: docket_decider::KIND_VERSION,
                    recorded_at: WallTime(0),
                    policy: None,
                    payload: payload.clone(),
                })
                .collect();
            store
                .append(&stream, version, batch)
                .await
                .expect("appended");
            version += chunk.len() as u64;
        }
        println!("written to the store in {}", ms(written.elapsed()));
        let rt = Runtime::new(store.clone());
        let run = docket_decider::RunId::from("long");
        let floor_s = floor.as_secs_f64();
        let row = |what: &str, d: Duration, target: &str| {
            println!(
                "{what:<44} {:>10}  {:>8.4}x the floor   target {target}",
                ms(d),
                d.as_secs_f64() / floor_s
            );
        };
        row("floor: decode + BLAKE3 of every event", floor, "-");
        let time_resume = || async {
            let mut best = Duration::MAX;
            for _ in 0..3 {
                let t = Instant::now();
                let state = rt.state(&run).await.expect("state");
                let NextStep::Call(pending) = state.next_step() else {
                    panic!("the asker's call is pending");
                };
                std::hint::black_box(pending);
                best = best.min(t.elapsed());
            }
            best
        };
        let folded = time_resume().await;
        row("resume with no snapshot (the log folded)", folded, "-");
        for (what, state) in [
            (
                format!("resume from a snapshot {} back", head - before_head),
                &at_before,
            ),
            ("resume from the snapshot at the head".to_owned(), &at_head),
        ] {
            let snapshot = state.encode_snapshot().expect("encodes");
            let size = snapshot.len();
            store
                .put_snapshot(&stream, state.version(), snapshot)
                .await
                .expect("snapshot stored");
            let d = time_resume().await;
            row(&what, d, "≤ 100 ms at 1,000,000");
            println!("  (snapshot {:.1} MB)", size as f64 / 1e6);
        }
        let state = rt.state(&run).await.expect("state");
        assert_eq!(state, at_head, "the state from the snapshot is the fold");
    });
}
