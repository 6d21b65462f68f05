//! Workflow files checked before anything runs, paths resolved against the workflow's
//! directory and recorded so, the per-agent `cwd` and `max_response_bytes`, and an agent
//! process restarted after a protocol error (docs/workflow.md, docs/agent-protocol.md),
//! through the `docket` binary with command agents.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use docket_tests::events_of_kind as of_kind;
use serde_json::Value;

use docket_tests::{
    docket_bin, docket_on as docket, exit_code as code, run_events as events, stdout_text as stdout,
};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `docket ARGS --data DATA` run from directory `cwd`.
fn docket_in(cwd: &Path, data: &Path, args: &[&str]) -> Output {
    Command::new(docket_bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .current_dir(cwd)
        .output()
        .expect("docket runs")
}

/// A bundle in which `external` hands to `worker` and `worker` back to `external`, with
/// `extra` appended (more agents, edges, side effects).
const BUNDLE: &str = r#"
bundle = { id = "small" }
agents = [{ id = "external" }, { id = "worker" }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// Writes `policy.toml` (`bundle`), `input.json` and `workflow.toml` (a `worker` section
/// of `worker` and `extra` after it) into `dir`.
fn write_workflow(dir: &Path, bundle: &str, worker: &str, extra: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join("policy.toml"), bundle).expect("write bundle");
    std::fs::write(dir.join("input.json"), r#"{"task": "x"}"#).expect("write input");
    let path = dir.join("workflow.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"small\"\npolicy = \"policy.toml\"\nentry = \"worker\"\ninput = \"input.json\"\n\
             [agents.worker]\n{worker}\n{extra}"
        ),
    )
    .expect("write workflow");
    path
}

fn test_agent(args: &[&str]) -> String {
    format!("command = {TEST_AGENT:?}\nargs = {args:?}")
}

/// The runs in a data directory, as `docket runs` lists them (none when the directory
/// was never created).
fn runs(data: &Path) -> String {
    if !data.exists() {
        return String::new();
    }
    stdout(&docket(data, &["runs"]))
}

/// docs/workflow.md#checked-before-anything-runs: each kind of problem is refused by
/// `docket run` before anything is recorded, naming the file, the section and what to do,
/// in the workflow's words.
#[test]
fn a_workflow_that_cannot_run_is_refused_before_anything_is_recorded() {
    let reviewer_bundle = BUNDLE
        .replace(
            r#"{ id = "worker" }]"#,
            r#"{ id = "worker" }, { id = "reviewer" }]"#,
        )
        .replace(
            r#"{ from = "worker", to = "external" }]"#,
            r#"{ from = "worker", to = "external" }, { from = "worker", to = "reviewer" }, { from = "reviewer", to = "external" }]"#,
        );
    let effect_bundle = format!(
        "{BUNDLE}[[side_effects]]\nid = \"publish-api\"\nkind = \"publish\"\nlane = \"api\"\n"
    );
    let cases: Vec<(&str, String, String, String, Vec<&str>)> = vec![
        (
            "an agent the bundle routes to has no section",
            reviewer_bundle.clone(),
            test_agent(&["finish"]),
            String::new(),
            vec![
                "[agents.reviewer] is missing",
                "an allowed handoff from `worker`",
                "add the section with `command`, `http` or `in_process = true`",
            ],
        ),
        (
            "a section names an agent the bundle does not know",
            BUNDLE.to_owned(),
            test_agent(&["finish"]),
            format!("[agents.ghost]\n{}\n", test_agent(&["finish"])),
            vec![
                "[agents.ghost] names `ghost`, which is not an agent of the policy bundle `small`",
                "(its agents: external, worker)",
            ],
        ),
        (
            "a bare command found neither beside docket nor on PATH",
            BUNDLE.to_owned(),
            "command = \"no-such-docket-agent\"".to_owned(),
            String::new(),
            vec![
                "[agents.worker] `command` `no-such-docket-agent` is not found next to docket",
                "nor on PATH",
            ],
        ),
        (
            "a command path that does not exist, relative to the workflow file",
            BUNDLE.to_owned(),
            "command = \"agents/missing\"".to_owned(),
            String::new(),
            vec![
                "[agents.worker] `command` ",
                "agents/missing does not exist",
            ],
        ),
        (
            "a URL docket cannot call",
            BUNDLE.to_owned(),
            "http = \"ftp://example.invalid/agent\"".to_owned(),
            String::new(),
            vec![
                "[agents.worker] `http`: unsupported scheme in URL \"ftp://example.invalid/agent\": only http:// and https:// are supported",
            ],
        ),
        (
            "a working directory that does not exist",
            BUNDLE.to_owned(),
            format!("{}\ncwd = \"no-such-dir\"", test_agent(&["finish"])),
            String::new(),
            vec!["[agents.worker] `cwd` ", "no-such-dir does not exist"],
        ),
        (
            "an in-process agent, which only an embedding program can provide",
            BUNDLE.to_owned(),
            "in_process = true".to_owned(),
            String::new(),
            vec!["[agents.worker] is `in_process = true`, but no Rust agent is registered"],
        ),
        (
            "an effect section for a kind the bundle does not govern",
            effect_bundle.clone(),
            test_agent(&["finish"]),
            format!("[effects.pubilsh]\ncommand = {TEST_AGENT:?}\n"),
            vec![
                "[effects.pubilsh] names effect kind `pubilsh`, which no [[side_effects]] policy",
                "(its kinds: publish)",
            ],
        ),
        (
            "an effect executor command that does not exist",
            effect_bundle,
            test_agent(&["finish"]),
            "[effects.publish]\ncommand = \"./bin/publisher\"\n".to_owned(),
            vec![
                "[effects.publish] `command` ",
                "bin/publisher does not exist",
            ],
        ),
        (
            "several problems at once",
            reviewer_bundle,
            "command = \"no-such-docket-agent\"".to_owned(),
            String::new(),
            vec![
                "2 problems:\n  [agents.reviewer] is missing",
                "\n  [agents.worker] `command` `no-such-docket-agent` is not found",
            ],
        ),
    ];
    for (what, bundle, worker, extra, expected) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let workflow = write_workflow(&dir.path().join("wf"), &bundle, &worker, &extra);
        let data = dir.path().join("data");
        let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{what}: {err}");
        let file = format!("error: invalid workflow file {}: ", workflow.display());
        // Before it, only the line giving the new data directory's signing key.
        let at = err.find(&file).unwrap_or_else(|| panic!("{what}: {err}"));
        assert!(
            err[..at]
                .lines()
                .all(|l| l.starts_with("signing key made for the data directory")),
            "{what}: {err}"
        );
        for part in expected {
            assert!(err.contains(part), "{what}: missing {part:?} in {err}");
        }
        for raw in ["untagged", "ExecutorSpec", "serde", "did not match"] {
            assert!(!err.contains(raw), "{what}: {err}");
        }
        assert_eq!(runs(&data), "", "{what}: nothing recorded");
    }
}

/// A value of the wrong type in an agent's section is named with its line, column,
/// section and key, and what to write instead (not "does not say how to reach the agent",
/// which is all the deserializer can tell).
#[test]
fn a_value_of_the_wrong_type_in_an_agent_section_is_named_with_its_key() {
    let cases = [
        (
            format!("{}\nenv = {{ A = 1 }}", test_agent(&["finish"])),
            ":8:", // the `env` line, after name, policy, entry, input, the section, command, args
            "[agents.worker]: `env.A` is a number, but environment variable values must be strings: write A = \"1\"",
        ),
        (
            format!("command = {TEST_AGENT:?}\nargs = [\"finish\", 2]"),
            ":7:",
            "[agents.worker]: `args` must be a list of strings: its item 2 is a number",
        ),
        (
            "command = 5".to_owned(),
            ":6:",
            "[agents.worker]: `command` must be a string, not a number",
        ),
    ];
    for (worker, line, expected) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let workflow = write_workflow(&dir.path().join("wf"), BUNDLE, &worker, "");
        let data = dir.path().join("data");
        let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{worker}: {err}");
        let file = format!("error: invalid workflow file {}{line}", workflow.display());
        assert!(err.starts_with(&file), "{worker}: {err}");
        assert!(
            err.contains(expected),
            "{worker}: missing {expected:?} in {err}"
        );
        assert!(!err.contains("how to reach the agent"), "{worker}: {err}");
        assert_eq!(runs(&data), "", "{worker}: nothing recorded");
    }
}

/// A problem that names the bundle's agents lists the first 20 and counts the rest, so a
/// large bundle does not make every problem as long as its registry.
#[test]
fn a_problem_naming_a_large_bundles_agents_lists_twenty_and_counts_the_rest() {
    let agents: Vec<String> = (0..50).map(|i| format!("{{ id = \"w{i:02}\" }}")).collect();
    let bundle = BUNDLE.replace(
        r#"{ id = "worker" }]"#,
        &format!(r#"{{ id = "worker" }}, {}]"#, agents.join(", ")),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!("[agents.ghost]\n{}\n", test_agent(&["finish"]));
    let workflow = write_workflow(
        &dir.path().join("wf"),
        &bundle,
        &test_agent(&["finish"]),
        &extra,
    );
    let data = dir.path().join("data");
    let out = docket(&data, &["run", workflow.to_str().expect("utf-8")]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("(its agents: external, w00, w01,") && err.contains(", w18, and 32 more)"),
        "{err}"
    );
}

/// The same workflows, fixed, do run: the checks refuse what cannot run, not more.
#[test]
fn a_workflow_whose_every_routable_agent_is_reachable_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("wf/bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(TEST_AGENT, bin.join("agent")).expect("symlink");
    let workflow = write_workflow(
        &dir.path().join("wf"),
        BUNDLE,
        "command = \"bin/agent\"\nargs = [\"finish\"]\ncwd = \".\"",
        "",
    );
    let out = docket(
        &dir.path().join("data"),
        &["run", workflow.to_str().expect("utf-8")],
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
}

/// docs/workflow.md#paths: a run started from one directory, its docket killed while an
/// agent holds a request, is resumed from another: the command (a path relative to the
/// workflow file) and the working directory (`cwd`, relative to the workflow file) were
/// recorded resolved, and the agent's relative argument resolves against its `cwd`.
#[test]
fn a_run_started_in_one_directory_resumes_from_another() {
    let root = tempfile::tempdir().expect("tempdir");
    let wf = root.path().join("wf");
    std::fs::create_dir_all(wf.join("bin")).expect("mkdir");
    std::fs::create_dir_all(wf.join("work")).expect("mkdir");
    std::os::unix::fs::symlink(TEST_AGENT, wf.join("bin/agent")).expect("symlink");
    // The first request kills docket; `killed` is relative to the agent's cwd.
    write_workflow(
        &wf,
        BUNDLE,
        "command = \"bin/agent\"\nargs = [\"environment\", \"--kill-parent-once\", \"killed\"]\ncwd = \"work\"",
        "",
    );
    let start_dir = root.path().join("start");
    let resume_dir = root.path().join("elsewhere");
    std::fs::create_dir_all(&start_dir).expect("mkdir");
    std::fs::create_dir_all(&resume_dir).expect("mkdir");
    let data = root.path().join("data");

    let out = docket_in(
        &start_dir,
        &data,
        &["run", "../wf/workflow.toml", "--run-id", "r1"],
    );
    assert_eq!(code(&out), -1, "docket was killed: {}", stderr(&out));
    assert!(
        wf.join("work/killed").exists(),
        "the agent ran in its cwd, where its relative argument points"
    );
    assert!(!start_dir.join("killed").exists());

    let log = events(&data, "r1");
    let recorded = &log[0]["payload"]["workflow"]["agents"]["worker"];
    let wf_abs = wf.canonicalize().expect("canonical");
    assert_eq!(
        recorded["command"],
        wf_abs.join("bin/agent").to_str().expect("utf-8")
    );
    assert_eq!(
        recorded["cwd"],
        wf_abs.join("work").to_str().expect("utf-8")
    );
    assert_eq!(of_kind(&log, "agent.call_scheduled").len(), 1);
    assert!(of_kind(&log, "agent.responded").is_empty());

    let out = docket_in(&resume_dir, &data, &["resume", "r1"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let status = docket(&data, &["status", "r1", "--json"]);
    let status: Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    assert_eq!(status["status"], "completed");
    let cwd = wf.join("work").canonicalize().expect("canonical");
    assert_eq!(
        status["output"]["cwd"],
        cwd.to_str().expect("utf-8"),
        "{status}"
    );
    // The same request was sent again, not a new one.
    let log = events(&data, "r1");
    assert_eq!(of_kind(&log, "agent.call_scheduled").len(), 1);
}

/// Resuming or approving a recorded run checks again what it needs of the machine: with
/// its agent's program gone, it is refused naming the run and the section, and nothing
/// is recorded; with the program back, the approval goes through.
#[test]
fn a_recorded_run_whose_command_is_gone_is_refused_until_it_is_back() {
    let root = tempfile::tempdir().expect("tempdir");
    let wf = root.path().join("wf");
    std::fs::create_dir_all(wf.join("bin")).expect("mkdir");
    let agent = wf.join("bin/agent");
    std::os::unix::fs::symlink(TEST_AGENT, &agent).expect("symlink");
    let workflow = write_workflow(
        &wf,
        BUNDLE,
        "command = \"bin/agent\"\nargs = [\"escalate_then_finish\"]",
        "",
    );
    let data = root.path().join("data");
    let out = docket(
        &data,
        &["run", workflow.to_str().expect("utf-8"), "--run-id", "r1"],
    );
    assert_eq!(code(&out), 3, "waits for a human: {}", stdout(&out));
    let before = events(&data, "r1").len();

    std::fs::remove_file(&agent).expect("remove");
    for args in [
        &["resume", "r1"][..],
        &["approve", "r1", "ticket-1", "--by", "ana", "--reason", "ok"][..],
    ] {
        let out = docket(&data, args);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{args:?}: {err}");
        assert!(
            err.contains("run r1 (workflow small) cannot run, nothing was recorded: [agents.worker] `command` "),
            "{args:?}: {err}"
        );
        assert!(err.contains("bin/agent does not exist"), "{err}");
        assert_eq!(events(&data, "r1").len(), before, "{args:?}");
    }

    std::os::unix::fs::symlink(TEST_AGENT, &agent).expect("symlink");
    let out = docket(
        &data,
        &["approve", "r1", "ticket-1", "--by", "ana", "--reason", "ok"],
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
}

/// docs/agent-protocol.md#json-lines-over-stdinstdout: a banner line on the agent's stdout
/// costs one attempt, not the run: after the unparseable line the process is killed and
/// the retry is served by a new one. (Kept, the process would answer each retry with the
/// answer to the attempt before, a request_id mismatch, until the run is stopped.)
#[test]
fn a_banner_on_stdout_costs_one_attempt_and_the_retry_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("banner-printed");
    let workflow = write_workflow(
        &dir.path().join("wf"),
        BUNDLE,
        &test_agent(&["finish", "--banner-once", marker.to_str().expect("utf-8")]),
        "",
    );
    let data = dir.path().join("data");
    let out = docket(
        &data,
        &["run", workflow.to_str().expect("utf-8"), "--run-id", "r1"],
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(marker.exists(), "the banner was printed");
    let log = events(&data, "r1");
    let failed = of_kind(&log, "agent.call_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["payload"]["code"], "AGENT_MALFORMED_RESPONSE");
    let responded = of_kind(&log, "agent.responded");
    assert_eq!(responded.len(), 1);
    let attempts: Vec<&Value> = of_kind(&log, "agent.call_scheduled")
        .iter()
        .map(|e| &e["payload"]["request"]["attempt"])
        .collect();
    assert_eq!(attempts, [1, 2]);
}

/// docs/workflow.md: `max_response_bytes` bounds a command agent's response line; over
/// it, the call fails with a protocol error naming the agent and the limit and goes the
/// normal failure path (retried, then a human); under it, the same response is accepted.
#[test]
fn max_response_bytes_is_the_agents_own_limit() {
    for (limit, size, exit) in [(4096, 6000, 3), (8192, 6000, 0)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let workflow = write_workflow(
            &dir.path().join("wf"),
            BUNDLE,
            &format!(
                "{}\nmax_response_bytes = {limit}",
                test_agent(&["oversized", "--size", &size.to_string()])
            ),
            "",
        );
        let data = dir.path().join("data");
        let out = docket(
            &data,
            &["run", workflow.to_str().expect("utf-8"), "--run-id", "r1"],
        );
        assert_eq!(
            code(&out),
            exit,
            "{limit}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        let log = events(&data, "r1");
        let failed = of_kind(&log, "agent.call_failed");
        if exit == 0 {
            assert!(failed.is_empty(), "{failed:?}");
            continue;
        }
        assert!(!failed.is_empty());
        for f in &failed {
            assert_eq!(f["payload"]["code"], "AGENT_OVERSIZED_RESPONSE");
            let message = f["payload"]["message"].as_str().expect("message");
            assert!(
                message.contains("agent `worker`") && message.contains("its limit of 4096 bytes"),
                "{message}"
            );
        }
    }
}
