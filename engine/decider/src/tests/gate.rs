//! One gate for everything that reaches an agent (docs/governance.md#handoff-rules-and-blocked-fields):
//! whatever agents do, by any path (handoffs, capability requests and answers, spawn
//! inputs and child results, domain reads, approvals and answers, the handoff context),
//! no blocked field reaches any agent's request, and no decision handoff crosses a pair
//! the matrix forbids.

use proptest::prelude::*;
use serde_json::{Map, Value};

use docket_policies::{DecisionKind, InputKind};

use super::*;
use crate::testing::{Act, act, action, gate_run as gate_requested, gate_source, record};
use crate::{RunEvent, replay_check};

fn gate_run(edges: &[(usize, usize)], mode: usize) -> History {
    let (bundle, run) =
        gate_requested(&gate_source(edges, mode)).expect("the gate bundle compiles");
    let given = start_events(&bundle, run);
    History::new(bundle).given(&given).clock(2_000, 0)
}

/// Where a request carries `secret` at the top of content an agent wrote: an input's
/// payload, or the spawn inputs, child result or effect result the engine frames.
fn secrets(request: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for list in ["decision_inputs", "context_inputs"] {
        for (i, input) in request[list].as_array().into_iter().flatten().enumerate() {
            let payload = &input["payload"];
            for (at, content) in [
                ("", payload),
                ("/inputs", &payload["inputs"]),
                ("/result", &payload["result"]),
            ] {
                if content.get("secret").is_some() {
                    found.push(format!("/{list}/{i}/payload{at}/secret"));
                }
            }
        }
    }
    // The handoff context's original request (the run's input carries `secret`).
    if request["context"]["handoff"]["original_request"]
        .get("secret")
        .is_some()
    {
        found.push("/context/handoff/original_request/secret".to_owned());
    }
    found
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn no_blocked_field_reaches_any_agent_and_no_handoff_crosses_a_forbidden_pair(
        edges in prop::collection::vec((0..3usize, 0..3usize), 0..6),
        mode in 0..3usize,
        script in prop::collection::vec(act(), 1..25),
        approvals in prop::collection::vec(any::<bool>(), 25),
    ) {
        let (bundle, requested) = gate_requested(&gate_source(&edges, mode)).expect("the gate bundle compiles");
        let run = record(&bundle, requested, &script, &approvals);
        prop_assert!(run.refused.is_none(), "the decider refused an input: {:?}", run.refused);
        let history = run.history();
        for call in history.calls().values() {
            let request = serde_json::to_value(&*call.request()).expect("a request encodes");
            let found = secrets(&request);
            prop_assert!(found.is_empty(), "{} received a blocked field at {found:?}: {request}", call.request().target_agent);
        }
        for event in &run.log {
            // Matrix decisions; content crossing by another rule names that rule instead.
            if let RunEvent::HandoffAllowed { from, to, input: InputKind::Decision, decision, .. } = event
                && decision.kind == DecisionKind::Handoff
            {
                let matrix = bundle.decide_handoff(from, to, InputKind::Decision);
                prop_assert!(matrix.decision.is_allowed(), "{from} → {to} crossed: {:?}", matrix.decision.reason);
            }
        }
        // Nor does a spawn: no child is an agent its spawner is forbidden to reach.
        for event in &run.log {
            if let RunEvent::EpisodeStarted { agent, spawned_by, .. } = event {
                let spawner = &history.calls()[spawned_by].request().target_agent;
                prop_assert!(!(spawner == "a" && agent == "c"), "a spawned c");
            }
        }
        prop_assert!(replay_check(&run.log, &bundle).is_ok());
    }
}

#[test]
pub(crate) fn a_spawn_cannot_reach_an_agent_the_spawner_is_forbidden_to_reach() {
    let mut run = gate_run(&[], 0);
    run.when(respond(vec![
        action(&Act::Spawn(2, Map::new())).expect("a spawn"),
    ]))
    .then(|events| {
        let denied = events.iter().find_map(|e| match e {
            RunEvent::EpisodeActionDenied {
                action, decision, ..
            } => Some((action.clone(), decision.reason.to_string())),
            _ => None,
        });
        assert_eq!(
            denied,
            Some(("spawn".to_owned(), "a may not reach c".to_owned()))
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, RunEvent::EpisodeStarted { .. }))
        );
    });
    // A pair without an edge may spawn (the recursion policy decides): b is a's child.
    let mut run = gate_run(&[], 0);
    run.when(respond(vec![
        action(&Act::Spawn(1, Map::new())).expect("a spawn"),
    ]))
    .then(|events| {
        assert!(
            events
                .iter()
                .any(|e| matches!(e, RunEvent::EpisodeStarted { .. }))
        );
    });
}
