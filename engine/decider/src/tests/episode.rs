//! `decide/episode.rs` (docs/governance.md#episodes): spawn limits, budget shares and the
//! 70% line, usage charged up the tree, domain writes, results returning to the parent,
//! needs_review tickets, each stop condition, and a property test over random agents.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use docket_policies::StopCondition;
use docket_policies::{DecisionKind, PolicyBundle, PolicyDecision, RuleStep, StepOutcome, Verdict};

use super::*;
use crate::events::workflow::{WorkflowBudget, WorkflowSpec};
use crate::{
    DECIDER_VERSION, Episode, EpisodeId, EpisodePhase, EpisodeTree, RunEvent, RunRequested,
    RunState, RunStatus, TicketSubject, condition_name, replay_check,
};
use docket_protocol::{
    Action, AgentResponse, BudgetRequest, Confidence, EpisodeResult, EpisodeStatus, Usage,
};

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

/// Given a research run under `policy` with `budget` started: orch's call in the root
/// episode ep-1 is pending. Inputs are recorded at 2,000 ms unless they say.
fn run_with(policy: &str, budget: WorkflowBudget) -> History {
    run_recorded_by(policy, budget)
}

/// [`run_with`] recorded by decider `version`.
fn run_recorded_by(policy: &str, budget: WorkflowBudget) -> History {
    let (_, text) = bundle_with(policy);
    run_under(text, budget, DECIDER_VERSION)
}

/// Given a research run under the bundle `text`, recorded by decider `version`.
fn run_under(text: String, budget: WorkflowBudget, version: u32) -> History {
    let b = PolicyBundle::from_toml_str(&text, "ep.toml").expect("test bundle is valid");
    let workflow = WorkflowSpec {
        name: "research".into(),
        policy: "ep.toml".into(),
        entry: "orch".into(),
        input_type: None,
        input: None,
        goal: Some("answer the question".into()),
        budget,
        effects: Default::default(),
        tools: Default::default(),
        evidence: Default::default(),
        agents: AGENTS
            .into_iter()
            .map(|a| (a.into(), in_process()))
            .collect(),
    };
    let given = start_events(
        &b,
        RunRequested {
            run_id: "run-e".into(),
            workflow,
            bundle_source: text,
            bundle_source_name: "ep.toml".into(),
            bundle_hash: b.hash().to_hex(),
            input: json!({"q": "why"}),
            at_ms: 1_000,
            decider_version: version,
            forked_from: None,
            scheduled: None,
            session: None,
        },
    );
    History::new(b).given(&given).clock(2_000, 0)
}

fn budget(tokens: u64) -> WorkflowBudget {
    WorkflowBudget {
        tokens,
        tool_calls: 100,
        wall_time_ms: 1_000_000,
    }
}

/// Given a research run under the default recursion policy, with 1,000 tokens.
fn research() -> History {
    run_with("", budget(1_000))
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
        trigger: trigger_of(episode_type),
    }
}

/// The first trigger the default bundle allows a child of `episode_type` (none for a
/// type without a recursion class).
fn trigger_of(episode_type: &str) -> Option<String> {
    let classes = docket_policies::RecursionClasses::default();
    classes
        .class_of(episode_type)
        .and_then(|c| classes.rule(c).triggers.first().cloned())
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
            } => Some((episode_id.to_string(), *condition)),
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

fn ep(state: &RunState, id: &str) -> Episode {
    state
        .episodes
        .get(&EpisodeId::from(id))
        .cloned()
        .expect("episode exists")
}

#[test]
pub(crate) fn the_root_episode_is_the_main_flow_and_requests_carry_its_id() {
    let run = research();
    let root = ep(&run.state, "ep-1");
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
    assert_eq!(run.pending().episode_id, "ep-1");
}

#[test]
pub(crate) fn an_allowed_spawn_starts_a_child_whose_result_returns_to_the_parent() {
    let mut run = research();
    run.when(respond(vec![spawn("worker", "retrieve", None)]))
        // The spawn's inputs cross from orch to worker scoped and recorded (version 3).
        .then_kinds(&[
            "agent.responded",
            "episode.started",
            "handoff.allowed",
            "agent.call_scheduled",
        ]);
    let child_call = run.pending();
    assert_eq!(child_call.episode_id, "ep-2");
    assert_eq!(child_call.target_agent, "worker");
    assert_eq!(child_call.decision_inputs[0].output_type, "episode_goal");
    let child = ep(&run.state, "ep-2");
    assert_eq!((child.depth, child.parent.as_deref()), (1, Some("ep-1")));
    // No budget asked: the child gets 50% of the parent's remaining budget.
    assert_eq!(child.budget["tokens"].limit, 500);

    run.when(respond(vec![finish(EpisodeStatus::Ok, "found it")]).at(3_000))
        .then_kinds(&[
            "agent.responded",
            "episode.finished",
            "episode.stopped",
            "handoff.allowed",
            "agent.call_scheduled",
        ])
        .then(|events| {
            assert_eq!(
                stops(events),
                [("ep-2".to_owned(), StopCondition::SuccessAchieved)]
            );
        });
    let back = run.pending();
    assert_eq!(
        (back.target_agent.as_str(), back.episode_id.as_str()),
        ("orch", "ep-1")
    );
    let result = back.decision_inputs.last().expect("the child's result");
    assert_eq!(result.output_type, "episode_result");
    assert_eq!(result.payload["result"]["summary"], "found it");

    run.when(respond(vec![finish(EpisodeStatus::Ok, "answered")]).at(4_000));
    assert_eq!(run.state.status, RunStatus::Completed);
    assert_eq!(
        run.state.output.as_ref().map(|o| &o["summary"]),
        Some(&json!("answered"))
    );
    run.then(|events| {
        assert_eq!(
            stops(events),
            [("ep-1".to_owned(), StopCondition::SuccessAchieved)]
        );
    });
    run.replays();
}

#[test]
pub(crate) fn a_spawn_beyond_max_depth_stops_the_spawner_depth_exceeded() {
    let mut run = research();
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    assert_eq!(ep(&run.state, "ep-3").depth, 2);
    run.when(respond(vec![spawn("worker", "retrieve", None)]))
        .then(|events| {
            let (condition, _, reason) = denial(events);
            assert_eq!(condition, StopCondition::DepthExceeded);
            assert!(reason.contains("child depth 3 > max_depth 2"), "{reason}");
            assert_eq!(
                stops(events),
                [("ep-3".to_owned(), StopCondition::DepthExceeded)]
            );
        });
    // The stopped child hands its parent (ep-2's worker) a failed result.
    let back = run.pending();
    assert_eq!(back.episode_id, "ep-2");
    let result = &back.decision_inputs.last().expect("result").payload["result"];
    assert_eq!(result["status"], "failed");
    assert_eq!(result["error_class"], "depth_exceeded");
    run.replays();
}

#[test]
pub(crate) fn max_children_and_max_total_episodes_are_enforced() {
    let mut run = run_with("max_children = 1", budget(1_000));
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    run.when(respond(vec![finish(EpisodeStatus::Ok, "a")]));
    run.when(respond(vec![spawn("worker", "retrieve", None)]))
        .then(|events| {
            let (condition, rule, reason) = denial(events);
            assert_eq!(condition, StopCondition::PolicyBlocks);
            assert_eq!(rule, "recursion.default");
            assert!(reason.contains("max_children 1 reached"), "{reason}");
        });
    assert_eq!(
        run.state.status,
        RunStatus::Blocked,
        "the root stopped: the run is blocked"
    );
    run.replays();

    let mut run = run_with("max_total_episodes = 2", budget(1_000));
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    run.when(respond(vec![spawn("worker", "retrieve", None)]))
        .then(|events| {
            let (_, _, reason) = denial(events);
            assert!(reason.contains("max_total_episodes 2 reached"), "{reason}");
        });
    assert_eq!(run.state.episodes.episodes.len(), 2);
    run.replays();
}

#[test]
pub(crate) fn forbidden_and_unlisted_child_types_are_refused() {
    for (child_type, expected) in [
        ("publish", "forbidden unless a human"),
        ("engage", "not in allowed_child_types"),
    ] {
        let mut run = research();
        run.when(respond(vec![spawn("worker", child_type, None)]))
            .then(|events| {
                let (condition, _, reason) = denial(events);
                assert_eq!(condition, StopCondition::PolicyBlocks);
                assert!(reason.contains(expected), "{reason}");
                assert_eq!(
                    stops(events),
                    [("ep-1".to_owned(), StopCondition::PolicyBlocks)]
                );
            });
        assert_eq!(run.state.status, RunStatus::Blocked);
        run.replays();
    }
}

#[test]
pub(crate) fn a_child_gets_at_most_half_of_the_parents_remaining_budget() {
    let mut run = research();
    // 200 of 1000 tokens used by this very response: 800 remain, so at most 400.
    run.when(respond(vec![spawn("worker", "retrieve", Some(401))]).tokens(200))
        .then(|events| {
            let (_, rule, reason) = denial(events);
            assert_eq!(rule, "recursion.budget.child_max_share_percent");
            assert!(
                reason.contains("at most 50% of the parent's remaining (400)"),
                "{reason}"
            );
        });

    let mut run = research();
    run.when(respond(vec![spawn("worker", "retrieve", Some(400))]).tokens(200));
    assert_eq!(ep(&run.state, "ep-2").budget["tokens"].limit, 400);
}

#[test]
pub(crate) fn past_70_percent_a_spawn_is_refused_finalize_or_escalate() {
    let mut run = research();
    assert_eq!(
        run.state.episode_gate(&run.bundle, &EpisodeId::root()),
        None
    );
    run.when(respond(vec![spawn("worker", "retrieve", Some(10))]).tokens(700))
        .then(|events| {
            let (condition, rule, reason) = denial(events);
            assert_eq!(condition, StopCondition::PolicyBlocks);
            assert_eq!(rule, "recursion.budget.finalize_or_escalate_at_percent");
            assert!(reason.contains("700/1000 tokens"), "{reason}");
        });
    // The gate the side-effect decider asks says the same, naming the numbers; the root
    // stopped meanwhile, which the gate reports first.
    let mut fresh = research();
    fresh.when(
        respond(vec![Action::Escalate {
            reason: "look".into(),
            choices: Vec::new(),
        }])
        .tokens(700),
    );
    let gate = fresh
        .state
        .episode_gate(&fresh.bundle, &EpisodeId::root())
        .expect("gated");
    assert_eq!(
        &*gate.rule_id,
        "recursion.budget.finalize_or_escalate_at_percent"
    );
    assert!(gate.reason.contains("700/1000 tokens"), "{}", gate.reason);
    let stopped = run
        .state
        .episode_gate(&run.bundle, &EpisodeId::root())
        .expect("stopped");
    assert_eq!(&*stopped.rule_id, "episodes.not_running");
}

#[test]
pub(crate) fn usage_is_charged_to_the_episode_and_every_ancestor() {
    let mut run = research();
    run.when(respond(vec![spawn("worker", "retrieve", None)]).tokens(10));
    run.when(
        respond(vec![spawn("verifier", "verify", None)])
            .tokens(20)
            .at(3_000),
    );
    run.when(
        respond(vec![Action::Escalate {
            reason: "x".into(),
            choices: Vec::new(),
        }])
        .tokens(40)
        .at(4_500),
    );
    assert_eq!(ep(&run.state, "ep-3").budget["tokens"].used, 40);
    assert_eq!(ep(&run.state, "ep-2").budget["tokens"].used, 60);
    assert_eq!(ep(&run.state, "ep-1").budget["tokens"].used, 70);
    // Wall time: recorded time since each episode started.
    assert_eq!(ep(&run.state, "ep-1").budget["wall_time_ms"].used, 3_500);
    assert_eq!(ep(&run.state, "ep-2").budget["wall_time_ms"].used, 2_500);
    assert_eq!(ep(&run.state, "ep-3").budget["wall_time_ms"].used, 1_500);
}

#[test]
pub(crate) fn time_waiting_for_a_human_is_not_wall_time() {
    let mut run = research();
    run.when(respond(vec![
        Action::Escalate {
            reason: "sign-off".into(),
            choices: Vec::new(),
        },
        spawn("worker", "retrieve", None),
    ]));
    run.when(approve("ticket-1").at(500_000));
    run.when(respond(vec![finish(EpisodeStatus::Ok, "x")]).at(501_000));
    // 1000 ms before the wait, 1000 after it; the 498 s wait is not counted.
    assert_eq!(ep(&run.state, "ep-1").budget["wall_time_ms"].used, 2_000);
    run.replays();
}

#[test]
pub(crate) fn an_exhausted_budget_stops_the_episode_and_its_actions_are_not_carried_out() {
    let mut run = research();
    run.when(respond(vec![spawn("worker", "retrieve", Some(100))]));
    run.when(
        respond(vec![spawn("verifier", "verify", None)])
            .tokens(150)
            .at(2_500),
    )
    .then(|events| {
        assert_eq!(
            stops(events),
            [("ep-2".to_owned(), StopCondition::BudgetExhausted)]
        );
        assert!(
            !kinds(events).contains(&"episode.started"),
            "{:?}",
            kinds(events)
        );
    });
    let back = run.pending();
    assert_eq!(back.target_agent, "orch");
    assert_eq!(
        back.decision_inputs.last().expect("result").payload["result"]["error_class"],
        "budget_exhausted"
    );
    // The root exhausted: the run is blocked naming the condition.
    run.when(
        respond(vec![finish(EpisodeStatus::Ok, "x")])
            .tokens(2_000)
            .at(3_000),
    )
    .then(|events| {
        assert_eq!(
            stops(events),
            [("ep-1".to_owned(), StopCondition::BudgetExhausted)]
        );
    });
    assert_eq!(run.state.status, RunStatus::Blocked);
    assert!(
        run.state
            .stop_reason
            .as_deref()
            .unwrap_or("")
            .contains("budget_exhausted"),
        "{:?}",
        run.state.stop_reason
    );
    run.replays();
}

#[test]
pub(crate) fn two_children_without_delta_stop_the_parent_no_new_information() {
    let mut run = research();
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    run.when(respond(vec![finish(EpisodeStatus::Ok, "same")]));
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    run.when(respond(vec![finish(EpisodeStatus::Ok, "same")]));
    assert_eq!(ep(&run.state, "ep-1").consecutive_no_delta, 1);
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    run.when(respond(vec![finish(EpisodeStatus::Ok, "same")]))
        .then(|events| {
            assert!(stops(events).contains(&("ep-1".to_owned(), StopCondition::NoNewInformation)));
        });
    assert_eq!(run.state.status, RunStatus::Failed);
    run.replays();
}

#[test]
pub(crate) fn the_same_error_class_n_times_stops_failure_repeats() {
    let mut run = research();
    for i in 0..3 {
        run.when(respond(vec![spawn("worker", "retrieve", None)]));
        let mut failed = EpisodeResult::new(EpisodeStatus::Failed, format!("attempt {i}"));
        failed.error_class = Some("timeout".into());
        failed.artifacts_created.push(format!("log-{i}"));
        run.when(respond(vec![Action::FinishEpisode { result: failed }]))
            .then(|events| assert_failure_repeats_stop(events, i == 2, "ep-1"));
    }
    assert_eq!(run.state.status, RunStatus::Failed);
    assert!(
        run.state
            .stop_reason
            .as_deref()
            .unwrap_or("")
            .contains("`timeout` repeated 3 times")
    );
    run.replays();
}

#[test]
pub(crate) fn a_child_agent_failing_past_the_ladder_stops_its_episode_not_the_run() {
    let mut run = research();
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    let timeout = |at_ms| fail("AGENT_TIMEOUT", "no answer").at(at_ms);
    run.when(timeout(3_000)); // retry
    run.when(timeout(4_000)); // escalate to a human
    run.when(approve("ticket-1").because("once more").at(5_000));
    run.when(timeout(6_000)) // the ladder's hard stop
        .then(|events| {
            assert_eq!(
                stops(events),
                [("ep-2".to_owned(), StopCondition::FailureRepeats)]
            );
            assert!(
                !kinds(events).contains(&"run.blocked"),
                "{:?}",
                kinds(events)
            );
        });
    assert_eq!(run.state.status, RunStatus::Running);
    let back = run.pending();
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
    run.replays();
}

#[test]
pub(crate) fn success_needs_a_passing_verifier_when_verification_is_needed() {
    let mut run = research();
    let mut needs = EpisodeResult::new(EpisodeStatus::Ok, "done");
    needs.verification_needed = true;
    run.when(respond(vec![Action::FinishEpisode {
        result: needs.clone(),
    }]))
    .then(|events| {
        let (condition, rule, _) = denial(events);
        assert_eq!(
            (condition, rule.as_str()),
            (
                StopCondition::SuccessAchieved,
                "stop_conditions.success_achieved"
            )
        );
    });
    assert_eq!(run.state.status, RunStatus::Running);
    let told = run.pending();
    assert_eq!(
        told.decision_inputs.last().expect("note").output_type,
        "action_denied"
    );
    run.when(respond(vec![spawn("verifier", "verify", None)]));
    run.when(respond(vec![finish(EpisodeStatus::Ok, "verified")]));
    assert!(ep(&run.state, "ep-1").verified);
    run.when(respond(vec![Action::FinishEpisode { result: needs }]))
        .then(|events| {
            assert_eq!(
                stops(events),
                [("ep-1".to_owned(), StopCondition::SuccessAchieved)]
            );
        });
    assert_eq!(run.state.status, RunStatus::Completed);
    run.replays();
}

/// A summary of `n` lines.
fn lines(n: usize) -> String {
    (1..=n)
        .map(|i| format!("line {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
pub(crate) fn a_summary_over_eight_lines_is_refused_and_the_agent_told_to_shorten_it() {
    // Given a research run; when orch finishes with a nine-line summary...
    let mut run = research();
    let long = EpisodeResult::new(EpisodeStatus::Ok, lines(9));
    run.when(respond(vec![Action::FinishEpisode {
        result: long.clone(),
    }]))
    .then(|events| {
        // ...then its answer is recorded, the finish refused, and orch called again.
        assert_eq!(
            kinds(events),
            [
                "agent.responded",
                "episode.action_denied",
                "agent.call_scheduled"
            ]
        );
        let RunEvent::EpisodeActionDenied {
            episode_id,
            agent,
            action,
            detail,
            decision,
            condition,
        } = &events[1]
        else {
            panic!("a denial: {:?}", events[1]);
        };
        assert_eq!(
            (episode_id.as_str(), agent.as_str(), action.as_str()),
            ("ep-1", "orch", "finish_episode")
        );
        assert_eq!(detail["summary"], json!(long.summary));
        assert_eq!(&*decision.rule_id, "episodes.summary_lines");
        assert!(
            decision.reason.contains("9 lines, more than 8"),
            "{}",
            decision.reason
        );
        assert_eq!(*condition, StopCondition::PolicyBlocks);
    });
    // Nothing stopped, though policy_blocks is listed: the agent may say it shorter.
    assert_eq!(run.state.status, RunStatus::Running);
    assert_eq!(ep(&run.state, "ep-1").phase, EpisodePhase::Running);
    assert_eq!(ep(&run.state, "ep-1").error_classes["summary_refused"], 1);
    let told = run.pending();
    let note = told.decision_inputs.last().expect("note");
    assert_eq!(note.output_type, "action_denied");
    assert_eq!(note.payload["rule_id"], "episodes.summary_lines");
    // Eight lines are enough.
    run.when(respond(vec![finish(EpisodeStatus::Ok, &lines(8))]))
        .then(|events| {
            assert_eq!(
                stops(events),
                [("ep-1".to_owned(), StopCondition::SuccessAchieved)]
            );
        });
    assert_eq!(run.state.status, RunStatus::Completed);
    run.replays();
}

#[test]
pub(crate) fn a_long_summary_refused_again_and_again_stops_on_failure_repeats() {
    let mut run = research();
    for n in 1..=3 {
        run.when(respond(vec![finish(EpisodeStatus::Failed, &lines(12))]));
        run.then(|events| assert_failure_repeats_stop(events, n == 3, "ep-1"));
    }
    assert_eq!(ep(&run.state, "ep-1").error_classes["summary_refused"], 3);
    assert_eq!(run.state.status, RunStatus::Failed);
    run.replays();
}

#[test]
pub(crate) fn a_run_of_version_15_takes_a_summary_of_any_length() {
    let (_, text) = bundle_with("");
    let mut run = run_under(text, budget(1_000), 15);
    run.when(respond(vec![finish(EpisodeStatus::Ok, &lines(30))]))
        .then(|events| {
            assert!(!kinds(events).contains(&"episode.action_denied"));
            assert_eq!(
                stops(events),
                [("ep-1".to_owned(), StopCondition::SuccessAchieved)]
            );
        });
    run.replays();
}

#[test]
pub(crate) fn needs_review_opens_a_handoff_ticket_approval_completes_denial_blocks() {
    for approved in [true, false] {
        let mut run = research();
        let mut review = EpisodeResult::new(EpisodeStatus::NeedsReview, "draft ready");
        review.next_actions.push(json!({"task": "publish"}));
        run.when(respond(vec![Action::FinishEpisode { result: review }]));
        assert_eq!(run.state.status, RunStatus::WaitingForHuman);
        let ticket = run
            .state
            .tickets
            .get(&crate::TicketId::from("ticket-1"))
            .expect("ticket");
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
        let human = if approved {
            approve("ticket-1")
        } else {
            deny("ticket-1")
        };
        run.when(human.because("read it").at(9_000));
        if approved {
            assert_eq!(run.state.status, RunStatus::Completed);
            run.then(|events| {
                assert_eq!(
                    stops(events),
                    [("ep-1".to_owned(), StopCondition::SuccessAchieved)]
                );
            });
        } else {
            assert_eq!(run.state.status, RunStatus::Blocked);
            run.then(|events| {
                assert_eq!(
                    stops(events),
                    [("ep-1".to_owned(), StopCondition::PolicyBlocks)]
                );
            });
        }
        run.replays();
    }
}

#[test]
pub(crate) fn only_the_owner_writes_a_domain_each_write_a_new_version_read_by_others() {
    let mut run = research();
    let write = |v: u32| Action::WriteDomain {
        domain: "plan".into(),
        content: json!({"step": v}),
    };
    run.when(respond(vec![
        write(1),
        write(2),
        spawn("worker", "retrieve", None),
    ]));
    let versions: Vec<u32> = run.state.episodes.domains["plan"]
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(versions, [1, 2]);
    assert_eq!(
        run.state.episodes.domains["plan"][0].content,
        json!({"step": 1}),
        "history kept"
    );
    // The worker reads plan: its latest version arrives as a read-only context input.
    let call = run.pending();
    let read = call
        .context_inputs
        .iter()
        .find(|c| c.output_type == "domain:plan@v2")
        .expect("plan v2 delivered");
    assert_eq!(*read.payload, json!({"step": 2}));
    // The worker is not plan's owner.
    run.when(respond(vec![write(3)])).then(|events| {
        assert!(
            kinds(events).contains(&"domain.write_denied"),
            "{:?}",
            kinds(events)
        );
        assert_eq!(
            stops(events),
            [("ep-2".to_owned(), StopCondition::PolicyBlocks)]
        );
    });
    assert_eq!(run.state.episodes.domains["plan"].len(), 2);
    run.replays();
}

/// Given a research run whose `plan` domain has content rules (an output type, a
/// required reference, a size: docs/governance.md#domain-content), recorded by decider
/// `version`.
fn planning(version: u32) -> History {
    let (_, text) = bundle_with("");
    let text = text.replace(
        "[[domains]]\nid = \"plan\"\n",
        r#"[[domains]]
id = "plan"
content_type = "plan_graph"
required_refs = ["nodes.cites"]
max_bytes = 200
[[output_types]]
id = "plan_graph"
schema = { type = "object", required = ["nodes"], properties = { nodes = { type = "array" } } }
"#,
    );
    run_under(text, budget(1_000), version)
}

fn write_plan(content: Value) -> Action {
    Action::WriteDomain {
        domain: "plan".into(),
        content,
    }
}

#[test]
pub(crate) fn a_domain_write_that_breaks_its_content_rules_is_refused_naming_the_place() {
    let mut run = planning(DECIDER_VERSION);
    let hash = run.bundle.hash();
    run.when(respond(vec![write_plan(
        json!({"nodes": [{"cites": ["capsule:1"]}, {"cites": []}]}),
    )]))
    .then(|events| {
        assert_eq!(
            events[1],
            RunEvent::DomainWriteDenied {
                domain: "plan".into(),
                agent: "orch".into(),
                episode_id: EpisodeId::root(),
                decision: PolicyDecision {
                    kind: DecisionKind::DomainWrite,
                    verdict: Verdict::Deny,
                    rule_id: "domains.plan.required_refs".into(),
                    reason: "content of `plan` refused: /nodes/1/cites is missing or empty \
                             (required reference `nodes.cites`)"
                        .into(),
                    bundle_hash: hash,
                    chain: vec![
                        RuleStep::new(
                            "agents.orch.write_scopes",
                            StepOutcome::Applied,
                            "`plan` in write_scopes"
                        ),
                        RuleStep::new(
                            "domains.plan.max_bytes",
                            StepOutcome::Applied,
                            "48 of at most 200 bytes"
                        ),
                        RuleStep::new(
                            "domains.plan.content_type",
                            StepOutcome::Applied,
                            "content matches plan_graph@1"
                        ),
                        RuleStep::new(
                            "domains.plan.required_refs",
                            StepOutcome::Applied,
                            "content refused"
                        ),
                    ],
                },
                by: None,
            }
        );
        assert_eq!(
            stops(events),
            [("ep-1".to_owned(), StopCondition::PolicyBlocks)]
        );
    });
    assert!(
        !run.state.episodes.domains.contains_key("plan"),
        "nothing written"
    );
    run.replays();
}

#[test]
pub(crate) fn a_domain_write_that_meets_its_content_rules_records_each_rule_met() {
    let mut run = planning(DECIDER_VERSION);
    let plan = json!({"nodes": [{"cites": ["capsule:1"]}]});
    run.when(respond(vec![write_plan(plan.clone())]))
        .then(|events| match &events[1] {
            RunEvent::DomainWritten {
                version,
                content,
                decision,
                ..
            } => {
                assert_eq!((*version, content), (1, &plan));
                assert!(decision.is_allowed());
                assert_eq!(&*decision.rule_id, "agents.orch.write_scopes");
                let met: Vec<(&str, &str)> = decision
                    .chain
                    .iter()
                    .map(|s| (&*s.rule_id, &*s.note))
                    .collect();
                assert_eq!(
                    met,
                    [
                        ("agents.orch.write_scopes", "`plan` in write_scopes"),
                        ("domains.plan.max_bytes", "35 of at most 200 bytes"),
                        ("domains.plan.content_type", "content matches plan_graph@1"),
                        (
                            "domains.plan.required_refs",
                            "every required reference filled (nodes.cites)"
                        ),
                    ]
                );
            }
            other => panic!("expected domain.written, got {other:?}"),
        });
    run.replays();
}

#[test]
pub(crate) fn a_domain_keeps_its_versions_with_raw_pointers_redacted() {
    let (_, text) = bundle_with("");
    let text = text.replace(
        "[[domains]]\nid = \"plan\"\n",
        "[[domains]]\nid = \"plan\"\nredact = [\"nodes.raw_ref\"]\nmax_bytes = 60\n",
    );
    let mut run = run_under(text, budget(1_000), DECIDER_VERSION);
    let written =
        json!({"nodes": [{"cites": ["capsule:1"], "raw_ref": "s3://raw/conversations/1.json"}]});
    let kept = json!({"nodes": [{"cites": ["capsule:1"], "raw_ref": "[redacted]"}]});
    run.when(respond(vec![
        write_plan(written),
        spawn("worker", "summarize", None),
    ]))
    .then(|events| match &events[1] {
        RunEvent::DomainWritten {
            content, decision, ..
        } => {
            assert_eq!(content, &kept);
            let steps: Vec<(&str, &str)> = decision
                .chain
                .iter()
                .map(|s| (&*s.rule_id, &*s.note))
                .collect();
            // The size is the redacted content's: the raw one, 77 bytes, would be refused.
            assert_eq!(
                steps,
                [
                    ("agents.orch.write_scopes", "`plan` in write_scopes"),
                    ("domains.plan.max_bytes", "58 of at most 60 bytes"),
                    ("domains.plan.redact", "redacted /nodes/0/raw_ref"),
                ]
            );
        }
        other => panic!("expected domain.written, got {other:?}"),
    });
    // A reader is given the version as kept.
    let request = run.pending();
    assert_eq!(request.target_agent.as_str(), "worker");
    let read = serde_json::to_string(&request.context_inputs).expect("json");
    assert!(
        read.contains("[redacted]") && !read.contains("s3://"),
        "{read}"
    );
    run.replays();
}

#[test]
pub(crate) fn a_run_of_decider_13_writes_content_its_domain_rules_would_refuse() {
    let mut run = planning(13);
    run.when(respond(vec![write_plan(json!({"nodes": "not a list"}))]))
        .then(|events| {
            assert_eq!(kinds(events)[1], "domain.written");
            assert!(stops(events).is_empty());
        });
    assert_eq!(run.state.episodes.domains["plan"].len(), 1);
    run.replays();
}

#[test]
pub(crate) fn a_refusal_whose_condition_is_not_listed_tells_the_agent_instead_of_stopping() {
    let mut run = run_with("stop_conditions = [\"budget_exhausted\"]", budget(1_000));
    run.when(respond(vec![spawn("worker", "publish", None)]))
        .then(|events| assert!(stops(events).is_empty()));
    assert_eq!(run.state.status, RunStatus::Running);
    let told = run.pending();
    let note = told.decision_inputs.last().expect("note");
    assert_eq!(
        (note.source_agent.as_str(), note.output_type.as_str()),
        ("docket", "action_denied")
    );
    assert_eq!(note.payload["condition"], "policy_blocks");
    run.replays();
}

fn ends(events: &[RunEvent]) -> Vec<(String, &'static str, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::EpisodeFinished {
                episode_id, result, ..
            } => Some((
                episode_id.to_string(),
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
                episode_id.to_string(),
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
        task: None,
    }
}

#[test]
pub(crate) fn a_run_completed_by_a_plain_handoff_records_the_root_episodes_success() {
    let mut run = research();
    run.when(respond(vec![to_external(json!({"a": 1}))]).tokens(10))
        .then_kinds(&[
            "agent.responded",
            "handoff.allowed",
            "episode.finished",
            "episode.stopped",
            "run.completed",
        ])
        .then(|events| {
            assert_eq!(
                ends(events),
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
        });
    assert_eq!(run.state.status, RunStatus::Completed);
    assert_eq!(ep(&run.state, "ep-1").phase, EpisodePhase::Stopped);
    run.replays();

    // A child still running when the run completes ends with it, after the root.
    let mut run = research();
    run.when(respond(vec![
        spawn("worker", "retrieve", None),
        to_external(json!({})),
    ]))
    .then(|events| {
        assert_eq!(
            ends(events),
            [
                ("ep-1".to_owned(), "finished", "\"ok\":".to_owned()),
                ("ep-1".to_owned(), "stopped", "success_achieved".to_owned()),
                ("ep-2".to_owned(), "stopped", "success_achieved".to_owned())
            ]
        );
    });
    assert_eq!(ep(&run.state, "ep-2").phase, EpisodePhase::Stopped);
    run.replays();

    // Without success_achieved listed, the root's result is recorded, no stop.
    let mut run = run_with("stop_conditions = [\"budget_exhausted\"]", budget(1_000));
    run.when(respond(vec![to_external(json!({}))]))
        .then(|events| {
            assert_eq!(
                ends(events),
                [("ep-1".to_owned(), "finished", "\"ok\":".to_owned())]
            );
        });
    assert_eq!(ep(&run.state, "ep-1").phase, EpisodePhase::Finished);
}

#[test]
pub(crate) fn a_blocked_or_failed_run_records_the_end_of_every_open_episode() {
    // Blocked: orch may not hand off to worker; the root and its running child stop
    // `policy_blocks`, naming the block's rule.
    let mut run = research();
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    let worker = run.pending().request_id;
    let child_call = run.history().calls()[&worker].request().clone();
    assert_eq!(child_call.episode_id, "ep-2");
    run.when(
        respond(vec![Action::Handoff {
            to: "orch".into(),
            output_type: "x".into(),
            payload: json!({}),
            task: None,
        }])
        .to(&worker)
        .at(3_000),
    )
    .then_kinds(&[
        "agent.responded",
        "handoff.denied",
        "episode.stopped",
        "episode.stopped",
        "run.blocked",
    ])
    .then(|events| {
        assert_eq!(
            stops(events),
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
    });
    run.replays();

    // Failed: the last agent ended without a handoff or a finish.
    let mut run = research();
    run.when(respond(Vec::new()))
        .then_kinds(&["agent.responded", "episode.finished", "run.failed"])
        .then(|events| {
            assert_eq!(
                ends(events),
                [(
                    "ep-1".to_owned(),
                    "finished",
                    "\"failed\":run_failed".to_owned()
                )]
            );
        });
    assert_eq!(run.state.status, RunStatus::Failed);
    run.replays();

    // A root that already ended (its agent finished the episode) is not ended twice.
    let mut run = research();
    run.when(respond(vec![finish(EpisodeStatus::Ok, "done")]))
        .then(|events| {
            assert_eq!(
                ends(events),
                [
                    ("ep-1".to_owned(), "finished", "\"ok\":".to_owned()),
                    ("ep-1".to_owned(), "stopped", "success_achieved".to_owned())
                ]
            );
        });
    assert_eq!(run.state.status, RunStatus::Completed);
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
    let mut run = run_with(listed, budget(1_000));
    for i in 1..=3 {
        run.when(respond(vec![spawn("worker", "publish", None)]));
        if i < 3 {
            run.then(|events| assert!(stops(events).is_empty()));
            assert_eq!(
                run.pending()
                    .decision_inputs
                    .last()
                    .expect("note")
                    .output_type,
                "action_denied"
            );
        } else {
            run.then_kinds(&[
                "agent.responded",
                "episode.action_denied",
                "episode.stopped",
                "run.failed",
            ])
            .then(|events| {
                assert_eq!(
                    stops(events),
                    [("ep-1".to_owned(), StopCondition::FailureRepeats)]
                );
            });
        }
    }
    assert_eq!(run.state.status, RunStatus::Failed);
    assert_eq!(ep(&run.state, "ep-1").error_classes["spawn_refused"], 3);
    assert!(
        run.state
            .stop_reason
            .as_deref()
            .unwrap_or("")
            .contains("`spawn_refused` repeated 3 times (limit 3)"),
        "{:?}",
        run.state.stop_reason
    );
    run.replays();

    // A child whose agent keeps writing a domain it does not own: the child stops, the
    // parent's agent gets its failed result.
    let mut run = run_with(listed, budget(1_000));
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    for i in 1..=3 {
        run.when(respond(vec![Action::WriteDomain {
            domain: "plan".into(),
            content: json!({"step": i}),
        }]))
        .then(|events| {
            assert_eq!(kinds(events)[1], "domain.write_denied");
            assert_failure_repeats_stop(events, i == 3, "ep-2");
        });
    }
    assert_eq!(run.state.status, RunStatus::Running);
    let back = run.pending();
    assert_eq!(back.episode_id, "ep-1");
    let result = &back
        .decision_inputs
        .last()
        .expect("the child's result")
        .payload;
    assert_eq!(result["result"]["error_class"], "failure_repeats");
    run.replays();
}

/// The `failure_repeats` stop condition (docs/governance.md#stop-conditions): an agent that
/// keeps asking for effects it is refused (reporting no usage, so no budget would ever stop
/// it) is told twice; the third refusal of the same class stops its episode
/// `failure_repeats` (the root: the run fails), and the refusal is not handed back again.
#[test]
pub(crate) fn repeated_effect_refusals_stop_the_episode_failure_repeats() {
    let mut run = effects_run("reader");
    for i in 1..=3 {
        run.when(respond(vec![effect(
            "publish",
            "api",
            Some(&format!("k{i}")),
        )]));
        let stopped: Vec<_> = run
            .decided()
            .iter()
            .filter_map(|e| match e {
                RunEvent::EpisodeStopped {
                    episode_id,
                    condition,
                    rule_id,
                    reason,
                    ..
                } => Some((
                    episode_id.clone(),
                    *condition,
                    rule_id.clone(),
                    reason.clone(),
                )),
                _ => None,
            })
            .collect();
        if i < 3 {
            assert!(stopped.is_empty(), "{stopped:?}");
            assert_eq!(effect_result(&run.state)["status"], "refused");
            assert_eq!(run.state.status, RunStatus::Running);
            continue;
        }
        run.then_kinds(&[
            "agent.responded",
            "effect.requested",
            "policy.decided",
            "effect.refused",
            "episode.stopped",
            "run.failed",
        ]);
        let (episode, condition, rule, reason) = &stopped[0];
        assert_eq!(
            (episode.as_str(), *condition, rule.as_str()),
            (
                "ep-1",
                StopCondition::FailureRepeats,
                "stop_conditions.failure_repeats"
            )
        );
        assert!(
            reason.contains("`effect_refused` repeated 3 times (limit 3)"),
            "{reason}"
        );
    }
    assert_eq!(run.state.status, RunStatus::Failed);
    assert!(run.state.pending_requests().is_empty());
    run.replays();
}

#[test]
pub(crate) fn answers_from_a_stopped_episode_are_recorded_but_not_acted_on() {
    let workers = "[[recursion.policies]]\nid = \"workers\"\nagents = [\"worker\"]\n\
                   allowed_child_types = [\"retrieve\", \"summarize\"]\nfailure_repeat_limit = 1";
    let mut run = run_with(workers, budget(1_000));
    run.when(respond(vec![spawn("worker", "retrieve", None)]));
    run.when(respond(vec![
        spawn("worker", "retrieve", None),
        spawn("worker", "summarize", None),
    ]));
    let calls = run.state.pending_requests();
    let (first, second) = (calls[0].request_id.clone(), calls[1].request_id.clone());
    run.when(
        respond(vec![finish(EpisodeStatus::Failed, "broken")])
            .to(&first)
            .at(2_100),
    )
    // ep-3 failed once: its parent ep-2 stops (the workers' failure_repeat_limit is 1),
    // and so does ep-2's other running child ep-4; the root (limit 3) goes on.
    .then(|events| {
        assert_eq!(
            stops(events),
            [
                ("ep-2".to_owned(), StopCondition::FailureRepeats),
                ("ep-4".to_owned(), StopCondition::FailureRepeats)
            ]
        );
    });
    run.when(
        respond(vec![spawn("worker", "retrieve", None)])
            .to(&second)
            .at(2_200),
    )
    .then_kinds(&["agent.responded"]);
    assert_eq!(
        ep(&run.state, "ep-4").budget["tokens"].used,
        0,
        "not charged"
    );
    run.replays();
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
/// ticket. Returns the history.
fn drive(policy: &str, moves: &[(Move, u64, u32, i64)]) -> History {
    let mut run = run_with(
        policy,
        WorkflowBudget {
            tokens: 2_000,
            tool_calls: 40,
            wall_time_ms: 60_000,
        },
    );
    let mut at = 1_000;
    for (m, tokens, tools, dt) in moves {
        if run.state.status.is_final() {
            break;
        }
        at += dt;
        let open = run
            .state
            .open_tickets()
            .next()
            .map(|(_, t)| matches!(t.subject, TicketSubject::Conflict { .. }));
        if let Some(conflict) = open {
            let approval = approve_open().by("p").because("r").at(at);
            run.when(if conflict {
                approval.choice(1)
            } else {
                approval
            });
            continue;
        }
        let Some(call) = run
            .state
            .pending_requests()
            .first()
            .map(|r| r.request_id.clone())
        else {
            break;
        };
        if let Move::Fail { class } = m {
            run.when(
                fail(["AGENT_TIMEOUT", "AGENT_CRASHED"][*class], "x")
                    .to(&call)
                    .at(at),
            );
        } else {
            let usage = Usage {
                input_tokens: *tokens,
                output_tokens: 0,
                tool_calls: *tools,
            };
            run.when(
                respond_with(AgentResponse::success(
                    call.clone(),
                    Confidence::High,
                    to_actions(m),
                ))
                .to(&call)
                .usage(usage)
                .at(at),
            );
        }
    }
    run
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
        let History { log, bundle: b, .. } = drive(policy, &moves);
        replay_check(&log, &b).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let p = b.recursion_policy("orch").clone();
        let mut state = RunState::default();
        let mut last_charge: BTreeMap<(EpisodeId, String), u64> = BTreeMap::new();
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
    let mut run = research();
    run.when(respond(vec![spawn("worker", "retrieve", None)]).tokens(5));
    let text = serde_json::to_string(&run.state.episodes).expect("serialises");
    let back: EpisodeTree = serde_json::from_str(&text).expect("parses");
    assert_eq!(back, run.state.episodes);
    let _: Value = serde_json::from_str(&text).expect("json");
}

#[test]
pub(crate) fn past_70_percent_a_domain_write_waits_for_a_human_who_may_let_it_go_on() {
    let write = Action::WriteDomain {
        domain: "plan".into(),
        content: json!({"step": 1}),
    };
    let mut run = research();
    run.when(respond(vec![write.clone()]).tokens(700))
        .then(|events| {
            assert_eq!(
                kinds(events),
                ["agent.responded", "policy.decided", "human.escalated"]
            );
            let RunEvent::Escalated {
                reason, subject, ..
            } = &events[2]
            else {
                panic!("an escalation")
            };
            assert!(reason.contains("orch must finish or escalate"), "{reason}");
            assert!(reason.contains("700/1000 tokens"), "{reason}");
            assert!(
                matches!(subject, TicketSubject::Proceed { actions, .. } if actions.len() == 1)
            );
        });
    assert!(!run.state.episodes.domains.contains_key("plan"), "held");
    // A person lets it go on: the write is carried out.
    run.when(approve_open());
    assert_eq!(run.state.episodes.domains["plan"].len(), 1);
    run.replays();

    // A final answer past the line is no question for a human.
    let mut finishing = research();
    finishing
        .when(
            respond(vec![Action::Finish {
                output: json!({"answer": 42}),
            }])
            .tokens(700),
        )
        .then(|events| assert!(!kinds(events).contains(&"human.escalated")));
    assert_eq!(finishing.state.status, RunStatus::Completed);
}

// ---------------------------------------------------------------------------------------
// Recursion classes (decider version 14): triggers, and verification before repair once
// an episode applied a side effect.

/// The effects bundle letting the publisher spawn engage, verify and rewrite children.
const CLASSED: &str = r#"
[recursion.default]
allowed_child_types = ["engage", "verify", "rewrite"]
"#;

/// A spawn by the publisher of itself as a `episode_type` child naming `trigger`.
fn spawn_self(episode_type: &str, trigger: Option<&str>) -> Action {
    Action::Spawn {
        agent: "publisher".into(),
        episode_type: episode_type.into(),
        goal: format!("{episode_type} the post"),
        budget: BudgetRequest::default(),
        inputs: serde_json::Map::new(),
        trigger: trigger.map(str::to_owned),
    }
}

/// The rule and reason of the episode action the last input had refused.
fn refused(run: &History) -> (String, String) {
    run.decided()
        .iter()
        .find_map(|e| match e {
            RunEvent::EpisodeActionDenied { decision, .. } => {
                Some((decision.rule_id.to_string(), decision.reason.to_string()))
            }
            _ => None,
        })
        .expect("an episode action was refused")
}

/// Given the publisher's `engage` child (ep-2) that sent a DM the executor applied and
/// verified itself: the child's agent is called again with the result.
fn engaged_and_sent(version: u32) -> History {
    use super::effect::{applied, switches, verified};
    let mut run = effects_run_under(&format!("{EFFECTS_BUNDLE}{CLASSED}"), "publisher", version);
    run.when(respond(vec![spawn_self("engage", None)]));
    run.when(respond(vec![super::effect("dm", "api", Some("dm-1"))]));
    let effect = "run-1/effect-1";
    run.when(switches(effect, &[]));
    run.when(applied(effect, "dm-9"));
    run.when(verified(
        effect,
        docket_protocol::Verification::Applied {
            result: json!({"post_id": "dm-9"}),
        },
    ));
    assert_eq!(run.pending().episode_id, "ep-2");
    run
}

/// The effects bundle with a second look before every DM (`critique_first`), and the
/// publisher allowed to spawn a critique of its own work.
fn critique_first_bundle() -> String {
    format!(
        "{}\n[recursion.default]\nallowed_child_types = [\"critique\"]\n",
        super::EFFECTS_BUNDLE.replace(
            "id = \"dm-any\"\n",
            "id = \"dm-any\"\ncritique_first = true\n"
        )
    )
}

/// The effect's policy decisions (rule, reason) in the last input's batch.
fn effect_decisions(run: &History) -> Vec<(String, String)> {
    run.decided()
        .iter()
        .filter_map(|e| match e {
            RunEvent::PolicyDecided { subject, decision } if subject.contains("/effect-") => {
                Some((decision.rule_id.to_string(), decision.reason.to_string()))
            }
            _ => None,
        })
        .collect()
}

#[test]
pub(crate) fn a_critique_first_effect_waits_for_a_critique_child_to_pass() {
    let mut run = effects_run_under(&critique_first_bundle(), "publisher", DECIDER_VERSION);
    // Asked for before any second look: refused at admission, and the agent told.
    run.when(respond(vec![super::effect("dm", "api", Some("dm-1"))]))
        .then_kinds(&[
            "agent.responded",
            "effect.requested",
            "policy.decided",
            "effect.refused",
            "agent.call_scheduled",
        ]);
    let decided = effect_decisions(&run);
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0].0, "dm-any");
    assert!(
        decided[0].1.contains("needs a second look first"),
        "{}",
        decided[0].1
    );
    // A critique child that finishes ok is the second look: the same DM is admitted.
    run.when(respond(vec![spawn_self(
        "critique",
        Some("high_stakes_review"),
    )]));
    assert_eq!(run.pending().episode_id, "ep-2");
    run.when(respond(vec![finish(
        EpisodeStatus::Ok,
        "the DM reads well",
    )]));
    assert_eq!(run.pending().episode_id, "ep-1");
    assert!(
        run.state
            .episodes
            .get(&"ep-1".into())
            .is_some_and(|e| e.critiqued)
    );
    run.when(respond(vec![super::effect("dm", "api", Some("dm-2"))]))
        .then(|events| assert!(kinds(events).contains(&"effect.admitted"), "{events:?}"));
    run.replays();

    // A run of version 15 is not held by the setting.
    let mut older = effects_run_under(&critique_first_bundle(), "publisher", 15);
    older
        .when(respond(vec![super::effect("dm", "api", Some("dm-1"))]))
        .then(|events| assert!(kinds(events).contains(&"effect.admitted"), "{events:?}"));
}

#[test]
pub(crate) fn an_episode_that_applied_a_side_effect_verifies_before_it_repairs_or_succeeds() {
    let mut run = engaged_and_sent(DECIDER_VERSION);
    // Finishing ok without a verification is refused, and the agent told.
    run.when(respond(vec![finish(EpisodeStatus::Ok, "sent")]))
        .then_kinds(&[
            "agent.responded",
            "episode.action_denied",
            "agent.call_scheduled",
        ]);
    let (rule, reason) = refused(&run);
    assert_eq!(rule, docket_policies::VERIFICATION_FIRST);
    assert!(reason.contains("ep-2 applied 1 side effect(s)"), "{reason}");
    // Repair is refused before verification.
    run.when(respond(vec![spawn_self(
        "rewrite",
        Some("payload_invalid"),
    )]));
    let (rule, reason) = refused(&run);
    assert_eq!(rule, docket_policies::VERIFICATION_FIRST);
    assert!(
        reason.contains("verification comes before repair"),
        "{reason}"
    );
    // A verification child, naming its trigger, is recorded with its class and trigger.
    run.when(respond(vec![spawn_self(
        "verify",
        Some("side_effect_attempted"),
    )]))
    .then(|events| {
        let started = events
            .iter()
            .find_map(|e| match e {
                RunEvent::EpisodeStarted {
                    episode_id,
                    class,
                    trigger,
                    ..
                } => Some((episode_id.to_string(), *class, trigger.clone())),
                _ => None,
            })
            .expect("the verify child started");
        assert_eq!(
            started,
            (
                "ep-3".to_owned(),
                Some(docket_policies::RecursionClass::Verification),
                Some("side_effect_attempted".to_owned())
            )
        );
    });
    assert_eq!(
        run.state
            .episodes()
            .get(&"ep-2".into())
            .map(|e| e.unverified_effects),
        Some(1)
    );
    run.when(respond(vec![finish(EpisodeStatus::Ok, "the DM is there")]));
    assert_eq!(
        run.state
            .episodes()
            .get(&"ep-2".into())
            .map(|e| e.unverified_effects),
        Some(0)
    );
    // Verified: repair may go on, and the episode succeeds.
    run.when(respond(vec![finish(
        EpisodeStatus::Ok,
        "sent and verified",
    )]))
    .then(|events| {
        assert!(kinds(events).contains(&"episode.finished"), "{events:?}");
        assert!(!kinds(events).contains(&"episode.action_denied"));
    });
    run.replays();
}

#[test]
pub(crate) fn a_classed_spawn_names_a_trigger_its_class_allows() {
    let mut run = effects_run_with(CLASSED, "publisher");
    run.when(respond(vec![spawn_self("verify", None)]));
    let (rule, reason) = refused(&run);
    assert_eq!(rule, "recursion.classes.verification.triggers");
    assert!(reason.contains("must name its trigger"), "{reason}");
    run.when(respond(vec![spawn_self("verify", Some("rubric_failure"))]));
    let (_, reason) = refused(&run);
    assert!(
        reason.contains("`rubric_failure` is no trigger of verification"),
        "{reason}"
    );
    // A type without a class needs no trigger.
    run.when(respond(vec![spawn_self("engage", None)]))
        .then(|events| {
            assert!(events.iter().any(|e| matches!(
                e,
                RunEvent::EpisodeStarted {
                    class: None,
                    trigger: None,
                    ..
                }
            )));
        });
    run.replays();
}

#[test]
pub(crate) fn a_run_of_version_13_knows_no_recursion_classes() {
    let mut run = engaged_and_sent(13);
    run.when(respond(vec![finish(EpisodeStatus::Ok, "sent")]))
        .then(|events| {
            assert!(kinds(events).contains(&"episode.finished"), "{events:?}");
            assert!(!kinds(events).contains(&"episode.action_denied"));
        });
    run.replays();
}

// ---------------------------------------------------------------------------------------
// Effects escalate to the parent (decider version 15): a child episode's agent without
// permission for an effect hands it up with its result.

/// Given the publisher's `draft` child ep-2, run by the read-only reader, recorded by
/// decider `version`: the reader asked to publish with key k1 and was refused.
fn reader_asked_to_publish(version: u32) -> History {
    let policy = "[recursion.default]\nallowed_child_types = [\"draft\"]\n";
    let mut run = effects_run_under(&format!("{EFFECTS_BUNDLE}{policy}"), "publisher", version);
    run.when(respond(vec![Action::Spawn {
        agent: "reader".into(),
        episode_type: "draft".into(),
        goal: "draft the post".into(),
        budget: BudgetRequest::default(),
        inputs: serde_json::Map::new(),
        trigger: None,
    }]));
    assert_eq!(run.pending().episode_id, "ep-2");
    run.when(respond(vec![super::effect("publish", "api", Some("k1"))]));
    run
}

#[test]
pub(crate) fn a_childs_effect_without_permission_escalates_to_its_parent() {
    let mut run = reader_asked_to_publish(DECIDER_VERSION);
    let refused = run
        .decided()
        .iter()
        .find_map(|e| match e {
            RunEvent::EffectRefused(r) => Some(r.clone()),
            _ => None,
        })
        .expect("the effect was refused");
    assert_eq!(
        refused,
        crate::EffectRefused {
            effect_id: "run-1/effect-1".into(),
            rule_id: "agents.reader.side_effects".to_owned(),
            reason: "`reader` has no permission for `publish` side effects (read-only by default; escalate to the parent)".to_owned(),
            escalated_to: Some("ep-1".into()),
        }
    );
    // The reader is told where it went, and it is no failure of its episode.
    let told = effect_result(&run.state);
    assert_eq!(
        (told["status"].clone(), told["escalated_to"].clone()),
        (json!("refused"), json!("ep-1"))
    );
    let child = &run.state.episodes.episodes[&EpisodeId::from("ep-2")];
    assert!(child.error_classes.is_empty(), "{:?}", child.error_classes);
    assert_eq!(
        child.escalated_effects,
        [docket_protocol::EffectId::from("run-1/effect-1")]
    );

    // Its result reaches the publisher with the effect as asked.
    run.when(respond(vec![finish(EpisodeStatus::Ok, "drafted")]));
    let request = run.pending();
    assert_eq!(
        (request.target_agent.as_str(), request.episode_id.as_str()),
        ("publisher", "ep-1")
    );
    let input = request.decision_inputs.last().expect("the child's result");
    assert_eq!(input.output_type, "episode_result");
    assert_eq!(
        input.payload["result"]["escalated_effects"],
        json!([{
            "effect_id": "run-1/effect-1", "kind": "publish", "lane": "api",
            "idempotency_key": "k1", "params": {"text": "hello"}, "asked_by": "reader",
            "reason": refused.reason,
        }])
    );
    // The publisher may ask for it itself: its own permission decides.
    run.when(respond(vec![super::effect("publish", "api", Some("k1"))]))
        .then(|events| {
            assert!(
                events.iter().any(
                    |e| matches!(e, RunEvent::EffectAdmitted(a) if a.effect_id == "run-1/effect-2")
                ),
                "{events:?}"
            );
        });
    run.replays();
}

#[test]
pub(crate) fn a_run_of_version_14_refuses_a_childs_effect_to_the_child_alone() {
    let mut run = reader_asked_to_publish(14);
    assert!(
        run.decided()
            .iter()
            .any(|e| matches!(e, RunEvent::EffectRefused(r) if r.escalated_to.is_none()))
    );
    assert!(effect_result(&run.state).get("escalated_to").is_none());
    let child = &run.state.episodes.episodes[&EpisodeId::from("ep-2")];
    assert_eq!(child.error_classes.get("effect_refused"), Some(&1));
    run.when(respond(vec![finish(EpisodeStatus::Ok, "drafted")]));
    let input = run
        .pending()
        .decision_inputs
        .last()
        .cloned()
        .expect("a result");
    assert!(input.payload["result"].get("escalated_effects").is_none());
    run.replays();
}
