//! The llm-triage example (examples/llm-triage) run through the binary on the model
//! answers it records (`scripted/answers.json`: no network, no key): the resolution its
//! README's "What a run must output" states, the refused tool call that never reached the
//! executor, and a run whose model has no endpoint waiting for a person, then completing
//! on the recorded answers. Its agents are Python programs on the docket-agent package
//! (this checkout's `sdk/python/src` when it is not installed): without Python 3.10 or
//! later the tests say so and check nothing.

use std::path::Path;
use std::process::{Command, Output};

use docket_tests::{
    docket_bin, events_of_kind, exit_code, replays_and_exports, run_events, stdout_text,
    workspace_root,
};
use serde_json::{Value, json};

fn python_available() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import sys; sys.exit(sys.version_info < (3, 10))"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "note: python3 (3.10 or later) is not on PATH; skipping the llm-triage example"
            );
        }
    }
    found
}

/// `docket ARGS --data DIR/data` from `dir`, the agents' model set to `model` and every
/// other model setting of this environment left out (a key here must not make a test call
/// a model); the tools' executor logs each call it receives to `DIR/tools.log`.
fn triage(dir: &Path, model: &str, args: &[&str]) -> Output {
    let mut command = Command::new(docket_bin());
    command
        .args(args)
        .arg("--data")
        .arg(dir.join("data"))
        .current_dir(dir);
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.starts_with("OPENAI_") || text.starts_with("LLM_TRIAGE_") {
            command.env_remove(&name);
        }
    }
    command
        .env("LLM_TRIAGE_MODEL", model)
        .env("LLM_TRIAGE_TOOL_LOG", dir.join("tools.log"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("docket runs")
}

fn workflow() -> String {
    workspace_root()
        .join("examples/llm-triage/workflow.toml")
        .display()
        .to_string()
}

/// The resolution of ticket T-1042, as the README's "What a run must output" states it.
fn the_resolution() -> Value {
    json!({
        "ticket_id": "T-1042",
        "outcome": "partly_resolved",
        "reply": "We are sorry your kettle arrived damaged. We have refunded the full 49.90 EUR for order A-1001 (refund RF-A-1001). A colleague will contact you about closing your account.",
        "for_a_person": "The customer asked for account C-311 to be deleted; the policy leaves deletion to staff (rule no-account-deletion).",
        "tools": [
            { "tool": "lookup_order", "status": "returned" },
            { "tool": "issue_refund", "status": "returned" },
            { "tool": "delete_account", "status": "denied", "rule": "no-account-deletion" },
        ],
    })
}

fn output(events: &[Value]) -> &Value {
    let completed = events_of_kind(events, "run.completed");
    assert_eq!(completed.len(), 1, "the run completed");
    &completed[0]["payload"]["output"]
}

/// The tools the executor received, in order.
fn tools_run(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("tools.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let call: Value = serde_json::from_str(l).expect("each logged call is JSON");
            call["tool"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

#[test]
fn a_ticket_is_resolved_with_the_refused_tool_left_to_a_person() {
    if !python_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = triage(
        dir.path(),
        "scripted",
        &["run", &workflow(), "--run-id", "triage-1"],
    );
    assert_eq!(
        exit_code(&out),
        0,
        "{}{}",
        stdout_text(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout_text(&out).starts_with("run triage-1 (llm-triage): completed"),
        "{}",
        stdout_text(&out)
    );
    let data = dir.path().join("data");
    let events = run_events(&data, "triage-1");
    assert_eq!(*output(&events), the_resolution());
    // The refusal was decided before any executor ran: only the two allowed calls reached it.
    let denied = events_of_kind(&events, "tool.denied");
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0]["payload"]["name"], "delete_account");
    assert_eq!(denied[0]["payload"]["rule_id"], "no-account-deletion");
    assert_eq!(tools_run(dir.path()), ["lookup_order", "issue_refund"]);
    // Every answer came from the recorded answers.
    let models: Vec<&Value> = events_of_kind(&events, "agent.responded")
        .into_iter()
        .map(|e| &e["payload"]["response"]["metadata"]["model"])
        .collect();
    assert_eq!(models, [&json!("scripted"); 5]);
    replays_and_exports(&data, "triage-1");
}

#[test]
fn a_model_without_an_endpoint_waits_for_a_person_then_resolves_on_the_recorded_answers() {
    if !python_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = triage(
        dir.path(),
        "gpt-4o-mini",
        &["run", &workflow(), "--run-id", "triage-2"],
    );
    assert_eq!(exit_code(&out), 3, "{}", stdout_text(&out));
    let data = dir.path().join("data");
    let events = run_events(&data, "triage-2");
    let asked = events_of_kind(&events, "human.escalated");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["payload"]["ticket"], "ticket-1");
    let reason = asked[0]["payload"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with(
            "intake failed 1 time(s), last with MODEL_NOT_CONFIGURED: the model 'gpt-4o-mini' has no endpoint: set OPENAI_API_KEY"
        ),
        "{reason}"
    );
    assert!(tools_run(dir.path()).is_empty());

    let out = triage(
        dir.path(),
        "scripted",
        &[
            "approve",
            "triage-2",
            "ticket-1",
            "--by",
            "ana",
            "--reason",
            "run it on the recorded answers",
        ],
    );
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
    let events = run_events(&data, "triage-2");
    assert_eq!(*output(&events), the_resolution());
    assert_eq!(tools_run(dir.path()), ["lookup_order", "issue_refund"]);
    replays_and_exports(&data, "triage-2");
}
