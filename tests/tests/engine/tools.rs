//! Governed tools through the `docket` binary (docs/governance.md#tools): an agent asks
//! docket to run a tool with `call_tool`; the bundle decides it before any executor runs
//! it. The executors here leave proof of every call they receive (a marker file), so a
//! refused call is shown never to have reached one; an allowed call's result is shown to
//! reach the agent (it finishes with what it got back). The last tests front a tiny MCP
//! server (`mcp-tool-server`, rmcp's server side) with the MCP executor.

use std::path::Path;

use serde_json::{Value, json};

const AGENT: &str = env!("CARGO_BIN_EXE_tool-agent");
const MARKER_TOOL: &str = env!("CARGO_BIN_EXE_tool-marker");
const MCP_SERVER: &str = env!("CARGO_BIN_EXE_mcp-tool-server");

const BUNDLE: &str = r#"
bundle = { id = "tools" }
[[agents]]
id = "external"
[[agents]]
id = "worker"
allowed_tools = ["Bash(*)", "calc:*"]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
[[deny_patterns]]
id = "no-rm"
pattern = "Bash(rm -rf *)"
reason = "recursive deletion is denied for every agent"
[[review_patterns]]
id = "review-push"
pattern = "Bash(git push*)"
reason = "pushes are reviewed"
[[deny_patterns]]
id = "no-wipe"
pattern = "calc:wipe"
reason = "wiping is never allowed"
"#;

/// Writes a workflow whose worker asks for `tool` with `arguments`, with `tools` as the
/// `[tools]` sections; returns its path.
fn workflow(root: &Path, tool: &str, arguments: &Value, tools: &str) -> String {
    std::fs::write(root.join("bundle.toml"), BUNDLE).expect("bundle");
    std::fs::write(root.join("input.json"), "{}").expect("input");
    let path = root.join("workflow.toml");
    let args = [
        "--tool".to_owned(),
        tool.to_owned(),
        "--arguments".to_owned(),
        arguments.to_string(),
    ];
    std::fs::write(
        &path,
        format!(
            "name = \"tools\"\npolicy = \"bundle.toml\"\nentry = \"worker\"\ninput = \"input.json\"\n\
             [agents.worker]\ncommand = {AGENT:?}\nargs = {}\n{tools}",
            toml_list(&args)
        ),
    )
    .expect("workflow");
    path.to_str().expect("utf-8").to_owned()
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

fn marker_tool(root: &Path) -> String {
    format!(
        "[tools.Bash]\ncommand = {MARKER_TOOL:?}\nargs = [\"--marker\", {:?}]\n",
        root.join("marker.jsonl")
    )
}

use docket_tests::docket_on as docket;

/// The run's events as `(kind, payload)`, in log order.
fn events(data: &Path, run: &str) -> Vec<(String, Value)> {
    docket_tests::run_events(data, run)
        .into_iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap_or_default().to_owned(),
                e["payload"].clone(),
            )
        })
        .collect()
}

fn kinds(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(k, _)| k.as_str()).collect()
}

fn one<'a>(events: &'a [(String, Value)], kind: &str) -> &'a Value {
    let found: Vec<&Value> = events
        .iter()
        .filter(|(k, _)| k == kind)
        .map(|(_, p)| p)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} in {:?}", kinds(events));
    found[0]
}

/// Runs to completion and returns the log; the run's output is the `tool_result` the
/// worker got back.
fn run_completed(root: &Path, workflow: &str, run: &str) -> (Vec<(String, Value)>, Value) {
    let data = root.join("data");
    let out = docket(&data, &["run", workflow, "--run-id", run]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let log = events(&data, run);
    let output = one(&log, "run.completed")["output"].clone();
    (log, output)
}

#[test]
fn a_call_matching_a_deny_pattern_is_refused_before_any_executor_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = workflow(
        dir.path(),
        "Bash",
        &json!("rm -rf /"),
        &marker_tool(dir.path()),
    );
    let (log, output) = run_completed(dir.path(), &wf, "deny-1");
    assert!(
        !dir.path().join("marker.jsonl").exists(),
        "the executor never ran: {:?}",
        std::fs::read_to_string(dir.path().join("marker.jsonl"))
    );
    assert!(
        !kinds(&log).contains(&"tool.call_scheduled"),
        "{:?}",
        kinds(&log)
    );
    let denied = one(&log, "tool.denied");
    assert_eq!(denied["rule_id"], "no-rm");
    assert_eq!(denied["name"], "Bash");
    // The decision is recorded, and the agent was told (and finished with what it got).
    assert!(log.iter().any(|(k, p)| k == "policy.decided"
        && p["subject"] == "deny-1/tool-1"
        && p["decision"]["verdict"] == "deny"));
    assert_eq!(output["status"], "denied", "{output}");
    assert_eq!(output["rule_id"], "no-rm");
}

#[test]
fn an_allowed_call_runs_once_and_its_result_reaches_the_agent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = workflow(
        dir.path(),
        "Bash",
        &json!("ls -l"),
        &marker_tool(dir.path()),
    );
    let (log, output) = run_completed(dir.path(), &wf, "allow-1");
    let marks = std::fs::read_to_string(dir.path().join("marker.jsonl")).expect("the tool ran");
    assert_eq!(marks.lines().count(), 1, "{marks}");
    let order: Vec<usize> = ["tool.call_scheduled", "tool.returned", "run.completed"]
        .iter()
        .map(|k| log.iter().position(|(kind, _)| kind == k).expect(k))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{:?}", kinds(&log));
    assert_eq!(one(&log, "tool.returned")["result"]["echo"], "ls -l");
    // The result went through the content gate before reaching the agent.
    assert!(log.iter().any(|(k, p)| k == "handoff.allowed"
        && p["from"] == "tools"
        && p["to"] == "worker"
        && p["output_type"] == "tool_result"));
    assert_eq!(output["status"], "returned", "{output}");
    assert_eq!(output["result"], json!({"echo": "ls -l", "tool": "Bash"}));
    // The recorded run replays.
    let out = docket(&dir.path().join("data"), &["replay", "allow-1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A call matching a review pattern waits on a ticket that says which tool, argument and
/// pattern; nothing runs until a human decides.
fn waiting_for_review(root: &Path, run: &str) -> (std::path::PathBuf, String) {
    let wf = workflow(root, "Bash", &json!("git push origin"), &marker_tool(root));
    let data = root.join("data");
    let out = docket(&data, &["run", &wf, "--run-id", run]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        docket_tests::stdout_text(&out)
    );
    assert!(
        !root.join("marker.jsonl").exists(),
        "nothing ran before review"
    );
    let status = docket_tests::stdout_text(&docket(&data, &["status", run]));
    for part in [
        "tool: Bash",
        "argument: git push origin",
        "review pattern: review-push (`Bash(git push*)`)",
        "ticket-1",
    ] {
        assert!(status.contains(part), "{part} in {status}");
    }
    (data, wf)
}

#[test]
fn a_call_matching_a_review_pattern_runs_after_a_human_approves_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, _) = waiting_for_review(dir.path(), "review-1");
    let out = docket(
        &data,
        &[
            "approve",
            "review-1",
            "ticket-1",
            "--by",
            "ana",
            "--reason",
            "release day",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        docket_tests::stdout_text(&out)
    );
    let marks = std::fs::read_to_string(dir.path().join("marker.jsonl")).expect("the tool ran");
    assert_eq!(marks.lines().count(), 1, "{marks}");
    let log = events(&data, "review-1");
    let output = &one(&log, "run.completed")["output"];
    assert_eq!(output["status"], "returned", "{output}");
    assert_eq!(output["result"]["echo"], "git push origin");
    let out = docket(&data, &["replay", "review-1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_call_a_human_denies_on_review_is_told_to_the_agent_and_never_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, _) = waiting_for_review(dir.path(), "review-2");
    let out = docket(
        &data,
        &[
            "deny",
            "review-2",
            "ticket-1",
            "--by",
            "ana",
            "--reason",
            "not today",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        docket_tests::stdout_text(&out)
    );
    assert!(
        !dir.path().join("marker.jsonl").exists(),
        "the tool never ran"
    );
    let log = events(&data, "review-2");
    let denied = one(&log, "tool.denied");
    assert_eq!(denied["rule_id"], "review-push");
    let output = &one(&log, "run.completed")["output"];
    assert_eq!(output["status"], "denied", "{output}");
    assert!(
        output["reason"]
            .as_str()
            .is_some_and(|r| r.contains("not today")),
        "{output}"
    );
}

#[test]
fn executor_errors_reach_the_agent_as_a_failed_tool_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = workflow(dir.path(), "Bash", &json!("fail"), &marker_tool(dir.path()));
    let (log, output) = run_completed(dir.path(), &wf, "fail-1");
    assert_eq!(one(&log, "tool.failed")["code"], "TOOL_SAID_NO");
    assert_eq!(
        (output["status"].as_str(), output["code"].as_str()),
        (Some("failed"), Some("TOOL_SAID_NO"))
    );

    // A program that does not exist is refused before the run starts, naming the
    // section; nothing is recorded.
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = workflow(
        dir.path(),
        "Bash",
        &json!("ls"),
        "[tools.Bash]\ncommand = \"/nonexistent/tool-program\"\n",
    );
    let data = dir.path().join("data");
    let out = docket(&data, &["run", &wf, "--run-id", "fail-2"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[tools.Bash] `command` /nonexistent/tool-program does not exist"),
        "{stderr}"
    );
    let runs = docket(&data, &["runs"]);
    assert!(String::from_utf8_lossy(&runs.stdout).trim().is_empty());
}

#[test]
fn a_tools_section_without_an_executor_is_refused_at_load_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = workflow(
        dir.path(),
        "Bash",
        &json!("ls"),
        "[tools.Bash]\ntimeout_ms = 5\n",
    );
    let out = docket(&dir.path().join("data"), &["run", &wf]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[tools.Bash]") && stderr.contains("exactly one of"),
        "{stderr}"
    );
    let wf = workflow(
        dir.path(),
        "Bash",
        &json!("ls"),
        "[tools.Bash]\ncommand = \"x\"\nread_olny = true\n",
    );
    let out = docket(&dir.path().join("data"), &["run", &wf]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("read_olny") && stderr.contains("[tools.Bash]"),
        "{stderr}"
    );
}

fn mcp_tools(root: &Path) -> String {
    format!(
        "[tools.calc]\nmcp = {MCP_SERVER:?}\nenv = {{ MCP_WIPE_MARKER = {:?} }}\ntimeout_ms = 20000\n",
        root.join("wiped")
    )
}

#[test]
fn an_mcp_servers_tool_is_governed_and_its_result_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = workflow(
        dir.path(),
        "calc:add",
        &json!({"a": 2, "b": 3}),
        &mcp_tools(dir.path()),
    );
    let (log, output) = run_completed(dir.path(), &wf, "mcp-1");
    let scheduled = one(&log, "tool.call_scheduled");
    assert_eq!(
        (
            scheduled["section"].as_str(),
            scheduled["request"]["tool"].as_str()
        ),
        (Some("calc"), Some("add"))
    );
    let returned = one(&log, "tool.returned");
    assert_eq!(returned["result"]["content"][0]["text"], "5", "{returned}");
    assert_eq!(output["status"], "returned");
    assert_eq!(output["result"]["content"][0]["text"], "5");

    // A tool the server does not list fails without reaching it.
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = workflow(dir.path(), "calc:nope", &json!({}), &mcp_tools(dir.path()));
    let (_, output) = run_completed(dir.path(), &wf, "mcp-2");
    assert_eq!(output["code"], "TOOL_UNKNOWN", "{output}");
    assert!(
        output["message"]
            .as_str()
            .is_some_and(|m| m.contains("add, shout, wipe")),
        "{output}"
    );
}

#[test]
fn a_denied_mcp_tool_never_reaches_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = workflow(
        dir.path(),
        "calc:wipe",
        &json!({"path": "/"}),
        &mcp_tools(dir.path()),
    );
    let (log, output) = run_completed(dir.path(), &wf, "mcp-3");
    assert!(!dir.path().join("wiped").exists(), "wipe ran");
    assert_eq!(one(&log, "tool.denied")["rule_id"], "no-wipe");
    assert_eq!(output["status"], "denied");
}

/// A run of one in-process worker asking for `tool` (sections `probe`, read-only, and
/// `charge`, not), over the store in `data`.
fn in_process_run(
    data: &Path,
    tool: &'static str,
) -> (
    docket_runtime::Runtime<docket_store::EmbeddedStore>,
    docket_runtime::Workflow,
) {
    use docket_decider::{AgentRequest, AgentResponse, Confidence, WorkflowSpec};
    let text = "name = \"t\"\npolicy = \"b.toml\"\nentry = \"worker\"\n[agents.worker]\nin_process = true\n\
                [tools.probe]\nin_process = true\nread_only = true\n[tools.charge]\nin_process = true\n";
    let spec = WorkflowSpec::parse(text, Path::new("t.toml")).expect("workflow");
    let bundle = "bundle = { id = \"t\" }\nagents = [{ id = \"external\" }, { id = \"worker\", allowed_tools = [\"probe\", \"charge\"] }]\n\
                  [interactions]\nallowed = [{ from = \"external\", to = \"worker\" }, { from = \"worker\", to = \"external\" }]\n\
                  [multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\n";
    let store =
        docket_store::EmbeddedStore::open_blocking(data, Default::default()).expect("store");
    let runtime = docket_runtime::Runtime::new(store);
    let agent = docket_runtime::InProcessExecutor::new(move |r: &AgentRequest| {
        let result = r
            .decision_inputs
            .iter()
            .find(|i| i.output_type == "tool_result");
        let action = match result {
            Some(i) => docket_decider::Action::Finish {
                output: serde_json::Value::clone(&i.payload),
            },
            None => docket_decider::Action::CallTool {
                name: tool.into(),
                arguments: json!({"n": 1}),
            },
        };
        AgentResponse::success(r.request_id.clone(), Confidence::High, vec![action])
    });
    runtime.register_agent("worker", std::sync::Arc::new(agent));
    let workflow = docket_runtime::Workflow {
        spec,
        bundle_source: bundle.into(),
        bundle_source_name: "b.toml".into(),
    };
    (runtime, workflow)
}

/// A tool executor counting its calls, answering `{"ran": true}`.
fn counting(
    calls: &std::sync::Arc<std::sync::atomic::AtomicU32>,
) -> std::sync::Arc<docket_runtime::InProcessToolExecutor> {
    let calls = calls.clone();
    std::sync::Arc::new(docket_runtime::InProcessToolExecutor::new(move |_| {
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(json!({"ran": true}))
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_interrupted_by_a_crash_is_rerun_only_when_read_only() {
    use std::sync::atomic::{AtomicU32, Ordering};
    for (tool, read_only) in [("charge", false), ("probe", true)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (runtime, workflow) = in_process_run(dir.path(), tool);
        // The first executor dies mid-call: the process crashing after the call was
        // scheduled (durably) and before its outcome was recorded.
        runtime.register_tool(
            tool,
            std::sync::Arc::new(docket_runtime::InProcessToolExecutor::new(|_| {
                panic!("the process dies while the tool runs")
            })),
        );
        let rt = runtime.clone();
        let wf = workflow.clone();
        let crashed =
            tokio::spawn(async move { rt.start(&wf, json!({}), Some("run-c".into())).await }).await;
        assert!(crashed.is_err(), "the drive died with the tool");
        let state = runtime.state(&"run-c".into()).await.expect("state");
        assert!(state.tools_in_flight(), "scheduled, no outcome recorded");

        let calls = std::sync::Arc::new(AtomicU32::new(0));
        runtime.register_tool(tool, counting(&calls));
        let outcome = runtime.resume(&"run-c".into()).await.expect("resumes");
        let output = outcome.state.output().cloned().expect("completed");
        if read_only {
            assert_eq!(
                calls.load(Ordering::SeqCst),
                1,
                "a read-only tool is run again"
            );
            assert_eq!(output["status"], "returned", "{output}");
        } else {
            assert_eq!(calls.load(Ordering::SeqCst), 0, "never run blindly again");
            assert_eq!(
                (output["status"].as_str(), output["code"].as_str()),
                (Some("failed"), Some("TOOL_INTERRUPTED")),
                "{output}"
            );
        }
    }
}

/// The HTTP tool executor against a local service: a result, the tool's own error, a
/// 4xx refusal and an answer for another call, each told apart by its code.
#[tokio::test]
async fn the_http_executor_posts_the_call_and_checks_the_answer() {
    use bytes::Bytes;
    use docket_runtime::{HttpToolExecutor, ToolExecutor};
    use http_body_util::{BodyExt, Full};
    use hyper::service::service_fn;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let service = service_fn(|r: hyper::Request<hyper::body::Incoming>| async move {
                    let path = r.uri().path().to_owned();
                    let body = r
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let call: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let id = call["tool_call_id"].clone();
                    let (status, answer) = match path.as_str() {
                        "/ok" => (
                            200,
                            json!({"tool_call_id": id, "result": {"got": call["arguments"]}}),
                        ),
                        "/error" => (
                            200,
                            json!({"tool_call_id": id, "error": {"code": "NOT_FOUND", "message": "no such page"}}),
                        ),
                        "/wrong-id" => (200, json!({"tool_call_id": "other", "result": 1})),
                        _ => (422, json!("bad arguments")),
                    };
                    let mut response =
                        hyper::Response::new(Full::new(Bytes::from(answer.to_string())));
                    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
                    Ok::<_, std::convert::Infallible>(response)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    let request = docket_decider::ToolRequest {
        run_id: "run-h".into(),
        episode_id: "ep-1".into(),
        tool_call_id: "run-h/tool-1".into(),
        agent: "worker".into(),
        tool: "lookup".into(),
        arguments: json!({"q": 1}),
        timeout_ms: 5_000,
    };
    let call = |path: &str| {
        let executor = HttpToolExecutor::new(&format!("http://{addr}{path}")).expect("url");
        let request = request.clone();
        async move { executor.call(&request).await }
    };
    assert_eq!(call("/ok").await, Ok(json!({"got": {"q": 1}})));
    let code = |r: Result<Value, docket_runtime::ToolCallError>| r.expect_err("fails").code();
    assert_eq!(code(call("/error").await), "NOT_FOUND");
    assert_eq!(code(call("/refuses").await), "TOOL_HTTP_422");
    assert_eq!(code(call("/wrong-id").await), "TOOL_MALFORMED_ANSWER");
    assert!(
        HttpToolExecutor::new("ftp://example.invalid/tool").is_err(),
        "only http:// and https://"
    );
    server.abort();
}

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

/// A workflow whose orchestrator hands the worker a job with the task `task` (JSON), the
/// worker then asking for `Bash` with `arguments`.
fn tasked_workflow(root: &Path, task: &str, arguments: &str) -> String {
    let bundle = r#"
bundle = { id = "tasks" }
agents = [{ id = "external" }, { id = "orch" }, { id = "worker", allowed_tools = ["Bash(*)"] }]
[interactions]
allowed = [{ from = "external", to = "orch" }, { from = "orch", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;
    std::fs::write(root.join("bundle.toml"), bundle).expect("bundle");
    std::fs::write(root.join("input.json"), "{}").expect("input");
    let orch = [
        "handoff",
        "--to",
        "worker",
        "--output-type",
        "job",
        "--task",
        task,
    ]
    .map(str::to_owned);
    let worker = ["--tool", "Bash", "--arguments", arguments].map(str::to_owned);
    let path = root.join("workflow.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"tasks\"\npolicy = \"bundle.toml\"\nentry = \"orch\"\ninput = \"input.json\"\n\
             [agents.orch]\ncommand = {TEST_AGENT:?}\nargs = {}\n\
             [agents.worker]\ncommand = {AGENT:?}\nargs = {}\n{}",
            toml_list(&orch),
            toml_list(&worker),
            marker_tool(root),
        ),
    )
    .expect("workflow");
    path.to_str().expect("utf-8").to_owned()
}

#[test]
fn a_task_given_by_the_orchestrators_handoff_restricts_the_specialists_tools() {
    let dir = tempfile::tempdir().expect("tempdir");
    let task = r#"{"id": "fix-7", "denied_tools": ["Bash(git push*)"]}"#;
    let wf = tasked_workflow(dir.path(), task, r#""git push origin""#);
    let (log, output) = run_completed(dir.path(), &wf, "task-1");
    assert!(
        !dir.path().join("marker.jsonl").exists(),
        "the tool never ran"
    );
    // The worker's call recorded its task.
    let worker_call = log
        .iter()
        .find(|(k, p)| k == "agent.call_scheduled" && p["request"]["target_agent"] == "worker")
        .map(|(_, p)| p)
        .expect("the worker was called");
    assert_eq!(
        worker_call["request"]["task"],
        json!({"id": "fix-7", "denied_tools": ["Bash(git push*)"]})
    );
    assert_eq!(one(&log, "tool.denied")["rule_id"], "task");
    assert_eq!(output["status"], "denied", "{output}");
    assert!(
        output["reason"]
            .as_str()
            .is_some_and(|r| r.contains("Bash(git push*)")),
        "{output}"
    );

    // What the task does not forbid runs.
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = tasked_workflow(dir.path(), task, r#""git status""#);
    let (_, output) = run_completed(dir.path(), &wf, "task-2");
    assert_eq!(output["status"], "returned", "{output}");
}

#[test]
fn a_malformed_task_is_a_protocol_error_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let task = r#"{"id": "fix-7", "denied_tools": ["Bash(git push"]}"#;
    let wf = tasked_workflow(dir.path(), task, r#""ls""#);
    let data = dir.path().join("data");
    let out = docket(&data, &["run", &wf, "--run-id", "task-bad"]);
    assert_ne!(out.status.code(), Some(0));
    let log = events(&data, "task-bad");
    let failure = log
        .iter()
        .find(|(k, _)| k == "agent.call_failed")
        .map(|(_, p)| p)
        .expect("the orchestrator's answer failed");
    assert_eq!(failure["code"], "AGENT_INVALID_RESPONSE");
    let message = failure["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("actions[0].task.denied_tools[0]")
            && message.contains("is not a tool pattern"),
        "{message}"
    );
    assert!(!dir.path().join("marker.jsonl").exists());
}

/// A tool executor run as a command that prints a banner line once is restarted after
/// that malformed answer, as agents and effect executors are: the first call reads the
/// banner and fails as malformed, the process is killed, and the next call is served in
/// step by a new process (kept, it would answer every later call with the answer to the
/// call before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_executor_that_printed_a_stray_line_is_restarted() {
    use docket_runtime::{CommandConfig, CommandToolExecutor, ToolCallError, ToolExecutor};
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = CommandConfig::new(MARKER_TOOL);
    config.args = vec![
        "--marker".into(),
        dir.path().join("calls.jsonl").into(),
        "--banner-once".into(),
        dir.path().join("banner").into(),
    ];
    let executor = CommandToolExecutor::new(config);
    let request = |n: u32| docket_decider::ToolRequest {
        run_id: "r".into(),
        episode_id: docket_decider::EpisodeId::root(),
        tool_call_id: format!("r/tool-{n}").into(),
        agent: "a".into(),
        tool: "Read".into(),
        arguments: json!(format!("file-{n}")),
        timeout_ms: 10_000,
    };
    let first = executor.call(&request(1)).await;
    assert!(
        matches!(first, Err(ToolCallError::Malformed { .. })),
        "{first:?}"
    );
    let second = executor
        .call(&request(2))
        .await
        .expect("a new process answers");
    assert_eq!(second, json!({"echo": "file-2", "tool": "Read"}));
    assert_eq!(executor.start_count(), 2);
}
