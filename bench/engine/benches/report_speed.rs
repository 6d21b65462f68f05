//! The HTML report (`docket export RUN --format html`) of long runs, against the floor
//! measured in the same run on the same events (bare decoding of the recorded bytes
//! plus BLAKE3 hashing of them, which any reader of the log must do) and against
//! `docket replay` of them, which the report includes.
//!
//! The run is built in memory by the decider: a `writer` and a `reviewer` hand a draft
//! back and forth (each round records an answer, its handoff with a field withheld, and
//! the next call), then the writer finishes. Nothing here touches a disk.
//!
//! Run with `cargo bench -p docket-bench-engine --bench report_speed`
//! (`DOCKET_BENCH_EVENTS` sets the sizes, comma-separated; default 1000,4000,16000).
#![allow(clippy::print_stdout)]

use docket_bench_engine::{best_of, ms, sizes};
use docket_decider::AgentResponded;

use docket_decider::{
    Action, AgentResponse, AgentSpec, Command, Confidence, DECIDER_VERSION, ExecutorSpec, RunEvent,
    RunRequested, RunState, WorkflowSpec, decide_in_place,
};
use docket_evidence::{ChainCheck, LoggedEvent, ReportVerification, html_report};
use docket_policies::PolicyBundle;
use serde_json::json;

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BUNDLE: &str = r#"
bundle = { id = "review-loop" }
[[agents]]
id = "external"
[[agents]]
id = "writer"
[[agents]]
id = "reviewer"
[interactions]
allowed = [
  { from = "external", to = "writer" },
  { from = "writer", to = "reviewer" },
  { from = "reviewer", to = "writer" },
  { from = "writer", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
blocked_context_fields = ["notes"]
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

/// A run of at least `events` events, recorded by the decider as the runtime would.
fn review_loop(events: usize) -> Vec<RunEvent> {
    let bundle = PolicyBundle::from_toml_str(BUNDLE, "review-loop.toml").expect("bundle");
    let run = RunRequested {
        run_id: "loop".into(),
        workflow: WorkflowSpec {
            name: "review loop".into(),
            policy: "review-loop.toml".into(),
            entry: "writer".into(),
            input_type: None,
            goal: None,
            budget: Default::default(),
            input: None,
            agents: ["writer", "reviewer"]
                .into_iter()
                .map(|a| (a.into(), in_process()))
                .collect(),
            effects: Default::default(),
            tools: Default::default(),
            evidence: Default::default(),
        },
        bundle_source: BUNDLE.into(),
        bundle_source_name: "review-loop.toml".into(),
        bundle_hash: bundle.hash().to_hex(),
        input: json!({"topic": "a long review", "round": 0}),
        at_ms: 1_000,
        decider_version: DECIDER_VERSION,
        forked_from: None,
        scheduled: None,
        session: None,
    };
    let mut state = RunState::default();
    let mut log = decide_in_place(&mut state, &bundle, Command::Start(run.into())).expect("starts");
    let mut round = 0i64;
    loop {
        let request = state.pending_requests()[0].clone();
        round += 1;
        let draft = json!({"text": format!("draft {round}"), "round": round, "notes": "kept back"});
        let action = match (request.target_agent.as_str(), log.len() >= events) {
            ("writer", true) => Action::Finish {
                output: json!({"rounds": round}),
            },
            ("writer", false) => Action::Handoff {
                to: "reviewer".into(),
                output_type: "draft".into(),
                payload: draft,
                task: None,
            },
            _ => Action::Handoff {
                to: "writer".into(),
                output_type: "review".into(),
                payload: draft,
                task: None,
            },
        };
        let response =
            AgentResponse::success(request.request_id.clone(), Confidence::High, vec![action]);
        let batch = decide_in_place(
            &mut state,
            &bundle,
            Command::RecordResponse(AgentResponded {
                request_id: request.request_id.clone(),
                response: response.into(),
                at_ms: 1_000 + round,
            }),
        )
        .expect("decided");
        log.extend(batch);
        if state.status().is_final() {
            return log;
        }
    }
}

fn main() {
    let sizes = sizes(&[1_000, 4_000, 16_000]);
    for size in sizes {
        let events = review_loop(size);
        let recorded: Vec<(&'static str, Vec<u8>)> =
            events.iter().map(|e| (e.kind(), e.encode())).collect();
        let logged: Vec<LoggedEvent> = events
            .iter()
            .zip(&recorded)
            .enumerate()
            .map(|(i, (event, (_, bytes)))| LoggedEvent {
                seq: i as u64 + 1,
                recorded_at_ns: 1_795_465_865_000_000_000 + i as i64 * 1_000_000,
                hash: blake3::hash(bytes).to_hex().to_string(),
                event: event.clone(),
            })
            .collect();
        let verification = ReportVerification {
            chain: ChainCheck::Sound {
                events: logged.len() as u64,
            },
            checkpoint: None,
        };
        let floor = best_of(3, || {
            let mut hasher = blake3::Hasher::new();
            for (kind, b) in &recorded {
                hasher.update(b);
                std::hint::black_box(RunEvent::decode(kind, b).expect("decodes"));
            }
            std::hint::black_box(hasher.finalize());
        });
        let replay = best_of(3, || {
            let report = docket_replay::replay(&events).expect("replays");
            assert!(report.reproduced(), "{:?}", report.divergence);
        });
        let mut page_len = 0;
        let report = best_of(3, || {
            let page = html_report(&logged, &verification).expect("report");
            page_len = page.len();
            std::hint::black_box(page);
        });
        println!(
            "\n== a run of {} events (the page: {:.1} MB, {} bytes per event) ==",
            events.len(),
            page_len as f64 / 1e6,
            page_len / events.len()
        );
        let floor_s = floor.as_secs_f64();
        for (what, d) in [
            ("floor: decode + BLAKE3 of every event", floor),
            ("replay (included in the report)", replay),
            ("the HTML report", report),
        ] {
            println!(
                "{what:<38} {:>10}  {:>6.2}x the floor",
                ms(d),
                d.as_secs_f64() / floor_s
            );
        }
    }
}
