//! Forensic replay on long runs (issue targets: replay of a 100,000-event run ≤ 1 s,
//! what-if over 100,000 events ≤ 1 s, resuming a 1,000,000-event run from its snapshot
//! ≤ 100 ms), each against the floor measured in the same run on the same events: bare
//! decoding of the recorded bytes plus BLAKE3 hashing of them, which any reader of the
//! log must do before it can decide anything.
//!
//! Two run shapes, each built in memory by the decider itself (nothing here touches a
//! disk but the resumed run's store):
//! - a long job ([`job_run`]): items handed planner → worker → reviewer → planner, the
//!   worker asking a helper for every fourth and publishing every 25th (a side effect),
//!   the planner having every tenth checked in a child episode. Every request is of
//!   bounded size: this is what a real long run looks like.
//! - one asker called again and again ([`long_run`]): each answer returns to it in a call
//!   made again, whose request carries every answer so far. Its log and state grow
//!   linearly (a call made again records only what it adds), but the pending request the
//!   runtime sends is as long as the run.
//!
//! Run with `cargo bench -p docket-bench-engine --bench replay_speed`
//! (`DOCKET_BENCH_EVENTS` sets the sizes, comma-separated; default 10000,100000;
//! `DOCKET_BENCH_RESUME` the length of the long job resumed from its snapshot, default
//! 1000000, 0 to skip; `DOCKET_BENCH_RESUME_ASKER` set resumes the asker loop too).
//!
//! The resumed run is built by the decider in memory like the others, written to an
//! embedded store in a temporary directory in batches of 10,000 events (not by driving
//! agents through the runtime: a million agent calls would take too long on 2 cores),
//! with a snapshot as far back as the runtime's last one can be (`SNAPSHOT_EVERY` - 1
//! events) and one at the head (a drive that stopped); then `Runtime::state` and the pending
//! request are timed from each.
#![allow(clippy::print_stdout)]

use docket_bench_engine::{best_of, ms, sizes};
use docket_decider::AgentResponded;
use std::time::{Duration, Instant};

use docket_decider::{
    Action, AgentResponse, AgentSpec, Command, Confidence, DECIDER_VERSION, ExecutorSpec, NextStep,
    RunEvent, RunHistory, RunRequested, RunState, SNAPSHOT_EVERY, WorkflowSpec, decide_in_place,
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

fn in_process() -> AgentSpec {
    AgentSpec {
        executor: ExecutorSpec::InProcess { in_process: true },
        timeout_ms: None,
        classifiers: Vec::new(),
        cwd: None,
        max_response_bytes: None,
        processes: None,
        requests_per_process: None,
        ca_file: None,
        bearer_env: None,
        headers_env: Default::default(),
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
            evidence: Default::default(),
        },
        bundle_source: BUNDLE.into(),
        bundle_source_name: "long-run.toml".into(),
        bundle_hash: bundle.hash().to_hex(),
        input: json!({"topic": "long-running job", "round": 0}),
        at_ms: 1_000,
        decider_version: DECIDER_VERSION,
        forked_from: None,
        scheduled: None,
        session: None,
    };
    let mut state = RunState::default();
    let mut log = decide_in_place(&mut state, &bundle, Command::Start(run.into())).expect("starts");
    let mut round = 0u64;
    loop {
        if !finish && log.len() >= events {
            return log;
        }
        let Some(request) = state.pending_call_ids().first().map(|id| (*id).clone()) else {
            panic!("a call is pending");
        };
        let target = state.live_calls()[&request].recorded.target_agent.clone();
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
                    priority: None,
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
            Command::RecordResponse(AgentResponded {
                request_id: request.clone(),
                response: response.into(),
                at_ms: 2_000,
            }),
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

/// A long job's bundle: a planner, a worker and a reviewer handing work round a cycle; the
/// worker asks a helper now and then and publishes now and then (a side effect); the
/// planner has each tenth item checked in a child episode.
const JOB_BUNDLE: &str = r#"
bundle = { id = "long-job" }
[[agents]]
id = "external"
[[agents]]
id = "planner"
[[agents]]
id = "worker"
side_effects = ["publish"]
[[agents]]
id = "reviewer"
[[agents]]
id = "helper"
[[agents.capabilities]]
code = "lookup"
[[agents]]
id = "checker"
[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = false
[interactions]
allowed = [
  { from = "external", to = "planner" },
  { from = "planner", to = "worker" },
  { from = "planner", to = "checker" },
  { from = "worker", to = "reviewer" },
  { from = "worker", to = "helper" },
  { from = "reviewer", to = "planner" },
  { from = "reviewer", to = "external" },
]
[recursion.default]
allowed_child_types = ["verify"]
max_children = 1000000
max_total_episodes = 1000000
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// A long job of at least `events` events, recorded by the decider as the runtime would:
/// item after item goes planner → worker → reviewer → planner (each call a new request of
/// bounded size); every fourth item the worker asks the helper first, every 25th it
/// publishes (an effect: kill switches read, applied, verified), every tenth the planner
/// has it checked in a child episode first. Finished by the reviewer, or (`finish` false)
/// stopped with a call pending.
fn job_run(events: usize, finish: bool) -> Vec<RunEvent> {
    use docket_decider::{
        EffectApplied, EffectInput, EffectKillSwitchChecked, EffectReceipt, EffectVerification,
        EffectWork, EpisodeResult, EpisodeStatus, Verification,
    };
    let bundle = PolicyBundle::from_toml_str(JOB_BUNDLE, "long-job.toml").expect("bundle");
    let run = RunRequested {
        run_id: "job".into(),
        workflow: WorkflowSpec {
            name: "job".into(),
            policy: "long-job.toml".into(),
            entry: "planner".into(),
            input_type: None,
            goal: None,
            budget: Default::default(),
            input: None,
            agents: ["planner", "worker", "reviewer", "helper", "checker"]
                .into_iter()
                .map(|a| (a.into(), in_process()))
                .collect(),
            effects: Default::default(),
            tools: Default::default(),
            evidence: Default::default(),
        },
        bundle_source: JOB_BUNDLE.into(),
        bundle_source_name: "long-job.toml".into(),
        bundle_hash: bundle.hash().to_hex(),
        input: json!({"job": "a long-running job", "items": "many"}),
        at_ms: 1_000,
        decider_version: DECIDER_VERSION,
        forked_from: None,
        scheduled: None,
        session: None,
    };
    let object = |v: serde_json::Value| match v {
        serde_json::Value::Object(m) => m,
        _ => unreachable!("an object"),
    };
    let mut state = RunState::default();
    let mut log = decide_in_place(&mut state, &bundle, Command::Start(run.into())).expect("starts");
    let (mut item, mut planner_checked, mut worker_asked, mut worker_published) =
        (1u64, false, false, false);
    loop {
        let command = match state.next_step() {
            NextStep::Effect(record, work) => {
                let effect_id = record.requested.effect_id.clone();
                let input = match work {
                    EffectWork::Execute => {
                        // The kill switches read, then (the runtime does both in one
                        // step) the executor's receipt.
                        let read = EffectInput::KillSwitchChecked(EffectKillSwitchChecked {
                            effect_id: effect_id.clone(),
                            engaged: Vec::new(),
                            error: None,
                            at_ms: 2_000,
                        });
                        log.extend(
                            decide_in_place(&mut state, &bundle, Command::RecordEffect(read))
                                .expect("decided"),
                        );
                        EffectInput::Applied(EffectApplied {
                            effect_id,
                            receipt: EffectReceipt {
                                result: json!({"post_id": format!("post-{item}")}),
                                drift: None,
                            },
                            at_ms: 2_000,
                            reused_from: None,
                        })
                    }
                    EffectWork::Verify => EffectInput::Verified(EffectVerification {
                        effect_id,
                        verification: Verification::Applied {
                            result: json!({"post_id": format!("post-{item}")}),
                        },
                        cause: None,
                        at_ms: 2_000,
                    }),
                    other => panic!("no {other:?} in this job"),
                };
                Command::RecordEffect(input)
            }
            NextStep::Call(pending) => {
                let request = pending[0].clone();
                if !finish && log.len() >= events {
                    return log;
                }
                let finishing = log.len() >= events;
                let actions = match request.target_agent.as_str() {
                    "planner" if item % 10 == 0 && !planner_checked => {
                        planner_checked = true;
                        vec![Action::Spawn {
                            agent: "checker".into(),
                            episode_type: "verify".into(),
                            goal: format!("check item {item}"),
                            budget: Default::default(),
                            inputs: object(json!({"item": item})),
                            trigger: None,
                        }]
                    }
                    "planner" => {
                        planner_checked = false;
                        vec![Action::Handoff {
                            to: "worker".into(),
                            output_type: "task".into(),
                            payload: json!({"item": item, "what": format!("do item {item}")}),
                            task: None,
                        }]
                    }
                    "checker" => vec![Action::FinishEpisode {
                        result: EpisodeResult::new(
                            EpisodeStatus::Ok,
                            format!("item {item} checked"),
                        ),
                    }],
                    "helper" => vec![Action::Finish {
                        output: json!({"answer": format!("about item {item}")}),
                    }],
                    "worker" if item % 4 == 1 && !worker_asked => {
                        worker_asked = true;
                        vec![Action::RequestCapability {
                            target_agent: "helper".into(),
                            capability_code: "lookup".into(),
                            inputs: object(json!({"question": format!("what of item {item}?")})),
                            priority: None,
                        }]
                    }
                    "worker" if item % 25 == 2 && !worker_published => {
                        worker_published = true;
                        vec![Action::RequestEffect {
                            kind: "publish".into(),
                            lane: "api".into(),
                            idempotency_key: Some(format!("item-{item}")),
                            params: json!({"text": format!("item {item} done")}),
                            not_before: None,
                        }]
                    }
                    "worker" => {
                        (worker_asked, worker_published) = (false, false);
                        vec![Action::Handoff {
                            to: "reviewer".into(),
                            output_type: "draft".into(),
                            payload: json!({"item": item, "draft": format!("item {item} drafted")}),
                            task: None,
                        }]
                    }
                    "reviewer" if finishing => vec![Action::Finish {
                        output: json!({"items": item}),
                    }],
                    "reviewer" => {
                        item += 1;
                        vec![Action::Handoff {
                            to: "planner".into(),
                            output_type: "review".into(),
                            payload: json!({"item": item - 1, "verdict": "fine"}),
                            task: None,
                        }]
                    }
                    other => panic!("no agent {other} in this job"),
                };
                let response =
                    AgentResponse::success(request.request_id.clone(), Confidence::High, actions);
                Command::RecordResponse(AgentResponded {
                    request_id: request.request_id.clone(),
                    response: response.into(),
                    at_ms: 2_000,
                })
            }
            NextStep::Done(status) => {
                assert!(
                    finish && status == docket_decider::RunStatus::Completed,
                    "the job stopped early: {status:?} {:?}",
                    state.stop_reason()
                );
                return log;
            }
            other => panic!("the job waits: {other:?} {:?}", state.stop_reason()),
        };
        let batch = decide_in_place(&mut state, &bundle, command).expect("decided");
        log.extend(batch);
    }
}

/// The two run shapes measured.
#[derive(Clone, Copy)]
enum Shape {
    /// [`job_run`]: a long job, every request of bounded size.
    Job,
    /// [`long_run`]: one asker called again and again, its request growing with the run.
    AskerLoop,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Self::Job => "a long job (planner, worker, reviewer; helper, checks, effects)",
            Self::AskerLoop => "one asker called again and again",
        }
    }

    fn run(self, events: usize, finish: bool) -> Vec<RunEvent> {
        match self {
            Self::Job => job_run(events, finish),
            Self::AskerLoop => long_run(events, finish),
        }
    }

    fn bundle(self) -> &'static str {
        match self {
            Self::Job => JOB_BUNDLE,
            Self::AskerLoop => BUNDLE,
        }
    }
}

fn main() {
    let sizes = sizes(&[10_000, 100_000]);
    for shape in [Shape::Job, Shape::AskerLoop] {
        for &size in &sizes {
            measure(shape, size);
        }
    }
    let resume: usize = std::env::var("DOCKET_BENCH_RESUME")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1_000_000);
    if resume > 0 {
        resume_from_snapshot(Shape::Job, resume);
        if std::env::var_os("DOCKET_BENCH_RESUME_ASKER").is_some() {
            resume_from_snapshot(Shape::AskerLoop, resume);
        }
    }
}

/// Replay, what-if, fold and snapshot of a finished run of `size` events of `shape`.
fn measure(shape: Shape, size: usize) {
    let other = format!("{}\n# the same rules, another text\n", shape.bundle());
    let other_bundle = PolicyBundle::from_toml_str(&other, "other.toml").expect("bundle");
    let built = Instant::now();
    let events = shape.run(size, true);
    let built = built.elapsed();
    let recorded: Vec<(&'static str, Vec<u8>)> =
        events.iter().map(|e| (e.kind(), e.encode())).collect();
    let bytes: usize = recorded.iter().map(|(_, b)| b.len()).sum();
    println!(
        "\n== {}: {} events ({:.1} MB recorded, {} bytes per event; built in {}) ==",
        shape.name(),
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
    let history = best_of(3, || {
        std::hint::black_box(RunHistory::fold(events.iter()));
    });
    let replay = best_of(3, || {
        let report = docket_replay::replay(&events).expect("replays");
        assert!(report.reproduced(), "{:?}", report.divergence);
    });
    let what_if = best_of(3, || {
        let r =
            docket_replay::what_if(&events, &other_bundle, &other, "other.toml").expect("what-if");
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
    let cadences = snapshot_cadences(&events);
    let floor_s = floor.as_secs_f64();
    let row = |what: &str, d: Duration, target: &str| {
        println!(
            "{what:<38} {:>10}  {:>6.2}x the floor   target {target}",
            ms(d),
            d.as_secs_f64() / floor_s
        );
    };
    row("floor: decode + BLAKE3 of every event", floor, "-");
    row("fold (the live state, no decisions)", fold, "-");
    row("history (every call and handoff)", history, "-");
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
        "{:<38} {:>10}  {:>6.2}x the floor   (snapshot {:.1} kB, {} calls kept)",
        "state from its snapshot (decoded)",
        ms(from_snapshot),
        from_snapshot.as_secs_f64() / floor_s,
        snapshot.len() as f64 / 1e3,
        state.live_calls().len(),
    );
    for (what, c) in [
        ("old: every 1,024, then an eighth of the run", cadences[0]),
        ("new: every SNAPSHOT_EVERY events", cadences[1]),
    ] {
        println!(
            "snapshots a drive writes over the run, {what}: {} of them, {:.1} MB, encoded in {} ({:.2}x the floor)",
            c.count,
            c.bytes as f64 / 1e6,
            ms(c.encoding),
            c.encoding.as_secs_f64() / floor_s
        );
    }
}

/// What writing snapshots at one cadence costs over a whole run.
#[derive(Clone, Copy, Default)]
struct Cadence {
    count: u64,
    bytes: usize,
    encoding: Duration,
}

/// The snapshots a drive of `events` writes, at the cadence before `SNAPSHOT_EVERY` (every
/// 1,024 events, then every eighth of the run in powers of two) and at the current one:
/// how many, their bytes, and the time to encode them, the state folded event by event.
fn snapshot_cadences(events: &[RunEvent]) -> [Cadence; 2] {
    let old_every = |v: u64| ((1u64 << (63 - v.leading_zeros())) / 8).max(1024);
    let mut out = [Cadence::default(); 2];
    let mut state = RunState::default();
    for (i, event) in events.iter().enumerate() {
        state.apply(event);
        let v = i as u64 + 1;
        let due = [
            v.is_multiple_of(old_every(v)),
            v.is_multiple_of(SNAPSHOT_EVERY),
        ];
        if !due.contains(&true) {
            continue;
        }
        let t = Instant::now();
        let bytes = state.encode_snapshot().expect("state encodes");
        let d = t.elapsed();
        for (c, due) in out.iter_mut().zip(due) {
            if due {
                c.count += 1;
                c.bytes += bytes.len();
                c.encoding += d;
            }
        }
    }
    out
}

/// A run of `size` events of `shape` written to a store, resumed from its snapshots.
fn resume_from_snapshot(shape: Shape, size: usize) {
    let built = Instant::now();
    let events = shape.run(size, false);
    let built = built.elapsed();
    let head = events.len() as u64;
    let recorded: Vec<(&'static str, Vec<u8>)> =
        events.iter().map(|e| (e.kind(), e.encode())).collect();
    let bytes: usize = recorded.iter().map(|(_, b)| b.len()).sum();
    println!(
        "\n== resuming {}: {head} events ({:.1} MB recorded; built in {}) ==",
        shape.name(),
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
    // The farthest back the runtime's last snapshot can be: a drive that crashed just
    // before its next snapshot point.
    let before_head = (head - SNAPSHOT_EVERY + 1).max(1);
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
        let run = at_head.run_id().cloned().expect("a run");
        let stream = StreamId::new(run.as_str()).expect("stream id");
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
                    panic!("a call is pending");
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
                format!(
                    "resume from a snapshot {} back (the most)",
                    head - before_head
                ),
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
            println!(
                "  (snapshot {:.1} kB, {} calls kept)",
                size as f64 / 1e3,
                state.live_calls().len()
            );
        }
        let state = rt.state(&run).await.expect("state");
        assert_eq!(state, at_head, "the state from the snapshot is the fold");
    });
}
