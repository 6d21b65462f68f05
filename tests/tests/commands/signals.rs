//! Outside events through the binary (docs/events.md#outside-events): an event sent while
//! the agent is busy elsewhere is kept and received when it waits; one sent while it waits
//! is delivered at once; sent again with its key, an event is recorded once; an event from
//! a sender the bundle does not list is refused and reaches nobody; a wait's timeout
//! calls the agent again with `event_timed_out`.

use docket_tests::{docket_on as docket, exit_code, one_agent_workflow, stdout_text};

const AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

const SIGNALS: &str = r#"
[[signals]]
name = "comment"
senders = ["ingestion"]
agents = ["worker"]
"#;

fn stderr_text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn both(out: &std::process::Output) -> String {
    format!("{}{}", stdout_text(out), stderr_text(out))
}

/// The run's events, as `docket events --json` prints them.
fn events(data: &std::path::Path, run: &str) -> Vec<serde_json::Value> {
    stdout_text(&docket(data, &["events", run, "--json"]))
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn count(events: &[serde_json::Value], kind: &str) -> usize {
    events.iter().filter(|e| e["kind"] == kind).count()
}

/// A workflow whose agent runs the test agent's `wait_event` with `args`, under a bundle
/// that declares the `comment` signal.
fn workflow(dir: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec!["wait_event"];
    all.extend_from_slice(args);
    let path = one_agent_workflow(dir, "signals", "signals", AGENT, &all);
    let bundle = dir.join("policy.toml");
    let text = std::fs::read_to_string(&bundle).expect("bundle");
    std::fs::write(&bundle, format!("{text}{SIGNALS}")).expect("bundle");
    path.to_str().expect("utf-8").to_owned()
}

fn send(
    data: &std::path::Path,
    dir: &std::path::Path,
    run: &str,
    by: &str,
    text: &str,
    key: Option<&str>,
) -> std::process::Output {
    let payload = dir.join(format!("{text}.json"));
    std::fs::write(&payload, serde_json::json!({ "text": text }).to_string()).expect("payload");
    let mut args = vec![
        "signal",
        run,
        "comment",
        "--by",
        by,
        "--payload",
        payload.to_str().expect("utf-8"),
    ];
    if let Some(key) = key {
        args.extend(["--key", key]);
    }
    docket(data, &args)
}

#[test]
fn events_sent_before_and_while_the_agent_waits_both_arrive_once_each() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let wf = workflow(tmp.path(), &["--ask-first"]);
    let out = docket(&data, &["run", &wf, "--run-id", "s-1"]);
    assert_eq!(exit_code(&out), 3, "waits for a person: {}", both(&out));

    // Sent while the agent waits for a person: kept for the run.
    let out = send(&data, tmp.path(), "s-1", "ingestion", "first", Some("c-1"));
    assert_eq!(exit_code(&out), 3, "{}", both(&out));
    assert!(
        stdout_text(&out).contains("event s-1/signal-1 `comment` from ingestion: kept for the run"),
        "{}",
        both(&out)
    );
    // The same key again: recorded once.
    let out = send(&data, tmp.path(), "s-1", "ingestion", "first", Some("c-1"));
    assert_eq!(exit_code(&out), 0, "{}", both(&out));
    assert!(
        stdout_text(&out).contains("already recorded, as s-1/signal-1"),
        "{}",
        both(&out)
    );
    // From a sender the bundle does not list: refused, it reaches nobody.
    let out = send(&data, tmp.path(), "s-1", "mallory", "spam", None);
    assert!(
        stdout_text(&out).contains("refused: `mallory` may not send `comment`"),
        "{}",
        both(&out)
    );

    // The person answers: the agent waits for a comment and receives the kept one at once,
    // then waits for a second.
    let out = docket(
        &data,
        &[
            "approve", "s-1", "ticket-1", "--choose", "1", "--by", "ana", "--reason", "go",
        ],
    );
    assert_eq!(exit_code(&out), 3, "waits for an event: {}", both(&out));
    assert!(
        stdout_text(&out).contains("worker waits for event `comment`"),
        "{}",
        both(&out)
    );
    let status = stdout_text(&docket(&data, &["status", "s-1"]));
    assert!(status.contains("docket signal s-1 comment"), "{status}");
    // No process drives it, and none need: the listing says what it waits for.
    assert!(!status.contains("interrupted"), "{status}");
    let runs = stdout_text(&docket(&data, &["runs"]));
    assert!(
        runs.lines()
            .any(|l| l.starts_with("s-1\t")
                && l.contains("\trunning, waits for event \"comment\"\t")),
        "{runs}"
    );

    // Sent while it waits: delivered, and the run completes with both, in order.
    let out = send(&data, tmp.path(), "s-1", "ingestion", "second", Some("c-2"));
    assert_eq!(exit_code(&out), 0, "{}", both(&out));
    assert!(
        stdout_text(&out)
            .contains("event s-1/signal-3 `comment` from ingestion: delivered to worker"),
        "{}",
        both(&out)
    );
    let log = events(&data, "s-1");
    assert_eq!(
        count(&log, "signal.received"),
        3,
        "the duplicate was not recorded"
    );
    assert_eq!(count(&log, "signal.refused"), 1);
    assert_eq!(count(&log, "signal.delivered"), 2);
    let output = &log
        .iter()
        .find(|e| e["kind"] == "run.completed")
        .expect("completed")["payload"]["output"];
    let texts: Vec<&str> = output["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["payload"]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(texts, ["first", "second"], "{output}");
    assert_eq!(output["events"][0]["by"], "ingestion");
    // The log replays and verifies.
    let out = docket(&data, &["replay", "s-1"]);
    assert_eq!(exit_code(&out), 0, "{}", both(&out));
}

#[test]
fn a_wait_whose_timeout_passes_first_is_told_it_timed_out() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let wf = workflow(tmp.path(), &["--for", "1s"]);
    // The foreground run does not hold the run while the agent waits for an event: it
    // exits waiting (3), naming the event and the timeout's timer.
    let out = docket(&data, &["run", &wf, "--run-id", "t-1"]);
    assert_eq!(exit_code(&out), 3, "{}", both(&out));
    assert!(
        stdout_text(&out).contains("worker waits for event `comment`"),
        "{}",
        both(&out)
    );
    // Once the timeout is due, a resume fires it (late): the agent is told, and finishes.
    let due = events(&data, "t-1")
        .iter()
        .find(|e| e["kind"] == "timer.set")
        .and_then(|e| e["payload"]["due_at_ms"].as_i64())
        .expect("the timeout's timer");
    // Meanwhile the listing names the event and when the wait times out, and does not call
    // the run interrupted: it waits for a sender.
    let runs = stdout_text(&docket(&data, &["runs"]));
    let line = runs
        .lines()
        .find(|l| l.starts_with("t-1\t"))
        .unwrap_or_else(|| panic!("t-1 listed: {runs}"));
    assert!(
        line.contains(&format!(
            "\trunning, waits for event \"comment\" until {}\t",
            docket_evidence::date_ms(due)
        )),
        "{line}"
    );
    let now = || {
        i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_millis(),
        )
        .expect("ms")
    };
    while now() <= due {
        std::thread::sleep(std::time::Duration::from_millis(
            u64::try_from(due + 1 - now()).unwrap_or(1),
        ));
    }
    let out = docket(&data, &["resume", "t-1"]);
    assert_eq!(exit_code(&out), 0, "{}", both(&out));
    let log = events(&data, "t-1");
    let kinds: Vec<&str> = log.iter().filter_map(|e| e["kind"].as_str()).collect();
    let at = kinds
        .iter()
        .position(|k| *k == "signal.timed_out")
        .expect("timed out");
    assert_eq!(kinds[at - 1], "timer.fired", "{kinds:?}");
    let output = &log.last().expect("events")["payload"]["output"];
    assert_eq!(output["timed_out"]["event"], "comment", "{output}");
    assert!(
        output["timed_out"]["late_ms"].as_i64().is_some(),
        "{output}"
    );
    // An event for a finished run is refused, and says why.
    let out = send(&data, tmp.path(), "t-1", "ingestion", "late", None);
    assert_eq!(exit_code(&out), 1, "{}", both(&out));
    assert!(stderr_text(&out).contains("completed"), "{}", both(&out));
}
