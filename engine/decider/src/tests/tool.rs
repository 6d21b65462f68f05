//! `decide/tool.rs`: governed tool calls, decided before they run. Given a run whose agent
//! `a` may use `search`, `Bash(*)` and the MCP tools `fs:*`, under a deny pattern
//! `Bash(rm -rf *)` and a review pattern, with `[tools]` sections for `search`, `Bash`,
//! and `fs` (an MCP server). Each log is checked with `replay_check`.

use serde_json::{Value, json};

use super::*;
use crate::protocol::{ToolSpec, ValidateResponse};
use crate::{
    NextStep, Rejection, RunEvent, RunStatus, TOOL_RESULT_TYPE, TOOLS_SOURCE, ToolFailed,
    ToolInput, ToolPhase, ToolReturned,
};
use docket_protocol::Action;

const TOOL_BUNDLE: &str = r#"
bundle = { id = "tools" }
[[agents]]
id = "external"
# The sender of tool results, declared so pair rules can scope them.
[[agents]]
id = "tools"
[[agents]]
id = "a"
allowed_tools = ["search", "Bash(*)", "fs:*", "undeclared"]
must_not_tools = ["fs:delete*"]

[interactions]
allowed = [{ from = "external", to = "a" }, { from = "a", to = "external" }]

[multi_agent_handoffs]
default_handoff_mode = "full"

[[multi_agent_handoffs.agent_handoff_rules]]
id = "tool-results-to-a"
from_agent_id = "tools"
to_agent_id = "a"
blocked_context_fields = ["result.secret"]

[[deny_patterns]]
id = "deny-rm"
pattern = "Bash(rm -rf *)"
reason = "recursive deletion is denied for every agent"

[[review_patterns]]
id = "review-push"
pattern = "Bash(git push*)"
reason = "pushes are reviewed"
"#;

const T1: &str = "run-1/tool-1";

fn tools_run() -> History {
    tools_run_at()
}

/// [`tools_run`] recorded by decider `version`.
fn tools_run_at() -> History {
    tools_run_adjusted(|_| {})
}

/// [`tools_run_at`] with `adjust` changing the recorded request further.
fn tools_run_adjusted(adjust: impl FnOnce(&mut crate::RunRequested)) -> History {
    started_under(TOOL_BUNDLE, "tools.toml", |run| {
        let spec = |f: fn(&mut ToolSpec)| {
            let mut s = ToolSpec::default();
            f(&mut s);
            s
        };
        run.workflow.tools = [
            (
                "search",
                spec(|s| {
                    s.command = Some("search-tool".into());
                    s.read_only = true;
                }),
            ),
            ("Bash", spec(|s| s.command = Some("bash-tool".into()))),
            ("fs", spec(|s| s.mcp = Some("fs-server".into()))),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        run.input = json!({"q": "docket"});
        adjust(run);
    })
}

fn call(name: &str, arguments: Value) -> Action {
    Action::CallTool {
        name: name.into(),
        arguments,
    }
}

fn returned(id: &str, result: Value) -> impl Input {
    let tool_call_id = id.to_owned();
    move |history: &mut History| {
        Command::RecordTool(ToolInput::Returned(ToolReturned {
            tool_call_id: tool_call_id.into(),
            result,
            at_ms: history.now(),
        }))
    }
}

fn failed(id: &str, code: &str) -> impl Input {
    let (tool_call_id, code) = (id.to_owned(), code.to_owned());
    move |history: &mut History| {
        Command::RecordTool(ToolInput::Failed(ToolFailed {
            tool_call_id: tool_call_id.into(),
            code,
            message: "the tool said no".into(),
            at_ms: history.now(),
        }))
    }
}

/// The `tool_result` the pending call carries last.
fn tool_result(run: &History) -> Value {
    let request = run.pending();
    let input = request.decision_inputs.last().expect("a decision input");
    assert_eq!(input.source_agent, TOOLS_SOURCE);
    assert_eq!(input.output_type, TOOL_RESULT_TYPE);
    Value::clone(&input.payload)
}

fn decision_rule(events: &[RunEvent]) -> (docket_policies::Verdict, String) {
    events
        .iter()
        .find_map(|e| match e {
            RunEvent::PolicyDecided { subject, decision } if subject == T1 => {
                Some((decision.verdict, decision.rule_id.to_string()))
            }
            _ => None,
        })
        .expect("the tool call was decided")
}

#[test]
pub(crate) fn an_allowed_call_is_scheduled_then_its_result_reaches_the_agent() {
    let mut run = tools_run();
    run.when(respond(vec![call("search", json!({"q": "docket"}))]))
        .then_kinds(&["agent.responded", "policy.decided", "tool.call_scheduled"])
        .then(|events| {
            assert_eq!(
                decision_rule(events),
                (
                    docket_policies::Verdict::Allow,
                    "agents.a.allowed_tools".into()
                )
            );
            let RunEvent::ToolCallScheduled(s) = &events[2] else {
                panic!("scheduled");
            };
            assert_eq!(s.request.tool, "search");
            assert_eq!(s.request.arguments, json!({"q": "docket"}));
            assert!(s.read_only);
        });
    // Nothing else is called while the tool runs, and the run does not end.
    assert_eq!(run.state.status, RunStatus::Running);
    assert!(run.state.pending_requests().is_empty());
    assert!(matches!(run.state.next_step(), NextStep::Tool(r) if r.tool_call_id.as_str() == T1));
    run.when(returned(T1, json!({"hits": 3, "secret": "s3"})))
        .then_kinds(&["tool.returned", "handoff.allowed", "agent.call_scheduled"])
        .then(|events| {
            let RunEvent::HandoffAllowed {
                from,
                to,
                output_type,
                ..
            } = &events[1]
            else {
                panic!("gated");
            };
            assert_eq!((from.as_str(), to.as_str()), (TOOLS_SOURCE, "a"));
            assert_eq!(output_type, TOOL_RESULT_TYPE);
        });
    let result = tool_result(&run);
    assert_eq!(result["status"], "returned");
    assert_eq!(result["tool_call_id"], T1);
    assert_eq!(result["result"]["hits"], 3);
    assert!(
        result["result"].get("secret").is_none(),
        "the gate's blocked fields apply to tool results: {result}"
    );
    assert_eq!(
        run.state.tool_calls()[&T1.into()].phase,
        ToolPhase::Returned
    );
    // A second outcome for the same call is refused, nothing recorded.
    assert!(matches!(
        run.when_rejected(returned(T1, json!(1))),
        Rejection::ToolCallSettled { .. }
    ));
    run.when(respond(vec![Action::Finish {
        output: json!({"ok": true}),
    }]));
    assert_eq!(run.state.status, RunStatus::Completed);
    run.replays();
}

#[test]
pub(crate) fn a_call_matching_a_deny_pattern_is_refused_before_it_runs() {
    let mut run = tools_run();
    run.when(respond(vec![call("Bash", json!("rm -rf /"))]))
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "tool.denied",
            "handoff.allowed",
            "agent.call_scheduled",
        ])
        .then(|events| {
            // The deny pattern wins over the agent's allowed `Bash(*)`.
            assert_eq!(
                decision_rule(events),
                (docket_policies::Verdict::Deny, "deny-rm".into())
            );
            assert!(!events.iter().any(|e| e.kind() == "tool.call_scheduled"));
        });
    let result = tool_result(&run);
    assert_eq!(result["status"], "denied");
    assert_eq!(result["rule_id"], "deny-rm");
    assert!(
        !run.state.tools_in_flight(),
        "nothing for an executor to run"
    );
    run.replays();
}

#[test]
pub(crate) fn a_tool_not_among_the_allowed_ones_or_without_executor_is_refused() {
    // Each on a run of its own: three refusals in one episode stop it (failure_repeats).
    let refused = |action: Action| {
        let mut run = tools_run();
        run.when(respond(vec![action]));
        let result = tool_result(&run);
        assert_eq!(result["status"], "denied", "{result}");
        run.replays();
        result
    };
    let result = refused(call("curl", json!("http://x")));
    assert_eq!(result["rule_id"], "agents.a.allowed_tools");
    // MUST NOT beats the allowed `fs:*`.
    let result = refused(call("fs:delete_file", json!({"path": "/x"})));
    assert_eq!(result["rule_id"], "agents.a.must_not_tools");
    // Allowed by the bundle, but no [tools] section serves it.
    let result = refused(call("undeclared", Value::Null));
    assert_eq!(result["rule_id"], "workflow.tools");
    // An MCP server's tool resolves to its section; an executor failure reaches the agent.
    let mut run = tools_run();
    run.when(respond(vec![call("fs:read_file", json!({"path": "/x"}))]))
        .then_kinds(&["agent.responded", "policy.decided", "tool.call_scheduled"]);
    let RunEvent::ToolCallScheduled(s) = &run.decided()[2] else {
        panic!("scheduled");
    };
    assert_eq!(
        (s.section.as_str(), s.request.tool.as_str()),
        ("fs", "read_file")
    );
    assert!(!s.read_only);
    run.when(failed(T1, "TOOL_UNAVAILABLE"));
    let result = tool_result(&run);
    assert_eq!(
        (result["status"].as_str(), result["code"].as_str()),
        (Some("failed"), Some("TOOL_UNAVAILABLE"))
    );
    run.replays();
}

#[test]
pub(crate) fn refused_calls_that_repeat_stop_the_episode() {
    // The default recursion policy lists `failure_repeats`.
    let mut run = tools_run();
    let mut denied = 0;
    for _ in 0..10 {
        if run.state.status != RunStatus::Running {
            break;
        }
        run.when(respond(vec![call("Bash", json!("rm -rf /"))]));
        denied += 1;
    }
    assert!(run.state.status.is_final(), "{:?}", run.state.status);
    assert!(denied < 10, "the episode stopped after repeated refusals");
    assert!(
        run.log
            .iter()
            .any(|e| matches!(e, RunEvent::EpisodeStopped { .. }))
    );
    run.replays();
}

#[test]
pub(crate) fn outcomes_for_unknown_calls_are_rejected() {
    let mut run = tools_run();
    assert!(matches!(
        run.when_rejected(returned("run-1/tool-9", json!(1))),
        Rejection::UnknownToolCall(_)
    ));
}

#[test]
fn malformed_call_tool_actions_are_refused_naming_the_field() {
    let request = docket_protocol::AgentRequest::new("r1", "external", "a", "work");
    let check = |text: &str| -> String {
        match crate::protocol::parse_response(text.as_bytes()) {
            Err(e) => e.to_string(),
            Ok(r) => r
                .validate_for(&request)
                .map_or_else(|e| e.to_string(), |()| "valid".to_owned()),
        }
    };
    let head =
        r#"{"request_id": "r1", "status": "SUCCESS", "confidence_level": "HIGH", "actions": "#;
    let missing = check(&format!(r#"{head}[{{"type": "call_tool"}}]}}"#));
    assert!(
        missing.contains("actions[0]") && missing.contains("name"),
        "{missing}"
    );
    let blank = check(&format!(
        r#"{head}[{{"type": "call_tool", "name": " "}}]}}"#
    ));
    assert_eq!(blank, "actions[0].name: must not be empty");
    let unknown = check(&format!(
        r#"{head}[{{"type": "call_tool", "name": "t", "args": 1}}]}}"#
    ));
    assert!(unknown.contains("args"), "{unknown}");
    let not_last = check(&format!(
        r#"{head}[{{"type": "call_tool", "name": "t"}}, {{"type": "finish"}}]}}"#
    ));
    assert!(
        not_last.starts_with("actions[0]: call_tool `t` must be the last action"),
        "{not_last}"
    );
    let ok = check(&format!(
        r#"{head}[{{"type": "call_tool", "name": "fs:read", "arguments": {{"p": 1}}}}]}}"#
    ));
    assert_eq!(ok, "valid");
}

#[test]
fn a_tool_name_no_pattern_can_parse_is_refused_not_run() {
    let mut run = tools_run();
    run.when(respond(vec![call("rm -rf", Value::Null)]));
    let result = tool_result(&run);
    assert_eq!(result["status"], "denied");
    assert!(
        result["reason"]
            .as_str()
            .is_some_and(|r| r.contains("malformed")),
        "{result}"
    );
    run.replays();
}

#[test]
pub(crate) fn a_fan_out_branch_waiting_for_a_tool_is_not_joined_early() {
    let src = r#"
bundle = { id = "fan" }
agents = [{ id = "external" }, { id = "hub" }, { id = "left", allowed_tools = ["search"] }, { id = "right" }, { id = "sink" }]
[interactions]
allowed = [
  { from = "external", to = "hub" }, { from = "hub", to = "left" }, { from = "hub", to = "right" },
  { from = "left", to = "sink" }, { from = "right", to = "sink" }, { from = "sink", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;
    let mut run = started_under(src, "fan.toml", |run| {
        run.workflow.entry = "hub".into();
        run.workflow.agents = ["hub", "left", "right", "sink"]
            .into_iter()
            .map(|a| (a.into(), in_process()))
            .collect();
        let search = ToolSpec {
            command: Some("search-tool".into()),
            ..ToolSpec::default()
        };
        run.workflow.tools = [("search".to_owned(), search)].into_iter().collect();
    });
    run.when(respond(vec![
        handoff("left", "job", json!({"n": 1})),
        handoff("right", "job", json!({"n": 1})),
    ]));
    run.when(respond(vec![call("search", json!("q"))]).by("left"));
    run.when(respond(vec![handoff("sink", "job", json!({"n": 2}))]).by("right"));
    assert!(
        run.decided().iter().any(|e| e.kind() == "output.held"),
        "right's output waits for left's branch: {:?}",
        run.decided().iter().map(RunEvent::kind).collect::<Vec<_>>()
    );
    assert!(
        run.state.pending_requests().is_empty(),
        "sink is not called yet"
    );
    run.when(returned(T1, json!({"hits": 1})));
    run.when(respond(vec![handoff("sink", "job", json!({"n": 2}))]).by("left"));
    assert!(run.decided().iter().any(|e| e.kind() == "fanout.joined"));
    run.replays();
}

#[test]
pub(crate) fn a_call_matching_a_review_pattern_waits_for_a_human_who_approves_it() {
    let mut run = tools_run();
    run.when(respond(vec![call("Bash", json!("git push origin main"))]))
        .then_kinds(&["agent.responded", "policy.decided", "human.escalated"])
        .then(|events| {
            let RunEvent::Escalated {
                reason, subject, ..
            } = &events[2]
            else {
                panic!("a ticket");
            };
            // The ticket names the tool, the argument and the pattern.
            for part in [
                "`Bash`",
                "`git push origin main`",
                "review-push",
                "Bash(git push*)",
            ] {
                assert!(reason.contains(part), "{part} in {reason}");
            }
            let crate::TicketSubject::Tool {
                tool_call_id,
                invocation,
                rule_id,
                pattern,
                ..
            } = subject
            else {
                panic!("a tool ticket: {subject:?}");
            };
            assert_eq!(tool_call_id.as_str(), T1);
            assert_eq!(invocation, "Bash(git push origin main)");
            assert_eq!(
                (rule_id.as_str(), pattern.as_str()),
                ("review-push", "Bash(git push*)")
            );
        });
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    assert_eq!(
        run.state.tool_calls()[&T1.into()].phase,
        ToolPhase::AwaitingReview
    );
    assert!(
        run.state.tools_in_flight(),
        "the run does not end meanwhile"
    );
    run.when(approve_open())
        .then_kinds(&["human.decided", "tool.call_scheduled"])
        .then(|events| {
            let RunEvent::ToolCallScheduled(s) = &events[1] else {
                panic!("scheduled");
            };
            // The id the ticket reserved.
            assert_eq!(s.tool_call_id.as_str(), T1);
            assert_eq!(s.request.arguments, json!("git push origin main"));
        });
    assert_eq!(run.state.status, RunStatus::Running);
    // The result goes back through the gate, as any tool's.
    run.when(returned(T1, json!({"pushed": true, "secret": "s"})))
        .then_kinds(&["tool.returned", "handoff.allowed", "agent.call_scheduled"]);
    let result = tool_result(&run);
    assert_eq!(result["status"], "returned");
    assert!(result["result"].get("secret").is_none(), "{result}");
    // The next call takes the next id.
    run.when(respond(vec![call("search", json!("q"))]))
        .then_kinds(&["agent.responded", "policy.decided", "tool.call_scheduled"]);
    assert!(run.state.tool_calls().contains_key(&"run-1/tool-2".into()));
    run.replays();
}

#[test]
pub(crate) fn a_reviewed_call_the_human_denies_is_told_to_the_agent_and_the_run_goes_on() {
    let mut run = tools_run();
    run.when(respond(vec![call("Bash", json!("git push --force"))]));
    run.when(deny_open().by("lee").because("not on Fridays"))
        .then_kinds(&[
            "human.decided",
            "tool.denied",
            "handoff.allowed",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let RunEvent::ToolDenied(d) = &events[1] else {
                panic!("denied");
            };
            assert_eq!(d.tool_call_id.as_str(), T1);
            assert_eq!(d.rule_id, "review-push");
            assert!(d.reason.contains("lee denied") && d.reason.contains("not on Fridays"));
        });
    assert_eq!(run.state.status, RunStatus::Running);
    let result = tool_result(&run);
    assert_eq!(result["status"], "denied");
    assert_eq!(result["rule_id"], "review-push");
    assert_eq!(run.state.tool_calls()[&T1.into()].phase, ToolPhase::Denied);
    run.when(respond(vec![Action::Finish {
        output: json!({"ok": false}),
    }]));
    assert_eq!(run.state.status, RunStatus::Completed);
    run.replays();
}

// ---------------------------------------------------------------------------------------
// Task restrictions (decider version 8): an orchestrator's handoff gives its specialist a
// task that forbids tools the bundle allows it.

const TASK_BUNDLE: &str = r#"
bundle = { id = "tasks" }
agents = [
  { id = "external" },
  { id = "orch" },
  { id = "a", allowed_tools = ["search", "Bash(*)"] },
]
[interactions]
allowed = [{ from = "external", to = "orch" }, { from = "orch", to = "a" }, { from = "a", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
[[deny_patterns]]
id = "deny-rm"
pattern = "Bash(rm -rf *)"
reason = "never"
"#;

/// `run-1` under the task bundle recorded by `version`: orch hands a job to `a` with the
/// task `t-1`, which forbids `Bash(git *)`; a's call is pending.
fn tasked_run() -> History {
    let mut run = started_under(TASK_BUNDLE, "tasks.toml", |run| {
        run.workflow.entry = "orch".into();
        run.workflow.agents = ["orch", "a"]
            .into_iter()
            .map(|a| (a.into(), in_process()))
            .collect();
        let bash = ToolSpec {
            command: Some("bash-tool".into()),
            ..ToolSpec::default()
        };
        run.workflow.tools = [("Bash".to_owned(), bash)].into_iter().collect();
    });
    run.when(respond(vec![Action::Handoff {
        to: "a".into(),
        output_type: "job".into(),
        payload: json!({"fix": "the build"}),
        task: Some(crate::TaskRestrictions {
            id: "t-1".into(),
            denied_tools: vec!["Bash(git *)".into()],
        }),
    }]));
    run
}

#[test]
pub(crate) fn a_task_restriction_denies_a_call_tool_the_agent_is_allowed() {
    let mut run = tasked_run();
    // The receiving call records the task.
    let request = run.pending();
    assert_eq!(request.target_agent, "a");
    let task = request.task.clone().expect("the call carries its task");
    assert_eq!(
        (task.id.as_str(), task.denied_tools.as_slice()),
        ("t-1", &["Bash(git *)".to_owned()][..])
    );
    run.when(respond(vec![call("Bash", json!("git push"))]))
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "tool.denied",
            "handoff.allowed",
            "agent.call_scheduled",
        ])
        .then(|events| {
            assert_eq!(
                decision_rule(events),
                (docket_policies::Verdict::Deny, "task".into())
            );
        });
    let result = tool_result(&run);
    assert_eq!(result["rule_id"], "task");
    assert!(
        result["reason"]
            .as_str()
            .is_some_and(|r| r.contains("Bash(git *)")),
        "{result}"
    );
    // The call that carries the result keeps the task: the next call is decided with it.
    assert_eq!(run.pending().task, Some(task));
    run.when(respond(vec![call("Bash", json!("ls"))]))
        .then_kinds(&["agent.responded", "policy.decided", "tool.call_scheduled"]);
    run.replays();
}

#[test]
pub(crate) fn a_task_restriction_rejects_a_reported_tool_call() {
    let mut run = tasked_run();
    run.when(respond(vec![Action::Finish { output: json!({}) }]).tool_call("Bash", "git log"))
        .then(|events| {
            let rules: Vec<&str> = events
                .iter()
                .filter_map(|e| match e {
                    RunEvent::PolicyDecided { decision, .. } => Some(decision.rule_id.as_ref()),
                    _ => None,
                })
                .collect();
            assert_eq!(rules.first(), Some(&"task"), "{rules:?}");
        });
    // The output is rejected (a boundary violation): a is asked again, nothing finished.
    assert_eq!(run.state.status, RunStatus::Running);
    assert_eq!(run.pending().target_agent, "a");
    assert!(run.pending().attempt > 1);
    // The retry is the same task: it carries the same restrictions.
    assert_eq!(
        run.pending().task.map(|t| t.id),
        Some("t-1".to_owned()),
        "the retry keeps the task"
    );
    run.replays();
}

#[test]
fn malformed_tasks_are_refused_naming_the_field() {
    let request = docket_protocol::AgentRequest::new("r1", "external", "a", "work");
    let check = |task: &str| -> String {
        let text = format!(
            r#"{{"request_id": "r1", "status": "SUCCESS", "confidence_level": "HIGH", "actions": [{{"type": "handoff", "to": "b", "output_type": "job", "payload": {{}}, "task": {task}}}]}}"#
        );
        match crate::protocol::parse_response(text.as_bytes()) {
            Err(e) => e.to_string(),
            Ok(r) => r
                .validate_for(&request)
                .map_or_else(|e| e.to_string(), |()| "valid".to_owned()),
        }
    };
    assert_eq!(
        check(r#"{"id": "t", "denied_tools": ["Bash(git *)"]}"#),
        "valid"
    );
    assert_eq!(
        check(r#"{"id": " "}"#),
        "actions[0].task.id: must not be empty"
    );
    let bad = check(r#"{"id": "t", "denied_tools": ["Bash(git"]}"#);
    assert!(
        bad.starts_with("actions[0].task.denied_tools[0]: \"Bash(git\" is not a tool pattern"),
        "{bad}"
    );
    let unknown = check(r#"{"id": "t", "allowed_tools": ["x"]}"#);
    assert!(unknown.contains("allowed_tools"), "{unknown}");
    let missing = check(r#"{"denied_tools": []}"#);
    assert!(missing.contains("id"), "{missing}");
    let not_object = check(r#""t-1""#);
    assert!(
        not_object.contains("task") || not_object.contains("actions[0]"),
        "{not_object}"
    );
}

#[test]
pub(crate) fn observations_none_tells_the_outcome_without_the_result() {
    let src = TOOL_BUNDLE.replace(
        "default_handoff_mode = \"full\"\n",
        "default_handoff_mode = \"full\"\ncontext_parts = { observations = \"none\" }\n",
    );
    let mut run = started_under(&src, "tools.toml", |run| {
        run.workflow.tools = [(
            "search".to_owned(),
            ToolSpec {
                command: Some("search-tool".into()),
                ..ToolSpec::default()
            },
        )]
        .into_iter()
        .collect();
    });
    run.when(respond(vec![call("search", json!("q"))]));
    run.when(returned(T1, json!({"hits": 3})));
    let result = tool_result(&run);
    assert_eq!(result["status"], "returned");
    assert!(result.get("result").is_none(), "{result}");
    let request_id = run.pending().request_id.to_string();
    assert!(run.log.iter().any(|e| matches!(e,
        RunEvent::PolicyDecided { subject, decision }
            if *subject == request_id && decision.reason.contains("observations = none"))));
    run.replays();
}

/// [`tools_run_at`] with a root budget of `limit` tool calls.
fn budgeted_tools_run(limit: u64) -> History {
    tools_run_adjusted(|run| run.workflow.budget.tool_calls = limit)
}

/// The root episode's `tool_calls` meter: (used, limit).
fn tool_meter(run: &History) -> (u64, u64) {
    let root = run
        .state
        .episodes
        .get(&docket_protocol::EpisodeId::root())
        .expect("the root episode");
    let m = &root.budget[crate::state::episode::TOOL_CALLS];
    (m.used, m.limit)
}

#[test]
pub(crate) fn a_scheduled_tool_call_is_charged_to_the_budget() {
    // Ten calls allowed: the first scheduled call counts one; a denied one counts none.
    let mut run = budgeted_tools_run(10);
    run.when(respond(vec![call("search", json!({"q": "x"}))]));
    assert_eq!(tool_meter(&run), (1, 10));
    run.when(returned(T1, json!({"hits": 1})));
    run.when(respond(vec![call("Bash", json!("rm -rf /"))]));
    assert_eq!(tool_meter(&run), (1, 10), "a denied call never ran");
    run.replays();
}

#[test]
pub(crate) fn governed_tool_calls_exhaust_the_budget_and_stop_the_episode() {
    // Two calls allowed: the second reaches the limit, so the answer after it stops the
    // run's episode (`budget_exhausted`) and its finish is not carried out.
    let mut run = budgeted_tools_run(2);
    run.when(respond(vec![call("search", json!({"q": "1"}))]));
    run.when(returned(T1, json!({"hits": 1})));
    run.when(respond(vec![call("search", json!({"q": "2"}))]));
    run.when(returned("run-1/tool-2", json!({"hits": 2})));
    assert_eq!(tool_meter(&run), (2, 2));
    run.when(respond(vec![Action::Finish {
        output: json!({"ok": true}),
    }]))
    .then(|events| {
        assert!(
            events.iter().any(|e| matches!(
                e,
                RunEvent::EpisodeStopped { condition, .. }
                    if *condition == docket_policies::StopCondition::BudgetExhausted
            )),
            "the episode stops on its exhausted tool_calls budget: {:?}",
            events.iter().map(RunEvent::kind).collect::<Vec<_>>()
        );
    });
    assert_ne!(run.state.status, RunStatus::Completed);
    run.replays();
}
