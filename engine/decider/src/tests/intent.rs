//! `decide/intent.rs`: the classifying agent's answers to the run's input held to their
//! intent classification (decider version 14): a routing below the threshold refused and
//! retried, one at or above it allowed, a clarifying question below it allowed and the
//! person's answer routed, the contract told only to the calls it applies to.

use serde_json::json;

use super::*;
use crate::RunEvent;
use crate::decide::INTENT_POLICY_VIOLATION;
use docket_policies::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict};
use docket_protocol::{Action, IntentClassification, IntentTarget};

/// An orchestrator that classifies and routes to two specialists, who return to it.
pub(crate) const INTENT_BUNDLE: &str = r#"
bundle = { id = "intent" }
[[agents]]
id = "external"
[[agents]]
id = "ORC"
[[agents]]
id = "CST"
capabilities = [{ code = "CST_FRAMEWORK" }]
[[agents]]
id = "DOC"
capabilities = [{ code = "DOC_GENERATE" }]

[interactions]
allowed = [
  { from = "external", to = "ORC" }, { from = "ORC", to = "external" },
  { from = "ORC", to = "CST" }, { from = "CST", to = "ORC" },
  { from = "ORC", to = "DOC" }, { from = "DOC", to = "ORC" },
]

[multi_agent_handoffs]
default_handoff_mode = "full"

[intent_classification]
agent = "ORC"
"#;

/// `run-1` under [`INTENT_BUNDLE`], recorded by `version`: ORC's call with the user's
/// request is pending.
fn started_at(version: u32) -> History {
    started_under(INTENT_BUNDLE, "intent.toml", |run| {
        run.workflow.entry = "ORC".into();
        run.workflow.agents = ["ORC", "CST", "DOC"]
            .into_iter()
            .map(|a| (a.into(), in_process()))
            .collect();
        run.input = json!({"user_message": "Help me build a business case"});
        run.decider_version = version;
    })
}

fn intent(confidence: f64, target: Option<&str>) -> IntentClassification {
    IntentClassification {
        primary_intent: "business_case".into(),
        intent_confidence: confidence,
        target_agent: target.map(Into::into),
        target_capability: target.map(|_| "CST_FRAMEWORK".into()),
        secondary_intents: Vec::new(),
        secondary_targets: Vec::new(),
    }
}

/// ORC answers with `actions` and the classification `intent`.
fn classify(intent: IntentClassification, actions: Vec<Action>) -> Response {
    respond_with(
        docket_protocol::AgentResponse::success("", docket_protocol::Confidence::High, actions)
            .with_intent(intent),
    )
}

fn route_to_cst() -> Vec<Action> {
    vec![handoff("CST", "brief", json!({"intent": "business_case"}))]
}

fn question() -> Vec<Action> {
    vec![Action::Escalate {
        reason: "A business case, or a channel strategy?".into(),
        choices: vec!["business case".into(), "channel strategy".into()],
    }]
}

/// The contract a classifying call is told under [`INTENT_BUNDLE`].
fn contract() -> serde_json::Value {
    json!({"confidence_threshold": 0.7, "secondary_targets_required": true})
}

/// The decision recorded on ORC's answer `call`: `verdict` by `rule`, for `reason`, after
/// the chain's `steps` (each applied unless it says).
fn decided(
    run: &History,
    call: &str,
    (verdict, rule, reason): (Verdict, &str, &str),
    steps: &[(&str, StepOutcome, &str)],
) -> RunEvent {
    RunEvent::PolicyDecided {
        subject: call.into(),
        decision: PolicyDecision {
            kind: DecisionKind::IntentClassification,
            verdict,
            rule_id: rule.into(),
            reason: reason.into(),
            bundle_hash: run.bundle.hash(),
            chain: steps
                .iter()
                .map(|(rule, outcome, note)| RuleStep::new(*rule, *outcome, *note))
                .collect(),
        },
    }
}

const CLASSIFIED: (&str, StepOutcome, &str) = (
    "intent_classification.required",
    StepOutcome::Applied,
    "`business_case` at confidence 0.4",
);
const TARGETS: (&str, StepOutcome, &str) = (
    "intent_classification.targets",
    StepOutcome::Applied,
    "every agent named is declared, has the capability named and may be routed to",
);
const NO_SECONDARY: (&str, StepOutcome, &str) = (
    "intent_classification.secondary_targets",
    StepOutcome::NotApplicable,
    "0 secondary intent(s), 0 target(s)",
);

#[test]
pub(crate) fn the_classifying_call_is_told_its_contract_and_other_calls_are_not() {
    let mut run = started_at(crate::DECIDER_VERSION);
    let orc = run.pending();
    assert_eq!(orc.target_agent, "ORC");
    assert_eq!(orc.context["intent_classification"], contract());
    run.when(classify(intent(0.85, Some("CST")), route_to_cst()));
    let cst = run.pending();
    assert_eq!(cst.target_agent, "CST");
    assert!(
        !cst.context.contains_key("intent_classification"),
        "{cst:?}"
    );
    // ORC's call with CST's framework does not carry the run's input: it is not held to a
    // classification, and answers without one.
    run.when(respond(vec![handoff(
        "ORC",
        "framework",
        json!({"npv": 1}),
    )]));
    let later = run.pending();
    assert_eq!(later.target_agent, "ORC");
    assert!(!later.context.contains_key("intent_classification"));
    run.when(respond(vec![Action::Finish {
        output: json!({"answer": "done"}),
    }]))
    .then_kinds(&[
        "agent.responded",
        "handoff.allowed",
        "episode.finished",
        "episode.stopped",
        "run.completed",
    ]);
    run.replays();
}

#[test]
pub(crate) fn a_routing_at_or_above_the_threshold_is_allowed() {
    let mut run = started_at(crate::DECIDER_VERSION);
    run.when(classify(intent(0.7, Some("CST")), route_to_cst()))
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "handoff.allowed",
            "agent.call_scheduled",
        ]);
    let expected = decided(
        &run,
        "run-1/call-1",
        (
            Verdict::Allow,
            "intent_classification.routing",
            "ORC routes `business_case` (confidence 0.7, threshold 0.7) to CST",
        ),
        &[
            (
                "intent_classification.required",
                StepOutcome::Applied,
                "`business_case` at confidence 0.7",
            ),
            TARGETS,
            NO_SECONDARY,
            (
                "intent_classification.confidence_threshold",
                StepOutcome::NotApplicable,
                "confidence 0.7 is at or above the threshold 0.7",
            ),
            (
                "intent_classification.routing",
                StepOutcome::Applied,
                "ORC routes `business_case` (confidence 0.7, threshold 0.7) to CST",
            ),
        ],
    );
    run.then(|events| assert_eq!(events[1], expected));
    assert_eq!(run.pending().target_agent, "CST");
    run.replays();
}

#[test]
pub(crate) fn a_routing_below_the_threshold_is_refused_and_the_agent_retried() {
    let mut run = started_at(crate::DECIDER_VERSION);
    run.when(classify(intent(0.4, Some("CST")), route_to_cst()))
        // The refusal, the failure ladder's step, the retry: nothing crossed to CST.
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "policy.decided",
            "agent.call_scheduled",
        ]);
    let reason = "ORC routes to CST at confidence 0.4, below the threshold 0.7: below it, it must ask a clarifying question instead";
    let expected = decided(
        &run,
        "run-1/call-1",
        (
            Verdict::Deny,
            "intent_classification.confidence_threshold",
            reason,
        ),
        &[
            CLASSIFIED,
            TARGETS,
            NO_SECONDARY,
            (
                "intent_classification.confidence_threshold",
                StepOutcome::Applied,
                reason,
            ),
        ],
    );
    run.then(|events| {
        assert_eq!(events[1], expected);
        let RunEvent::PolicyDecided { decision, .. } = &events[2] else {
            panic!("the ladder's step");
        };
        assert_eq!(decision.kind, DecisionKind::Escalation);
        assert_eq!(decision.verdict, Verdict::Allow);
    });
    assert!(run.history().handoffs().iter().all(|h| h.to != "CST"));
    let retry = run.pending();
    assert_eq!((retry.target_agent.as_str(), retry.attempt), ("ORC", 2));
    assert_eq!(
        retry.context["previous_attempt"],
        json!({
            "request_id": "run-1/call-1",
            "error_code": INTENT_POLICY_VIOLATION,
            "error_class": "boundary_violation",
            "error_message": format!("{reason} (rule intent_classification.confidence_threshold)"),
        })
    );
    assert_eq!(retry.context["intent_classification"], contract());
    // Told why, the agent asks instead: allowed.
    run.when(classify(intent(0.4, None), question()))
        .then_kinds(&["agent.responded", "policy.decided", "human.escalated"]);
    run.replays();
}

#[test]
pub(crate) fn a_clarifying_question_below_the_threshold_is_allowed_and_the_answer_routed() {
    let mut run = started_at(crate::DECIDER_VERSION);
    run.when(classify(intent(0.4, None), question()))
        .then_kinds(&["agent.responded", "policy.decided", "human.escalated"]);
    let reason = "ORC's confidence 0.4 is below the threshold 0.7: it asks a clarifying question";
    let expected = decided(
        &run,
        "run-1/call-1",
        (
            Verdict::Allow,
            "intent_classification.confidence_threshold",
            reason,
        ),
        &[
            CLASSIFIED,
            TARGETS,
            NO_SECONDARY,
            (
                "intent_classification.confidence_threshold",
                StepOutcome::Applied,
                reason,
            ),
        ],
    );
    run.then(|events| assert_eq!(events[1], expected));
    run.when(approve_open().choice(1));
    // Called again with the answer, ORC is still answering the user's request.
    let again = run.pending();
    assert_eq!(again.target_agent, "ORC");
    assert_eq!(again.context["intent_classification"], contract());
    run.when(classify(intent(0.95, Some("CST")), route_to_cst()))
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "handoff.allowed",
            "agent.call_scheduled",
        ]);
    assert_eq!(run.pending().target_agent, "CST");
    run.replays();
}

#[test]
pub(crate) fn an_answer_without_a_classification_or_routing_elsewhere_is_refused() {
    let mut run = started_at(crate::DECIDER_VERSION);
    run.when(respond(route_to_cst())).then(|events| {
        let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
            panic!("the refusal");
        };
        assert_eq!(
            (decision.verdict, &*decision.rule_id),
            (Verdict::Deny, "intent_classification.required")
        );
    });
    // Classified for CST, routed to DOC: refused by the routing rule.
    run.when(classify(
        intent(0.9, Some("CST")),
        vec![handoff("DOC", "brief", json!({}))],
    ))
    .then(|events| {
        let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
            panic!("the refusal");
        };
        assert_eq!(
            (decision.verdict, &*decision.rule_id, &*decision.reason),
            (
                Verdict::Deny,
                "intent_classification.routing",
                "ORC classifies `business_case` for CST but routes to DOC instead"
            )
        );
    });
    // ...unless DOC is a secondary intent's target.
    let mut both = intent(0.9, Some("CST"));
    both.secondary_intents = vec!["document_generation".into()];
    both.secondary_targets = vec![IntentTarget {
        agent: "DOC".into(),
        capability: Some("DOC_GENERATE".into()),
    }];
    let mut actions = route_to_cst();
    actions.push(handoff("DOC", "brief", json!({})));
    // The ladder asked a person after the second failure; approving retries.
    run.when(approve_open());
    run.when(classify(both, actions)).then_kinds(&[
        "agent.responded",
        "policy.decided",
        "handoff.allowed",
        "handoff.allowed",
        "agent.call_scheduled",
        "agent.call_scheduled",
    ]);
    run.replays();
}

#[test]
pub(crate) fn runs_of_version_13_are_not_held_to_a_classification() {
    let mut run = started_at(13);
    assert!(!run.pending().context.contains_key("intent_classification"));
    run.when(respond(route_to_cst())).then_kinds(&[
        "agent.responded",
        "handoff.allowed",
        "agent.call_scheduled",
    ]);
    run.replays();
}
