//! `decide/handoff.rs`: the interaction matrix, scoping and context edges, contracts,
//! provenance rules.

use serde_json::{Value, json};

use docket_policies::{HandoffAudit, InputKind, PolicyBundle};

use super::*;
use crate::{DECIDER_VERSION, RunEvent, RunRequested, RunStatus};
use docket_protocol::{Action, Confidence, DecisionInput};

#[test]
pub(crate) fn a_pipeline_runs_to_completion() {
    let mut run = started();
    run.when(respond(vec![handoff("b", "ab", json!({"y": 2}))]));
    run.when(respond(vec![handoff(
        "c",
        "bc",
        json!({"keep": 1, "drop": 2}),
    )]));
    run.when(respond(vec![Action::Finish {
        output: json!({"done": true}),
    }]))
    .then_kinds(&[
        "agent.responded",
        "handoff.allowed",
        "episode.finished",
        "episode.stopped",
        "run.completed",
    ]);
    assert_eq!(run.state.status, RunStatus::Completed);
    assert_eq!(run.state.output, Some(json!({"done": true})));
    let history = run.history();
    let path: Vec<(&str, &str)> = history
        .handoffs()
        .iter()
        .filter(|h| h.input == InputKind::Decision)
        .map(|h| (h.from.as_str(), h.to.as_str()))
        .collect();
    assert_eq!(
        path,
        [("external", "a"), ("a", "b"), ("b", "c"), ("c", "external")]
    );
    run.replays();
}

#[test]
pub(crate) fn context_edges_arrive_as_context_inputs() {
    let mut run = started();
    run.when(respond(vec![handoff(
        "b",
        "ab",
        json!({"keep": 1, "secret": 2}),
    )]));
    run.when(respond(vec![handoff(
        "c",
        "bc",
        json!({"keep": 3, "drop": 4}),
    )]))
    .then(|events| {
        assert!(events.iter().any(|e| matches!(
            e,
            RunEvent::HandoffAllowed { from, input: InputKind::Context, .. } if from == "a"
        )));
    });
    let request = run.state.pending_requests()[0].clone();
    // c's scoped mode keeps only `keep`, for the decision input and the context input.
    assert_eq!(*request.decision_inputs[0].payload, json!({"keep": 3}));
    assert_eq!(request.context_inputs.len(), 1);
    assert_eq!(request.context_inputs[0].source_agent, "a");
    assert_eq!(*request.context_inputs[0].payload, json!({"keep": 1}));
}

#[test]
pub(crate) fn forbidden_handoffs_block_with_the_seed_reason() {
    let mut run = started();
    run.when(respond(vec![handoff("b", "ab", json!({}))]));
    run.when(respond(vec![handoff("c", "bc", json!({}))]));
    run.when(respond(vec![handoff("a", "ca", json!({}))]))
        .then_kinds(&[
            "agent.responded",
            "handoff.denied",
            "episode.stopped",
            "run.blocked",
        ])
        .then(|events| {
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
        });
    assert_eq!(run.state.status, RunStatus::Blocked);
}

#[test]
pub(crate) fn contract_mismatch_stops_the_flow() {
    let b = bundle();
    let mut request = run_requested(&b);
    request.input = json!({"no_x": true});
    let mut run = History::new(b);
    run.when(Command::Start(request.into()))
        .then_kinds(&[
            "run.requested",
            "handoff.denied",
            "episode.stopped",
            "run.blocked",
        ])
        .then(|events| {
            let RunEvent::HandoffDenied { error, .. } = &events[1] else {
                panic!("denied");
            };
            assert_eq!(error["errorType"], "validation_error");
        });
    assert_eq!(run.state.status, RunStatus::Blocked);
}

// ---------------------------------------------------------------------------------------
// Provenance rules: b's recommendations to c must cite gaps a delivered.

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

/// Given a run of the provenance bundle entered at `entry`, with `a` delivering `gaps`
/// first when the entry is `a`.
fn provenance_run(entry: &str) -> History {
    let b = PolicyBundle::from_toml_str(PROVENANCE_BUNDLE, "p.toml").expect("valid");
    let mut wf = workflow();
    wf.entry = entry.into();
    let given = start_events(
        &b,
        RunRequested {
            run_id: "run-1".into(),
            workflow: wf,
            bundle_source: PROVENANCE_BUNDLE.into(),
            bundle_source_name: "p.toml".into(),
            bundle_hash: b.hash().to_hex(),
            input: json!({}),
            at_ms: 1_000,
            decider_version: DECIDER_VERSION,
            forked_from: None,
            scheduled: None,
            session: None,
        },
    );
    let mut run = History::new(b).given(&given).clock(2_000, 0);
    if entry == "a" {
        let gaps = json!({"gaps": [{"id": "gap-1"}, {"id": "gap-2"}]});
        run.when(respond(vec![handoff("b", "gaps", gaps)]));
    }
    run
}

fn recs(cited: &[&str]) -> Action {
    let items: Vec<Value> = cited.iter().map(|g| json!({"gap_id": g})).collect();
    handoff("c", "recs", json!({"recommendations": items}))
}

#[test]
pub(crate) fn provenance_allows_citations_of_delivered_ids() {
    let mut run = provenance_run("a");
    run.when(respond(vec![recs(&["gap-2", "gap-1"])]))
        .then_kinds(&["agent.responded", "handoff.allowed", "agent.call_scheduled"])
        .then(|events| {
            let RunEvent::HandoffAllowed { provenance, .. } = &events[1] else {
                panic!("allowed");
            };
            assert_eq!(provenance.len(), 1);
            assert_eq!(&*provenance[0].rule_id, "guardrail-2-provenance");
            assert!(provenance[0].is_allowed());
        });
    run.replays();
}

#[test]
pub(crate) fn provenance_denies_an_unproduced_id_naming_the_item() {
    let mut run = provenance_run("a");
    run.when(respond(vec![recs(&["gap-1", "geo_score"])]))
        .then_kinds(&[
            "agent.responded",
            "handoff.denied",
            "episode.stopped",
            "run.blocked",
        ])
        .then(|events| {
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
        });
    assert_eq!(run.state.status, RunStatus::Blocked);
    assert!(run.state.pending_requests().is_empty(), "c is never called");
    run.replays();
}

#[test]
pub(crate) fn provenance_denies_when_the_producer_never_delivered() {
    let mut run = provenance_run("b");
    run.when(respond(vec![recs(&["gap-1"])]))
        .then_kinds(&[
            "agent.responded",
            "handoff.denied",
            "episode.stopped",
            "run.blocked",
        ])
        .then(|events| {
            let RunEvent::HandoffDenied { decision, .. } = &events[1] else {
                panic!("denied");
            };
            assert!(
                decision.reason.contains("a never delivered gaps"),
                "{}",
                decision.reason
            );
        });
    assert_eq!(run.state.status, RunStatus::Blocked);
}

/// `b` hands `c` a payload with none of the fields `c`'s scoping allows (`keep`).
fn hand_c_nothing_it_may_see() -> HandoffAudit {
    let mut run = started_under(BUNDLE, "t.toml", |_| {});
    run.when(respond(vec![handoff("b", "ab", json!({}))]));
    run.when(respond(vec![handoff("c", "bc", json!({"drop": 1}))]));
    let audit = run
        .decided()
        .iter()
        .find_map(|e| match e {
            RunEvent::HandoffAllowed { to, audit, .. } if to == "c" => Some(audit.clone()),
            _ => None,
        })
        .expect("b → c allowed");
    run.replays();
    audit
}

#[test]
pub(crate) fn a_handoff_that_removes_every_field_is_flagged() {
    let audit = hand_c_nothing_it_may_see();
    assert!(audit.every_field_removed, "{audit:?}");
    assert_eq!(audit.context_after_scoping.fields_excluded, ["drop"]);
}

/// A seed-000-shaped flow: `g` validates at entry and again at exit.
const SEQUENTIAL_BUNDLE: &str = r#"
bundle = { id = "seq" }
[[agents]]
id = "external"
[[agents]]
id = "g"
[[agents]]
id = "o"
[[agents]]
id = "s"
[interactions]
flow_order = ["external", "g", "o", "s", "g", "external"]
sequential_flow = true
allowed = [
  { from = "external", to = "g" },
  { from = "g", to = "o" },
  { from = "o", to = "s" },
  { from = "s", to = "g" },
  { from = "g", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

fn sequential_run() -> History {
    started_under(SEQUENTIAL_BUNDLE, "seq.toml", |run| {
        run.workflow.entry = "g".into();
        run.workflow.agents = ["g", "o", "s"]
            .into_iter()
            .map(|a| (a.into(), in_process()))
            .collect();
    })
}

fn denial_reason(events: &[RunEvent]) -> (String, String) {
    events
        .iter()
        .find_map(|e| match e {
            RunEvent::HandoffDenied { decision, .. } => {
                Some((decision.rule_id.to_string(), decision.reason.to_string()))
            }
            _ => None,
        })
        .expect("a handoff.denied")
}

#[test]
pub(crate) fn a_sequential_flow_allows_only_the_next_step_from_where_the_run_is() {
    // At entry, g may not go straight to external (the edge exists: it is the exit step).
    let mut run = sequential_run();
    assert_eq!(run.state.flow_position(), 1);
    run.when(respond(vec![handoff("external", "out", json!({"x": 1}))]))
        .then_kinds(&[
            "agent.responded",
            "handoff.denied",
            "episode.stopped",
            "run.blocked",
        ]);
    let (rule, reason) = denial_reason(run.decided());
    assert_eq!(rule, "flow_order.position");
    assert!(
        reason.contains("position 2 of 6") && reason.contains("only next agent is o"),
        "{reason}"
    );
    run.replays();

    // Through the flow to g's exit position, where g may not go back to o.
    let mut run = sequential_run();
    run.when(respond(vec![handoff("o", "scope", json!({"x": 1}))]));
    run.when(respond(vec![handoff("s", "data", json!({"x": 2}))]));
    run.when(respond(vec![handoff("g", "recs", json!({"x": 3}))]));
    assert_eq!(run.state.flow_position(), 4);
    run.when(respond(vec![handoff("o", "scope", json!({"x": 4}))]))
        .then_kinds(&[
            "agent.responded",
            "handoff.denied",
            "episode.stopped",
            "run.blocked",
        ]);
    let (rule, reason) = denial_reason(run.decided());
    assert_eq!(rule, "flow_order.position");
    assert!(reason.contains("only next agent is external"), "{reason}");

    // The same history with g's exit step completes the run.
    let mut run = sequential_run();
    for (to, t) in [("o", "scope"), ("s", "data"), ("g", "recs")] {
        run.when(respond(vec![handoff(to, t, json!({}))]));
    }
    run.when(respond(vec![handoff(
        "external",
        "out",
        json!({"done": true}),
    )]))
    .then_kinds(&[
        "agent.responded",
        "handoff.allowed",
        "episode.finished",
        "episode.stopped",
        "run.completed",
    ]);
    assert_eq!(run.state.flow_position(), 5);
    run.replays();
}

#[test]
pub(crate) fn one_output_path_per_position_in_a_sequential_flow() {
    // Two handoffs in one answer: the first is the next step, the second is not.
    let mut run = sequential_run();
    run.when(respond(vec![
        handoff("o", "scope", json!({})),
        handoff("o", "scope", json!({})),
    ]))
    .then(|events| {
        assert_eq!(
            kinds(events)
                .iter()
                .filter(|k| **k == "handoff.denied")
                .count(),
            1,
            "{:?}",
            kinds(events)
        );
    });
    let (rule, _) = denial_reason(run.decided());
    assert_eq!(rule, "flow_order.position");
}

const PRIOR_BUNDLE: &str = r#"
bundle = { id = "prior" }
[[agents]]
id = "external"
[[agents]]
id = "a"
[[agents]]
id = "b"
[[agents]]
id = "c"
[agents.context_requirements]
requires_prior_outputs = ["a"]
context_scope = "minimal"
[interactions]
allowed = [
  { from = "external", to = "a" },
  { from = "a", to = "b" },
  { from = "b", to = "c" },
  { from = "c", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
minimal_context_fields = ["trigger"]
"#;

fn prior_run() -> History {
    let mut run = started_under(PRIOR_BUNDLE, "prior.toml", |_| {});
    run.when(respond(vec![handoff(
        "b",
        "ab",
        json!({"trigger": 1, "x": 2}),
    )]));
    run.when(respond(vec![handoff("c", "bc", json!({"y": 3}))]));
    run
}

#[test]
pub(crate) fn a_receiver_gets_the_prior_outputs_it_requires_scoped_in_its_context_scope() {
    let run = prior_run();
    let request = run.pending();
    assert_eq!(request.target_agent, "c");
    let prior: Vec<_> = request
        .context_inputs
        .iter()
        .filter(|c| c.output_type.starts_with("prior:"))
        .collect();
    assert_eq!(prior.len(), 1, "{:?}", request.context_inputs);
    assert_eq!(prior[0].source_agent, "a");
    assert_eq!(prior[0].output_type, "prior:ab");
    assert_eq!(*prior[0].payload, json!({"trigger": 1}));
    let recorded = run
        .decided()
        .iter()
        .find_map(|e| match e {
            RunEvent::HandoffAllowed {
                output_type, audit, ..
            } if output_type == "prior:ab" => Some(audit.clone()),
            _ => None,
        })
        .expect("the prior output is recorded");
    assert_eq!(
        &*recorded.governance_rule_id,
        "agents.c.context_requirements.context_scope"
    );
    assert_eq!(recorded.context_after_scoping.fields_excluded, ["x"]);
    run.replays();
}

/// The audit of the prior output `a` → `c` recorded in `run`.
fn prior_audit(run: &History) -> HandoffAudit {
    run.decided()
        .iter()
        .find_map(|e| match e {
            RunEvent::HandoffAllowed {
                output_type, audit, ..
            } if output_type == "prior:ab" => Some(audit.clone()),
            _ => None,
        })
        .expect("the prior output is recorded")
}

#[test]
pub(crate) fn a_prior_output_is_counted_as_it_crosses() {
    use docket_policies::{ContextAfter, ContextBefore, HandoffMode, count_value_tokens};
    let run = prior_run();
    let expected = |prior_outputs_count: usize| HandoffAudit {
        from_agent_id: "a".into(),
        to_agent_id: "c".into(),
        handoff_mode: HandoffMode::Minimal,
        context_before_scoping: ContextBefore {
            prior_outputs_count,
            total_tokens: count_value_tokens(&json!({"trigger": 1, "x": 2})),
        },
        context_after_scoping: ContextAfter {
            prior_outputs_count,
            total_tokens: count_value_tokens(&json!({"trigger": 1})),
            fields_included: vec!["trigger".into()],
            fields_excluded: vec!["x".into()],
        },
        conversation_translation_applied: false,
        governance_rule_id: "agents.c.context_requirements.context_scope".into(),
        audit_enabled: true,
        every_field_removed: false,
        summary: None,
    };
    assert_eq!(prior_audit(&run), expected(1));
    run.replays();

    // A run recorded by decider version 12 keeps its audit: no prior output counted.
    let mut old = started_under(PRIOR_BUNDLE, "prior.toml", |r| r.decider_version = 12);
    old.when(respond(vec![handoff(
        "b",
        "ab",
        json!({"trigger": 1, "x": 2}),
    )]));
    old.when(respond(vec![handoff("c", "bc", json!({"y": 3}))]));
    assert_eq!(prior_audit(&old), expected(0));
    old.replays();
}

/// `a`'s answer handing `{"n": 1}` to `b`: PARTIAL, of medium confidence, with a warning.
fn partial_to_b() -> Response {
    respond(vec![handoff("b", "ab", json!({"n": 1}))])
        .status(docket_protocol::ResponseStatus::Partial)
        .confidence(Confidence::Medium)
        .warning("benchmarks are from 2023")
}

/// What the handoff to `b` recorded of the sender's answer, and `b`'s decision input.
fn told_to_b(run: &History) -> ((Option<Confidence>, Vec<String>), DecisionInput) {
    let recorded = run
        .decided()
        .iter()
        .find_map(|e| match e {
            RunEvent::HandoffAllowed {
                to,
                confidence_level,
                warnings,
                ..
            } if to == "b" => Some((*confidence_level, warnings.clone())),
            _ => None,
        })
        .expect("the handoff to b is recorded");
    let request = run.pending();
    assert_eq!(request.target_agent, "b");
    (recorded, request.decision_inputs[0].clone())
}

#[test]
pub(crate) fn a_partial_answers_warnings_and_confidence_reach_its_receiver() {
    let mut run = started();
    run.when(partial_to_b()).then_kinds(&[
        "agent.responded",
        "handoff.allowed",
        "agent.call_scheduled",
    ]);
    let warned = vec!["benchmarks are from 2023".to_owned()];
    assert_eq!(
        told_to_b(&run),
        (
            (Some(Confidence::Medium), warned.clone()),
            DecisionInput {
                confidence_level: Some(Confidence::Medium),
                warnings: warned,
                ..DecisionInput::new("a", "ab", std::sync::Arc::new(json!({"n": 1})))
            }
        )
    );
    run.replays();

    // A run recorded by decider version 13 delivers the payload alone.
    let mut old = started_under(BUNDLE, "t.toml", |r| r.decider_version = 13);
    old.when(partial_to_b());
    assert_eq!(
        told_to_b(&old),
        (
            (None, Vec::new()),
            DecisionInput::new("a", "ab", std::sync::Arc::new(json!({"n": 1})))
        )
    );
    old.replays();
}
