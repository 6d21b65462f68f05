//! Circuit breakers across runs, through the `docket` binary with command agents
//! (docs/governance.md#circuit-breaker): failures of an agent in earlier runs of a data
//! directory open its circuit for later runs, which degrade instead of calling it, and
//! `docket replay` reproduces every decision from the run's log alone.

use std::path::{Path, PathBuf};

use docket_tests::events_of_kind as of_kind;
use serde_json::Value;

use docket_tests::{
    docket_on as docket, exit_code as code, run_events as events, stdout_text as stdout,
    summary_run_id as run_id,
};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

/// `asker` asks `writer` for `DOC_GENERATE` and falls back when told it failed; `writer`
/// crashes on every request, recording each one it receives in `writer_log`. The bundle
/// keeps the default ladder and breaker (opens when half of at least 5 calls in 10
/// minutes failed, a probe after 60 s).
fn asker_and_crashing_writer(dir: &Path, writer_log: &Path) -> PathBuf {
    let bundle = r#"bundle = { id = "circuit" }
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
  { from = "external", to = "asker" },
  { from = "asker", to = "writer" },
  { from = "writer", to = "asker" },
  { from = "asker", to = "external" },
]

[multi_agent_handoffs]
default_handoff_mode = "full"
"#;
    std::fs::write(dir.join("policy.toml"), bundle).expect("write bundle");
    let asker = [
        "ask_or_fall_back",
        "--to",
        "writer",
        "--capability",
        "DOC_GENERATE",
        "--payload",
        r#"{"title": "t"}"#,
    ];
    let writer = ["crash", "--record", writer_log.to_str().expect("utf-8")];
    let workflow = format!(
        "name = \"circuit\"\npolicy = \"policy.toml\"\nentry = \"asker\"\n\
         [agents.asker]\ncommand = {TEST_AGENT:?}\nargs = {asker:?}\n\
         [agents.writer]\ncommand = {TEST_AGENT:?}\nargs = {writer:?}\n"
    );
    let path = dir.join("workflow.toml");
    std::fs::write(&path, workflow).expect("write workflow");
    std::fs::write(dir.join("input.json"), r#"{"task": "write"}"#).expect("write input");
    path
}

/// Runs `workflow` (its input beside it) over `data`, expecting exit 0 (the asker falls
/// back or gets its answer): the run's id.
fn run_to_completion(data: &Path, workflow: &Path) -> String {
    let input = workflow.with_file_name("input.json");
    let out = docket(
        data,
        &[
            "run",
            workflow.to_str().expect("utf-8"),
            "--input",
            input.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    run_id(&out)
}

fn calls_received(writer_log: &Path) -> usize {
    std::fs::read_to_string(writer_log)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

#[test]
fn failures_in_earlier_runs_open_the_circuit_and_a_later_run_degrades_and_replays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let writer_log = dir.path().join("writer.jsonl");
    let workflow = asker_and_crashing_writer(dir.path(), &writer_log);
    let run = || run_to_completion(&data, &workflow);

    // Runs 1 and 2: the writer fails twice in each (a call and its retry), the asker is
    // told `capability_failed` and falls back. Four failures: the circuit stays closed.
    for _ in 0..2 {
        let run = run();
        let log = events(&data, &run);
        assert_eq!(of_kind(&log, "agent.call_failed").len(), 2);
        assert!(of_kind(&log, "agent.circuit_checked").is_empty(), "{log:?}");
    }
    assert_eq!(calls_received(&writer_log), 4);

    // Run 3: the fifth failure opens the circuit; the retry is not made.
    let third = run();
    assert_eq!(
        calls_received(&writer_log),
        5,
        "the retry never reached the writer"
    );
    let log = events(&data, &third);
    assert_eq!(of_kind(&log, "agent.call_failed").len(), 1);
    let checked = of_kind(&log, "agent.circuit_checked");
    assert_eq!(checked.len(), 1, "{log:?}");
    assert_eq!(checked[0]["payload"]["consecutive_failures"], 5);
    assert_eq!(checked[0]["payload"]["window"]["calls"], 5);
    assert_eq!(checked[0]["payload"]["window"]["failures"], 5);

    // Run 4: the writer is never called. The reading, the decision and the degradation
    // are in the run's log; the asker got `capability_failed` of class `circuit_open`.
    let fourth = run();
    assert_eq!(
        calls_received(&writer_log),
        5,
        "an open circuit calls nobody"
    );
    let log = events(&data, &fourth);
    assert!(of_kind(&log, "agent.call_failed").is_empty(), "{log:?}");
    let checked = of_kind(&log, "agent.circuit_checked");
    assert_eq!(checked.len(), 1, "{log:?}");
    let reading = &checked[0]["payload"];
    assert_eq!(reading["agent"], "writer");
    assert_eq!(reading["consecutive_failures"], 5);
    let decided = of_kind(&log, "policy.decided")
        .into_iter()
        .find(|e| e["payload"]["decision"]["kind"] == "circuit_breaker")
        .expect("the breaker's decision");
    assert_eq!(decided["payload"]["decision"]["verdict"], "deny");
    assert_eq!(
        decided["payload"]["decision"]["rule_id"],
        "defaults.circuit_breaker"
    );
    let degraded = of_kind(&log, "agent.call_degraded");
    assert_eq!(degraded.len(), 1);
    assert_eq!(degraded[0]["payload"]["error"]["errorType"], "circuit_open");
    let done = of_kind(&log, "run.completed");
    assert_eq!(done.len(), 1, "{log:?}");
    let fell_back = &done[0]["payload"]["output"]["fell_back"];
    assert_eq!(fell_back["error_class"], "circuit_open", "{fell_back}");
    assert_eq!(fell_back["agent"], "writer");

    // Replay reproduces every decision from each run's log, without the circuits stream.
    for run in [&third, &fourth] {
        let out = docket(&data, &["replay", run]);
        let text = stdout(&out);
        assert_eq!(code(&out), 0, "{text}");
        assert!(text.contains("every decision reproduced"), "{text}");
    }
    // The circuits stream is not a run: listings and replays of every run pass it over.
    let out = docket(&data, &["runs"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_eq!(
        stdout(&out).matches("completed").count(),
        4,
        "{}",
        stdout(&out)
    );
    let out = docket(&data, &["replay", "--all"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

/// The breaker counts the rate of failures over its window, not failures in a row: a
/// success between failures does not close it (docs/governance.md#circuit-breaker).
#[test]
fn one_success_among_failures_does_not_close_the_circuit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let writer_log = dir.path().join("writer.jsonl");
    let crashing = asker_and_crashing_writer(dir.path(), &writer_log);
    // The same workflow with a writer that answers.
    let answering = dir.path().join("answering.toml");
    std::fs::write(
        &answering,
        std::fs::read_to_string(&crashing)
            .expect("read workflow")
            .replace("\"crash\"", "\"echo\""),
    )
    .expect("write workflow");
    let run = |workflow: &Path| run_to_completion(&data, workflow);
    // Four failures in two runs, then one success.
    run(&crashing);
    run(&crashing);
    let answered = run(&answering);
    assert_eq!(calls_received(&writer_log), 5);
    assert!(of_kind(&events(&data, &answered), "agent.call_failed").is_empty());
    // 4 of 5 calls failed within the window: the next run does not call the writer.
    let fourth = run(&crashing);
    assert_eq!(
        calls_received(&writer_log),
        5,
        "one success did not close the circuit"
    );
    let log = events(&data, &fourth);
    let checked = of_kind(&log, "agent.circuit_checked");
    assert_eq!(checked.len(), 1, "{log:?}");
    let reading = &checked[0]["payload"];
    assert_eq!(reading["consecutive_failures"], 0, "{reading}");
    assert_eq!(reading["window"]["calls"], 5, "{reading}");
    assert_eq!(reading["window"]["failures"], 4, "{reading}");
    assert_eq!(of_kind(&log, "agent.call_degraded").len(), 1);
    let out = docket(&data, &["replay", &fourth]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

/// An open circuit at a handoff's receiver: nobody asked who could fall back, so the run
/// waits for a human instead of calling the agent (at least 2 calls here: the first run's
/// call and its retry open it for the next run).
#[test]
fn an_open_circuit_at_the_entry_agent_makes_the_next_run_wait_for_a_human() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let worker_log = dir.path().join("worker.jsonl");
    std::fs::write(
        dir.path().join("policy.toml"),
        r#"bundle = { id = "small" }
agents = [{ id = "external" }, { id = "worker" }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
[defaults.circuit_breaker]
minimum_calls = 2
"#,
    )
    .expect("write bundle");
    let worker = ["crash", "--record", worker_log.to_str().expect("utf-8")];
    std::fs::write(dir.path().join("input.json"), r#"{"task": "x"}"#).expect("write input");
    let workflow = dir.path().join("workflow.toml");
    std::fs::write(
        &workflow,
        format!(
            "name = \"small\"\npolicy = \"policy.toml\"\nentry = \"worker\"\ninput = \"input.json\"\n\
             [agents.worker]\ncommand = {TEST_AGENT:?}\nargs = {worker:?}\n"
        ),
    )
    .expect("write workflow");
    let run = || docket(&data, &["run", workflow.to_str().expect("utf-8")]);

    let first = run();
    assert_eq!(
        code(&first),
        3,
        "the ladder asks a human: {}",
        stdout(&first)
    );
    assert_eq!(calls_received(&worker_log), 2);

    let second = run();
    let text = stdout(&second);
    assert_eq!(code(&second), 3, "{text}");
    assert_eq!(calls_received(&worker_log), 2, "the worker was not called");
    let second = run_id(&second);
    let log = events(&data, &second);
    assert_eq!(of_kind(&log, "agent.call_degraded").len(), 1, "{log:?}");
    let escalated = of_kind(&log, "human.escalated");
    assert_eq!(escalated.len(), 1);
    let reason = escalated[0]["payload"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("circuit is open 2 of its 2 calls in the last 600 s failed"),
        "{reason}"
    );

    let out = docket(&data, &["replay", &second]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(stdout(&out).contains("every decision reproduced"));
}

/// Every file of `dir` with its size and modification time: what a read-only command must
/// leave as it was. (Taken of the log, `data/log`: opening the store lets sled rewrite its
/// index files, a cache rebuilt from the log.)
fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let entry = entry.expect("entry");
            let meta = entry.metadata().expect("metadata");
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                out.push((entry.path(), meta.len(), meta.modified().expect("mtime")));
            }
        }
    }
    out.sort();
    out
}

/// `docket circuits` lists each agent's breaker and `docket status` the open ones of a
/// run, both reading only; `docket circuits reset` records who closed it and why, and the
/// next run calls the agent again.
#[test]
fn breakers_are_listed_read_only_and_a_reset_closes_one_for_the_next_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let writer_log = dir.path().join("writer.jsonl");
    let workflow = asker_and_crashing_writer(dir.path(), &writer_log);
    let run = || run_to_completion(&data, &workflow);

    // No data directory yet: the listing says so, naming it, and creates nothing.
    let out = docket(&data, &["circuits"]);
    assert_eq!(code(&out), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no docket data directory at"), "{err}");
    assert!(
        !data.exists(),
        "a read-only command created the data directory"
    );

    // Three runs: five failures of the writer, its circuit open.
    for _ in 0..3 {
        run();
    }
    let last = run();
    let before = snapshot(&data.join("log"));
    let out = docket(&data, &["circuits", "--json"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let list: Vec<Value> = serde_json::from_str(&stdout(&out)).expect("json");
    let writer = list
        .iter()
        .find(|b| b["agent"] == "writer")
        .expect("the writer's breaker");
    assert_eq!(writer["state"], "open", "{writer}");
    assert_eq!(writer["consecutive_failures"], 5);
    assert_eq!(writer["calls_in_window"], 5);
    assert_eq!(writer["failures_in_window"], 5);
    assert!(writer["last_failure_ms"].as_i64().is_some());
    let text = stdout(&docket(&data, &["circuits"]));
    assert!(
        text.lines().any(|l| l
            .starts_with("writer\topen\t5 of 5 call(s) failed in the last 600 s, last failure ")),
        "{text}"
    );
    let status = stdout(&docket(&data, &["status", &last]));
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("circuit writer\topen")),
        "{status}"
    );
    assert!(
        !status.contains("circuit asker"),
        "closed breakers are not shown: {status}"
    );
    assert_eq!(
        before,
        snapshot(&data.join("log")),
        "listing appended to the log"
    );

    // A reset must say who and why; an agent without a breaker cannot be reset.
    let out = docket(
        &data,
        &["circuits", "reset", "writer", "--by", " ", "--reason", "x"],
    );
    assert_eq!(code(&out), 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs who resets it"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = docket(
        &data,
        &[
            "circuits", "reset", "nobody", "--by", "ana", "--reason", "x",
        ],
    );
    assert_eq!(code(&out), 1);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no circuit breaker is recorded for agent `nobody`")
    );

    let out = docket(
        &data,
        &[
            "circuits",
            "reset",
            "writer",
            "--by",
            "ana",
            "--reason",
            "the writer was redeployed",
        ],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let list: Vec<Value> =
        serde_json::from_str(&stdout(&docket(&data, &["circuits", "--json"]))).expect("json");
    let writer = list
        .iter()
        .find(|b| b["agent"] == "writer")
        .expect("writer");
    assert_eq!(writer["state"], "closed");
    assert_eq!(writer["consecutive_failures"], 0);
    assert_eq!(writer["last_reset"]["by"], "ana");
    assert_eq!(writer["last_reset"]["reason"], "the writer was redeployed");
    // (Each command is a new process: the reset was read back from the `_circuits` stream.)

    // The next run calls the writer again (it still crashes: two more calls).
    let calls = calls_received(&writer_log);
    run();
    assert_eq!(calls_received(&writer_log), calls + 2);
}
