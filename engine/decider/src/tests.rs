//! Unit tests of the decider's transitions (the table in `transitions.rs` names which test
//! covers which row) and the replay property.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use docket_policies::{InputKind, PolicyBundle};

use super::*;
use crate::protocol::{Action, AgentResponse, Confidence, ToolCall};
use crate::workflow::{AgentSpec, ExecutorSpec, WorkflowSpec};

const BUNDLE: &str = r#"
bundle = { id = "t" }
[[agents]]
id = "external"
[[agents]]
id = "a"
allowed_tools = ["Read", "Bash(*)"]
[[agents]]
id = "b"
[[agents.capabilities]]
code = "questions"
[agents.capabilities.input_schema]
type = "object"
required = ["topics"]
[[agents]]
id = "c"
[agents.context_requirements]
handoff_mode = "scoped"
allowed_context_fields = ["keep"]

[[output_types]]
id = "req"
schema = { type = "object", required = ["x"] }

[interactions]
flow_order = ["external", "a", "b", "c", "external"]
allowed = [
  { from = "external", to = "a", output_type = "req" },
  { from = "a", to = "b" },
  { from = "b", to = "c" },
  { from = "c", to = "external" },
]
context = [{ from = "a", to = "c" }]
forbidden = [{ from = "c", to = "a", reason = "Reverse flow not allowed" }]

[multi_agent_handoffs]
default_handoff_mode = "full"

[[deny_patterns]]
id = "deny-rm"
pattern = "Bash(rm -rf *)"
reason = "recursive deletion is denied for every agent"

[[responsibility_locks]]
id = "lock"
capability = "questions"
owner = "b"
forbidden_requesters = ["c"]
reason = "Guardrail 3: question generation lock"
"#;

fn bundle() -> PolicyBundle {
    PolicyBundle::from_toml_str(BUNDLE, "t.toml").expect("test bundle is valid")
}

fn workflow() -> WorkflowSpec {
    let agent = || AgentSpec {
        executor: ExecutorSpec::InProcess { in_process: true },
        timeout_ms: None,
        classifiers: Vec::new(),
    };
    WorkflowSpec {
        name: "t".into(),
        policy: "t.toml".into(),
        entry: "a".into(),
        input_type: None,
        goal: None,
        budget: Default::default(),
        input: None,
        agents: ["a", "b", "c"]
            .into_iter()
            .map(|a| (a.to_owned(), agent()))
            .collect::<BTreeMap<_, _>>(),
        effects: Default::default(),
    }
}

fn start_command(b: &PolicyBundle) -> Command {
    Command::Start(RunRequested {
        run_id: "run-1".into(),
        workflow: workflow(),
        bundle_source: BUNDLE.into(),
        bundle_source_name: "t.toml".into(),
        bundle_hash: b.hash().to_hex(),
        input: json!({"x": 1}),
        at_ms: 1_000,
        decider_version: DECIDER_VERSION,
    })
}

/// Decides and folds; returns the batch.
fn step(state: &mut RunState, b: &PolicyBundle, command: Command) -> Vec<RunEvent> {
    let events = decide(state, b, command).expect("command applies");
    for e in &events {
        state.apply(e);
    }
    events
}

fn only_pending(state: &RunState) -> String {
    let pending = state.pending_requests();
    assert_eq!(pending.len(), 1, "{pending:?}");
    pending[0].request_id.clone()
}

fn respond(state: &mut RunState, b: &PolicyBundle, actions: Vec<Action>) -> Vec<RunEvent> {
    let id = only_pending(state);
    let response = AgentResponse::success(id.clone(), Confidence::High, actions);
    step(
        state,
        b,
        Command::RecordResponse {
            request_id: id,
            response,
            at_ms: 2_000,
        },
    )
}

fn fail(state: &mut RunState, b: &PolicyBundle) -> Vec<RunEvent> {
    let id = only_pending(state);
    step(
        state,
        b,
        Command::RecordFailure {
            request_id: id,
            code: "AGENT_CRASHED".into(),
            message: "exit code 3".into(),
            at_ms: 2_000,
        },
    )
}

fn handoff(to: &str, output_type: &str, payload: Value) -> Action {
    Action::Handoff {
        to: to.into(),
        output_type: output_type.into(),
        payload,
    }
}

fn kinds(events: &[RunEvent]) -> Vec<&'static str> {
    events.iter().map(RunEvent::kind).collect()
}

fn started() -> (RunState, PolicyBundle, Vec<RunEvent>) {
    let b = bundle();
    let mut state = RunState::default();
    let log = step(&mut state, &b, start_command(&b));
    (state, b, log)
}

#[test]
pub(crate) fn start_schedules_the_entry_call() {
    let (state, _, events) = started();
    assert_eq!(
        kinds(&events),
        ["run.requested", "handoff.allowed", "agent.call_scheduled"]
    );
    let RunEvent::AgentCallScheduled { request, .. } = &events[2] else {
        panic!("third event schedules the call");
    };
    assert_eq!(request.request_id, "run-1/call-1");
    assert_eq!(request.target_agent, "a");
    assert_eq!(request.decision_inputs[0].source_agent, "external");
    assert_eq!(request.decision_inputs[0].output_type, "req");
    assert_eq!(request.timeout_ms, 30_000);
    assert_eq!(state.status, RunStatus::Running);
    assert_eq!(state.version, 3);
}

#[test]
pub(crate) fn a_pipeline_runs_to_completion() {
    let (mut state, b, mut log) = started();
    log.extend(respond(
        &mut state,
        &b,
        vec![handoff("b", "ab", json!({"y": 2}))],
    ));
    log.extend(respond(
        &mut state,
        &b,
        vec![handoff("c", "bc", json!({"keep": 1, "drop": 2}))],
    ));
    let last = respond(
        &mut state,
        &b,
        vec![Action::Finish {
            output: json!({"done": true}),
        }],
    );
    assert_eq!(
        kinds(&last),
        [
            "agent.responded",
            "handoff.allowed",
            "episode.finished",
            "episode.stopped",
            "run.completed"
        ]
    );
    log.extend(last);
    assert_eq!(state.status, RunStatus::Completed);
    assert_eq!(state.output, Some(json!({"done": true})));
    let path: Vec<(&str, &str)> = state
        .handoffs
        .iter()
        .filter(|h| h.input == InputKind::Decision)
        .map(|h| (h.from.as_str(), h.to.as_str()))
        .collect();
    assert_eq!(
        path,
        [("external", "a"), ("a", "b"), ("b", "c"), ("c", "external")]
    );
    replay_check(&log, &b).expect("the log replays");
}

#[test]
pub(crate) fn context_edges_arrive_as_context_inputs() {
    let (mut state, b, _) = started();
    respond(
        &mut state,
        &b,
        vec![handoff("b", "ab", json!({"keep": 1, "secret": 2}))],
    );
    let events = respond(
        &mut state,
        &b,
        vec![handoff("c", "bc", json!({"keep": 3, "drop": 4}))],
    );
    let request = state.pending_requests()[0].clone();
    // c's scoped mode keeps only `keep`, for the decision input and the context input.
    assert_eq!(request.decision_inputs[0].payload, json!({"keep": 3}));
    assert_eq!(request.context_inputs.len(), 1);
    assert_eq!(request.context_inputs[0].source_agent, "a");
    assert_eq!(request.context_inputs[0].payload, json!({"keep": 1}));
    assert!(events.iter().any(|e| matches!(
        e,
        RunEvent::HandoffAllowed { from, input: InputKind::Context, .. } if from == "a"
    )));
}

#[test]
pub(crate) fn forbidden_handoffs_block_with_the_seed_reason() {
    let (mut state, b, _) = started();
    respond(&mut state, &b, vec![handoff("b", "ab", json!({}))]);
    respond(&mut state, &b, vec![handoff("c", "bc", json!({}))]);
    let events = respond(&mut state, &b, vec![handoff("a", "ca", json!({}))]);
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "handoff.denied",
            "episode.stopped",
            "run.blocked"
        ]
    );
    let RunEvent::HandoffDenied {
        error, decision, ..
    } = &events[1]
    else {
        panic!("denied");
    };
    assert_eq!(decision.reason.as_ref(), "Reverse flow not allowed");
    assert_eq!(error["error"], true);
    assert_eq!(error["agent"], "c");
    assert_eq!(error["errorType"], "policy_violation");
    assert_eq!(error["message"], "Reverse flow not allowed");
    assert_eq!(state.status, RunStatus::Blocked);
}

#[test]
pub(crate) fn contract_mismatch_stops_the_flow() {
    let b = bundle();
    let mut state = RunState::default();
    let Command::Start(mut run) = start_command(&b) else {
        unreachable!()
    };
    run.input = json!({"no_x": true});
    let events = step(&mut state, &b, Command::Start(run));
    assert_eq!(
        kinds(&events),
        [
            "run.requested",
            "handoff.denied",
            "episode.stopped",
            "run.blocked"
        ]
    );
    let RunEvent::HandoffDenied { error, .. } = &events[1] else {
        panic!("denied");
    };
    assert_eq!(error["errorType"], "validation_error");
    assert_eq!(state.status, RunStatus::Blocked);
}

#[test]
pub(crate) fn failures_go_retry_escalate_block() {
    let (mut state, b, mut log) = started();
    let first = fail(&mut state, &b);
    assert_eq!(
        kinds(&first),
        [
            "agent.call_failed",
            "policy.decided",
            "agent.call_scheduled"
        ]
    );
    assert_eq!(state.pending_requests()[0].attempt, 2);
    assert_eq!(state.pending_requests()[0].request_id, "run-1/call-2");
    assert_eq!(
        state.pending_requests()[0].context["previous_attempt"]["error_code"],
        "AGENT_CRASHED",
        "the retry carries what happened to the last attempt"
    );
    log.extend(first);
    let second = fail(&mut state, &b);
    assert_eq!(
        kinds(&second),
        ["agent.call_failed", "policy.decided", "human.escalated"]
    );
    assert_eq!(state.status, RunStatus::WaitingForHuman);
    log.extend(second);
    log.extend(step(
        &mut state,
        &b,
        Command::RecordHumanDecision {
            ticket: "ticket-1".into(),
            approved: true,
            by: "ana".into(),
            reason: "try once more".into(),
            choice: None,
            at_ms: 3_000,
        },
    ));
    assert_eq!(state.status, RunStatus::Running);
    assert_eq!(state.pending_requests()[0].attempt, 3);
    let third = fail(&mut state, &b);
    assert_eq!(
        kinds(&third),
        [
            "agent.call_failed",
            "policy.decided",
            "episode.stopped",
            "run.blocked"
        ]
    );
    let RunEvent::RunBlocked { error, .. } = &third[3] else {
        panic!("blocked");
    };
    assert_eq!(error["errorType"], "retry_limit_exceeded");
    assert_eq!(error["retryCount"], 2);
    log.extend(third);
    assert_eq!(state.status, RunStatus::Blocked);
    replay_check(&log, &b).expect("the log replays");
}

#[test]
pub(crate) fn human_denial_blocks() {
    let (mut state, b, _) = started();
    fail(&mut state, &b);
    fail(&mut state, &b);
    let events = step(
        &mut state,
        &b,
        Command::RecordHumanDecision {
            ticket: "ticket-1".into(),
            approved: false,
            by: "ana".into(),
            reason: "agent is broken".into(),
            choice: None,
            at_ms: 3_000,
        },
    );
    assert_eq!(
        kinds(&events),
        ["human.decided", "episode.stopped", "run.blocked"]
    );
    assert_eq!(state.status, RunStatus::Blocked);
}

#[test]
pub(crate) fn escalate_action_waits_and_approval_proceeds() {
    let (mut state, b, _) = started();
    let events = respond(
        &mut state,
        &b,
        vec![
            Action::Escalate {
                reason: "unsure".into(),
            },
            handoff("b", "ab", json!({})),
        ],
    );
    assert_eq!(kinds(&events), ["agent.responded", "human.escalated"]);
    assert!(state.pending.is_empty());
    let events = step(
        &mut state,
        &b,
        Command::RecordHumanDecision {
            ticket: "ticket-1".into(),
            approved: true,
            by: "ana".into(),
            reason: "fine".into(),
            choice: None,
            at_ms: 3_000,
        },
    );
    assert_eq!(
        kinds(&events),
        ["human.decided", "handoff.allowed", "agent.call_scheduled"]
    );
    assert_eq!(state.pending_requests()[0].target_agent, "b");
}

#[test]
pub(crate) fn denied_tool_call_is_a_boundary_violation() {
    let (mut state, b, _) = started();
    let id = only_pending(&state);
    let mut response = AgentResponse::success(
        id.clone(),
        Confidence::High,
        vec![handoff("b", "ab", json!({}))],
    );
    response.tool_calls = vec![ToolCall {
        name: "Bash".into(),
        arguments: "rm -rf /".into(),
    }];
    response.usage.tool_calls = 1;
    let events = step(
        &mut state,
        &b,
        Command::RecordResponse {
            request_id: id,
            response,
            at_ms: 2_000,
        },
    );
    // The tool decision, then the retry path: no handoff was accepted.
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "policy.decided",
            "policy.decided",
            "agent.call_scheduled"
        ]
    );
    let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
        panic!("tool decision");
    };
    assert_eq!(decision.rule_id.as_ref(), "deny-rm");
    assert_eq!(state.pending_requests()[0].target_agent, "a");
}

#[test]
pub(crate) fn guardrail_3_lock_blocks_capability_requests() {
    let (mut state, b, _) = started();
    respond(&mut state, &b, vec![handoff("b", "ab", json!({}))]);
    respond(&mut state, &b, vec![handoff("c", "bc", json!({}))]);
    let events = respond(
        &mut state,
        &b,
        vec![Action::RequestCapability {
            target_agent: "b".into(),
            capability_code: "questions".into(),
            inputs: serde_json::Map::new(),
        }],
    );
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "policy.decided",
            "episode.stopped",
            "run.blocked"
        ]
    );
    let RunEvent::RunBlocked { rule_id, .. } = &events[3] else {
        panic!("blocked");
    };
    assert_eq!(rule_id, "lock");
}

#[test]
pub(crate) fn allowed_capability_answer_returns_to_the_asker() {
    let (mut state, b, _) = started();
    let mut inputs = serde_json::Map::new();
    inputs.insert("topics".into(), json!(["t"]));
    respond(
        &mut state,
        &b,
        vec![Action::RequestCapability {
            target_agent: "b".into(),
            capability_code: "questions".into(),
            inputs,
        }],
    );
    assert_eq!(state.pending_requests()[0].target_agent, "b");
    respond(
        &mut state,
        &b,
        vec![Action::Finish {
            output: json!({"q": 1}),
        }],
    );
    let back = state.pending_requests()[0].clone();
    assert_eq!(back.target_agent, "a");
    let last = back.decision_inputs.last().expect("the answer");
    assert_eq!(
        (last.source_agent.as_str(), last.output_type.as_str()),
        ("b", "questions")
    );
    assert_eq!(last.payload, json!({"q": 1}));
}

#[test]
pub(crate) fn final_runs_reject_commands() {
    let (mut state, b, _) = started();
    let id = only_pending(&state);
    respond(&mut state, &b, vec![handoff("c", "ac", json!({}))]); // a → c is a skip
    assert_eq!(state.status, RunStatus::Blocked);
    let err = decide(
        &state,
        &b,
        Command::RecordFailure {
            request_id: id,
            code: "X".into(),
            message: "x".into(),
            at_ms: 0,
        },
    )
    .expect_err("blocked runs take nothing");
    assert!(matches!(err, Rejection::Finished(_)));
}

#[test]
pub(crate) fn rejections_are_typed() {
    let (state, b, _) = started();
    let unknown = Command::RecordFailure {
        request_id: "run-1/call-9".into(),
        code: "X".into(),
        message: "x".into(),
        at_ms: 0,
    };
    assert_eq!(
        decide(&state, &b, unknown),
        Err(Rejection::UnknownCall("run-1/call-9".into()))
    );
    assert!(matches!(
        decide(&state, &b, start_command(&b)),
        Err(Rejection::AlreadyStarted(_))
    ));
    let ticket = Command::RecordHumanDecision {
        ticket: "ticket-1".into(),
        approved: true,
        by: "x".into(),
        reason: "x".into(),
        choice: None,
        at_ms: 0,
    };
    assert_eq!(
        decide(&state, &b, ticket),
        Err(Rejection::UnknownTicket("ticket-1".into()))
    );
    let other = PolicyBundle::from_toml_str(
        &format!("{BUNDLE}\n# edited\n[defaults]\ntimeout_ms = 5\n"),
        "t.toml",
    )
    .expect("valid");
    assert!(matches!(
        decide(
            &state,
            &other,
            Command::RecordFailure {
                request_id: "run-1/call-1".into(),
                code: "X".into(),
                message: "x".into(),
                at_ms: 0,
            }
        ),
        Err(Rejection::BundleMismatch { .. })
    ));
    assert_eq!(
        decide(
            &RunState::default(),
            &b,
            Command::RecordFailure {
                request_id: "x".into(),
                code: "X".into(),
                message: "x".into(),
                at_ms: 0,
            }
        ),
        Err(Rejection::NotStarted)
    );
}

#[test]
pub(crate) fn events_encode_with_sorted_keys_and_decode_back() {
    let (_, _, events) = started();
    for event in &events {
        let bytes = event.encode();
        let text = String::from_utf8(bytes.clone()).expect("utf-8");
        let value: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(docket_policies::canonical_json_text(&value), text);
        assert_eq!(
            &RunEvent::decode(event.kind(), &bytes).expect("decodes"),
            event
        );
    }
    assert!(RunEvent::decode("run.completed", &events[0].encode()).is_err());
}

#[test]
pub(crate) fn replay_check_finds_a_changed_decision() {
    let (mut state, b, mut log) = started();
    log.extend(respond(&mut state, &b, vec![handoff("b", "ab", json!({}))]));
    let mut tampered = log.clone();
    if let Some(RunEvent::AgentCallScheduled { request, .. }) = tampered.last_mut() {
        std::sync::Arc::make_mut(request).target_agent = "c".into();
    }
    assert!(matches!(
        replay_check(&tampered, &b),
        Err(ReplayMismatch::Differs { .. })
    ));
    replay_check(&log, &b).expect("untampered log replays");
}

#[test]
pub(crate) fn a_run_recorded_by_a_newer_decider_is_refused_on_replay_naming_both_versions() {
    let (_, b, mut log) = started();
    if let Some(RunEvent::RunRequested(run)) = log.first_mut() {
        std::sync::Arc::make_mut(run).decider_version = DECIDER_VERSION + 1;
    }
    let err = replay_check(&log, &b).expect_err("newer decider");
    assert_eq!(
        err,
        ReplayMismatch::NewerDecider {
            recorded: DECIDER_VERSION + 1,
            supported: DECIDER_VERSION
        }
    );
    assert!(err.to_string().contains("replay it with a newer docket"));
}

#[test]
pub(crate) fn runs_recorded_before_decider_versions_read_as_version_0_and_replay() {
    let (_, b, log) = started();
    let Some(RunEvent::RunRequested(run)) = log.first() else {
        panic!("a run starts with run.requested");
    };
    let mut value = serde_json::to_value(&**run).expect("serializes");
    value
        .as_object_mut()
        .expect("object")
        .remove("decider_version");
    let old: RunRequested = serde_json::from_value(value).expect("old shape reads");
    assert_eq!(old.decider_version, 0);
    let mut old_log = log.clone();
    old_log[0] = RunEvent::RunRequested(std::sync::Arc::new(old));
    // The batch re-decided from an old `run.requested` is the old one, version included.
    replay_check(&old_log, &b).expect("a pre-version log replays");
}

/// One random agent behaviour.
#[derive(Debug, Clone)]
enum Behaviour {
    Forward(Value),
    Skip,
    Finish,
    Fail,
    Escalate,
    Garbage,
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    let payload = prop::collection::btree_map("[a-z]{1,4}", 0i64..100, 0..4).prop_map(|m| json!(m));
    prop_oneof![
        4 => payload.prop_map(Behaviour::Forward),
        1 => Just(Behaviour::Skip),
        1 => Just(Behaviour::Finish),
        2 => Just(Behaviour::Fail),
        1 => Just(Behaviour::Escalate),
        1 => Just(Behaviour::Garbage),
    ]
}

proptest! {
    /// Whatever the agents do, every batch the decider produced replays identically, and
    /// no request ever carries a field c's scoping blocks.
    #[test]
    fn replay_check_holds_for_random_agent_behaviour(
        script in prop::collection::vec(behaviour(), 1..20),
        approvals in prop::collection::vec(any::<bool>(), 20),
    ) {
        let (mut state, b, mut log) = started();
        let mut approvals = approvals.into_iter();
        for act in script {
            if state.status == RunStatus::WaitingForHuman {
                let ticket = state.open_tickets().next().map(|(id, _)| id.clone()).unwrap_or_default();
                log.extend(step(&mut state, &b, Command::RecordHumanDecision {
                    ticket, approved: approvals.next().unwrap_or(true), by: "p".into(), reason: "r".into(), choice: None,
            at_ms: 5,
                }));
            }
            if state.status != RunStatus::Running {
                break;
            }
            let request = state.pending_requests()[0].clone();
            let next = match request.target_agent.as_str() { "a" => "b", "b" => "c", _ => "external" };
            let id = request.request_id.clone();
            let command = match act {
                Behaviour::Forward(p) => Command::RecordResponse {
                    request_id: id.clone(),
                    response: AgentResponse::success(id, Confidence::Medium, vec![handoff(next, "t", p)]),
                    at_ms: 4,
                },
                Behaviour::Skip => Command::RecordResponse {
                    request_id: id.clone(),
                    response: AgentResponse::success(id, Confidence::Low, vec![handoff("c", "t", json!({}))]),
                    at_ms: 4,
                },
                Behaviour::Finish => Command::RecordResponse {
                    request_id: id.clone(),
                    response: AgentResponse::success(id, Confidence::High, vec![Action::Finish { output: json!(1) }]),
                    at_ms: 4,
                },
                Behaviour::Escalate => Command::RecordResponse {
                    request_id: id.clone(),
                    response: AgentResponse::success(id, Confidence::High, vec![Action::Escalate { reason: "?".into() }]),
                    at_ms: 4,
                },
                Behaviour::Fail => Command::RecordResponse {
                    request_id: id.clone(),
                    response: AgentResponse::error(id, "AGENT_FAILED", "no"),
                    at_ms: 4,
                },
                Behaviour::Garbage => Command::RecordFailure {
                    request_id: id, code: "AGENT_MALFORMED_RESPONSE".into(), message: "not JSON".into(), at_ms: 4,
                },
            };
            log.extend(step(&mut state, &b, command));
        }
        prop_assert!(replay_check(&log, &b).is_ok(), "{:?}", replay_check(&log, &b));
        prop_assert_eq!(RunState::fold(&log), state.clone());
        for call in state.calls.values().filter(|c| c.request.target_agent == "c") {
            for input in call.request.decision_inputs.iter().map(|i| &i.payload)
                .chain(call.request.context_inputs.iter().map(|i| &i.payload)) {
                if let Some(map) = input.as_object() {
                    prop_assert!(map.keys().all(|k| k == "keep"), "{input}");
                }
            }
        }
    }
}

#[test]
pub(crate) fn risk_classifier_verdicts() {
    for (verdict, expect) in [
        ("SAFE", RunStatus::Running),
        ("REVIEW_REQUIRED", RunStatus::WaitingForHuman),
        ("DANGEROUS", RunStatus::Blocked),
    ] {
        let b = bundle();
        let Command::Start(mut run) = start_command(&b) else {
            unreachable!()
        };
        run.workflow.agents.insert(
            "risk".into(),
            AgentSpec {
                executor: ExecutorSpec::InProcess { in_process: true },
                timeout_ms: None,
                classifiers: Vec::new(),
            },
        );
        if let Some(a) = run.workflow.agents.get_mut("a") {
            a.classifiers = vec!["risk".into()];
        }
        let mut state = RunState::default();
        let mut log = step(&mut state, &b, Command::Start(run));
        log.extend(respond(
            &mut state,
            &b,
            vec![handoff("b", "ab", json!({"y": 1}))],
        ));
        let classifier_call = state.pending_requests()[0].clone();
        assert_eq!(classifier_call.target_agent, "risk");
        assert_eq!(
            classifier_call.decision_inputs[0].payload["actions"][0]["to"], "b",
            "the classifier is shown the response"
        );
        let events = respond(
            &mut state,
            &b,
            vec![Action::Finish {
                output: json!({"verdict": verdict, "reason": "because"}),
            }],
        );
        assert_eq!(events[1].kind(), "risk.classified");
        assert_eq!(state.status, expect, "{verdict}");
        if verdict == "SAFE" {
            assert_eq!(state.pending_requests()[0].target_agent, "b");
        }
        log.extend(events);
        replay_check(&log, &b).expect("replays");
    }
}

fn fanout_bundle(resolution: &str) -> (PolicyBundle, String) {
    let src = format!(
        r#"
bundle = {{ id = "fan" }}
agents = [{{ id = "external" }}, {{ id = "hub" }}, {{ id = "left" }}, {{ id = "right" }}, {{ id = "sink" }}]
[interactions]
allowed = [
  {{ from = "external", to = "hub" }}, {{ from = "hub", to = "left" }}, {{ from = "hub", to = "right" }},
  {{ from = "left", to = "sink" }}, {{ from = "right", to = "sink" }}, {{ from = "sink", to = "external" }},
]
[multi_agent_handoffs]
default_handoff_mode = "full"
conflict_resolution = "{resolution}"
"#
    );
    (
        PolicyBundle::from_toml_str(&src, "fan.toml").expect("valid"),
        src,
    )
}

fn fanout_start(b: &PolicyBundle, src: &str) -> (RunState, Vec<RunEvent>) {
    let agent = || AgentSpec {
        executor: ExecutorSpec::InProcess { in_process: true },
        timeout_ms: None,
        classifiers: Vec::new(),
    };
    let workflow = WorkflowSpec {
        name: "fan".into(),
        policy: "fan.toml".into(),
        entry: "hub".into(),
        input_type: None,
        goal: None,
        budget: Default::default(),
        input: None,
        agents: ["hub", "left", "right", "sink"]
            .into_iter()
            .map(|a| (a.to_owned(), agent()))
            .collect(),
        effects: Default::default(),
    };
    let mut state = RunState::default();
    let mut log = step(
        &mut state,
        b,
        Command::Start(RunRequested {
            run_id: "run-f".into(),
            workflow,
            bundle_source: src.into(),
            bundle_source_name: "fan.toml".into(),
            bundle_hash: b.hash().to_hex(),
            input: json!({}),
            at_ms: 0,
            decider_version: DECIDER_VERSION,
        }),
    );
    log.extend(respond(
        &mut state,
        b,
        vec![
            handoff("left", "job", json!({"n": 1})),
            handoff("right", "job", json!({"n": 1})),
        ],
    ));
    (state, log)
}

fn answer_branch(
    state: &mut RunState,
    b: &PolicyBundle,
    agent: &str,
    confidence: Confidence,
    payload: Value,
) -> Vec<RunEvent> {
    let id = state
        .pending_requests()
        .iter()
        .find(|r| r.target_agent == agent)
        .map(|r| r.request_id.clone())
        .expect("branch pending");
    let response = AgentResponse::success(
        id.clone(),
        confidence,
        vec![handoff("sink", "verdict", payload)],
    );
    step(
        state,
        b,
        Command::RecordResponse {
            request_id: id,
            response,
            at_ms: 1,
        },
    )
}

#[test]
pub(crate) fn fan_out_conflicts_prefer_higher_confidence_and_archive_the_loser() {
    let (b, src) = fanout_bundle("prefer_higher_confidence");
    let (mut state, mut log) = fanout_start(&b, &src);
    assert_eq!(state.pending.len(), 2, "two branches run in parallel");
    let first = answer_branch(
        &mut state,
        &b,
        "left",
        Confidence::Low,
        json!({"v": "left"}),
    );
    assert_eq!(
        kinds(&first),
        ["agent.responded", "handoff.allowed", "output.held"]
    );
    log.extend(first);
    let second = answer_branch(
        &mut state,
        &b,
        "right",
        Confidence::High,
        json!({"v": "right"}),
    );
    assert_eq!(
        kinds(&second),
        [
            "agent.responded",
            "handoff.allowed",
            "output.conflict_detected",
            "output.archived",
            "fanout.joined",
            "agent.call_scheduled"
        ]
    );
    let sink = state.pending_requests()[0].clone();
    assert_eq!(sink.target_agent, "sink");
    assert_eq!(sink.decision_inputs.len(), 1);
    assert_eq!(sink.decision_inputs[0].payload, json!({"v": "right"}));
    let RunEvent::OutputArchived { delivery, .. } = &second[3] else {
        panic!("archived")
    };
    assert_eq!(*delivery.payload, json!({"v": "left"}));
    log.extend(second);
    replay_check(&log, &b).expect("replays");
}

#[test]
pub(crate) fn fan_out_conflicts_go_to_a_human_who_picks_the_output() {
    let (b, src) = fanout_bundle("human");
    let (mut state, mut log) = fanout_start(&b, &src);
    log.extend(answer_branch(
        &mut state,
        &b,
        "left",
        Confidence::High,
        json!({"v": "left"}),
    ));
    log.extend(answer_branch(
        &mut state,
        &b,
        "right",
        Confidence::Low,
        json!({"v": "right"}),
    ));
    assert_eq!(state.status, RunStatus::WaitingForHuman);
    let bad = Command::RecordHumanDecision {
        ticket: "ticket-1".into(),
        approved: true,
        by: "ana".into(),
        reason: "r".into(),
        choice: Some(3),
        at_ms: 2,
    };
    assert!(matches!(
        decide(&state, &b, bad),
        Err(Rejection::InvalidChoice { count: 2, .. })
    ));
    log.extend(step(
        &mut state,
        &b,
        Command::RecordHumanDecision {
            ticket: "ticket-1".into(),
            approved: true,
            by: "ana".into(),
            reason: "right is current".into(),
            choice: Some(2),
            at_ms: 2,
        },
    ));
    let sink = state.pending_requests()[0].clone();
    assert_eq!(sink.decision_inputs[0].payload, json!({"v": "right"}));
    replay_check(&log, &b).expect("replays");
}

#[test]
pub(crate) fn fan_out_with_agreeing_outputs_delivers_once() {
    let (b, src) = fanout_bundle("human");
    let (mut state, _) = fanout_start(&b, &src);
    answer_branch(&mut state, &b, "left", Confidence::High, json!({"v": 1}));
    let events = answer_branch(&mut state, &b, "right", Confidence::Low, json!({"v": 1}));
    assert!(!kinds(&events).contains(&"output.conflict_detected"));
    assert_eq!(state.pending_requests()[0].decision_inputs.len(), 1);
}

#[test]
pub(crate) fn an_open_circuit_blocks_the_next_call_to_a_failing_agent() {
    let src = format!(
        "{BUNDLE}\n[defaults.circuit_breaker]\nfailure_threshold = 1\nprobe_interval_ms = 60000\n"
    );
    let b = PolicyBundle::from_toml_str(&src, "t.toml").expect("valid");
    let Command::Start(mut run) = start_command(&b) else {
        unreachable!()
    };
    run.bundle_source = src;
    let mut state = RunState::default();
    step(&mut state, &b, Command::Start(run));
    let events = fail(&mut state, &b);
    // The ladder says retry; the circuit (1 failure, threshold 1, probe after 60 s) says no.
    assert_eq!(
        kinds(&events),
        [
            "agent.call_failed",
            "policy.decided",
            "policy.decided",
            "episode.stopped",
            "run.blocked"
        ]
    );
    let RunEvent::RunBlocked { rule_id, error, .. } = &events[4] else {
        panic!("blocked");
    };
    assert_eq!(rule_id, "defaults.circuit_breaker");
    assert_eq!(error["errorType"], "circuit_open");
}

#[test]
pub(crate) fn approving_one_of_two_open_tickets_is_not_lost() {
    let (b, src) = fanout_bundle("human");
    let (mut state, mut log) = fanout_start(&b, &src);
    for agent in ["left", "right"] {
        let id = state
            .pending_requests()
            .iter()
            .find(|r| r.target_agent == agent)
            .map(|r| r.request_id.clone())
            .expect("branch pending");
        let response = AgentResponse::success(
            id.clone(),
            Confidence::High,
            vec![
                Action::Escalate {
                    reason: "check".into(),
                },
                handoff("sink", "verdict", json!({"v": agent})),
            ],
        );
        log.extend(step(
            &mut state,
            &b,
            Command::RecordResponse {
                request_id: id,
                response,
                at_ms: 1,
            },
        ));
    }
    assert_eq!(state.open_tickets().count(), 2);
    let approve = |ticket: &str| Command::RecordHumanDecision {
        ticket: ticket.into(),
        approved: true,
        by: "ana".into(),
        reason: "ok".into(),
        choice: None,
        at_ms: 2,
    };
    log.extend(step(&mut state, &b, approve("ticket-1")));
    assert_eq!(
        state.status,
        RunStatus::WaitingForHuman,
        "ticket-2 is still open"
    );
    assert!(
        state
            .calls
            .values()
            .any(|c| c.request.target_agent == "sink"),
        "ticket-1's approval took effect"
    );
    log.extend(step(&mut state, &b, approve("ticket-2")));
    assert_eq!(state.status, RunStatus::Running);
    replay_check(&log, &b).expect("replays");
}

const PROVENANCE_BUNDLE: &str = r#"
bundle = { id = "p" }
agents = [{ id = "external" }, { id = "a" }, { id = "b" }, { id = "c" }]
output_types = [
  { id = "req", schema = { type = "object" } },
  { id = "gaps", schema = { type = "object" } },
  { id = "recs", schema = { type = "object" } },
]
[interactions]
allowed = [
  { from = "external", to = "a", output_type = "req" },
  { from = "external", to = "b", output_type = "req" },
  { from = "a", to = "b", output_type = "gaps" },
  { from = "b", to = "c", output_type = "recs" },
  { from = "c", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
[[provenance]]
id = "guardrail-2-provenance"
at = { from = "b", to = "c" }
items = "/recommendations"
cites = "gap_id"
produced_by = { agent = "a", output_type = "gaps", ids = "/gaps/*/id" }
"#;

/// A run of the provenance bundle entered at `entry`, with `a` delivering `gaps` first
/// when the entry is `a`.
fn provenance_run(entry: &str) -> (RunState, PolicyBundle, Vec<RunEvent>) {
    let b = PolicyBundle::from_toml_str(PROVENANCE_BUNDLE, "p.toml").expect("valid");
    let mut wf = workflow();
    wf.entry = entry.into();
    let mut state = RunState::default();
    let mut log = step(
        &mut state,
        &b,
        Command::Start(RunRequested {
            run_id: "run-1".into(),
            workflow: wf,
            bundle_source: PROVENANCE_BUNDLE.into(),
            bundle_source_name: "p.toml".into(),
            bundle_hash: b.hash().to_hex(),
            input: json!({}),
            at_ms: 1_000,
            decider_version: DECIDER_VERSION,
        }),
    );
    if entry == "a" {
        let gaps = json!({"gaps": [{"id": "gap-1"}, {"id": "gap-2"}]});
        log.extend(respond(&mut state, &b, vec![handoff("b", "gaps", gaps)]));
    }
    (state, b, log)
}

fn recs(cited: &[&str]) -> Action {
    let items: Vec<Value> = cited.iter().map(|g| json!({"gap_id": g})).collect();
    handoff("c", "recs", json!({"recommendations": items}))
}

#[test]
pub(crate) fn provenance_allows_citations_of_delivered_ids() {
    let (mut state, b, mut log) = provenance_run("a");
    let events = respond(&mut state, &b, vec![recs(&["gap-2", "gap-1"])]);
    assert_eq!(
        kinds(&events),
        ["agent.responded", "handoff.allowed", "agent.call_scheduled"]
    );
    let RunEvent::HandoffAllowed { provenance, .. } = &events[1] else {
        panic!("allowed");
    };
    assert_eq!(provenance.len(), 1);
    assert_eq!(&*provenance[0].rule_id, "guardrail-2-provenance");
    assert!(provenance[0].is_allowed());
    log.extend(events);
    replay_check(&log, &b).expect("the log replays");
}

#[test]
pub(crate) fn provenance_denies_an_unproduced_id_naming_the_item() {
    let (mut state, b, mut log) = provenance_run("a");
    let events = respond(&mut state, &b, vec![recs(&["gap-1", "geo_score"])]);
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "handoff.denied",
            "episode.stopped",
            "run.blocked"
        ]
    );
    let RunEvent::HandoffDenied {
        decision, error, ..
    } = &events[1]
    else {
        panic!("denied");
    };
    assert_eq!(&*decision.rule_id, "guardrail-2-provenance");
    assert!(
        decision
            .reason
            .contains("/recommendations/1 cites gap_id `geo_score`"),
        "{}",
        decision.reason
    );
    assert_eq!(error["errorType"], "validation_error");
    assert_eq!(error["agent"], "b");
    assert_eq!(error["details"]["ruleId"], "guardrail-2-provenance");
    assert_eq!(state.status, RunStatus::Blocked);
    assert!(state.pending_requests().is_empty(), "c is never called");
    log.extend(events);
    replay_check(&log, &b).expect("the log replays");
}

#[test]
pub(crate) fn provenance_denies_when_the_producer_never_delivered() {
    let (mut state, b, _) = provenance_run("b");
    let events = respond(&mut state, &b, vec![recs(&["gap-1"])]);
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "handoff.denied",
            "episode.stopped",
            "run.blocked"
        ]
    );
    let RunEvent::HandoffDenied { decision, .. } = &events[1] else {
        panic!("denied");
    };
    assert!(
        decision.reason.contains("a never delivered gaps"),
        "{}",
        decision.reason
    );
    assert_eq!(state.status, RunStatus::Blocked);
}
