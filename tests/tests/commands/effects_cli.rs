//! Side effects through the `docket` binary, as a user runs them: an agent asks for a
//! publish, a command executor (`effect-ledger`, which keeps its own ledger) carries it
//! out. The log must show the whole path in order, and the executor's ledger must hold the
//! key exactly once.

use std::path::Path;
use std::process::{Command, Output};

use docket_tests::docket_bin;
use serde_json::Value;

const AGENT: &str = env!("CARGO_BIN_EXE_effect-agent");
const LEDGER_BIN: &str = env!("CARGO_BIN_EXE_effect-ledger");

fn bundle(approval: bool) -> String {
    format!(
        r#"
bundle = {{ id = "publish" }}
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
human_approval_required = {approval}
[interactions]
allowed = [{{ from = "external", to = "publisher" }}, {{ from = "publisher", to = "external" }}]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#
    )
}

/// Writes the workflow (one publisher asking for one publish, served by the ledger
/// executor) and returns its path.
fn workflow(root: &Path, approval: bool) -> String {
    workflow_with(root, approval, &[])
}

/// [`workflow`], the publisher given `extra` arguments.
fn workflow_with(root: &Path, approval: bool, extra: &[&str]) -> String {
    let mut args = vec!["--prefix", "launch", "--count", "1", "--lane", "api"];
    args.extend_from_slice(extra);
    std::fs::write(root.join("bundle.toml"), bundle(approval)).expect("bundle");
    std::fs::write(root.join("input.json"), "{}").expect("input");
    let path = root.join("workflow.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"publish\"\npolicy = \"bundle.toml\"\nentry = \"publisher\"\ninput = \"input.json\"\n\
             [agents.publisher]\ncommand = {AGENT:?}\nargs = {args:?}\n\
             [effects.publish]\ncommand = {LEDGER_BIN:?}\nargs = [\"--ledger\", {:?}]\ntimeout_ms = 45000\n",
            root.join("ledger.tsv")
        ),
    )
    .expect("workflow");
    path.to_str().expect("utf-8").to_owned()
}

fn docket(data: &Path, args: &[&str]) -> Output {
    Command::new(docket_bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("docket runs")
}

/// The run's events as `(kind, payload)`, in log order.
fn events(data: &Path, run: &str) -> Vec<(String, Value)> {
    let out = docket(data, &["events", run, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let e: Value = serde_json::from_str(line).expect("an event per line");
            (
                e["kind"].as_str().unwrap_or_default().to_owned(),
                e["payload"].clone(),
            )
        })
        .collect()
}

/// The keys in the executor's own ledger, one per applied execution.
fn ledger_keys(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("ledger.tsv"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split('\t').next().map(str::to_owned))
        .collect()
}

fn position(events: &[(String, Value)], kind: &str) -> usize {
    events
        .iter()
        .position(|(k, _)| k == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:?}", kinds(events)))
}

fn kinds(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(k, _)| k.as_str()).collect()
}

#[test]
fn a_publish_is_dry_run_then_executed_once_then_verified() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let wf = workflow(dir.path(), false);
    let out = docket(&data, &["run", &wf, "--run-id", "pub-1"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let log = events(&data, "pub-1");
    let order: Vec<usize> = [
        "effect.requested",
        "effect.admitted",
        "effect.dry_run",
        "effect.kill_switch_checked",
        "effect.started",
        "effect.applied",
        "effect.verified",
        "effect.settled",
        "run.completed",
    ]
    .iter()
    .map(|k| position(&log, k))
    .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "out of order: {:?}",
        kinds(&log)
    );
    let (_, dry_run) = &log[position(&log, "effect.dry_run")];
    assert_eq!(dry_run["outcome"]["report"]["ok"], true, "{dry_run}");
    // The executor is given the workflow's `[effects.publish] timeout_ms`, which is
    // longer than the bundle's request default (30 s), and the runtime waits that long.
    let (_, started) = &log[position(&log, "effect.started")];
    assert_eq!(started["request"]["timeout_ms"], 45000, "{started}");
    let (_, verified) = &log[position(&log, "effect.verified")];
    assert_eq!(verified["verification"]["status"], "applied", "{verified}");
    let (_, completed) = &log[position(&log, "run.completed")];
    assert_eq!(completed["output"]["results"][0]["status"], "applied");
    assert_eq!(
        completed["output"]["results"][0]["key"], "launch-1",
        "{completed}"
    );
    // Exactly one execution, by the executor's own account.
    assert_eq!(ledger_keys(dir.path()), vec!["launch-1".to_owned()]);
    // `docket status` lists the effect with its key, where it stands and its receipt.
    let out = docket(&data, &["status", "pub-1", "--json"]);
    let status: Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    let effects = status["effects"].as_array().expect("effects listed");
    assert_eq!(effects.len(), 1, "{status}");
    assert_eq!(effects[0]["idempotency_key"], "launch-1");
    assert_eq!(effects[0]["phase"], "settled");
    assert_eq!(
        effects[0]["receipt"]["post_id"], "post-launch-1",
        "{status}"
    );
    let out = docket(&data, &["status", "pub-1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("effects:") && text.contains("key launch-1: settled"),
        "{text}"
    );
    assert_eq!(log.iter().filter(|(k, _)| k == "effect.started").count(), 1);
}

#[test]
fn an_effect_needing_approval_waits_across_processes_and_runs_once_approved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let wf = workflow(dir.path(), true);
    let out = docket(&data, &["run", &wf, "--run-id", "pub-2"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "waits for a human: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Nothing ran: the dry run may have, the execution must not.
    assert!(ledger_keys(dir.path()).is_empty());
    let log = events(&data, "pub-2");
    assert!(
        !kinds(&log).contains(&"effect.started"),
        "{:?}",
        kinds(&log)
    );
    let out = docket(&data, &["status", "pub-2"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("key launch-1: waiting for a human"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let (_, escalated) = &log[position(&log, "human.escalated")];
    let ticket = escalated["ticket"].as_str().expect("a ticket").to_owned();
    assert_eq!(escalated["subject"]["type"], "effect", "{escalated}");

    // A later process approves; the effect runs once and the run completes.
    let out = docket(
        &data,
        &[
            "approve",
            "pub-2",
            &ticket,
            "--by",
            "ana",
            "--reason",
            "copy reviewed",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ledger_keys(dir.path()), vec!["launch-1".to_owned()]);
    let log = events(&data, "pub-2");
    assert!(position(&log, "human.decided") < position(&log, "effect.started"));
    let (_, decided) = &log[position(&log, "human.decided")];
    assert_eq!(decided["by"], "ana");
    let (_, completed) = &log[position(&log, "run.completed")];
    assert_eq!(completed["output"]["results"][0]["status"], "applied");

    // Resuming the finished run executes nothing more.
    let out = docket(&data, &["resume", "pub-2"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(ledger_keys(dir.path()).len(), 1);
}

/// An effect executor run as a command that prints a banner line once (as a library's
/// first-run notice would) is restarted after that malformed answer, as agents are: the
/// first effect's dry run reads the banner and is refused, the process is killed, and the
/// second effect is served by a new process that answers in step.
#[test]
fn an_effect_executor_that_printed_a_stray_line_is_restarted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let data = root.join("data");
    std::fs::write(root.join("bundle.toml"), bundle(false)).expect("bundle");
    std::fs::write(root.join("input.json"), "{}").expect("input");
    let wf = root.join("workflow.toml");
    std::fs::write(
        &wf,
        format!(
            "name = \"publish\"\npolicy = \"bundle.toml\"\nentry = \"publisher\"\ninput = \"input.json\"\n\
             [agents.publisher]\ncommand = {AGENT:?}\nargs = [\"--prefix\", \"launch\", \"--count\", \"2\", \"--lane\", \"api\"]\n\
             [effects.publish]\ncommand = {LEDGER_BIN:?}\nargs = [\"--ledger\", {:?}, \"--starts\", {:?}, \"--banner-once\", {:?}]\n",
            root.join("ledger.tsv"),
            root.join("starts.txt"),
            root.join("banner"),
        ),
    )
    .expect("workflow");
    let out = docket(
        &data,
        &["run", wf.to_str().expect("utf-8"), "--run-id", "banner-1"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let log = events(&data, "banner-1");
    let dry_runs: Vec<&Value> = log
        .iter()
        .filter(|(k, _)| k == "effect.dry_run")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(dry_runs.len(), 2, "{:?}", kinds(&log));
    assert_eq!(
        dry_runs[0]["outcome"]["code"], "EFFECT_MALFORMED",
        "{}",
        dry_runs[0]
    );
    assert_eq!(
        dry_runs[1]["outcome"]["report"]["ok"], true,
        "{}",
        dry_runs[1]
    );
    // The second effect was applied once, by a second process.
    assert_eq!(ledger_keys(root), ["launch-2"]);
    let starts = std::fs::read_to_string(root.join("starts.txt")).expect("starts");
    assert_eq!(starts.lines().count(), 2, "{starts}");
}

/// An executor answering for another effect is named in the user's words: both ids as
/// they are written (`"launch-..."`), never as Rust's Debug text (`EffectId("…")`).
#[test]
fn an_answer_for_another_effect_names_both_ids_as_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let data = root.join("data");
    std::fs::write(root.join("bundle.toml"), bundle(false)).expect("bundle");
    std::fs::write(root.join("input.json"), "{}").expect("input");
    let wf = root.join("workflow.toml");
    let answer = r#"{"effect_id":"someone-else","result":{"ok":true,"preview":"x"}}"#;
    std::fs::write(
        &wf,
        format!(
            "name = \"publish\"\npolicy = \"bundle.toml\"\nentry = \"publisher\"\ninput = \"input.json\"\n\
             [agents.publisher]\ncommand = {AGENT:?}\nargs = [\"--prefix\", \"launch\", \"--count\", \"1\", \"--lane\", \"api\"]\n\
             [effects.publish]\ncommand = \"sh\"\nargs = [\"-c\", {:?}]\n",
            format!("while read -r line; do echo '{answer}'; done"),
        ),
    )
    .expect("workflow");
    let out = docket(
        &data,
        &["run", wf.to_str().expect("utf-8"), "--run-id", "other-1"],
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let log = events(&data, "other-1");
    let (_, dry_run) = log
        .iter()
        .find(|(k, _)| k == "effect.dry_run")
        .unwrap_or_else(|| panic!("a dry run is recorded: {:?}\n{said}", kinds(&log)));
    let message = dry_run["outcome"].to_string();
    assert!(
        message.contains(
            r#"the answer's effect_id \"someone-else\" is not the request's \"other-1/effect-"#
        ),
        "{message}"
    );
    for text in [&message, &said] {
        assert!(!text.contains("EffectId("), "{text}");
    }
}

/// docs/governance.md#scheduled-effects: a publish scheduled a few seconds ahead is
/// decided and dry-run at once, while the kill switch is engaged (it is not read then),
/// and executed only once due: without the switch, at or after its time; with the switch
/// still engaged at its due time, refused then, never executed.
#[test]
fn a_scheduled_publish_goes_out_at_its_time_unless_the_kill_switch_holds_it_then() {
    // Both cases at once: each run sleeps until its post is due.
    let cases: Vec<_> = [false, true]
        .into_iter()
        .map(|engaged| std::thread::spawn(move || scheduled_publish(engaged)))
        .collect();
    for case in cases {
        case.join().expect("the case passed");
    }
}

/// A publish scheduled 3 s after the agent starts, with the `api` kill switch engaged
/// before the run when `engaged`.
fn scheduled_publish(engaged: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let wf = workflow_with(dir.path(), false, &["--not-before-in-ms", "3000"]);
    if engaged {
        let out = docket(
            &data,
            &[
                "kill-switch",
                "on",
                "--lane",
                "api",
                "--by",
                "ops",
                "--reason",
                "storm",
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = docket(&data, &["run", &wf, "--run-id", "sched-1"]);
    let log = events(&data, "sched-1");
    let (_, requested) = &log[position(&log, "effect.requested")];
    let due_ms = requested["not_before_ms"].as_i64().expect("scheduled");
    // Dry-run at once, then held by a timer naming the effect.
    let (_, dry_run) = &log[position(&log, "effect.dry_run")];
    assert!(dry_run["at_ms"].as_i64().expect("at") < due_ms, "{dry_run}");
    let (_, set) = &log[position(&log, "timer.set")];
    assert_eq!(set["effect_id"], "sched-1/effect-1", "{set}");
    assert!(position(&log, "timer.set") < position(&log, "timer.fired"));
    // The kill switch is read at its due time, not before.
    let (_, checked) = &log[position(&log, "effect.kill_switch_checked")];
    assert!(
        checked["at_ms"].as_i64().expect("at") >= due_ms,
        "{checked}"
    );
    if engaged {
        assert_eq!(checked["engaged"], serde_json::json!(["api"]), "{checked}");
        assert!(
            log.iter().all(|(k, _)| k != "effect.started"),
            "{:?}",
            kinds(&log)
        );
        let (_, refused) = &log[position(&log, "effect.refused")];
        assert_eq!(refused["rule_id"], "kill_switch.api", "{refused}");
        assert!(ledger_keys(dir.path()).is_empty(), "never executed");
    } else {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(position(&log, "effect.started") > position(&log, "timer.fired"));
        assert_eq!(ledger_keys(dir.path()), vec!["launch-1".to_owned()]);
    }
}
