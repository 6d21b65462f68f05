//! `decide/context.rs`: the handoff context every request carries (decider version 7):
//! the session, the workflow position, the prior agents, the human decisions and the
//! original request, its content parts crossing the gate once per agent and again when
//! they change.

use serde_json::json;

use super::*;
use docket_protocol::Action;

/// The context crossings in the last input's whole batch (the harness leaves them out of
/// `decided`).
fn crossings(run: &History) -> Vec<(String, String, String)> {
    let batch_start = run.log.len() - batch_len(run);
    run.log[batch_start..]
        .iter()
        .filter(|e| is_context_crossing(e))
        .map(|e| match e {
            RunEvent::HandoffAllowed {
                from,
                to,
                output_type,
                ..
            } => (from.to_string(), to.to_string(), output_type.clone()),
            _ => unreachable!(),
        })
        .collect()
}

/// How many events the last input recorded, crossings included.
fn batch_len(run: &History) -> usize {
    // The batch starts with the input's own event: the last input event in the log.
    let last_input = run
        .log
        .iter()
        .rposition(|e| Command::from_event(e).is_some())
        .expect("an input");
    run.log.len() - last_input
}

#[test]
pub(crate) fn every_request_carries_the_handoff_context() {
    let mut run = started();
    let entry = run.pending();
    let context = &entry.context["handoff"];
    assert_eq!(context["session_id"], json!("run-1"));
    assert_eq!(context["workflow"], json!("t"));
    assert_eq!(context["original_request"], json!({"x": 1}));
    assert_eq!(context["prior_agents"], json!([]));
    assert_eq!(context["position"], json!({"handoffs": 1}));
    assert!(context.get("decisions").is_none(), "no decision yet");

    run.when(respond(vec![handoff("b", "ab", json!({"k": 1}))]));
    assert_eq!(
        crossings(&run),
        [("external".into(), "b".into(), "original_request".into())],
        "the original request crosses to b once, scoped and recorded"
    );
    let b = run.pending();
    assert_eq!(b.context["handoff"]["prior_agents"], json!(["a"]));
    assert_eq!(b.context["handoff"]["position"], json!({"handoffs": 2}));
    assert_eq!(b.context["handoff"]["original_request"], json!({"x": 1}));

    // b fails once: its retry carries the same context, and nothing crosses again.
    run.when(crash());
    assert!(crossings(&run).is_empty(), "{:?}", crossings(&run));
    assert_eq!(
        run.pending().context["handoff"]["original_request"],
        json!({"x": 1})
    );
    run.replays();
}

/// A receiver scoped to an allow-list gets only those fields of the original request,
/// and blocked fields never; the human decisions cross from `human` when they change.
#[test]
pub(crate) fn the_original_request_and_decisions_are_scoped_for_the_receiver() {
    let mut run = started_under(BUNDLE, "t.toml", |r| {
        r.input = json!({"x": 1, "keep": "yes", "secret": "s3cret"});
    });
    run.when(respond(vec![handoff("b", "ab", json!({"k": 1}))]));
    run.when(respond(vec![Action::Escalate {
        reason: "which?".into(),
        choices: vec!["left".into(), "right".into()],
    }]));
    run.when(approve("ticket-1").choice(2).answer("right, for reach"));
    assert!(
        crossings(&run).contains(&("human".into(), "b".into(), "decisions".into())),
        "{:?}",
        crossings(&run)
    );
    let b = run.pending();
    let decisions = &b.context["handoff"]["decisions"];
    assert_eq!(decisions[0]["by"], json!("ana"));
    assert_eq!(decisions[0]["choice"], json!(2));
    assert_eq!(decisions[0]["answer"], json!("right, for reach"));

    run.when(respond(vec![handoff("c", "bc", json!({"keep": 1}))]).to(b.request_id.as_str()));
    let c = run.pending();
    // c is scoped to `keep` (context_requirements): the original request's other fields
    // stay out.
    assert_eq!(
        c.context["handoff"]["original_request"],
        json!({"keep": "yes"})
    );
    assert_eq!(c.context["handoff"]["prior_agents"], json!(["a", "b"]));
    run.replays();
}

/// The test bundle with `extra` added to its `[multi_agent_handoffs]` section.
fn with_handoffs(extra: &str) -> String {
    let src = BUNDLE.replace(
        "default_handoff_mode = \"full\"\n",
        &format!("default_handoff_mode = \"full\"\n{extra}\n"),
    );
    assert_ne!(src, BUNDLE);
    src
}

/// The `policy.decided` recording the context parts of `request_id`'s call, if any.
fn parts_record(run: &History, request_id: &str) -> Option<docket_policies::PolicyDecision> {
    run.log.iter().find_map(|e| match e {
        RunEvent::PolicyDecided { subject, decision }
            if subject == request_id
                && decision.kind == docket_policies::DecisionKind::ContextScope =>
        {
            Some(decision.clone())
        }
        _ => None,
    })
}

/// Version 8: agent identity hidden bundle-wide, and for `a → b` no original input and
/// every prior output; each departure recorded before the call, naming its rule.
#[test]
pub(crate) fn context_parts_hide_or_widen_what_reaches_the_receiver() {
    let src = with_handoffs(
        r#"context_parts = { agent_identity = "hide" }
[[multi_agent_handoffs.agent_handoff_rules]]
id = "a-to-b"
from_agent_id = "a"
to_agent_id = "b"
context_parts = { original_input = "none", prior_outputs = "all" }"#,
    );
    let mut run = started_under(&src, "t.toml", |_| {});
    // The entry call (external → a) departs only in agent identity.
    let a = run.pending();
    assert!(a.context["handoff"].get("prior_agents").is_none());
    assert_eq!(a.context["handoff"]["original_request"], json!({"x": 1}));
    let record = parts_record(&run, a.request_id.as_str()).expect("a's parts recorded");
    assert_eq!(
        record.rule_id.as_ref(),
        "multi_agent_handoffs.context_parts"
    );
    assert!(
        record.reason.contains("agent_identity = hide"),
        "{}",
        record.reason
    );

    run.when(respond(vec![handoff("b", "ab", json!({"k": 1}))]));
    let b = run.pending();
    let context = &b.context["handoff"];
    assert!(context.get("original_request").is_none(), "{context}");
    assert!(context.get("prior_agents").is_none(), "{context}");
    assert!(
        crossings(&run).is_empty(),
        "nothing of the original request crossed: {:?}",
        crossings(&run)
    );
    // `all`: a's latest output reaches b as a prior output, recorded.
    assert!(
        b.context_inputs
            .iter()
            .any(|c| c.output_type == "prior:ab" && c.source_agent == "a"),
        "{:?}",
        b.context_inputs
    );
    let record = parts_record(&run, b.request_id.as_str()).expect("b's parts recorded");
    let steps: Vec<(String, String)> = record
        .chain
        .iter()
        .map(|s| (s.rule_id.to_string(), s.note.to_string()))
        .collect();
    assert_eq!(
        steps,
        [
            ("a-to-b".to_owned(), "original_input = none".to_owned()),
            ("a-to-b".to_owned(), "prior_outputs = all".to_owned()),
            (
                "multi_agent_handoffs.context_parts".to_owned(),
                "agent_identity = hide".to_owned()
            ),
        ]
    );
    run.replays();
}

/// Version 8: `original_input = "full"` passes every field of the run's input to a
/// receiver its own rules scope to an allow-list, blocked fields still removed.
#[test]
pub(crate) fn a_full_original_input_still_drops_blocked_fields() {
    let src = with_handoffs(
        r#"blocked_context_fields = ["secret"]
[[multi_agent_handoffs.agent_handoff_rules]]
id = "b-to-c"
from_agent_id = "b"
to_agent_id = "c"
context_parts = { original_input = "full" }"#,
    );
    let mut run = started_under(&src, "t.toml", |r| {
        r.input = json!({"x": 1, "keep": "yes", "secret": "s3cret"});
    });
    run.when(respond(vec![handoff("b", "ab", json!({"k": 1}))]));
    run.when(respond(vec![handoff("c", "bc", json!({"keep": 1}))]));
    let c = run.pending();
    assert_eq!(
        c.context["handoff"]["original_request"],
        json!({"x": 1, "keep": "yes"})
    );
    assert!(crossings(&run).contains(&("external".into(), "c".into(), "original_request".into())));
    run.replays();
}
