//! Episodes through the `docket` binary (docs/governance.md#episodes): one scripted agent binary plays the
//! orchestrator, the workers and the verifier; each recursion limit and each stop
//! condition is reached and found by name in `docket events --json`; the 50% and 70%
//! budget rules; domain versions and a non-owner's write; a needs_review result waiting
//! for `docket approve` in a later process.

use std::path::{Path, PathBuf};
use std::process::Output;

use docket_decider::{RunEvent, recorded_bundle, replay_check};
use serde_json::{Value, json};

use docket_tests::{docket_on as docket, exit_code as code, stdout_text as stdout};

const EPISODE_AGENT: &str = env!("CARGO_BIN_EXE_episode-agent");

/// A finished (or waiting) run of the episode workflow.
struct Ran {
    _dir: tempfile::TempDir,
    data: PathBuf,
    run: String,
    out: Output,
    events: Vec<Value>,
}

impl Ran {
    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["kind"] == kind).collect()
    }

    /// `(episode, condition)` of every `episode.stopped`, in order.
    fn stops(&self) -> Vec<(String, String)> {
        self.of_kind("episode.stopped")
            .iter()
            .map(|e| {
                (
                    e["payload"]["episode_id"].as_str().unwrap_or("").to_owned(),
                    e["payload"]["condition"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    fn denial(&self) -> &Value {
        let d = self.of_kind("episode.action_denied");
        assert!(!d.is_empty(), "no action denied in {:#?}", self.kinds());
        &d[0]["payload"]
    }

    fn kinds(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| e["kind"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    fn text(&self) -> String {
        format!(
            "{}\n{}",
            stdout(&self.out),
            String::from_utf8_lossy(&self.out.stderr)
        )
    }
}

/// The run's events as `docket events --json` prints them, after checking that the log
/// replays: every batch re-decided with the recorded bundle gives the recorded events.
fn events(data: &Path, run: &str) -> Vec<Value> {
    let out = docket(data, &["events", run, "--json"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let decoded: Vec<RunEvent> = lines
        .iter()
        .map(|l| {
            RunEvent::decode(
                l["kind"].as_str().expect("kind"),
                l["payload"].to_string().as_bytes(),
            )
            .expect("each payload decodes")
        })
        .collect();
    let RunEvent::RunRequested(requested) = &decoded[0] else {
        panic!("the log starts with run.requested");
    };
    let bundle = recorded_bundle(requested).expect("the recorded bundle compiles");
    replay_check(&decoded, &bundle).expect("the log replays");
    lines
}

/// Runs the episode workflow: `policy` is appended to the bundle's default recursion
/// policy, `budget` to the workflow's `[budget]`, `script` drives the agents.
fn run(policy: &str, budget: &str, script: &Value) -> Ran {
    let dir = tempfile::tempdir().expect("tempdir");
    let bundle = format!(
        r#"
bundle = {{ id = "episodes" }}
[[agents]]
id = "external"
[[agents]]
id = "orch"
write_scopes = ["plan"]
[[agents]]
id = "worker"
read_scopes = ["plan"]
[[agents]]
id = "verifier"
[[domains]]
id = "plan"
[interactions]
allowed = [{{ from = "external", to = "orch" }}, {{ from = "orch", to = "external" }}]
[multi_agent_handoffs]
default_handoff_mode = "full"
[recursion.default]
allowed_child_types = ["verify", "retrieve", "summarize"]
forbidden_child_types = ["publish"]
{policy}
"#
    );
    std::fs::write(dir.path().join("policy.toml"), bundle).expect("bundle");
    std::fs::write(dir.path().join("input.json"), r#"{"question": "why"}"#).expect("input");
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script.to_string()).expect("script");
    let mut workflow = format!(
        "name = \"research\"\npolicy = \"policy.toml\"\nentry = \"orch\"\ninput = \"input.json\"\ngoal = \"answer the question\"\n[budget]\n{budget}\n"
    );
    for agent in ["orch", "worker", "verifier"] {
        workflow.push_str(&format!(
            "[agents.{agent}]\ncommand = {EPISODE_AGENT:?}\nenv = {{ EPISODE_SCRIPT = {:?} }}\n",
            script_path.to_string_lossy()
        ));
    }
    let workflow_path = dir.path().join("workflow.toml");
    std::fs::write(&workflow_path, workflow).expect("workflow");
    let data = dir.path().join("data");
    let out = docket(
        &data,
        &[
            "run",
            workflow_path.to_str().expect("utf-8"),
            "--run-id",
            "run-ep",
        ],
    );
    let run = "run-ep".to_owned();
    let events = events(&data, &run);
    Ran {
        _dir: dir,
        data,
        run,
        out,
        events,
    }
}

fn spawn(agent: &str, episode_type: &str) -> Value {
    with_trigger(
        json!({"type": "spawn", "agent": agent, "episode_type": episode_type, "goal": format!("{episode_type} for the question")}),
    )
}

fn spawn_with(agent: &str, episode_type: &str, tokens: u64) -> Value {
    with_trigger(
        json!({"type": "spawn", "agent": agent, "episode_type": episode_type,
           "goal": "bounded", "budget": {"tokens": tokens}}),
    )
}

/// A spawn naming the first trigger the default bundle allows its child type's class
/// (docs/governance.md#recursion-classes); a type without a class names none.
fn with_trigger(mut spawn: Value) -> Value {
    let classes = docket_policies::RecursionClasses::default();
    let trigger = spawn["episode_type"]
        .as_str()
        .and_then(|t| classes.class_of(t))
        .and_then(|c| classes.rule(c).triggers.first().cloned());
    if let Some(trigger) = trigger {
        spawn["trigger"] = json!(trigger);
    }
    spawn
}

fn finish(status: &str, summary: &str) -> Value {
    json!({"type": "finish_episode", "result": {"status": status, "summary": summary}})
}

fn step(actions: &[Value]) -> Value {
    json!({ "actions": actions })
}

fn step_using(tokens: u64, actions: &[Value]) -> Value {
    json!({ "actions": actions, "usage": {"input_tokens": tokens} })
}

const BUDGET: &str = "tokens = 1000\ntool_calls = 100\nwall_time_ms = 600000";

#[test]
fn a_child_episode_runs_in_its_own_episode_and_its_result_returns_to_the_parent() {
    let r = run(
        "",
        BUDGET,
        &json!({
            "orch": [step(&[spawn("worker", "retrieve")]), step(&[finish("ok", "answered")])],
            "worker": [step(&[finish("ok", "found three sources")])],
        }),
    );
    assert_eq!(code(&r.out), 0, "{}", r.text());
    let started = r.of_kind("episode.started");
    assert_eq!(started[0]["payload"]["episode_id"], "ep-2");
    assert_eq!(started[0]["payload"]["depth"], 1);
    let calls = r.of_kind("agent.call_scheduled");
    let episodes: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["payload"]["request"]["target_agent"]
                    .as_str()
                    .unwrap_or(""),
                c["payload"]["request"]["episode_id"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        episodes,
        [("orch", "ep-1"), ("worker", "ep-2"), ("orch", "ep-1")]
    );
    // The parent's call made again records the call it repeats and only the input it adds
    // (decider version 9).
    assert_eq!(
        calls[2]["payload"]["again_of"],
        calls[0]["payload"]["request"]["request_id"]
    );
    let added = calls[2]["payload"]["request"]["decision_inputs"]
        .as_array()
        .expect("the added inputs");
    assert_eq!(added.len(), 1, "{added:?}");
    let back = &added[0];
    assert_eq!(back["output_type"], "episode_result");
    assert_eq!(back["payload"]["result"]["summary"], "found three sources");
    assert_eq!(
        r.stops(),
        [
            ("ep-2".to_owned(), "success_achieved".to_owned()),
            ("ep-1".to_owned(), "success_achieved".to_owned())
        ]
    );
    // `docket status` shows the tree with usage against budgets.
    let status = stdout(&docket(&r.data, &["status", &r.run]));
    assert!(status.contains("episodes:"), "{status}");
    assert!(
        status.contains("ep-1 research by orch: stopped (success_achieved); tokens 0/1000"),
        "{status}"
    );
    assert!(
        status.contains("ep-2 retrieve by worker: stopped (success_achieved); tokens 0/500"),
        "{status}"
    );
    let json: Value =
        serde_json::from_slice(&docket(&r.data, &["status", &r.run, "--json"]).stdout)
            .expect("status JSON");
    assert_eq!(json["episodes"][1]["parent"], "ep-1");
}

#[test]
fn each_recursion_limit_is_enforced_and_named_in_the_log() {
    // max_depth (default 2): the worker at depth 2 may not spawn a third level.
    let r = run(
        "",
        BUDGET,
        &json!({
            "orch": [step(&[spawn("worker", "retrieve")]), step(&[finish("ok", "done")])],
            "worker/ep-2": [step(&[spawn("worker", "retrieve")]), step(&[finish("ok", "partial")])],
            "worker/ep-3": [step(&[spawn("worker", "retrieve")])],
        }),
    );
    let d = r.denial();
    assert_eq!(d["condition"], "depth_exceeded");
    assert!(
        d["decision"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("child depth 3 > max_depth 2"),
        "{d}"
    );
    assert!(
        r.stops()
            .contains(&("ep-3".to_owned(), "depth_exceeded".to_owned()))
    );
    assert_eq!(code(&r.out), 0, "the parents go on: {}", r.text());

    // max_children.
    let r = run(
        "max_children = 1",
        BUDGET,
        &json!({
            "orch": [step(&[spawn("worker", "retrieve")]), step(&[spawn("worker", "retrieve")])],
            "worker": [step(&[finish("ok", "one")])],
        }),
    );
    assert!(
        r.denial()["decision"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("max_children 1 reached")
    );
    assert_eq!(code(&r.out), 4, "the root stopped: blocked. {}", r.text());
    assert!(stdout(&r.out).contains("policy_blocks"), "{}", r.text());

    // max_total_episodes.
    let r = run(
        "max_total_episodes = 2",
        BUDGET,
        &json!({
            "orch": [step(&[spawn("worker", "retrieve")]), step(&[finish("ok", "done")])],
            "worker": [step(&[spawn("worker", "summarize")])],
        }),
    );
    assert!(
        r.denial()["decision"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("max_total_episodes 2 reached")
    );
    assert_eq!(r.of_kind("episode.started").len(), 1);
    assert!(
        r.stops()
            .contains(&("ep-2".to_owned(), "policy_blocks".to_owned()))
    );

    // Allowed and forbidden child types.
    for (child_type, why) in [
        (
            "publish",
            "forbidden unless a human explicitly authorises it",
        ),
        ("engage", "not in allowed_child_types"),
    ] {
        let r = run(
            "",
            BUDGET,
            &json!({ "orch": [step(&[spawn("worker", child_type)])] }),
        );
        let d = r.denial();
        assert_eq!(d["condition"], "policy_blocks");
        assert!(
            d["decision"]["reason"].as_str().unwrap_or("").contains(why),
            "{d}"
        );
        assert_eq!(code(&r.out), 4, "{}", r.text());
    }
}

#[test]
fn each_stop_condition_is_reached_and_recorded_by_name() {
    // budget_exhausted: the root's 1000 tokens are gone.
    let r = run(
        "",
        BUDGET,
        &json!({ "orch": [step_using(1_200, &[spawn("worker", "retrieve")])] }),
    );
    assert_eq!(
        r.stops(),
        [("ep-1".to_owned(), "budget_exhausted".to_owned())]
    );
    assert_eq!(code(&r.out), 4, "{}", r.text());
    assert!(r.of_kind("episode.started").is_empty());

    // no_new_information: two consecutive children with nothing new.
    let r = run(
        "",
        BUDGET,
        &json!({
            "orch": [step(&[spawn("worker", "retrieve")])],
            "worker": [step(&[finish("ok", "")])],
        }),
    );
    assert!(
        r.stops()
            .contains(&("ep-1".to_owned(), "no_new_information".to_owned())),
        "{:?}",
        r.stops()
    );
    assert_eq!(r.of_kind("episode.started").len(), 2);
    assert_eq!(code(&r.out), 1, "{}", r.text());

    // failure_repeats: the same error class three times.
    let failed = json!({"type": "finish_episode", "result": {
        "status": "failed", "summary": "the source timed out", "error_class": "timeout",
        "artifacts_created": ["trace"]}});
    let r = run(
        "",
        BUDGET,
        &json!({
            "orch": [step(&[spawn("worker", "retrieve")])],
            "worker": [step(&[failed])],
        }),
    );
    assert!(
        r.stops()
            .contains(&("ep-1".to_owned(), "failure_repeats".to_owned())),
        "{:?}",
        r.stops()
    );
    assert_eq!(r.of_kind("episode.started").len(), 3);
    assert_eq!(code(&r.out), 1, "{}", r.text());

    // policy_blocks: a forbidden child type (more in the limits test).
    let r = run(
        "",
        BUDGET,
        &json!({ "orch": [step(&[spawn("worker", "publish")])] }),
    );
    assert_eq!(r.stops(), [("ep-1".to_owned(), "policy_blocks".to_owned())]);

    // depth_exceeded: see each_recursion_limit_is_enforced_and_named_in_the_log.

    // success_achieved: ok, verification needed, and a verify child passed.
    let verified = json!({"type": "finish_episode", "result": {
        "status": "ok", "summary": "answered", "verification_needed": true}});
    let r = run(
        "",
        BUDGET,
        &json!({
            "orch": [
                step(std::slice::from_ref(&verified)),
                step(&[spawn("verifier", "verify")]),
                step(&[verified]),
            ],
            "verifier": [step(&[finish("ok", "checked")])],
        }),
    );
    assert_eq!(
        r.denial()["decision"]["rule_id"],
        "stop_conditions.success_achieved"
    );
    assert_eq!(
        r.stops(),
        [
            ("ep-2".to_owned(), "success_achieved".to_owned()),
            ("ep-1".to_owned(), "success_achieved".to_owned())
        ]
    );
    assert_eq!(code(&r.out), 0, "{}", r.text());
    assert_eq!(
        r.of_kind("run.completed")[0]["payload"]["output"]["summary"],
        "answered"
    );
}

#[test]
fn a_child_gets_at_most_half_of_the_parents_remaining_budget() {
    // 200 of 1000 tokens used: at most 400 for a child.
    let r = run(
        "",
        BUDGET,
        &json!({ "orch": [step_using(200, &[spawn_with("worker", "retrieve", 401)])] }),
    );
    let d = r.denial();
    assert_eq!(
        d["decision"]["rule_id"],
        "recursion.budget.child_max_share_percent"
    );
    assert!(
        d["decision"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("(400)"),
        "{d}"
    );
    let r = run(
        "",
        BUDGET,
        &json!({
            "orch": [step_using(200, &[spawn_with("worker", "retrieve", 400)]), step(&[finish("ok", "x")])],
            "worker": [step(&[finish("ok", "y")])],
        }),
    );
    assert_eq!(
        r.of_kind("episode.started")[0]["payload"]["budget"]["tokens"],
        400
    );
    assert_eq!(code(&r.out), 0, "{}", r.text());
}

#[test]
fn past_70_percent_of_its_budget_an_episode_must_finalize_or_escalate() {
    let r = run(
        "",
        BUDGET,
        &json!({ "orch": [step_using(700, &[spawn_with("worker", "retrieve", 10)])] }),
    );
    let d = r.denial();
    assert_eq!(
        d["decision"]["rule_id"],
        "recursion.budget.finalize_or_escalate_at_percent"
    );
    assert!(
        d["decision"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("700/1000 tokens"),
        "{d}"
    );
    assert_eq!(code(&r.out), 4, "{}", r.text());
    // At 69% the same spawn is allowed.
    let r = run(
        "",
        BUDGET,
        &json!({
            "orch": [step_using(690, &[spawn_with("worker", "retrieve", 10)]), step(&[finish("ok", "x")])],
            "worker": [step(&[finish("ok", "y")])],
        }),
    );
    assert_eq!(r.of_kind("episode.started").len(), 1);
    assert_eq!(code(&r.out), 0, "{}", r.text());
}

#[test]
fn domain_writes_make_versions_and_a_non_owners_write_is_denied() {
    let write = |n: u32| json!({"type": "write_domain", "domain": "plan", "content": {"step": n}});
    let r = run(
        "",
        BUDGET,
        &json!({
            "orch": [step(&[write(1), write(2), spawn("worker", "retrieve")]), step(&[finish("ok", "x")])],
            "worker": [step(&[write(3)])],
        }),
    );
    let written: Vec<u64> = r
        .of_kind("domain.written")
        .iter()
        .map(|e| e["payload"]["version"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(written, [1, 2]);
    // The worker reads plan v2 as a read-only context input...
    let worker_call = r
        .of_kind("agent.call_scheduled")
        .into_iter()
        .find(|c| c["payload"]["request"]["target_agent"] == "worker")
        .expect("worker called");
    let ctx = &worker_call["payload"]["request"]["context_inputs"][0];
    assert_eq!(ctx["output_type"], "domain:plan@v2");
    assert_eq!(ctx["payload"], json!({"step": 2}));
    // ...and may not write it.
    let denied = r.of_kind("domain.write_denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["payload"]["agent"], "worker");
    assert_eq!(denied[0]["payload"]["decision"]["rule_id"], "domains.plan");
    assert!(
        r.stops()
            .contains(&("ep-2".to_owned(), "policy_blocks".to_owned()))
    );
    assert_eq!(code(&r.out), 0, "{}", r.text());
}

#[test]
fn a_needs_review_result_waits_for_approve_in_a_later_process() {
    let review = json!({"type": "finish_episode", "result": {
        "status": "needs_review", "summary": "draft post ready",
        "next_actions": [{"task": "publish", "lane": "api"}]}});
    let r = run("", BUDGET, &json!({ "orch": [step(&[review])] }));
    assert_eq!(code(&r.out), 3, "{}", r.text());
    let text = stdout(&r.out);
    assert!(
        text.contains("episode ep-1 (research, run by orch) needs review: draft post ready"),
        "{text}"
    );
    // A new process sees the run waiting, the ticket and the tree.
    let status = stdout(&docket(&r.data, &["status", &r.run]));
    assert!(
        status.contains("waiting for a human on ticket-1"),
        "{status}"
    );
    assert!(
        status.contains("ep-1 research by orch: waiting for review (needs_review)"),
        "{status}"
    );
    let ticket = &r.of_kind("human.escalated")[0]["payload"]["subject"];
    assert_eq!(ticket["type"], "episode_review");
    assert_eq!(ticket["episode_id"], "ep-1");
    assert!(ticket["asked"].as_str().unwrap_or("").contains("publish"));

    let out = docket(
        &r.data,
        &[
            "approve",
            &r.run,
            "ticket-1",
            "--by",
            "ana",
            "--reason",
            "reads well",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let log = events(&r.data, &r.run);
    let done: Vec<&Value> = log
        .iter()
        .filter(|e| e["kind"] == "run.completed")
        .collect();
    assert_eq!(done[0]["payload"]["output"]["summary"], "draft post ready");
    assert!(
        log.iter()
            .any(|e| e["kind"] == "episode.stopped"
                && e["payload"]["condition"] == "success_achieved")
    );
}

/// The `failure_repeats` stop condition (docs/governance.md#stop-conditions): an agent that keeps asking for what is refused (here a
/// forbidden child type, with `policy_blocks` not listed, so it is only told), reporting
/// no usage, is stopped at the third refusal instead of looping until a budget runs out:
/// `failure_repeats` names the refusal's class, and the run fails (exit 1).
#[test]
fn an_agent_repeating_a_refused_action_stops_failure_repeats() {
    let r = run(
        "stop_conditions = [\"budget_exhausted\", \"failure_repeats\", \"success_achieved\"]",
        BUDGET,
        &json!({ "orch": [step(&[spawn("worker", "publish")])] }),
    );
    assert_eq!(code(&r.out), 1, "{}", r.text());
    assert_eq!(
        r.of_kind("episode.action_denied").len(),
        3,
        "{:?}",
        r.kinds()
    );
    assert_eq!(
        r.stops(),
        [("ep-1".to_owned(), "failure_repeats".to_owned())]
    );
    let stopped = &r.of_kind("episode.stopped")[0]["payload"];
    assert_eq!(stopped["rule_id"], "stop_conditions.failure_repeats");
    assert!(
        stopped["reason"]
            .as_str()
            .is_some_and(|t| t.contains("`spawn_refused` repeated 3 times (limit 3)")),
        "{stopped}"
    );
    assert_eq!(r.kinds().last().map(String::as_str), Some("run.failed"));
    // The agent was told twice, then not again.
    assert_eq!(r.of_kind("agent.call_scheduled").len(), 3);
}

#[test]
fn a_childs_effect_without_permission_escalates_to_its_parent_with_its_result() {
    let policy = "[[side_effects]]\nid = \"post-api\"\nkind = \"post\"\nlane = \"api\"\ndry_run_required = false";
    let asked = json!({"type": "request_effect", "kind": "post", "lane": "api",
                       "idempotency_key": "post-1", "params": {"text": "three sources"}});
    let r = run(
        policy,
        BUDGET,
        &json!({
            "orch": [step(&[spawn("worker", "retrieve")]), step(&[finish("ok", "answered")])],
            "worker": [step(&[asked]), step(&[finish("ok", "found three sources")])],
        }),
    );
    assert_eq!(code(&r.out), 0, "{}", r.text());
    let refused = r.of_kind("effect.refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        refused[0]["payload"]["rule_id"],
        "agents.worker.side_effects"
    );
    assert_eq!(refused[0]["payload"]["escalated_to"], "ep-1");
    // The worker's episode finished ok: an escalated effect is no failure of it.
    assert_eq!(
        r.stops(),
        [
            ("ep-2".to_owned(), "success_achieved".to_owned()),
            ("ep-1".to_owned(), "success_achieved".to_owned())
        ]
    );
    // The orchestrator's next call carries the effect, as asked, in the child's result.
    let calls = r.of_kind("agent.call_scheduled");
    let back = calls
        .iter()
        .filter(|c| c["payload"]["request"]["target_agent"] == "orch")
        .filter_map(|c| c["payload"]["request"]["decision_inputs"].as_array())
        .flatten()
        .find(|i| i["output_type"] == "episode_result")
        .expect("the child's result reached orch");
    let escalated = &back["payload"]["result"]["escalated_effects"];
    assert_eq!(escalated[0]["kind"], "post");
    assert_eq!(escalated[0]["idempotency_key"], "post-1");
    assert_eq!(escalated[0]["params"], json!({"text": "three sources"}));
    assert_eq!(escalated[0]["asked_by"], "worker");
    let shown = stdout(&docket(&r.data, &["events", &r.run]));
    assert!(
        shown.contains("escalated to its parent episode ep-1"),
        "{shown}"
    );
}
