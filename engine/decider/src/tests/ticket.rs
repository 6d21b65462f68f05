//! `decide/ticket.rs`: human decisions on tickets. (Approvals that resume a retry or an
//! agent's held actions are walked through in `failure.rs` and `response.rs`; conflict
//! choices in `fan_out.rs`.)

use serde_json::json;

use super::*;
use crate::RunStatus;
use docket_protocol::Action;

#[test]
pub(crate) fn human_denial_blocks() {
    let mut run = started();
    run.when(crash());
    run.when(crash());
    run.when(deny("ticket-1").because("agent is broken").at(3_000))
        .then_kinds(&["human.decided", "episode.stopped", "run.blocked"]);
    assert_eq!(run.state.status, RunStatus::Blocked);
}

#[test]
pub(crate) fn approving_one_of_two_open_tickets_is_not_lost() {
    let mut run = fanned_out("human");
    for agent in ["left", "right"] {
        run.when(
            respond(vec![
                Action::Escalate {
                    reason: "check".into(),
                    choices: Vec::new(),
                },
                handoff("sink", "verdict", json!({"v": agent})),
            ])
            .by(agent)
            .at(1),
        );
    }
    assert_eq!(run.state.open_tickets().count(), 2);
    run.when(approve("ticket-1").at(2));
    assert_eq!(
        run.state.status,
        RunStatus::WaitingForHuman,
        "ticket-2 is still open"
    );
    assert!(
        run.state
            .calls
            .values()
            .any(|c| c.request().target_agent == "sink"),
        "ticket-1's approval took effect"
    );
    run.when(approve("ticket-2").at(2));
    assert_eq!(run.state.status, RunStatus::Running);
    run.replays();
}

/// An escalation with nothing after it asks a question: the run waits, and approving
/// with a choice and words calls the agent again with them, through the gate.
#[test]
pub(crate) fn a_question_is_answered_and_the_agent_asked_again() {
    let mut run = started();
    run.when(respond(vec![Action::Escalate {
        reason: "which matters more?".into(),
        choices: vec!["speed".into(), "safety".into()],
    }]))
    .then_kinds(&["agent.responded", "human.escalated"]);
    assert_eq!(run.state.status, RunStatus::WaitingForHuman);
    let (_, ticket) = run.state.open_tickets().next().expect("a ticket is open");
    assert!(matches!(
        &ticket.subject,
        crate::TicketSubject::Question { choices, .. } if choices.len() == 2
    ));
    run.when(
        approve("ticket-1")
            .by("ana")
            .choice(2)
            .answer("safety, the auditors are watching"),
    )
    .then_kinds(&["human.decided", "handoff.allowed", "agent.call_scheduled"])
    .then(|events| {
        let RunEvent::HandoffAllowed {
            from,
            to,
            output_type,
            decision,
            ..
        } = &events[1]
        else {
            panic!("the answer crosses the gate: {events:?}");
        };
        assert_eq!((from.as_str(), to.as_str()), ("human", "a"));
        assert_eq!(output_type, "human_answer");
        assert_eq!(&*decision.rule_id, "human");
    });
    let again = run.pending();
    assert_eq!(again.target_agent, "a");
    assert_eq!(again.capability_code, "req");
    let answer = again
        .decision_inputs
        .last()
        .expect("the answer is an input");
    assert_eq!(answer.source_agent, "human");
    assert_eq!(answer.output_type, "human_answer");
    assert_eq!(answer.payload["choice"], json!("safety"));
    assert_eq!(
        answer.payload["answer"],
        json!("safety, the auditors are watching")
    );
    assert_eq!(answer.payload["question"], json!("which matters more?"));
    assert_eq!(answer.payload["by"], json!("ana"));
    assert_eq!(run.state.status, RunStatus::Running);
    run.replays();
}

/// An escalation alone, approved: the agent is called again with the approval and its
/// reason (it used to fail the run: nothing was scheduled).
#[test]
pub(crate) fn an_approved_escalation_calls_the_agent_again() {
    let mut run = started();
    run.when(respond(vec![Action::Escalate {
        reason: "sign-off needed".into(),
        choices: Vec::new(),
    }]));
    run.when(approve("ticket-1").by("bo").because("go ahead"))
        .then_kinds(&["human.decided", "handoff.allowed", "agent.call_scheduled"]);
    let again = run.pending();
    let answer = &again.decision_inputs.last().expect("an input").payload;
    assert_eq!(answer["approved"], json!(true));
    assert_eq!(answer["reason"], json!("go ahead"));
    assert_eq!(answer["by"], json!("bo"));
    assert!(answer.get("answer").is_none() && answer.get("choice").is_none());
    // The agent then finishes its step as usual.
    run.when(respond(vec![handoff("b", "ab", json!({"k": 1}))]).to(again.request_id.as_str()));
    assert_eq!(run.pending().target_agent, "b");
    run.replays();
}

/// A decision names who decides, a choice is one the ticket offers, an answer answers a
/// question, and a denial carries neither. Nothing is recorded when refused.
#[test]
pub(crate) fn human_decisions_must_fit_the_ticket() {
    let mut run = started();
    run.when(respond(vec![Action::Escalate {
        reason: "which?".into(),
        choices: vec!["x".into(), "y".into()],
    }]));
    let before = run.log.len();
    assert!(matches!(
        run.when_rejected(approve("ticket-1").by("  ")),
        Rejection::Anonymous(_)
    ));
    assert!(matches!(
        run.when_rejected(approve("ticket-1").choice(3)),
        Rejection::InvalidChoice { count: 2, .. }
    ));
    assert!(matches!(
        run.when_rejected(deny("ticket-1").answer("no")),
        Rejection::DoesNotAnswer { .. }
    ));
    assert_eq!(run.log.len(), before);
    run.when(deny("ticket-1").because("out of scope"))
        .then_kinds(&["human.decided", "episode.stopped", "run.blocked"]);

    // A failure escalated by the ladder asks for approval, not an answer or a choice.
    let mut run = started();
    run.when(crash());
    run.when(crash());
    let rejection = run.when_rejected(approve("ticket-1").answer("retry it"));
    assert!(matches!(rejection, Rejection::DoesNotAnswer { .. }));
    assert!(rejection.to_string().contains("approve or deny"));
    assert!(matches!(
        run.when_rejected(approve("ticket-1").choice(1)),
        Rejection::NoChoiceOffered { .. }
    ));
    // Its approval reaches the retried agent through the gate.
    run.when(approve("ticket-1").because("transient"))
        .then_kinds(&["human.decided", "handoff.allowed", "agent.call_scheduled"]);
    let retry = run.pending();
    assert_eq!(retry.attempt, 3);
    assert_eq!(
        retry.context["previous_attempt"]["approval_reason"],
        json!("transient")
    );
    run.replays();
}

/// A handoff rule may name the person as its sender (`from_agent_id = "human"`): a
/// person's answer to `a` is scoped by it, as an agent's output would be by its rule.
#[test]
pub(crate) fn a_rule_from_human_scopes_a_persons_answer() {
    let source = format!(
        "{BUNDLE}\n[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"answers-to-a\"\n\
         from_agent_id = \"human\"\nto_agent_id = \"a\"\nhandoff_mode = \"scoped\"\n\
         allowed_context_fields = [\"answer\", \"by\"]\n"
    );
    let mut run = started_under(&source, "t.toml", |_| {});
    run.when(respond(vec![Action::Escalate {
        reason: "which matters more?".into(),
        choices: vec!["speed".into(), "safety".into()],
    }]));
    run.when(approve("ticket-1").by("ana").choice(2).answer("safety"))
        .then_kinds(&["human.decided", "handoff.allowed", "agent.call_scheduled"])
        .then(|events| {
            let RunEvent::HandoffAllowed {
                from,
                to,
                audit,
                delivered,
                ..
            } = &events[1]
            else {
                panic!("the answer crosses the gate: {events:?}");
            };
            assert_eq!((from.as_str(), to.as_str()), ("human", "a"));
            assert_eq!(&*audit.governance_rule_id, "answers-to-a");
            assert_eq!(**delivered, json!({"answer": "safety", "by": "ana"}));
            assert!(
                audit
                    .context_after_scoping
                    .fields_excluded
                    .contains(&"question".to_owned()),
                "{audit:?}"
            );
        });
    let answer = run
        .pending()
        .decision_inputs
        .last()
        .expect("an input")
        .clone();
    assert_eq!(*answer.payload, json!({"answer": "safety", "by": "ana"}));
    run.replays();
}
