//! `replay.rs` and `event.rs`: a log decided again gives the same batches; decider
//! versions; the canonical encoding of events. And the replay property over random agent
//! behaviour.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::{DECIDER_VERSION, ReplayMismatch, RunEvent, RunRequested, RunState, RunStatus};
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

#[test]
pub(crate) fn a_run_recorded_by_a_newer_decider_is_refused_on_replay_naming_both_versions() {
    let run = started();
    let mut log = run.log.clone();
    if let Some(RunEvent::RunRequested(request)) = log.first_mut() {
        std::sync::Arc::make_mut(request).decider_version = DECIDER_VERSION + 1;
    }
    let err = replay_check(&log, &run.bundle).expect_err("newer decider");
    assert_eq!(
        err,
        ReplayMismatch::NewerDecider {
            recorded: DECIDER_VERSION + 1,
            supported: DECIDER_VERSION
        }
    );
    assert!(err.to_string().contains("replay it with a newer docket"));
}

#[test]
pub(crate) fn runs_recorded_before_decider_versions_read_as_version_0_and_replay() {
    // A log as the first decider recorded it, before it recorded its version.
    let run = started_under(BUNDLE, "t.toml", |r| r.decider_version = 1);
    let Some(RunEvent::RunRequested(request)) = run.log.first() else {
        panic!("a run starts with run.requested");
    };
    let mut value = serde_json::to_value(&**request).expect("serializes");
    value
        .as_object_mut()
        .expect("object")
        .remove("decider_version");
    let old: RunRequested = serde_json::from_value(value).expect("old shape reads");
    assert_eq!(old.decider_version, 0);
    let mut old_log = run.log.clone();
    old_log[0] = RunEvent::RunRequested(std::sync::Arc::new(old));
    // The batch re-decided from an old `run.requested` is the old one, version included.
    replay_check(&old_log, &run.bundle).expect("a pre-version log replays");
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
            let request = run.state.pending_requests()[0].clone();
            let next = match request.target_agent.as_str() { "a" => "b", "b" => "c", _ => "external" };
            let id = request.request_id.clone();
            let answer = |response| respond_with(response).to(&id).at(4);
            match act {
                Behaviour::Forward(p) => run.when(answer(AgentResponse::success("", Confidence::Medium, vec![handoff(next, "t", p)]))),
                Behaviour::Skip => run.when(answer(AgentResponse::success("", Confidence::Low, vec![handoff("c", "t", json!({}))]))),
                Behaviour::Finish => run.when(answer(AgentResponse::success("", Confidence::High, vec![Action::Finish { output: json!(1) }]))),
                Behaviour::Escalate => run.when(answer(AgentResponse::success("", Confidence::High, vec![Action::Escalate { reason: "?".into(), choices: Vec::new() }]))),
                Behaviour::Fail => run.when(answer(AgentResponse::error("", "AGENT_FAILED", "no"))),
                Behaviour::Garbage => run.when(fail("AGENT_MALFORMED_RESPONSE", "not JSON").to(&id).at(4)),
            };
        }
        prop_assert!(replay_check(&run.log, &run.bundle).is_ok(), "{:?}", replay_check(&run.log, &run.bundle));
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
}
