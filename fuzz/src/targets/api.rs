//! API requests: every route of `docket serve` (the route table, `docket_serve::routes`)
//! called in-process through its router (tower's `oneshot`, no connection) as an admin,
//! so that every body is parsed, with mutated paths (each `{param}` a word of the
//! dictionary or random text, percent-encoded), query strings (the route's documented
//! parameters and others) and JSON bodies (a valid body per route, mutated field by field
//! and byte by byte). The server's data directory holds runs of every state a route acts
//! on: waiting for a sign-off, waiting for an answer, blocked, completed; and a registered
//! bundle for the governance routes. It is made afresh every [`FRESH_EVERY`] cases, so a
//! case's cost does not grow with the runs earlier cases started.
//!
//! An input is the request line (`POST /api/runs?x=1`) on its first line, the body after.

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use docket_decider::{Action, AgentRequest, AgentResponse, Confidence};
use docket_runtime::{InProcessExecutor, Runtime, Workflow};
use docket_serve::routes::ROUTES;
use docket_serve::{Role, Server};
use docket_store::{EmbeddedStore, StoreConfig};
use http_body_util::BodyExt as _;
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use super::{Document, TextCase, render_text, split_header, text_cases, with_header};
use crate::mutate::{self, ByteOp, Dictionary};
use crate::{Bound, Target};

/// Cases served by one data directory before it is made afresh.
pub const FRESH_EVERY: u64 = 1_000;

/// The most bytes of a response body read (an export or listing is read whole; an event
/// stream is never read).
const MAX_RESPONSE: usize = 8 << 20;

const BUNDLE: &str = r#"bundle = { id = "fuzz-api" }
[[agents]]
id = "external"
[[agents]]
id = "writer"
[[agents]]
id = "publisher"
[interactions]
allowed = [
  { from = "external", to = "writer" },
  { from = "writer", to = "external" },
  { from = "publisher", to = "external" },
]
forbidden = [{ from = "writer", to = "publisher", reason = "drafts are reviewed first" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

const WORKFLOW: &str = r#"name = "fuzz-api"
policy = "policy.toml"
entry = "writer"
[agents.writer]
in_process = true
[agents.publisher]
in_process = true
"#;

/// The in-process writer: asks a question (`ask`), hands off to the forbidden publisher
/// (`block`), finishes (`done`), else asks for a sign-off and finishes.
fn writer(r: &AgentRequest) -> AgentResponse {
    let input = r.decision_inputs.first().map(|i| &i.payload);
    let has = |k: &str| input.is_some_and(|p| p.get(k).is_some());
    let answered = r
        .decision_inputs
        .iter()
        .any(|i| i.output_type == "human_answer");
    let actions = if has("ask") && !answered {
        vec![Action::Escalate {
            reason: "which tone?".into(),
            choices: vec!["casual".into(), "formal".into()],
        }]
    } else if has("block") {
        vec![Action::Handoff {
            to: "publisher".into(),
            output_type: "draft".into(),
            payload: json!({}),
            task: None,
        }]
    } else if has("done") || answered {
        vec![Action::Finish {
            output: json!({ "text": "done" }),
        }]
    } else {
        vec![
            Action::Escalate {
                reason: "a sign-off".into(),
                choices: Vec::new(),
            },
            Action::Finish {
                output: json!({ "text": "signed" }),
            },
        ]
    };
    AgentResponse::success(r.request_id.clone(), Confidence::High, actions)
}

fn publisher(r: &AgentRequest) -> AgentResponse {
    AgentResponse::success(
        r.request_id.clone(),
        Confidence::High,
        vec![Action::Finish { output: json!({}) }],
    )
}

/// A generated request.
#[derive(Debug, Clone)]
pub struct RequestCase {
    pub route: usize,
    /// Each `{param}`: a dictionary word, or text.
    pub params: Vec<Param>,
    /// Query pairs: (the route's parameter or a dictionary word, a value).
    pub query: Vec<(usize, Param)>,
    /// The body: a mutation of the route's valid body.
    pub body: TextCase,
    /// Raw changes to the whole path and query.
    pub target_ops: Vec<ByteOp>,
}

#[derive(Debug, Clone)]
pub enum Param {
    Word(usize),
    Text(String),
}

struct Served {
    _dir: tempfile::TempDir,
    router: axum::Router,
    token: String,
    /// Run ids and ticket ids, for paths.
    words: Vec<String>,
    put_rules: Value,
}

pub struct Api {
    runtime: tokio::runtime::Runtime,
    served: Option<Served>,
    served_cases: u64,
    root: PathBuf,
    _root: tempfile::TempDir,
    dict: Dictionary,
    bodies: Vec<Document>,
    /// Responses by status class: 2xx, 4xx, 5xx.
    pub statuses: [u64; 3],
}

impl Api {
    /// A server over a fresh data directory beside a workflow and its bundle.
    ///
    /// # Errors
    /// The server cannot be set up.
    pub fn new() -> Result<Self, crate::SetupError> {
        let root = tempfile::tempdir().map_err(|e| e.to_string())?;
        std::fs::write(root.path().join("policy.toml"), BUNDLE).map_err(|e| e.to_string())?;
        std::fs::write(root.path().join("workflow.toml"), WORKFLOW).map_err(|e| e.to_string())?;
        std::fs::write(root.path().join("input.json"), b"{}").map_err(|e| e.to_string())?;
        // A FIFO beside them: a request naming it must be refused, not read (it would
        // block); the dictionary below also names devices and files outside the root.
        let fifo = std::process::Command::new("mkfifo")
            .arg(root.path().join("pipe.toml"))
            .status()
            .map_err(|e| format!("mkfifo: {e}"))?;
        if !fifo.success() {
            return Err("mkfifo failed".into());
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let mut api = Self {
            runtime,
            served: None,
            served_cases: 0,
            root: root.path().to_owned(),
            _root: root,
            dict: Dictionary::default(),
            bodies: Vec::new(),
            statuses: [0; 3],
        };
        api.serve()?;
        let served = api.served.as_ref().ok_or("no server")?;
        let wf = api.root.join("workflow.toml").display().to_string();
        let bundle = api.root.join("policy.toml").display().to_string();
        let mut dict = Dictionary::default();
        dict.extend(served.words.iter().map(String::as_str));
        dict.extend([
            wf.as_str(),
            bundle.as_str(),
            "workflow.toml",
            "policy.toml",
            "pipe.toml",
            "/dev/zero",
            "/dev/stdin",
            "/proc/self/environ",
            "/etc/passwd",
            "../policy.toml",
            "keys/signer.key",
            "writer",
            "publisher",
            "external",
            "global",
            "fuzz-api",
            "jsonl",
            "html",
            "true",
            "false",
            "0",
            "1",
            "50",
            "500",
            "18446744073709551616",
            "-1",
            "latest",
            "ticket-1",
            "ticket-2",
            "admin",
            "viewer",
            "approver",
            "operator",
            "reason",
            "choose",
            "choice",
            "text",
            "rule",
            "rules",
            "input",
            "run_id",
            "workflow",
            "policies",
            "bundle",
            "version",
            "hash",
        ]);
        let mut bodies = Vec::new();
        for route in ROUTES {
            let body = body_for(route.method, route.path, &wf, &bundle, &served.put_rules);
            bodies.push(Document::json(route.path, body.to_string()));
        }
        let trees: Vec<&Value> = bodies.iter().filter_map(|d| d.tree.as_ref()).collect();
        let words = Dictionary::of(&trees);
        for i in 0..200 {
            let w = words.word(i).to_owned();
            dict.extend([w.as_str()]);
        }
        api.dict = dict;
        api.bodies = bodies;
        Ok(api)
    }

    /// Opens a fresh data directory, records runs in every state, registers the bundle,
    /// makes an admin token and binds a server (never served: its router is called).
    fn serve(&mut self) -> Result<(), String> {
        self.served = None;
        let dir = tempfile::tempdir_in(&self.root).map_err(|e| e.to_string())?;
        let data = dir.path().to_owned();
        let workflow =
            Workflow::load(&self.root.join("workflow.toml")).map_err(|e| e.to_string())?;
        let root = self.root.clone();
        let served = self.runtime.block_on(async move {
            let config = StoreConfig {
                durability: docket_store::Durability::UnsafeNoSync,
                ..StoreConfig::default()
            };
            let store = EmbeddedStore::open(&data, config).await.map_err(|e| e.to_string())?;
            let rt = Runtime::new(docket_app::Store::from(store));
            rt.register_agent("writer", Arc::new(InProcessExecutor::new(writer)));
            rt.register_agent("publisher", Arc::new(InProcessExecutor::new(publisher)));
            rt.register_bundle(BUNDLE, "policy.toml", "fuzz", "seed")
                .await
                .map_err(|e| e.to_string())?;
            let mut words = Vec::new();
            for (id, input) in [
                ("run-wait", json!({"draft": "x"})),
                ("run-ask", json!({"ask": true})),
                ("run-block", json!({"block": true})),
                ("run-done", json!({"done": true})),
            ] {
                let run = docket_decider::RunId::parse(id).map_err(|e| e.to_string())?;
                rt.start(&workflow, input, Some(run)).await.map_err(|e| e.to_string())?;
                words.push(id.to_owned());
            }
            let token = docket_serve::tokens::create(&data, "fuzz-admin", Role::Admin, 0)
                .map_err(|e| e.to_string())?;
            let server = Server::bind(
                rt,
                &data,
                &root,
                "127.0.0.1:0".parse().map_err(|_| "addr")?,
                false,
            )
            .await
            .map_err(|e| e.to_string())?;
            let router = server.router();
            // The PUT of the handoff rules: the rules as they are, with a reason.
            let rules = call(&router, &token, "GET", "/api/governance/handoff-rules", None)
                .await
                .map(|(_, b)| serde_json::from_slice::<Value>(&b).unwrap_or(Value::Null))
                .unwrap_or(Value::Null);
            let put_rules = json!({ "rules": rules.get("rules").cloned().unwrap_or(json!([])), "reason": "fuzz" });
            Ok::<_, String>(Served {
                _dir: dir,
                router,
                token,
                words,
                put_rules,
            })
        })?;
        self.served = Some(served);
        self.served_cases = 0;
        Ok(())
    }
}

/// A valid body for the route.
fn body_for(method: &str, path: &str, wf: &str, bundle: &str, put_rules: &Value) -> Value {
    match (method, path) {
        ("POST", "/api/runs") => {
            json!({ "workflow": wf, "input": { "draft": "x" }, "run_id": "fuzz-run" })
        }
        ("POST", "/api/schedules") => {
            json!({ "name": "fuzz-schedule", "workflow": wf, "input": { "draft": "x" }, "every": "1h" })
        }
        ("POST", p) if p.ends_with("/what-if") => json!({ "policies": bundle }),
        ("POST", p) if p.ends_with("/approve") => json!({ "reason": "fine", "choose": 1 }),
        ("POST", p) if p.ends_with("/answer") => {
            json!({ "choice": 1, "text": "casual", "reason": "tone" })
        }
        ("POST", p) if p.ends_with("/override") => {
            json!({ "role": "admin", "reason": "needed", "rule": "interactions.forbidden" })
        }
        ("PUT", _) => put_rules.clone(),
        ("POST", _) => json!({ "reason": "because" }),
        _ => Value::Null,
    }
}

/// One request through the router: its status and body (not read for an event stream).
async fn call(
    router: &axum::Router,
    token: &str,
    method: &str,
    target: &str,
    body: Option<Vec<u8>>,
) -> Result<(u16, Vec<u8>), String> {
    let has_body = body.is_some();
    let mut request = axum::http::Request::builder()
        .method(method)
        .uri(target)
        .header("authorization", format!("Bearer {token}"));
    if has_body {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(body.map_or_else(Body::empty, Body::from))
        .map_err(|e| format!("not a request: {e}"))?;
    let response = router
        .clone()
        .oneshot(request)
        .await
        .map_err(|e| format!("the router failed: {e}"))?;
    let status = response.status().as_u16();
    if target.contains("/events/stream") {
        return Ok((status, Vec::new()));
    }
    let limited = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE);
    let bytes = limited
        .collect()
        .await
        .map(|c| c.to_bytes().to_vec())
        .map_err(|e| format!("reading the response body: {e}"))?;
    Ok((status, bytes))
}

/// Percent-encodes every byte but unreserved ones.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Target for Api {
    type Case = RequestCase;

    fn name(&self) -> &'static str {
        "api"
    }

    fn strategy(&self) -> BoxedStrategy<RequestCase> {
        let param = prop_oneof![
            4 => any::<usize>().prop_map(Param::Word),
            1 => ".{0,16}".prop_map(Param::Text),
        ];
        (
            0..ROUTES.len(),
            prop::collection::vec(param.clone(), 2),
            prop::collection::vec((any::<usize>(), param), 0..4),
            text_cases(1),
            prop_oneof![6 => Just(Vec::new()), 1 => mutate::byte_ops(2)],
        )
            .prop_map(|(route, params, query, body, target_ops)| RequestCase {
                route,
                params,
                query,
                body,
                target_ops,
            })
            .boxed()
    }

    fn render(&self, case: &RequestCase) -> Vec<u8> {
        let route = &ROUTES[case.route % ROUTES.len()];
        let word = |p: &Param| match p {
            Param::Word(w) => self.dict.word(*w).to_owned(),
            Param::Text(t) => t.clone(),
        };
        let mut path = String::new();
        let mut params = case.params.iter();
        for segment in route.path.split('/').skip(1) {
            path.push('/');
            if segment.starts_with('{') {
                path.push_str(&encode(&params.next().map(word).unwrap_or_default()));
            } else {
                path.push_str(segment);
            }
        }
        let mut query = Vec::new();
        for (key, value) in &case.query {
            let key = if route.query.is_empty() || key % 4 == 3 {
                self.dict.word(*key).to_owned()
            } else {
                route.query[key % route.query.len()].0.to_owned()
            };
            query.push(format!("{}={}", encode(&key), encode(&word(value))));
        }
        let mut target = path.into_bytes();
        if !query.is_empty() {
            target.push(b'?');
            target.extend_from_slice(query.join("&").as_bytes());
        }
        mutate::apply_bytes(&mut target, &case.target_ops, &self.dict);
        let target = String::from_utf8_lossy(&target).replace(['\n', '\r'], "");
        let doc = &self.bodies[case.route % self.bodies.len()];
        let mut body_case = case.body.clone();
        body_case.json = true;
        let body =
            if route.method == "GET" && body_case.tree.is_empty() && body_case.bytes.is_empty() {
                Vec::new()
            } else {
                render_text(doc, &body_case, false, &self.dict).0
            };
        with_header(&format!("{} {target}", route.method), &body)
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let words = self
            .served
            .as_ref()
            .map(|s| s.words.clone())
            .unwrap_or_default();
        let mut seeds = Vec::new();
        for (route, doc) in ROUTES.iter().zip(&self.bodies) {
            let path = route
                .path
                .replace("{run}", words.first().map_or("run-wait", String::as_str))
                .replace("{ticket}", "ticket-1")
                .replace("{switch}", "global")
                .replace("{name}", "fuzz-schedule")
                .replace("{hash}", "latest")
                .replace("{from_agent}", "writer")
                .replace("{to_agent}", "external");
            let body = if route.method == "GET" {
                Vec::new()
            } else {
                doc.text.clone().into_bytes()
            };
            seeds.push(with_header(&format!("{} {path}", route.method), &body));
        }
        seeds
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        if self.served_cases >= FRESH_EVERY || self.served.is_none() {
            self.serve()?;
        }
        self.served_cases += 1;
        let (line, body) = split_header(input);
        let Some((method, target)) = line.split_once(' ') else {
            return Ok(());
        };
        let Some(served) = &self.served else {
            return Ok(());
        };
        let body = (!body.is_empty() || method != "GET").then(|| body.to_vec());
        let result =
            self.runtime
                .block_on(call(&served.router, &served.token, method, target, body));
        match result {
            Ok((status, response)) => {
                let class = match status {
                    200..=299 => 0,
                    500..=599 => 2,
                    _ => 1,
                };
                self.statuses[class] += 1;
                if class == 2 {
                    let seen = format!(
                        "{status} for {line}: {}",
                        String::from_utf8_lossy(&response[..response.len().min(300)])
                    );
                    return Err(format!("a server error for a client's request: {seen}"));
                }
                Ok(())
            }
            // A request the HTTP types refuse never reaches the server.
            Err(e) if e.starts_with("not a request") => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn bound(&self) -> Bound {
        // The server's runs, index and caches are the constant: a data directory is made
        // afresh every FRESH_EVERY cases, and each case's request is small.
        Bound {
            per_byte: 1024,
            constant: 96 << 20,
        }
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "answers: {} 2xx, {} 4xx, {} 5xx",
            self.statuses[0], self.statuses[1], self.statuses[2]
        )]
    }
}
