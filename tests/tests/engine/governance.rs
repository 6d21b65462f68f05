//! Governance with no way around it, through the `docket` binary with command agents:
//! every path by which content reaches an agent is decided by the bundle and recorded
//! (docs/governance.md#capability-requests).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use docket_tests::{
    docket_on as docket, run_events as events, stdout_text as stdout, summary_run_id as run_id,
};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

/// A bundle where `asker` may ask `writer` for `DOC_GENERATE` and `secret` is blocked on
/// every handoff; `edges` adds interaction-matrix edges.
fn asker_writer(dir: &Path, edges: &str, writer_log: &Path) -> PathBuf {
    let bundle = format!(
        r#"bundle = {{ id = "asker-writer" }}
[[agents]]
id = "external"
[[agents]]
id = "asker"
[[agents]]
id = "writer"
[[agents.capabilities]]
code = "DOC_GENERATE"

[interactions]
allowed = [
  {{ from = "external", to = "asker" }},
  {{ from = "asker", to = "external" }},
  {{ from = "writer", to = "external" }},
  {edges}
]

[multi_agent_handoffs]
default_handoff_mode = "full"
blocked_context_fields = ["secret"]
"#
    );
    std::fs::write(dir.join("policy.toml"), bundle).expect("write bundle");
    let asker = [
        "request_capability",
        "--to",
        "writer",
        "--capability",
        "DOC_GENERATE",
        "--payload",
        r#"{"title": "t", "secret": "hunter2"}"#,
    ];
    let writer = ["crash", "--record", writer_log.to_str().expect("utf-8")];
    let workflow = format!(
        "name = \"asker-writer\"\npolicy = \"policy.toml\"\nentry = \"asker\"\n\
         [agents.asker]\ncommand = {TEST_AGENT:?}\nargs = {asker:?}\n\
         [agents.writer]\ncommand = {TEST_AGENT:?}\nargs = {writer:?}\n"
    );
    let path = dir.join("workflow.toml");
    std::fs::write(&path, workflow).expect("write workflow");
    std::fs::write(dir.join("input.json"), r#"{"task": "write"}"#).expect("write input");
    path
}

fn run(dir: &Path, workflow: &Path) -> Output {
    docket(
        &dir.join("data"),
        &[
            "run",
            workflow.to_str().expect("utf-8"),
            "--input",
            dir.join("input.json").to_str().expect("utf-8"),
        ],
    )
}

#[test]
fn a_capability_request_without_an_edge_is_denied_and_reaches_no_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer_log = dir.path().join("writer.jsonl");
    let workflow = asker_writer(dir.path(), "", &writer_log);
    let out = run(dir.path(), &workflow);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "blocked: {text}");
    assert!(text.contains("DENIED   asker → writer"), "{text}");
    assert!(
        !writer_log.exists(),
        "writer was called: {:?}",
        std::fs::read_to_string(&writer_log)
    );
    let log = events(&dir.path().join("data"), &run_id(&out));
    let denied: Vec<&Value> = log
        .iter()
        .filter(|e| e["kind"] == "handoff.denied")
        .collect();
    assert_eq!(denied.len(), 1, "{log:?}");
    assert_eq!(denied[0]["payload"]["to"], "writer");
    assert_eq!(denied[0]["payload"]["output_type"], "DOC_GENERATE");
}

#[test]
fn a_capability_request_over_an_edge_reaches_the_writer_scoped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer_log = dir.path().join("writer.jsonl");
    let workflow = asker_writer(
        dir.path(),
        r#"{ from = "asker", to = "writer" },"#,
        &writer_log,
    );
    let out = run(dir.path(), &workflow);
    let received = std::fs::read_to_string(&writer_log).expect("writer was called");
    assert!(!received.is_empty());
    for line in received.lines() {
        let request: Value = serde_json::from_str(line).expect("a request line");
        let inputs = &request["decision_inputs"][0];
        assert_eq!(inputs["source_agent"], "asker", "{request}");
        assert_eq!(inputs["payload"]["title"], "t", "{request}");
        assert!(
            !line.contains("hunter2"),
            "the blocked field reached writer: {line}"
        );
    }
    let log = events(&dir.path().join("data"), &run_id(&out));
    let allowed: Vec<&Value> = log
        .iter()
        .filter(|e| {
            e["kind"] == "handoff.allowed"
                && e["payload"]["to"] == "writer"
                && e["payload"]["output_type"] == "DOC_GENERATE"
        })
        .collect();
    // The writer crashes; its failure returns to the asker, which asks again (until the
    // writer's circuit opens): every request crossed scoped.
    assert!(!allowed.is_empty(), "{log:?}");
    for crossing in allowed {
        let audit = &crossing["payload"]["audit"];
        assert_eq!(
            audit["context_after_scoping"]["fields_excluded"],
            serde_json::json!(["secret"]),
            "{audit}"
        );
    }
}

#[test]
fn the_readme_bundle_runs_as_written_and_scopes_what_it_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let readme =
        std::fs::read_to_string(docket_tests::workspace_root().join("README.md")).expect("readme");
    let bundle = docket_tests::doc_example(&readme, "bundle").expect("the README's bundle");
    std::fs::write(dir.path().join("policy.toml"), bundle).expect("write bundle");
    let check = docket(
        &dir.path().join("data"),
        &[
            "policy",
            "check",
            dir.path().join("policy.toml").to_str().expect("utf-8"),
        ],
    );
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let received = dir.path().join("recommendation.jsonl");
    let payload = r#"{"fraud_score": 0.9, "fraud_indicators": ["new account"], "risk_level": "high", "internal_notes": "call the adjuster", "claimant": "Ana"}"#;
    let fraud = [
        "handoff",
        "--to",
        "recommendation_agent",
        "--output-type",
        "fraud_assessment",
        "--payload",
        payload,
    ];
    let recommendation = ["finish", "--record", received.to_str().expect("utf-8")];
    let workflow = format!(
        "name = \"claims\"\npolicy = \"policy.toml\"\nentry = \"fraud_agent\"\n\
         [agents.fraud_agent]\ncommand = {TEST_AGENT:?}\nargs = {fraud:?}\n\
         [agents.recommendation_agent]\ncommand = {TEST_AGENT:?}\nargs = {recommendation:?}\n"
    );
    std::fs::write(dir.path().join("workflow.toml"), workflow).expect("write workflow");
    std::fs::write(dir.path().join("input.json"), r#"{"claim": "c-1"}"#).expect("write input");
    let out = run(dir.path(), &dir.path().join("workflow.toml"));
    assert_eq!(out.status.code(), Some(0), "completed: {}", stdout(&out));
    let line = std::fs::read_to_string(&received).expect("recommendation_agent was called");
    let request: Value =
        serde_json::from_str(line.lines().next().expect("a request")).expect("JSON");
    let got = &request["decision_inputs"][0]["payload"];
    // The three allowed fields, summarised as the rule asks (within its 500 tokens).
    assert_eq!(
        got,
        &serde_json::json!({
            "summary": "fraud_indicators: [\"new account\"]\nfraud_score: 0.9\nrisk_level: high",
            "fields_omitted": 0,
        }),
        "{request}"
    );
}

#[test]
fn a_bundle_that_would_empty_every_payload_is_refused_for_new_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    // No scoping at all: the default mode is scoped and nothing is allowed to cross.
    std::fs::write(
        dir.path().join("policy.toml"),
        r#"bundle = { id = "bare" }
[[agents]]
id = "external"
[[agents]]
id = "worker"
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
"#,
    )
    .expect("write bundle");
    let check = docket(
        &dir.path().join("data"),
        &[
            "policy",
            "check",
            dir.path().join("policy.toml").to_str().expect("utf-8"),
        ],
    );
    let err = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(1), "{err}");
    assert!(
        err.contains("external → worker would receive an empty payload")
            && err.contains("default_handoff_mode")
            && err.contains("policy.toml"),
        "{err}"
    );
    let worker = ["finish"];
    let workflow = format!(
        "name = \"bare\"\npolicy = \"policy.toml\"\nentry = \"worker\"\n\
         [agents.worker]\ncommand = {TEST_AGENT:?}\nargs = {worker:?}\n"
    );
    std::fs::write(dir.path().join("workflow.toml"), workflow).expect("write workflow");
    std::fs::write(dir.path().join("input.json"), r#"{"task": "t"}"#).expect("write input");
    let out = run(dir.path(), &dir.path().join("workflow.toml"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("would receive an empty payload"), "{err}");
    let runs = docket(&dir.path().join("data"), &["runs"]);
    assert!(
        stdout(&runs).trim().is_empty(),
        "nothing was recorded: {}",
        stdout(&runs)
    );
}

#[test]
fn governance_at_entry_cannot_hand_off_straight_to_external() {
    // The geo bundle allows governance → external: it is the exit step, after
    // Recommendation Validation. At entry the only next agent is observation.
    docket_tests::geo_agents_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let governance = format!(
        "command = {TEST_AGENT:?}\nargs = {:?}",
        [
            "handoff",
            "--to",
            "external",
            "--output-type",
            "validated_recommendations",
            "--payload",
            r#"{"recommendations": []}"#,
        ]
    );
    let workflow = docket_tests::geo_workflow_with(dir.path(), &[("governance", governance)], "");
    let out = docket(
        &dir.path().join("data"),
        &["run", workflow.to_str().expect("utf-8")],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "blocked: {text}");
    assert!(text.contains("DENIED   governance → external"), "{text}");
    assert!(text.contains("flow_order.position"), "{text}");
    assert!(text.contains("only next agent is observation"), "{text}");
    let log = events(&dir.path().join("data"), &run_id(&out));
    assert!(
        !log.iter().any(|e| e["kind"] == "run.completed"),
        "the run must not complete: {log:?}"
    );
}

/// Seed 000: an invalid request stops the flow at Checkpoint 1, at once, with the
/// validation error returned. The geo governance agent answers `INPUT_VALIDATION_FAILED`,
/// which the bundle's `stop_on_errors = ["validation_error"]` names by its class; it is
/// called once, never retried.
#[test]
fn an_invalid_request_stops_at_checkpoint_1_without_a_retry() {
    docket_tests::geo_agents_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let workflow = docket_tests::geo_workflow_with(dir.path(), &[], "");
    let input = dir.path().join("one-brand.json");
    std::fs::write(
        &input,
        r#"{"topics": ["crm for startups"], "brands": ["Acme"], "regions": ["US"]}"#,
    )
    .expect("write input");
    let data = dir.path().join("data");
    let out = docket(
        &data,
        &[
            "run",
            workflow.to_str().expect("utf-8"),
            "--input",
            input.to_str().expect("utf-8"),
        ],
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "blocked: {text}");
    let log = events(&data, &run_id(&out));
    let calls: Vec<_> = log
        .iter()
        .filter(|e| e["kind"] == "agent.call_scheduled")
        .collect();
    assert_eq!(calls.len(), 1, "governance is called once: {calls:?}");
    let blocked = log
        .iter()
        .find(|e| e["kind"] == "run.blocked")
        .expect("run.blocked");
    assert_eq!(blocked["payload"]["rule_id"], "escalation.stop_on_errors");
    assert_eq!(blocked["payload"]["error"]["errorType"], "validation_error");
    assert_eq!(blocked["payload"]["error"]["agent"], "governance");
}
