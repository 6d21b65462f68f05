//! Partial results through the `docket` binary, with command agents
//! (docs/governance.md#partial-results): a fan-out whose branch keeps crashing goes on with
//! the other branch when the bundle says `fan_out_partial = true`, the gap recorded and
//! told to the receiver; without the setting the same run waits for a human. And
//! (docs/governance.md#partial-outputs) the geo bundle refusing a PARTIAL answer.

use std::path::Path;

use docket_tests::events_of_kind as of_kind;
use docket_tests::{
    docket_on as docket, exit_code as code, run_events as events, stdout_text as stdout,
    summary_run_id as run_id,
};
use docket_tests::{geo_agents_built, geo_workflow_with};
use serde_json::{Value, json};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

fn test_agent(args: &[&str]) -> String {
    format!("command = {TEST_AGENT:?}\nargs = {args:?}")
}

/// hub fans out to left and right; left hands `{"v": "left"}` to sink, right crashes on
/// every call; sink records what it gets and finishes with its first input. `extra` goes
/// in the bundle's `[multi_agent_handoffs]`.
fn fan_out_with_a_crashing_branch(dir: &Path, extra: &str) -> std::path::PathBuf {
    let bundle = dir.join("fan.toml");
    std::fs::write(
        &bundle,
        format!(
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
{extra}
"#
        ),
    )
    .expect("write bundle");
    let input = dir.join("input.json");
    std::fs::write(&input, "{}").expect("write input");
    let record = dir.join("sink.jsonl");
    let record = record.to_str().expect("utf-8");
    let workflow = dir.join("workflow.toml");
    std::fs::write(
        &workflow,
        format!(
            "name = \"fan\"\npolicy = {bundle:?}\nentry = \"hub\"\ninput = {input:?}\n\
             [agents.hub]\n{}\n[agents.left]\n{}\n[agents.right]\n{}\n[agents.sink]\n{}\n",
            test_agent(&["fanout", "--to", "left,right", "--output-type", "job"]),
            test_agent(&[
                "handoff",
                "--to",
                "sink",
                "--output-type",
                "verdict",
                "--payload",
                r#"{"v": "left"}"#
            ]),
            test_agent(&["crash"]),
            test_agent(&["finish", "--record", record]),
        ),
    )
    .expect("write workflow");
    workflow
}

#[test]
fn a_fan_out_goes_on_without_a_failed_branch_and_tells_the_receiver() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let workflow = fan_out_with_a_crashing_branch(dir.path(), "fan_out_partial = true");
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    let text = stdout(&out);
    assert_eq!(
        code(&out),
        0,
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run_id(&out);
    let log = events(&data, &run);
    let gaps = of_kind(&log, "fanout.branch_failed");
    assert_eq!(gaps.len(), 1, "{log:#?}");
    let gap = &gaps[0]["payload"]["gap"];
    assert_eq!(gap["agent"], "right");
    assert_eq!(gap["error_code"], "AGENT_CRASHED");
    assert_eq!(gap["attempts"], 2);
    let joined = of_kind(&log, "fanout.joined");
    assert_eq!(joined.len(), 1);
    assert_eq!(joined[0]["payload"]["deliveries"][0]["from"], "left");
    let done = of_kind(&log, "run.completed");
    assert_eq!(done[0]["payload"]["output"], json!({"v": "left"}));

    // What reached sink's stdin: left's verdict, and the gap from right.
    let seen = std::fs::read_to_string(dir.path().join("sink.jsonl")).expect("sink recorded");
    let request: Value =
        serde_json::from_str(seen.lines().next().expect("one request")).expect("a request");
    let inputs = request["decision_inputs"].as_array().expect("inputs");
    assert_eq!(inputs.len(), 2, "{request:#}");
    assert_eq!(inputs[1]["source_agent"], "right");
    assert_eq!(inputs[1]["output_type"], "branch_failed");
    assert_eq!(inputs[1]["payload"]["error_code"], "AGENT_CRASHED");
    // The gap crossed the gate like any content.
    assert!(
        of_kind(&log, "handoff.allowed")
            .iter()
            .any(|e| e["payload"]["output_type"] == "branch_failed"
                && e["payload"]["to"] == "sink"),
        "{log:#?}"
    );
    let shown = stdout(&docket(&data, &["events", &run]));
    assert!(
        shown.contains("right's branch failed (AGENT_CRASHED"),
        "{shown}"
    );
}

#[test]
fn without_fan_out_partial_a_failed_branch_waits_for_a_human() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let workflow = fan_out_with_a_crashing_branch(dir.path(), "");
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 3, "{}", stdout(&out));
    let log = events(&data, &run_id(&out));
    assert!(of_kind(&log, "fanout.branch_failed").is_empty());
    assert_eq!(of_kind(&log, "human.escalated").len(), 1);
    assert!(!dir.path().join("sink.jsonl").exists(), "sink never called");
}

/// Seed 000: "No partial or incomplete outputs". Intelligence answers PARTIAL (a valid
/// `geo_scores`) on an edge the geo bundle refuses partial outputs on: each answer fails
/// with `PARTIAL_OUTPUT_REFUSED`, is retried, and the ladder's hard stop blocks the run
/// before Reasoning is called.
#[test]
fn the_geo_bundle_refuses_a_partial_answer_up_the_failure_ladder() {
    geo_agents_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let intelligence = test_agent(&[
        "handoff",
        "--to",
        "reasoning",
        "--output-type",
        "geo_scores",
        "--payload",
        r#"{"focus_brand": "Acme", "brands": {}}"#,
        "--partial",
    ]);
    let workflow = geo_workflow_with(dir.path(), &[("intelligence", intelligence)], "");
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    assert_ne!(code(&out), 0, "{}", stdout(&out));
    let run = run_id(&out);
    let log = events(&data, &run);
    let blocked = of_kind(&log, "run.blocked");
    assert_eq!(blocked.len(), 1, "{}", stdout(&out));
    let error = &blocked[0]["payload"]["error"];
    assert_eq!(error["details"]["code"], "PARTIAL_OUTPUT_REFUSED");
    assert_eq!(error["agent"], "intelligence");
    assert_eq!(error["errorType"], "retry_limit_exceeded");
    let to_reasoning = of_kind(&log, "handoff.allowed")
        .into_iter()
        .filter(|e| e["payload"]["to"] == "reasoning")
        .count();
    assert_eq!(to_reasoning, 0, "nothing partial reached Reasoning");
    // Observation's own PARTIAL answer crossed: its edge accepts partial outputs.
    assert!(
        of_kind(&log, "handoff.allowed")
            .iter()
            .any(|e| e["payload"]["to"] == "intelligence"),
        "{log:#?}"
    );
    let refused: Vec<&Value> = of_kind(&log, "agent.call_scheduled")
        .into_iter()
        .filter(|e| {
            e["payload"]["request"]["context"]["previous_attempt"]["error_code"]
                == "PARTIAL_OUTPUT_REFUSED"
        })
        .collect();
    assert_eq!(refused.len(), 2, "two retries before the hard stop");
    let message = refused[0]["payload"]["request"]["context"]["previous_attempt"]["error_message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("interactions.partial_outputs"),
        "{message}"
    );
}
