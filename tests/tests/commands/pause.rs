//! Pausing a run through the binary (docs/events.md#runpaused): a run waiting for a person
//! is paused; the person's decision is still recorded, but the run starts nothing new and
//! shows as paused; unpaused, it is driven on and completes. A second pause, an unpause of
//! a run not paused and one with no reason are refused, recording nothing. Paused in the
//! middle of a fan-out, every branch is held the same way.

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
    let listed = stdout_text(&docket(&data, &["runs"]));
    assert!(
        listed.starts_with("p-1\tasks\tpaused, waiting for a human\t"),
        "{listed}"
    );

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
    let listed = stdout_text(&docket(&data, &["runs"]));
    assert!(listed.starts_with("p-1\tasks\tcompleted\t"), "{listed}");
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

/// A pause in the middle of a fan-out: both branches wait for a person; while paused, the
/// two decisions are recorded and no branch is called again; unpaused, both branches go on
/// and the join completes the run.
#[test]
fn a_pause_mid_fan_out_holds_every_branch_until_unpaused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let bundle = tmp.path().join("fan.toml");
    std::fs::write(
        &bundle,
        r#"
bundle = { id = "fan" }
agents = [{ id = "external" }, { id = "hub" }, { id = "left" }, { id = "right" }]
[interactions]
allowed = [
  { from = "external", to = "hub" }, { from = "hub", to = "left" }, { from = "hub", to = "right" },
  { from = "left", to = "external" }, { from = "right", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#,
    )
    .expect("write bundle");
    let input = tmp.path().join("input.json");
    std::fs::write(&input, "{}").expect("write input");
    let agent = |args: &[&str]| format!("command = {AGENT:?}\nargs = {args:?}");
    let workflow = tmp.path().join("workflow.toml");
    std::fs::write(
        &workflow,
        format!(
            "name = \"fan\"\npolicy = {bundle:?}\nentry = \"hub\"\ninput = {input:?}\n\
             [agents.hub]\n{}\n[agents.left]\n{}\n[agents.right]\n{}\n",
            agent(&["fanout", "--to", "left,right", "--output-type", "job"]),
            agent(&["ask"]),
            agent(&["ask"]),
        ),
    )
    .expect("write workflow");
    let out = docket(
        &data,
        &["run", workflow.to_str().expect("utf-8"), "--run-id", "f-1"],
    );
    assert_eq!(exit_code(&out), 3, "{}", stderr_text(&out));
    let log = docket_tests::run_events(&data, "f-1");
    let tickets: Vec<String> = docket_tests::events_of_kind(&log, "human.escalated")
        .iter()
        .filter_map(|e| e["payload"]["ticket"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(tickets.len(), 2, "both branches ask: {tickets:?}");

    let out = docket(
        &data,
        &[
            "pause",
            "f-1",
            "--by",
            "ana",
            "--reason",
            "check the branches",
        ],
    );
    assert_eq!(exit_code(&out), 0, "{}", stderr_text(&out));
    let paused_at = kinds(&data, "f-1").len();
    // The first decision leaves the run waiting for the other ticket (exit 3); the second
    // leaves it paused (exit 0).
    for (ticket, code) in tickets.iter().zip([3, 0]) {
        let out = docket(
            &data,
            &[
                "approve", "f-1", ticket, "--choose", "2", "--by", "bo", "--reason", "careful",
            ],
        );
        assert_eq!(
            exit_code(&out),
            code,
            "{ticket}: {}{}",
            stdout_text(&out),
            stderr_text(&out)
        );
    }
    let while_paused = kinds(&data, "f-1");
    let recorded = &while_paused[paused_at..];
    assert_eq!(
        recorded.iter().filter(|k| *k == "human.decided").count(),
        2,
        "{recorded:?}"
    );
    assert!(
        !recorded
            .iter()
            .any(|k| k == "agent.responded" || k == "run.completed"),
        "nothing new starts while paused: {recorded:?}"
    );
    let status = stdout_text(&docket(&data, &["status", "f-1"]));
    assert!(status.contains("paused by ana"), "{status}");

    let out = docket(
        &data,
        &["unpause", "f-1", "--by", "ana", "--reason", "both fine"],
    );
    assert_eq!(
        exit_code(&out),
        0,
        "{}{}",
        stdout_text(&out),
        stderr_text(&out)
    );
    let log = docket_tests::run_events(&data, "f-1");
    let after: Vec<&serde_json::Value> = log[paused_at..]
        .iter()
        .skip_while(|e| e["kind"] != "run.unpaused")
        .collect();
    let called: Vec<&str> = log[paused_at..]
        .iter()
        .filter(|e| e["kind"] == "agent.call_scheduled")
        .filter_map(|e| e["payload"]["request"]["target_agent"].as_str())
        .collect();
    let mut branches = called.clone();
    branches.sort_unstable();
    assert_eq!(
        branches,
        ["left", "right"],
        "both branches are called again: {called:?}"
    );
    assert_eq!(
        after
            .iter()
            .filter(|e| e["kind"] == "agent.responded")
            .count(),
        2
    );
    let done = docket_tests::events_of_kind(&log, "run.completed");
    assert_eq!(done.len(), 1);
    assert_eq!(
        done[0]["payload"]["output"]["human_answer"]["choice"],
        "thorough"
    );
    assert_eq!(exit_code(&docket(&data, &["verify"])), 0);
}
