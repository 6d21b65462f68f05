//! Authority between agents through the `docket` binary with command agents
//! (docs/governance.md#authority-between-agents): a boundary violation hands the task to
//! the agent named in `reassign_to`; a higher authority's output is kept over a lower
//! one's in a fan-out conflict; a review pattern of a higher safety tier than a deny
//! pattern sends the call to a person. Each run replays.

use std::path::{Path, PathBuf};

use docket_tests::{
    docket_on as docket, events_of_kind as of_kind, exit_code, replays_and_exports,
    run_events as events, summary_run_id as run_id,
};
use serde_json::json;

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

/// Writes `bundle`, a workflow whose agents run the test agent with the given arguments
/// (entry first), and the input; the workflow's path.
fn workflow(dir: &Path, bundle: &str, agents: &[(&str, &[&str])]) -> PathBuf {
    std::fs::write(dir.join("policy.toml"), bundle).expect("write bundle");
    let entry = agents.first().map_or("", |(id, _)| *id);
    let mut text = format!("name = \"authority\"\npolicy = \"policy.toml\"\nentry = \"{entry}\"\n");
    for (id, args) in agents {
        text.push_str(&format!(
            "[agents.{id}]\ncommand = {TEST_AGENT:?}\nargs = {args:?}\n"
        ));
    }
    let path = dir.join("workflow.toml");
    std::fs::write(&path, text).expect("write workflow");
    std::fs::write(dir.join("input.json"), r#"{"job": "summarise"}"#).expect("write input");
    path
}

fn run(dir: &Path, workflow: &Path) -> std::process::Output {
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

const REASSIGNING: &str = r#"bundle = { id = "reassigning" }
agents = [
  { id = "external" },
  { id = "drafter", allowed_tools = ["Read"], reassign_to = "senior" },
  { id = "senior", allowed_tools = ["Read"] },
]
[interactions]
allowed = [
  { from = "external", to = "drafter" }, { from = "external", to = "senior" },
  { from = "drafter", to = "external" }, { from = "senior", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

#[test]
fn a_boundary_violation_hands_the_task_to_the_agent_named_and_the_run_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let drafter = [
        "handoff",
        "--to",
        "external",
        "--output-type",
        "summary",
        "--payload",
        r#"{"by": "drafter"}"#,
        "--ran-tool",
        "Bash",
        "curl http://example.com",
    ];
    let senior = ["handoff", "--to", "external", "--output-type", "summary"];
    let wf = workflow(
        dir.path(),
        REASSIGNING,
        &[("drafter", &drafter), ("senior", &senior)],
    );
    let out = run(dir.path(), &wf);
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let id = run_id(&out);
    let data = dir.path().join("data");
    let log = events(&data, &id);
    let reassigned = of_kind(&log, "task.reassigned");
    assert_eq!(reassigned.len(), 1, "{log:?}");
    let r = &reassigned[0]["payload"];
    assert_eq!(
        (r["from"].as_str(), r["to"].as_str()),
        (Some("drafter"), Some("senior"))
    );
    assert_eq!(r["rule_id"], "agents.drafter.reassign_to");
    assert_eq!(r["error_class"], "boundary_violation");
    // The senior got the run's input, and its output (not the drafter's) completed the run.
    let completed = of_kind(&log, "run.completed");
    assert_eq!(
        completed[0]["payload"]["output"],
        json!({"job": "summarise"})
    );
    replays_and_exports(&data, &id);
}

const FANNED: &str = r#"bundle = { id = "fanned" }
agents = [
  { id = "external" }, { id = "hub" },
  { id = "lead", authority = "orchestrator" }, { id = "dev" }, { id = "sink" },
]
[interactions]
allowed = [
  { from = "external", to = "hub" }, { from = "hub", to = "lead" }, { from = "hub", to = "dev" },
  { from = "lead", to = "sink" }, { from = "dev", to = "sink" }, { from = "sink", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
__SETTING__
"#;

fn fanned(dir: &Path, setting: &str) -> PathBuf {
    let hub = ["fanout", "--to", "lead,dev", "--output-type", "job"];
    let lead = [
        "handoff",
        "--to",
        "sink",
        "--output-type",
        "plan",
        "--payload",
        r#"{"api": "rest"}"#,
    ];
    let dev = [
        "handoff",
        "--to",
        "sink",
        "--output-type",
        "plan",
        "--payload",
        r#"{"api": "graphql"}"#,
    ];
    let sink = ["handoff", "--to", "external", "--output-type", "plan"];
    workflow(
        dir,
        &FANNED.replace("__SETTING__", setting),
        &[
            ("hub", &hub),
            ("lead", &lead),
            ("dev", &dev),
            ("sink", &sink),
        ],
    )
}

#[test]
fn a_higher_authority_settles_a_fan_out_conflict_peers_would_leave_to_a_person() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = fanned(dir.path(), "authority_settles_conflicts = true");
    let out = run(dir.path(), &wf);
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let id = run_id(&out);
    let data = dir.path().join("data");
    let log = events(&data, &id);
    let conflict = of_kind(&log, "output.conflict_detected");
    assert_eq!(conflict[0]["payload"]["resolution"], "higher_authority");
    let completed = &of_kind(&log, "run.completed")[0]["payload"];
    assert_eq!(completed["output"], json!({"api": "rest"}));
    assert_eq!(completed["conflicts"][0]["settled_by"], "higher_authority");
    let archived = of_kind(&log, "output.archived");
    assert_eq!(archived[0]["payload"]["delivery"]["from"], "dev");
    replays_and_exports(&data, &id);

    // Without the setting, equal confidence leaves the choice to a person (exit 3).
    let other = tempfile::tempdir().expect("tempdir");
    let wf = fanned(other.path(), "");
    assert_eq!(exit_code(&run(other.path(), &wf)), 3);
}

const TIERED: &str = r#"bundle = { id = "tiered" }
agents = [{ id = "external" }, { id = "ops", allowed_tools = ["Bash"] }]
[interactions]
allowed = [{ from = "external", to = "ops" }, { from = "ops", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
[[deny_patterns]]
id = "no-deploy"
pattern = "Bash(deploy *)"
reason = "deploys go through the pipeline"
__DENY_TIER__
[[review_patterns]]
id = "review-deploy"
pattern = "Bash(deploy *)"
reason = "a person may let a hotfix out"
__REVIEW_TIER__
"#;

#[test]
fn a_review_pattern_of_a_higher_tier_sends_a_denied_call_to_a_person() {
    let ops = [
        "handoff",
        "--to",
        "external",
        "--output-type",
        "done",
        "--ran-tool",
        "Bash",
        "deploy hotfix",
    ];
    let decided = |deny_tier: &str, review_tier: &str| {
        let dir = tempfile::tempdir().expect("tempdir");
        let bundle = TIERED
            .replace("__DENY_TIER__", deny_tier)
            .replace("__REVIEW_TIER__", review_tier);
        let wf = workflow(dir.path(), &bundle, &[("ops", &ops)]);
        let out = run(dir.path(), &wf);
        let id = run_id(&out);
        let data = dir.path().join("data");
        let log = events(&data, &id);
        replays_and_exports(&data, &id);
        let tool = of_kind(&log, "policy.decided")
            .into_iter()
            .find(|e| e["payload"]["decision"]["kind"] == "tool_call")
            .map(|e| e["payload"]["decision"].clone())
            .expect("the tool call decided");
        (exit_code(&out), tool)
    };
    // Default tiers: the deny pattern (absolute) wins; the output is rejected.
    let (_, tool) = decided("", "");
    assert_eq!(
        (tool["verdict"].as_str(), tool["rule_id"].as_str()),
        (Some("deny"), Some("no-deploy"))
    );
    // The review pattern outranks an operational deny pattern: a person decides (exit 3).
    let (code, tool) = decided("tier = \"operational\"", "tier = \"universal\"");
    assert_eq!(code, 3);
    assert_eq!(
        (tool["verdict"].as_str(), tool["rule_id"].as_str()),
        (Some("needs_approval"), Some("review-deploy"))
    );
    let notes: Vec<&str> = tool["chain"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["note"].as_str())
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("tier operational")),
        "{notes:?}"
    );
}
