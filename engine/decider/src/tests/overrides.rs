//! `decide/overrides.rs`: a person overrides the rule that blocked a run, by the authority
//! of their role (decider version 6): each overridable block continues exactly the step it
//! stopped; overrides the authority order, an absolute rule or an older run do not allow
//! are refused and record nothing.

use crate::HumanOverrode;
use serde_json::json;

use super::*;
use crate::events::overrides::HeldStep;
use docket_policies::{Authority, StepOutcome};
use docket_protocol::{Action, BudgetRequest, EpisodeResult, EpisodeStatus};

const OV: &str = r#"
bundle = { id = "ov" }
[[agents]]
id = "external"
[[agents]]
id = "lead"
authority = "human"
[[agents]]
id = "officer"
authority = "global_rules"
[[agents]]
id = "a"
allowed_tools = ["Read", "Bash(*)"]
[[agents]]
id = "b"
[[agents]]
id = "c"

[interactions]
allowed = [
  { from = "external", to = "a" },
  { from = "a", to = "b" },
  { from = "b", to = "external" },
  { from = "c", to = "external" },
]
forbidden = [{ from = "a", to = "c", reason = "a must not reach c" }]

[multi_agent_handoffs]
default_handoff_mode = "full"
blocked_context_fields = ["secret"]

[[deny_patterns]]
id = "deny-rm"
pattern = "Bash(rm -rf *)"
reason = "recursive deletion is denied for every agent"

[recursion.default]
allowed_child_types = ["verify"]
forbidden_child_types = ["publish"]

[escalation]
ladder = [{ id = "retry", after_failures = 1, action = "retry" }, { id = "stop", after_failures = 2, action = "block" }]
"#;

/// Given `run-1` under the `ov` bundle, recorded by decider `version`, with `classified`
/// agents answered through the classifier `risk`: a's call is pending.
fn ov_run(classified: &[&str]) -> History {
    started_under(OV, "ov.toml", |run| {
        for agent in ["b", "c", "risk"] {
            run.workflow.agents.insert(agent.into(), in_process());
        }
        for agent in classified {
            if let Some(a) = run.workflow.agents.get_mut(*agent) {
                a.classifiers = vec!["risk".into()];
            }
        }
    })
}

/// A person's override of the run's block: [`override_by`]. Names the rule the run is
/// blocked by unless told otherwise.
struct Override {
    by: String,
    role: String,
    rule_id: Option<String>,
    reason: String,
}

fn override_by(by: &str, role: &str) -> Override {
    Override {
        by: by.into(),
        role: role.into(),
        rule_id: None,
        reason: "reviewed it with legal".into(),
    }
}

impl Override {
    fn rule(mut self, rule_id: &str) -> Self {
        self.rule_id = Some(rule_id.into());
        self
    }

    fn because(mut self, reason: &str) -> Self {
        self.reason = reason.into();
        self
    }
}

impl Input for Override {
    fn command(self, history: &mut History) -> Command {
        let rule_id = self
            .rule_id
            .unwrap_or_else(|| history.state.blocked_by().unwrap_or_default().to_owned());
        Command::RecordOverride(HumanOverrode {
            by: self.by,
            role: self.role,
            rule_id,
            reason: self.reason,
            at_ms: history.now(),
        })
    }
}

/// The `overridable` of the batch's `run.blocked`.
fn held(events: &[RunEvent]) -> Option<crate::Overridable> {
    events.iter().find_map(|e| match e {
        RunEvent::RunBlocked { overridable, .. } => overridable.as_deref().cloned(),
        _ => None,
    })
}

fn refused(rejection: Rejection) -> String {
    match rejection {
        Rejection::OverrideRefused(why) => why,
        other => panic!("refused for another reason: {other:?}"),
    }
}

#[test]
pub(crate) fn an_override_lets_a_denied_handoff_cross_scoped_and_the_run_completes() {
    let mut run = ov_run(&[]);
    run.when(respond(vec![
        handoff("c", "note", json!({"keep": 1, "secret": "s"})),
        handoff("b", "work", json!({"y": 2})),
    ]))
    .then_kinds(&[
        "agent.responded",
        "handoff.denied",
        "episode.stopped",
        "run.blocked",
    ])
    .then(|events| {
        let held = held(events).expect("the denied handoff is held");
        assert_eq!(held.level, Authority::GlobalRules);
        assert_eq!(held.episodes, vec![crate::EpisodeId::root()]);
        let HeldStep::Handoff { to, then, .. } = &held.step else {
            panic!("{:?}", held.step)
        };
        assert_eq!(to, "c");
        assert_eq!(then.len(), 1, "the handoff to b waits behind it");
    });
    assert_eq!(run.state.status, RunStatus::Blocked);
    assert_eq!(run.state.blocked_by(), Some("forbid:a->c"));

    run.when(override_by("dana", "lead"))
        .then_kinds(&[
            "human.overrode",
            "policy.decided",
            "handoff.allowed",
            "handoff.allowed",
            "agent.call_scheduled",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
                panic!("{:?}", events[1])
            };
            assert_eq!(&*decision.rule_id, "human.override");
            assert!(
                decision
                    .chain
                    .iter()
                    .any(|s| &*s.rule_id == "forbid:a->c" && s.outcome == StepOutcome::Overridden)
            );
            let RunEvent::HandoffAllowed {
                to,
                decision,
                delivered,
                ..
            } = &events[2]
            else {
                panic!("{:?}", events[2])
            };
            assert_eq!(to, "c");
            assert_eq!(&*decision.rule_id, "human.override", "the override decided");
            assert!(
                decision.reason.contains("dana (lead)"),
                "{}",
                decision.reason
            );
            assert_eq!(**delivered, json!({"keep": 1}), "still scoped: no secret");
        });
    assert_eq!(run.state.status, RunStatus::Running);
    assert_eq!(run.state.blocked_by(), None);
    assert_eq!(
        run.state.episodes.episodes[&crate::EpisodeId::root()].phase,
        crate::EpisodePhase::Running,
        "the root episode the block ended is open again"
    );
    run.when(respond(vec![Action::Finish { output: json!({}) }]).by("c"));
    run.when(respond(vec![handoff("external", "out", json!({"done": true}))]).by("b"));
    assert_eq!(run.state.status, RunStatus::Completed);
    run.replays();
}

#[test]
pub(crate) fn an_override_of_a_dangerous_verdict_carries_out_the_held_actions() {
    let mut run = ov_run(&["a"]);
    run.when(respond(vec![handoff("b", "work", json!({"y": 1}))]));
    run.when(respond(vec![Action::Finish {
        output: json!({"verdict": "DANGEROUS", "reason": "deletes data"}),
    }]))
    .then(|events| {
        let held = held(events).expect("the actions are held");
        assert_eq!(held.level, Authority::SafetySkill);
        assert!(matches!(held.step, HeldStep::Actions { ref actions, .. } if actions.len() == 1));
    });
    assert_eq!(run.state.blocked_by(), Some("risk_classifier.risk"));
    // A role at global_rules outranks a safety skill's verdict.
    run.when(override_by("omar", "officer").because("the data is a disposable copy"))
        .then_kinds(&[
            "human.overrode",
            "policy.decided",
            "handoff.allowed",
            "agent.call_scheduled",
        ]);
    assert_eq!(run.pending().target_agent, "b");
    run.when(respond(vec![handoff(
        "external",
        "out",
        json!({"ok": true}),
    )]));
    assert_eq!(run.state.status, RunStatus::Completed);
    run.replays();
}

#[test]
pub(crate) fn an_override_authorises_a_forbidden_child_type() {
    let mut run = ov_run(&[]);
    let publish = Action::Spawn {
        agent: "b".into(),
        episode_type: "publish".into(),
        goal: "publish the post".into(),
        budget: BudgetRequest::default(),
        inputs: serde_json::Map::new(),
        trigger: None,
    };
    run.when(respond(vec![publish]))
        .then_kinds(&[
            "agent.responded",
            "episode.action_denied",
            "episode.stopped",
            "run.blocked",
        ])
        .then(|events| {
            let held = held(events).expect("the spawn is held");
            assert!(matches!(held.step, HeldStep::Spawn { .. }));
        });
    // global_rules is a peer of the recursion policy: it cannot override it.
    let why = refused(run.when_rejected(override_by("omar", "officer")));
    assert!(why.contains("not above level 2"), "{why}");
    assert!(why.contains("lead"), "names who may: {why}");
    run.when(override_by("dana", "lead"))
        .then_kinds(&[
            "human.overrode",
            "policy.decided",
            "episode.started",
            "handoff.allowed",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let RunEvent::EpisodeStarted { decision, .. } = &events[2] else {
                panic!("{:?}", events[2])
            };
            assert!(decision.is_allowed());
            assert!(
                decision
                    .chain
                    .iter()
                    .any(|s| s.outcome == StepOutcome::Overridden),
                "the spawn decision says a human authorised it: {:?}",
                decision.chain
            );
        });
    run.when(respond(vec![Action::FinishEpisode {
        result: EpisodeResult::new(EpisodeStatus::Ok, "published"),
    }]));
    assert_eq!(run.pending().target_agent, "a", "the result returns to a");
    run.when(respond(vec![handoff("b", "work", json!({}))]));
    run.when(respond(vec![handoff("external", "out", json!({}))]));
    assert_eq!(run.state.status, RunStatus::Completed);
    run.replays();
}

#[test]
pub(crate) fn an_override_of_the_hard_stop_retries_the_call() {
    let mut run = ov_run(&[]);
    run.when(crash());
    run.when(crash()).then(|events| {
        let held = held(events).expect("the call is held");
        assert!(matches!(held.step, HeldStep::Retry { .. }));
        assert_eq!(held.deny_pattern, None);
    });
    assert_eq!(run.state.blocked_by(), Some("stop"));
    run.when(override_by("dana", "lead").because("the agent was redeployed"))
        .then_kinds(&[
            "human.overrode",
            "policy.decided",
            "handoff.allowed",
            "agent.call_scheduled",
        ]);
    let retry = run.pending();
    assert_eq!(retry.target_agent, "a");
    assert_eq!(retry.attempt, 3);
    let note = &retry.context["previous_attempt"];
    assert_eq!(note["overridden_by"], "dana");
    assert_eq!(note["override_reason"], "the agent was redeployed");
    run.when(respond(vec![handoff("b", "work", json!({}))]));
    run.when(respond(vec![handoff("external", "out", json!({}))]));
    assert_eq!(run.state.status, RunStatus::Completed);
    run.replays();
}

#[test]
pub(crate) fn overrides_the_authority_order_does_not_allow_are_refused_and_record_nothing() {
    // A hard stop after a tool call a deny pattern denied: absolute.
    let mut run = ov_run(&[]);
    for _ in 0..2 {
        run.when(respond(vec![handoff("b", "work", json!({}))]).tool_call("Bash", "rm -rf /"));
    }
    assert_eq!(run.state.status, RunStatus::Blocked);
    assert_eq!(
        held(run.decided()).and_then(|h| h.deny_pattern),
        Some("deny-rm".to_owned())
    );
    let why = refused(run.when_rejected(override_by("dana", "lead")));
    assert!(why.contains("deny pattern `deny-rm`"), "{why}");
    assert!(why.contains("absolute"), "{why}");

    // Not high enough, unknown, anonymous, no reason, the wrong rule.
    let mut run = ov_run(&[]);
    run.when(respond(vec![handoff("c", "note", json!({}))]));
    let before = run.log.len();
    let why = refused(run.when_rejected(override_by("omar", "officer")));
    assert!(
        why.contains("`officer` is level 2 (global_rules), not above level 2"),
        "{why}"
    );
    let why = refused(run.when_rejected(override_by("eve", "a")));
    assert!(why.contains("level 6 (specialist)"), "{why}");
    let why = refused(run.when_rejected(override_by("eve", "boss")));
    assert!(why.contains("no role `boss`"), "{why}");
    assert_eq!(
        run.when_rejected(override_by(" ", "lead")),
        Rejection::Unnamed(crate::PersonAct::Override)
    );
    assert_eq!(
        run.when_rejected(override_by("dana", "lead").because("")),
        Rejection::Unexplained(crate::PersonAct::Override)
    );
    let why = refused(run.when_rejected(override_by("dana", "lead").rule("deny-rm")));
    assert!(
        why.contains("blocked by `forbid:a->c`, not `deny-rm`"),
        "{why}"
    );
    assert_eq!(run.state.status, RunStatus::Blocked);
    assert_eq!(run.log.len(), before, "nothing recorded");

    // A run that is not blocked has nothing to override.
    let mut running = ov_run(&[]);
    assert_eq!(
        running.when_rejected(override_by("dana", "lead")),
        Rejection::NotBlocked("running")
    );

    // A block that stops nothing an override continues: a human's own denial.
    let mut denied = ov_run(&[]);
    denied.when(respond(vec![Action::Escalate {
        reason: "go on?".into(),
        choices: Vec::new(),
    }]));
    denied.when(deny_open());
    assert_eq!(denied.state.overridable(), None);
    let why = refused(denied.when_rejected(override_by("dana", "lead")));
    assert!(
        why.contains("stopped nothing an override can continue"),
        "{why}"
    );
}

#[test]
pub(crate) fn a_bundle_may_mark_a_rule_absolute() {
    let source = format!("{OV}\n[overrides]\nabsolute = [\"forbid:a->c\"]\n");
    let mut run = started_under(&source, "ov.toml", |run| {
        run.workflow.agents.insert("c".into(), in_process());
    });
    run.when(respond(vec![handoff("c", "note", json!({}))]));
    let why = refused(run.when_rejected(override_by("dana", "lead")));
    assert!(why.contains("`forbid:a->c` is absolute"), "{why}");
}

#[test]
pub(crate) fn an_override_lets_the_runs_input_past_the_entry_checkpoint() {
    let source = OV
        .replace(
            r#"{ from = "external", to = "a" },"#,
            r#"{ from = "external", to = "a", output_type = "brief" },"#,
        )
        .replace(
            "[interactions]",
            "[[output_types]]\nid = \"brief\"\nschema = { type = \"object\", required = [\"topic\"] }\n\n[interactions]",
        );
    let mut run = started_under(&source, "ov.toml", |_| {});
    assert_eq!(
        run.state.status,
        RunStatus::Blocked,
        "the input has no topic"
    );
    let held = run
        .state
        .overridable()
        .cloned()
        .expect("the entry handoff is held");
    assert!(matches!(
        held.step,
        HeldStep::Handoff { request_id: None, ref to, .. } if to == "a"
    ));
    run.when(override_by("dana", "lead").because("the topic is in the brief's title"))
        .then_kinds(&[
            "human.overrode",
            "policy.decided",
            "handoff.allowed",
            "agent.call_scheduled",
        ]);
    assert_eq!(run.pending().target_agent, "a");
    assert_eq!(*run.pending().decision_inputs[0].payload, json!({"x": 1}));
    run.replays();
}
