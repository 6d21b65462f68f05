//! `state/live.rs` and `state/history.rs`: the state keeps only the calls later decisions
//! read, the log keeps the rest. Recording with every call kept (the state before the
//! split) and with calls dropped at every input makes the same log byte for byte; every
//! call and handoff decision the old state held is in the history folded from the log;
//! and a state resumed from a snapshot decides every later input as the recording did.

use crate::AgentResponded;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::RunHistory;
use crate::state::{PRUNING, Pruning};
use crate::testing::{Recorded, act, gate_run, gate_source, record};

/// Records `script` with calls pruned as `pruning` says.
fn recorded_with(
    pruning: Pruning,
    bundle: &PolicyBundle,
    run: RunRequested,
    script: &[crate::testing::Act],
    approvals: &[bool],
) -> Recorded {
    let before = PRUNING.replace(pruning);
    let recorded = record(bundle, run, script, approvals);
    PRUNING.set(before);
    recorded
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Dropping answered calls changes no decision, and the history folded from the log
    /// answers what the state answered before the split: every call (request, answer,
    /// failure) and every handoff decision.
    #[test]
    fn the_split_state_decides_as_the_whole_one_and_the_history_holds_what_it_held(
        edges in prop::collection::vec((0..3usize, 0..3usize), 0..6),
        mode in 0..3usize,
        script in prop::collection::vec(act(), 1..25),
        approvals in prop::collection::vec(any::<bool>(), 25),
    ) {
        let (bundle, run) = gate_run(&gate_source(&edges, mode)).expect("the bundle compiles");
        let whole = recorded_with(Pruning::Never, &bundle, run.clone(), &script, &approvals);
        let split = recorded_with(Pruning::EveryInput, &bundle, run, &script, &approvals);
        let bytes = |log: &[RunEvent]| log.iter().map(RunEvent::encode).collect::<Vec<_>>();
        prop_assert_eq!(bytes(&split.log), bytes(&whole.log));
        prop_assert_eq!(&split.refused, &whole.refused);

        let history = RunHistory::fold(&split.log);
        // With nothing dropped, the state's calls are every call of the run.
        prop_assert_eq!(history.calls(), whole.state.live_calls());
        for (id, call) in split.state.live_calls() {
            prop_assert_eq!(Some(call), history.calls().get(id));
        }
        prop_assert_eq!(split.state.pending_requests(), whole.state.pending_requests());
        prop_assert_eq!(split.state.status(), whole.state.status());
        prop_assert_eq!(split.state.open_tickets().count(), whole.state.open_tickets().count());
        prop_assert_eq!(split.state.episodes(), whole.state.episodes());
        prop_assert_eq!(split.state.effects(), whole.state.effects());
        // The handoff decisions, in order, as their events record them.
        let decided = split
            .log
            .iter()
            .filter(|e| matches!(e, RunEvent::HandoffAllowed { .. } | RunEvent::HandoffDenied { .. }))
            .count();
        prop_assert_eq!(history.handoffs().len(), decided);
    }

    /// A state decoded from a snapshot taken after any batch, with calls dropped, decides
    /// every later input exactly as the recording did.
    #[test]
    fn a_state_resumed_from_a_snapshot_decides_as_the_fold_from_the_start(
        edges in prop::collection::vec((0..3usize, 0..3usize), 0..6),
        mode in 0..3usize,
        script in prop::collection::vec(act(), 1..25),
        approvals in prop::collection::vec(any::<bool>(), 25),
        cut in any::<prop::sample::Index>(),
    ) {
        let (bundle, run) = gate_run(&gate_source(&edges, mode)).expect("the bundle compiles");
        let recorded = record(&bundle, run, &script, &approvals);
        let ends = &recorded.batch_ends;
        let from = ends[cut.index(ends.len())];
        let snapshot = RunState::fold(&recorded.log[..from]).encode_snapshot().expect("encodes");
        let mut state = RunState::decode_snapshot(&snapshot).expect("decodes");
        let mut start = from;
        for &end in ends.iter().filter(|&&e| e > from) {
            let input = Command::from_event(&recorded.log[start]).expect("a batch starts with its input");
            let batch = decide(&state, &bundle, input).expect("decided again");
            prop_assert_eq!(&batch[..], &recorded.log[start..end]);
            for event in &batch {
                state.apply(event);
            }
            start = end;
        }
        prop_assert_eq!(&state, &recorded.state);
    }
}

/// The `t` pipeline's first call, answered with a capability request to `b`, which
/// answers: `a` is called again with the answer.
fn asked_and_answered() -> History {
    let mut run = started();
    run.when(respond(vec![Action::RequestCapability {
        target_agent: "b".into(),
        capability_code: "questions".into(),
        inputs: json!({"topics": ["x"]})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        priority: None,
    }]))
    .then_kinds(&[
        "agent.responded",
        "policy.decided",
        "handoff.allowed",
        "agent.call_scheduled",
    ]);
    run.when(respond(vec![Action::Finish {
        output: json!({"q": 1}),
    }]));
    assert_eq!(run.state.pending_requests()[0].target_agent, "a");
    run
}

/// Given a capability's round trip, when the asker's call made again is answered, the
/// asker's first call and the helper's call are left to the log: the state keeps the call
/// answered last (until the next answer), the history every call with its answer.
#[test]
fn answered_calls_nothing_refers_to_leave_the_state_and_stay_in_the_history() {
    let mut run = asked_and_answered();
    let first: CallId = "run-1/call-1".into();
    let helper: CallId = "run-1/call-2".into();
    // The helper's reply_to keeps the asker while the helper is pending; after its answer
    // the asker was read (called again) and nothing refers to it.
    assert!(
        run.state.live_calls().contains_key(&helper),
        "answered last"
    );
    let again = run.state.pending_call_ids()[0].clone();
    run.when(respond(vec![Action::Finish {
        output: json!({"done": true}),
    }]));
    let live: Vec<&CallId> = run.state.live_calls().keys().collect();
    assert_eq!(live, vec![&again], "only the call answered last stays");
    let history = run.history();
    assert_eq!(history.calls().len(), 3);
    assert!(history.calls()[&first].response.is_some());
    assert_eq!(history.calls()[&helper].recorded.target_agent, "b");
    assert_eq!(
        history.calls()[&again].again_of.as_ref(),
        Some(&first),
        "made again from the first call"
    );
    // An answer to a call left to the log is refused as already answered, not unknown.
    let late = Command::RecordResponse(AgentResponded {
        request_id: first.clone(),
        response: AgentResponse::success(first.clone(), Confidence::High, Vec::new()).into(),
        at_ms: 9,
    });
    let refused = decide(&run.state, &run.bundle, late).expect_err("refused");
    assert!(
        matches!(
            refused,
            Rejection::Finished(_) | Rejection::AlreadyAnswered(_)
        ),
        "{refused:?}"
    );
}

/// Given a helper's call pending, its asker (answered) stays in the state: the helper's
/// answer is read against it.
#[test]
fn an_asker_waiting_for_a_capability_stays_in_the_state() {
    let mut run = started();
    run.when(respond(vec![Action::RequestCapability {
        target_agent: "b".into(),
        capability_code: "questions".into(),
        inputs: json!({"topics": ["x"]})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        priority: None,
    }]));
    // A second input folded (the helper's failure, retried) prunes; the asker stays.
    run.when(fail("AGENT_TIMEOUT", "slow").to("run-1/call-2").at(3));
    assert!(
        run.state
            .live_calls()
            .contains_key(&CallId::from("run-1/call-1")),
        "the asker of a pending capability call is live"
    );
}

/// A snapshot of a state whose call made again repeats a call left to the log holds the
/// inherited inputs, so the whole request is sent after a resume.
#[test]
fn a_call_made_again_from_a_dropped_call_keeps_its_whole_request_in_a_snapshot() {
    let run = asked_and_answered();
    let pending = run.state.pending_requests();
    assert_eq!(pending.len(), 1);
    let decoded =
        RunState::decode_snapshot(&run.state.encode_snapshot().expect("encodes")).expect("decodes");
    assert_eq!(decoded, run.state);
    assert_eq!(decoded.pending_requests(), pending);
    assert_eq!(
        pending[0].decision_inputs.len(),
        2,
        "the input and the answer"
    );
}
