//! `decide/capability.rs`: capability requests: their locks (Guardrail 3), the
//! interaction matrix and scoping of their inputs (decider version 2), and the answer
//! returning to the asker.

use serde_json::json;

use super::*;
use crate::RunEvent;
use docket_protocol::Action;

/// `run-1` started under the test bundle where `c` also offers `summary` (with no
/// decision edge from `a` to `c`) and `secret` is blocked on every handoff, recorded by
/// decider `version`.
fn governed_run() -> History {
    let src = BUNDLE
        .replace(
            "[agents.context_requirements]",
            "[[agents.capabilities]]\ncode = \"summary\"\n[agents.context_requirements]",
        )
        .replace(
            "default_handoff_mode = \"full\"",
            "default_handoff_mode = \"full\"\nblocked_context_fields = [\"secret\"]",
        );
    started_under(&src, "t.toml", |_| {})
}

fn ask(target: &str, code: &str, inputs: serde_json::Value) -> Action {
    let serde_json::Value::Object(inputs) = inputs else {
        panic!("inputs are an object");
    };
    Action::RequestCapability {
        target_agent: target.into(),
        capability_code: code.into(),
        inputs,
        priority: None,
    }
}

#[test]
pub(crate) fn guardrail_3_lock_blocks_capability_requests() {
    let mut run = started();
    run.when(respond(vec![handoff("b", "ab", json!({}))]));
    run.when(respond(vec![handoff("c", "bc", json!({}))]));
    run.when(respond(vec![Action::RequestCapability {
        target_agent: "b".into(),
        capability_code: "questions".into(),
        inputs: serde_json::Map::new(),
        priority: None,
    }]))
    .then_kinds(&[
        "agent.responded",
        "policy.decided",
        "episode.stopped",
        "run.blocked",
    ])
    .then(|events| {
        let RunEvent::RunBlocked { rule_id, .. } = &events[3] else {
            panic!("blocked");
        };
        assert_eq!(rule_id, "lock");
    });
}

#[test]
pub(crate) fn allowed_capability_answer_returns_to_the_asker() {
    let mut run = started();
    let mut inputs = serde_json::Map::new();
    inputs.insert("topics".into(), json!(["t"]));
    run.when(respond(vec![Action::RequestCapability {
        target_agent: "b".into(),
        capability_code: "questions".into(),
        inputs,
        priority: None,
    }]));
    assert_eq!(run.state.pending_requests()[0].target_agent, "b");
    run.when(
        respond(vec![Action::Finish {
            output: json!({"q": 1}),
        }])
        .status(docket_protocol::ResponseStatus::Partial)
        .confidence(docket_protocol::Confidence::Low)
        .warning("one topic only"),
    );
    let back = run.state.pending_requests()[0].clone();
    assert_eq!(back.target_agent, "a");
    // The answer is labelled with what b said of it (decider version 14).
    assert_eq!(
        back.decision_inputs.last(),
        Some(&docket_protocol::DecisionInput {
            confidence_level: Some(docket_protocol::Confidence::Low),
            warnings: vec!["one topic only".into()],
            ..docket_protocol::DecisionInput::new(
                "b",
                "questions",
                std::sync::Arc::new(json!({"q": 1}))
            )
        })
    );
    run.replays();
}

#[test]
pub(crate) fn capability_request_without_an_edge_is_a_denied_handoff() {
    let mut run = governed_run();
    run.when(respond(vec![ask("c", "summary", json!({"text": "t"}))]))
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "handoff.denied",
            "episode.stopped",
            "run.blocked",
        ])
        .then(|events| {
            let RunEvent::HandoffDenied {
                from,
                to,
                output_type,
                ..
            } = &events[2]
            else {
                panic!("handoff.denied");
            };
            assert_eq!((from.as_str(), to.as_str()), ("a", "c"));
            assert_eq!(output_type, "summary");
        });
    assert!(run.state.pending_requests().is_empty());
    run.replays();
}

#[test]
pub(crate) fn capability_inputs_are_scoped_and_audited() {
    let mut run = governed_run();
    run.when(respond(vec![ask(
        "b",
        "questions",
        json!({"topics": ["t"], "secret": "s3cret"}),
    )]))
    .then_kinds(&[
        "agent.responded",
        "policy.decided",
        "handoff.allowed",
        "agent.call_scheduled",
    ])
    .then(|events| {
        let RunEvent::HandoffAllowed {
            audit,
            delivered,
            output_type,
            ..
        } = &events[2]
        else {
            panic!("handoff.allowed");
        };
        assert_eq!(output_type, "questions");
        assert_eq!(**delivered, json!({"topics": ["t"]}));
        assert_eq!(audit.context_after_scoping.fields_excluded, ["secret"]);
    });
    let asked = run.pending();
    assert_eq!(asked.target_agent, "b");
    assert_eq!(
        asked.decision_inputs.last().map(|i| &*i.payload),
        Some(&json!({"topics": ["t"]}))
    );
    run.replays();
}

/// From decider version 5, a capability call that fails past retrying is answered to
/// the agent that asked, as `capability_failed` through the gate, so it can fall back;
/// the run goes on.
#[test]
pub(crate) fn a_failed_capability_returns_to_the_asker() {
    let mut run = started();
    run.when(respond(vec![ask(
        "b",
        "questions",
        json!({"topics": ["t"]}),
    )]));
    run.when(crash());
    assert_eq!(run.pending().target_agent, "b", "the ladder retries first");
    run.when(crash()).then_kinds(&[
        "agent.call_failed",
        "policy.decided",
        "handoff.allowed",
        "agent.call_scheduled",
    ]);
    let back = run.pending();
    assert_eq!(back.target_agent, "a");
    let failure = back.decision_inputs.last().expect("the failure");
    assert_eq!(
        (failure.source_agent.as_str(), failure.output_type.as_str()),
        ("b", "capability_failed")
    );
    assert_eq!(failure.payload["error_code"], "AGENT_CRASHED");
    assert_eq!(failure.payload["error_class"], "agent_error");
    assert_eq!(failure.payload["attempts"], 2);
    assert_eq!(run.state.status, crate::RunStatus::Running);
    // The asker falls back and the run goes on.
    run.when(respond(vec![handoff("b", "ab", json!({"fallback": true}))]));
    assert_eq!(run.pending().target_agent, "b");
    run.replays();
}

/// Bytes of the last `agent.call_scheduled` in `events`, with the call it repeats.
fn last_call(events: &[RunEvent]) -> (usize, Option<crate::CallId>, usize) {
    let call = events
        .iter()
        .rev()
        .find(|e| matches!(e, RunEvent::AgentCallScheduled { .. }))
        .expect("a call");
    let RunEvent::AgentCallScheduled {
        request, again_of, ..
    } = call
    else {
        unreachable!()
    };
    let bytes = serde_json::to_vec(call).expect("encodes").len();
    (bytes, again_of.clone(), request.decision_inputs.len())
}

/// `a` asks `b` `rounds` times; returns, per round, the asker's call made again: its
/// recorded bytes, the call it repeats and its recorded decision inputs.
fn asking_rounds(rounds: usize) -> (History, Vec<(usize, Option<crate::CallId>, usize)>) {
    let mut run = governed_run();
    let mut calls = Vec::new();
    for round in 0..rounds {
        run.when(respond(vec![ask(
            "b",
            "questions",
            json!({"topics": [round]}),
        )]));
        run.when(respond(vec![Action::Finish {
            output: json!({"answer": "a long enough answer to weigh", "round": round}),
        }]));
        calls.push(last_call(run.decided()));
    }
    (run, calls)
}

/// From decider version 9 a call made again records the call it repeats and only the
/// input it adds, so its bytes do not grow with the rounds before it; the state (what the
/// runtime sends) still holds the whole request, and the log replays.
#[test]
pub(crate) fn a_call_made_again_records_only_what_it_adds() {
    let (run, calls) = asking_rounds(6);
    for (bytes, again_of, inputs) in &calls {
        assert!(again_of.is_some(), "{calls:?}");
        assert_eq!(*inputs, 1, "only the answer is recorded");
        // The same bytes every round, but for the ids' digits (call-9, then call-11).
        assert!(
            bytes.abs_diff(calls[0].0) <= 4,
            "every round records the same bytes: {calls:?}"
        );
    }
    let whole = run.pending();
    assert_eq!(whole.target_agent, "a");
    // The run's input, then each round's answer.
    assert_eq!(whole.decision_inputs.len(), 1 + 6);
    assert_eq!(whole.decision_inputs[6].payload["round"], 5);
    assert_eq!(whole.decision_inputs[1].payload["round"], 0);
    run.replays();
}

/// The stop reason and the asker's error of a refused capability request, recorded by
/// decider `version`: a refusal by the responsibility lock (`c` may not ask for
/// `questions`) and one by the capability's input schema (`topics` missing).
fn refusals() -> [(String, String); 2] {
    let blocked = |run: &mut History| {
        let RunEvent::RunBlocked { reason, error, .. } =
            run.decided().last().expect("an event").clone()
        else {
            panic!("run.blocked last: {:?}", kinds(run.decided()));
        };
        (
            reason,
            error["message"].as_str().unwrap_or_default().to_owned(),
        )
    };
    let mut locked = started_under(BUNDLE, "t.toml", |_| {});
    locked.when(respond(vec![handoff("b", "ab", json!({}))]));
    locked.when(respond(vec![handoff("c", "bc", json!({}))]));
    locked.when(respond(vec![ask("b", "questions", json!({}))]));
    let mut invalid = started_under(BUNDLE, "t.toml", |_| {});
    invalid.when(respond(vec![ask("b", "questions", json!({}))]));
    [blocked(&mut locked), blocked(&mut invalid)]
}

#[test]
pub(crate) fn a_refused_capability_request_states_its_reason_once() {
    let [(lock, lock_error), (schema, schema_error)] = refusals();
    assert_eq!(
        lock,
        "c may not obtain questions from b: Guardrail 3: question generation lock"
    );
    assert_eq!(
        lock_error,
        "c may not obtain `questions`: Guardrail 3: question generation lock"
    );
    assert_eq!(
        schema.matches("\"topics\" is a required property").count(),
        1,
        "{schema}"
    );
    assert!(
        schema.starts_with("a may not obtain questions from b: INPUT_VALIDATION_FAILED: "),
        "{schema}"
    );
    assert_eq!(
        schema_error
            .matches("\"topics\" is a required property")
            .count(),
        1,
        "{schema_error}"
    );
}
