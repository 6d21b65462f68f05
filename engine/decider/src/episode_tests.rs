//! Unit tests of the episode rules (docs/governance.md#episodes): spawn limits, budget
//! shares and the 70% line, usage charged up the tree, domain writes, results returning to
//! the parent, needs_review tickets, each stop condition, and a property test over random
//! agents.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use docket_policies::PolicyBundle;
use docket_policies::StopCondition;

use super::*;
use crate::protocol::{
    Action, AgentRequest, AgentResponse, BudgetRequest, Confidence, EpisodeResult, EpisodeStatus,
    Usage,
};
use crate::workflow::{AgentSpec, ExecutorSpec, WorkflowBudget, WorkflowSpec};

const AGENTS: [&str; 3] = ["orch", "worker", "verifier"];

/// A bundle whose default recursion policy gets `policy` lines appended.
fn bundle_with(policy: &str) -> (PolicyBundle, String) {
    let text = format!(
        r#"
bundle = {{ id = "ep" }}
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
    let b = PolicyBundle::from_toml_str(&text, "ep.toml").expect("test bundle is valid");
    (b, text)
}

fn start(policy: &str, budget: WorkflowBudget) -> (RunState, PolicyBundle, Vec<RunEvent>) {
    let (b, text) = bundle_with(policy);
    let agent = || AgentSpec {
        executor: ExecutorSpec::InProcess { in_process: true },
        timeout_ms: None,
        classifiers: Vec::new(),
    };
    let workflow = WorkflowSpec {
        name: "research".into(),
        policy: "ep.toml".into(),
        entry: "orch".into(),
        input_type: None,
        input: None,
        goal: Some("answer the question".into()),
        budget,
        effects: Default::default(),
        agents: AGENTS
            .into_iter()
            .map(|a| (a.to_owned(), agent()))
            .collect(),
    };
    let mut state = RunState::default();
    let command = Command::Start(RunRequested {
        run_id: "run-e".into(),
        workflow,
        bundle_source: text,
        bundle_source_name: "ep.toml".into(),
        bundle_hash: b.hash().to_hex(),
        input: json!({"q": "why"}),
        at_ms: 1_000,
        decider_version: DECIDER_VERSION,
    });
    let log = step(&mut state, &b, command);
    (state, b, log)
}

fn budget(tokens: u64) -> WorkflowBudget {
    WorkflowBudget {
        tokens,
        tool_calls: 100,
        wall_time_ms: 1_000_000,
    }
}

fn started() -> (RunState, PolicyBundle, Vec<RunEvent>) {
    start("", budget(1_000))
}

fn step(state: &mut RunState, b: &PolicyBundle, command: Command) -> Vec<RunEvent> {
    let events = decide(state, b, command).expect("command applies");
    for e in &events {
        state.apply(e);
    }
    events
}

fn pending(state: &RunState) -> AgentRequest {
    let p = state.pending_requests();
    assert_eq!(p.len(), 1, "{p:?}");
    p[0].clone()
}

/// The only pending call answers with `actions`, reporting `tokens` used, at `at_ms`.
fn answer(
    state: &mut RunState,
    b: &PolicyBundle,
    tokens: u64,
    at_ms: i64,
    actions: Vec<Action>,
) -> Vec<RunEvent> {
    let id = pending(state).request_id;
    let mut response = AgentResponse::success(id.clone(), Confidence::High, actions);
    response.usage = Usage {
        input_tokens: tokens,
        output_tokens: 0,
        tool_calls: 0,
    };
    step(
        state,
        b,
        Command::RecordResponse {
            request_id: id,
            response,
            at_ms,
        },
    )
}

fn kinds(events: &[RunEvent]) -> Vec<&'static str> {
    events.iter().map(RunEvent::kind).collect()
}

fn spawn(agent: &str, episode_type: &str, tokens: Option<u64>) -> Action {
    Action::Spawn {
        agent: agent.into(),
        episode_type: episode_type.into(),
        goal: format!("{episode_type} something"),
        budget: BudgetRequest {
            tokens,
            ..BudgetRequest::default()
        },
        inputs: serde_json::Map::new(),
    }
}

fn finish(status: EpisodeStatus, summary: &str) -> Action {
    Action::FinishEpisode {
        result: EpisodeResult::new(status, summary),
    }
}

/// `events` stop `episode` on `failure_repeats` when `last` (the repetition that reaches the
/// limit), and stop nothing before.
fn assert_failure_repeats_stop(events: &[RunEvent], last: bool, episode: &str) {
    if last {
        assert_eq!(
            stops(events),
            [(episode.to_owned(), StopCondition::FailureRepeats)]
        );
    } else {
        assert!(stops(events).is_empty(), "{:?}", stops(events));
    }
}

fn stops(events: &[RunEvent]) -> Vec<(String, StopCondition)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::EpisodeStopped {
                episode_id,
                condition,
                ..
            } => Some((episode_id.clone(), *condition)),
            _ => None,
        })
        .collect()
}

fn denial(events: &[RunEvent]) -> (StopCondition, String, String) {
    events
        .iter()
        .find_map(|e| match e {
            RunEvent::EpisodeActionDenied {
                condition,
                decision,
                ..
            } => Some((
                *condition,
                decision.rule_id.to_string(),
                decision.reason.to_string(),
            )),
            _ => None,
        })
        .expect("an episode.action_denied")
}

fn replays(log: &[RunEvent], b: &PolicyBundle) {
    replay_check(log, b).expect("the log replays");
}

fn ep(state: &RunState, id: &str) -> Episode {
    state.episodes.get(id).cloned().expect("episode exists")
}

#[test]
pub(crate) fn the_root_episode_is_the_main_flow_and_requests_carry_its_id() {
    let (state, _, _) = started();
    let root = ep(&state, "ep-1");
    assert_eq!(
        (
            root.episode_type.as_str(),
            root.agent.as_str(),
            root.goal.as_str()
        ),
        ("research", "orch", "answer the question")
    );
    assert_eq!(root.budget["tokens"].limit, 1_000);
    assert_eq!(root.depth, 0);
    assert_eq!(pending(&state).episode_id, "ep-1");
}

#[test]
pub(crate) fn an_allowed_spawn_starts_a_child_whose_result_returns_to_the_parent() {
    let (mut state, b, mut log) = started();
    let events = answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    );
    assert_eq!(
        kinds(&events),
        ["agent.responded", "episode.started", "agent.call_scheduled"]
    );
    log.extend(events);
    let child_call = pending(&state);
    assert_eq!(child_call.episode_id, "ep-2");
    assert_eq!(child_call.target_agent, "worker");
    assert_eq!(child_call.decision_inputs[0].output_type, "episode_goal");
    let child = ep(&state, "ep-2");
    assert_eq!((child.depth, child.parent.as_deref()), (1, Some("ep-1")));
    // No budget asked: the child gets 50% of the parent's remaining budget.
    assert_eq!(child.budget["tokens"].limit, 500);

    let events = answer(
        &mut state,
        &b,
        0,
        3_000,
        vec![finish(EpisodeStatus::Ok, "found it")],
    );
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "episode.finished",
            "episode.stopped",
            "agent.call_scheduled"
        ]
    );
    assert_eq!(
        stops(&events),
        [("ep-2".to_owned(), StopCondition::SuccessAchieved)]
    );
    log.extend(events);
    let back = pending(&state);
    assert_eq!(
        (back.target_agent.as_str(), back.episode_id.as_str()),
        ("orch", "ep-1")
    );
    let result = back.decision_inputs.last().expect("the child's result");
    assert_eq!(result.output_type, "episode_result");
    assert_eq!(result.payload["result"]["summary"], "found it");

    let events = answer(
        &mut state,
        &b,
        0,
        4_000,
        vec![finish(EpisodeStatus::Ok, "answered")],
    );
    assert_eq!(state.status, RunStatus::Completed);
    assert_eq!(
        state.output.as_ref().map(|o| &o["summary"]),
        Some(&json!("answered"))
    );
    assert_eq!(
        stops(&events),
        [("ep-1".to_owned(), StopCondition::SuccessAchieved)]
    );
    log.extend(events);
    replays(&log, &b);
}

#[test]
pub(crate) fn a_spawn_beyond_max_depth_stops_the_spawner_depth_exceeded() {
    let (mut state, b, mut log) = started();
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    assert_eq!(ep(&state, "ep-3").depth, 2);
    let events = answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    );
    let (condition, _, reason) = denial(&events);
    assert_eq!(condition, StopCondition::DepthExceeded);
    assert!(reason.contains("child depth 3 > max_depth 2"), "{reason}");
    assert_eq!(
        stops(&events),
        [("ep-3".to_owned(), StopCondition::DepthExceeded)]
    );
    // The stopped child hands its parent (ep-2's worker) a failed result.
    let back = pending(&state);
    assert_eq!(back.episode_id, "ep-2");
    let result = &back.decision_inputs.last().expect("result").payload["result"];
    assert_eq!(result["status"], "failed");
    assert_eq!(result["error_class"], "depth_exceeded");
    log.extend(events);
    replays(&log, &b);
}

#[test]
pub(crate) fn max_children_and_max_total_episodes_are_enforced() {
    let (mut state, b, mut log) = start("max_children = 1", budget(1_000));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![finish(EpisodeStatus::Ok, "a")],
    ));
    let events = answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    );
    let (condition, rule, reason) = denial(&events);
    assert_eq!(condition, StopCondition::PolicyBlocks);
    assert_eq!(rule, "recursion.default");
    assert!(reason.contains("max_children 1 reached"), "{reason}");
    assert_eq!(
        state.status,
        RunStatus::Blocked,
        "the root stopped: the run is blocked"
    );
    log.extend(events);
    replays(&log, &b);

    let (mut state, b, mut log) = start("max_total_episodes = 2", budget(1_000));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    let events = answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    );
    let (_, _, reason) = denial(&events);
    assert!(reason.contains("max_total_episodes 2 reached"), "{reason}");
    assert_eq!(state.episodes.episodes.len(), 2);
    log.extend(events);
    replays(&log, &b);
}

#[test]
pub(crate) fn forbidden_and_unlisted_child_types_are_refused() {
    for (child_type, expected) in [
        ("publish", "forbidden unless a human"),
        ("engage", "not in allowed_child_types"),
    ] {
        let (mut state, b, log) = started();
        let events = answer(
            &mut state,
            &b,
            0,
            2_000,
            vec![spawn("worker", child_type, None)],
        );
        let (condition, _, reason) = denial(&events);
        assert_eq!(condition, StopCondition::PolicyBlocks);
        assert!(reason.contains(expected), "{reason}");
        assert_eq!(
            stops(&events),
            [("ep-1".to_owned(), StopCondition::PolicyBlocks)]
        );
        assert_eq!(state.status, RunStatus::Blocked);
        let mut all = log;
        all.extend(events);
        replays(&all, &b);
    }
}

#[test]
pub(crate) fn a_child_gets_at_most_half_of_the_parents_remaining_budget() {
    let (mut state, b, _) = started();
    // 200 of 1000 tokens used by this very response: 800 remain, so at most 400.
    let events = answer(
        &mut state,
        &b,
        200,
        2_000,
        vec![spawn("worker", "retrieve", Some(401))],
    );
    let (_, rule, reason) = denial(&events);
    assert_eq!(rule, "recursion.budget.child_max_share_percent");
    assert!(
        reason.contains("at most 50% of the parent's remaining (400)"),
        "{reason}"
    );

    let (mut state, b, _) = started();
    answer(
        &mut state,
        &b,
        200,
        2_000,
        vec![spawn("worker", "retrieve", Some(400))],
    );
    assert_eq!(ep(&state, "ep-2").budget["tokens"].limit, 400);
}

#[test]
pub(crate) fn past_70_percent_a_spawn_is_refused_finalize_or_escalate() {
    let (mut state, b, _) = started();
    assert_eq!(state.episode_gate(&b, "ep-1"), None);
    let events = answer(
        &mut state,
        &b,
        700,
        2_000,
        vec![spawn("worker", "retrieve", Some(10))],
    );
    let (condition, rule, reason) = denial(&events);
    assert_eq!(condition, StopCondition::PolicyBlocks);
    assert_eq!(rule, "recursion.budget.finalize_or_escalate_at_percent");
    assert!(reason.contains("700/1000 tokens"), "{reason}");
    // The gate the side-effect decider asks says the same, naming the numbers; the root
    // stopped meanwhile, which the gate reports first.
    let (mut fresh, b2, _) = started();
    answer(
        &mut fresh,
        &b2,
        700,
        2_000,
        vec![Action::Escalate {
            reason: "look".into(),
        }],
    );
    let gate = fresh.episode_gate(&b2, "ep-1").expect("gated");
    assert_eq!(
        &*gate.rule_id,
        "recursion.budget.finalize_or_escalate_at_percent"
    );
    assert!(gate.reason.contains("700/1000 tokens"), "{}", gate.reason);
    let stopped = state.episode_gate(&b, "ep-1").expect("stopped");
    assert_eq!(&*stopped.rule_id, "episodes.not_running");
}

#[test]
pub(crate) fn usage_is_charged_to_the_episode_and_every_ancestor() {
    let (mut state, b, _) = started();
    answer(
        &mut state,
        &b,
        10,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    );
    answer(
        &mut state,
        &b,
        20,
        3_000,
        vec![spawn("verifier", "verify", None)],
    );
    answer(
        &mut state,
        &b,
        40,
        4_500,
        vec![Action::Escalate { reason: "x".into() }],
    );
    assert_eq!(ep(&state, "ep-3").budget["tokens"].used, 40);
    assert_eq!(ep(&state, "ep-2").budget["tokens"].used, 60);
    assert_eq!(ep(&state, "ep-1").budget["tokens"].used, 70);
    // Wall time: recorded time since each episode started.
    assert_eq!(ep(&state, "ep-1").budget["wall_time_ms"].used, 3_500);
    assert_eq!(ep(&state, "ep-2").budget["wall_time_ms"].used, 2_500);
    assert_eq!(ep(&state, "ep-3").budget["wall_time_ms"].used, 1_500);
}

#[test]
pub(crate) fn time_waiting_for_a_human_is_not_wall_time() {
    let (mut state, b, mut log) = started();
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![
            Action::Escalate {
                reason: "sign-off".into(),
            },
            spawn("worker", "retrieve", None),
        ],
    ));
    log.extend(step(
        &mut state,
        &b,
        Command::RecordHumanDecision {
            ticket: "ticket-1".into(),
            approved: true,
            by: "ana".into(),
            reason: "ok".into(),
            choice: None,
            at_ms: 500_000,
        },
    ));
    log.extend(answer(
        &mut state,
        &b,
        0,
        501_000,
        vec![finish(EpisodeStatus::Ok, "x")],
    ));
    // 1000 ms before the wait, 1000 after it; the 498 s wait is not counted.
    assert_eq!(ep(&state, "ep-1").budget["wall_time_ms"].used, 2_000);
    replays(&log, &b);
}

#[test]
pub(crate) fn an_exhausted_budget_stops_the_episode_and_its_actions_are_not_carried_out() {
    let (mut state, b, mut log) = started();
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", Some(100))],
    ));
    let events = answer(
        &mut state,
        &b,
        150,
        2_500,
        vec![spawn("verifier", "verify", None)],
    );
    assert_eq!(
        stops(&events),
        [("ep-2".to_owned(), StopCondition::BudgetExhausted)]
    );
    assert!(
        !kinds(&events).contains(&"episode.started"),
        "{:?}",
        kinds(&events)
    );
    let back = pending(&state);
    assert_eq!(back.target_agent, "orch");
    assert_eq!(
        back.decision_inputs.last().expect("result").payload["result"]["error_class"],
        "budget_exhausted"
    );
    log.extend(events);
    // The root exhausted: the run is blocked naming the condition.
    let events = answer(
        &mut state,
        &b,
        2_000,
        3_000,
        vec![finish(EpisodeStatus::Ok, "x")],
    );
    assert_eq!(
        stops(&events),
        [("ep-1".to_owned(), StopCondition::BudgetExhausted)]
    );
    assert_eq!(state.status, RunStatus::Blocked);
    assert!(
        state
            .stop_reason
            .as_deref()
            .unwrap_or("")
            .contains("budget_exhausted"),
        "{:?}",
        state.stop_reason
    );
    log.extend(events);
    replays(&log, &b);
}

#[test]
pub(crate) fn two_children_without_delta_stop_the_parent_no_new_information() {
    let (mut state, b, mut log) = started();
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![finish(EpisodeStatus::Ok, "same")],
    ));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![finish(EpisodeStatus::Ok, "same")],
    ));
    assert_eq!(ep(&state, "ep-1").consecutive_no_delta, 1);
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    let events = answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![finish(EpisodeStatus::Ok, "same")],
    );
    assert!(stops(&events).contains(&("ep-1".to_owned(), StopCondition::NoNewInformation)));
    assert_eq!(state.status, RunStatus::Failed);
    log.extend(events);
    replays(&log, &b);
}

#[test]
pub(crate) fn the_same_error_class_n_times_stops_failure_repeats() {
    let (mut state, b, mut log) = started();
    for i in 0..3 {
        log.extend(answer(
            &mut state,
            &b,
            0,
            2_000,
            vec![spawn("worker", "retrieve", None)],
        ));
        let mut failed = EpisodeResult::new(EpisodeStatus::Failed, format!("attempt {i}"));
        failed.error_class = Some("timeout".into());
        failed.artifacts_created.push(format!("log-{i}"));
        let events = answer(
            &mut state,
            &b,
            0,
            2_000,
            vec![Action::FinishEpisode { result: failed }],
        );
        assert_failure_repeats_stop(&events, i == 2, "ep-1");
        log.extend(events);
    }
    assert_eq!(state.status, RunStatus::Failed);
    assert!(
        state
            .stop_reason
            .as_deref()
            .unwrap_or("")
            .contains("`timeout` repeated 3 times")
    );
    replays(&log, &b);
}

#[test]
pub(crate) fn a_child_agent_failing_past_the_ladder_stops_its_episode_not_the_run() {
    let (mut state, b, mut log) = started();
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    let fail = |state: &mut RunState, at_ms| {
        let request_id = pending(state).request_id;
        step(
            state,
            &b,
            Command::RecordFailure {
                request_id,
                code: "AGENT_TIMEOUT".into(),
                message: "no answer".into(),
                at_ms,
            },
        )
    };
    log.extend(fail(&mut state, 3_000)); // retry
    log.extend(fail(&mut state, 4_000)); // escalate to a human
    log.extend(step(
        &mut state,
        &b,
        Command::RecordHumanDecision {
            ticket: "ticket-1".into(),
            approved: true,
            by: "ana".into(),
            reason: "once more".into(),
            choice: None,
            at_ms: 5_000,
        },
    ));
    let events = fail(&mut state, 6_000); // the ladder's hard stop
    assert_eq!(
        stops(&events),
        [("ep-2".to_owned(), StopCondition::FailureRepeats)]
    );
    assert!(
        !kinds(&events).contains(&"run.blocked"),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(state.status, RunStatus::Running);
    let back = pending(&state);
    assert_eq!(back.target_agent, "orch");
    let result = &back.decision_inputs.last().expect("result").payload["result"];
    assert_eq!(result["status"], "failed");
    assert!(
        result["summary"]
            .as_str()
            .unwrap_or("")
            .contains("AGENT_TIMEOUT"),
        "{result}"
    );
    log.extend(events);
    replays(&log, &b);
}

#[test]
pub(crate) fn success_needs_a_passing_verifier_when_verification_is_needed() {
    let (mut state, b, mut log) = started();
    let mut needs = EpisodeResult::new(EpisodeStatus::Ok, "done");
    needs.verification_needed = true;
    let events = answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![Action::FinishEpisode {
            result: needs.clone(),
        }],
    );
    let (condition, rule, _) = denial(&events);
    assert_eq!(
        (condition, rule.as_str()),
        (
            StopCondition::SuccessAchieved,
            "stop_conditions.success_achieved"
        )
    );
    assert_eq!(state.status, RunStatus::Running);
    let told = pending(&state);
    assert_eq!(
        told.decision_inputs.last().expect("note").output_type,
        "action_denied"
    );
    log.extend(events);
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("verifier", "verify", None)],
    ));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![finish(EpisodeStatus::Ok, "verified")],
    ));
    assert!(ep(&state, "ep-1").verified);
    let events = answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![Action::FinishEpisode { result: needs }],
    );
    assert_eq!(
        stops(&events),
        [("ep-1".to_owned(), StopCondition::SuccessAchieved)]
    );
    assert_eq!(state.status, RunStatus::Completed);
    log.extend(events);
    replays(&log, &b);
}

#[test]
pub(crate) fn needs_review_opens_a_handoff_ticket_approval_completes_denial_blocks() {
    for approved in [true, false] {
        let (mut state, b, mut log) = started();
        let mut review = EpisodeResult::new(EpisodeStatus::NeedsReview, "draft ready");
        review.next_actions.push(json!({"task": "publish"}));
        let events = answer(
            &mut state,
            &b,
            0,
            2_000,
            vec![Action::FinishEpisode { result: review }],
        );
        assert_eq!(state.status, RunStatus::WaitingForHuman);
        let ticket = state.tickets.get("ticket-1").expect("ticket");
        let TicketSubject::EpisodeReview {
            episode_id,
            summary,
            asked,
            ..
        } = &ticket.subject
        else {
            panic!("a handoff ticket: {:?}", ticket.subject);
        };
        assert_eq!(
            (episode_id.as_str(), summary.as_str()),
            ("ep-1", "draft ready")
        );
        assert!(asked.contains("publish"), "{asked}");
        log.extend(events);
        let events = step(
            &mut state,
            &b,
            Command::RecordHumanDecision {
                ticket: "ticket-1".into(),
                approved,
                by: "ana".into(),
                reason: "read it".into(),
                choice: None,
                at_ms: 9_000,
            },
        );
        if approved {
            assert_eq!(state.status, RunStatus::Completed);
            assert_eq!(
                stops(&events),
                [("ep-1".to_owned(), StopCondition::SuccessAchieved)]
            );
        } else {
            assert_eq!(state.status, RunStatus::Blocked);
            assert_eq!(
                stops(&events),
                [("ep-1".to_owned(), StopCondition::PolicyBlocks)]
            );
        }
        log.extend(events);
        replays(&log, &b);
    }
}

#[test]
pub(crate) fn only_the_owner_writes_a_domain_each_write_a_new_version_read_by_others() {
    let (mut state, b, mut log) = started();
    let write = |v: u32| Action::WriteDomain {
        domain: "plan".into(),
        content: json!({"step": v}),
    };
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![write(1), write(2), spawn("worker", "retrieve", None)],
    ));
    let versions: Vec<u32> = state.episodes.domains["plan"]
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(versions, [1, 2]);
    assert_eq!(
        state.episodes.domains["plan"][0].content,
        json!({"step": 1}),
        "history kept"
    );
    // The worker reads plan: its latest version arrives as a read-only context input.
    let call = pending(&state);
    let read = call
        .context_inputs
        .iter()
        .find(|c| c.output_type == "domain:plan@v2")
        .expect("plan v2 delivered");
    assert_eq!(read.payload, json!({"step": 2}));
    // The worker is not plan's owner.
    let events = answer(&mut state, &b, 0, 2_000, vec![write(3)]);
    assert!(
        kinds(&events).contains(&"domain.write_denied"),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(
        stops(&events),
        [("ep-2".to_owned(), StopCondition::PolicyBlocks)]
    );
    assert_eq!(state.episodes.domains["plan"].len(), 2);
    log.extend(events);
    replays(&log, &b);
}

#[test]
pub(crate) fn a_refusal_whose_condition_is_not_listed_tells_the_agent_instead_of_stopping() {
    let (mut state, b, mut log) = start("stop_conditions = [\"budget_exhausted\"]", budget(1_000));
    let events = answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "publish", None)],
    );
    assert!(stops(&events).is_empty());
    assert_eq!(state.status, RunStatus::Running);
    let told = pending(&state);
    let note = told.decision_inputs.last().expect("note");
    assert_eq!(
        (note.source_agent.as_str(), note.output_type.as_str()),
        ("docket", "action_denied")
    );
    assert_eq!(note.payload["condition"], "policy_blocks");
    log.extend(events);
    replays(&log, &b);
}

fn ends(events: &[RunEvent]) -> Vec<(String, &'static str, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::EpisodeFinished {
                episode_id, result, ..
            } => Some((
                episode_id.clone(),
                "finished",
                format!(
                    "{}:{}",
                    serde_json::to_value(result.status).expect("status"),
                    result.error_class.clone().unwrap_or_default()
                ),
            )),
            RunEvent::EpisodeStopped {
                episode_id,
                condition,
                ..
            } => Some((
                episode_id.clone(),
                "stopped",
                condition_name(*condition).to_owned(),
            )),
            _ => None,
        })
        .collect()
}

fn to_external(payload: Value) -> Action {
    Action::Handoff {
        to: "external".into(),
        output_type: "answer".into(),
        payload,
    }
}

#[test]
pub(crate) fn a_run_completed_by_a_plain_handoff_records_the_root_episodes_success() {
    let (mut state, b, mut log) = started();
    let events = answer(
        &mut state,
        &b,
        10,
        2_000,
        vec![to_external(json!({"a": 1}))],
    );
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "handoff.allowed",
            "episode.finished",
            "episode.stopped",
            "run.completed"
        ]
    );
    assert_eq!(
        ends(&events),
        [
            ("ep-1".to_owned(), "finished", "\"ok\":".to_owned()),
            ("ep-1".to_owned(), "stopped", "success_achieved".to_owned())
        ]
    );
    let RunEvent::EpisodeFinished { agent, result, .. } = &events[2] else {
        panic!("episode.finished");
    };
    assert_eq!(
        (agent.as_str(), result.summary.as_str()),
        ("orch", "{\"a\":1}")
    );
    let RunEvent::EpisodeStopped { usage, .. } = &events[3] else {
        panic!("episode.stopped");
    };
    assert_eq!(usage["tokens"].used, 10);
    assert_eq!(state.status, RunStatus::Completed);
    assert_eq!(ep(&state, "ep-1").phase, EpisodePhase::Stopped);
    log.extend(events);
    replays(&log, &b);

    // A child still running when the run completes ends with it, after the root.
    let (mut state, b, mut log) = started();
    let events = answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None), to_external(json!({}))],
    );
    assert_eq!(
        ends(&events),
        [
            ("ep-1".to_owned(), "finished", "\"ok\":".to_owned()),
            ("ep-1".to_owned(), "stopped", "success_achieved".to_owned()),
            ("ep-2".to_owned(), "stopped", "success_achieved".to_owned())
        ]
    );
    assert_eq!(ep(&state, "ep-2").phase, EpisodePhase::Stopped);
    log.extend(events);
    replays(&log, &b);

    // Without success_achieved listed, the root's result is recorded, no stop.
    let (mut state, b, _) = start("stop_conditions = [\"budget_exhausted\"]", budget(1_000));
    let events = answer(&mut state, &b, 0, 2_000, vec![to_external(json!({}))]);
    assert_eq!(
        ends(&events),
        [("ep-1".to_owned(), "finished", "\"ok\":".to_owned())]
    );
    assert_eq!(ep(&state, "ep-1").phase, EpisodePhase::Finished);
}

#[test]
pub(crate) fn a_blocked_or_failed_run_records_the_end_of_every_open_episode() {
    // Blocked: orch may not hand off to worker; the root and its running child stop
    // `policy_blocks`, naming the block's rule.
    let (mut state, b, mut log) = started();
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    let worker = pending(&state).request_id;
    let child_call = state.calls[&worker].request.clone();
    assert_eq!(child_call.episode_id, "ep-2");
    let events = step(
        &mut state,
        &b,
        Command::RecordResponse {
            request_id: worker.clone(),
            response: AgentResponse::success(
                worker,
                Confidence::High,
                vec![Action::Handoff {
                    to: "orch".into(),
                    output_type: "x".into(),
                    payload: json!({}),
                }],
            ),
            at_ms: 3_000,
        },
    );
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "handoff.denied",
            "episode.stopped",
            "episode.stopped",
            "run.blocked"
        ]
    );
    assert_eq!(
        stops(&events),
        [
            ("ep-1".to_owned(), StopCondition::PolicyBlocks),
            ("ep-2".to_owned(), StopCondition::PolicyBlocks)
        ]
    );
    let Some(RunEvent::RunBlocked { rule_id, .. }) = events.last() else {
        panic!("run.blocked");
    };
    for e in &events[2..4] {
        let RunEvent::EpisodeStopped {
            rule_id: r, reason, ..
        } = e
        else {
            panic!("episode.stopped");
        };
        assert_eq!(r, rule_id);
        assert!(reason.contains("the run was blocked"), "{reason}");
    }
    log.extend(events);
    replays(&log, &b);

    // Failed: the last agent ended without a handoff or a finish.
    let (mut state, b, mut log) = started();
    let events = answer(&mut state, &b, 0, 2_000, Vec::new());
    assert_eq!(
        kinds(&events),
        ["agent.responded", "episode.finished", "run.failed"]
    );
    assert_eq!(
        ends(&events),
        [(
            "ep-1".to_owned(),
            "finished",
            "\"failed\":run_failed".to_owned()
        )]
    );
    assert_eq!(state.status, RunStatus::Failed);
    log.extend(events);
    replays(&log, &b);

    // A root that already ended (its agent finished the episode) is not ended twice.
    let (mut state, _, _) = started();
    let b = bundle_with("").0;
    let events = answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![finish(EpisodeStatus::Ok, "done")],
    );
    assert_eq!(
        ends(&events),
        [
            ("ep-1".to_owned(), "finished", "\"ok\":".to_owned()),
            ("ep-1".to_owned(), "stopped", "success_achieved".to_owned())
        ]
    );
    assert_eq!(state.status, RunStatus::Completed);
}

/// The `failure_repeats` stop condition (docs/governance.md#stop-conditions): refusals that
/// only tell the agent (their condition is not listed) count as failures of their class; at
/// the recursion policy's `failure_repeat_limit` (3) the episode stops `failure_repeats`
/// instead of looping until a budget runs out. In a child, the parent gets the failed
/// result.
#[test]
pub(crate) fn repeated_refusals_stop_the_episode_failure_repeats() {
    let listed = "stop_conditions = [\"budget_exhausted\", \"failure_repeats\"]";
    // The root: refused spawns (a forbidden child type), no usage reported.
    let (mut state, b, mut log) = start(listed, budget(1_000));
    for i in 1..=3 {
        let events = answer(
            &mut state,
            &b,
            0,
            2_000,
            vec![spawn("worker", "publish", None)],
        );
        if i < 3 {
            assert!(stops(&events).is_empty());
            assert_eq!(
                pending(&state)
                    .decision_inputs
                    .last()
                    .expect("note")
                    .output_type,
                "action_denied"
            );
        } else {
            assert_eq!(
                kinds(&events),
                [
                    "agent.responded",
                    "episode.action_denied",
                    "episode.stopped",
                    "run.failed"
                ]
            );
            assert_eq!(
                stops(&events),
                [("ep-1".to_owned(), StopCondition::FailureRepeats)]
            );
        }
        log.extend(events);
    }
    assert_eq!(state.status, RunStatus::Failed);
    assert_eq!(ep(&state, "ep-1").error_classes["spawn_refused"], 3);
    assert!(
        state
            .stop_reason
            .as_deref()
            .unwrap_or("")
            .contains("`spawn_refused` repeated 3 times (limit 3)"),
        "{:?}",
        state.stop_reason
    );
    replays(&log, &b);

    // A child whose agent keeps writing a domain it does not own: the child stops, the
    // parent's agent gets its failed result.
    let (mut state, b, mut log) = start(listed, budget(1_000));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    for i in 1..=3 {
        let events = answer(
            &mut state,
            &b,
            0,
            2_000,
            vec![Action::WriteDomain {
                domain: "plan".into(),
                content: json!({"step": i}),
            }],
        );
        assert_eq!(kinds(&events)[1], "domain.write_denied");
        assert_failure_repeats_stop(&events, i == 3, "ep-2");
        log.extend(events);
    }
    assert_eq!(state.status, RunStatus::Running);
    let back = pending(&state);
    assert_eq!(back.episode_id, "ep-1");
    let result = &back
        .decision_inputs
        .last()
        .expect("the child's result")
        .payload;
    assert_eq!(result["result"]["error_class"], "failure_repeats");
    replays(&log, &b);
}

#[test]
pub(crate) fn answers_from_a_stopped_episode_are_recorded_but_not_acted_on() {
    let workers = "[[recursion.policies]]\nid = \"workers\"\nagents = [\"worker\"]\n\
                   allowed_child_types = [\"retrieve\", \"summarize\"]\nfailure_repeat_limit = 1";
    let (mut state, b, mut log) = start(workers, budget(1_000));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    ));
    log.extend(answer(
        &mut state,
        &b,
        0,
        2_000,
        vec![
            spawn("worker", "retrieve", None),
            spawn("worker", "summarize", None),
        ],
    ));
    let calls = state.pending_requests();
    let (first, second) = (calls[0].request_id.clone(), calls[1].request_id.clone());
    let failed = AgentResponse::success(
        first.clone(),
        Confidence::High,
        vec![finish(EpisodeStatus::Failed, "broken")],
    );
    let events = step(
        &mut state,
        &b,
        Command::RecordResponse {
            request_id: first,
            response: failed,
            at_ms: 2_100,
        },
    );
    // ep-3 failed once: its parent ep-2 stops (the workers' failure_repeat_limit is 1),
    // and so does ep-2's other running child ep-4; the root (limit 3) goes on.
    assert_eq!(
        stops(&events),
        [
            ("ep-2".to_owned(), StopCondition::FailureRepeats),
            ("ep-4".to_owned(), StopCondition::FailureRepeats)
        ]
    );
    log.extend(events);
    let late = AgentResponse::success(
        second.clone(),
        Confidence::High,
        vec![spawn("worker", "retrieve", None)],
    );
    let events = step(
        &mut state,
        &b,
        Command::RecordResponse {
            request_id: second,
            response: late,
            at_ms: 2_200,
        },
    );
    assert_eq!(kinds(&events), ["agent.responded"]);
    assert_eq!(ep(&state, "ep-4").budget["tokens"].used, 0, "not charged");
    log.extend(events);
    replays(&log, &b);
}

// ---------------------------------------------------------------------------------------
// Property: random agents never push a recorded run past a limit.

#[derive(Debug, Clone)]
enum Move {
    Spawn {
        agent: usize,
        child_type: usize,
        tokens: Option<u64>,
    },
    Finish {
        status: usize,
        summary: usize,
        artifacts: bool,
        class: usize,
        verify: bool,
    },
    Fail {
        class: usize,
    },
    Write,
    Plain,
}

fn a_move() -> impl Strategy<Value = Move> {
    prop_oneof![
        6 => (0..3usize, 0..8usize, proptest::option::of(0..600u64))
            .prop_map(|(agent, child_type, tokens)| Move::Spawn { agent, child_type, tokens }),
        2 => (0..3usize, 0..3usize, any::<bool>(), 0..2usize, any::<bool>()).prop_map(
            |(status, summary, artifacts, class, verify)| Move::Finish { status, summary, artifacts, class, verify }
        ),
        1 => (0..2usize).prop_map(|class| Move::Fail { class }),
        1 => Just(Move::Write),
        1 => Just(Move::Plain),
    ]
}

fn to_actions(m: &Move) -> Vec<Action> {
    const TYPES: [&str; 8] = [
        "verify",
        "retrieve",
        "summarize",
        "retrieve",
        "verify",
        "summarize",
        "publish",
        "rewrite",
    ];
    match m {
        Move::Spawn {
            agent,
            child_type,
            tokens,
        } => {
            vec![spawn(AGENTS[*agent], TYPES[*child_type], *tokens)]
        }
        Move::Finish {
            status,
            summary,
            artifacts,
            class,
            verify,
        } => {
            let status = [
                EpisodeStatus::Ok,
                EpisodeStatus::Failed,
                EpisodeStatus::NeedsReview,
            ][*status];
            let mut r = EpisodeResult::new(status, ["", "same", "news"][*summary]);
            if *artifacts {
                r.artifacts_created.push("a".into());
            }
            r.error_class = Some(["timeout", "invalid"][*class].into());
            r.verification_needed = *verify;
            vec![Action::FinishEpisode { result: r }]
        }
        Move::Write => vec![Action::WriteDomain {
            domain: "plan".into(),
            content: json!(1),
        }],
        Move::Plain => vec![Action::Finish {
            output: json!({"x": 1}),
        }],
        Move::Fail { .. } => Vec::new(),
    }
}

/// Drives random moves (with random usage and times) through `decide`; approves every
/// ticket. Returns the log.
fn drive(policy: &str, moves: &[(Move, u64, u32, i64)]) -> (Vec<RunEvent>, PolicyBundle) {
    let (mut state, b, mut log) = start(
        policy,
        WorkflowBudget {
            tokens: 2_000,
            tool_calls: 40,
            wall_time_ms: 60_000,
        },
    );
    let mut at = 1_000;
    for (m, tokens, tools, dt) in moves {
        if state.status.is_final() {
            break;
        }
        at += dt;
        let open = state.open_tickets().next().map(|(t, _)| t.clone());
        if let Some(ticket) = open {
            log.extend(step(
                &mut state,
                &b,
                Command::RecordHumanDecision {
                    ticket,
                    approved: true,
                    by: "p".into(),
                    reason: "r".into(),
                    choice: Some(1),
                    at_ms: at,
                },
            ));
            continue;
        }
        let Some(call) = state
            .pending_requests()
            .first()
            .map(|r| r.request_id.clone())
        else {
            break;
        };
        let command = if let Move::Fail { class } = m {
            Command::RecordFailure {
                request_id: call,
                code: ["AGENT_TIMEOUT", "AGENT_CRASHED"][*class].into(),
                message: "x".into(),
                at_ms: at,
            }
        } else {
            let mut response =
                AgentResponse::success(call.clone(), Confidence::High, to_actions(m));
            response.usage = Usage {
                input_tokens: *tokens,
                output_tokens: 0,
                tool_calls: *tools,
            };
            Command::RecordResponse {
                request_id: call,
                response,
                at_ms: at,
            }
        };
        log.extend(step(&mut state, &b, command));
    }
    (log, b)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// What is guaranteed, for every recorded run of random agents: no episode deeper
    /// than max_depth, no parent with more than max_children children, no run with more
    /// than max_total_episodes episodes, no child budget above 50% of its parent's
    /// remaining budget at its start, and no episode's charged usage above its limit by
    /// more than the last charge to it (the response that crossed it: it is stopped then
    /// and never charged again). And the log replays.
    #[test]
    fn random_agents_never_exceed_a_limit(
        moves in proptest::collection::vec((a_move(), 0..150u64, 0..4u32, 0..3_000i64), 1..80),
        variant in 0..3usize,
    ) {
        // The defaults; tighter limits; and refusals that tell the agent instead of
        // stopping (no policy_blocks), so runs go on and reach deeper trees.
        let policy = [
            "",
            "max_depth = 3\nmax_children = 3\nmax_total_episodes = 7",
            "max_depth = 4\nstop_conditions = [\"budget_exhausted\", \"depth_exceeded\", \"no_new_information\", \"failure_repeats\", \"success_achieved\"]",
        ][variant];
        let (log, b) = drive(policy, &moves);
        replay_check(&log, &b).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let p = b.recursion_policy("orch").clone();
        let mut state = RunState::default();
        let mut last_charge: BTreeMap<(String, String), u64> = BTreeMap::new();
        for event in &log {
            let before = state.episodes.clone();
            state.apply(event);
            // Every run's episode tree is closed in the log before the run ends.
            if matches!(event, RunEvent::RunCompleted { .. } | RunEvent::RunBlocked { .. } | RunEvent::RunFailed { .. }) {
                for e in before.episodes.values() {
                    prop_assert!(
                        !matches!(e.phase, EpisodePhase::Running | EpisodePhase::Review),
                        "{} still {} when the run ended", e.id, e.phase.as_str()
                    );
                }
            }
            if let RunEvent::EpisodeStarted { parent, budget, .. } = event {
                let parent = &before.episodes[parent];
                for (dim, limit) in budget {
                    let remaining = parent.budget[dim].remaining();
                    prop_assert!(*limit <= remaining / 2, "{dim}: {limit} > half of {remaining}");
                }
            }
            for (id, e) in &state.episodes.episodes {
                prop_assert!(e.depth <= p.max_depth.min(4), "{id} at depth {}", e.depth);
                prop_assert!(e.children.len() as u32 <= p.max_children, "{id} has {} children", e.children.len());
                for (dim, m) in &e.budget {
                    let was = before.episodes.get(id).map_or(0, |x| x.budget[dim].used);
                    let key = (id.clone(), dim.clone());
                    if m.used > was {
                        last_charge.insert(key.clone(), m.used - was);
                    }
                    if m.used > m.limit {
                        let last = last_charge.get(&key).copied().unwrap_or(0);
                        prop_assert!(m.used - m.limit <= last, "{id} {dim}: {}/{} beyond the last charge {last}", m.used, m.limit);
                    }
                }
            }
            prop_assert!(state.episodes.episodes.len() as u32 <= p.max_total_episodes);
        }
    }
}

#[test]
pub(crate) fn the_json_of_the_tree_round_trips() {
    let (mut state, b, _) = started();
    answer(
        &mut state,
        &b,
        5,
        2_000,
        vec![spawn("worker", "retrieve", None)],
    );
    let text = serde_json::to_string(&state.episodes).expect("serialises");
    let back: EpisodeTree = serde_json::from_str(&text).expect("parses");
    assert_eq!(back, state.episodes);
    let _: Value = serde_json::from_str(&text).expect("json");
}
