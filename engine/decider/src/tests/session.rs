//! `decide/context.rs`, sessions (decider version 15): a run that is a later turn of a
//! session tells its agents the session in their handoff context (`session_id`, and
//! `session` with what the user told us, what we told the user and the decisions people
//! made in the earlier turns), each part crossing the gate as content once per agent.

use serde_json::json;

use super::*;
use crate::events::{Session, SessionTurn};

/// The `t` bundle, with `secret` blocked on every handoff.
fn blocking_bundle() -> String {
    let src = BUNDLE.replace(
        "default_handoff_mode = \"full\"\n",
        "default_handoff_mode = \"full\"\nblocked_context_fields = [\"secret\"]\n",
    );
    assert_ne!(src, BUNDLE);
    src
}

/// Turn 2 of the session `run-1`, continuing it after its first run completed with an
/// answer and a person's decision; the user's message is the new run's input.
fn second_turn(b: &PolicyBundle, source: &str) -> RunRequested {
    RunRequested {
        run_id: "run-1.2".into(),
        bundle_source: source.into(),
        input: json!({"x": 2, "message": "and for Austria?", "secret": "new"}),
        session: Some(Box::new(Session {
            id: "run-1".into(),
            turn: 2,
            previous_run: "run-1".into(),
            by: "ana".into(),
            turns: vec![SessionTurn {
                turn: 1,
                run_id: "run-1".into(),
                request: json!({"x": 1, "topic": "Germany", "secret": "s3cret"}),
                status: "completed".into(),
                output: Some(json!({"answer": "Germany: yes", "secret": "internal"})),
                decisions: vec![json!({
                    "ticket": "ticket-1", "asked": "which market?", "by": "ana",
                    "approved": true, "reason": "", "choice": 1,
                })],
            }],
        })),
        ..run_requested(b)
    }
}

/// The session's crossings of a batch: (from, to, output type, delivered).
fn session_crossings(events: &[RunEvent]) -> Vec<(String, String, String, Value)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::HandoffAllowed {
                from,
                to,
                output_type,
                input: docket_policies::InputKind::Context,
                delivered,
                decision,
                ..
            } if output_type.starts_with("session.") => {
                assert_eq!(decision.rule_id.as_ref(), "context.session");
                Some((
                    from.to_string(),
                    to.to_string(),
                    output_type.clone(),
                    Value::clone(delivered),
                ))
            }
            _ => None,
        })
        .collect()
}

/// Given nothing, when turn 2's `run.requested` is recorded, then the entry handoff
/// carries the message, and the session's parts cross to the entry agent, blocked fields
/// removed, before its call, which carries them in `context.handoff.session`.
#[test]
pub(crate) fn a_later_turn_tells_the_entry_agent_the_session_through_the_gate() {
    let source = blocking_bundle();
    let b = PolicyBundle::from_toml_str(&source, "t.toml").expect("bundle");
    let events = decide(
        &RunState::default(),
        &b,
        Command::Start(second_turn(&b, &source).into()),
    )
    .expect("turn 2 starts");
    assert_eq!(
        kinds(&events),
        [
            "run.requested",
            "handoff.allowed",
            "handoff.allowed",
            "handoff.allowed",
            "handoff.allowed",
            "agent.call_scheduled"
        ]
    );
    let RunEvent::HandoffAllowed {
        from, delivered, ..
    } = &events[1]
    else {
        panic!("{:?}", events[1]);
    };
    assert_eq!(from.as_str(), "external");
    assert_eq!(
        **delivered,
        json!({"x": 2, "message": "and for Austria?"}),
        "the message is the entry agent's input, its blocked field removed"
    );
    assert_eq!(
        session_crossings(&events),
        [
            (
                "external".into(),
                "a".into(),
                "session.told_us.turn-1".into(),
                json!({"x": 1, "topic": "Germany"})
            ),
            (
                "external".into(),
                "a".into(),
                "session.we_told.turn-1".into(),
                json!({"answer": "Germany: yes"})
            ),
            (
                "human".into(),
                "a".into(),
                "session.decisions".into(),
                json!({"decisions": [{"ticket": "ticket-1", "asked": "which market?", "by": "ana",
                                      "approved": true, "reason": "", "choice": 1, "turn": 1}]})
            ),
        ]
    );
    let RunEvent::AgentCallScheduled { request, .. } = &events[5] else {
        panic!("{:?}", events[5]);
    };
    let handoff = &request.context["handoff"];
    assert_eq!(handoff["session_id"], json!("run-1"), "the session's id");
    assert_eq!(
        handoff["session"],
        json!({
            "id": "run-1",
            "turn": 2,
            "told_us": [{"turn": 1, "request": {"x": 1, "topic": "Germany"}}],
            "we_told": [{"turn": 1, "output": {"answer": "Germany: yes"}}],
            "decisions": [{"ticket": "ticket-1", "asked": "which market?", "by": "ana",
                           "approved": true, "reason": "", "choice": 1, "turn": 1}],
        })
    );
    assert_eq!(
        handoff["original_request"],
        json!({"x": 2, "message": "and for Austria?"})
    );
    History::new(b).given(&events).replays();
}

/// Each agent is told the session once: its next call repeats what crossed, recording
/// nothing; the next agent gets its own crossings.
#[test]
pub(crate) fn the_session_crosses_once_per_agent() {
    let source = blocking_bundle();
    let mut run = started_under(&source, "t.toml", |r| {
        *r = second_turn(
            &PolicyBundle::from_toml_str(&source, "t.toml").expect("bundle"),
            &source,
        );
    });
    let told = run.pending().context["handoff"]["session"].clone();
    run.when(crash());
    let batch_start = run.log.len() - run.decided().len();
    assert!(
        session_crossings(&run.log[batch_start..]).is_empty(),
        "nothing crosses again for a's retry"
    );
    assert_eq!(run.pending().context["handoff"]["session"], told);

    run.when(respond(vec![handoff("b", "ab", json!({"k": 1}))]));
    let crossed: Vec<(String, String)> = session_crossings(&run.log)
        .into_iter()
        .map(|(_, to, t, _)| (to, t))
        .collect();
    assert_eq!(
        crossed,
        [
            ("a".into(), "session.told_us.turn-1".into()),
            ("a".into(), "session.we_told.turn-1".into()),
            ("a".into(), "session.decisions".into()),
            ("b".into(), "session.told_us.turn-1".into()),
            ("b".into(), "session.we_told.turn-1".into()),
            ("b".into(), "session.decisions".into()),
        ]
    );
    assert_eq!(run.pending().context["handoff"]["session"], told);
    run.replays();
}

/// An agent scoped to an allow-list gets only those fields of the earlier requests and
/// answers (`c`'s `keep`), as it does of the original request.
#[test]
pub(crate) fn the_session_is_scoped_like_the_original_request() {
    let source = BUNDLE.replace(
        "allowed_tools = [\"Read\", \"Bash(*)\"]\n",
        "allowed_tools = [\"Read\", \"Bash(*)\"]\n[agents.context_requirements]\nhandoff_mode = \"scoped\"\nallowed_context_fields = [\"x\", \"topic\", \"message\"]\n",
    );
    assert_ne!(source, BUNDLE);
    let b = PolicyBundle::from_toml_str(&source, "t.toml").expect("bundle");
    let events = decide(
        &RunState::default(),
        &b,
        Command::Start(second_turn(&b, &source).into()),
    )
    .expect("turn 2 starts");
    let RunEvent::AgentCallScheduled { request, .. } = events.last().expect("a call") else {
        panic!("{events:?}");
    };
    let session = &request.context["handoff"]["session"];
    assert_eq!(
        session["told_us"],
        json!([{"turn": 1, "request": {"x": 1, "topic": "Germany"}}])
    );
    assert_eq!(
        session["we_told"],
        json!([{"turn": 1, "output": {}}]),
        "no field of the answer is on a's allow-list"
    );
}

/// A session's first run, and a run recorded by decider version 14, carry no `session`
/// and name the run as the session.
#[test]
pub(crate) fn first_turns_and_version_14_runs_are_unchanged() {
    let first = started();
    let handoff = &first.pending().context["handoff"];
    assert_eq!(handoff["session_id"], json!("run-1"));
    assert!(handoff.get("session").is_none(), "{handoff}");

    let source = blocking_bundle();
    let b = PolicyBundle::from_toml_str(&source, "t.toml").expect("bundle");
    let mut old = second_turn(&b, &source);
    old.decider_version = 14;
    let events = decide(&RunState::default(), &b, Command::Start(old.into())).expect("starts");
    assert!(session_crossings(&events).is_empty());
    let RunEvent::AgentCallScheduled { request, .. } = events.last().expect("a call") else {
        panic!("{events:?}");
    };
    assert_eq!(request.context["handoff"]["session_id"], json!("run-1.2"));
    assert!(request.context["handoff"].get("session").is_none());
}
