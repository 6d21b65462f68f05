//! Durable timers through the binary (docs/agent-protocol.md#waiting-wait): an agent that
//! waits is called again once its timer is due; the timer survives a SIGKILL of the
//! process that set it, fires once when the run is resumed after it fell due, and says how
//! late; the run replays.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use docket_tests::{docket_bin, docket_on, exit_code, now_ms, one_agent_workflow, stdout_text};
use serde_json::Value;

/// The run's events as `docket events RUN --json` prints them, or none while the run is
/// not yet in the log.
fn events(data: &Path, run: &str) -> Vec<Value> {
    let out = docket_on(data, &["events", run, "--json"]);
    if exit_code(&out) != 0 {
        return Vec::new();
    }
    stdout_text(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// A run `run` of a one-agent workflow in `dir` whose agent waits `wait`, its `docket run`
/// killed (SIGKILL) once the timer is recorded: the data directory and the `timer.set`.
fn killed_while_waiting(dir: &Path, run: &str, wait: &str) -> (PathBuf, Value) {
    let data = dir.join("data");
    let agent = PathBuf::from(env!("CARGO_BIN_EXE_test-agent"));
    let workflow = one_agent_workflow(
        dir,
        "timers",
        "timers",
        agent.to_str().expect("utf-8"),
        &["wait", "--for", wait],
    );
    let mut first = Command::new(docket_bin())
        .args([
            "run",
            workflow.to_str().expect("utf-8"),
            "--run-id",
            run,
            "--data",
        ])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("docket run starts");
    // The process records the timer, then waits on it: killed there.
    let deadline = Instant::now() + Duration::from_secs(60);
    let set = loop {
        let log = events(&data, run);
        if let Some(set) = of_kind(&log, "timer.set").first() {
            break (*set).clone();
        }
        assert!(
            Instant::now() < deadline,
            "no timer.set within a minute: {log:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    first.kill().expect("SIGKILL");
    let _ = first.wait();
    (data, set)
}

#[test]
fn a_timer_across_a_sigkill_fires_once_late_and_the_run_replays() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (data, set) = killed_while_waiting(tmp.path(), "wait-1", "3s");
    // The timer is in the log: `docket status` shows it, with no process driving the run.
    let status = stdout_text(&docket_on(&data, &["status", "wait-1"]));
    assert!(
        status.contains("timer wait-1/timer-1: worker waits until")
            && status.contains("the slot opens later"),
        "{status}"
    );
    let due = set["payload"]["due_at_ms"].as_i64().expect("due_at_ms");
    // The timer falls due while no process drives the run.
    while now_ms() < due + 500 {
        std::thread::sleep(Duration::from_millis(50));
    }
    let resumed = docket_on(&data, &["resume", "wait-1"]);
    assert_eq!(
        exit_code(&resumed),
        0,
        "{}{}",
        stdout_text(&resumed),
        String::from_utf8_lossy(&resumed.stderr)
    );
    let log = events(&data, "wait-1");
    assert_eq!(of_kind(&log, "timer.set").len(), 1, "{log:?}");
    let fired = of_kind(&log, "timer.fired");
    assert_eq!(fired.len(), 1, "fired once: {log:?}");
    let fired_at = fired[0]["payload"]["at_ms"].as_i64().expect("at_ms");
    assert!(fired_at >= due + 500, "fired at {fired_at}, due {due}");
    // The agent was told when it was due, when it fired and how late.
    let completed = of_kind(&log, "run.completed");
    assert_eq!(completed.len(), 1, "{log:?}");
    let told = &completed[0]["payload"]["output"]["fired"];
    assert_eq!(told["due_at_ms"], due);
    assert_eq!(told["fired_at_ms"], fired_at);
    assert_eq!(told["late_ms"], fired_at - due);
    let replayed = docket_on(&data, &["replay", "wait-1"]);
    assert_eq!(exit_code(&replayed), 0, "{}", stdout_text(&replayed));
    let verified = docket_on(&data, &["verify", "wait-1"]);
    assert_eq!(exit_code(&verified), 0, "{}", stdout_text(&verified));
}

#[test]
fn a_wait_longer_than_the_bundle_allows_is_refused_and_the_agent_told() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let agent = PathBuf::from(env!("CARGO_BIN_EXE_test-agent"));
    let workflow = one_agent_workflow(
        tmp.path(),
        "timers",
        "timers",
        agent.to_str().expect("utf-8"),
        &["wait", "--for", "31d"],
    );
    // The agent asks again on each refusal; the episode stops once refusals repeat.
    let out = docket_on(
        &data,
        &[
            "run",
            workflow.to_str().expect("utf-8"),
            "--run-id",
            "wait-2",
        ],
    );
    assert_ne!(exit_code(&out), 0, "{}", stdout_text(&out));
    let log = events(&data, "wait-2");
    assert!(of_kind(&log, "timer.set").is_empty(), "{log:?}");
    let denied = of_kind(&log, "episode.action_denied");
    assert!(!denied.is_empty(), "{log:?}");
    assert_eq!(denied[0]["payload"]["action"], "wait");
    assert_eq!(
        denied[0]["payload"]["decision"]["rule_id"],
        "waiting.max_wait_ms"
    );
}

/// `docket serve`, started over a data directory whose run waits on a timer (the process
/// that set it was killed), drives the run again: the timer fires once, when due.
#[test]
fn docket_serve_fires_the_timer_of_a_run_left_waiting() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (data, _) = killed_while_waiting(tmp.path(), "wait-3", "2s");
    let (mut server, _addr) = docket_tests::start_serve(&data, Some(tmp.path()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let log = loop {
        let log = events(&data, "wait-3");
        if !of_kind(&log, "run.completed").is_empty() {
            break log;
        }
        assert!(
            Instant::now() < deadline,
            "the run did not complete under serve: {log:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(of_kind(&log, "timer.fired").len(), 1, "{log:?}");
    let set = of_kind(&log, "timer.set")[0]["payload"]["due_at_ms"]
        .as_i64()
        .expect("due");
    let fired = of_kind(&log, "timer.fired")[0]["payload"]["at_ms"]
        .as_i64()
        .expect("at");
    assert!(fired >= set, "fired at {fired}, due {set}");
}

/// A run waiting on a timer is listed as interrupted while no process keeps it, and as
/// waiting until its timer is due once `docket serve` over its data directory keeps it.
#[test]
fn a_run_docket_serve_keeps_for_its_timer_is_listed_as_waiting() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (data, set) = killed_while_waiting(tmp.path(), "wait-5", "1h");
    let due = set["payload"]["due_at_ms"].as_i64().expect("due_at_ms");
    let line = |runs: &str| {
        runs.lines()
            .find(|l| l.starts_with("wait-5\t"))
            .unwrap_or_else(|| panic!("wait-5 listed: {runs}"))
            .to_owned()
    };
    let before = line(&stdout_text(&docket_on(&data, &["runs"])));
    assert!(
        before.contains("\tinterrupted (resume with: docket resume wait-5)\t"),
        "{before}"
    );
    let (mut server, _addr) = docket_tests::start_serve(&data, Some(tmp.path()));
    let waiting = format!("\trunning, waits until {}\t", docket_evidence::date_ms(due));
    let deadline = Instant::now() + Duration::from_secs(60);
    let listed = loop {
        let now = line(&stdout_text(&docket_on(&data, &["runs"])));
        if now.contains(&waiting) || Instant::now() >= deadline {
            break now;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let status = stdout_text(&docket_on(&data, &["status", "wait-5"]));
    let _ = server.kill();
    let _ = server.wait();
    assert!(listed.contains(&waiting), "{listed}");
    assert!(!status.contains("interrupted"), "{status}");
}

/// A fork of a run whose timer fired reuses the answer the agent gave after the firing:
/// the fork shifts the firing's times with the answer that set the timer, so the agent
/// would be asked what the parent asked it (docs/replay.md#fork).
#[test]
fn a_fork_of_a_run_with_a_fired_timer_reuses_the_answer_after_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let record = tmp.path().join("requests.jsonl");
    let agent = PathBuf::from(env!("CARGO_BIN_EXE_test-agent"));
    let workflow = one_agent_workflow(
        tmp.path(),
        "timers",
        "timers",
        agent.to_str().expect("utf-8"),
        &[
            "wait",
            "--for",
            "200ms",
            "--record",
            record.to_str().expect("utf-8"),
        ],
    );
    let out = docket_on(
        &data,
        &["run", workflow.to_str().expect("utf-8"), "--run-id", "t-1"],
    );
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = || {
        std::fs::read_to_string(&record)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert_eq!(requests(), 2, "the wait, then the call after the firing");
    let log = events(&data, "t-1");
    let completed = log
        .iter()
        .position(|e| e["kind"] == "run.completed")
        .expect("completed")
        + 1;
    let out = docket_on(
        &data,
        &[
            "fork",
            "t-1",
            "--from",
            &completed.to_string(),
            "--run-id",
            "t-2",
        ],
    );
    let text = stdout_text(&out);
    assert_eq!(
        exit_code(&out),
        0,
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("parted"), "{text}");
    assert!(text.contains("2 agent.responded"), "{text}");
    assert!(text.contains("1 timer.fired"), "{text}");
    assert_eq!(requests(), 2, "the fork calls nobody: {text}");
    // The fork would tell its agent the firing's times shifted, with the same lateness.
    let fork = events(&data, "t-2");
    let told = |log: &[Value]| {
        log.iter()
            .filter(|e| e["kind"] == "agent.call_scheduled")
            .flat_map(|e| {
                e["payload"]["request"]["decision_inputs"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .find(|i| i["output_type"] == "timer_fired")
            .map(|i| i["payload"].clone())
            .expect("a timer_fired input")
    };
    let (was, now) = (told(&log), told(&fork));
    let ms = |v: &Value, key: &str| v[key].as_i64().expect("ms");
    let shift = ms(&now, "fired_at_ms") - ms(&was, "fired_at_ms");
    assert!(shift > 0, "the fork is later: {was} {now}");
    assert_eq!(ms(&now, "due_at_ms") - ms(&was, "due_at_ms"), shift);
    assert_eq!(was["late_ms"], now["late_ms"]);
    assert_eq!(exit_code(&docket_on(&data, &["replay", "t-2"])), 0);
}
