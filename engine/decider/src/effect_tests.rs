//! Unit tests of the side-effect path in the decider: one test per row of the path
//! (`decide/effect.rs`'s module docs), each log checked with `replay_check`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use docket_policies::PolicyBundle;

use super::*;
use crate::protocol::{Action, AgentResponse, Confidence};
use crate::protocol::{DryRunReport, EffectReceipt, Verification};
use crate::workflow::{AgentSpec, ExecutorSpec, WorkflowSpec};

const BUNDLE: &str = r#"
bundle = { id = "fx" }
[[agents]]
id = "external"
[[agents]]
id = "publisher"
side_effects = ["publish", "dm", "like"]
[[agents]]
id = "reader"
[[agents]]
id = "checker"
[[agents]]
id = "liker"
side_effects = ["like"]

[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = true
retry_cap = 1

[[side_effects]]
id = "publish-browser"
kind = "publish"
lane = "browser"
dry_run_required = true
human_approval_required = true
verifier = "checker"

[[side_effects]]
id = "dm-any"
kind = "dm"
lane = "*"
dry_run_required = false
retry_cap = 2

[[side_effects]]
id = "like-api"
kind = "like"
lane = "api"
dry_run_required = false

[interactions]
allowed = [
  { from = "external", to = "publisher" },
  { from = "publisher", to = "external" },
  { from = "external", to = "reader" },
  { from = "reader", to = "liker" },
  { from = "reader", to = "checker" },
  { from = "liker", to = "external" },
  { from = "checker", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// A run under the effects bundle, with its log.
struct Run {
    b: PolicyBundle,
    state: RunState,
    log: Vec<RunEvent>,
    at: i64,
}

impl Run {
    fn start(entry: &str) -> Self {
        let b = PolicyBundle::from_toml_str(BUNDLE, "fx.toml").expect("bundle is valid");
        let agent = || AgentSpec {
            executor: ExecutorSpec::InProcess { in_process: true },
            timeout_ms: None,
            classifiers: Vec::new(),
        };
        let workflow = WorkflowSpec {
            name: "fx".into(),
            policy: "fx.toml".into(),
            entry: entry.into(),
            input_type: None,
            input: None,
            goal: None,
            budget: Default::default(),
            agents: ["publisher", "reader", "checker", "liker"]
                .into_iter()
                .map(|a| (a.to_owned(), agent()))
                .collect::<BTreeMap<_, _>>(),
            effects: Default::default(),
        };
        let start = Command::Start(RunRequested {
            run_id: "run-1".into(),
            workflow,
            bundle_source: BUNDLE.into(),
            bundle_source_name: "fx.toml".into(),
            bundle_hash: b.hash().to_hex(),
            input: json!({"post": "hello"}),
            at_ms: 1_000,
            decider_version: DECIDER_VERSION,
        });
        let mut run = Self {
            b,
            state: RunState::default(),
            log: Vec::new(),
            at: 1_000,
        };
        run.step(start);
        run
    }

    fn step(&mut self, command: Command) -> Vec<RunEvent> {
        let events = decide(&self.state, &self.b, command).expect("command applies");
        for e in &events {
            self.state.apply(e);
        }
        self.log.extend(events.iter().cloned());
        events
    }

    fn now(&mut self) -> i64 {
        self.at += 10;
        self.at
    }

    fn pending(&self) -> String {
        let pending = self.state.pending_requests();
        assert_eq!(pending.len(), 1, "{pending:?}");
        pending[0].request_id.clone()
    }

    fn respond(&mut self, actions: Vec<Action>) -> Vec<RunEvent> {
        let id = self.pending();
        let at_ms = self.now();
        self.step(Command::RecordResponse {
            request_id: id.clone(),
            response: AgentResponse::success(id, Confidence::High, actions),
            at_ms,
        })
    }

    fn input(&mut self, input: EffectInput) -> Vec<RunEvent> {
        self.step(Command::RecordEffect(input))
    }

    fn dry_run(&mut self, id: &str, outcome: DryRunOutcome) -> Vec<RunEvent> {
        let at_ms = self.now();
        self.input(EffectInput::DryRun(EffectDryRun {
            effect_id: id.into(),
            outcome,
            at_ms,
        }))
    }

    fn passed(&mut self, id: &str) -> Vec<RunEvent> {
        self.dry_run(
            id,
            DryRunOutcome::Report {
                report: DryRunReport {
                    ok: true,
                    preview: json!({"text": "hello"}),
                    message: None,
                },
            },
        )
    }

    fn switches(&mut self, id: &str, engaged: &[&str]) -> Vec<RunEvent> {
        let at_ms = self.now();
        self.input(EffectInput::KillSwitchChecked(EffectKillSwitchChecked {
            effect_id: id.into(),
            engaged: engaged.iter().map(|s| (*s).to_owned()).collect(),
            error: None,
            at_ms,
        }))
    }

    fn applied(&mut self, id: &str, post: &str) -> Vec<RunEvent> {
        let at_ms = self.now();
        self.input(EffectInput::Applied(EffectApplied {
            effect_id: id.into(),
            receipt: EffectReceipt {
                result: json!({ "post_id": post }),
            },
            at_ms,
        }))
    }

    fn verified(&mut self, id: &str, verification: Verification) -> Vec<RunEvent> {
        let at_ms = self.now();
        self.input(EffectInput::Verified(EffectVerification {
            effect_id: id.into(),
            verification,
            cause: None,
            at_ms,
        }))
    }

    fn recovered(&mut self, id: &str, verification: Verification) -> Vec<RunEvent> {
        let at_ms = self.now();
        self.input(EffectInput::Recovered(EffectVerification {
            effect_id: id.into(),
            verification,
            cause: Some("resumed".into()),
            at_ms,
        }))
    }

    fn human(&mut self, approved: bool) -> Vec<RunEvent> {
        let ticket = self
            .state
            .open_tickets()
            .next()
            .map(|(t, _)| t.clone())
            .expect("a ticket is open");
        let at_ms = self.now();
        self.step(Command::RecordHumanDecision {
            ticket,
            approved,
            by: "ana".into(),
            reason: "checked".into(),
            choice: None,
            at_ms,
        })
    }

    fn phase(&self, id: &str) -> EffectPhase {
        self.state.effects.get(id).expect("effect exists").phase
    }

    /// The effect result the last scheduled call hands back to the asking agent.
    fn result(&self) -> Value {
        let request = self
            .state
            .pending_requests()
            .last()
            .copied()
            .cloned()
            .expect("a call is pending");
        let input = request
            .decision_inputs
            .last()
            .expect("a decision input")
            .clone();
        assert_eq!(input.source_agent, EFFECTS_SOURCE);
        assert_eq!(input.output_type, EFFECT_RESULT_TYPE);
        input.payload
    }

    fn finish(&mut self) {
        self.respond(vec![Action::Finish {
            output: json!({"done": true}),
        }]);
        assert_eq!(self.state.status, RunStatus::Completed, "{:?}", self.state);
    }

    fn replays(&self) {
        replay_check(&self.log, &self.b).expect("the log replays");
    }
}

fn effect(kind: &str, lane: &str, key: Option<&str>) -> Action {
    Action::RequestEffect {
        kind: kind.into(),
        lane: lane.into(),
        idempotency_key: key.map(str::to_owned),
        params: json!({"text": "hello"}),
    }
}

fn kinds(events: &[RunEvent]) -> Vec<&'static str> {
    events.iter().map(RunEvent::kind).collect()
}

fn decisions(events: &[RunEvent]) -> Vec<(docket_policies::Verdict, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::PolicyDecided { decision, .. } => {
                Some((decision.verdict, decision.rule_id.to_string()))
            }
            _ => None,
        })
        .collect()
}

const E1: &str = "run-1/effect-1";
const E2: &str = "run-1/effect-2";

#[test]
pub(crate) fn denied_by_policy_without_permission_kind_or_key() {
    // An agent without the permission.
    let mut run = Run::start("reader");
    let events = run.respond(vec![effect("publish", "api", Some("k"))]);
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "effect.requested",
            "policy.decided",
            "effect.refused",
            "agent.call_scheduled"
        ]
    );
    assert_eq!(
        decisions(&events),
        [(
            docket_policies::Verdict::Deny,
            "agents.reader.side_effects".into()
        )]
    );
    assert_eq!(run.phase(E1), EffectPhase::Refused);
    assert_eq!(run.result()["status"], "refused");
    assert_eq!(run.result()["rule_id"], "agents.reader.side_effects");
    run.replays();

    // A kind with no policy, then a missing key.
    let mut run = Run::start("publisher");
    run.respond(vec![effect("follow", "api", Some("k"))]);
    assert_eq!(run.result()["rule_id"], "deny_by_default");
    run.respond(vec![effect("publish", "api", None)]);
    assert_eq!(run.phase(E2), EffectPhase::Refused);
    assert_eq!(run.result()["rule_id"], "publish-api");
    assert!(
        run.result()["reason"]
            .as_str()
            .is_some_and(|r| r.contains("idempotency key")),
        "{}",
        run.result()
    );
    assert!(run.state.pending_effects().is_empty());
    run.finish();
    run.replays();
}

/// The `failure_repeats` stop condition (docs/governance.md#stop-conditions): an agent that
/// keeps asking for effects it is refused (reporting no usage, so no budget would ever stop
/// it) is told twice; the third refusal of the same class stops its episode
/// `failure_repeats` (the root: the run fails), and the refusal is not handed back again.
#[test]
pub(crate) fn repeated_effect_refusals_stop_the_episode_failure_repeats() {
    let mut run = Run::start("reader");
    for i in 1..=3 {
        let events = run.respond(vec![effect("publish", "api", Some(&format!("k{i}")))]);
        let stopped: Vec<_> = events
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
            assert_eq!(run.result()["status"], "refused");
            assert_eq!(run.state.status, RunStatus::Running);
            continue;
        }
        assert_eq!(
            kinds(&events),
            [
                "agent.responded",
                "effect.requested",
                "policy.decided",
                "effect.refused",
                "episode.stopped",
                "run.failed"
            ]
        );
        let (episode, condition, rule, reason) = &stopped[0];
        assert_eq!(
            (episode.as_str(), *condition, rule.as_str()),
            (
                "ep-1",
                docket_policies::StopCondition::FailureRepeats,
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
pub(crate) fn dry_run_then_execute_then_verify() {
    let mut run = Run::start("publisher");
    let events = run.respond(vec![effect("publish", "api", Some("post-1"))]);
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "effect.requested",
            "policy.decided",
            "effect.admitted"
        ]
    );
    assert_eq!(
        run.state.status,
        RunStatus::Running,
        "effects keep it going"
    );
    let work: Vec<EffectWork> = run
        .state
        .pending_effects()
        .iter()
        .map(|(_, w)| *w)
        .collect();
    assert_eq!(work, [EffectWork::DryRun]);

    assert_eq!(kinds(&run.passed(E1)), ["effect.dry_run", "effect.ready"]);
    assert_eq!(run.state.pending_effects()[0].1, EffectWork::Execute);

    let events = run.switches(E1, &[]);
    assert_eq!(
        kinds(&events),
        [
            "effect.kill_switch_checked",
            "policy.decided",
            "effect.started"
        ]
    );
    assert_eq!(
        decisions(&events),
        [(docket_policies::Verdict::Allow, "publish-api".into())]
    );
    let RunEvent::EffectStarted(started) = &events[2] else {
        panic!("effect.started");
    };
    assert_eq!(started.request.idempotency_key, "post-1");
    assert_eq!(started.request.attempt, 1);
    assert_eq!(started.request.params, json!({"text": "hello"}));

    assert_eq!(kinds(&run.applied(E1, "p-1")), ["effect.applied"]);
    assert_eq!(run.state.pending_effects()[0].1, EffectWork::Verify);
    let events = run.verified(
        E1,
        Verification::Applied {
            result: json!({"post_id": "p-1"}),
        },
    );
    assert_eq!(
        kinds(&events),
        ["effect.verified", "effect.settled", "agent.call_scheduled"]
    );
    assert_eq!(run.phase(E1), EffectPhase::Settled);
    let result = run.result();
    assert_eq!(result["status"], "applied");
    assert_eq!(result["receipt"]["result"]["post_id"], "p-1");
    assert_eq!(result["verified_by"], "executor");
    run.finish();
    run.replays();
}

#[test]
pub(crate) fn a_failed_dry_run_refuses_and_an_unsupported_one_waits_for_a_human() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("publish", "api", Some("post-1"))]);
    let failed = DryRunOutcome::Report {
        report: DryRunReport {
            ok: false,
            preview: Value::Null,
            message: Some("text too long".into()),
        },
    };
    assert_eq!(
        kinds(&run.dry_run(E1, failed)),
        ["effect.dry_run", "effect.refused", "agent.call_scheduled"]
    );
    assert_eq!(run.result()["rule_id"], "dry_run");

    run.respond(vec![effect("publish", "api", Some("post-2"))]);
    let events = run.dry_run(E2, DryRunOutcome::Unsupported);
    assert_eq!(kinds(&events), ["effect.dry_run", "human.escalated"]);
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    assert_eq!(run.phase(E2), EffectPhase::AwaitingHuman);
    let events = run.human(true);
    assert_eq!(kinds(&events), ["human.decided", "effect.ready"]);
    let events = run.switches(E2, &[]);
    assert_eq!(
        decisions(&events),
        [(docket_policies::Verdict::Allow, "publish-api".into())],
        "the waived dry run counts as passed"
    );
    run.replays();
}

#[test]
pub(crate) fn approval_needed_then_approved() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("publish", "browser", Some("post-1"))]);
    run.passed(E1);
    let events = run.switches(E1, &[]);
    assert_eq!(
        kinds(&events),
        [
            "effect.kill_switch_checked",
            "policy.decided",
            "human.escalated"
        ]
    );
    assert_eq!(
        decisions(&events),
        [(
            docket_policies::Verdict::NeedsApproval,
            "publish-browser".into()
        )]
    );
    let RunEvent::Escalated { subject, .. } = &events[2] else {
        panic!("a ticket");
    };
    assert_eq!(
        subject,
        &TicketSubject::Effect {
            effect_id: E1.into(),
            step: EffectTicketStep::Approval
        }
    );
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    assert!(run.state.pending_effects().is_empty(), "nothing executes");

    assert_eq!(kinds(&run.human(true)), ["human.decided", "effect.ready"]);
    let events = run.switches(E1, &[]);
    assert_eq!(
        kinds(&events),
        [
            "effect.kill_switch_checked",
            "policy.decided",
            "effect.started"
        ]
    );
    run.applied(E1, "p-1");
    run.verified(
        E1,
        Verification::Applied {
            result: json!({"post_id": "p-1"}),
        },
    );
    assert_eq!(run.result()["status"], "applied");
    run.finish();
    run.replays();
}

#[test]
pub(crate) fn approval_needed_then_denied() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("publish", "browser", Some("post-1"))]);
    run.passed(E1);
    run.switches(E1, &[]);
    let events = run.human(false);
    assert_eq!(
        kinds(&events),
        ["human.decided", "effect.refused", "agent.call_scheduled"]
    );
    assert_eq!(run.phase(E1), EffectPhase::Refused);
    assert_eq!(run.state.status, RunStatus::Running, "the agent goes on");
    assert_eq!(run.result()["rule_id"], "human");
    run.finish();
    run.replays();
}

#[test]
pub(crate) fn kill_switch_engaged_at_check_time_refuses_the_effect() {
    for (engaged, rule) in [("api", "kill_switch.api"), ("global", "kill_switch.global")] {
        let mut run = Run::start("publisher");
        run.respond(vec![effect("publish", "api", Some("post-1"))]);
        run.passed(E1);
        let events = run.switches(E1, &[engaged]);
        assert_eq!(
            kinds(&events),
            [
                "effect.kill_switch_checked",
                "policy.decided",
                "effect.refused",
                "agent.call_scheduled"
            ]
        );
        assert_eq!(
            decisions(&events),
            [(docket_policies::Verdict::Deny, rule.into())]
        );
        assert_eq!(run.result()["rule_id"], rule);
        assert!(run.state.effects[E1].started.is_none(), "never started");
        // Another lane's switch does not stop this lane.
        run.respond(vec![effect("like", "api", Some("like-1"))]);
        let events = run.switches(E2, &["browser"]);
        assert_eq!(kinds(&events)[2], "effect.started");
        run.replays();
    }
}

#[test]
pub(crate) fn dedup_by_key_returns_the_recorded_receipt() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("like", "api", Some("like-1"))]);
    run.switches(E1, &[]);
    run.applied(E1, "l-1");
    run.verified(
        E1,
        Verification::Applied {
            result: json!({"post_id": "l-1"}),
        },
    );
    let events = run.respond(vec![effect("like", "api", Some("like-1"))]);
    assert_eq!(
        kinds(&events),
        [
            "agent.responded",
            "effect.requested",
            "effect.deduplicated",
            "agent.call_scheduled"
        ]
    );
    let result = run.result();
    assert_eq!(result["status"], "deduplicated");
    assert_eq!(result["of"], E1);
    assert_eq!(result["receipt"]["result"]["post_id"], "l-1");
    assert!(
        run.state.pending_effects().is_empty(),
        "no second execution"
    );
    assert_eq!(run.phase(E2), EffectPhase::Deduplicated);

    // A second request while the first is still in flight is refused, not run twice.
    run.respond(vec![
        effect("dm", "api", Some("dm-1")),
        effect("dm", "api", Some("dm-1")),
    ]);
    assert_eq!(run.phase("run-1/effect-3"), EffectPhase::Ready);
    assert_eq!(run.phase("run-1/effect-4"), EffectPhase::Refused);
    assert_eq!(
        run.state.effects["run-1/effect-4"]
            .outcome
            .as_ref()
            .map(|o| o.0.as_str()),
        Some("idempotency.in_flight")
    );
    run.replays();
}

#[test]
pub(crate) fn failure_with_retry_cap_needs_a_human_to_try_again() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("like", "api", Some("like-1"))]);
    run.switches(E1, &[]);
    let at_ms = run.now();
    let events = run.input(EffectInput::Failed(EffectFailed {
        effect_id: E1.into(),
        code: "PLATFORM_REJECTED".into(),
        message: "rate limited".into(),
        at_ms,
    }));
    assert_eq!(kinds(&events), ["effect.failed", "agent.call_scheduled"]);
    assert_eq!(run.result()["status"], "failed");
    assert_eq!(run.result()["code"], "PLATFORM_REJECTED");

    // Attempt 2 of a key whose cap is 1: a human must override.
    let events = run.respond(vec![effect("like", "api", Some("like-1"))]);
    let RunEvent::EffectRequested(requested) = &events[1] else {
        panic!("effect.requested");
    };
    assert_eq!(requested.attempt, 2);
    assert_eq!(
        decisions(&events),
        [(docket_policies::Verdict::NeedsApproval, "like-api".into())]
    );
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    assert_eq!(
        kinds(&run.human(true)),
        ["human.decided", "effect.admitted"]
    );
    let events = run.switches(E2, &[]);
    assert_eq!(kinds(&events)[2], "effect.started");
    let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
        panic!("decision");
    };
    assert!(
        decision
            .chain
            .iter()
            .any(|s| s.outcome == docket_policies::StepOutcome::Overridden),
        "{decision:?}"
    );
    run.replays();
}

#[test]
pub(crate) fn resume_with_a_started_effect_applied_is_recovered_without_executing() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("like", "api", Some("like-1"))]);
    run.switches(E1, &[]);
    // The process died here: the fold says started, no result.
    assert_eq!(run.state.pending_effects()[0].1, EffectWork::Recover);
    let events = run.recovered(
        E1,
        Verification::Applied {
            result: json!({"post_id": "l-1"}),
        },
    );
    assert_eq!(
        kinds(&events),
        ["effect.recovered", "effect.settled", "agent.call_scheduled"]
    );
    assert_eq!(run.result()["receipt"]["result"]["post_id"], "l-1");
    assert_eq!(run.state.effects[E1].starts, 1, "never started again");
    run.finish();
    run.replays();
}

#[test]
pub(crate) fn resume_with_a_started_effect_not_applied_executes_it_once_more() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("like", "api", Some("like-1"))]);
    run.switches(E1, &[]);
    let events = run.recovered(E1, Verification::NotApplied);
    assert_eq!(kinds(&events), ["effect.recovered", "effect.ready"]);
    assert_eq!(run.state.pending_effects()[0].1, EffectWork::Execute);
    let events = run.switches(E1, &[]);
    let RunEvent::EffectStarted(started) = &events[2] else {
        panic!("started again, through the kill switch");
    };
    assert_eq!(
        started.request.attempt, 1,
        "the same attempt: it never applied"
    );
    assert_eq!(started.request.idempotency_key, "like-1");
    run.applied(E1, "l-1");
    assert_eq!(run.state.effects[E1].starts, 2);
    run.replays();
}

#[test]
pub(crate) fn an_execution_unanswered_twice_is_given_up_and_counts_as_an_attempt() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("like", "api", Some("like-1"))]);
    run.switches(E1, &[]);
    run.recovered(E1, Verification::NotApplied);
    run.switches(E1, &[]);
    let events = run.recovered(E1, Verification::NotApplied);
    assert_eq!(
        kinds(&events),
        ["effect.recovered", "effect.refused", "agent.call_scheduled"]
    );
    assert_eq!(run.result()["rule_id"], "execution_unanswered");
    let events = run.respond(vec![effect("like", "api", Some("like-1"))]);
    let RunEvent::EffectRequested(requested) = &events[1] else {
        panic!("effect.requested");
    };
    assert_eq!(requested.attempt, 2);
    assert_eq!(
        decisions(&events),
        [(docket_policies::Verdict::NeedsApproval, "like-api".into())]
    );
    run.replays();
}

#[test]
pub(crate) fn resume_with_a_started_effect_unknown_needs_review() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("like", "api", Some("like-1"))]);
    run.switches(E1, &[]);
    let events = run.recovered(
        E1,
        Verification::Unknown {
            message: "ledger unreachable".into(),
        },
    );
    assert_eq!(kinds(&events), ["effect.recovered", "human.escalated"]);
    let RunEvent::Escalated {
        subject, reason, ..
    } = &events[1]
    else {
        panic!("ticket");
    };
    assert!(reason.contains("needs_review"), "{reason}");
    assert!(matches!(
        subject,
        TicketSubject::Effect {
            step: EffectTicketStep::Review,
            ..
        }
    ));
    assert!(
        run.state.pending_effects().is_empty(),
        "never executed blindly"
    );
    let events = run.human(false);
    assert_eq!(
        kinds(&events),
        ["human.decided", "effect.settled", "agent.call_scheduled"]
    );
    assert_eq!(run.result()["status"], "unverified");
    run.finish();
    run.replays();
}

#[test]
pub(crate) fn failed_verification_calls_the_verifier_not_the_publisher() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("publish", "browser", Some("post-1"))]);
    run.passed(E1);
    run.switches(E1, &[]);
    run.human(true);
    run.switches(E1, &[]);
    run.applied(E1, "p-1");
    let events = run.verified(E1, Verification::NotApplied);
    assert_eq!(
        kinds(&events),
        [
            "effect.verified",
            "effect.verifier_called",
            "agent.call_scheduled"
        ]
    );
    let RunEvent::AgentCallScheduled { request, .. } = &events[2] else {
        panic!("call");
    };
    assert_eq!(
        request.target_agent, "checker",
        "the verifier, not the publisher"
    );
    assert_eq!(request.capability_code, VERIFY_EFFECT_CAPABILITY);
    assert_eq!(
        request.decision_inputs[0].payload["receipt"]["result"]["post_id"],
        "p-1"
    );
    let events = run.respond(vec![Action::Finish {
        output: json!({"verified": true, "reason": "post visible"}),
    }]);
    assert_eq!(
        kinds(&events),
        ["agent.responded", "effect.settled", "agent.call_scheduled"]
    );
    assert_eq!(run.result()["verified_by"], "verifier");
    assert_eq!(run.state.effects[E1].starts, 1, "never published again");
    run.finish();
    run.replays();
}

#[test]
pub(crate) fn failed_verification_without_a_verifier_needs_review() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("like", "api", Some("like-1"))]);
    run.switches(E1, &[]);
    run.applied(E1, "l-1");
    let events = run.verified(
        E1,
        Verification::Unknown {
            message: "timeout".into(),
        },
    );
    assert_eq!(kinds(&events), ["effect.verified", "human.escalated"]);
    let events = run.human(true);
    assert_eq!(
        kinds(&events),
        ["human.decided", "effect.settled", "agent.call_scheduled"]
    );
    assert_eq!(run.result()["status"], "applied");
    assert_eq!(run.result()["verified_by"], "human");
    run.replays();
}

#[test]
pub(crate) fn inputs_for_the_wrong_step_are_rejected() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("publish", "api", Some("post-1"))]);
    let at_ms = run.now();
    let applied = Command::RecordEffect(EffectInput::Applied(EffectApplied {
        effect_id: E1.into(),
        receipt: EffectReceipt {
            result: Value::Null,
        },
        at_ms,
    }));
    assert!(matches!(
        decide(&run.state, &run.b, applied),
        Err(Rejection::EffectNotAwaiting { .. })
    ));
    let unknown = Command::RecordEffect(EffectInput::Applied(EffectApplied {
        effect_id: "run-1/effect-9".into(),
        receipt: EffectReceipt {
            result: Value::Null,
        },
        at_ms,
    }));
    assert_eq!(
        decide(&run.state, &run.b, unknown),
        Err(Rejection::UnknownEffect("run-1/effect-9".into()))
    );
}

#[test]
pub(crate) fn effect_events_round_trip_through_their_encoding() {
    let mut run = Run::start("publisher");
    run.respond(vec![effect("publish", "api", Some("post-1"))]);
    run.passed(E1);
    run.switches(E1, &["browser"]);
    run.applied(E1, "p-1");
    run.verified(E1, Verification::NotApplied);
    run.human(true);
    for event in &run.log {
        let back = RunEvent::decode(event.kind(), &event.encode()).expect("decodes");
        assert_eq!(&back, event);
        assert!(describe_effect_event(event).is_some() || !event.kind().starts_with("effect."));
    }
}

#[test]
pub(crate) fn a_fan_out_branch_with_an_effect_in_flight_is_not_joined_early() {
    let mut run = Run::start("reader");
    run.respond(vec![
        Action::Handoff {
            to: "liker".into(),
            output_type: "task".into(),
            payload: json!({"n": 1}),
        },
        Action::Handoff {
            to: "checker".into(),
            output_type: "task".into(),
            payload: json!({"n": 2}),
        },
    ]);
    let calls = run.state.pending_requests();
    assert_eq!(calls.len(), 2, "two branches");
    let (liker, checker) = (calls[0].request_id.clone(), calls[1].request_id.clone());
    let at_ms = run.now();
    run.step(Command::RecordResponse {
        request_id: liker.clone(),
        response: AgentResponse::success(
            liker,
            Confidence::High,
            vec![effect("like", "api", Some("l"))],
        ),
        at_ms,
    });
    let at_ms = run.now();
    let events = run.step(Command::RecordResponse {
        request_id: checker.clone(),
        response: AgentResponse::success(
            checker,
            Confidence::High,
            vec![Action::Finish {
                output: json!({"checked": true}),
            }],
        ),
        at_ms,
    });
    assert_eq!(
        kinds(&events),
        ["agent.responded"],
        "the liker branch waits for its effect: not joined, not completed"
    );
    assert_eq!(run.state.status, RunStatus::Running);
    run.switches(E1, &[]);
    run.applied(E1, "l-1");
    run.verified(E1, Verification::Applied { result: json!({}) });
    let reply = run.pending();
    assert!(
        run.state.calls[&reply].branch_of.is_some(),
        "the reply stays in its branch"
    );
    run.finish();
    run.replays();
}

/// Drives a run with random agent requests, executor answers, kill switches and human
/// decisions, taking each choice from `dice`.
fn random_run(dice: &[u8]) -> Run {
    let mut run = Run::start("publisher");
    let mut dice = dice.iter().copied().cycle();
    let mut roll = move |n: u8| dice.next().unwrap_or(0) % n;
    for _ in 0..60 {
        if run.state.status.is_final() {
            break;
        }
        if run.state.status == RunStatus::WaitingForHuman {
            run.human(roll(2) == 0);
            continue;
        }
        let due = run
            .state
            .pending_effects()
            .first()
            .map(|(e, w)| (e.requested.effect_id.clone(), e.requested.lane.clone(), *w));
        if let Some((id, lane, work)) = due {
            match work {
                EffectWork::DryRun => {
                    let outcome = match roll(4) {
                        0 => DryRunOutcome::Unsupported,
                        1 => DryRunOutcome::Report {
                            report: DryRunReport {
                                ok: false,
                                preview: Value::Null,
                                message: None,
                            },
                        },
                        _ => DryRunOutcome::Report {
                            report: DryRunReport {
                                ok: true,
                                preview: Value::Null,
                                message: None,
                            },
                        },
                    };
                    run.dry_run(&id, outcome);
                }
                EffectWork::Execute => {
                    let engaged: &[&str] = match roll(5) {
                        0 => &["global"],
                        1 => &[lane.as_str()],
                        2 => &["elsewhere"],
                        _ => &[],
                    };
                    run.switches(&id, engaged);
                    if run.phase(&id) == EffectPhase::Started {
                        match roll(4) {
                            0 => {
                                let at_ms = run.now();
                                run.input(EffectInput::Failed(EffectFailed {
                                    effect_id: id,
                                    code: "PLATFORM_DOWN".into(),
                                    message: "503".into(),
                                    at_ms,
                                }));
                            }
                            // The process dies here: the next step recovers it.
                            1 => {}
                            _ => {
                                run.applied(&id, "p");
                            }
                        }
                    }
                }
                EffectWork::Verify | EffectWork::Recover => {
                    let verification = match roll(3) {
                        0 => Verification::NotApplied,
                        1 => Verification::Unknown {
                            message: "?".into(),
                        },
                        _ => Verification::Applied { result: json!({}) },
                    };
                    if work == EffectWork::Verify {
                        run.verified(&id, verification);
                    } else {
                        run.recovered(&id, verification);
                    }
                }
            }
            continue;
        }
        if run.state.pending_requests().is_empty() {
            break;
        }
        let pending = run.state.pending_requests()[0].clone();
        let action = if pending.target_agent == "checker" {
            Action::Finish {
                output: json!({ "verified": roll(2) == 0 }),
            }
        } else {
            match roll(6) {
                0 => Action::Finish {
                    output: json!({"done": true}),
                },
                n => {
                    let (kind, lane) = [
                        ("publish", "api"),
                        ("publish", "browser"),
                        ("like", "api"),
                        ("dm", "api"),
                        ("follow", "api"),
                    ][usize::from(n - 1)];
                    let key = ["k1", "k2", "k3"][usize::from(roll(3))];
                    effect(kind, lane, (roll(8) != 0).then_some(key))
                }
            }
        };
        let at_ms = run.now();
        let id = pending.request_id.clone();
        run.step(Command::RecordResponse {
            request_id: id.clone(),
            response: AgentResponse::success(id, Confidence::High, vec![action]),
            at_ms,
        });
    }
    run
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// Whatever agents, executors, kill switches and humans do: the log replays; no
    /// idempotency key gets a receipt from more than one execution; and every
    /// `effect.started` directly follows an allowing decision taken on a kill-switch read
    /// that engaged neither `global` nor the effect's lane.
    #[test]
    fn effects_apply_each_key_at_most_once_and_only_past_the_kill_switch(
        dice in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..64),
    ) {
        let run = random_run(&dice);
        run.replays();
        let mut applied: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (i, event) in run.log.iter().enumerate() {
            let receipt_of = match event {
                RunEvent::EffectApplied(e) => Some(&e.effect_id),
                RunEvent::EffectRecovered(e)
                    if matches!(e.verification, Verification::Applied { .. }) => Some(&e.effect_id),
                _ => None,
            };
            if let Some(id) = receipt_of {
                let rec = &run.state.effects[id];
                let ids = applied.entry(rec.key()).or_default();
                if !ids.contains(id) {
                    ids.push(id.clone());
                }
            }
            if let RunEvent::EffectStarted(started) = event {
                let RunEvent::PolicyDecided { decision, .. } = &run.log[i - 1] else {
                    panic!("effect.started must follow its decision");
                };
                proptest::prop_assert!(decision.is_allowed());
                let RunEvent::EffectKillSwitchChecked(check) = &run.log[i - 2] else {
                    panic!("the decision must follow a kill-switch read");
                };
                proptest::prop_assert_eq!(&check.effect_id, &started.effect_id);
                proptest::prop_assert!(!check.engaged.iter().any(|s| s == "global" || *s == started.request.lane));
            }
        }
        for (key, ids) in &applied {
            proptest::prop_assert!(ids.len() <= 1, "key {} applied by {:?}", key, ids);
        }
    }
}

#[test]
pub(crate) fn a_verifier_that_fails_or_cannot_confirm_sends_the_effect_to_review() {
    for verifier_says in [
        AgentResponse::error("x", "PLATFORM_DOWN", "cannot reach the feed"),
        AgentResponse::success(
            "x",
            Confidence::High,
            vec![Action::Finish {
                output: json!({"verified": false, "reason": "post not found"}),
            }],
        ),
    ] {
        let mut run = Run::start("publisher");
        run.respond(vec![effect("publish", "browser", Some("post-1"))]);
        run.passed(E1);
        run.switches(E1, &[]);
        run.human(true);
        run.switches(E1, &[]);
        run.applied(E1, "p-1");
        run.verified(E1, Verification::NotApplied);
        let id = run.pending();
        let mut response = verifier_says.clone();
        response.request_id = id.clone();
        let at_ms = run.now();
        let events = run.step(Command::RecordResponse {
            request_id: id,
            response,
            at_ms,
        });
        assert_eq!(
            kinds(&events).last(),
            Some(&"human.escalated"),
            "{:?}",
            kinds(&events)
        );
        let RunEvent::Escalated {
            subject, reason, ..
        } = events.last().expect("ticket")
        else {
            panic!("ticket");
        };
        assert!(reason.contains("checker could not confirm"), "{reason}");
        assert!(matches!(
            subject,
            TicketSubject::Effect {
                step: EffectTicketStep::Review,
                ..
            }
        ));
        assert_eq!(run.state.effects[E1].starts, 1, "never executed again");
        run.replays();
    }
}

/// The finalize-or-escalate threshold (docs/governance.md#budgets): an episode past 70% of
/// its budget must finalize or escalate, so an effect it asks for is refused with that rule
/// (and the numbers), and nothing is admitted.
#[test]
pub(crate) fn an_episode_past_70_percent_of_its_budget_gets_no_effect() {
    let mut run = Run::start("publisher");
    let id = run.pending();
    let at_ms = run.now();
    let mut response = AgentResponse::success(
        id.clone(),
        Confidence::High,
        vec![effect("publish", "api", Some("post-1"))],
    );
    // The root episode's default budget is 1,000,000 tokens: 750,000 is past 70%.
    response.usage.input_tokens = 750_000;
    let events = run.step(Command::RecordResponse {
        request_id: id,
        response,
        at_ms,
    });
    let decided = decisions(&events);
    assert_eq!(
        decided,
        vec![(
            docket_policies::Verdict::Deny,
            "recursion.budget.finalize_or_escalate_at_percent".to_owned()
        )],
        "{events:#?}"
    );
    assert!(!kinds(&events).contains(&"effect.admitted"), "{events:#?}");
    assert_eq!(run.result()["status"], "refused");
    run.replays();
}
