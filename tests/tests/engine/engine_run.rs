//! Governed runs through the `docket` binary, with command agents: the geo pipeline end to
//! end, the geo bundle's forbidden interactions, scoping as it reaches an agent's stdin, agents
//! that hang, crash, print garbage or too much, and human approvals across processes.

use std::path::{Path, PathBuf};

use docket_tests::events_of_kind as of_kind;
use docket_tests::{geo_agents_built, geo_workflow, geo_workflow_with};
use serde_json::Value;

use docket_tests::{
    docket_on as docket, exit_code as code, run_events as events, stdout_text as stdout,
    summary_run_id as run_id,
};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

fn test_agent(args: &[&str]) -> String {
    format!("command = {TEST_AGENT:?}\nargs = {args:?}")
}

#[test]
fn the_geo_pipeline_runs_governed_and_prints_a_readable_summary() {
    geo_agents_built();
    let data = tempfile::tempdir().expect("tempdir");
    let out = docket(
        data.path(),
        &["run", geo_workflow().to_str().expect("utf-8")],
    );
    let text = stdout(&out);
    assert_eq!(
        code(&out),
        0,
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("(geo): completed"), "{text}");
    for line in [
        "allowed  external → governance  analysis_request",
        "allowed  reasoning → strategy  gaps_and_opportunities",
        "allowed  intelligence → strategy  geo_scores (read-only context)  [guardrail-2]",
        "allowed  governance → external  validated_recommendations",
        "recommendations (validated):",
        "(cites gap-1)",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    let run = run_id(&out);
    let log = events(data.path(), &run);
    assert_eq!(log[0]["kind"], "run.requested");
    assert_eq!(of_kind(&log, "agent.responded").len(), 6);
    assert_eq!(of_kind(&log, "run.completed").len(), 1);
    // Every event carries the bundle hash recorded in run.requested.
    let hash = log[0]["payload"]["bundle_hash"]
        .as_str()
        .expect("hash")
        .to_owned();
    assert!(log.iter().all(|e| e["policy"] == hash.as_str()));

    let status = docket(data.path(), &["status", &run, "--json"]);
    let status: Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    assert_eq!(status["status"], "completed");
    let runs = stdout(&docket(data.path(), &["runs"]));
    assert!(runs.contains(&run) && runs.contains("completed"), "{runs}");
    // Resuming a completed run calls nobody and records nothing.
    let again = docket(data.path(), &["resume", &run]);
    assert_eq!(code(&again), 0);
    assert_eq!(events(data.path(), &run).len(), log.len());
}

/// The geo bundle's forbidden interactions, row by row, each in a real run: the agents before `from`
/// are the real geo agents, `from` is a test agent attempting the forbidden step.
#[test]
fn each_forbidden_interaction_of_seed_000_is_denied_with_its_reason() {
    geo_agents_built();
    let rows: [(&str, &str, &str, &str); 8] = [
        (
            "observation",
            "reasoning",
            "ai_answer_snapshots",
            "Must go through Intelligence",
        ),
        (
            "observation",
            "strategy",
            "ai_answer_snapshots",
            "Must go through Intelligence + Reasoning",
        ),
        (
            "intelligence",
            "strategy",
            "geo_scores",
            "Must go through Reasoning",
        ),
        (
            "intelligence",
            "governance",
            "geo_scores",
            "Must go through Reasoning + Strategy",
        ),
        (
            "reasoning",
            "governance",
            "gaps_and_opportunities",
            "Must go through Strategy",
        ),
        (
            "reasoning",
            "observation",
            "gaps_and_opportunities",
            "Circular dependency",
        ),
        (
            "strategy",
            "intelligence",
            "recommendations",
            "Reverse flow not allowed",
        ),
        (
            "strategy",
            "observation",
            "recommendations",
            "Reverse flow not allowed",
        ),
    ];
    for (from, to, output_type, reason) in rows {
        let dir = tempfile::tempdir().expect("tempdir");
        let workflow = geo_workflow_with(
            dir.path(),
            &[(
                from,
                test_agent(&["handoff", "--to", to, "--output-type", output_type]),
            )],
            "",
        );
        let out = docket(
            &dir.path().join("data"),
            &["run", workflow.to_str().expect("utf-8")],
        );
        let text = stdout(&out);
        assert_eq!(code(&out), 4, "{from} → {to}: {text}");
        assert!(
            text.contains(&format!("DENIED   {from} → {to}")) && text.contains(reason),
            "{from} → {to} should be denied with {reason:?}:\n{text}"
        );
        let log = events(&dir.path().join("data"), &run_id(&out));
        let denied = of_kind(&log, "handoff.denied");
        assert_eq!(denied.len(), 1);
        assert_eq!(denied[0]["payload"]["error"]["message"], reason);
        assert_eq!(denied[0]["payload"]["error"]["agent"], from);
        // Nothing was scheduled after the denial: one call per agent up to `from`.
        let order = [
            "governance",
            "observation",
            "intelligence",
            "reasoning",
            "strategy",
        ];
        let position = order.iter().position(|a| *a == from).expect("a geo agent") + 1;
        assert_eq!(
            of_kind(&log, "agent.call_scheduled").len(),
            position,
            "{from} → {to}"
        );
    }

    // Guardrail 3: Strategy may not obtain question generation from Observation.
    let dir = tempfile::tempdir().expect("tempdir");
    let workflow = geo_workflow_with(
        dir.path(),
        &[(
            "strategy",
            test_agent(&[
                "request_capability",
                "--to",
                "observation",
                "--capability",
                "question_generation",
                "--payload",
                r#"{"topics": ["new question"]}"#,
            ]),
        )],
        "",
    );
    let out = docket(
        &dir.path().join("data"),
        &["run", workflow.to_str().expect("utf-8")],
    );
    let text = stdout(&out);
    assert_eq!(code(&out), 4, "{text}");
    assert!(text.contains("Guardrail 3"), "{text}");

    // No skipping: Governance straight to Reasoning.
    let dir = tempfile::tempdir().expect("tempdir");
    let workflow = geo_workflow_with(
        dir.path(),
        &[(
            "governance",
            test_agent(&[
                "handoff",
                "--to",
                "reasoning",
                "--output-type",
                "validated_scope",
            ]),
        )],
        "",
    );
    let out = docket(
        &dir.path().join("data"),
        &["run", workflow.to_str().expect("utf-8")],
    );
    let text = stdout(&out);
    assert_eq!(code(&out), 4, "{text}");
    assert!(text.contains("DENIED   governance → reasoning"), "{text}");
}

fn recorded_requests(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("the agent recorded its requests")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a request line"))
        .collect()
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// What reaches an agent's stdin is exactly the scoped context: Strategy's scoped mode
/// (decision input) and the Guardrail 2 context edge; Observation's full mode. (Globex
/// leads, so Reasoning finds a gap and answers SUCCESS: the geo bundle refuses the PARTIAL
/// "no gaps" answer at Reasoning → Strategy, docs/governance.md#partial-outputs.)
#[test]
fn scoped_and_full_handoffs_deliver_exactly_the_configured_fields_on_stdin() {
    geo_agents_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let strategy_log = dir.path().join("strategy.jsonl");
    let observation_log = dir.path().join("observation.jsonl");
    let observation = format!(
        "command = {TEST_AGENT:?}\nargs = [\"handoff\", \"--to\", \"intelligence\", \"--output-type\", \"ai_answer_snapshots\", \"--record\", {:?}, \"--payload\", {:?}]",
        observation_log,
        r#"{"focus_brand": "Acme", "brands": ["Acme", "Globex"], "snapshots": [{"id": "s1", "topic": "crm for startups", "region": "US", "question": "q", "engine": "e", "captured_on": "2025-01-01", "answer": "Globex", "mentions": {"Acme": 0, "Globex": 1}}]}"#
    );
    let workflow = geo_workflow_with(
        dir.path(),
        &[
            ("observation", observation),
            (
                "strategy",
                format!(
                    "command = {TEST_AGENT:?}\nargs = [\"handoff\", \"--to\", \"governance\", \"--output-type\", \"recommendations\", \"--record\", {:?}, \"--payload\", {:?}]",
                    strategy_log, r#"{"recommendations": []}"#
                ),
            ),
        ],
        "",
    );
    let out = docket(
        &dir.path().join("data"),
        &["run", workflow.to_str().expect("utf-8")],
    );
    let text = stdout(&out);
    assert!(text.contains("allowed  strategy → governance"), "{text}");

    let strategy = recorded_requests(&strategy_log);
    assert_eq!(strategy.len(), 1);
    let decision = &strategy[0]["decision_inputs"][0];
    assert_eq!(decision["source_agent"], "reasoning");
    let mut got = keys(&decision["payload"]);
    got.sort();
    assert_eq!(got, ["focus_brand", "gaps", "opportunities", "patterns"]);
    let context = &strategy[0]["context_inputs"];
    assert_eq!(context.as_array().map(Vec::len), Some(1));
    assert_eq!(context[0]["source_agent"], "intelligence");
    let mut got = keys(&context[0]["payload"]);
    got.sort();
    assert_eq!(
        got,
        ["answers", "brands", "focus_brand"],
        "by_topic and by_engine never cross"
    );

    let observation = recorded_requests(&observation_log);
    let mut got = keys(&observation[0]["decision_inputs"][0]["payload"]);
    got.sort();
    assert_eq!(
        got,
        ["constraints", "validatedScope"],
        "full mode passes everything"
    );
    assert_eq!(observation[0]["context_inputs"], serde_json::json!([]));
}

/// Each way an agent can fail goes through the geo bundle's ladder (retry, retry, hard
/// stop: Guardrail 1) with the executor's error code recorded.
#[test]
fn hanging_crashing_garbage_and_oversized_agents_are_retried_then_blocked() {
    for (mode, code_expected) in [
        ("hang", "AGENT_TIMEOUT"),
        ("crash", "AGENT_CRASHED"),
        ("garbage", "AGENT_MALFORMED_RESPONSE"),
        ("oversized", "AGENT_OVERSIZED_RESPONSE"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let body = format!("{}\ntimeout_ms = 400", test_agent(&[mode]));
        let workflow = geo_workflow_with(dir.path(), &[("governance", body)], "");
        let out = docket(
            &dir.path().join("data"),
            &["run", workflow.to_str().expect("utf-8")],
        );
        let text = stdout(&out);
        assert_eq!(code(&out), 4, "{mode}: {text}");
        assert!(
            text.contains("hard stop after 3 failures"),
            "{mode}: {text}"
        );
        let log = events(&dir.path().join("data"), &run_id(&out));
        let failed = of_kind(&log, "agent.call_failed");
        assert_eq!(failed.len(), 3, "{mode}");
        assert!(
            failed.iter().all(|e| e["payload"]["code"] == code_expected),
            "{mode}: {failed:?}"
        );
        let attempts: Vec<&Value> = of_kind(&log, "agent.call_scheduled")
            .iter()
            .map(|e| &e["payload"]["request"]["attempt"])
            .collect();
        assert_eq!(attempts, [1, 2, 3], "{mode}");
        let blocked = of_kind(&log, "run.blocked");
        assert_eq!(blocked[0]["payload"]["rule_id"], "guardrail-1");
        assert_eq!(
            blocked[0]["payload"]["error"]["errorType"],
            "retry_limit_exceeded"
        );
    }
}

fn small_bundle(dir: &Path) -> PathBuf {
    let path = dir.join("policy.toml");
    std::fs::write(
        &path,
        r#"
bundle = { id = "small" }
agents = [{ id = "external" }, { id = "worker" }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#,
    )
    .expect("write bundle");
    path
}

fn small_workflow(dir: &Path, args: &[&str]) -> PathBuf {
    let bundle = small_bundle(dir);
    let input = dir.join("input.json");
    std::fs::write(&input, r#"{"task": "x"}"#).expect("write input");
    let path = dir.join("workflow.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"small\"\npolicy = {bundle:?}\nentry = \"worker\"\ninput = {input:?}\n[agents.worker]\n{}\n",
            test_agent(args)
        ),
    )
    .expect("write workflow");
    path
}

/// The default ladder: retry, escalate to a human (the process exits waiting), and after
/// the human's approval in another process, the hard stop.
#[test]
fn retry_escalate_block_with_an_approval_across_processes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let workflow = small_workflow(dir.path(), &["crash"]);
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    let text = stdout(&out);
    assert_eq!(code(&out), 3, "{text}");
    assert!(text.contains("waiting for a human on ticket-1"), "{text}");
    let run = run_id(&out);

    let out = docket(&data, &["status", &run]);
    assert!(stdout(&out).contains("waiting for a human"));

    let out = docket(
        &data,
        &[
            "approve",
            &run,
            "ticket-1",
            "--by",
            "ana",
            "--reason",
            "one more try",
        ],
    );
    let text = stdout(&out);
    assert_eq!(code(&out), 4, "{text}");
    let log = events(&data, &run);
    let decided = of_kind(&log, "human.decided");
    assert_eq!(decided[0]["payload"]["by"], "ana");
    assert_eq!(decided[0]["payload"]["reason"], "one more try");
    assert_eq!(decided[0]["payload"]["approved"], true);
    assert_eq!(of_kind(&log, "agent.call_failed").len(), 3);

    // A decided ticket cannot be decided again.
    let out = docket(
        &data,
        &["deny", &run, "ticket-1", "--by", "bo", "--reason", "late"],
    );
    assert_eq!(code(&out), 1);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("ticket-1 was already decided (approved by ana: one more try)"),
        "{out:?}"
    );
}

#[test]
fn an_escalation_approved_in_a_new_process_completes_the_run_and_a_denial_blocks() {
    for (verb, exit) in [("approve", 0), ("deny", 4)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let workflow = small_workflow(dir.path(), &["escalate_then_finish"]);
        let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
        assert_eq!(code(&out), 3, "{}", stdout(&out));
        let run = run_id(&out);
        let out = docket(
            &data,
            &[verb, &run, "ticket-1", "--by", "ana", "--reason", "checked"],
        );
        assert_eq!(code(&out), exit, "{verb}: {}", stdout(&out));
        let log = events(&data, &run);
        // The agent was called once: approval carries out its held actions.
        assert_eq!(of_kind(&log, "agent.call_scheduled").len(), 1);
        if verb == "approve" {
            let done = of_kind(&log, "run.completed");
            assert_eq!(
                done[0]["payload"]["output"],
                serde_json::json!({"task": "x"})
            );
        }
    }
}

/// An agent asks a question with options; `docket status` shows them and the command
/// that answers; `docket answer` (by option text, with words) calls the agent again with
/// the answer, which crosses the gate from `human`, and the run completes.
#[test]
fn a_question_is_answered_and_the_agent_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let workflow = small_workflow(dir.path(), &["ask"]);
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 3, "{}", stdout(&out));
    let run = run_id(&out);
    let status = stdout(&docket(&data, &["status", &run]));
    for line in [
        "worker asks a human: which approach should I follow?",
        "1. fast",
        "2. thorough",
        "docket answer",
    ] {
        assert!(status.contains(line), "{line}: {status}");
    }

    // Nobody, an option not offered, a denial with words: refused, nothing recorded.
    let before = events(&data, &run).len();
    let out = docket(
        &data,
        &["answer", &run, "ticket-1", "--by", " ", "--text", "x"],
    );
    assert_eq!(code(&out), 2, "{out:?}");
    let out = docket(
        &data,
        &[
            "answer", &run, "ticket-1", "--by", "ana", "--choice", "slow",
        ],
    );
    assert_eq!(code(&out), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 `fast`, 2 `thorough`"), "{err}");
    let out = docket(&data, &["answer", &run, "ticket-1", "--by", "ana"]);
    assert_eq!(code(&out), 2, "an answer needs --choice or --text");
    assert_eq!(events(&data, &run).len(), before);

    let out = docket(
        &data,
        &[
            "answer",
            &run,
            "ticket-1",
            "--by",
            "ana",
            "--choice",
            "thorough",
            "--text",
            "the auditors read this one",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let log = events(&data, &run);
    assert_eq!(of_kind(&log, "agent.call_scheduled").len(), 2);
    let decided = of_kind(&log, "human.decided");
    assert_eq!(decided[0]["payload"]["choice"], 2);
    assert_eq!(
        decided[0]["payload"]["answer"],
        "the auditors read this one"
    );
    let crossed: Vec<_> = of_kind(&log, "handoff.allowed")
        .into_iter()
        .filter(|e| {
            e["payload"]["from"] == "human" && e["payload"]["output_type"] == "human_answer"
        })
        .collect();
    assert_eq!(crossed.len(), 1, "the answer crossed the gate once");
    let output = &of_kind(&log, "run.completed")[0]["payload"]["output"]["human_answer"];
    assert_eq!(output["choice"], "thorough");
    assert_eq!(output["answer"], "the auditors read this one");
    assert_eq!(output["by"], "ana");
}

#[test]
fn usage_errors_exit_2_and_unknown_runs_exit_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = docket(dir.path(), &["approve", "run-x", "ticket-1"]);
    assert_eq!(code(&out), 2);
    let out = docket(dir.path(), &["resume", "run-nope"]);
    assert_eq!(code(&out), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run run-nope"));
}

/// A misspelt key anywhere in the workflow file, an agent's section included, is an error
/// naming the file, line, column, key and section; nothing is started or recorded.
#[test]
fn a_misspelt_workflow_key_is_an_error_naming_it_and_nothing_runs() {
    for (typo, line, section) in [
        ("timeout_mss = 500", 8, "[agents.worker]"),
        ("clasifiers = [\"worker\"]", 8, "[agents.worker]"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let workflow = small_workflow(dir.path(), &["finish"]);
        let mut text = std::fs::read_to_string(&workflow).expect("read");
        text.push_str(typo);
        text.push('\n');
        std::fs::write(&workflow, text).expect("write");
        let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 1, "{typo}: {stderr}");
        let key = typo.split(' ').next().expect("key");
        let expected = format!(
            "invalid workflow file {}:{line}:1: unknown key `{key}` in {section}",
            workflow.display()
        );
        assert!(stderr.contains(&expected), "{typo}: {stderr}");
        let runs = docket(&data, &["runs"]);
        assert!(
            !stdout(&runs).contains("run-"),
            "no run was started: {}",
            stdout(&runs)
        );
    }
}

/// docs/governance.md#stop-conditions: however a run ends, its root episode's end is in the log just before the
/// run's end: a plain handoff to `external` finishes it ok and stops it
/// `success_achieved`; a forbidden handoff stops it `policy_blocks`.
#[test]
fn every_run_records_the_end_of_its_root_episode() {
    for (args, exit, ends, last) in [
        (
            &["handoff", "--to", "external", "--output-type", "result"][..],
            0,
            &[
                ("episode.finished", "ok"),
                ("episode.stopped", "success_achieved"),
            ][..],
            "run.completed",
        ),
        (
            &["handoff", "--to", "worker", "--output-type", "result"][..],
            4,
            &[("episode.stopped", "policy_blocks")][..],
            "run.blocked",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let workflow = small_workflow(dir.path(), args);
        let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
        assert_eq!(code(&out), exit, "{args:?}: {}", stdout(&out));
        let log = events(&data, &run_id(&out));
        let tail: Vec<(String, String)> = log[log.len() - ends.len() - 1..]
            .iter()
            .map(|e| {
                let p = &e["payload"];
                assert!(e["kind"] == last || p["episode_id"] == "ep-1", "{e}");
                let what = p["result"]["status"]
                    .as_str()
                    .or(p["condition"].as_str())
                    .unwrap_or_default();
                (
                    e["kind"].as_str().unwrap_or_default().to_owned(),
                    what.to_owned(),
                )
            })
            .collect();
        let mut expected: Vec<(String, String)> = ends
            .iter()
            .map(|(k, w)| ((*k).to_owned(), (*w).to_owned()))
            .collect();
        expected.push((last.to_owned(), String::new()));
        assert_eq!(tail, expected, "{args:?}");
        assert_eq!(
            of_kind(&log, "episode.finished").len() + of_kind(&log, "episode.stopped").len(),
            ends.len(),
            "{args:?}: the root's end is recorded once"
        );
    }
}

/// docs/governance.md#escalation-and-tickets: a risk classifier's verdict decides whether the output proceeds.
#[test]
fn risk_classifier_verdicts_proceed_wait_or_block() {
    for (verdict, exit) in [("SAFE", 0), ("REVIEW_REQUIRED", 3), ("DANGEROUS", 4)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let workflow = small_workflow(dir.path(), &["finish"]);
        let mut text = std::fs::read_to_string(&workflow).expect("read");
        text.push_str("classifiers = [\"risk\"]\n[agents.risk]\n");
        text.push_str(&test_agent(&[
            "finish",
            "--payload",
            &format!(r#"{{"verdict": "{verdict}", "reason": "checked"}}"#),
        ]));
        text.push('\n');
        std::fs::write(&workflow, text).expect("write");
        let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
        assert_eq!(code(&out), exit, "{verdict}: {}", stdout(&out));
        let log = events(&data, &run_id(&out));
        let classified = of_kind(&log, "risk.classified");
        assert_eq!(classified.len(), 1, "{verdict}");
        assert_eq!(classified[0]["payload"]["verdict"], verdict);
        if verdict == "REVIEW_REQUIRED" {
            let out = docket(
                &data,
                &[
                    "approve",
                    &run_id(&out),
                    "ticket-1",
                    "--by",
                    "ana",
                    "--reason",
                    "ok",
                ],
            );
            assert_eq!(code(&out), 0, "{}", stdout(&out));
        }
    }
}

/// A fan-out of hub to left and right whose outputs for sink differ (left's answer given
/// with `left_flags` more), sink finishing with what it got: the workflow's path.
fn conflicting_fan_out(dir: &std::path::Path, left_flags: &[&str]) -> std::path::PathBuf {
    let bundle = dir.join("fan.toml");
    std::fs::write(
        &bundle,
        r#"
bundle = { id = "fan" }
agents = [{ id = "external" }, { id = "hub" }, { id = "left" }, { id = "right" }, { id = "sink" }]
[interactions]
allowed = [
  { from = "external", to = "hub" }, { from = "hub", to = "left" }, { from = "hub", to = "right" },
  { from = "left", to = "sink" }, { from = "right", to = "sink" }, { from = "sink", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#,
    )
    .expect("write bundle");
    let input = dir.join("input.json");
    std::fs::write(&input, "{}").expect("write input");
    let workflow = dir.join("workflow.toml");
    let branch = |v: &str, flags: &[&str]| {
        let payload = format!(r#"{{"v": "{v}"}}"#);
        let mut args = vec![
            "handoff",
            "--to",
            "sink",
            "--output-type",
            "verdict",
            "--payload",
            &payload,
        ];
        args.extend_from_slice(flags);
        test_agent(&args)
    };
    std::fs::write(
        &workflow,
        format!(
            "name = \"fan\"\npolicy = {bundle:?}\nentry = \"hub\"\ninput = {input:?}\n\
             [agents.hub]\n{}\n[agents.left]\n{}\n[agents.right]\n{}\n[agents.sink]\n{}\n",
            test_agent(&["fanout", "--to", "left,right", "--output-type", "job"]),
            branch("left", left_flags),
            branch("right", &[]),
            test_agent(&["finish"]),
        ),
    )
    .expect("write workflow");
    workflow
}

/// The note of the conflict sink was told of, from its call's decision input, and the one
/// the run's completion reports.
fn conflict_notes(log: &[serde_json::Value]) -> (serde_json::Value, serde_json::Value) {
    let told = of_kind(log, "agent.call_scheduled")
        .into_iter()
        .find(|e| e["payload"]["request"]["target_agent"] == "sink")
        .map(|e| e["payload"]["request"]["decision_inputs"][0]["conflict"].clone())
        .expect("sink was called");
    let done = of_kind(log, "run.completed");
    (told, done[0]["payload"]["conflicts"][0].clone())
}

/// Conflict resolution (docs/governance.md#authority-and-precedence): a parallel fan-out whose branches disagree (equal
/// confidence, so the bundle's prefer-higher-confidence rule cannot decide) goes to a
/// human; the chosen output proceeds, the other is archived, both stay in the log; sink
/// is told of the conflict (both outputs, who chose) and so is the user.
#[test]
fn a_conflict_between_parallel_branches_is_decided_by_a_human() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let workflow = conflicting_fan_out(dir.path(), &[]);
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    let text = stdout(&out);
    assert_eq!(code(&out), 3, "{text}");
    assert!(
        text.contains("conflicting verdict outputs for sink"),
        "{text}"
    );
    let run = run_id(&out);
    let out = docket(
        &data,
        &[
            "approve",
            &run,
            "ticket-1",
            "--choose",
            "2",
            "--by",
            "ana",
            "--reason",
            "right is newer",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let log = events(&data, &run);
    assert_eq!(of_kind(&log, "output.conflict_detected").len(), 1);
    let archived = of_kind(&log, "output.archived");
    assert_eq!(archived.len(), 1);
    assert_eq!(
        archived[0]["payload"]["delivery"]["payload"],
        serde_json::json!({"v": "left"})
    );
    let done = of_kind(&log, "run.completed");
    assert_eq!(
        done[0]["payload"]["output"],
        serde_json::json!({"v": "right"})
    );
    let (told, reported) = conflict_notes(&log);
    let output = |agent: &str, kept: bool, with_payload: bool| {
        let mut o =
            serde_json::json!({"source_agent": agent, "confidence_level": "HIGH", "kept": kept});
        if with_payload {
            o["payload"] = serde_json::json!({ "v": agent });
        }
        o
    };
    let note = |with_payload: bool| {
        serde_json::json!({
            "output_type": "verdict", "receiver": "sink", "settled_by": "person",
            "decided_by": "ana", "ticket": "ticket-1",
            "outputs": [output("left", false, with_payload), output("right", true, with_payload)],
        })
    };
    assert_eq!(told, note(true));
    assert_eq!(reported, note(false));
    let status = stdout(&docket(&data, &["status", &run]));
    assert!(
        status.contains(
            "conflict over sink's verdict: left's (HIGH) vs right's (HIGH, kept); settled by ana in ticket-1"
        ),
        "{status}"
    );
}

/// What an aggregator must be told (docs/agent-protocol.md#labelled-inputs): a PARTIAL
/// branch's warnings and every branch's confidence reach sink with their outputs, the
/// conflict settled by confidence is told to sink and to the user, and `docket status`
/// shows all of it.
#[test]
fn an_aggregator_is_told_of_warnings_confidence_and_a_conflict_settled_by_confidence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let workflow = conflicting_fan_out(dir.path(), &["--partial"]);
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let run = run_id(&out);
    let log = events(&data, &run);
    let to_sink: Vec<_> = of_kind(&log, "handoff.allowed")
        .into_iter()
        .filter(|e| e["payload"]["to"] == "sink" && e["payload"]["input"] == "decision")
        .map(|e| {
            (
                e["payload"]["from"].clone(),
                e["payload"]["confidence_level"].clone(),
                e["payload"]["warnings"].clone(),
            )
        })
        .collect();
    let warned = serde_json::json!(["some of the work could not be done"]);
    assert_eq!(
        to_sink,
        vec![
            ("left".into(), "MEDIUM".into(), warned.clone()),
            ("right".into(), "HIGH".into(), serde_json::Value::Null),
        ]
    );
    let (told, reported) = conflict_notes(&log);
    assert_eq!(told["settled_by"], "higher_confidence");
    assert_eq!(
        told["outputs"][0]["payload"],
        serde_json::json!({"v": "left"})
    );
    assert_eq!(
        (
            &told["outputs"][0]["confidence_level"],
            &told["outputs"][1]["kept"]
        ),
        (&serde_json::json!("MEDIUM"), &serde_json::json!(true))
    );
    assert_eq!(reported["outputs"][0].get("payload"), None, "{reported}");
    let status = stdout(&docket(&data, &["status", &run]));
    for line in [
        "allowed  left → sink  verdict  [allow:left->sink]  confidence MEDIUM",
        "left warned sink: some of the work could not be done",
        "conflict over sink's verdict: left's (MEDIUM) vs right's (HIGH, kept); settled by the higher confidence",
    ] {
        assert!(status.contains(line), "{line}\n{status}");
    }
}

/// Guardrail 2 at the exit checkpoint: Strategy's recommendations must cite gaps Reasoning
/// delivered in this run. One citing a gap that does not exist, one citing an Intelligence
/// metric: the handoff to Governance is denied by `guardrail-2-provenance` and the run is
/// blocked before Governance is called again.
#[test]
fn recommendations_citing_gaps_reasoning_never_produced_are_refused_at_the_exit_checkpoint() {
    geo_agents_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let payload = r#"{"recommendations": [
        {"id": "rec-1", "gap_id": "gap-1", "topic": "crm"},
        {"id": "rec-2", "gap_id": "gap-99", "topic": "crm"},
        {"id": "rec-3", "gap_id": "geo_score", "topic": "crm"}
    ]}"#;
    let workflow = geo_workflow_with(
        dir.path(),
        &[(
            "strategy",
            test_agent(&[
                "handoff",
                "--to",
                "governance",
                "--output-type",
                "recommendations",
                "--payload",
                payload,
            ]),
        )],
        "",
    );
    let data = dir.path().join("data");
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    let text = stdout(&out);
    assert_eq!(code(&out), 4, "blocked by policy: {text}");
    assert!(
        text.contains("DENIED   strategy → governance") && text.contains("guardrail-2-provenance"),
        "{text}"
    );
    let log = events(&data, &run_id(&out));
    let denied = of_kind(&log, "handoff.denied");
    assert_eq!(denied.len(), 1);
    let payload = &denied[0]["payload"];
    assert_eq!(payload["decision"]["rule_id"], "guardrail-2-provenance");
    assert_eq!(payload["decision"]["kind"], "provenance");
    let error = &payload["error"];
    assert_eq!(error["error"], true);
    assert_eq!(error["agent"], "strategy");
    assert_eq!(error["errorType"], "validation_error");
    assert_eq!(error["details"]["ruleId"], "guardrail-2-provenance");
    let message = error["message"].as_str().expect("message");
    for want in [
        "/recommendations/1 cites gap_id `gap-99`",
        "/recommendations/2 cites gap_id `geo_score`",
        "gap-1",
    ] {
        assert!(message.contains(want), "missing {want:?} in {message}");
    }
    assert!(!message.contains("/recommendations/0"), "{message}");
    // Governance ran once, at entry; the exit checkpoint never received the payload.
    let governance_calls = of_kind(&log, "agent.call_scheduled")
        .into_iter()
        .filter(|e| e["payload"]["request"]["target_agent"] == "governance")
        .count();
    assert_eq!(governance_calls, 1);
    assert_eq!(of_kind(&log, "run.blocked").len(), 1);
}

/// A two-agent chain `external → first → second → external` under `policy` (TOML after
/// the agents and edges); both agents record what reaches their stdin. `first` hands
/// `payload` to `second`, which finishes with what it got.
fn chain_workflow(
    dir: &Path,
    policy: &str,
    input: &str,
    payload: &str,
) -> (PathBuf, PathBuf, PathBuf) {
    let bundle = dir.join("policy.toml");
    std::fs::write(
        &bundle,
        format!(
            "bundle = {{ id = \"chain\" }}\nagents = [{{ id = \"external\" }}, {{ id = \"first\" }}, {{ id = \"second\" }}]\n[interactions]\nallowed = [{{ from = \"external\", to = \"first\" }}, {{ from = \"first\", to = \"second\" }}, {{ from = \"second\", to = \"external\" }}]\n{policy}\n"
        ),
    )
    .expect("write bundle");
    let input_path = dir.join("input.json");
    std::fs::write(&input_path, input).expect("write input");
    let first_log = dir.join("first.jsonl");
    let second_log = dir.join("second.jsonl");
    let first = [
        "handoff",
        "--to",
        "second",
        "--output-type",
        "work",
        "--payload",
        payload,
        "--record",
        first_log.to_str().expect("utf-8"),
    ];
    let second = ["finish", "--record", second_log.to_str().expect("utf-8")];
    let path = dir.join("workflow.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"chain\"\npolicy = {bundle:?}\nentry = \"first\"\ninput = {input_path:?}\n[agents.first]\n{}\n[agents.second]\n{}\n",
            test_agent(&first),
            test_agent(&second)
        ),
    )
    .expect("write workflow");
    (path, first_log, second_log)
}

/// Minimal mode (docs/governance.md#handoff-modes): only the essential trigger and metadata cross; no prior
/// output — neither the run's input nor the sender's analysis — reaches the receiver.
#[test]
fn a_minimal_handoff_delivers_only_trigger_and_metadata_on_stdin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = r#"
[multi_agent_handoffs]
default_handoff_mode = "full"
[[multi_agent_handoffs.agent_handoff_rules]]
id = "first-to-second-minimal"
from_agent_id = "first"
to_agent_id = "second"
handoff_mode = "minimal"
"#;
    let (workflow, first_log, second_log) = chain_workflow(
        dir.path(),
        policy,
        r#"{"task": "INPUT-MARKER", "history": ["INPUT-HISTORY"]}"#,
        r#"{"trigger": "analysis complete", "metadata": {"run": "m1"}, "analysis": {"score": "PRIOR-OUTPUT"}, "transcript": ["PRIOR-TRANSCRIPT"]}"#,
    );
    let data = dir.path().join("data");
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));

    // `first` got the run's input in full (the default), so the markers are real.
    let first = std::fs::read_to_string(&first_log).expect("first recorded");
    assert!(first.contains("INPUT-MARKER"), "{first}");

    let raw = std::fs::read_to_string(&second_log).expect("second recorded");
    for marker in [
        "INPUT-MARKER",
        "INPUT-HISTORY",
        "PRIOR-OUTPUT",
        "PRIOR-TRANSCRIPT",
    ] {
        assert!(
            !raw.contains(marker),
            "{marker} reached second's stdin: {raw}"
        );
    }
    let requests = recorded_requests(&second_log);
    assert_eq!(requests.len(), 1);
    let inputs = requests[0]["decision_inputs"].as_array().expect("inputs");
    assert_eq!(inputs.len(), 1, "one decision input: first's handoff");
    assert_eq!(inputs[0]["source_agent"], "first");
    assert_eq!(
        inputs[0]["payload"],
        serde_json::json!({"trigger": "analysis complete", "metadata": {"run": "m1"}})
    );
    assert_eq!(requests[0]["context_inputs"], serde_json::json!([]));

    let log = events(&data, &run_id(&out));
    let audit = of_kind(&log, "handoff.allowed")
        .into_iter()
        .find(|e| e["payload"]["to"] == "second")
        .map(|e| e["payload"]["audit"].clone())
        .expect("first → second recorded");
    assert_eq!(audit["handoff_mode"], "minimal");
    assert_eq!(audit["governance_rule_id"], "first-to-second-minimal");
}

/// A random payload over a few plain fields plus blocked ones (`secret`, blocked on every
/// handoff; `profile.ssn` and any plain fields the case picks, blocked on `first →
/// second`). Every blocked value is a distinct `BLOCKED-` marker.
fn payload_with_blocked_fields() -> impl proptest::strategy::Strategy<Value = (Value, Vec<String>)>
{
    use proptest::prelude::*;
    let plain = ["alpha", "beta", "gamma", "delta"];
    (
        proptest::sample::subsequence(plain.to_vec(), 0..=4),
        proptest::sample::subsequence(plain.to_vec(), 0..=2),
        any::<bool>(),
        "[a-z]{1,8}",
    )
        .prop_map(move |(present, extra_blocked, nested, text)| {
            let mut map = serde_json::Map::new();
            for key in &present {
                let value = if extra_blocked.contains(key) {
                    format!("BLOCKED-{key}")
                } else {
                    format!("{text}-{key}")
                };
                map.insert((*key).to_owned(), Value::String(value));
            }
            map.insert("secret".into(), Value::String("BLOCKED-secret".into()));
            if nested {
                map.insert(
                    "profile".into(),
                    serde_json::json!({"name": text, "ssn": "BLOCKED-ssn", "tags": ["BLOCKED-ssn-inner"]}),
                );
            }
            let blocked = extra_blocked.iter().map(|k| (*k).to_owned()).collect();
            (Value::Object(map), blocked)
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 10, ..Default::default() })]

    /// Whatever the payload and the mode (full, scoped with every field allowed, or
    /// minimal), no blocked field reaches an agent over stdio: the run's input to `first`
    /// and `first`'s handoff to `second` are recorded line by line as the agents read them.
    #[test]
    fn no_blocked_field_ever_reaches_an_agents_stdin(
        (payload, blocked) in payload_with_blocked_fields(),
        (input, _) in payload_with_blocked_fields(),
        mode in proptest::sample::select(vec!["full", "scoped", "minimal"]),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut rule_blocked = vec!["profile.ssn".to_owned(), "profile.tags".to_owned()];
        rule_blocked.extend(blocked.iter().cloned());
        // Scoped mode allows every field the rule does not itself block (a rule that both
        // allows and blocks a field is refused): the global block must still win.
        let allowed = if mode == "scoped" {
            let fields: Vec<&str> = ["alpha", "beta", "gamma", "delta", "secret", "profile"]
                .into_iter()
                .filter(|f| !blocked.iter().any(|b| b == f))
                .collect();
            format!("allowed_context_fields = {fields:?}\n")
        } else {
            String::new()
        };
        let policy = format!(
            "[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\nblocked_context_fields = [\"secret\"]\nminimal_context_fields = [\"alpha\", \"secret\", \"profile\"]\n[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"first-to-second\"\nfrom_agent_id = \"first\"\nto_agent_id = \"second\"\nhandoff_mode = {mode:?}\nblocked_context_fields = {rule_blocked:?}\n{allowed}"
        );
        // The run's input crosses `external → first`, where only `secret` is blocked: its
        // other fields may reach `first`, so they carry no blocked marker.
        let input = serde_json::to_string(&input)
            .expect("json")
            .replace("BLOCKED-", "seen-")
            .replace("seen-secret", "BLOCKED-secret");
        let (workflow, first_log, second_log) = chain_workflow(
            dir.path(),
            &policy,
            &input,
            &serde_json::to_string(&payload).expect("json"),
        );
        let data = dir.path().join("data");
        let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
        proptest::prop_assert_eq!(code(&out), 0, "{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
        let first = std::fs::read_to_string(&first_log).expect("first recorded");
        let second = std::fs::read_to_string(&second_log).expect("second recorded");
        proptest::prop_assert_eq!(first.lines().count(), 1);
        proptest::prop_assert_eq!(second.lines().count(), 1);
        for (agent, line) in first.lines().map(|l| ("first", l)).chain(second.lines().map(|l| ("second", l))) {
            proptest::prop_assert!(!line.contains("BLOCKED-"), "a blocked field crossed ({mode}): {line}");
            let request: Value = serde_json::from_str(line).expect("a request line");
            for input in request["decision_inputs"].as_array().expect("inputs") {
                proptest::prop_assert!(input["payload"].get("secret").is_none());
                if agent == "second" {
                    proptest::prop_assert!(input["payload"].pointer("/profile/ssn").is_none());
                }
            }
        }
        // What is not blocked still crosses in full mode (the check is not vacuous).
        if mode == "full"
            && let Some(Value::String(beta)) = payload.get("beta")
                && !beta.starts_with("BLOCKED-") {
                    proptest::prop_assert!(second.contains(beta.as_str()), "{second}");
                }
    }
}

/// Every request carries the handoff context (docs/agent-protocol.md#the-handoff-context):
/// what `second` reads on its stdin names the session, the agents before it and the
/// original request, scoped as the bundle says (`secret` is blocked on every handoff), and
/// the original request's crossing is recorded.
#[test]
fn the_handoff_context_reaches_the_agent_on_stdin_scoped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = "[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\nblocked_context_fields = [\"secret\"]\n";
    let (workflow, _, second_log) = chain_workflow(
        dir.path(),
        policy,
        r#"{"task": "summarise", "secret": "SECRET-MARKER"}"#,
        r#"{"summary": "s"}"#,
    );
    let data = dir.path().join("data");
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let run = run_id(&out);
    let raw = std::fs::read_to_string(&second_log).expect("second recorded");
    assert!(!raw.contains("SECRET-MARKER"), "{raw}");
    let requests = recorded_requests(&second_log);
    let handoff = &requests[0]["context"]["handoff"];
    assert_eq!(handoff["session_id"], run.as_str(), "{handoff}");
    assert_eq!(handoff["workflow"], "chain");
    assert_eq!(handoff["prior_agents"], serde_json::json!(["first"]));
    assert_eq!(
        handoff["original_request"],
        serde_json::json!({"task": "summarise"})
    );
    let log = events(&data, &run);
    let crossed: Vec<_> = of_kind(&log, "handoff.allowed")
        .into_iter()
        .filter(|e| e["payload"]["output_type"] == "original_request")
        .collect();
    assert_eq!(crossed.len(), 1, "told once: {crossed:?}");
    assert_eq!(crossed[0]["payload"]["to"], "second");
    assert_eq!(
        crossed[0]["payload"]["audit"]["context_after_scoping"]["fields_excluded"],
        serde_json::json!(["secret"])
    );
}

/// The bundle's context parts (docs/governance.md#context-parts) decide what of the run
/// reaches a handoff's receiver: here `first → second` hides who worked before and the
/// original request; `second` reads neither on its stdin, and the log records what the
/// parts hid, naming the rule.
#[test]
fn context_parts_hide_prior_agents_and_the_original_request_from_the_receiver() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = "[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\n\
                  [[multi_agent_handoffs.agent_handoff_rules]]\nid = \"first-to-second\"\n\
                  from_agent_id = \"first\"\nto_agent_id = \"second\"\n\
                  context_parts = { agent_identity = \"hide\", original_input = \"none\" }\n";
    let (workflow, first_log, second_log) = chain_workflow(
        dir.path(),
        policy,
        r#"{"task": "ORIGINAL-MARKER"}"#,
        r#"{"summary": "s"}"#,
    );
    let data = dir.path().join("data");
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let run = run_id(&out);
    // `first` (reached from external, no rule) is told as before.
    let first = recorded_requests(&first_log);
    assert_eq!(
        first[0]["context"]["handoff"]["original_request"],
        serde_json::json!({"task": "ORIGINAL-MARKER"})
    );
    let raw = std::fs::read_to_string(&second_log).expect("second recorded");
    assert!(!raw.contains("ORIGINAL-MARKER"), "{raw}");
    let second = recorded_requests(&second_log);
    let handoff = &second[0]["context"]["handoff"];
    assert!(handoff.get("prior_agents").is_none(), "{handoff}");
    assert!(handoff.get("original_request").is_none(), "{handoff}");
    let log = events(&data, &run);
    let subject = second[0]["request_id"].as_str().expect("request id");
    let record = of_kind(&log, "policy.decided")
        .into_iter()
        .find(|e| e["payload"]["subject"] == subject)
        .expect("the parts are recorded before the call");
    let decision = &record["payload"]["decision"];
    assert_eq!(decision["rule_id"], "first-to-second");
    let reason = decision["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("original_input = none") && reason.contains("agent_identity = hide"),
        "{reason}"
    );
    let out = docket(&data, &["replay", &run]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

/// Priority (docs/agent-protocol.md#priority): three branches of a fan-out ask one agent
/// (`processes = 1`: one call at a time) for a capability at once, LOW, NORMAL and HIGH. The
/// first call takes the process, held until the test lets it answer; the two that waited
/// are then let in by priority, not in the order they came.
#[test]
fn calls_waiting_for_an_agent_are_let_in_by_priority() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let gate = dir.path().join("gate");
    let record = dir.path().join("worker.jsonl");
    std::fs::write(
        dir.path().join("policy.toml"),
        r#"bundle = { id = "prio" }
agents = [{ id = "external" }, { id = "hub" }, { id = "low" }, { id = "normal" }, { id = "high" }, { id = "worker", capabilities = [{ code = "WORK" }] }]
[interactions]
allowed = [
  { from = "external", to = "hub" },
  { from = "hub", to = "low" }, { from = "hub", to = "normal" }, { from = "hub", to = "high" },
  { from = "low", to = "worker" }, { from = "normal", to = "worker" }, { from = "high", to = "worker" },
  { from = "worker", to = "low" }, { from = "worker", to = "normal" }, { from = "worker", to = "high" },
  { from = "low", to = "external" }, { from = "normal", to = "external" }, { from = "high", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#,
    )
    .expect("write bundle");
    std::fs::write(dir.path().join("input.json"), "{}").expect("write input");
    let asker = |priority: &str| {
        test_agent(&[
            "ask_or_fall_back",
            "--to",
            "worker",
            "--capability",
            "WORK",
            "--priority",
            priority,
            "--payload",
            &format!(r#"{{"from": "{}"}}"#, priority.to_lowercase()),
        ])
    };
    let workflow = dir.path().join("workflow.toml");
    std::fs::write(
        &workflow,
        format!(
            "name = \"prio\"\npolicy = \"policy.toml\"\nentry = \"hub\"\ninput = \"input.json\"\n\
             [agents.hub]\n{}\n[agents.low]\n{}\n[agents.normal]\n{}\n[agents.high]\n{}\n\
             [agents.worker]\nprocesses = 1\n{}\n",
            test_agent(&["fanout", "--to", "low,normal,high", "--output-type", "job"]),
            asker("LOW"),
            asker("NORMAL"),
            asker("HIGH"),
            test_agent(&[
                "echo",
                "--gate",
                gate.to_str().expect("utf-8"),
                "--record",
                record.to_str().expect("utf-8"),
            ]),
        ),
    )
    .expect("write workflow");
    let run = std::process::Command::new(docket_tests::docket_bin())
        .args(["run", workflow.to_str().expect("utf-8"), "--data"])
        .arg(&data)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("docket run starts");
    // The first call holds the worker; the other two were asked with it and wait.
    let waiting = dir.path().join("gate.waiting");
    let start = std::time::Instant::now();
    while !waiting.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the worker was never called"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(&gate, b"").expect("open the gate");
    let out = run.wait_with_output().expect("docket run ends");
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let received: Vec<String> = std::fs::read_to_string(&record)
        .expect("the worker's requests")
        .lines()
        .map(|line| {
            let request: Value = serde_json::from_str(line).expect("a request line");
            let from = request["decision_inputs"][0]["payload"]["from"]
                .as_str()
                .unwrap_or_default();
            format!(
                "{from}:{}",
                request["priority"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(received.len(), 3, "{received:?}");
    // Each call carries the priority its asker gave.
    for r in &received {
        let (from, priority) = r.split_once(':').expect("from:priority");
        assert_eq!(from.to_uppercase(), priority, "{received:?}");
    }
    // Whichever came first, the two that waited went by priority.
    let rank = |r: &String| match r.split_once(':').map(|(_, p)| p) {
        Some("HIGH") => 0,
        Some("NORMAL") => 1,
        _ => 2,
    };
    assert!(
        rank(&received[1]) < rank(&received[2]),
        "the waiting calls were let in by priority: {received:?}"
    );
}
