//! `state/snapshot.rs` and the linear fold (`state/call.rs`): a state folded from any
//! snapshot plus the events after it equals the state folded from the first event; a
//! snapshot another build wrote is refused, never misread; a call made again shares the
//! inputs of the call it repeats instead of copying them.

use crate::AgentResponded;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::testing::{act, gate_run, gate_source, record};
use crate::{
    DECIDER_VERSION, RunState, SNAPSHOT_EVERY, SNAPSHOT_FORMAT, SnapshotError, snapshot_due,
    snapshot_interval,
};
use docket_protocol::{AgentResponse, Confidence};

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Whatever the agents do, a snapshot taken after any event, decoded, with the rest
    /// of the log folded on, is the state folded from the start; and it says so itself.
    #[test]
    fn a_state_from_any_snapshot_and_the_rest_equals_the_state_from_the_start(
        edges in prop::collection::vec((0..3usize, 0..3usize), 0..6),
        mode in 0..3usize,
        script in prop::collection::vec(act(), 1..25),
        approvals in prop::collection::vec(any::<bool>(), 25),
        cut in any::<prop::sample::Index>(),
    ) {
        let (bundle, run) = gate_run(&gate_source(&edges, mode)).expect("the bundle compiles");
        let recorded = record(&bundle, run, &script, &approvals);
        let log = &recorded.log;
        let at = cut.index(log.len() + 1);
        let snapshot = RunState::fold(&log[..at]).encode_snapshot().expect("encodes");
        prop_assert!(RunState::snapshot_matches(&snapshot, &log[..at]).expect("reads"));
        let resumed = RunState::decode_snapshot(&snapshot).expect("decodes").fold_on(&log[at..]);
        prop_assert_eq!(&resumed, &recorded.state);
        // The whole requests too (PartialEq compares the inputs as lists, not as links).
        prop_assert_eq!(resumed.pending_requests(), recorded.state.pending_requests());
        for (id, call) in resumed.live_calls() {
            prop_assert_eq!(call.request(), recorded.state.live_calls()[id].request());
        }
    }
}

#[test]
fn a_snapshot_of_another_build_or_not_a_snapshot_is_refused_naming_why() {
    let run = started();
    let snapshot = run.state.encode_snapshot().expect("encodes");
    let mut other_decider = snapshot.clone();
    other_decider[8..12].copy_from_slice(&(DECIDER_VERSION + 1).to_le_bytes());
    let err = RunState::decode_snapshot(&other_decider).expect_err("another decider");
    assert_eq!(
        err,
        SnapshotError::OtherDecider {
            found: DECIDER_VERSION + 1
        }
    );
    assert!(err.to_string().contains("decider version"), "{err}");
    let mut other_format = snapshot.clone();
    other_format[4..8].copy_from_slice(&(SNAPSHOT_FORMAT + 1).to_le_bytes());
    assert_eq!(
        RunState::decode_snapshot(&other_format),
        Err(SnapshotError::OtherFormat {
            found: SNAPSHOT_FORMAT + 1
        })
    );
    assert_eq!(
        RunState::decode_snapshot(b"{\"version\":3}"),
        Err(SnapshotError::NotASnapshot)
    );
    let cut = &snapshot[..snapshot.len() / 2];
    assert!(matches!(
        RunState::decode_snapshot(cut),
        Err(SnapshotError::Body { what: "decode", .. })
    ));
    assert_eq!(
        RunState::decode_snapshot(&snapshot).expect("decodes"),
        run.state
    );
}

/// A loop of n rounds (an agent asking for a capability again and again) keeps one
/// recorded request per call, each with only the input it adds: the state's snapshot
/// grows linearly with the rounds. A chain thousands of calls long drops without
/// recursing as deep as it is.
#[test]
fn a_long_capability_loop_folds_and_snapshots_linearly() {
    fn after(rounds: usize) -> (RunState, usize) {
        // Decided in place: `History` decides from a copy of the state, which a loop this
        // long would make quadratic.
        let run = started();
        let (bundle, mut state) = (run.bundle, run.state);
        for round in 0..rounds {
            for action in [
                docket_protocol::Action::RequestCapability {
                    target_agent: "b".into(),
                    capability_code: "questions".into(),
                    inputs: json!({"topics": [round]})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                    priority: None,
                },
                docket_protocol::Action::Finish {
                    output: json!({"answer": round}),
                },
            ] {
                let id = state.pending_call_ids()[0].clone();
                let mut response = AgentResponse::success("", Confidence::High, vec![action]);
                response.request_id.clone_from(&id);
                let answered = Command::RecordResponse(AgentResponded {
                    request_id: id,
                    response: response.into(),
                    at_ms: 2_000,
                });
                crate::decide_in_place(&mut state, &bundle, answered).expect("decided");
            }
        }
        let size = state.encode_snapshot().expect("encodes").len();
        (state, size)
    }
    let (state, small) = after(50);
    let (_, large) = after(400);
    // Eight times the rounds: about eight times the bytes (a quadratic state would be 64).
    assert!(
        large < small * 10,
        "{small} bytes at 50 rounds, {large} at 400"
    );
    let pending = state.pending_requests();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        pending[0].decision_inputs.len(),
        51,
        "the input and 50 answers"
    );
    assert_eq!(
        state.live_calls()[&pending[0].request_id].decision_input_count(),
        51
    );
    let (deep, _) = after(10_000);
    drop(deep);
}

#[test]
fn snapshots_fall_due_every_2048_events_at_any_length() {
    assert!(!snapshot_due(0, 2047));
    assert!(snapshot_due(2000, 2048));
    assert!(!snapshot_due(2048, 4095));
    assert!(snapshot_due(8000, 8200));
    // A run of about a million events: still every 2,048, so a resume folds at most
    // 2,047 events after its snapshot.
    assert!(!snapshot_due(1_050_000, 1_050_600));
    assert!(snapshot_due(1_050_600, 1_050_624));
    assert_eq!(snapshot_interval(1_000_000), SNAPSHOT_EVERY);
}
