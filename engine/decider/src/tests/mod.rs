//! The decider's unit tests, one file per concern as under `decide/`: `handoff.rs`,
//! `response.rs`, `classification.rs`, `failure.rs`, `fan_out.rs`, `ticket.rs`,
//! `episode.rs` and `effect.rs`, with `replay.rs` for replay checks, decider versions and
//! event encoding. The tests of `decide/mod.rs` itself (starting a run, refusing inputs)
//! are at the end of this file. The transition table (`transitions.rs` at the crate root)
//! names the tests covering each of its rows.
//!
//! Each test is a canned history: given the events recorded so far, when an input is
//! recorded, then the events `decide` made of it (and the state they fold to) are checked.
//! A test that walks a run through several inputs is a sequence of whens on one
//! [`History`], each followed by its then:
//!
//! ```text
//! let mut run = started();                       // given: the run's start
//! run.when(respond(vec![handoff("b", "ab", json!({}))]))
//!     .then_kinds(&["agent.responded", "handoff.allowed", "agent.call_scheduled"]);
//! ```
//!
//! This file holds the harness, the builders of recorded inputs ([`respond`], [`fail`],
//! [`approve`], [`deny`]), and the fixtures several concerns share: the `t` bundle of a
//! three-agent pipeline, a fan-out bundle and the effects bundle.

use crate::{AgentCallFailed, AgentResponded, HumanDecided};
use std::collections::BTreeMap;

use serde_json::{Value, json};

use docket_policies::PolicyBundle;

use crate::events::workflow::{AgentSpec, ExecutorSpec, WorkflowSpec};
use crate::{
    Command, DECIDER_VERSION, EFFECT_RESULT_TYPE, EFFECTS_SOURCE, Rejection, RunEvent,
    RunRequested, RunState, RunStatus, decide, replay_check,
};
use docket_protocol::CallId;
use docket_protocol::{Action, AgentRequest, AgentResponse, Confidence, ToolCall, Usage};

pub(crate) mod authority;
pub(crate) mod browser;
pub(crate) mod cancel;
pub(crate) mod capability;
pub(crate) mod circuit;
pub(crate) mod classification;
pub(crate) mod context;
pub(crate) mod domain;
pub(crate) mod effect;
pub(crate) mod episode;
pub(crate) mod failure;
pub(crate) mod fan_out;
pub(crate) mod gate;
pub(crate) mod handoff;
pub(crate) mod intent;
pub(crate) mod live;
pub(crate) mod overrides;
pub(crate) mod pause;
pub(crate) mod reassign;
pub(crate) mod replay;
pub(crate) mod response;
pub(crate) mod session;
pub(crate) mod signal;
pub(crate) mod snapshot;
pub(crate) mod ticket;
pub(crate) mod timer;
pub(crate) mod tool;

// ---------------------------------------------------------------------------------------
// The history harness.

/// A run's history: the events it was given, then each input recorded on it, decided on
/// the state the history folds to.
pub(crate) struct History {
    /// The bundle every input is decided under.
    pub(crate) bundle: PolicyBundle,
    /// The fold of the log.
    pub(crate) state: RunState,
    /// Every event: the given ones, then each input's batch.
    pub(crate) log: Vec<RunEvent>,
    /// The batch the last input decided: what the thens check.
    decided: Vec<RunEvent>,
    /// The clock of inputs that name no time (see [`History::clock`]).
    at_ms: i64,
    step_ms: i64,
}

impl History {
    /// A run with nothing recorded, under `bundle`.
    pub(crate) fn new(bundle: PolicyBundle) -> Self {
        Self {
            bundle,
            state: RunState::default(),
            log: Vec::new(),
            decided: Vec::new(),
            at_ms: 0,
            step_ms: 0,
        }
    }

    /// Every call and handoff decision so far, folded from the log (the state keeps only
    /// what later decisions read).
    pub(crate) fn history(&self) -> crate::RunHistory {
        crate::RunHistory::fold(&self.log)
    }

    /// Given `events` were recorded: folds them into the state and the log.
    pub(crate) fn given(mut self, events: &[RunEvent]) -> Self {
        for event in events {
            self.state.apply(event);
        }
        self.log.extend_from_slice(events);
        self
    }

    /// Inputs that name no time are recorded `step_ms` after the previous one, the first at
    /// `at_ms + step_ms` (a step of 0: every one at `at_ms`).
    pub(crate) fn clock(mut self, at_ms: i64, step_ms: i64) -> Self {
        self.at_ms = at_ms;
        self.step_ms = step_ms;
        self
    }

    /// The time of the next input that names none.
    pub(crate) fn now(&mut self) -> i64 {
        self.at_ms += self.step_ms;
        self.at_ms
    }

    /// When `input` is recorded: decides it and folds the batch into the state and the log.
    /// The decider refusing it fails the test.
    pub(crate) fn when(&mut self, input: impl Input) -> &mut Self {
        let command = input.command(self);
        let events = decide(&self.state, &self.bundle, command).expect("the input is decided");
        for event in &events {
            self.state.apply(event);
        }
        self.log.extend_from_slice(&events);
        // The handoff context's crossings (tests/context.rs checks them) are left out of
        // what the other concerns' thens read: they accompany every first call.
        self.decided = events
            .into_iter()
            .filter(|e| !is_context_crossing(e))
            .collect();
        self
    }

    /// When `input` is recorded, the decider refuses it: returns why. Nothing is recorded.
    pub(crate) fn when_rejected(&mut self, input: impl Input) -> Rejection {
        let command = input.command(self);
        decide(&self.state, &self.bundle, command).expect_err("the input is refused")
    }

    /// Then the batch decided is of these kinds, in this order (its input's own first).
    pub(crate) fn then_kinds(&mut self, expected: &[&str]) -> &mut Self {
        assert_eq!(kinds(&self.decided), expected);
        self
    }

    /// Then the batch decided passes `check`.
    pub(crate) fn then(&mut self, check: impl FnOnce(&[RunEvent])) -> &mut Self {
        check(&self.decided);
        self
    }

    /// The batch the last input decided.
    pub(crate) fn decided(&self) -> &[RunEvent] {
        &self.decided
    }

    /// The one call pending (the test fails if there are none or several).
    pub(crate) fn pending(&self) -> AgentRequest {
        let pending = self.state.pending_requests();
        assert_eq!(pending.len(), 1, "{pending:?}");
        AgentRequest::clone(&pending[0])
    }

    /// The whole log replays: every batch is decided again the same.
    pub(crate) fn replays(&self) {
        let reworded = replay_check(&self.log, &self.bundle).expect("the log replays");
        assert_eq!(reworded, [], "the same build words its decisions alike");
    }
}

/// A recorded input, made into its command on the history that records it (which call is
/// pending, which ticket is open, what time it is).
pub(crate) trait Input {
    fn command(self, history: &mut History) -> Command;
}

impl Input for Command {
    fn command(self, _: &mut History) -> Command {
        self
    }
}

impl<F: FnOnce(&mut History) -> Command> Input for F {
    fn command(self, history: &mut History) -> Command {
        self(history)
    }
}

/// The call an agent's answer or failure is for.
enum Answering {
    /// The one call pending.
    OnlyPending,
    /// The pending call to this agent (a branch of a fan-out).
    Agent(String),
    /// This call.
    Call(String),
}

impl Answering {
    fn request_id(self, history: &History) -> CallId {
        match self {
            Self::OnlyPending => history.pending().request_id,
            Self::Agent(agent) => history
                .state
                .pending_requests()
                .iter()
                .find(|r| r.target_agent == agent)
                .map(|r| r.request_id.clone())
                .expect("branch pending"),
            Self::Call(id) => id.into(),
        }
    }
}

/// An agent's answer: [`respond`], [`respond_with`].
pub(crate) struct Response {
    answering: Answering,
    response: AgentResponse,
    at_ms: Option<i64>,
}

/// The agent of the one pending call answers successfully, with high confidence, asking
/// for `actions`; it reports no usage.
pub(crate) fn respond(actions: Vec<Action>) -> Response {
    respond_with(AgentResponse::success("", Confidence::High, actions))
}

/// The agent of the one pending call answers `response` (its request id becomes the
/// call's).
pub(crate) fn respond_with(response: AgentResponse) -> Response {
    Response {
        answering: Answering::OnlyPending,
        response,
        at_ms: None,
    }
}

impl Response {
    /// The answer is to the call `request_id`.
    pub(crate) fn to(mut self, request_id: &str) -> Self {
        self.answering = Answering::Call(request_id.into());
        self
    }

    /// The answer is from `agent`, to its pending call.
    pub(crate) fn by(mut self, agent: &str) -> Self {
        self.answering = Answering::Agent(agent.into());
        self
    }

    /// The answer's status (`PARTIAL`, `TIMEOUT` with actions...).
    pub(crate) fn status(mut self, status: docket_protocol::ResponseStatus) -> Self {
        self.response.status = status;
        self
    }

    pub(crate) fn confidence(mut self, confidence: Confidence) -> Self {
        self.response.confidence_level = Some(confidence);
        self
    }

    /// The answer warns `text` (a PARTIAL answer's limitations).
    pub(crate) fn warning(mut self, text: &str) -> Self {
        self.response.warnings.push(text.to_owned());
        self
    }

    /// The call used `tokens` input tokens.
    pub(crate) fn tokens(mut self, tokens: u64) -> Self {
        self.response.usage.input_tokens = tokens;
        self
    }

    pub(crate) fn usage(mut self, usage: Usage) -> Self {
        self.response.usage = usage;
        self
    }

    /// The agent ran this tool (counted in its usage).
    pub(crate) fn tool_call(mut self, name: &str, arguments: &str) -> Self {
        self.response.tool_calls.push(ToolCall {
            name: name.into(),
            arguments: arguments.into(),
        });
        self.response.usage.tool_calls += 1;
        self
    }

    pub(crate) fn at(mut self, at_ms: i64) -> Self {
        self.at_ms = Some(at_ms);
        self
    }
}

impl Input for Response {
    fn command(mut self, history: &mut History) -> Command {
        let request_id = self.answering.request_id(history);
        self.response.request_id.clone_from(&request_id);
        Command::RecordResponse(AgentResponded {
            request_id,
            response: self.response.into(),
            at_ms: self.at_ms.unwrap_or_else(|| history.now()),
        })
    }
}

/// A call that failed without a usable answer: [`fail`], [`crash`].
pub(crate) struct Failure {
    answering: Answering,
    code: String,
    message: String,
    at_ms: Option<i64>,
}

/// The one pending call fails with the executor's `code` and `message`.
pub(crate) fn fail(code: &str, message: &str) -> Failure {
    Failure {
        answering: Answering::OnlyPending,
        code: code.into(),
        message: message.into(),
        at_ms: None,
    }
}

/// The one pending call's agent crashed (`AGENT_CRASHED`, exit code 3).
pub(crate) fn crash() -> Failure {
    fail("AGENT_CRASHED", "exit code 3")
}

impl Failure {
    /// The failure is of the call `request_id`.
    pub(crate) fn to(mut self, request_id: &str) -> Self {
        self.answering = Answering::Call(request_id.into());
        self
    }

    pub(crate) fn at(mut self, at_ms: i64) -> Self {
        self.at_ms = Some(at_ms);
        self
    }
}

impl Input for Failure {
    fn command(self, history: &mut History) -> Command {
        Command::RecordFailure(AgentCallFailed {
            request_id: self.answering.request_id(history),
            code: self.code,
            message: self.message,
            at_ms: self.at_ms.unwrap_or_else(|| history.now()),
        })
    }
}

/// A human's decision on a ticket: [`approve`], [`deny`], [`approve_open`],
/// [`deny_open`]. By `ana`, reason `ok`, unless said.
pub(crate) struct Decision {
    /// None: the first open ticket.
    ticket: Option<String>,
    approved: bool,
    by: String,
    reason: String,
    choice: Option<u32>,
    answer: Option<String>,
    at_ms: Option<i64>,
}

fn decision(ticket: Option<&str>, approved: bool) -> Decision {
    Decision {
        ticket: ticket.map(str::to_owned),
        approved,
        by: "ana".into(),
        reason: "ok".into(),
        choice: None,
        answer: None,
        at_ms: None,
    }
}

pub(crate) fn approve(ticket: &str) -> Decision {
    decision(Some(ticket), true)
}

pub(crate) fn deny(ticket: &str) -> Decision {
    decision(Some(ticket), false)
}

/// Approves the first open ticket (the test fails if none is open).
pub(crate) fn approve_open() -> Decision {
    decision(None, true)
}

/// Denies the first open ticket (the test fails if none is open).
pub(crate) fn deny_open() -> Decision {
    decision(None, false)
}

impl Decision {
    pub(crate) fn because(mut self, reason: &str) -> Self {
        self.reason = reason.into();
        self
    }

    pub(crate) fn by(mut self, who: &str) -> Self {
        self.by = who.into();
        self
    }

    /// For a conflict ticket: the output chosen; for a question: the option (from 1).
    pub(crate) fn choice(mut self, choice: u32) -> Self {
        self.choice = Some(choice);
        self
    }

    /// For a question: the answer in words.
    pub(crate) fn answer(mut self, text: &str) -> Self {
        self.answer = Some(text.into());
        self
    }

    pub(crate) fn at(mut self, at_ms: i64) -> Self {
        self.at_ms = Some(at_ms);
        self
    }
}

impl Input for Decision {
    fn command(self, history: &mut History) -> Command {
        let ticket = self.ticket.unwrap_or_else(|| {
            history
                .state
                .open_tickets()
                .next()
                .map(|(t, _)| t.to_string())
                .expect("a ticket is open")
        });
        Command::RecordHumanDecision(HumanDecided {
            ticket: ticket.into(),
            approved: self.approved,
            by: self.by,
            reason: self.reason,
            choice: self.choice,
            answer: self.answer,
            at_ms: self.at_ms.unwrap_or_else(|| history.now()),
        })
    }
}

/// A crossing of the handoff context (the original request, the human decisions): a
/// `handoff.allowed` of read-only context from `external` or `human`.
pub(crate) fn is_context_crossing(event: &RunEvent) -> bool {
    matches!(
        event,
        RunEvent::HandoffAllowed { from, input: docket_policies::InputKind::Context, output_type, .. }
            if (from == crate::EXTERNAL && output_type == "original_request")
                || (from == "human" && output_type == "decisions")
                || output_type.starts_with("session.")
    )
}

pub(crate) fn kinds(events: &[RunEvent]) -> Vec<&'static str> {
    events.iter().map(RunEvent::kind).collect()
}

pub(crate) fn handoff(to: &str, output_type: &str, payload: Value) -> Action {
    Action::Handoff {
        to: to.into(),
        output_type: output_type.into(),
        payload,
        task: None,
    }
}

/// The batch a run's start decides (`run.requested`, the entry handoff, the entry call):
/// what most histories are given.
pub(crate) fn start_events(bundle: &PolicyBundle, run: RunRequested) -> Vec<RunEvent> {
    decide(&RunState::default(), bundle, Command::Start(run.into())).expect("the run starts")
}

/// An agent run in process.
pub(crate) fn in_process() -> AgentSpec {
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

// ---------------------------------------------------------------------------------------
// The `t` bundle: a pipeline external → a → b → c → external.

pub(crate) const BUNDLE: &str = r#"
bundle = { id = "t" }
[[agents]]
id = "external"
[[agents]]
id = "a"
allowed_tools = ["Read", "Bash(*)"]
[[agents]]
id = "b"
[[agents.capabilities]]
code = "questions"
[agents.capabilities.input_schema]
type = "object"
required = ["topics"]
[[agents]]
id = "c"
[agents.context_requirements]
handoff_mode = "scoped"
allowed_context_fields = ["keep"]

[[output_types]]
id = "req"
schema = { type = "object", required = ["x"] }

[interactions]
flow_order = ["external", "a", "b", "c", "external"]
allowed = [
  { from = "external", to = "a", output_type = "req" },
  { from = "a", to = "b" },
  { from = "b", to = "c" },
  { from = "c", to = "external" },
]
context = [{ from = "a", to = "c" }]
forbidden = [{ from = "c", to = "a", reason = "Reverse flow not allowed" }]

[multi_agent_handoffs]
default_handoff_mode = "full"

[[deny_patterns]]
id = "deny-rm"
pattern = "Bash(rm -rf *)"
reason = "recursive deletion is denied for every agent"

[[responsibility_locks]]
id = "lock"
capability = "questions"
owner = "b"
forbidden_requesters = ["c"]
reason = "Guardrail 3: question generation lock"
"#;

pub(crate) fn bundle() -> PolicyBundle {
    PolicyBundle::from_toml_str(BUNDLE, "t.toml").expect("test bundle is valid")
}

pub(crate) fn workflow() -> WorkflowSpec {
    WorkflowSpec {
        name: "t".into(),
        policy: "t.toml".into(),
        entry: "a".into(),
        input_type: None,
        goal: None,
        budget: Default::default(),
        input: None,
        agents: ["a", "b", "c"]
            .into_iter()
            .map(|a| (a.into(), in_process()))
            .collect::<BTreeMap<_, _>>(),
        effects: Default::default(),
        tools: Default::default(),
        evidence: Default::default(),
    }
}

/// The `run.requested` of `run-1` under the `t` bundle, with input `{"x": 1}`.
pub(crate) fn run_requested(b: &PolicyBundle) -> RunRequested {
    RunRequested {
        run_id: "run-1".into(),
        workflow: workflow(),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "t.toml".into(),
        bundle_hash: b.hash().to_hex(),
        input: json!({"x": 1}),
        at_ms: 1_000,
        decider_version: DECIDER_VERSION,
        forked_from: None,
        scheduled: None,
        session: None,
    }
}

/// Given `run-1` started under the `t` bundle: a's call is pending. Inputs are recorded at
/// 2,000 ms unless they say.
pub(crate) fn started() -> History {
    started_under(BUNDLE, "t.toml", |_| {})
}

/// Given `run-1` started as [`started`] does, under the bundle `source` (named `name`),
/// with `adjust` changing the recorded request (decider version, workflow, input).
pub(crate) fn started_under(
    source: &str,
    name: &str,
    adjust: impl FnOnce(&mut RunRequested),
) -> History {
    let b = PolicyBundle::from_toml_str(source, name).expect("test bundle is valid");
    let mut run = RunRequested {
        bundle_source: source.into(),
        bundle_source_name: name.into(),
        ..run_requested(&b)
    };
    adjust(&mut run);
    let given = start_events(&b, run);
    History::new(b).given(&given).clock(2_000, 0)
}

// ---------------------------------------------------------------------------------------
// The fan-out bundle: hub hands off to left and right, whose outputs join at sink.

/// The fan-out bundle, conflicts resolved by `resolution`, with `extra` appended to its
/// `[multi_agent_handoffs]` section.
pub(crate) fn fanout_bundle_with(resolution: &str, extra: &str) -> (PolicyBundle, String) {
    let src = format!(
        r#"
bundle = {{ id = "fan" }}
agents = [{{ id = "external" }}, {{ id = "hub" }}, {{ id = "left" }}, {{ id = "right" }}, {{ id = "sink" }}]
[interactions]
allowed = [
  {{ from = "external", to = "hub" }}, {{ from = "hub", to = "left" }}, {{ from = "hub", to = "right" }},
  {{ from = "left", to = "sink" }}, {{ from = "right", to = "sink" }}, {{ from = "sink", to = "external" }},
]
[multi_agent_handoffs]
default_handoff_mode = "full"
conflict_resolution = "{resolution}"
{extra}
"#
    );
    (
        PolicyBundle::from_toml_str(&src, "fan.toml").expect("valid"),
        src,
    )
}

/// Given a run of the fan-out bundle (conflicts resolved by `resolution`) whose hub handed
/// the same job to left and right: both branches' calls are pending.
pub(crate) fn fanned_out(resolution: &str) -> History {
    fanned_out_with(resolution, "")
}

/// [`fanned_out`] under [`fanout_bundle_with`]`(resolution, extra)`.
pub(crate) fn fanned_out_with(resolution: &str, extra: &str) -> History {
    fanned_out_recorded_by(resolution, extra, DECIDER_VERSION)
}

/// [`fanned_out_with`], the run recorded by decider version `version`.
pub(crate) fn fanned_out_recorded_by(resolution: &str, extra: &str, version: u32) -> History {
    let (_, src) = fanout_bundle_with(resolution, extra);
    fanned_out_under(&src, version)
}

/// [`fanned_out`] under the fan-out bundle's text `src` (its agents as there), the run
/// recorded by decider version `version`.
pub(crate) fn fanned_out_under(src: &str, version: u32) -> History {
    let src = src.to_owned();
    let b = PolicyBundle::from_toml_str(&src, "fan.toml").expect("valid");
    let workflow = WorkflowSpec {
        name: "fan".into(),
        policy: "fan.toml".into(),
        entry: "hub".into(),
        input_type: None,
        goal: None,
        budget: Default::default(),
        input: None,
        agents: ["hub", "left", "right", "sink"]
            .into_iter()
            .map(|a| (a.into(), in_process()))
            .collect(),
        effects: Default::default(),
        tools: Default::default(),
        evidence: Default::default(),
    };
    let run = RunRequested {
        run_id: "run-f".into(),
        workflow,
        bundle_source: src,
        bundle_source_name: "fan.toml".into(),
        bundle_hash: b.hash().to_hex(),
        input: json!({}),
        at_ms: 0,
        decider_version: version,
        forked_from: None,
        scheduled: None,
        session: None,
    };
    let given = start_events(&b, run);
    let mut run = History::new(b).given(&given).clock(2_000, 0);
    run.when(respond(vec![
        handoff("left", "job", json!({"n": 1})),
        handoff("right", "job", json!({"n": 1})),
    ]));
    run
}

// ---------------------------------------------------------------------------------------
// The effects bundle: a publisher with side effects on two lanes, a reader without, a
// checker that verifies.

pub(crate) const EFFECTS_BUNDLE: &str = r#"
bundle = { id = "fx" }
[[agents]]
id = "external"
[[agents]]
id = "publisher"
side_effects = ["publish", "dm", "like"]
[[agents]]
id = "reader"
[[agents]]
id = "checker"
[[agents]]
id = "liker"
side_effects = ["like"]

[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = true
retry_cap = 1

[[side_effects]]
id = "publish-browser"
kind = "publish"
lane = "browser"
dry_run_required = true
human_approval_required = true
verifier = "checker"

[[side_effects]]
id = "dm-any"
kind = "dm"
lane = "*"
dry_run_required = false
retry_cap = 2

[[side_effects]]
id = "like-api"
kind = "like"
lane = "api"
dry_run_required = false

[interactions]
allowed = [
  { from = "external", to = "publisher" },
  { from = "publisher", to = "external" },
  { from = "external", to = "reader" },
  { from = "reader", to = "liker" },
  { from = "reader", to = "checker" },
  { from = "liker", to = "external" },
  { from = "checker", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// Given `run-1` started under the effects bundle with `entry` called first. Inputs are
/// recorded 10 ms apart from 1,000 ms unless they say.
pub(crate) fn effects_run(entry: &str) -> History {
    effects_run_under(EFFECTS_BUNDLE, entry, DECIDER_VERSION)
}

/// [`effects_run`] under the effects bundle with `extra` appended.
pub(crate) fn effects_run_with(extra: &str, entry: &str) -> History {
    effects_run_under(&format!("{EFFECTS_BUNDLE}{extra}"), entry, DECIDER_VERSION)
}

/// Given `run-1` started as [`effects_run`] does, under the bundle `source` (named
/// `fx.toml`) and recorded by `decider_version`.
pub(crate) fn effects_run_under(source: &str, entry: &str, decider_version: u32) -> History {
    let b = PolicyBundle::from_toml_str(source, "fx.toml").expect("bundle is valid");
    let workflow = WorkflowSpec {
        name: "fx".into(),
        policy: "fx.toml".into(),
        entry: entry.into(),
        input_type: None,
        input: None,
        goal: None,
        budget: Default::default(),
        agents: ["publisher", "reader", "checker", "liker"]
            .into_iter()
            .map(|a| (a.into(), in_process()))
            .collect::<BTreeMap<_, _>>(),
        effects: Default::default(),
        tools: Default::default(),
        evidence: Default::default(),
    };
    let run = RunRequested {
        run_id: "run-1".into(),
        workflow,
        bundle_source: source.into(),
        bundle_source_name: "fx.toml".into(),
        bundle_hash: b.hash().to_hex(),
        input: json!({"post": "hello"}),
        at_ms: 1_000,
        decider_version,
        forked_from: None,
        scheduled: None,
        session: None,
    };
    let given = start_events(&b, run);
    History::new(b).given(&given).clock(1_000, 10)
}

/// An agent asks for a side effect.
pub(crate) fn effect(kind: &str, lane: &str, key: Option<&str>) -> Action {
    Action::RequestEffect {
        kind: kind.into(),
        lane: lane.into(),
        idempotency_key: key.map(str::to_owned),
        params: json!({"text": "hello"}),
        not_before: None,
    }
}

/// The effect result the last scheduled call hands back to the asking agent.
pub(crate) fn effect_result(state: &RunState) -> Value {
    let request = state
        .pending_requests()
        .last()
        .cloned()
        .expect("a call is pending");
    let input = request
        .decision_inputs
        .last()
        .expect("a decision input")
        .clone();
    assert_eq!(input.source_agent, EFFECTS_SOURCE);
    assert_eq!(input.output_type, EFFECT_RESULT_TYPE);
    std::sync::Arc::unwrap_or_clone(input.payload)
}

// ---------------------------------------------------------------------------------------
// `decide/mod.rs`: starting a run; inputs refused.

#[test]
pub(crate) fn start_schedules_the_entry_call() {
    let b = bundle();
    let run = run_requested(&b);
    let mut history = History::new(b);
    history
        .when(Command::Start(run.into()))
        .then_kinds(&["run.requested", "handoff.allowed", "agent.call_scheduled"])
        .then(|events| {
            let RunEvent::AgentCallScheduled { request, .. } = &events[2] else {
                panic!("third event schedules the call");
            };
            assert_eq!(request.request_id, "run-1/call-1");
            assert_eq!(request.target_agent, "a");
            assert_eq!(request.decision_inputs[0].source_agent, "external");
            assert_eq!(request.decision_inputs[0].output_type, "req");
            assert_eq!(request.timeout_ms, 30_000);
        });
    assert_eq!(history.state.status, RunStatus::Running);
    assert_eq!(history.state.version, 3);
}

#[test]
pub(crate) fn final_runs_reject_commands() {
    let mut run = started();
    let id = run.pending().request_id;
    run.when(respond(vec![handoff("c", "ac", json!({}))])); // a → c is a skip
    assert_eq!(run.state.status, RunStatus::Blocked);
    let err = run.when_rejected(fail("X", "x").to(&id).at(0));
    assert!(matches!(err, Rejection::Finished(_)));
}

#[test]
pub(crate) fn rejections_are_typed() {
    let mut run = started();
    assert_eq!(
        run.when_rejected(fail("X", "x").to("run-1/call-9").at(0)),
        Rejection::UnknownCall("run-1/call-9".into())
    );
    let again = run_requested(&run.bundle);
    assert!(matches!(
        run.when_rejected(Command::Start(again.into())),
        Rejection::AlreadyStarted(_)
    ));
    assert_eq!(
        run.when_rejected(approve("ticket-1").by("x").because("x").at(0)),
        Rejection::UnknownTicket("ticket-1".into())
    );
    // The same log under an edited bundle.
    let other = PolicyBundle::from_toml_str(
        &format!("{BUNDLE}\n# edited\n[defaults]\ntimeout_ms = 5\n"),
        "t.toml",
    )
    .expect("valid");
    let mut edited = History::new(other).given(&run.log);
    assert!(matches!(
        edited.when_rejected(fail("X", "x").to("run-1/call-1").at(0)),
        Rejection::BundleMismatch { .. }
    ));
    // Nothing recorded yet.
    assert_eq!(
        History::new(bundle()).when_rejected(fail("X", "x").to("x").at(0)),
        Rejection::NotStarted
    );
}
