//! Human override by authority, through the `docket` binary with command agents
//! (docs/governance.md#human-override): a blocked run says who may override it, a role
//! that does not outrank the rule is refused with nothing recorded, an override by one
//! that does continues exactly what the block stopped, and replay reproduces every
//! decision.

use std::path::{Path, PathBuf};
use std::process::Output;

use docket_tests::events_of_kind as of_kind;
use serde_json::Value;

use docket_tests::{
    docket_on as docket, run_events as events, stdout_text as stdout, summary_run_id as run_id,
};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

const BUNDLE: &str = r#"bundle = { id = "publishing" }
[[agents]]
id = "external"
[[agents]]
id = "lead"
authority = "human"
[[agents]]
id = "officer"
authority = "global_rules"
[[agents]]
id = "risk"
authority = "safety_skill"
[[agents]]
id = "writer"
[[agents]]
id = "publisher"

[interactions]
allowed = [
  { from = "external", to = "writer" },
  { from = "publisher", to = "external" },
  __EDGES__
]
forbidden = __FORBIDDEN__

[multi_agent_handoffs]
default_handoff_mode = "full"
blocked_context_fields = ["secret"]
"#;

/// A writer handing a draft (with a blocked `secret`) to a publisher, which hands it on
/// to `external`; `edges` and `forbidden` complete the matrix; with a `verdict`, the
/// writer's answers go through the classifier `risk`, which answers it.
fn publishing(dir: &Path, edges: &str, forbidden: &str, verdict: Option<&str>) -> PathBuf {
    let bundle = BUNDLE
        .replace("__EDGES__", edges)
        .replace("__FORBIDDEN__", forbidden);
    std::fs::write(dir.join("policy.toml"), bundle).expect("write bundle");
    let log = dir.join("publisher.jsonl");
    let writer = [
        "handoff",
        "--to",
        "publisher",
        "--output-type",
        "draft",
        "--payload",
        r#"{"text": "launch day", "secret": "hunter2"}"#,
    ];
    let publisher = [
        "handoff",
        "--to",
        "external",
        "--output-type",
        "post",
        "--record",
        log.to_str().expect("utf-8"),
    ];
    let classifiers = if verdict.is_some() {
        "classifiers = [\"risk\"]\n"
    } else {
        ""
    };
    let mut workflow = format!(
        "name = \"publishing\"\npolicy = \"policy.toml\"\nentry = \"writer\"\n\
         [agents.writer]\ncommand = {TEST_AGENT:?}\nargs = {writer:?}\n{classifiers}\
         [agents.publisher]\ncommand = {TEST_AGENT:?}\nargs = {publisher:?}\n"
    );
    if let Some(verdict) = verdict {
        let payload = format!(r#"{{"verdict": "{verdict}", "reason": "it names a date"}}"#);
        let risk = ["finish", "--payload", payload.as_str()];
        workflow.push_str(&format!(
            "[agents.risk]\ncommand = {TEST_AGENT:?}\nargs = {risk:?}\n"
        ));
    }
    let path = dir.join("workflow.toml");
    std::fs::write(&path, workflow).expect("write workflow");
    std::fs::write(
        dir.join("input.json"),
        r#"{"brief": "announce the launch"}"#,
    )
    .expect("write input");
    path
}

fn run(dir: &Path, workflow: &Path) -> Output {
    docket(
        &dir.join("data"),
        &[
            "run",
            workflow.to_str().expect("utf-8"),
            "--input",
            dir.join("input.json").to_str().expect("utf-8"),
        ],
    )
}

fn override_as(dir: &Path, run: &str, by: &str, role: &str, reason: &str) -> Output {
    docket(
        &dir.join("data"),
        &[
            "override", run, "--by", by, "--role", role, "--reason", reason,
        ],
    )
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_denied_handoff_is_overridden_by_the_lead_and_the_run_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let forbidden =
        r#"[{ from = "writer", to = "publisher", reason = "drafts need legal review" }]"#;
    let workflow = publishing(dir.path(), "", forbidden, None);
    let data = dir.path().join("data");
    let out = run(dir.path(), &workflow);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "blocked: {text}");
    let id = run_id(&out);
    let status = stdout(&docket(&data, &["status", &id]));
    assert!(
        status.contains(
            "overridable: `forbid:writer->publisher` sits at authority level 2 (global_rules)"
        ),
        "{status}"
    );
    assert!(
        status.contains(&format!(
            "docket override {id} --by NAME --role ROLE --reason TEXT"
        )),
        "{status}"
    );
    assert!(status.contains("roles that may: lead"), "{status}");
    let listed = stdout(&docket(&data, &["runs"]));
    assert!(
        listed.contains("blocked by policy (overridable"),
        "{listed}"
    );

    // The officer is a peer of the bundle's rules: refused, nothing recorded.
    let before = events(&data, &id).len();
    let refused = override_as(dir.path(), &id, "omar", "officer", "looks fine to me");
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let why = stderr(&refused);
    assert!(
        why.contains("`officer` is level 2 (global_rules), not above level 2"),
        "{why}"
    );
    assert!(why.contains("lead"), "names who may: {why}");
    assert_eq!(events(&data, &id).len(), before, "nothing recorded");
    assert!(
        !dir.path().join("publisher.jsonl").exists(),
        "the publisher was called"
    );

    let done = override_as(dir.path(), &id, "dana", "lead", "legal approved the draft");
    let text = stdout(&done);
    assert_eq!(
        done.status.code(),
        Some(0),
        "completed: {text}{}",
        stderr(&done)
    );
    assert!(text.contains("completed"), "{text}");
    let received =
        std::fs::read_to_string(dir.path().join("publisher.jsonl")).expect("publisher called");
    assert!(received.contains("launch day"), "{received}");
    assert!(
        !received.contains("hunter2"),
        "the blocked field crossed: {received}"
    );

    let log = events(&data, &id);
    let overrode = of_kind(&log, "human.overrode");
    assert_eq!(overrode.len(), 1, "{log:?}");
    let p = &overrode[0]["payload"];
    assert_eq!(p["by"], "dana");
    assert_eq!(p["role"], "lead");
    assert_eq!(p["rule_id"], "forbid:writer->publisher");
    assert_eq!(p["reason"], "legal approved the draft");
    let crossed: Vec<&Value> = of_kind(&log, "handoff.allowed")
        .into_iter()
        .filter(|e| e["payload"]["to"] == "publisher" && e["payload"]["input"] == "decision")
        .collect();
    assert_eq!(crossed.len(), 1, "{log:?}");
    assert_eq!(
        crossed[0]["payload"]["decision"]["rule_id"],
        "human.override"
    );
    let blocked = of_kind(&log, "run.blocked");
    assert_eq!(
        blocked[0]["payload"]["overridable"]["step"]["kind"],
        "handoff"
    );

    let replay = docket(&data, &["replay", &id]);
    assert_eq!(
        replay.status.code(),
        Some(0),
        "replay reproduces every decision: {}{}",
        stdout(&replay),
        stderr(&replay)
    );
    let events_text = stdout(&docket(&data, &["events", &id]));
    assert!(
        events_text.contains("human.overrode")
            && events_text.contains("dana (lead) overrode forbid:writer->publisher"),
        "{events_text}"
    );
}

#[test]
fn a_dangerous_verdict_is_overridden_by_a_role_above_safety_skills() {
    let dir = tempfile::tempdir().expect("tempdir");
    let edge = r#"{ from = "writer", to = "publisher" },"#;
    let workflow = publishing(dir.path(), edge, "[]", Some("DANGEROUS"));
    let data = dir.path().join("data");
    let out = run(dir.path(), &workflow);
    assert_eq!(out.status.code(), Some(4), "blocked: {}", stdout(&out));
    let id = run_id(&out);
    let status = stdout(&docket(&data, &["status", &id]));
    assert!(
        status.contains("sits at authority level 3 (safety_skill)"),
        "{status}"
    );
    assert!(status.contains("roles that may: lead, officer"), "{status}");

    // An unknown role is refused by name.
    let refused = override_as(dir.path(), &id, "eve", "boss", "ship it");
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("no role `boss`"),
        "{}",
        stderr(&refused)
    );

    let done = override_as(dir.path(), &id, "omar", "officer", "the date is public");
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}{}",
        stdout(&done),
        stderr(&done)
    );
    let log = events(&data, &id);
    assert_eq!(of_kind(&log, "human.overrode").len(), 1);
    assert_eq!(of_kind(&log, "run.completed").len(), 1);
    let replay = docket(&data, &["replay", &id]);
    assert_eq!(replay.status.code(), Some(0), "{}", stdout(&replay));

    // A completed run has nothing to override.
    let again = override_as(dir.path(), &id, "dana", "lead", "again");
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("not blocked"), "{}", stderr(&again));
}
