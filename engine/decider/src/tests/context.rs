//! `decide/context.rs`: the handoff context every request carries (decider version 7):
//! the session, the workflow position, the prior agents, the human decisions and the
//! original request, its content parts crossing the gate once per agent and again when
//! they change.

use serde_json::json;

use super::*;
use crate::protocol::Action;

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

/// Runs recorded by decider version 6 carry no handoff context and replay so.
#[test]
pub(crate) fn version_6_runs_carry_no_handoff_context() {
    let mut run = started_under(BUNDLE, "t.toml", |r| r.decider_version = 6);
    assert!(run.pending().context.get("handoff").is_none());
    run.when(respond(vec![handoff("b", "ab", json!({"k": 1}))]));
    assert!(crossings(&run).is_empty());
    assert!(run.pending().context.get("handoff").is_none());
    run.replays();
}
