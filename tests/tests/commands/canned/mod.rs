//! Recorded runs for the replay tests: copies of the golden logs, and runs recorded here
//! by the decider itself (its batches folded as the runtime would), so each test starts
//! from a log it knows the shape of.

#![allow(dead_code)] // Each test file uses part of it.

use docket_decider::AgentResponded;
use std::path::Path;

use docket_decider::{
    Action, AgentResponse, CircuitReading, Command, Confidence, DECIDER_VERSION, RunEvent,
    RunRequested, RunState, ToolReturned, WorkflowSpec, decide,
};
use docket_policies::PolicyBundle;
use docket_runtime::Runtime;
use docket_store::{EmbeddedStore, StoreConfig};
use docket_tests::workspace_root;
use serde_json::json;

/// A copy of the golden log `v{version}/{shape}` in `dir`.
pub fn golden(dir: &Path, version: u32, shape: &str) {
    let from = workspace_root()
        .join("tests/golden")
        .join(format!("v{version}"))
        .join(shape);
    for file in ["DOCKET-STORE", "log/00000000000000000001.seg"] {
        let to = dir.join(file);
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        std::fs::copy(from.join(file), to).expect("copy the golden log");
    }
}

/// The events of the golden log `v{version}/{shape}`.
pub async fn golden_events(version: u32, shape: &str) -> Vec<RunEvent> {
    let dir = tempfile::tempdir().expect("tempdir");
    golden(dir.path(), version, shape);
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("the store opens");
    Runtime::new(store)
        .events(&format!("golden-{shape}").as_str().into())
        .await
        .expect("the run reads")
        .into_iter()
        .map(|e| e.event)
        .collect()
}

/// One worker, which may ask for the read-only tool `probe`, with a budget of 1000
/// tokens.
pub const WORKER_WORKFLOW: &str = "name = \"t\"\npolicy = \"b.toml\"\nentry = \"worker\"\n\
    [agents.worker]\nin_process = true\n[tools.probe]\nin_process = true\nread_only = true\n\
    [budget]\ntokens = 1000\n";

/// The worker may use `probe`, take the run's input and hand back its output.
pub const WORKER_BUNDLE: &str = "bundle = { id = \"t\" }\n\
    agents = [{ id = \"external\" }, { id = \"worker\", allowed_tools = [\"probe\"] }]\n\
    [interactions]\nallowed = [{ from = \"external\", to = \"worker\" }, { from = \"worker\", to = \"external\" }]\n\
    [multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\n";

/// A run recorded input by input: each decided on the state so far, its batch folded and
/// appended to the log.
pub struct Recorder {
    pub bundle: PolicyBundle,
    pub state: RunState,
    pub log: Vec<RunEvent>,
    at_ms: i64,
}

impl Recorder {
    /// The worker workflow started under `bundle_source` (run id `canned`).
    pub fn worker(bundle_source: &str) -> Self {
        Self::start(WORKER_WORKFLOW, bundle_source)
    }

    /// The workflow `workflow_text` started under `bundle_source` (run id `canned`).
    pub fn start(workflow_text: &str, bundle_source: &str) -> Self {
        let bundle = PolicyBundle::from_toml_str(bundle_source, "b.toml").expect("bundle");
        let workflow =
            WorkflowSpec::parse(workflow_text, Path::new("t.toml")).expect("the workflow");
        let run = RunRequested {
            run_id: "canned".into(),
            workflow,
            bundle_source: bundle_source.to_owned(),
            bundle_source_name: "b.toml".into(),
            bundle_hash: bundle.hash().to_hex(),
            input: json!({"q": 1}),
            at_ms: 1,
            decider_version: DECIDER_VERSION,
            forked_from: None,
            scheduled: None,
            session: None,
        };
        let mut recorder = Self {
            bundle,
            state: RunState::default(),
            log: Vec::new(),
            at_ms: 1,
        };
        recorder.record(Command::Start(run.into()));
        recorder
    }

    fn now(&mut self) -> i64 {
        self.at_ms += 1;
        self.at_ms
    }

    /// Decides `command`, folds and appends its batch.
    pub fn record(&mut self, command: Command) -> &mut Self {
        let batch = decide(&self.state, &self.bundle, command).expect("decided");
        for e in &batch {
            self.state.apply(e);
        }
        self.log.extend(batch);
        self
    }

    /// The one pending call's agent answers `actions`, having used `tokens`.
    pub fn respond(&mut self, actions: Vec<Action>, tokens: u64) -> &mut Self {
        let call = self.state.pending_requests()[0].request_id.clone();
        let mut response = AgentResponse::success(call.clone(), Confidence::High, actions);
        response.usage.input_tokens = tokens;
        let at_ms = self.now();
        self.record(Command::RecordResponse(AgentResponded {
            request_id: call,
            response: response.into(),
            at_ms,
        }))
    }

    /// The pending call to `agent` answers `actions`.
    pub fn respond_as(&mut self, agent: &str, actions: Vec<Action>) -> &mut Self {
        let call = self
            .state
            .pending_requests()
            .iter()
            .find(|r| r.target_agent == agent)
            .unwrap_or_else(|| panic!("no call to {agent} pending"))
            .request_id
            .clone();
        let response = AgentResponse::success(call.clone(), Confidence::High, actions);
        let at_ms = self.now();
        self.record(Command::RecordResponse(AgentResponded {
            request_id: call,
            response: response.into(),
            at_ms,
        }))
    }

    /// The due tool call returns `{"ok": true}`.
    pub fn tool_returns(&mut self) -> &mut Self {
        let tool = self.state.due_tool_call().expect("a tool call due");
        let returned = RunEvent::ToolReturned(ToolReturned {
            tool_call_id: tool.tool_call_id.clone(),
            result: json!({"ok": true}),
            at_ms: self.at_ms + 1,
        });
        self.now();
        self.record(Command::from_event(&returned).expect("an input"))
    }

    /// The runtime read the pending call's agent's breaker at `failures` failed calls of
    /// as many in its window (and in a row) across runs, the last just now.
    pub fn circuit_read(&mut self, failures: u32) -> &mut Self {
        let request = self.state.pending_requests()[0].clone();
        let at_ms = self.now();
        self.record(Command::RecordCircuit(CircuitReading {
            request_id: request.request_id.clone(),
            agent: request.target_agent.clone(),
            consecutive_failures: failures,
            last_failure_ms: at_ms,
            last_probe_ms: None,
            window: Some(docket_decider::CircuitWindow {
                window_ms: 600_000,
                calls: failures,
                failures,
            }),
            at_ms,
        }))
    }
}

/// The worker asks for `probe` having used `tokens`, gets its result, and finishes.
pub fn worker_run(bundle_source: &str, tokens: u64) -> Vec<RunEvent> {
    let mut run = Recorder::worker(bundle_source);
    run.respond(
        vec![Action::CallTool {
            name: "probe".into(),
            arguments: json!("x"),
        }],
        tokens,
    );
    if run.state.due_tool_call().is_some() {
        run.tool_returns();
    }
    run.respond(
        vec![Action::Finish {
            output: json!({"done": true}),
        }],
        0,
    );
    assert_eq!(run.state.status().as_str(), "completed", "{:#?}", run.log);
    run.log
}
