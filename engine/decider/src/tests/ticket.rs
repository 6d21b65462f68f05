//! `decide/ticket.rs`: human decisions on tickets. (Approvals that resume a retry or an
//! agent's held actions are walked through in `failure.rs` and `response.rs`; conflict
//! choices in `fan_out.rs`.)

use serde_json::json;

use super::*;
use crate::RunStatus;
use crate::protocol::Action;

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
            .any(|c| c.request.target_agent == "sink"),
        "ticket-1's approval took effect"
    );
    run.when(approve("ticket-2").at(2));
    assert_eq!(run.state.status, RunStatus::Running);
    run.replays();
}
