//! Golden logs (docs/events.md, "Decider versions"; `tests/golden/README.md`): one recorded
//! run per shape — a pipeline, an episode tree, a side effect, a blocked run, a run waiting
//! for a human, ... — for each decider version this build decides as, checked in under
//! `tests/golden/v<N>/<shape>/` as the store's own files (`DOCKET-STORE`, `log/*.seg`) with
//! a `golden.toml` manifest; and under `tests/golden/formats/<layout>/<shape>/`, logs in
//! the older store formats and payload encodings this build still reads.
//!
//! Every `cargo test` checks, with no environment needed:
//! - every fixture found under `tests/golden/` (opened from a copy in a temp dir) reads
//!   back as a sound chain by the store's own checks, decodes as `RunEvent`s, matches its
//!   manifest (decider version, event count, last hash), and ends in its shape's status;
//!   one of a decider version this build decides as replays with the decisions it was
//!   recorded with, one of a retired version is refused by replay, naming its version;
//! - every fixture of the current `DECIDER_VERSION` is recorded again by this build, with
//!   the same agents, run id and stepping clock, to the same bytes, event by event (and the
//!   same segment file bytes), and recorded durably (synced, over a zero runway, on a
//!   multi-threaded runtime, as `docket run` records) to the same files once trimmed;
//! - a copy of every fixture with one byte changed fails those checks.
//!
//! **Blessing.** `DOCKET_BLESS_GOLDEN=1 cargo test -p docket-tests --test engine golden_logs::`
//! records every shape that has no fixture yet for the current decider version into
//! `tests/golden/v<DECIDER_VERSION>/<shape>/`, then runs the checks above on it. It never
//! overwrites a fixture: a fixture of a released decider version is never re-blessed; a
//! decider that decides differently raises `DECIDER_VERSION`, and its fixtures are added
//! next to the old ones, which go on replaying until their version is retired
//! (ARCHITECTURE.md, "Decider versions").
#![allow(clippy::print_stderr)] // blessing says what it wrote

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use docket_decider::{
    Action, AgentRequest, AgentResponse, BudgetRequest, COMMITTED_PAYLOAD, CommittedPayload,
    Confidence, DECIDER_VERSION, DisclosureLookup, DryRunReport, EffectCallError, EffectReceipt,
    EffectRequest, EpisodeResult, EpisodeStatus, OLDEST_DECIDER_VERSION, PLAIN_PAYLOAD,
    REFERENCED_PAYLOAD, ReferencedPayload, ReplayMismatch, RunEvent, RunState, RunStatus,
    UnsupportedDecider, Usage, Verification, WorkflowSpec, recorded_bundle, replay_check,
    same_decisions,
};
use docket_decider::{ExecutorSpec, RunRequested};
use docket_example_geo::{governance, intelligence, observation, reasoning, strategy};
use docket_replay::ReplayError;
use docket_runtime::{
    AgentExecutor, HumanDecision, InProcessEffect, InProcessEffectExecutor, InProcessExecutor,
    PayloadEncoding, Runtime, SteppingClock, Workflow,
};
use docket_store::{
    Durability, EmbeddedStore, Event, EventStore, FORMAT_VERSION, OLDEST_FORMAT_VERSION, Payload,
    StoreConfig, StreamId,
};
use docket_tests::{geo_workflow, workspace_root};

/// Set to `1` to write the fixtures missing for the current decider version.
const BLESS_ENV: &str = "DOCKET_BLESS_GOLDEN";

/// 2026-01-01T00:00:00Z, stepping 1 ms per clock read.
const CLOCK_START_NS: i64 = 1_767_225_600_000_000_000;
const CLOCK_STEP_NS: i64 = 1_000_000;
const MANIFEST: &str = "golden.toml";
const MARKER: &str = "DOCKET-STORE";
/// A segment file's header; a batch frame's header (`DKTB`, length, CRC), store/FORMAT.md §2.
const SEGMENT_HEADER_LEN: usize = 32;
const FRAME_HEADER_LEN: usize = 12;
const FRAME_MAGIC: &[u8; 4] = b"DKTB";

// ---------------------------------------------------------------------------------------
// The shapes: small workflows with in-process agents, each a fixed run.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Geo,
    Episode,
    Effect,
    Blocked,
    Waiting,
    Answered,
    Fallback,
    Refused,
    Translated,
    Signalled,
}

impl Shape {
    const ALL: [Shape; 10] = [
        Shape::Geo,
        Shape::Episode,
        Shape::Effect,
        Shape::Blocked,
        Shape::Waiting,
        Shape::Answered,
        Shape::Fallback,
        Shape::Refused,
        Shape::Translated,
        Shape::Signalled,
    ];

    /// The first decider version with a fixture of the shape: a shape added with a
    /// version shows what that version changed, which no older one decides.
    fn since(self) -> u32 {
        match self {
            Shape::Translated | Shape::Signalled => 13,
            _ => OLDEST_DECIDER_VERSION,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Shape::Geo => "geo",
            Shape::Episode => "episode",
            Shape::Effect => "effect",
            Shape::Blocked => "blocked",
            Shape::Waiting => "waiting",
            Shape::Answered => "answered",
            Shape::Fallback => "fallback",
            Shape::Refused => "refused",
            Shape::Translated => "translated",
            Shape::Signalled => "signalled",
        }
    }

    fn from_name(name: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.name() == name)
    }

    fn run_id(self) -> String {
        format!("golden-{}", self.name())
    }

    fn status(self) -> RunStatus {
        match self {
            Shape::Geo
            | Shape::Episode
            | Shape::Effect
            | Shape::Answered
            | Shape::Fallback
            | Shape::Translated
            | Shape::Signalled => RunStatus::Completed,
            Shape::Blocked | Shape::Refused => RunStatus::Blocked,
            Shape::Waiting => RunStatus::WaitingForHuman,
        }
    }

    /// Kinds the log must hold at least this many of, so a fixture is the shape it claims.
    fn landmarks(self) -> &'static [(&'static str, usize)] {
        match self {
            Shape::Geo => &[
                ("agent.responded", 6),
                ("handoff.allowed", 6),
                ("run.completed", 1),
            ],
            Shape::Episode => &[
                ("episode.started", 1),
                ("episode.finished", 2),
                ("run.completed", 1),
            ],
            Shape::Effect => &[
                ("effect.requested", 1),
                ("effect.dry_run", 1),
                ("effect.started", 1),
                ("effect.applied", 1),
                ("effect.verified", 1),
                ("effect.settled", 1),
                ("run.completed", 1),
            ],
            Shape::Blocked => &[("handoff.denied", 1), ("run.blocked", 1)],
            Shape::Refused => &[("policy.decided", 1), ("run.blocked", 1)],
            Shape::Translated => &[
                ("agent.responded", 3),
                ("handoff.allowed", 5),
                ("run.completed", 1),
            ],
            Shape::Waiting => &[("human.escalated", 1)],
            Shape::Signalled => &[
                ("timer.set", 1),
                ("signal.awaited", 1),
                ("run.paused", 1),
                ("signal.received", 1),
                ("signal.kept", 1),
                ("domain.written", 1),
                ("signal.delivered", 1),
                ("run.unpaused", 1),
                ("run.completed", 1),
            ],
            Shape::Fallback => &[
                ("agent.responded", 4),
                ("handoff.allowed", 4),
                ("run.completed", 1),
            ],
            Shape::Answered => &[
                ("human.escalated", 1),
                ("human.decided", 1),
                ("agent.call_scheduled", 2),
                ("run.completed", 1),
            ],
        }
    }

    /// The workflow and input the shape is first recorded with. A fixture is recorded
    /// again from the workflow and input its own `run.requested` holds, so editing these
    /// (or the geo example's files) never changes what an existing fixture is checked with.
    fn workflow_and_input(self) -> (Workflow, Value) {
        match self {
            Shape::Geo => {
                let mut wf = Workflow::load(&geo_workflow()).expect("geo workflow loads");
                for agent in wf.spec.agents.values_mut() {
                    agent.executor = ExecutorSpec::InProcess { in_process: true };
                }
                // `Workflow::load` makes paths absolute: record them relative to the
                // workspace, so the recording does not depend on where it is checked out.
                wf.bundle_source_name = "examples/geo/policy.toml".into();
                wf.spec.input = Some("examples/geo/input.json".into());
                let text =
                    std::fs::read_to_string(workspace_root().join("examples/geo/input.json"))
                        .expect("geo input");
                (wf, serde_json::from_str(&text).expect("geo input JSON"))
            }
            Shape::Episode => (
                inline(EPISODE_WORKFLOW, EPISODE_BUNDLE, "episode.toml"),
                json!({"question": "why is the sky blue?"}),
            ),
            Shape::Effect => (
                inline(EFFECT_WORKFLOW, EFFECT_BUNDLE, "effect.toml"),
                json!({"text": "hello world"}),
            ),
            Shape::Blocked => (
                inline(BLOCKED_WORKFLOW, BLOCKED_BUNDLE, "blocked.toml"),
                json!({"topic": "launch"}),
            ),
            Shape::Waiting => (
                inline(WAITING_WORKFLOW, WAITING_BUNDLE, "waiting.toml"),
                json!({"draft": "a press release"}),
            ),
            Shape::Answered => (
                inline(WAITING_WORKFLOW, WAITING_BUNDLE, "waiting.toml"),
                json!({"draft": "a press release", "ask": true}),
            ),
            Shape::Fallback => (
                inline(FALLBACK_WORKFLOW, FALLBACK_BUNDLE, "fallback.toml"),
                json!({"question": "net present value?"}),
            ),
            Shape::Refused => (
                inline(REFUSED_WORKFLOW, REFUSED_BUNDLE, "refused.toml"),
                json!({"story": "the harbour reopens"}),
            ),
            Shape::Translated => (
                inline(TRANSLATED_WORKFLOW, TRANSLATED_BUNDLE, "translated.toml"),
                json!({"claim": "CLM-7", "amount": 8400, "claimant": "Dana Whitfield"}),
            ),
            Shape::Signalled => (
                inline(SIGNALLED_WORKFLOW, SIGNALLED_BUNDLE, "signalled.toml"),
                json!({"post": "spring launch"}),
            ),
        }
    }

    /// What the shape records after its start: a person's decision, or (`signalled`) a
    /// pause, an outside event (from a sender the bundle lists, its `email` withheld from
    /// the agent) and the unpause, after which the run completes.
    async fn after_start(self, runtime: &Runtime<EmbeddedStore>) {
        let run: docket_decider::RunId = self.run_id().into();
        if let Some((ticket, decision)) = self.human() {
            runtime
                .decide_ticket(&run, ticket, decision)
                .await
                .expect("the decision is recorded");
        }
        if self == Shape::Signalled {
            runtime
                .record_pause(&run, "ops", "check the replies first", true)
                .await
                .expect("the pause is recorded")
                .drive()
                .await
                .expect("a paused run starts nothing");
            let signal = docket_decider::SignalReceived {
                name: "comment".into(),
                payload: json!({"text": "when do doors open?", "email": "maya@example.com"}),
                by: "ingestion".into(),
                idempotency_key: Some("evt-101".into()),
                at_ms: 0,
            };
            runtime
                .record_signal(&run, signal)
                .await
                .expect("the event is recorded")
                .drive()
                .await
                .expect("a paused run starts nothing");
            runtime
                .record_pause(&run, "ops", "replies look fine", false)
                .await
                .expect("the unpause is recorded")
                .drive()
                .await
                .expect("the run goes on");
        }
    }

    /// The human decision the shape records after its start, if any.
    fn human(self) -> Option<(&'static str, HumanDecision)> {
        (self == Shape::Answered).then(|| {
            (
                "ticket-1",
                HumanDecision::approve("ana", "house style")
                    .choosing(Some(2))
                    .answering(Some("formal, for the regulator".into())),
            )
        })
    }

    /// Registers the shape's in-process agents and effect executors.
    fn register(self, runtime: &Runtime<EmbeddedStore>) {
        let agent = |name: &str, handle: fn(&AgentRequest) -> AgentResponse| {
            let executor: Arc<dyn AgentExecutor> = Arc::new(InProcessExecutor::new(handle));
            runtime.register_agent(name, executor);
        };
        match self {
            Shape::Geo => {
                agent("governance", governance);
                agent("observation", observation);
                agent("intelligence", intelligence);
                agent("reasoning", reasoning);
                agent("strategy", strategy);
            }
            Shape::Episode => {
                agent("orch", orchestrator);
                agent("worker", worker);
            }
            Shape::Effect => {
                agent("publisher", publisher);
                runtime.register_effect(
                    "publish",
                    Arc::new(InProcessEffectExecutor::new(Publish::default())),
                );
            }
            Shape::Blocked => {
                agent("drafter", drafter);
                agent("publisher", never_called);
            }
            Shape::Waiting | Shape::Answered => agent("writer", writer),
            Shape::Fallback => {
                agent("orc", orc);
                agent("anl", anl);
            }
            Shape::Refused => {
                agent("reporter", reporter);
                agent("desk", never_called);
            }
            Shape::Translated => {
                agent("intake", intake);
                agent("scorer", scorer);
                agent("advisor", advisor);
            }
            Shape::Signalled => agent("replier", replier),
        }
    }
}

fn inline(workflow: &str, bundle: &str, bundle_name: &str) -> Workflow {
    Workflow {
        spec: WorkflowSpec::parse(workflow, Path::new("workflow.toml")).expect("workflow parses"),
        bundle_source: bundle.into(),
        bundle_source_name: bundle_name.into(),
    }
}

fn success(request: &AgentRequest, actions: Vec<Action>) -> AgentResponse {
    AgentResponse::success(request.request_id.clone(), Confidence::High, actions)
}

// `episode`: the orchestrator spawns a `retrieve` child run by the worker; the child
// finishes its episode and its result comes back to the orchestrator, which finishes.

const EPISODE_BUNDLE: &str = r#"
bundle = { id = "golden-episode" }
[[agents]]
id = "external"
[[agents]]
id = "orch"
[[agents]]
id = "worker"
[interactions]
allowed = [{ from = "external", to = "orch" }, { from = "orch", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
[recursion.default]
allowed_child_types = ["retrieve"]
"#;

const EPISODE_WORKFLOW: &str = r#"
name = "research"
policy = "episode.toml"
entry = "orch"
goal = "answer the question"
[budget]
tokens = 1000
tool_calls = 100
wall_time_ms = 600000
[agents.orch]
in_process = true
[agents.worker]
in_process = true
"#;

fn orchestrator(r: &AgentRequest) -> AgentResponse {
    let child = r
        .decision_inputs
        .iter()
        .find(|i| i.output_type == "episode_result");
    let action = match child {
        None => Action::Spawn {
            agent: "worker".into(),
            episode_type: "retrieve".into(),
            goal: "find sources for the question".into(),
            budget: BudgetRequest {
                tokens: Some(200),
                ..BudgetRequest::default()
            },
            inputs: Map::new(),
            trigger: Some("missing_capsule".into()),
        },
        Some(child) => Action::Finish {
            output: json!({
                "answer": "Rayleigh scattering",
                "sources": child.payload["result"]["summary"],
            }),
        },
    };
    let mut response = success(r, vec![action]);
    response.usage = Usage {
        input_tokens: 40,
        output_tokens: 10,
        tool_calls: 0,
    };
    response
}

fn worker(r: &AgentRequest) -> AgentResponse {
    let mut result = EpisodeResult::new(EpisodeStatus::Ok, "found three sources");
    result.artifacts_created = vec!["source-1".into(), "source-2".into(), "source-3".into()];
    let mut response = success(r, vec![Action::FinishEpisode { result }]);
    response.usage = Usage {
        input_tokens: 120,
        output_tokens: 30,
        tool_calls: 2,
    };
    response
}

// `effect`: the publisher asks for one publish on a lane that requires a dry run; the
// executor dry-runs, executes and verifies it once; the publisher finishes with the result.

const EFFECT_BUNDLE: &str = r#"
bundle = { id = "golden-effect" }
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
retry_cap = 1
[interactions]
allowed = [{ from = "external", to = "publisher" }, { from = "publisher", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const EFFECT_WORKFLOW: &str = r#"
name = "publish"
policy = "effect.toml"
entry = "publisher"
[agents.publisher]
in_process = true
"#;

fn publisher(r: &AgentRequest) -> AgentResponse {
    let result = r
        .decision_inputs
        .iter()
        .find(|i| i.output_type == "effect_result");
    let action = match result {
        None => Action::RequestEffect {
            kind: "publish".into(),
            lane: "api".into(),
            idempotency_key: Some("post-1".into()),
            params: json!({ "text": r.decision_inputs[0].payload["text"] }),
            not_before: None,
        },
        Some(result) => Action::Finish {
            output: json!({ "published": result.payload }),
        },
    };
    success(r, vec![action])
}

/// A publish executor keeping its own count of applications per idempotency key.
#[derive(Default)]
struct Publish {
    applied: Mutex<BTreeMap<String, u32>>,
}

impl InProcessEffect for Publish {
    fn dry_run(&self, request: &EffectRequest) -> Result<DryRunReport, EffectCallError> {
        Ok(DryRunReport {
            ok: true,
            preview: json!({ "would_post": request.params["text"] }),
            message: None,
        })
    }

    fn execute(&self, request: &EffectRequest) -> Result<EffectReceipt, EffectCallError> {
        let key = request.idempotency_key.clone();
        *self
            .applied
            .lock()
            .expect("ledger")
            .entry(key.clone())
            .or_default() += 1;
        Ok(EffectReceipt {
            result: json!({ "post_id": format!("post-{key}") }),
            drift: None,
        })
    }

    fn verify(&self, request: &EffectRequest) -> Result<Verification, EffectCallError> {
        let key = &request.idempotency_key;
        let applied = self.applied.lock().expect("ledger").get(key).copied();
        Ok(match applied {
            Some(1) => Verification::Applied {
                result: json!({ "post_id": format!("post-{key}") }),
            },
            Some(n) => Verification::Unknown {
                message: format!("applied {n} times"),
            },
            None => Verification::NotApplied,
        })
    }
}

// `blocked`: the drafter hands its draft straight to the publisher, an edge the matrix
// forbids; the run is blocked by the rule.

const BLOCKED_BUNDLE: &str = r#"
bundle = { id = "golden-blocked" }
[[agents]]
id = "external"
[[agents]]
id = "drafter"
[[agents]]
id = "publisher"
[interactions]
allowed = [
  { from = "external", to = "drafter" },
  { from = "drafter", to = "external" },
  { from = "publisher", to = "external" },
]
forbidden = [{ from = "drafter", to = "publisher", reason = "drafts are reviewed before they are published" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const BLOCKED_WORKFLOW: &str = r#"
name = "drafting"
policy = "blocked.toml"
entry = "drafter"
[agents.drafter]
in_process = true
[agents.publisher]
in_process = true
"#;

fn drafter(r: &AgentRequest) -> AgentResponse {
    success(
        r,
        vec![Action::Handoff {
            to: "publisher".into(),
            output_type: "draft".into(),
            payload: json!({ "title": "launch day", "body": "it ships" }),
            task: None,
        }],
    )
}

fn never_called(r: &AgentRequest) -> AgentResponse {
    success(
        r,
        vec![Action::Finish {
            output: json!({ "published": true }),
        }],
    )
}

// `refused` (from decider version 12): the reporter asks the desk for `fact_check`, a
// capability a responsibility lock keeps from reporters; the run is blocked by the lock,
// its stop reason stating the lock's reason once.

const REFUSED_BUNDLE: &str = r#"
bundle = { id = "golden-refused" }
[[agents]]
id = "external"
[[agents]]
id = "reporter"
[[agents]]
id = "desk"
[[agents.capabilities]]
code = "fact_check"
[interactions]
allowed = [
  { from = "external", to = "reporter" },
  { from = "reporter", to = "desk" },
  { from = "reporter", to = "external" },
  { from = "desk", to = "external" },
]
[[responsibility_locks]]
id = "the-desk-checks-facts"
capability = "fact_check"
owner = "desk"
forbidden_requesters = ["reporter"]
reason = "a reporter does not check their own story"
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const REFUSED_WORKFLOW: &str = r#"
name = "newsroom"
policy = "refused.toml"
entry = "reporter"
[agents.reporter]
in_process = true
[agents.desk]
in_process = true
"#;

fn reporter(r: &AgentRequest) -> AgentResponse {
    let mut inputs = serde_json::Map::new();
    inputs.insert("story".into(), json!("the harbour reopens"));
    success(
        r,
        vec![Action::RequestCapability {
            target_agent: "desk".into(),
            capability_code: "fact_check".into(),
            inputs,
            priority: None,
        }],
    )
}

// `waiting`: the writer asks a human to sign its result off; the run waits for the ticket.

const WAITING_BUNDLE: &str = r#"
bundle = { id = "golden-waiting" }
[[agents]]
id = "external"
[[agents]]
id = "writer"
[interactions]
allowed = [{ from = "external", to = "writer" }, { from = "writer", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const SIGNALLED_BUNDLE: &str = r#"
bundle = { id = "signalled" }
[[agents]]
id = "external"
[[agents]]
id = "replier"
[[domains]]
id = "comments"
[[signals]]
name = "comment"
senders = ["ingestion"]
agents = ["replier"]
domain = "comments"
[interactions]
allowed = [{ from = "external", to = "replier" }, { from = "replier", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
blocked_context_fields = ["email"]
"#;

const SIGNALLED_WORKFLOW: &str = r#"
name = "replying"
policy = "signalled.toml"
entry = "replier"
[agents.replier]
in_process = true
"#;

/// Waits for a comment (for at most a day), then finishes with the reply.
fn replier(r: &AgentRequest) -> AgentResponse {
    let actions = match r.decision_inputs.iter().find(|i| i.output_type == "event") {
        Some(event) => vec![Action::Finish {
            output: json!({ "reply": "doors open on launch day", "to": event.payload["payload"] }),
        }],
        None => vec![Action::Wait {
            until: None,
            duration: Some("1d".into()),
            event: Some("comment".into()),
            reason: "answer the first comment".into(),
        }],
    };
    success(r, actions)
}

const WAITING_WORKFLOW: &str = r#"
name = "writing"
policy = "waiting.toml"
entry = "writer"
[agents.writer]
in_process = true
"#;

fn writer(r: &AgentRequest) -> AgentResponse {
    let asks = r
        .decision_inputs
        .first()
        .is_some_and(|i| i.payload.get("ask").is_some());
    let answer = r
        .decision_inputs
        .iter()
        .find(|i| i.output_type == "human_answer");
    let actions = match (asks, answer) {
        // `answered`: a question with options, then the answer's tone.
        (true, None) => vec![Action::Escalate {
            reason: "which tone should the release take?".into(),
            choices: vec!["casual".into(), "formal".into()],
        }],
        (true, Some(answer)) => vec![Action::Finish {
            output: json!({ "release": "final text", "tone": answer.payload["choice"] }),
        }],
        // `waiting`: a sign-off that holds the finish.
        (false, _) => vec![
            Action::Escalate {
                reason: "a press release needs a person's sign-off".into(),
                choices: Vec::new(),
            },
            Action::Finish {
                output: json!({ "release": "final text" }),
            },
        ],
    };
    success(r, actions)
}

// `fallback`: orc asks anl for a capability; anl fails twice, past retrying, so the
// failure returns to orc (`capability_failed`), which finishes with its fallback.

const FALLBACK_BUNDLE: &str = r#"
bundle = { id = "golden-fallback" }
[[agents]]
id = "external"
[[agents]]
id = "orc"
[[agents]]
id = "anl"
[[agents.capabilities]]
code = "ANL_NPV"
[interactions]
allowed = [
  { from = "external", to = "orc" }, { from = "orc", to = "anl" },
  { from = "anl", to = "orc" }, { from = "orc", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const FALLBACK_WORKFLOW: &str = r#"
name = "fallback"
policy = "fallback.toml"
entry = "orc"
[agents.orc]
in_process = true
[agents.anl]
in_process = true
"#;

fn orc(r: &AgentRequest) -> AgentResponse {
    let failed = r
        .decision_inputs
        .iter()
        .find(|i| i.output_type == "capability_failed");
    let action = match failed {
        None => Action::RequestCapability {
            target_agent: "anl".into(),
            capability_code: "ANL_NPV".into(),
            inputs: Map::new(),
            priority: None,
        },
        Some(failure) => Action::Finish {
            output: json!({ "npv": null, "note": "analysis unavailable", "cause": failure.payload["error_class"] }),
        },
    };
    success(r, vec![action])
}

fn anl(r: &AgentRequest) -> AgentResponse {
    AgentResponse::error(
        r.request_id.clone(),
        "CASH_FLOWS_UNREADABLE",
        "the cash flows could not be read",
    )
}

// `translated` (from decider version 13): the scorer's assessment reaches the advisor
// extracted, blocked fields removed, summarised within a budget it exceeds (the longest
// line left out) and recast as a system message; the intake's record reaches it as a
// required prior output, scoped to the claim. Each audit counts what was delivered
// (docs/governance.md#the-handoff-audit).

const TRANSLATED_BUNDLE: &str = r#"
bundle = { id = "golden-translated" }
[[agents]]
id = "external"
[[agents]]
id = "intake"
[[agents]]
id = "scorer"
[[agents]]
id = "advisor"
[agents.context_requirements]
requires_prior_outputs = ["intake"]
context_scope = "scoped"
allowed_context_fields = ["claim", "amount"]
max_context_tokens = 200
[interactions]
allowed = [
  { from = "external", to = "intake" },
  { from = "intake", to = "scorer" },
  { from = "scorer", to = "advisor" },
  { from = "advisor", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
[[multi_agent_handoffs.agent_handoff_rules]]
id = "scorer-to-advisor"
from_agent_id = "scorer"
to_agent_id = "advisor"
blocked_context_fields = ["notes"]
conversation_translation = { extract_fields = ["risk", "score", "signals", "notes"], summarize = true, max_tokens = 50, recast_role = "system" }
"#;

const TRANSLATED_WORKFLOW: &str = r#"
name = "scoring"
policy = "translated.toml"
entry = "intake"
[agents.intake]
in_process = true
[agents.scorer]
in_process = true
[agents.advisor]
in_process = true
"#;

fn intake(r: &AgentRequest) -> AgentResponse {
    success(
        r,
        vec![Action::Handoff {
            to: "scorer".into(),
            output_type: "record".into(),
            payload: json!({ "claim": "CLM-7", "amount": 8400, "claimant": "Dana Whitfield" }),
            task: None,
        }],
    )
}

fn scorer(r: &AgentRequest) -> AgentResponse {
    success(
        r,
        vec![Action::Handoff {
            to: "advisor".into(),
            output_type: "assessment".into(),
            payload: json!({
                "model": "rules-2026.11",
                "notes": "for investigators only",
                "risk": "medium",
                "score": 0.55,
                "signals": [
                    "incident within ninety days of the policy's start",
                    "amount near the coverage limit",
                    "reported more than thirty days late",
                ],
            }),
            task: None,
        }],
    )
}

fn advisor(r: &AgentRequest) -> AgentResponse {
    let got = r
        .decision_inputs
        .first()
        .map(|i| (*i.payload).clone())
        .unwrap_or_default();
    success(
        r,
        vec![Action::Finish {
            output: json!({ "advice": "investigate", "read": got["content"]["summary"] }),
        }],
    )
}

// ---------------------------------------------------------------------------------------
// Recording.

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(future)
}

/// Records one run of `shape` (with `workflow` and `input`) into a new store in `dir`:
/// no runway is written (`UnsafeNoSync`), and every time read comes from a stepping
/// clock, so the same build records the same bytes.
async fn record(shape: Shape, workflow: &Workflow, input: Value, dir: &Path) -> RunStatus {
    record_with(Durability::UnsafeNoSync, shape, workflow, input, dir).await
}

async fn record_with(
    durability: Durability,
    shape: Shape,
    workflow: &Workflow,
    input: Value,
    dir: &Path,
) -> RunStatus {
    let config = StoreConfig {
        durability,
        ..StoreConfig::default()
    };
    let store = EmbeddedStore::open(dir, config).await.expect("store opens");
    let status = {
        let clock = Arc::new(SteppingClock::new(CLOCK_START_NS, CLOCK_STEP_NS));
        let runtime = Runtime::with_clock(store.clone(), clock);
        shape.register(&runtime);
        runtime
            .start(workflow, input, Some(shape.run_id().into()))
            .await
            .expect("the run is recorded");
        shape.after_start(&runtime).await;
        runtime
            .state(&shape.run_id().into())
            .await
            .expect("the run reads")
            .status()
    };
    store.close().await;
    status
}

/// The length of a segment file's log: its header and whole batch frames, without the
/// zeros a durable writer keeps after them (store/FORMAT.md §2, "The runway").
fn log_len(bytes: &[u8]) -> usize {
    let mut at = SEGMENT_HEADER_LEN.min(bytes.len());
    while bytes.len() >= at + FRAME_HEADER_LEN && &bytes[at..at + 4] == FRAME_MAGIC {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
        if at + FRAME_HEADER_LEN + len > bytes.len() {
            break;
        }
        at += FRAME_HEADER_LEN + len;
    }
    at
}

/// A store file as a reader sees it: a segment's header and its batches, each batch's
/// records opened (an event's or a blob's bytes, uncompressed), or another file's bytes.
type Opened = (PathBuf, Vec<u8>, Vec<Vec<(bool, Vec<u8>)>>);

/// [`store_files`] with every log record opened. Whether a record is stored compressed, and
/// with which zstd settings and dictionary, is the writer's choice (store/FORMAT.md §2),
/// which readers handle record by record; what a recording must reproduce byte for byte is
/// the rest: the same events and blobs, in the same batches, in the same files.
fn opened(files: &[(PathBuf, Vec<u8>)]) -> Vec<Opened> {
    files
        .iter()
        .map(|(name, bytes)| {
            if !name.starts_with("log") {
                return (name.clone(), bytes.clone(), Vec::new());
            }
            let mut batches = Vec::new();
            let mut at = SEGMENT_HEADER_LEN.min(bytes.len());
            while bytes.len() >= at + FRAME_HEADER_LEN && &bytes[at..at + 4] == FRAME_MAGIC {
                let len =
                    u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
                let payload = &bytes[at + FRAME_HEADER_LEN..at + FRAME_HEADER_LEN + len];
                let mut records = Vec::new();
                let mut r = 0;
                while r < payload.len() {
                    let n =
                        u32::from_le_bytes(payload[r..r + 4].try_into().expect("4 bytes")) as usize;
                    let record = docket_store::open_record(&payload[r..r + 4 + n])
                        .unwrap_or_else(|e| panic!("{}: a record: {e}", name.display()));
                    records.push(record);
                    r += 4 + n;
                }
                batches.push(records);
                at += FRAME_HEADER_LEN + len;
            }
            let header = bytes[..SEGMENT_HEADER_LEN.min(bytes.len())].to_vec();
            (name.clone(), header, batches)
        })
        .collect()
}

/// Whether `files`, recorded by this build, hold `fixture`'s recording: the same events and
/// blobs in the same batches and files ([`opened`]), and, when the fixture was written in
/// this build's store format, the same marker and segment headers too (a store format of
/// its own, such as format 3's dictionary, changes only those: store/FORMAT.md §1-2).
fn same_recording(files: &[(PathBuf, Vec<u8>)], fixture: &Fixture) -> bool {
    let (fresh, golden) = (opened(files), opened(&fixture.files()));
    if fixture.manifest.store_format_version == FORMAT_VERSION {
        return fresh == golden;
    }
    fresh.len() == golden.len()
        && fresh
            .iter()
            .zip(&golden)
            .all(|(a, b)| a.0 == b.0 && (a.0 == Path::new(MARKER) || a.2 == b.2))
}

/// The store files of `dir` (`DOCKET-STORE`, then `log/*.seg` in order), each segment
/// without its runway.
fn store_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = vec![(
        PathBuf::from(MARKER),
        std::fs::read(dir.join(MARKER)).expect("marker"),
    )];
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir.join("log"))
        .expect("log directory")
        .map(|e| e.expect("entry").path())
        .collect();
    segments.sort();
    for path in segments {
        let mut bytes = std::fs::read(&path).expect("segment");
        let end = log_len(&bytes);
        assert!(
            bytes[end..].iter().all(|&b| b == 0),
            "{} has bytes after its last batch frame that are not runway",
            path.display()
        );
        bytes.truncate(end);
        let name = path.file_name().expect("file name");
        files.push((Path::new("log").join(name), bytes));
    }
    // Payload encoding 3's disclosures, kept beside the log (store/FORMAT.md §13).
    if let Ok(entries) = std::fs::read_dir(dir.join("disclosures")) {
        let mut paths: Vec<PathBuf> = entries.map(|e| e.expect("entry").path()).collect();
        paths.sort();
        for path in paths {
            let name = path.file_name().expect("file name").to_owned();
            files.push((
                Path::new("disclosures").join(name),
                std::fs::read(&path).expect("disclosures"),
            ));
        }
    }
    files
}

fn write_files(dir: &Path, files: &[(PathBuf, Vec<u8>)]) {
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("directory");
        std::fs::write(&path, bytes).expect("write");
    }
}

fn golden_root() -> PathBuf {
    workspace_root().join("tests/golden")
}

fn current_dir_of(shape: Shape) -> PathBuf {
    golden_root()
        .join(format!("v{DECIDER_VERSION}"))
        .join(shape.name())
}

/// Writes the fixtures missing for the current decider version, once per test process,
/// when `DOCKET_BLESS_GOLDEN=1`; every test reading fixtures calls this first.
fn bless_if_asked() {
    static DONE: Mutex<bool> = Mutex::new(false);
    let mut done = DONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *done || std::env::var(BLESS_ENV).as_deref() != Ok("1") {
        return;
    }
    for shape in Shape::ALL {
        let target = current_dir_of(shape);
        if target.exists() {
            eprintln!(
                "golden: {} exists and is never re-blessed; delete it first to record it again",
                target.display()
            );
            continue;
        }
        let scratch = tempfile::tempdir().expect("tempdir");
        let (workflow, input) = shape.workflow_and_input();
        let status = block_on(record(shape, &workflow, input, scratch.path()));
        assert_eq!(status, shape.status(), "{} recorded", shape.name());
        let files = store_files(scratch.path());

        // The manifest, from the recording read back.
        let loaded = block_on(open_copy(&files, &shape.run_id())).expect("the recording reads");
        let last = loaded.events.last().expect("events");
        let manifest = Manifest {
            shape: shape.name().into(),
            run_id: shape.run_id(),
            store_format_version: FORMAT_VERSION,
            decider_version: DECIDER_VERSION,
            status: status_word(status).into(),
            events: loaded.events.len() as u64,
            last_hash: last.hash.to_hex(),
        };
        let staging = target.with_extension("blessing");
        let _ = std::fs::remove_dir_all(&staging);
        write_files(&staging, &files);
        let text = toml::to_string(&manifest).expect("manifest");
        std::fs::write(
            staging.join(MANIFEST),
            format!(
                "# A golden log (tests/golden/README.md), written by DOCKET_BLESS_GOLDEN=1.\n\
                 # Never edit or re-bless it: a new decider version adds new fixtures.\n{text}"
            ),
        )
        .expect("manifest");
        std::fs::rename(&staging, &target).expect("fixture in place");
        // The trimmed files reopen and pass every check.
        let fixture = Fixture::read(&target);
        block_on(check(&fixture)).unwrap_or_else(|e| panic!("{}: {e}", target.display()));
        eprintln!(
            "golden: blessed {} ({} events)",
            target.display(),
            manifest.events
        );
    }
    *done = true;
}

// ---------------------------------------------------------------------------------------
// Fixtures and their checks.

/// `golden.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    shape: String,
    run_id: String,
    /// `docket_store::FORMAT_VERSION` of the files.
    store_format_version: u32,
    /// The `decider_version` its `run.requested` records.
    decider_version: u32,
    /// The run's status at the end of the log.
    status: String,
    /// Events in the run.
    events: u64,
    /// The hash of its last event, hex.
    last_hash: String,
}

fn status_word(status: RunStatus) -> &'static str {
    match status {
        RunStatus::NotStarted => "not_started",
        RunStatus::Running => "running",
        RunStatus::WaitingForHuman => "waiting_for_human",
        RunStatus::Completed => "completed",
        RunStatus::Blocked => "blocked",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
    }
}

struct Fixture {
    dir: PathBuf,
    manifest: Manifest,
    shape: Shape,
}

impl Fixture {
    fn read(dir: &Path) -> Fixture {
        let text = std::fs::read_to_string(dir.join(MANIFEST)).expect("manifest");
        let manifest: Manifest = toml::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(MANIFEST).display()));
        let shape = Shape::from_name(&manifest.shape)
            .unwrap_or_else(|| panic!("{}: no shape {:?}", dir.display(), manifest.shape));
        assert_eq!(
            dir.file_name().and_then(|n| n.to_str()),
            Some(shape.name()),
            "a fixture's directory is named for its shape"
        );
        Fixture {
            dir: dir.to_owned(),
            manifest,
            shape,
        }
    }

    fn files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        store_files(&self.dir)
    }

    fn label(&self) -> String {
        self.dir
            .strip_prefix(golden_root())
            .unwrap_or(&self.dir)
            .display()
            .to_string()
    }
}

/// Every directory under `tests/golden/` holding a `golden.toml`, in path order.
fn fixtures() -> Vec<Fixture> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        if dir.join(MANIFEST).is_file() {
            found.push(dir.to_owned());
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, found);
            }
        }
    }
    let mut dirs = Vec::new();
    walk(&golden_root(), &mut dirs);
    dirs.sort();
    dirs.iter().map(|d| Fixture::read(d)).collect()
}

/// A fixture's run, read back from a copy of its files.
struct Loaded {
    _dir: tempfile::TempDir,
    /// The events with their envelopes, as the store returned them.
    events: Vec<Event>,
    /// Each event's payload bytes.
    payloads: Vec<Vec<u8>>,
    /// The decoded events.
    run: Vec<RunEvent>,
}

/// Writes `files` into a new temp dir and reads the run back through the store: the
/// store's checks on open and on read, its `verify`, and decoding every event.
async fn open_copy(files: &[(PathBuf, Vec<u8>)], run_id: &str) -> Result<Loaded, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    write_files(dir.path(), files);
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .map_err(|e| format!("the store does not open: {e}"))?;
    let loaded = read_run(&store, run_id).await;
    store.close().await;
    let (events, payloads, run) = loaded?;
    Ok(Loaded {
        _dir: dir,
        events,
        payloads,
        run,
    })
}

type Read = (Vec<Event>, Vec<Vec<u8>>, Vec<RunEvent>);

async fn read_run(store: &EmbeddedStore, run_id: &str) -> Result<Read, String> {
    let stream = StreamId::new(run_id).map_err(|e| e.to_string())?;
    // From decider version 6 a failing agent's breaker has its own stream, not a run's.
    let streams: Vec<_> = store
        .streams()
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|h| h.stream.as_str() != docket_runtime::CIRCUITS_STREAM)
        .collect();
    if streams.len() != 1 || streams[0].stream != stream {
        return Err(format!(
            "the store should hold the one run {run_id}: {streams:?}"
        ));
    }
    let head = streams[0].clone();
    let report = store
        .verify(&stream)
        .await
        .map_err(|e| format!("verify: {e}"))?;
    if let Some(break_) = &report.first_break {
        return Err(format!("verify finds the chain broken: {break_}"));
    }
    if report.verified != head.seq {
        return Err(format!(
            "verify checked {} events of {}",
            report.verified, head.seq
        ));
    }
    let mut reader = Box::pin(store.read(&stream, 1..=head.seq));
    let (mut events, mut payloads, mut run) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(event) = reader.next().await {
        let event = event.map_err(|e| format!("reading: {e}"))?;
        let bytes = match &event.payload {
            Payload::Inline(bytes) => bytes.clone(),
            Payload::Blob(blob) => store
                .get_blob(&blob.hash)
                .await
                .map_err(|e| format!("blob of event {}: {e}", event.seq))?
                .ok_or_else(|| format!("blob of event {} is missing", event.seq))?,
        };
        let bytes = if event.kind_version == REFERENCED_PAYLOAD {
            plain_payload(store, &event, &bytes).await?
        } else if event.kind_version == COMMITTED_PAYLOAD {
            committed_plain_payload(store, &event, &bytes).await?
        } else {
            bytes
        };
        let decoded = RunEvent::decode(&event.kind, &bytes)
            .map_err(|e| format!("event {} does not decode: {e}", event.seq))?;
        events.push(event);
        payloads.push(bytes);
        run.push(decoded);
    }
    if events.last().map(|e| (e.seq, e.hash)) != Some((head.seq, head.hash)) {
        return Err(format!("the read does not end at the head {head:?}"));
    }
    Ok((events, payloads, run))
}

/// The plain payload of an encoding-2 event: each reference replaced by its blob.
async fn plain_payload(
    store: &EmbeddedStore,
    event: &Event,
    bytes: &[u8],
) -> Result<Vec<u8>, String> {
    let parsed = ReferencedPayload::parse(&event.kind, bytes)
        .map_err(|e| format!("event {}: {e}", event.seq))?;
    let mut content = BTreeMap::new();
    for r in parsed.refs() {
        let blob = store
            .get_blob(&docket_store::Hash(r.hash))
            .await
            .map_err(|e| format!("event {}: blob {}: {e}", event.seq, r.hash_hex()))?;
        if let Some(blob) = blob {
            content.insert(r.hash, blob);
        }
    }
    let plain = parsed
        .resolve(|r| content.get(&r.hash).cloned())
        .map_err(|e| format!("event {}: {e}", event.seq))?;
    Ok(docket_policies::canonical_json_bytes(&plain))
}

/// The plain payload of an encoding-3 event: each commitment opened with the run's
/// disclosures.
async fn committed_plain_payload(
    store: &EmbeddedStore,
    event: &Event,
    bytes: &[u8],
) -> Result<Vec<u8>, String> {
    let parsed = CommittedPayload::parse(&event.kind, bytes)
        .map_err(|e| format!("event {}: {e}", event.seq))?;
    let held = store
        .disclosures(&event.stream)
        .await
        .map_err(|e| format!("disclosures: {e}"))?;
    let plain = parsed
        .resolve(|d| match held.get(d) {
            Some(docket_store::StoredDisclosure::Present(b)) => {
                DisclosureLookup::Present(b.clone())
            }
            _ => DisclosureLookup::Missing,
        })
        .map_err(|e| format!("event {}: {e}", event.seq))?;
    Ok(docket_policies::canonical_json_bytes(&plain))
}

/// Check (a): the fixture reads, verifies, decodes, matches its manifest, replays with
/// its recorded bundle and ends in its shape's status.
async fn check(fixture: &Fixture) -> Result<Loaded, String> {
    let m = &fixture.manifest;
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&m.store_format_version) {
        return Err(format!(
            "store format {} (this build reads {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})",
            m.store_format_version
        ));
    }
    if m.run_id != fixture.shape.run_id() {
        return Err(format!("run id {} for shape {}", m.run_id, m.shape));
    }
    let loaded = open_copy(&fixture.files(), &m.run_id).await?;
    let last = loaded.events.last().ok_or("no events")?;
    if loaded.events.len() as u64 != m.events || last.hash.to_hex() != m.last_hash {
        return Err(format!(
            "{} events ending in {}; the manifest says {} ending in {}",
            loaded.events.len(),
            last.hash.to_hex(),
            m.events,
            m.last_hash
        ));
    }
    let Some(RunEvent::RunRequested(requested)) = loaded.run.first() else {
        return Err("the log does not start with run.requested".into());
    };
    if requested.decider_version != m.decider_version || requested.run_id != m.run_id {
        return Err(format!(
            "run.requested records run {} by decider version {}; the manifest says {} by {}",
            requested.run_id, requested.decider_version, m.run_id, m.decider_version
        ));
    }
    let bundle = recorded_bundle(requested).map_err(|e| format!("recorded bundle: {e}"))?;
    if let Err(retired) = UnsupportedDecider::check(m.decider_version) {
        // A log in an older store layout, recorded by a retired decider version: read and
        // verified above, and refused by replay, naming its version.
        let refused = (
            replay_check(&loaded.run, &bundle),
            docket_replay::replay(&loaded.run),
        );
        if refused
            != (
                Err(ReplayMismatch::Version(retired)),
                Err(ReplayError::Version(retired)),
            )
        {
            return Err(format!("a retired version's log, replayed: {refused:?}"));
        }
    } else {
        let reworded = replay_check(&loaded.run, &bundle).map_err(|e| format!("replay: {e}"))?;
        if !reworded.is_empty() {
            return Err(format!("replay words these otherwise: {reworded:?}"));
        }
        // And through the replay crate `docket replay` uses: every decision reproduced.
        let report = docket_replay::replay(&loaded.run).map_err(|e| format!("replay: {e}"))?;
        if let Some(d) = &report.divergence {
            return Err(format!("docket replay diverges: {d:?}"));
        }
        if report.decisions + report.inputs != loaded.run.len()
            || report.reproduced_decisions != report.decisions
            || report.reworded_decisions != 0
            || report.status != fixture.shape.status()
        {
            return Err(format!("docket replay reports {report:?}"));
        }
    }
    let state = RunState::fold(loaded.run.iter());
    if state.status() != fixture.shape.status() || status_word(state.status()) != m.status {
        return Err(format!(
            "the run ends {:?}; shape {} ends {:?} and the manifest says {}",
            state.status(),
            m.shape,
            fixture.shape.status(),
            m.status
        ));
    }
    for &(kind, at_least) in fixture.shape.landmarks() {
        let n = loaded.run.iter().filter(|e| e.kind() == kind).count();
        if n < at_least {
            return Err(format!(
                "{n} {kind} events, a {} run has {at_least}",
                m.shape
            ));
        }
    }
    Ok(loaded)
}

/// A payload as text: whole when short, else the part around where it first differs
/// from `other`.
fn payload_text(bytes: &[u8], other: &[u8]) -> String {
    const WHOLE: usize = 4096;
    const AROUND: usize = 400;
    if bytes == other {
        return format!("(the same {} bytes)", bytes.len());
    }
    if bytes.len() <= WHOLE {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let at = bytes
        .iter()
        .zip(other)
        .position(|(a, b)| a != b)
        .unwrap_or(bytes.len().min(other.len()));
    let from = at.saturating_sub(AROUND);
    let to = (at + AROUND).min(bytes.len());
    format!(
        "(bytes {from}..{to} of {}, first difference at {at}) ...{}...",
        bytes.len(),
        String::from_utf8_lossy(&bytes[from..to])
    )
}

/// The first difference between two runs' events, envelope and payload, if any.
fn first_difference(golden: &Loaded, fresh: &Loaded) -> Option<String> {
    let pairs = golden.events.iter().zip(&golden.payloads);
    for (i, ((g, gp), (f, fp))) in pairs
        .zip(fresh.events.iter().zip(&fresh.payloads))
        .enumerate()
    {
        let same = g.seq == f.seq
            && g.kind == f.kind
            && g.kind_version == f.kind_version
            && g.recorded_at == f.recorded_at
            && g.policy == f.policy
            && gp == fp
            && g.prev == f.prev
            && g.hash == f.hash;
        if !same {
            return Some(format!(
                "event {} differs (the first of {}):\n  golden: seq {} {} v{} at {} policy {:?} hash {}\n  \
                 now:    seq {} {} v{} at {} policy {:?} hash {}\n  golden payload: {}\n  now payload:    {}",
                i + 1,
                golden.events.len(),
                g.seq,
                g.kind,
                g.kind_version,
                g.recorded_at.0,
                g.policy.map(|h| h.to_hex()),
                g.hash.to_hex(),
                f.seq,
                f.kind,
                f.kind_version,
                f.recorded_at.0,
                f.policy.map(|h| h.to_hex()),
                f.hash.to_hex(),
                payload_text(gp, fp),
                payload_text(fp, gp),
            ));
        }
    }
    (golden.events.len() != fresh.events.len()).then(|| {
        format!(
            "the golden log has {} events, this build records {}",
            golden.events.len(),
            fresh.events.len()
        )
    })
}

fn manifest_of(fixture: &Fixture) -> String {
    format!("{} ({:?})", fixture.label(), fixture.manifest)
}

/// The bytes of a fixture's checked-in files, to show that checking it leaves them as they were.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for name in [MARKER, MANIFEST] {
        files.insert(name.into(), std::fs::read(dir.join(name)).expect("file"));
    }
    for entry in std::fs::read_dir(dir.join("log")).expect("log") {
        let path = entry.expect("entry").path();
        files.insert(path.clone(), std::fs::read(&path).expect("segment"));
    }
    files
}

// ---------------------------------------------------------------------------------------
// The tests.

/// (a) Every fixture under `tests/golden/`, whatever decider version recorded it.
#[test]
fn every_golden_log_verifies_replays_and_ends_as_its_shape() {
    bless_if_asked();
    let all = fixtures();
    for version in OLDEST_DECIDER_VERSION..=DECIDER_VERSION {
        for shape in Shape::ALL.into_iter().filter(|s| s.since() <= version) {
            let dir = golden_root().join(format!("v{version}")).join(shape.name());
            assert!(
                all.iter().any(|f| f.shape == shape && f.dir == dir),
                "{} is missing (see tests/golden/README.md)",
                dir.display()
            );
        }
    }
    // The older store formats and payload encodings this build reads, each with a log.
    for layout in [
        "store-1-encoding-1",
        "store-1-encoding-2",
        "store-2-encoding-2",
    ] {
        let dir = golden_root().join("formats").join(layout);
        assert!(
            all.iter().any(|f| f.dir.starts_with(&dir)),
            "{} is missing (see tests/golden/README.md)",
            dir.display()
        );
    }
    for fixture in &all {
        let before = snapshot(&fixture.dir);
        block_on(check(fixture)).unwrap_or_else(|e| panic!("{}: {e}", manifest_of(fixture)));
        assert!(
            before == snapshot(&fixture.dir),
            "checking {} changed its checked-in files",
            fixture.label()
        );
    }
}

/// (b) This build records every shape of the current decider version to the same bytes
/// as its fixture: same events (seq, kind, payload, time, policy hash, hash) and the same
/// segment files.
#[test]
fn this_build_records_each_current_golden_log_byte_for_byte() {
    bless_if_asked();
    let current: Vec<Fixture> = fixtures()
        .into_iter()
        .filter(|f| f.manifest.decider_version == DECIDER_VERSION)
        .collect();
    for shape in Shape::ALL {
        assert!(
            current.iter().any(|f| f.shape == shape),
            "no golden log of shape {} for decider version {DECIDER_VERSION}: record one with \
             {BLESS_ENV}=1 (tests/golden/README.md)",
            shape.name()
        );
    }
    for fixture in &current {
        let golden =
            block_on(check(fixture)).unwrap_or_else(|e| panic!("{}: {e}", fixture.label()));
        let Some(RunEvent::RunRequested(requested)) = golden.run.first() else {
            unreachable!("checked")
        };
        let (workflow, input) = recorded_workflow(requested);
        let scratch = tempfile::tempdir().expect("tempdir");
        block_on(record(fixture.shape, &workflow, input, scratch.path()));
        let files = store_files(scratch.path());
        let fresh = block_on(open_copy(&files, &fixture.manifest.run_id))
            .unwrap_or_else(|e| panic!("{}: the new recording: {e}", fixture.label()));
        if let Some(difference) = first_difference(&golden, &fresh) {
            // Words for people may change in any release (docs/replay.md#wording): a
            // recording whose decisions are the fixture's, worded otherwise, passes.
            let reworded = same_decisions(&golden.run, &fresh.run);
            assert!(
                reworded,
                "{}: this build records the run differently. If the decider now decides \
                 differently, raise DECIDER_VERSION and keep the old behaviour for old runs \
                 (ARCHITECTURE.md, \"Decider versions\"); never re-bless this fixture. The \
                 agents (this file's, docket_example_geo's) must answer as they did.\n{difference}",
                fixture.label()
            );
            eprintln!(
                "golden: {} records the same decisions worded otherwise:\n{difference}",
                fixture.label()
            );
            continue;
        }
        // Same events, written in the same batches.
        assert!(
            same_recording(&files, fixture),
            "{}: the same events, but the segment files differ (batches written differently)",
            fixture.label()
        );
    }
}

/// The `refused` golden log of the current version (decider version 12 on) records the
/// stop reason of a capability request a lock refuses with the lock's reason once.
#[test]
fn the_refused_golden_log_states_the_locks_reason_once() {
    bless_if_asked();
    let fixture = fixtures()
        .into_iter()
        .find(|f| f.shape == Shape::Refused && f.manifest.decider_version == DECIDER_VERSION)
        .expect("a refused golden log of the current version");
    let golden = block_on(check(&fixture)).unwrap_or_else(|e| panic!("{}: {e}", fixture.label()));
    let Some(RunEvent::RunBlocked {
        rule_id, reason, ..
    }) = golden.run.last()
    else {
        panic!("{}: the run ends blocked", fixture.label());
    };
    assert_eq!(rule_id, "the-desk-checks-facts");
    assert_eq!(
        reason,
        "reporter may not obtain fact_check from desk: a reporter does not check their own story"
    );
}

/// The `translated` golden log (decider version 13 on): the summarised handoff and the
/// prior output are recorded whole as they crossed, each audit counting what was
/// delivered (docs/governance.md#the-handoff-audit).
#[test]
fn the_translated_golden_log_audits_what_was_delivered() {
    bless_if_asked();
    let fixture = fixtures()
        .into_iter()
        .find(|f| f.shape == Shape::Translated && f.manifest.decider_version == DECIDER_VERSION)
        .expect("a translated golden log of the current version");
    let golden = block_on(check(&fixture)).unwrap_or_else(|e| panic!("{}: {e}", fixture.label()));
    let crossing = |output_type: &str| {
        golden
            .run
            .iter()
            .find_map(|e| match e {
                RunEvent::HandoffAllowed {
                    output_type: t,
                    audit,
                    delivered,
                    ..
                } if t == output_type => Some((
                    serde_json::to_value(audit).expect("audit"),
                    Value::clone(delivered),
                )),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{}: no {output_type}", fixture.label()))
    };
    let (audit, delivered) = crossing("assessment");
    assert_eq!(
        delivered,
        json!({
            "role": "system",
            "source_agent_id": "scorer",
            "content": { "summary": "risk: medium\nscore: 0.55", "fields_omitted": 1 },
        })
    );
    assert_eq!(
        audit,
        json!({
            "from_agent_id": "scorer",
            "to_agent_id": "advisor",
            "handoff_mode": "full",
            "governance_rule_id": "multi_agent_handoffs.default_handoff_mode",
            "audit_enabled": true,
            "conversation_translation_applied": true,
            "context_before_scoping": { "prior_outputs_count": 0, "total_tokens": 51 },
            "context_after_scoping": {
                "prior_outputs_count": 0,
                "total_tokens": 34,
                "fields_included": ["risk", "score"],
                "fields_excluded": ["model", "notes", "signals"],
            },
            "summary": { "max_tokens": 50, "lines_kept": 2, "lines_omitted": 1 },
        })
    );
    assert_eq!(docket_policies::count_value_tokens(&delivered), 34);
    let (audit, delivered) = crossing("prior:record");
    assert_eq!(delivered, json!({ "amount": 8400, "claim": "CLM-7" }));
    assert_eq!(
        audit,
        json!({
            "from_agent_id": "intake",
            "to_agent_id": "advisor",
            "handoff_mode": "scoped",
            "governance_rule_id": "agents.advisor.context_requirements.context_scope",
            "audit_enabled": true,
            "conversation_translation_applied": false,
            "context_before_scoping": { "prior_outputs_count": 1, "total_tokens": 21 },
            "context_after_scoping": {
                "prior_outputs_count": 1,
                "total_tokens": 13,
                "fields_included": ["amount", "claim"],
                "fields_excluded": ["claimant"],
            },
        })
    );
}

/// Payload encoding 1 records the same run: this build, recording each current golden
/// log's shape with every event's content inline, writes events that read back as the
/// golden log's (in encoding 2, content stored once: docs/events.md#content-stored-once),
/// payload byte for byte, every event in encoding 1; for geo, the golden log holds at
/// least a tenth fewer bytes of log.
#[test]
fn a_recording_in_encoding_1_holds_each_golden_log_s_events() {
    recording_in(PayloadEncoding::Plain);
}

/// The same in payload encoding 3 (docs/events.md#values-committed-apart): the values
/// committed apart, read back with their disclosures, are the golden log's payloads byte for
/// byte, and every event is in encoding 3 (or 2, for a value RFC 8785 cannot carry whole).
#[test]
fn a_recording_in_encoding_3_holds_each_golden_log_s_events() {
    recording_in(PayloadEncoding::Committed);
}

fn recording_in(encoding: PayloadEncoding) {
    let current = fixtures()
        .into_iter()
        .filter(|f| f.manifest.decider_version == DECIDER_VERSION);
    for fixture in current {
        let golden =
            block_on(check(&fixture)).unwrap_or_else(|e| panic!("{}: {e}", fixture.label()));
        let Some(RunEvent::RunRequested(requested)) = golden.run.first() else {
            unreachable!("checked")
        };
        let (workflow, input) = recorded_workflow(requested);
        let scratch = tempfile::tempdir().expect("tempdir");
        block_on(async {
            let store = EmbeddedStore::open(
                scratch.path(),
                StoreConfig {
                    durability: Durability::UnsafeNoSync,
                    ..StoreConfig::default()
                },
            )
            .await
            .expect("store opens");
            let clock = Arc::new(SteppingClock::new(CLOCK_START_NS, CLOCK_STEP_NS));
            let runtime = Runtime::with_clock(store.clone(), clock);
            runtime.set_payload_encoding(encoding);
            fixture.shape.register(&runtime);
            let run_id = fixture.shape.run_id();
            runtime
                .start(&workflow, input, Some(run_id.clone().into()))
                .await
                .expect("the run is recorded");
            fixture.shape.after_start(&runtime).await;
            store.close().await;
        });
        let files = store_files(scratch.path());
        let fresh = block_on(open_copy(&files, &fixture.manifest.run_id))
            .unwrap_or_else(|e| panic!("{}: the {encoding:?} recording: {e}", fixture.label()));
        // The same decisions (words for people may have changed since the fixture was
        // recorded: docs/replay.md#wording); the same events when they have not.
        assert!(
            same_decisions(&golden.run, &fresh.run),
            "{}: other events",
            fixture.label()
        );
        if fresh.run != golden.run {
            continue;
        }
        for event in &golden.run {
            assert_eq!(
                event.encode_referenced(),
                event.encode_referenced_as_tree(),
                "{}: {} encodes otherwise in place than as a tree",
                fixture.label(),
                event.kind()
            );
        }
        assert_eq!(
            fresh.payloads,
            golden.payloads,
            "{}: other plain payloads",
            fixture.label()
        );
        let expected: &[u32] = match encoding {
            PayloadEncoding::Committed => &[COMMITTED_PAYLOAD, REFERENCED_PAYLOAD],
            PayloadEncoding::Plain => &[PLAIN_PAYLOAD],
            _ => &[REFERENCED_PAYLOAD],
        };
        assert!(
            fresh
                .events
                .iter()
                .all(|e| expected.contains(&e.kind_version)),
            "{}: an event not in {encoding:?}",
            fixture.label()
        );
        if encoding == PayloadEncoding::Committed {
            assert!(
                fresh
                    .events
                    .iter()
                    .any(|e| e.kind_version == COMMITTED_PAYLOAD),
                "{}: nothing in encoding 3",
                fixture.label()
            );
            continue;
        }
        let log_bytes = |files: &[(PathBuf, Vec<u8>)]| -> usize {
            files
                .iter()
                .filter(|(name, _)| name.starts_with("log"))
                .map(|(_, bytes)| log_len(bytes))
                .sum()
        };
        // Content that appears once costs a reference and a blob record more than inline;
        // a run that hands content on (geo) records less in encoding 2 (the fixture).
        assert!(
            fixture.shape != Shape::Geo || log_bytes(&fixture.files()) * 10 < log_bytes(&files) * 9,
            "{}: encoding 1 writes {} bytes of log, encoding 2 wrote {}",
            fixture.label(),
            log_bytes(&files),
            log_bytes(&fixture.files())
        );
    }
}

/// A durable recording (every batch synced, over a zero runway) on a multi-threaded
/// runtime, as `docket run` records, is the same log once its runway is trimmed as this
/// build's recording for the golden logs (which (b) compares with the fixtures): the
/// fixtures are what the product writes.
#[test]
fn a_durable_recording_trimmed_of_its_runway_is_the_golden_log() {
    bless_if_asked();
    let current = fixtures()
        .into_iter()
        .filter(|f| f.manifest.decider_version == DECIDER_VERSION);
    for fixture in current {
        let golden =
            block_on(check(&fixture)).unwrap_or_else(|e| panic!("{}: {e}", fixture.label()));
        let Some(RunEvent::RunRequested(requested)) = golden.run.first() else {
            unreachable!("checked")
        };
        let (workflow, input) = recorded_workflow(requested);
        let scratch = tempfile::tempdir().expect("tempdir");
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(record_with(
                Durability::Sync,
                fixture.shape,
                &workflow,
                input,
                scratch.path(),
            ));
        let segment = scratch.path().join("log/00000000000000000001.seg");
        let written = std::fs::metadata(&segment).expect("segment").len();
        let files = store_files(scratch.path());
        let trimmed: usize = files
            .iter()
            .filter(|(name, _)| name.starts_with("log"))
            .map(|(_, bytes)| bytes.len())
            .sum();
        assert!(
            written > trimmed as u64,
            "{}: a durable log ends in a runway ({written} bytes written, {trimmed} of log)",
            fixture.label()
        );
        let plain = tempfile::tempdir().expect("tempdir");
        let (workflow, input) = recorded_workflow(requested);
        block_on(record(fixture.shape, &workflow, input, plain.path()));
        assert!(
            opened(&files) == opened(&store_files(plain.path())),
            "{}: the durable recording, trimmed, differs from the golden logs' recording",
            fixture.label()
        );
    }
}

/// The workflow and input a run recorded, to record it again.
fn recorded_workflow(requested: &RunRequested) -> (Workflow, Value) {
    let workflow = Workflow {
        spec: requested.workflow.clone(),
        bundle_source: requested.bundle_source.clone(),
        bundle_source_name: requested.bundle_source_name.clone(),
    };
    (workflow, requested.input.clone())
}

/// (c) The checks can fail: a copy of each fixture with one byte of an event's payload
/// changed is refused, first as a damaged batch (its CRC), then, with the frame's CRC
/// recomputed so only the hash chain can tell, as a broken chain.
#[test]
fn a_golden_log_with_one_byte_changed_fails_the_checks() {
    bless_if_asked();
    for fixture in fixtures() {
        let files = fixture.files();
        let segment = files
            .iter()
            .position(|(name, _)| name.starts_with("log"))
            .expect("a segment");
        // The first batch (run.requested first) is not the last one, so the damage cannot
        // pass for a torn, unacknowledged tail.
        let frame = SEGMENT_HEADER_LEN;
        let bytes = &files[segment].1;
        let len =
            u32::from_le_bytes(bytes[frame + 4..frame + 8].try_into().expect("4 bytes")) as usize;
        let payload = frame + FRAME_HEADER_LEN..frame + FRAME_HEADER_LEN + len;
        assert!(
            payload.end < bytes.len(),
            "{}: one batch only",
            fixture.label()
        );
        // A byte inside run.requested's JSON: the `g` of its `"run_id":"golden-..."` value;
        // in a compressed record (store format 2), a byte of its zstd frame.
        let needle = br#""run_id":"golden-"#;
        let plain_at = bytes[payload.clone()]
            .windows(needle.len())
            .position(|w| w == needle);
        let compressed = plain_at.is_none();
        let at = match plain_at {
            Some(i) => payload.start + i + needle.len() - "golden-".len(),
            None => {
                // The batch's first event record (blobs come before the events using them).
                let mut record = payload.start;
                while bytes[record + 4] != 3 {
                    let n =
                        u32::from_le_bytes(bytes[record..record + 4].try_into().expect("4 bytes"))
                            as usize;
                    record += 4 + n;
                    assert!(
                        record < payload.end,
                        "{}: run.requested neither plain nor a compressed event record",
                        fixture.label()
                    );
                }
                record + 5 + 24
            }
        };

        let mut flipped = files.clone();
        flipped[segment].1[at] ^= 0x01;
        let err = refused(&fixture, block_on(check_files(&fixture, flipped)));
        assert!(
            err.contains("log damaged") && err.contains("checksum mismatch"),
            "{}: {err}",
            fixture.label()
        );

        let mut resealed = files.clone();
        resealed[segment].1[at] ^= 0x01;
        let crc = crc32fast::hash(&resealed[segment].1[payload.clone()]);
        resealed[segment].1[frame + 8..frame + 12].copy_from_slice(&crc.to_le_bytes());
        let err = refused(&fixture, block_on(check_files(&fixture, resealed)));
        // A changed byte of a compressed record either does not expand, or expands to
        // other bytes than the hash covers, or to a record that names another stream or
        // sequence (with the dictionary, a byte can stand for a run of the event's text),
        // whose link to its predecessor then fails.
        let named = err.contains("sequence 1 hashes to")
            || (compressed
                && (err.contains("compressed record") || err.contains("but the previous hash")));
        assert!(
            err.contains("log damaged") && named,
            "{}: {err}",
            fixture.label()
        );
    }
}

fn refused(fixture: &Fixture, checked: Result<Loaded, String>) -> String {
    match checked {
        Ok(_) => panic!("{}: a changed byte passes the checks", fixture.label()),
        Err(err) => err,
    }
}

/// Check (a) on a fixture's files as given (in a scratch copy of the fixture).
async fn check_files(fixture: &Fixture, files: Vec<(PathBuf, Vec<u8>)>) -> Result<Loaded, String> {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path().join(fixture.shape.name());
    write_files(&dir, &files);
    std::fs::copy(fixture.dir.join(MANIFEST), dir.join(MANIFEST)).expect("manifest");
    let copy = Fixture::read(&dir);
    check(&copy).await
}

/// Every handoff audit of every golden log of the current decider version says what its
/// receiver got, read independently of the scoping (`audit_reading.rs`): its tokens, the
/// fields it holds (against the payload's leaves, read from the sender's recorded
/// handoff or the run's input where the log holds it), the summary's lines, and the prior
/// outputs counted.
#[test]
fn every_golden_handoff_audit_matches_an_independent_reading() {
    use super::audit_reading::{leaf_paths, read, summarised, tokens};
    use std::collections::BTreeSet;
    bless_if_asked();
    let (mut audits, mut with_payload) = (0, 0);
    let current = fixtures()
        .into_iter()
        .filter(|f| f.manifest.decider_version == DECIDER_VERSION);
    for fixture in current {
        let golden =
            block_on(check(&fixture)).unwrap_or_else(|e| panic!("{}: {e}", fixture.label()));
        for (i, event) in golden.run.iter().enumerate() {
            let RunEvent::HandoffAllowed {
                from,
                to,
                output_type,
                audit,
                delivered,
                ..
            } = event
            else {
                continue;
            };
            let at = format!(
                "{} event {}: {from} → {to} {output_type}",
                fixture.label(),
                i + 1
            );
            audits += 1;
            let (before, after) = (&audit.context_before_scoping, &audit.context_after_scoping);
            assert_eq!(after.total_tokens, tokens(delivered), "{at}: {delivered}");
            // The payload as the sender handed it over, where the log holds it.
            let sent = golden.run[..i].iter().rev().find_map(|e| match e {
                RunEvent::AgentResponded(r) => r.response.actions.iter().find_map(|a| match a {
                    docket_decider::Action::Handoff {
                        to: t,
                        output_type: o,
                        payload,
                        ..
                    } if t.as_str() == to.as_str() && o == output_type => Some(payload.clone()),
                    _ => None,
                }),
                RunEvent::RunRequested(r) if from.as_str() == "external" => Some(r.input.clone()),
                _ => None,
            });
            let listed: BTreeSet<String> = after
                .fields_included
                .iter()
                .chain(&after.fields_excluded)
                .cloned()
                .collect();
            let leaves = match &sent {
                Some(payload) => {
                    with_payload += 1;
                    assert_eq!(before.total_tokens, tokens(payload), "{at}");
                    let leaves = leaf_paths(payload);
                    assert_eq!(listed, leaves, "{at}: every leaf of the payload, once");
                    leaves
                }
                None => listed,
            };
            let recast = delivered.as_object().is_some_and(|m| {
                m.len() == 3
                    && m.contains_key("role")
                    && m.contains_key("content")
                    && m.contains_key("source_agent_id")
            });
            let reading = read(delivered, recast);
            let included: BTreeSet<String> = match (&reading.summary_lines, &**delivered) {
                (_, Value::Null) => BTreeSet::new(),
                (Some(lines), _) => summarised(lines, &leaves),
                (None, _) => leaf_paths(&reading.content)
                    .intersection(&leaves)
                    .cloned()
                    .collect(),
            };
            assert_eq!(
                after.fields_included,
                included.iter().cloned().collect::<Vec<_>>(),
                "{at}: {delivered}"
            );
            match (&audit.summary, &reading.summary_lines) {
                (Some(summary), Some(lines)) => {
                    assert_eq!(summary.lines_kept, lines.len(), "{at}");
                    assert_eq!(
                        Some(summary.lines_omitted as u64),
                        reading.fields_omitted,
                        "{at}"
                    );
                    assert_eq!(summary.empty, lines.is_empty(), "{at}");
                    assert!(after.total_tokens <= summary.max_tokens, "{at}");
                }
                (Some(summary), None) => {
                    assert!(delivered.is_null() && summary.empty, "{at}: {delivered}");
                }
                (None, lines) => assert!(lines.is_none(), "{at}: a summary unaudited"),
            }
            let prior = output_type.starts_with("prior:");
            assert_eq!(before.prior_outputs_count, usize::from(prior), "{at}");
            let crossed = if leaves.is_empty() {
                !delivered.is_null()
            } else {
                !included.is_empty()
            };
            assert_eq!(
                after.prior_outputs_count,
                usize::from(prior && crossed),
                "{at}"
            );
        }
    }
    assert!(audits > 20, "only {audits} audits read");
    assert!(
        with_payload > 10,
        "only {with_payload} payloads found in the logs"
    );
}
