//! `replay.rs` and `event.rs`: a log decided again gives the same batches; decider
//! versions; the canonical encoding of events. And the replay property over random agent
//! behaviour.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::{
    DECIDER_VERSION, OLDEST_DECIDER_VERSION, Rejection, ReplayMismatch, RunEvent, RunState,
    RunStatus, UnsupportedDecider, is_wording,
};
use docket_protocol::{Action, AgentResponse, Confidence};

#[test]
pub(crate) fn events_encode_with_sorted_keys_and_decode_back() {
    let events = started().log;
    for event in &events {
        let bytes = event.encode();
        let text = String::from_utf8(bytes.clone()).expect("utf-8");
        let value: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(docket_policies::canonical_json_text(&value), text);
        assert_eq!(
            &RunEvent::decode(event.kind(), &bytes).expect("decodes"),
            event
        );
    }
    assert!(RunEvent::decode("run.completed", &events[0].encode()).is_err());
}

#[test]
pub(crate) fn replay_check_finds_a_changed_decision() {
    let mut run = started();
    run.when(respond(vec![handoff("b", "ab", json!({}))]));
    let mut tampered = run.log.clone();
    if let Some(RunEvent::AgentCallScheduled { request, .. }) = tampered.last_mut() {
        std::sync::Arc::make_mut(request).target_agent = "c".into();
    }
    assert!(matches!(
        replay_check(&tampered, &run.bundle),
        Err(ReplayMismatch::Differs { .. })
    ));
    replay_check(&run.log, &run.bundle).expect("untampered log replays");
}

/// A run recorded by a decider version outside this build's (a newer one, or one retired
/// before the release baseline) is refused, on replay and on every input alike, naming
/// the version: never decided by behaviour it was not recorded with.
#[test]
pub(crate) fn a_run_of_a_version_this_build_does_not_decide_as_is_refused() {
    for (recorded, expected) in [
        (
            DECIDER_VERSION + 1,
            UnsupportedDecider::Newer {
                recorded: DECIDER_VERSION + 1,
            },
        ),
        (
            OLDEST_DECIDER_VERSION - 1,
            UnsupportedDecider::Retired {
                recorded: OLDEST_DECIDER_VERSION - 1,
            },
        ),
        (0, UnsupportedDecider::Retired { recorded: 0 }),
    ] {
        let run = started();
        let mut log = run.log.clone();
        let Some(RunEvent::RunRequested(request)) = log.first_mut() else {
            panic!("a run starts with run.requested");
        };
        std::sync::Arc::make_mut(request).decider_version = recorded;
        let err = replay_check(&log, &run.bundle).expect_err("refused");
        assert_eq!(err, ReplayMismatch::Version(expected));
        assert!(
            err.to_string().contains(&format!("version {recorded}")),
            "{err}"
        );
        // Resuming it is refused the same way, before anything is decided.
        let state = RunState::fold(&log);
        let answer = respond(vec![handoff("b", "ab", json!({}))]);
        let mut resumed = run;
        resumed.state = state;
        assert_eq!(resumed.when_rejected(answer), Rejection::Version(expected));
    }
}

/// A run blocked by the interaction matrix: its log holds a policy decision's reason and
/// chain notes, a denial's error message and a stop reason.
fn blocked_log() -> History {
    let mut run = started();
    run.when(respond(vec![handoff("c", "ac", json!({"keep": 1}))]));
    assert_eq!(run.state.status, RunStatus::Blocked, "a → c is denied");
    run.replays();
    run
}

/// Replay compares decisions: a reason worded otherwise is reported as reworded, not as
/// a divergence; a changed rule, verdict or subject is a divergence.
#[test]
pub(crate) fn a_reworded_reason_is_no_divergence_and_a_changed_rule_is_one() {
    let run = blocked_log();
    let position = |kind: &str| {
        run.log
            .iter()
            .position(|e| e.kind() == kind)
            .unwrap_or_else(|| panic!("the log holds {kind}"))
    };
    let reworded = |index: usize, pointer: &str| {
        let mut value = serde_json::to_value(&run.log[index]).expect("serializes");
        *value
            .pointer_mut(pointer)
            .unwrap_or_else(|| panic!("{pointer}")) = json!("worded otherwise");
        let mut log = run.log.clone();
        log[index] = serde_json::from_value(value).expect("still an event");
        log
    };
    let blocked = position("run.blocked");
    let denied = position("handoff.denied");
    for (index, pointer) in [
        (blocked, "/reason"),
        (blocked, "/error/message"),
        (denied, "/decision/reason"),
        (denied, "/decision/chain/0/note"),
    ] {
        let found = replay_check(&reworded(index, pointer), &run.bundle)
            .unwrap_or_else(|e| panic!("{pointer} of event {index}: {e}"));
        assert_eq!(
            found,
            [crate::Reworded {
                index,
                kind: run.log[index].kind()
            }],
            "{pointer}"
        );
    }
    for (index, pointer) in [(denied, "/decision/rule_id"), (blocked, "/rule_id")] {
        assert!(
            matches!(
                replay_check(&reworded(index, pointer), &run.bundle),
                Err(ReplayMismatch::Differs { .. })
            ),
            "{pointer} of event {index} is a decision"
        );
    }
}

/// Every string leaf of a JSON value, with its pointer.
fn string_leaves(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::String(_) => out.push(at.to_owned()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                string_leaves(item, &format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                string_leaves(item, &format!("{at}/{key}"), out);
            }
        }
        _ => {}
    }
}

/// One random agent behaviour.
#[derive(Debug, Clone)]
enum Behaviour {
    Forward(Value),
    Skip,
    Finish,
    Fail,
    Escalate,
    Garbage,
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    let payload = prop::collection::btree_map("[a-z]{1,4}", 0i64..100, 0..4).prop_map(|m| json!(m));
    prop_oneof![
        4 => payload.prop_map(Behaviour::Forward),
        1 => Just(Behaviour::Skip),
        1 => Just(Behaviour::Finish),
        2 => Just(Behaviour::Fail),
        1 => Just(Behaviour::Escalate),
        1 => Just(Behaviour::Garbage),
    ]
}

/// The pending call of `run` (a pipeline a → b → c) answered as `act` says.
fn answer_pending(run: &mut History, act: Behaviour) {
    let request = run.state.pending_requests()[0].clone();
    let next = match request.target_agent.as_str() {
        "a" => "b",
        "b" => "c",
        _ => "external",
    };
    let id = request.request_id.clone();
    let answer = |response| respond_with(response).to(&id).at(4);
    let success = |confidence, action| AgentResponse::success("", confidence, vec![action]);
    match act {
        Behaviour::Forward(p) => {
            run.when(answer(success(Confidence::Medium, handoff(next, "t", p))))
        }
        Behaviour::Skip => run.when(answer(success(
            Confidence::Low,
            handoff("c", "t", json!({})),
        ))),
        Behaviour::Finish => run.when(answer(success(
            Confidence::High,
            Action::Finish { output: json!(1) },
        ))),
        Behaviour::Escalate => run.when(answer(success(
            Confidence::High,
            Action::Escalate {
                reason: "?".into(),
                choices: Vec::new(),
            },
        ))),
        Behaviour::Fail => run.when(answer(AgentResponse::error("", "AGENT_FAILED", "no"))),
        Behaviour::Garbage => run.when(fail("AGENT_MALFORMED_RESPONSE", "not JSON").to(&id).at(4)),
    };
}

proptest! {
    /// Whatever the agents do, every batch the decider produced replays identically, and
    /// no request ever carries a field c's scoping blocks.
    #[test]
    fn replay_check_holds_for_random_agent_behaviour(
        script in prop::collection::vec(behaviour(), 1..20),
        approvals in prop::collection::vec(any::<bool>(), 20),
    ) {
        let mut run = started();
        let mut approvals = approvals.into_iter();
        for act in script {
            if run.state.status == RunStatus::WaitingForHuman {
                let ticket = run.state.open_tickets().next().map(|(id, _)| id.clone()).unwrap_or_default();
                let approved = approvals.next().unwrap_or(true);
                run.when(decision(Some(&ticket), approved).by("p").because("r").at(5));
            }
            if run.state.status != RunStatus::Running {
                break;
            }
            answer_pending(&mut run, act);
        }
        prop_assert_eq!(replay_check(&run.log, &run.bundle), Ok(Vec::new()));
        prop_assert_eq!(RunState::fold(&run.log), run.state.clone());
        for call in run.history().calls().values().filter(|c| c.request().target_agent == "c") {
            for input in call.request().decision_inputs.iter().map(|i| &i.payload)
                .chain(call.request().context_inputs.iter().map(|i| &i.payload)) {
                if let Some(map) = input.as_object() {
                    prop_assert!(map.keys().all(|k| k == "keep"), "{input}");
                }
            }
        }
    }

    /// One string of a decision changed: replay reports it as reworded when it is a place
    /// of `WORDING`, and as a divergence anywhere else.
    #[test]
    fn a_changed_string_is_reworded_only_at_a_place_of_wording(
        script in prop::collection::vec(behaviour(), 1..12),
        pick in any::<prop::sample::Index>(),
        leaf in any::<prop::sample::Index>(),
    ) {
        let mut run = started();
        for act in script {
            if run.state.status != RunStatus::Running {
                break;
            }
            answer_pending(&mut run, act);
        }
        // The decisions: every event but the inputs that open batches.
        let decisions: Vec<usize> = crate::batches(&run.log)
            .flat_map(|(start, batch)| start + 1..start + batch.len())
            .collect();
        prop_assume!(!decisions.is_empty());
        let index = decisions[pick.index(decisions.len())];
        let value = serde_json::to_value(&run.log[index]).expect("serializes");
        let mut leaves = Vec::new();
        string_leaves(&value, "", &mut leaves);
        leaves.retain(|p| p != "/kind");
        prop_assume!(!leaves.is_empty());
        let pointer = leaves[leaf.index(leaves.len())].clone();
        let mut changed = value;
        let Some(Value::String(text)) = changed.pointer_mut(&pointer) else {
            return Err(TestCaseError::fail(format!("no string at {pointer}")));
        };
        text.push_str(" (changed)");
        // A string that no longer reads as its field (an id, a status) is no event.
        let Ok(event) = serde_json::from_value::<RunEvent>(changed) else {
            return Ok(());
        };
        prop_assume!(event != run.log[index]);
        let mut log = run.log.clone();
        log[index] = event;
        let found = replay_check(&log, &run.bundle);
        if is_wording(&pointer) {
            prop_assert_eq!(found, Ok(vec![crate::Reworded { index, kind: run.log[index].kind() }]), "{}", pointer);
        } else {
            prop_assert!(matches!(found, Err(ReplayMismatch::Differs { .. })), "{} of {}: {:?}", pointer, run.log[index].kind(), found);
        }
    }
}
