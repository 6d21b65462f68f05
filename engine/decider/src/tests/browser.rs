//! `decide/browser.rs`: side effects on a browser lane. Given a run under a bundle whose
//! `publish` in lane `browser` runs sandbox first and whose `like` in lane `browser` does
//! not, when the executor answers, then the whole events recorded; each log replays.

use serde_json::json;

use super::effect::{decisions, failed, human, passed, phase, recorded, switches, verified};
use super::*;
use crate::{
    EffectApplied, EffectId, EffectInput, EffectPhase, EffectReady, EffectRefused,
    EffectSandboxRan, EffectSandboxStarted, EffectSettled, EffectTicketStep, EffectWork,
    ReadyBecause, RunEvent, RunStatus, SandboxOutcome, SettledBy, SettledStatus, TicketSubject,
};
use docket_protocol::{
    DriftEvidence, EffectReceipt, EffectTarget, UNSTABLE_SELECTORS, Verification,
};

const E1: &str = "run-1/effect-1";
const E2: &str = "run-1/effect-2";

/// The effects bundle with its `publish-browser` policy made a sandbox-first browser lane
/// (no approval, no verifier) and a `like-browser` one without a sandbox.
fn browser_bundle() -> String {
    let policy = r#"[[side_effects]]
id = "publish-browser"
kind = "publish"
lane = "browser"
dry_run_required = true
human_approval_required = true
verifier = "checker"
"#;
    assert!(EFFECTS_BUNDLE.contains(policy));
    EFFECTS_BUNDLE.replace(
        policy,
        r#"[[side_effects]]
id = "publish-browser"
kind = "publish"
lane = "browser"
dry_run_required = true
browser = {}

[[side_effects]]
id = "like-browser"
kind = "like"
lane = "browser"
dry_run_required = false
browser = { sandbox_first = false }
"#,
    )
}

fn browser_run(decider_version: u32) -> History {
    effects_run_under(&browser_bundle(), "publisher", decider_version)
}

/// The page as the executor saw it.
fn evidence() -> DriftEvidence {
    DriftEvidence {
        screenshot_sha256: "a".repeat(64),
        dom_sha256: "0123456789abcdef".repeat(4),
    }
}

fn receipt(post: &str, drift: Option<DriftEvidence>) -> EffectReceipt {
    EffectReceipt {
        result: json!({ "post_id": post }),
        drift,
    }
}

/// The executor's answer to the sandbox run of `id`.
fn sandbox_ran(id: &str, outcome: SandboxOutcome) -> impl Input {
    let effect_id = id.to_owned();
    recorded(move |at_ms| {
        EffectInput::SandboxRan(EffectSandboxRan {
            effect_id: effect_id.into(),
            outcome,
            at_ms,
        })
    })
}

/// The executor applied `id` on the real target with this receipt.
fn applied(id: &str, receipt: EffectReceipt) -> impl Input {
    let effect_id = id.to_owned();
    recorded(move |at_ms| {
        EffectInput::Applied(EffectApplied {
            effect_id: effect_id.into(),
            receipt,
            at_ms,
            reused_from: None,
        })
    })
}

fn work(run: &History) -> Vec<EffectWork> {
    run.state
        .pending_effects()
        .iter()
        .map(|(_, w)| *w)
        .collect()
}

/// The ticket the last batch opened: its reason and subject.
fn ticket(events: &[RunEvent]) -> (String, TicketSubject) {
    events
        .iter()
        .find_map(|e| match e {
            RunEvent::Escalated {
                reason, subject, ..
            } => Some((reason.clone(), subject.clone())),
            _ => None,
        })
        .expect("a ticket is opened")
}

#[test]
pub(crate) fn sandbox_first_then_the_real_target() {
    let mut run = browser_run(DECIDER_VERSION);
    run.when(respond(vec![effect("publish", "browser", Some("post-1"))]))
        .then(|events| {
            let RunEvent::PolicyDecided { decision, .. } = &events[2] else {
                panic!("the admission decision");
            };
            assert!(
                decision
                    .chain
                    .iter()
                    .any(|s| s.note.contains("sandbox run")),
                "admission names the sandbox run to come: {decision:?}"
            );
        });
    assert_eq!(work(&run), [EffectWork::DryRun]);

    // The dry run passed: the sandbox run comes before the execution gate.
    let mut sandbox_request = run
        .state
        .effects()
        .get(&EffectId::from(E1))
        .expect("effect")
        .executor_request(&"run-1".into(), 30_000);
    sandbox_request.target = Some(EffectTarget::Sandbox);
    run.when(passed(E1)).then(|events| {
        assert_eq!(
            events[1..],
            [
                RunEvent::EffectReady(EffectReady {
                    effect_id: E1.into(),
                    because: ReadyBecause::DryRunPassed,
                }),
                RunEvent::EffectSandboxStarted(EffectSandboxStarted {
                    effect_id: E1.into(),
                    request: sandbox_request,
                }),
            ]
        );
    });
    assert_eq!(phase(&run.state, E1), EffectPhase::Sandbox);
    assert_eq!(work(&run), [EffectWork::Sandbox]);

    // The sandbox run succeeded with drift evidence: the real target is next.
    run.when(sandbox_ran(
        E1,
        SandboxOutcome::Receipt {
            receipt: receipt("sandbox-1", Some(evidence())),
        },
    ))
    .then(|events| {
        assert_eq!(
            events[1..],
            [RunEvent::EffectReady(EffectReady {
                effect_id: E1.into(),
                because: ReadyBecause::SandboxPassed,
            })]
        );
    });
    assert_eq!(work(&run), [EffectWork::Execute]);

    run.when(switches(E1, &[]))
        .then_kinds(&[
            "effect.kill_switch_checked",
            "policy.decided",
            "effect.started",
        ])
        .then(|events| {
            assert_eq!(
                decisions(events),
                [(docket_policies::Verdict::Allow, "publish-browser".into())]
            );
            let RunEvent::EffectStarted(started) = &events[2] else {
                panic!("effect.started");
            };
            assert_eq!(started.request.target, Some(EffectTarget::Live));
            assert_eq!(started.request.idempotency_key, "post-1");
        });

    run.when(applied(E1, receipt("p-1", Some(evidence()))))
        .then_kinds(&["effect.applied"]);
    run.when(verified(
        E1,
        Verification::Applied {
            result: json!({"post_id": "p-1"}),
        },
    ))
    .then_kinds(&["effect.verified", "effect.settled", "agent.call_scheduled"]);
    let result = effect_result(&run.state);
    assert_eq!(result["status"], "applied");
    assert_eq!(
        result["receipt"]["drift"]["screenshot_sha256"],
        "a".repeat(64),
        "the agent is told the evidence recorded: {result}"
    );
    let rec = run
        .state
        .effects()
        .get(&EffectId::from(E1))
        .expect("effect");
    assert!(rec.sandbox_passed);
    assert_eq!(
        rec.sandbox.as_ref().and_then(|r| r.drift.clone()),
        Some(evidence())
    );
    run.replays();
}

#[test]
pub(crate) fn a_result_without_drift_evidence_is_refused() {
    // In the sandbox: refused before the real target is driven.
    let mut run = browser_run(DECIDER_VERSION);
    run.when(respond(vec![effect("publish", "browser", Some("post-1"))]));
    run.when(passed(E1));
    run.when(sandbox_ran(
        E1,
        SandboxOutcome::Receipt {
            receipt: receipt("sandbox-1", None),
        },
    ))
    .then_kinds(&[
        "effect.sandbox_ran",
        "effect.refused",
        "agent.call_scheduled",
    ])
    .then(|events| {
        let RunEvent::EffectRefused(EffectRefused {
            rule_id, reason, ..
        }) = &events[1]
        else {
            panic!("effect.refused");
        };
        assert_eq!(rule_id, "browser.drift_evidence");
        assert!(reason.contains("no drift evidence"), "{reason}");
    });
    assert_eq!(phase(&run.state, E1), EffectPhase::Refused);
    assert_eq!(
        effect_result(&run.state)["rule_id"],
        "browser.drift_evidence"
    );

    // Evidence that is not a SHA-256 is no evidence, and the field is named.
    run.when(respond(vec![effect("publish", "browser", Some("post-2"))]));
    run.when(passed(E2));
    let mut bad = evidence();
    bad.dom_sha256 = "not-a-hash".into();
    run.when(sandbox_ran(
        E2,
        SandboxOutcome::Receipt {
            receipt: receipt("sandbox-2", Some(bad)),
        },
    ));
    let result = effect_result(&run.state);
    assert_eq!(result["rule_id"], "browser.drift_evidence");
    assert!(
        result["reason"]
            .as_str()
            .is_some_and(|r| r.contains("drift.dom_sha256")),
        "{result}"
    );
    run.replays();

    // On the real target (no sandbox): the effect applied, but the executor's word is not
    // enough to settle it; a person reviews it.
    let mut run = browser_run(DECIDER_VERSION);
    run.when(respond(vec![effect("like", "browser", Some("like-1"))]))
        .then_kinds(&[
            "agent.responded",
            "effect.requested",
            "policy.decided",
            "effect.admitted",
        ]);
    assert_eq!(work(&run), [EffectWork::Execute], "no sandbox run");
    run.when(switches(E1, &[]));
    run.when(applied(E1, receipt("l-1", None)));
    run.when(verified(
        E1,
        Verification::Applied {
            result: json!({"post_id": "l-1"}),
        },
    ))
    .then_kinds(&["effect.verified", "human.escalated"])
    .then(|events| {
        let (reason, subject) = ticket(events);
        assert!(
            reason.contains("[browser.drift_evidence]") && reason.contains("no drift evidence"),
            "{reason}"
        );
        assert_eq!(
            subject,
            TicketSubject::Effect {
                effect_id: E1.into(),
                step: EffectTicketStep::Review,
            }
        );
    });
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    run.when(human(true)).then(|events| {
        assert_eq!(
            events[1],
            RunEvent::EffectSettled(EffectSettled {
                effect_id: E1.into(),
                status: SettledStatus::Verified,
                by: SettledBy::Human,
                reason: "ana: checked".into(),
            })
        );
    });
    run.replays();
}

#[test]
pub(crate) fn unstable_selectors_open_a_manual_review_ticket() {
    // In the sandbox; a person approves: they carried it out by hand.
    let mut run = browser_run(DECIDER_VERSION);
    run.when(respond(vec![effect("publish", "browser", Some("post-1"))]));
    run.when(passed(E1));
    run.when(sandbox_ran(
        E1,
        SandboxOutcome::Error {
            code: UNSTABLE_SELECTORS.into(),
            message: "[data-testid=reply-submit] matches 2 elements".into(),
        },
    ))
    .then_kinds(&["effect.sandbox_ran", "human.escalated"])
    .then(|events| {
        let (reason, subject) = ticket(events);
        assert_eq!(
            subject,
            TicketSubject::Effect {
                effect_id: E1.into(),
                step: EffectTicketStep::ManualReview,
            }
        );
        assert!(
            reason.contains("unstable selectors on its sandbox run")
                && reason.contains("matches 2 elements")
                && reason.contains("not tried again"),
            "{reason}"
        );
    });
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    assert_eq!(work(&run), [], "nothing is retried while the person looks");
    run.when(human(true))
        .then_kinds(&["human.decided", "effect.settled", "agent.call_scheduled"])
        .then(|events| {
            assert_eq!(
                events[1],
                RunEvent::EffectSettled(EffectSettled {
                    effect_id: E1.into(),
                    status: SettledStatus::Verified,
                    by: SettledBy::Human,
                    reason: "ana carried it out by hand (or found it in place): checked".into(),
                })
            );
        });
    assert_eq!(effect_result(&run.state)["verified_by"], "human");
    run.replays();

    // On the real target; a person denies: the effect is refused, the agent told.
    let mut run = browser_run(DECIDER_VERSION);
    run.when(respond(vec![effect("like", "browser", Some("like-1"))]));
    run.when(switches(E1, &[]));
    run.when(failed(E1, UNSTABLE_SELECTORS, "#like matches nothing"))
        .then_kinds(&["effect.failed", "human.escalated"])
        .then(|events| {
            let (reason, _) = ticket(events);
            assert!(reason.contains("on the real target"), "{reason}");
        });
    run.when(human(false))
        .then_kinds(&["human.decided", "effect.refused", "agent.call_scheduled"]);
    assert_eq!(effect_result(&run.state)["rule_id"], "human");
    run.replays();

    // Any other failure in the sandbox refuses the effect, naming it.
    let mut run = browser_run(DECIDER_VERSION);
    run.when(respond(vec![effect("publish", "browser", Some("post-1"))]));
    run.when(passed(E1));
    run.when(sandbox_ran(
        E1,
        SandboxOutcome::Error {
            code: "EFFECT_TIMEOUT".into(),
            message: "no answer".into(),
        },
    ))
    .then_kinds(&[
        "effect.sandbox_ran",
        "effect.refused",
        "agent.call_scheduled",
    ]);
    assert_eq!(effect_result(&run.state)["rule_id"], "sandbox");
    run.replays();
}

/// A run recorded by decider version 13 runs a browser-lane effect as on any other lane:
/// no sandbox run is recorded, and the version-14 bundle's gate then refuses the real
/// target, saying why.
#[test]
pub(crate) fn before_version_14_no_sandbox_run_is_recorded() {
    let mut run = browser_run(13);
    run.when(respond(vec![effect("publish", "browser", Some("post-1"))]));
    run.when(passed(E1))
        .then_kinds(&["effect.dry_run", "effect.ready"]);
    assert_eq!(work(&run), [EffectWork::Execute]);
    run.when(switches(E1, &[])).then_kinds(&[
        "effect.kill_switch_checked",
        "policy.decided",
        "effect.refused",
        "agent.call_scheduled",
    ]);
    let reason = effect_result(&run.state)["reason"].clone();
    assert!(
        reason.as_str().is_some_and(|r| r.contains("sandbox run")),
        "{reason}"
    );
    run.replays();
}
