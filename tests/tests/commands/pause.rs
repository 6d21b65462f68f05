//! Pausing a run through the binary (docs/events.md#runpaused): a run waiting for a person
//! is paused; the person's decision is still recorded, but the run starts nothing new and
//! shows as paused; unpaused, it is driven on and completes. A second pause, an unpause of
//! a run not paused and one with no reason are refused, recording nothing.

use docket_tests::{docket_on as docket, exit_code, one_agent_workflow, stdout_text};

const AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

fn stderr_text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The kinds of the run's events, in order.
fn kinds(data: &std::path::Path, run: &str) -> Vec<String> {
    stdout_text(&docket(data, &["events", run, "--json"]))
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|e| e["kind"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_paused_run_records_a_decision_starts_nothing_and_goes_on_when_unpaused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let asks = one_agent_workflow(tmp.path(), "asks", "asks", AGENT, &["ask"]);
    let out = docket(
        &data,
        &["run", asks.to_str().expect("utf-8"), "--run-id", "p-1"],
    );
    assert_eq!(
        exit_code(&out),
        3,
        "waits for a person: {}",
        stderr_text(&out)
    );

    let out = docket(
        &data,
        &["pause", "p-1", "--by", "ana", "--reason", "look first"],
    );
    assert_eq!(exit_code(&out), 0, "{}", stderr_text(&out));
    assert!(
        stdout_text(&out).contains("paused by ana (look first)"),
        "{}",
        stdout_text(&out)
    );
    let status = stdout_text(&docket(&data, &["status", "p-1"]));
    assert!(status.contains("paused by ana: look first"), "{status}");

    // Refused, nothing recorded.
    let before = kinds(&data, "p-1");
    for (args, says) in [
        (
            &["pause", "p-1", "--by", "bo", "--reason", "again"][..],
            "already paused",
        ),
        (
            &["unpause", "p-1", "--by", "bo", "--reason", ""][..],
            "must say why",
        ),
    ] {
        let out = docket(&data, args);
        assert_eq!(exit_code(&out), 1, "{args:?}: {}", stdout_text(&out));
        assert!(
            stderr_text(&out).contains(says),
            "{args:?}: {}",
            stderr_text(&out)
        );
    }
    assert_eq!(kinds(&data, "p-1"), before);

    // The decision is recorded; the agent it would call again waits for the unpause.
    let out = docket(
        &data,
        &[
            "approve", "p-1", "ticket-1", "--choose", "1", "--by", "ana", "--reason", "fine",
        ],
    );
    assert_eq!(
        exit_code(&out),
        0,
        "{}{}",
        stdout_text(&out),
        stderr_text(&out)
    );
    let after = kinds(&data, "p-1");
    assert_eq!(
        after.last().map(String::as_str),
        Some("agent.call_scheduled"),
        "{after:?}"
    );
    let responded = |k: &[String]| k.iter().filter(|k| *k == "agent.responded").count();
    assert_eq!(
        responded(&after),
        1,
        "no agent called while paused: {after:?}"
    );

    let out = docket(
        &data,
        &["unpause", "p-1", "--by", "ana", "--reason", "seen"],
    );
    assert_eq!(
        exit_code(&out),
        0,
        "{}{}",
        stdout_text(&out),
        stderr_text(&out)
    );
    let done = kinds(&data, "p-1");
    assert_eq!(
        done.last().map(String::as_str),
        Some("run.completed"),
        "{done:?}"
    );
    assert_eq!(responded(&done), 2);
    assert_eq!(
        done.iter()
            .filter(|k| k.starts_with("run."))
            .collect::<Vec<_>>(),
        [
            "run.requested",
            "run.paused",
            "run.unpaused",
            "run.completed"
        ]
    );
    let out = docket(
        &data,
        &["unpause", "p-1", "--by", "ana", "--reason", "again"],
    );
    assert_eq!(exit_code(&out), 1);
    assert!(
        stderr_text(&out).contains("completed"),
        "{}",
        stderr_text(&out)
    );
    assert_eq!(exit_code(&docket(&data, &["verify"])), 0);
}
