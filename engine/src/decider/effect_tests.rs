//! Unit tests of the side-effect path in the decider: one test per row of the path
//! (`effect.rs`'s module docs), each log checked with `replay_check`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use docket_policies::PolicyBundle;

use super::*;
use crate::effect::{DryRunReport, EffectReceipt, Verification};
use crate::protocol::{Action, AgentResponse, Confidence};
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
            agents: ["publisher", "reader", "checker"]
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
fn denied_by_policy_without_permission_kind_or_key() {
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

#[test]
fn dry_run_then_execute_then_verify() {
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
fn a_failed_dry_run_refuses_and_an_unsupported_one_waits_for_a_human() {
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
fn approval_needed_then_approved() {
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
fn approval_needed_then_denied() {
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
fn kill_switch_engaged_at_check_time_refuses_the_effect() {
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
fn dedup_by_key_returns_the_recorded_receipt() {
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
fn failure_with_retry_cap_needs_a_human_to_try_again() {
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
fn resume_with_a_started_effect_applied_is_recovered_without_executing() {
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
fn resume_with_a_started_effect_not_applied_executes_it_once_more() {
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
fn an_execution_unanswered_twice_is_given_up_and_counts_as_an_attempt() {
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
fn resume_with_a_started_effect_unknown_needs_review() {
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
fn failed_verification_calls_the_verifier_not_the_publisher() {
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
fn failed_verification_without_a_verifier_needs_review() {
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
fn inputs_for_the_wrong_step_are_rejected() {
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
fn effect_events_round_trip_through_their_encoding() {
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
