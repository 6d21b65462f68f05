//! `decide/effect.rs`: the side-effect path, one test per row of the path (its module
//! docs), each log checked with `replay_check`; and a property test over random agents,
//! executors, kill switches and humans. (Effect refusals that stop an episode are in
//! `episode.rs`.)

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::{
    DryRunOutcome, EffectApplied, EffectDryRun, EffectFailed, EffectId, EffectInput,
    EffectKillSwitchChecked, EffectPhase, EffectTicketStep, EffectVerification, EffectWork,
    NextStep, Rejection, RunEvent, RunState, RunStatus, TicketSubject, VERIFY_EFFECT_CAPABILITY,
};
use docket_protocol::{Action, AgentResponse, Confidence};
use docket_protocol::{DryRunReport, EffectReceipt, Verification};

const E1: &str = "run-1/effect-1";
const E2: &str = "run-1/effect-2";

// The runtime's answers, each recorded at the history's clock.

pub(crate) fn recorded(input: impl FnOnce(i64) -> EffectInput) -> impl Input {
    move |history: &mut History| Command::RecordEffect(input(history.now()))
}

/// The executor's dry run of `id`.
fn dry_run(id: &str, outcome: DryRunOutcome) -> impl Input {
    let effect_id = id.to_owned();
    recorded(move |at_ms| {
        EffectInput::DryRun(EffectDryRun {
            effect_id: effect_id.into(),
            outcome,
            at_ms,
        })
    })
}

/// The dry run of `id` passed.
pub(crate) fn passed(id: &str) -> impl Input {
    dry_run(
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

/// The kill switches read for `id`, `engaged` of them engaged.
pub(crate) fn switches(id: &str, engaged: &[&str]) -> impl Input {
    let effect_id = id.to_owned();
    let engaged: Vec<String> = engaged.iter().map(|s| (*s).to_owned()).collect();
    recorded(move |at_ms| {
        EffectInput::KillSwitchChecked(EffectKillSwitchChecked {
            effect_id: effect_id.into(),
            engaged,
            error: None,
            at_ms,
        })
    })
}

/// The executor applied `id`, the receipt naming `post`.
pub(crate) fn applied(id: &str, post: &str) -> impl Input {
    let effect_id = id.to_owned();
    let receipt = EffectReceipt {
        result: json!({ "post_id": post }),
        drift: None,
    };
    recorded(move |at_ms| {
        EffectInput::Applied(EffectApplied {
            effect_id: effect_id.into(),
            receipt,
            at_ms,
            reused_from: None,
        })
    })
}

/// The executor failed `id`.
pub(crate) fn failed(id: &str, code: &str, message: &str) -> impl Input {
    let (effect_id, code, message) = (id.to_owned(), code.to_owned(), message.to_owned());
    recorded(move |at_ms| {
        EffectInput::Failed(EffectFailed {
            effect_id: effect_id.into(),
            code,
            message,
            at_ms,
        })
    })
}

/// The executor's verification of `id` after applying it.
pub(crate) fn verified(id: &str, verification: Verification) -> impl Input {
    let effect_id = id.to_owned();
    recorded(move |at_ms| {
        EffectInput::Verified(EffectVerification {
            effect_id: effect_id.into(),
            verification,
            cause: None,
            at_ms,
        })
    })
}

/// What the executor says of `id`, found started without a result on resume.
fn recovered(id: &str, verification: Verification) -> impl Input {
    let effect_id = id.to_owned();
    recorded(move |at_ms| {
        EffectInput::Recovered(EffectVerification {
            effect_id: effect_id.into(),
            verification,
            cause: Some("resumed".into()),
            at_ms,
        })
    })
}

/// A human decides the open ticket.
pub(crate) fn human(approved: bool) -> Decision {
    let decision = if approved {
        approve_open()
    } else {
        deny_open()
    };
    decision.because("checked")
}

pub(crate) fn phase(state: &RunState, id: &str) -> EffectPhase {
    state
        .effects
        .get(&EffectId::from(id))
        .expect("effect exists")
        .phase
}

/// When the agent finishes, then the run is completed.
fn finish(run: &mut History) {
    run.when(respond(vec![Action::Finish {
        output: json!({"done": true}),
    }]));
    assert_eq!(run.state.status, RunStatus::Completed, "{:?}", run.state);
}

pub(crate) fn decisions(events: &[RunEvent]) -> Vec<(docket_policies::Verdict, String)> {
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

#[test]
pub(crate) fn denied_by_policy_without_permission_kind_or_key() {
    // An agent without the permission.
    let mut run = effects_run("reader");
    run.when(respond(vec![effect("publish", "api", Some("k"))]))
        .then_kinds(&[
            "agent.responded",
            "effect.requested",
            "policy.decided",
            "effect.refused",
            "agent.call_scheduled",
        ])
        .then(|events| {
            assert_eq!(
                decisions(events),
                [(
                    docket_policies::Verdict::Deny,
                    "agents.reader.side_effects".into()
                )]
            );
        });
    assert_eq!(phase(&run.state, E1), EffectPhase::Refused);
    assert_eq!(effect_result(&run.state)["status"], "refused");
    assert_eq!(
        effect_result(&run.state)["rule_id"],
        "agents.reader.side_effects"
    );
    run.replays();

    // A kind with no policy, then a missing key.
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("follow", "api", Some("k"))]));
    assert_eq!(effect_result(&run.state)["rule_id"], "deny_by_default");
    run.when(respond(vec![effect("publish", "api", None)]));
    assert_eq!(phase(&run.state, E2), EffectPhase::Refused);
    assert_eq!(effect_result(&run.state)["rule_id"], "publish-api");
    assert!(
        effect_result(&run.state)["reason"]
            .as_str()
            .is_some_and(|r| r.contains("idempotency key")),
        "{}",
        effect_result(&run.state)
    );
    assert!(run.state.pending_effects().is_empty());
    finish(&mut run);
    run.replays();
}

#[test]
pub(crate) fn dry_run_then_execute_then_verify() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("publish", "api", Some("post-1"))]))
        .then_kinds(&[
            "agent.responded",
            "effect.requested",
            "policy.decided",
            "effect.admitted",
        ]);
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

    run.when(passed(E1))
        .then_kinds(&["effect.dry_run", "effect.ready"]);
    assert_eq!(run.state.pending_effects()[0].1, EffectWork::Execute);

    run.when(switches(E1, &[]))
        .then_kinds(&[
            "effect.kill_switch_checked",
            "policy.decided",
            "effect.started",
        ])
        .then(|events| {
            assert_eq!(
                decisions(events),
                [(docket_policies::Verdict::Allow, "publish-api".into())]
            );
            let RunEvent::EffectStarted(started) = &events[2] else {
                panic!("effect.started");
            };
            assert_eq!(started.request.idempotency_key, "post-1");
            assert_eq!(started.request.attempt, 1);
            assert_eq!(started.request.params, json!({"text": "hello"}));
        });

    run.when(applied(E1, "p-1")).then_kinds(&["effect.applied"]);
    assert_eq!(run.state.pending_effects()[0].1, EffectWork::Verify);
    run.when(verified(
        E1,
        Verification::Applied {
            result: json!({"post_id": "p-1"}),
        },
    ))
    .then_kinds(&["effect.verified", "effect.settled", "agent.call_scheduled"]);
    assert_eq!(phase(&run.state, E1), EffectPhase::Settled);
    let result = effect_result(&run.state);
    assert_eq!(result["status"], "applied");
    assert_eq!(result["receipt"]["result"]["post_id"], "p-1");
    assert_eq!(result["verified_by"], "executor");
    finish(&mut run);
    run.replays();
}

#[test]
pub(crate) fn a_failed_dry_run_refuses_and_an_unsupported_one_waits_for_a_human() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("publish", "api", Some("post-1"))]));
    let failed = DryRunOutcome::Report {
        report: DryRunReport {
            ok: false,
            preview: Value::Null,
            message: Some("text too long".into()),
        },
    };
    run.when(dry_run(E1, failed)).then_kinds(&[
        "effect.dry_run",
        "effect.refused",
        "agent.call_scheduled",
    ]);
    assert_eq!(effect_result(&run.state)["rule_id"], "dry_run");

    run.when(respond(vec![effect("publish", "api", Some("post-2"))]));
    run.when(dry_run(E2, DryRunOutcome::Unsupported))
        .then_kinds(&["effect.dry_run", "human.escalated"]);
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    assert_eq!(phase(&run.state, E2), EffectPhase::AwaitingHuman);
    run.when(human(true))
        .then_kinds(&["human.decided", "effect.ready"]);
    run.when(switches(E2, &[])).then(|events| {
        assert_eq!(
            decisions(events),
            [(docket_policies::Verdict::Allow, "publish-api".into())],
            "the waived dry run counts as passed"
        );
    });
    run.replays();
}

#[test]
pub(crate) fn approval_needed_then_approved() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("publish", "browser", Some("post-1"))]));
    run.when(passed(E1));
    run.when(switches(E1, &[]))
        .then_kinds(&[
            "effect.kill_switch_checked",
            "policy.decided",
            "human.escalated",
        ])
        .then(|events| {
            assert_eq!(
                decisions(events),
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
        });
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    assert!(run.state.pending_effects().is_empty(), "nothing executes");

    run.when(human(true))
        .then_kinds(&["human.decided", "effect.ready"]);
    run.when(switches(E1, &[])).then_kinds(&[
        "effect.kill_switch_checked",
        "policy.decided",
        "effect.started",
    ]);
    run.when(applied(E1, "p-1"));
    run.when(verified(
        E1,
        Verification::Applied {
            result: json!({"post_id": "p-1"}),
        },
    ));
    assert_eq!(effect_result(&run.state)["status"], "applied");
    finish(&mut run);
    run.replays();
}

#[test]
pub(crate) fn approval_needed_then_denied() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("publish", "browser", Some("post-1"))]));
    run.when(passed(E1));
    run.when(switches(E1, &[]));
    run.when(human(false))
        .then_kinds(&["human.decided", "effect.refused", "agent.call_scheduled"]);
    assert_eq!(phase(&run.state, E1), EffectPhase::Refused);
    assert_eq!(run.state.status, RunStatus::Running, "the agent goes on");
    assert_eq!(effect_result(&run.state)["rule_id"], "human");
    finish(&mut run);
    run.replays();
}

#[test]
pub(crate) fn kill_switch_engaged_at_check_time_refuses_the_effect() {
    for (engaged, rule) in [("api", "kill_switch.api"), ("global", "kill_switch.global")] {
        let mut run = effects_run("publisher");
        run.when(respond(vec![effect("publish", "api", Some("post-1"))]));
        run.when(passed(E1));
        run.when(switches(E1, &[engaged]))
            .then_kinds(&[
                "effect.kill_switch_checked",
                "policy.decided",
                "effect.refused",
                "agent.call_scheduled",
            ])
            .then(|events| {
                assert_eq!(
                    decisions(events),
                    [(docket_policies::Verdict::Deny, rule.into())]
                );
            });
        assert_eq!(effect_result(&run.state)["rule_id"], rule);
        assert!(
            run.state.effects[&EffectId::from(E1)].started.is_none(),
            "never started"
        );
        // Another lane's switch does not stop this lane.
        run.when(respond(vec![effect("like", "api", Some("like-1"))]));
        run.when(switches(E2, &["browser"]))
            .then(|events| assert_eq!(kinds(events)[2], "effect.started"));
        run.replays();
    }
}

#[test]
pub(crate) fn dedup_by_key_returns_the_recorded_receipt() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("like", "api", Some("like-1"))]));
    run.when(switches(E1, &[]));
    run.when(applied(E1, "l-1"));
    run.when(verified(
        E1,
        Verification::Applied {
            result: json!({"post_id": "l-1"}),
        },
    ));
    run.when(respond(vec![effect("like", "api", Some("like-1"))]))
        .then_kinds(&[
            "agent.responded",
            "effect.requested",
            "effect.deduplicated",
            "agent.call_scheduled",
        ]);
    let result = effect_result(&run.state);
    assert_eq!(result["status"], "deduplicated");
    assert_eq!(result["of"], E1);
    assert_eq!(result["receipt"]["result"]["post_id"], "l-1");
    assert!(
        run.state.pending_effects().is_empty(),
        "no second execution"
    );
    assert_eq!(phase(&run.state, E2), EffectPhase::Deduplicated);

    // A second request while the first is still in flight is refused, not run twice.
    run.when(respond(vec![
        effect("dm", "api", Some("dm-1")),
        effect("dm", "api", Some("dm-1")),
    ]));
    assert_eq!(phase(&run.state, "run-1/effect-3"), EffectPhase::Ready);
    assert_eq!(phase(&run.state, "run-1/effect-4"), EffectPhase::Refused);
    assert_eq!(
        run.state.effects[&EffectId::from("run-1/effect-4")]
            .outcome
            .as_ref()
            .map(|o| o.0.as_str()),
        Some("idempotency.in_flight")
    );
    run.replays();
}

#[test]
pub(crate) fn failure_with_retry_cap_needs_a_human_to_try_again() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("like", "api", Some("like-1"))]));
    run.when(switches(E1, &[]));
    run.when(failed(E1, "PLATFORM_REJECTED", "rate limited"))
        .then_kinds(&["effect.failed", "agent.call_scheduled"]);
    assert_eq!(effect_result(&run.state)["status"], "failed");
    assert_eq!(effect_result(&run.state)["code"], "PLATFORM_REJECTED");

    // Attempt 2 of a key whose cap is 1: a human must override.
    run.when(respond(vec![effect("like", "api", Some("like-1"))]))
        .then(|events| {
            let RunEvent::EffectRequested(requested) = &events[1] else {
                panic!("effect.requested");
            };
            assert_eq!(requested.attempt, 2);
            assert_eq!(
                decisions(events),
                [(docket_policies::Verdict::NeedsApproval, "like-api".into())]
            );
        });
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    run.when(human(true))
        .then_kinds(&["human.decided", "effect.admitted"]);
    run.when(switches(E2, &[])).then(|events| {
        assert_eq!(kinds(events)[2], "effect.started");
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
    });
    run.replays();
}

#[test]
pub(crate) fn resume_with_a_started_effect_applied_is_recovered_without_executing() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("like", "api", Some("like-1"))]));
    run.when(switches(E1, &[]));
    // The process died here: the fold says started, no result.
    assert_eq!(run.state.pending_effects()[0].1, EffectWork::Recover);
    run.when(recovered(
        E1,
        Verification::Applied {
            result: json!({"post_id": "l-1"}),
        },
    ))
    .then_kinds(&["effect.recovered", "effect.settled", "agent.call_scheduled"]);
    assert_eq!(
        effect_result(&run.state)["receipt"]["result"]["post_id"],
        "l-1"
    );
    assert_eq!(
        run.state.effects[&EffectId::from(E1)].starts,
        1,
        "never started again"
    );
    finish(&mut run);
    run.replays();
}

#[test]
pub(crate) fn resume_with_a_started_effect_not_applied_executes_it_once_more() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("like", "api", Some("like-1"))]));
    run.when(switches(E1, &[]));
    run.when(recovered(E1, Verification::NotApplied))
        .then_kinds(&["effect.recovered", "effect.ready"]);
    assert_eq!(run.state.pending_effects()[0].1, EffectWork::Execute);
    run.when(switches(E1, &[])).then(|events| {
        let RunEvent::EffectStarted(started) = &events[2] else {
            panic!("started again, through the kill switch");
        };
        assert_eq!(
            started.request.attempt, 1,
            "the same attempt: it never applied"
        );
        assert_eq!(started.request.idempotency_key, "like-1");
    });
    run.when(applied(E1, "l-1"));
    assert_eq!(run.state.effects[&EffectId::from(E1)].starts, 2);
    run.replays();
}

#[test]
pub(crate) fn an_execution_unanswered_twice_is_given_up_and_counts_as_an_attempt() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("like", "api", Some("like-1"))]));
    run.when(switches(E1, &[]));
    run.when(recovered(E1, Verification::NotApplied));
    run.when(switches(E1, &[]));
    run.when(recovered(E1, Verification::NotApplied))
        .then_kinds(&["effect.recovered", "effect.refused", "agent.call_scheduled"]);
    assert_eq!(effect_result(&run.state)["rule_id"], "execution_unanswered");
    run.when(respond(vec![effect("like", "api", Some("like-1"))]))
        .then(|events| {
            let RunEvent::EffectRequested(requested) = &events[1] else {
                panic!("effect.requested");
            };
            assert_eq!(requested.attempt, 2);
            assert_eq!(
                decisions(events),
                [(docket_policies::Verdict::NeedsApproval, "like-api".into())]
            );
        });
    run.replays();
}

#[test]
pub(crate) fn resume_with_a_started_effect_unknown_needs_review() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("like", "api", Some("like-1"))]));
    run.when(switches(E1, &[]));
    run.when(recovered(
        E1,
        Verification::Unknown {
            message: "ledger unreachable".into(),
        },
    ))
    .then_kinds(&["effect.recovered", "human.escalated"])
    .then(|events| {
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
    });
    assert!(
        run.state.pending_effects().is_empty(),
        "never executed blindly"
    );
    run.when(human(false))
        .then_kinds(&["human.decided", "effect.settled", "agent.call_scheduled"]);
    assert_eq!(effect_result(&run.state)["status"], "unverified");
    finish(&mut run);
    run.replays();
}

#[test]
pub(crate) fn failed_verification_calls_the_verifier_not_the_publisher() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("publish", "browser", Some("post-1"))]));
    run.when(passed(E1));
    run.when(switches(E1, &[]));
    run.when(human(true));
    run.when(switches(E1, &[]));
    run.when(applied(E1, "p-1"));
    run.when(verified(E1, Verification::NotApplied))
        .then_kinds(&[
            "effect.verified",
            "effect.verifier_called",
            "agent.call_scheduled",
        ])
        .then(|events| {
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
        });
    run.when(respond(vec![Action::Finish {
        output: json!({"verified": true, "reason": "post visible"}),
    }]))
    .then_kinds(&["agent.responded", "effect.settled", "agent.call_scheduled"]);
    assert_eq!(effect_result(&run.state)["verified_by"], "verifier");
    assert_eq!(
        run.state.effects[&EffectId::from(E1)].starts,
        1,
        "never published again"
    );
    finish(&mut run);
    run.replays();
}

#[test]
pub(crate) fn failed_verification_without_a_verifier_needs_review() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("like", "api", Some("like-1"))]));
    run.when(switches(E1, &[]));
    run.when(applied(E1, "l-1"));
    run.when(verified(
        E1,
        Verification::Unknown {
            message: "timeout".into(),
        },
    ))
    .then_kinds(&["effect.verified", "human.escalated"]);
    run.when(human(true))
        .then_kinds(&["human.decided", "effect.settled", "agent.call_scheduled"]);
    assert_eq!(effect_result(&run.state)["status"], "applied");
    assert_eq!(effect_result(&run.state)["verified_by"], "human");
    run.replays();
}

#[test]
pub(crate) fn inputs_for_the_wrong_step_are_rejected() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("publish", "api", Some("post-1"))]));
    let at_ms = run.now();
    let applied = Command::RecordEffect(EffectInput::Applied(EffectApplied {
        effect_id: E1.into(),
        receipt: EffectReceipt {
            result: Value::Null,
            drift: None,
        },
        at_ms,
        reused_from: None,
    }));
    assert!(matches!(
        run.when_rejected(applied),
        Rejection::EffectNotAwaiting { .. }
    ));
    let unknown = Command::RecordEffect(EffectInput::Applied(EffectApplied {
        effect_id: "run-1/effect-9".into(),
        receipt: EffectReceipt {
            result: Value::Null,
            drift: None,
        },
        at_ms,
        reused_from: None,
    }));
    assert_eq!(
        run.when_rejected(unknown),
        Rejection::UnknownEffect("run-1/effect-9".into())
    );
}

#[test]
pub(crate) fn effect_events_round_trip_through_their_encoding() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![effect("publish", "api", Some("post-1"))]));
    run.when(passed(E1));
    run.when(switches(E1, &["browser"]));
    run.when(applied(E1, "p-1"));
    run.when(verified(E1, Verification::NotApplied));
    run.when(human(true));
    for event in &run.log {
        let back = RunEvent::decode(event.kind(), &event.encode()).expect("decodes");
        assert_eq!(&back, event);
    }
}

#[test]
pub(crate) fn a_fan_out_branch_with_an_effect_in_flight_is_not_joined_early() {
    let mut run = effects_run("reader");
    run.when(respond(vec![
        handoff("liker", "task", json!({"n": 1})),
        handoff("checker", "task", json!({"n": 2})),
    ]));
    let calls = run.state.pending_requests();
    assert_eq!(calls.len(), 2, "two branches");
    let (liker, checker) = (calls[0].request_id.clone(), calls[1].request_id.clone());
    run.when(respond(vec![effect("like", "api", Some("l"))]).to(&liker));
    run.when(
        respond(vec![Action::Finish {
            output: json!({"checked": true}),
        }])
        .to(&checker),
    )
    .then(|events| {
        assert_eq!(
            kinds(events),
            ["agent.responded"],
            "the liker branch waits for its effect: not joined, not completed"
        );
    });
    assert_eq!(run.state.status, RunStatus::Running);
    run.when(switches(E1, &[]));
    run.when(applied(E1, "l-1"));
    run.when(verified(E1, Verification::Applied { result: json!({}) }));
    let reply = run.pending().request_id;
    assert!(
        run.history().calls()[&reply].branch_of.is_some(),
        "the reply stays in its branch"
    );
    finish(&mut run);
    run.replays();
}

/// Drives a run with random agent requests, executor answers, kill switches and human
/// decisions, taking each choice from `dice`.
fn random_run(dice: &[u8]) -> History {
    let mut run = effects_run("publisher");
    let mut dice = dice.iter().copied().cycle();
    let mut roll = move |n: u8| dice.next().unwrap_or(0) % n;
    for _ in 0..60 {
        if run.state.status.is_final() {
            break;
        }
        if run.state.status == RunStatus::WaitingForHuman {
            run.when(human(roll(2) == 0));
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
                    run.when(dry_run(&id, outcome));
                }
                EffectWork::Execute => {
                    let engaged: &[&str] = match roll(5) {
                        0 => &["global"],
                        1 => &[lane.as_str()],
                        2 => &["elsewhere"],
                        _ => &[],
                    };
                    run.when(switches(&id, engaged));
                    if phase(&run.state, &id) == EffectPhase::Started {
                        match roll(4) {
                            0 => {
                                run.when(failed(&id, "PLATFORM_DOWN", "503"));
                            }
                            // The process dies here: the next step recovers it.
                            1 => {}
                            _ => {
                                run.when(applied(&id, "p"));
                            }
                        }
                    }
                }
                // The effects bundle marks no browser lane; answered for completeness.
                EffectWork::Sandbox => {
                    let outcome = crate::SandboxOutcome::Error {
                        code: docket_protocol::UNSTABLE_SELECTORS.into(),
                        message: "#post matches nothing".into(),
                    };
                    let effect_id = id.clone();
                    run.when(recorded(move |at_ms| {
                        EffectInput::SandboxRan(crate::EffectSandboxRan {
                            effect_id,
                            outcome,
                            at_ms,
                        })
                    }));
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
                        run.when(verified(&id, verification));
                    } else {
                        run.when(recovered(&id, verification));
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
        run.when(respond(vec![action]).to(&pending.request_id));
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
                if !ids.iter().any(|known| known == id) {
                    ids.push(id.to_string());
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
        let mut run = effects_run("publisher");
        run.when(respond(vec![effect("publish", "browser", Some("post-1"))]));
        run.when(passed(E1));
        run.when(switches(E1, &[]));
        run.when(human(true));
        run.when(switches(E1, &[]));
        run.when(applied(E1, "p-1"));
        run.when(verified(E1, Verification::NotApplied));
        run.when(respond_with(verifier_says.clone()))
            .then(|events| {
                assert_eq!(
                    kinds(events).last(),
                    Some(&"human.escalated"),
                    "{:?}",
                    kinds(events)
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
            });
        assert_eq!(
            run.state.effects[&EffectId::from(E1)].starts,
            1,
            "never executed again"
        );
        run.replays();
    }
}

/// The finalize-or-escalate threshold (docs/governance.md#budgets): an episode past 70% of
/// its budget must finalize or escalate, so an effect it asks for is refused with that rule
/// (and the numbers), and nothing is admitted.
#[test]
pub(crate) fn an_episode_past_70_percent_of_its_budget_gets_no_effect() {
    let mut run = effects_run("publisher");
    // The root episode's default budget is 1,000,000 tokens: 750,000 is past 70%.
    run.when(respond(vec![effect("publish", "api", Some("post-1"))]).tokens(750_000))
        .then(|events| {
            let decided = decisions(events);
            assert_eq!(
                decided,
                vec![(
                    docket_policies::Verdict::Deny,
                    "recursion.budget.finalize_or_escalate_at_percent".to_owned()
                )],
                "{events:#?}"
            );
            assert!(!kinds(events).contains(&"effect.admitted"), "{events:#?}");
        });
    assert_eq!(effect_result(&run.state)["status"], "refused");
    run.replays();
}

/// What the runtime is told to do next follows the run: the entry call, then the effect's
/// work before any call (its result is what the asking agent is called back with), then
/// that call, and nothing while a human is asked or after the run ended.
#[test]
pub(crate) fn the_next_step_is_due_effect_work_before_calls_and_nothing_while_waiting() {
    let mut run = effects_run("publisher");
    let NextStep::Call(calls) = run.state.next_step() else {
        panic!("the entry call is next: {:?}", run.state.next_step());
    };
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].target_agent, "publisher");

    run.when(respond(vec![effect("publish", "api", Some("post-1"))]));
    assert!(matches!(
        run.state.next_step(),
        NextStep::Effect(record, EffectWork::DryRun) if record.requested.effect_id == E1
    ));
    run.when(passed(E1));
    assert!(matches!(
        run.state.next_step(),
        NextStep::Effect(_, EffectWork::Execute)
    ));
    run.when(switches(E1, &[]));
    run.when(applied(E1, "p-1"));
    assert!(matches!(
        run.state.next_step(),
        NextStep::Effect(_, EffectWork::Verify)
    ));
}

#[test]
pub(crate) fn the_next_step_waits_for_a_human_and_ends_with_the_run() {
    let mut run = started();
    run.when(respond(vec![Action::Escalate {
        reason: "unsure".into(),
        choices: Vec::new(),
    }]));
    assert_eq!(run.state.next_step(), NextStep::WaitForHuman);
    run.when(deny("ticket-1").because("no"));
    assert_eq!(
        run.state.next_step(),
        NextStep::Done(run.state.status),
        "{:?}",
        run.state.status
    );
    assert!(run.state.status.is_final());
}

/// `publish` on `api` with key `post-1`, not executed before `not_before`.
fn scheduled(not_before: &str) -> Action {
    let Action::RequestEffect {
        kind,
        lane,
        idempotency_key,
        params,
        ..
    } = effect("publish", "api", Some("post-1"))
    else {
        unreachable!()
    };
    Action::RequestEffect {
        kind,
        lane,
        idempotency_key,
        params,
        not_before: Some(not_before.to_owned()),
    }
}

#[test]
pub(crate) fn a_scheduled_effect_is_dry_run_at_once_then_held_until_due_and_gated_then() {
    let mut run = effects_run("publisher");
    // Inputs are recorded 10 ms apart from 1,000 ms: the post is due at 5,000 ms.
    run.when(respond(vec![scheduled("1970-01-01T00:00:05Z")]))
        .then(|events| {
            let RunEvent::EffectRequested(requested) = &events[1] else {
                panic!("requested: {events:?}");
            };
            assert_eq!(requested.not_before_ms, Some(5_000));
        });
    assert_eq!(phase(&run.state, E1), EffectPhase::DryRun);
    // The dry run passes at once; the effect is then held by a timer naming it.
    run.when(passed(E1))
        .then_kinds(&["effect.dry_run", "effect.ready", "timer.set"])
        .then(|events| {
            let RunEvent::TimerSet(set) = &events[2] else {
                panic!("timer");
            };
            assert_eq!(set.effect_id.as_ref().map(EffectId::as_str), Some(E1));
            assert_eq!(set.due_at_ms, 5_000);
        });
    assert_eq!(phase(&run.state, E1), EffectPhase::Scheduled);
    assert!(matches!(run.state.next_step(), NextStep::WaitForTimer(t) if t.set.due_at_ms == 5_000));
    // Nothing is executed before its time: a kill-switch reading does not apply yet.
    assert!(matches!(
        run.when_rejected(switches(E1, &[])),
        Rejection::EffectNotAwaiting { .. }
    ));
    // Its time comes: it goes to its execution gate, nobody is called.
    let timer = run.state.timers().keys().next().expect("timer").clone();
    run.when(Command::FireTimer(crate::TimerFired {
        timer_id: timer,
        at_ms: 5_200,
    }))
    .then_kinds(&["timer.fired", "effect.ready"]);
    assert!(matches!(
        run.state.next_step(),
        NextStep::Effect(_, EffectWork::Execute)
    ));
    // The kill switch is read then: engaged at its due time, the post is refused.
    run.when(switches(E1, &["api"]))
        .then_kinds(&[
            "effect.kill_switch_checked",
            "policy.decided",
            "effect.refused",
            "agent.call_scheduled",
        ])
        .then(|events| {
            assert_eq!(
                decisions(events),
                [(docket_policies::Verdict::Deny, "kill_switch.api".into())]
            );
        });
    run.replays();
}

#[test]
pub(crate) fn a_scheduled_effect_already_due_goes_to_its_gate_without_a_timer() {
    let mut run = effects_run("publisher");
    run.when(respond(vec![scheduled("1970-01-01T00:00:00.5Z")]));
    run.when(passed(E1))
        .then_kinds(&["effect.dry_run", "effect.ready"]);
    assert_eq!(phase(&run.state, E1), EffectPhase::Ready);
    assert!(run.state.timers().is_empty());
    run.replays();
}

#[test]
pub(crate) fn a_run_of_decider_12_refuses_a_scheduled_effect() {
    let mut run = effects_run("publisher");
    run.state = {
        let mut log = run.log.clone();
        let Some(RunEvent::RunRequested(requested)) = log.first_mut() else {
            panic!("a run");
        };
        std::sync::Arc::make_mut(requested).decider_version = 12;
        let mut state = RunState::default();
        for e in &log {
            state.apply(e);
        }
        run.log = log;
        state
    };
    run.when(respond(vec![scheduled("1970-01-01T00:00:05Z")]))
        .then(|events| {
            assert!(
                events.iter().any(
                    |e| matches!(e, RunEvent::EffectRefused(r) if r.rule_id == "decider_version")
                ),
                "{events:?}"
            );
        });
    run.replays();
}
