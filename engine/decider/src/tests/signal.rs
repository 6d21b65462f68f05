//! `decide/signal.rs`: outside events. Given `run-1` under the `t` bundle with a signal
//! `comment` (sent by `ingestion`, delivered to `a`, written to `comments`, annotated in
//! `notes`; a handoff rule blocks its `email` field on its way to `a`), a's call pending,
//! inputs recorded at 10,000 ms unless they say. Each log is checked with `replay_check`.

use serde_json::{Value, json};

use super::*;
use crate::{
    EVENT_TIMED_OUT_TYPE, EVENT_TYPE, EVENTS_SOURCE, NextStep, Rejection, RunEvent, RunStatus,
    SignalAwaited, SignalDelivered, SignalKept, SignalPhase, SignalReceived, TimerFired,
};
use docket_policies::Verdict;
use docket_protocol::{Action, EpisodeId};

const S1: &str = "run-1/signal-1";
const T1: &str = "run-1/timer-1";

const SIGNALS: &str = r#"
[[domains]]
id = "comments"
[[domains]]
id = "notes"

[[signals]]
name = "comment"
senders = ["ingestion"]
agents = ["a"]
domain = "comments"
annotations = "notes"
max_payload_bytes = 200

[[signals]]
name = "dm"
senders = ["ingestion"]
agents = ["b"]

[[multi_agent_handoffs.agent_handoff_rules]]
id = "events-to-a"
from_agent_id = "events"
to_agent_id = "a"
blocked_context_fields = ["email"]
"#;

fn signal_run() -> History {
    let source = format!(
        "{}\n{SIGNALS}",
        super::BUNDLE.replace(
            "id = \"a\"\nallowed_tools",
            "id = \"a\"\nwrite_scopes = [\"notes\"]\nallowed_tools"
        )
    );
    started_under(&source, "t.toml", |_| {}).clock(10_000, 0)
}

fn send(name: &str, by: &str, payload: Value) -> Command {
    Command::ReceiveSignal(SignalReceived {
        name: name.to_owned(),
        payload,
        by: by.to_owned(),
        idempotency_key: None,
        at_ms: 20_000,
    })
}

fn comment() -> Command {
    send(
        "comment",
        "ingestion",
        json!({"text": "love it", "email": "x@example.com"}),
    )
}

fn wait_for_event(name: &str, timeout: Option<&str>) -> Action {
    Action::Wait {
        until: None,
        duration: timeout.map(str::to_owned),
        event: Some(name.to_owned()),
        reason: "a reply needs a comment".to_owned(),
    }
}

/// The event handed to the one pending call, as its last decision input.
fn delivered_input(run: &History) -> (String, Value) {
    let request = run.pending();
    let input = request.decision_inputs.last().expect("an input");
    assert_eq!(input.source_agent.as_str(), EVENTS_SOURCE);
    (input.output_type.clone(), (*input.payload).clone())
}

#[test]
pub(crate) fn an_event_sent_before_the_wait_is_kept_then_delivered_scoped_when_the_agent_waits() {
    let mut run = signal_run();
    run.when(comment())
        .then_kinds(&[
            "signal.received",
            "policy.decided",
            "signal.kept",
            "domain.written",
        ])
        .then(|events| {
            let RunEvent::PolicyDecided { subject, decision } = &events[1] else {
                panic!("decided");
            };
            assert_eq!(subject, S1);
            assert_eq!(decision.verdict, Verdict::Allow);
            assert_eq!(&*decision.rule_id, "signals.comment.senders");
            assert_eq!(
                events[2],
                RunEvent::SignalKept(SignalKept {
                    signal_id: S1.into(),
                    name: "comment".to_owned()
                })
            );
            // Written to its domain by its sender, as the domain's first version.
            let RunEvent::DomainWritten {
                domain,
                version,
                agent,
                content,
                ..
            } = &events[3]
            else {
                panic!("written");
            };
            assert_eq!(
                (domain.as_str(), *version, agent.as_str()),
                ("comments", 1, "ingestion")
            );
            assert_eq!(content["email"], "x@example.com");
        });
    // Nobody waits: it is kept, and a's call is still the one pending.
    assert_eq!(run.state.signals()[&S1.into()].phase, SignalPhase::Kept);
    let asked = run.pending().request_id;
    run.when(respond(vec![wait_for_event("comment", None)]))
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "signal.delivered",
            "handoff.allowed",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let RunEvent::PolicyDecided { subject, decision } = &events[1] else {
                panic!("decided");
            };
            assert_eq!(subject, asked.as_str());
            assert_eq!(&*decision.rule_id, "signals.comment.agents");
            assert_eq!(
                events[2],
                RunEvent::SignalDelivered(SignalDelivered {
                    signal_id: S1.into(),
                    name: "comment".to_owned(),
                    request_id: asked.clone(),
                    agent: "a".into(),
                })
            );
        });
    // Its content crossed the gate from `events`: the blocked field was removed.
    let (output_type, payload) = delivered_input(&run);
    assert_eq!(output_type, EVENT_TYPE);
    assert_eq!(
        payload,
        json!({
            "signal_id": S1,
            "name": "comment",
            "by": "ingestion",
            "payload": {"text": "love it"},
        })
    );
    assert_eq!(
        run.state.signals()[&S1.into()].phase,
        SignalPhase::Delivered
    );
    run.replays();
}

#[test]
pub(crate) fn an_event_sent_after_the_wait_is_delivered_and_its_timeout_never_fires() {
    let mut run = signal_run();
    let asked = run.pending().request_id;
    run.when(respond(vec![wait_for_event("comment", Some("1h"))]))
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "timer.set",
            "signal.awaited",
        ])
        .then(|events| {
            let RunEvent::PolicyDecided { subject, decision } = &events[1] else {
                panic!("decided");
            };
            // With a timeout, the decision is the timer's, under the longest wait allowed.
            assert_eq!(subject, T1);
            assert_eq!(&*decision.rule_id, "waiting.max_wait_ms");
            assert_eq!(
                events[3],
                RunEvent::SignalAwaited(SignalAwaited {
                    request_id: asked.clone(),
                    agent: "a".into(),
                    episode_id: EpisodeId::root(),
                    name: "comment".to_owned(),
                    reason: "a reply needs a comment".to_owned(),
                    timeout: Some(T1.into()),
                    counts_against_wall_time: false,
                })
            );
        });
    assert!(matches!(run.state.next_step(), NextStep::WaitForTimer(t) if t.set.timer_id == T1));
    // Another event is kept for the run, not handed to a, which waits for a comment.
    run.when(send("dm", "ingestion", json!({"text": "hi"})))
        .then_kinds(&["signal.received", "policy.decided", "signal.kept"]);
    run.when(comment()).then_kinds(&[
        "signal.received",
        "policy.decided",
        "signal.kept",
        "domain.written",
        "signal.delivered",
        "handoff.allowed",
        "agent.call_scheduled",
    ]);
    assert_eq!(delivered_input(&run).1["signal_id"], "run-1/signal-2");
    assert!(run.state.signal_waits().is_empty());
    // Its timeout was cleared: it never fires, and the run does not wait for it.
    assert!(matches!(
        run.when_rejected(Command::FireTimer(TimerFired {
            timer_id: T1.into(),
            at_ms: 3_700_000,
        })),
        Rejection::TimerCleared(_)
    ));
    assert!(matches!(run.state.next_step(), NextStep::Call(_)));
    run.replays();
}

#[test]
pub(crate) fn a_wait_whose_timeout_passes_first_is_called_again_with_event_timed_out() {
    let mut run = signal_run();
    run.when(respond(vec![wait_for_event("comment", Some("1h"))]));
    run.when(Command::FireTimer(TimerFired {
        timer_id: T1.into(),
        at_ms: 3_612_000,
    }))
    .then_kinds(&["timer.fired", "signal.timed_out", "agent.call_scheduled"]);
    let request = run.pending();
    let input = request.decision_inputs.last().expect("told");
    assert_eq!(input.output_type, EVENT_TIMED_OUT_TYPE);
    assert_eq!(
        *input.payload,
        json!({
            "event": "comment",
            "timer_id": T1,
            "reason": "a reply needs a comment",
            "due_at_ms": 3_610_000,
            "fired_at_ms": 3_612_000,
            "late_ms": 2_000,
        })
    );
    assert!(run.state.signal_waits().is_empty());
    // A comment that comes later is kept for the run, delivered to nobody yet.
    run.when(comment()).then_kinds(&[
        "signal.received",
        "policy.decided",
        "signal.kept",
        "domain.written",
    ]);
    run.replays();
}

#[test]
pub(crate) fn a_wait_for_an_event_alone_holds_the_run_running_until_it_comes() {
    let mut run = signal_run();
    run.when(respond(vec![wait_for_event("comment", None)]))
        .then_kinds(&["agent.responded", "policy.decided", "signal.awaited"]);
    assert_eq!(run.state.status, RunStatus::Running);
    assert_eq!(run.state.next_step(), NextStep::WaitForSignal);
    run.when(comment());
    assert!(matches!(run.state.next_step(), NextStep::Call(_)));
    run.replays();
}

#[test]
pub(crate) fn events_the_bundle_does_not_admit_are_refused_and_reach_nobody() {
    let mut run = signal_run();
    run.when(respond(vec![wait_for_event("comment", None)]));
    for (command, rule) in [
        (
            send("comment", "mallory", json!({"text": "spam"})),
            "signals.comment.senders",
        ),
        (
            send("comment", "ingestion", json!({"text": "x".repeat(300)})),
            "signals.comment.max_payload_bytes",
        ),
        (send("like", "ingestion", json!({})), "deny_by_default"),
    ] {
        run.when(command)
            .then_kinds(&["signal.received", "policy.decided", "signal.refused"])
            .then(|events| {
                let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
                    panic!("decided");
                };
                assert_eq!(decision.verdict, Verdict::Deny);
                assert_eq!(&*decision.rule_id, rule);
            });
    }
    // a still waits; nothing was written to the domain.
    assert_eq!(run.state.next_step(), NextStep::WaitForSignal);
    assert!(!run.state.episodes().domains.contains_key("comments"));
    run.replays();
}

#[test]
pub(crate) fn the_same_key_records_an_event_once_and_unsigned_events_are_refused() {
    let mut run = signal_run();
    let keyed = |key: &str| {
        let Command::ReceiveSignal(mut s) = comment() else {
            unreachable!()
        };
        s.idempotency_key = Some(key.to_owned());
        Command::ReceiveSignal(s)
    };
    run.when(keyed("c-1"));
    assert_eq!(
        run.when_rejected(keyed("c-1")),
        Rejection::SignalRecorded {
            signal_id: S1.into()
        }
    );
    run.when(keyed("c-2"));
    assert_eq!(run.state.signals().len(), 2);
    assert_eq!(
        run.when_rejected(send("comment", " ", json!({}))),
        Rejection::SignalUnsigned("comment".to_owned())
    );
    assert_eq!(
        run.when_rejected(send("", "ingestion", json!({}))),
        Rejection::SignalUnnamed
    );
    assert_eq!(run.when_rejected(keyed("")), Rejection::SignalKey);
    run.replays();
}

#[test]
pub(crate) fn a_wait_for_an_event_the_agent_may_not_receive_is_refused_and_the_agent_told() {
    let mut run = signal_run();
    run.when(respond(vec![wait_for_event("dm", None)]))
        .then_kinds(&[
            "agent.responded",
            "policy.decided",
            "episode.action_denied",
            "agent.call_scheduled",
        ])
        .then(|events| {
            let RunEvent::PolicyDecided { decision, .. } = &events[1] else {
                panic!("decided");
            };
            assert_eq!(decision.verdict, Verdict::Deny);
            assert_eq!(&*decision.rule_id, "signals.dm.agents");
        });
    assert!(run.state.signal_waits().is_empty());
    let told = run.pending();
    assert_eq!(
        told.decision_inputs.last().expect("told").payload["rule_id"],
        "signals.dm.agents"
    );
    run.replays();
}

#[test]
pub(crate) fn agents_annotate_an_event_in_its_annotations_domain_and_never_write_its_own() {
    let mut run = signal_run();
    run.when(comment());
    let write = |domain: &str, content: Value| Action::WriteDomain {
        domain: domain.to_owned(),
        content,
    };
    // The event's own domain: a does not write it.
    run.when(respond(vec![write("comments", json!({"text": "edited"}))]))
        .then(|events| {
            assert!(
                events
                    .iter()
                    .any(|e| matches!(e, RunEvent::DomainWriteDenied { domain, .. } if domain == "comments")),
                "{events:?}"
            );
        });
    // An annotation must name a received comment.
    let mut run = signal_run();
    run.when(comment());
    run.when(respond(vec![write("notes", json!({"label": "spam"}))]))
        .then(|events| {
            let denied = events.iter().find_map(|e| match e {
                RunEvent::DomainWriteDenied { decision, .. } => Some(decision.clone()),
                _ => None,
            });
            let decision = denied.expect("refused");
            assert_eq!(&*decision.rule_id, "signals.comment.annotations");
            assert!(decision.reason.contains("signal_id"), "{}", decision.reason);
        });
    let mut run = signal_run();
    run.when(comment());
    run.when(respond(vec![
        write("notes", json!({"signal_id": S1, "label": "praise"})),
        Action::Finish { output: json!({}) },
    ]))
    .then(|events| {
        assert!(
            events
                .iter()
                .any(|e| matches!(e, RunEvent::DomainWritten { domain, .. } if domain == "notes")),
            "{events:?}"
        );
    });
    // The event itself is unchanged: its domain holds what the sender sent.
    let comments = &run.state.episodes().domains["comments"];
    assert_eq!(comments.len(), 1);
    run.replays();
}

/// docs/governance.md#domain-content: an event's domain holds its content rules for the
/// sender's write too. The event is kept; its domain keeps its last version.
#[test]
pub(crate) fn an_event_whose_content_breaks_its_domains_rules_is_kept_but_not_written() {
    let source = format!(
        "{}\n{}",
        super::BUNDLE.replace(
            "id = \"a\"\nallowed_tools",
            "id = \"a\"\nwrite_scopes = [\"notes\"]\nallowed_tools"
        ),
        SIGNALS.replace(
            "[[domains]]\nid = \"comments\"\n",
            "[[domains]]\nid = \"comments\"\nrequired_refs = [\"source\"]\n"
        )
    );
    let mut run = started_under(&source, "t.toml", |_| {}).clock(10_000, 0);
    run.when(comment())
        .then_kinds(&[
            "signal.received",
            "policy.decided",
            "signal.kept",
            "domain.write_denied",
        ])
        .then(|events| {
            let RunEvent::DomainWriteDenied {
                domain,
                agent,
                episode_id,
                decision,
                by: None,
            } = &events[3]
            else {
                panic!("domain.write_denied");
            };
            assert_eq!(
                (domain.as_str(), agent.as_str(), episode_id),
                ("comments", "ingestion", &EpisodeId::root())
            );
            assert_eq!(&*decision.rule_id, "domains.comments.required_refs");
            assert_eq!(
                &*decision.reason,
                "content of `comments` refused: /source is missing or empty (required \
                 reference `source`)"
            );
        });
    assert!(!run.state.episodes().domains.contains_key("comments"));
    run.replays();
}

#[test]
pub(crate) fn a_run_of_decider_12_refuses_events() {
    let mut run = started_under(super::BUNDLE, "t.toml", |r| r.decider_version = 12);
    assert_eq!(
        run.when_rejected(comment()),
        Rejection::SignalsUnknownTo(12)
    );
}
