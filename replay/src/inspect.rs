//! Inspect: a run as it stood at any point of its log (docs/replay.md#inspect), named by
//! a sequence or by what happened there (`last-denial`, `first-effect`...).

use docket_decider::{RunEvent, RunState};

/// Names of the points `point_in` understands besides a plain sequence number.
pub const POINTS: &[&str] = &[
    "first",
    "last",
    "first-denial",
    "last-denial",
    "first-effect",
    "last-effect",
    "first-escalation",
    "last-escalation",
];

/// The 1-based sequence `point` names in `events`: a number, or one of [`POINTS`].
///
/// # Errors
/// What is wrong with `point`, in words: out of range, unknown, or a point the run does
/// not have (no denial, no effect).
pub fn point_in(events: &[RunEvent], point: &str) -> Result<usize, String> {
    let len = events.len();
    if let Ok(seq) = point.parse::<usize>() {
        return if (1..=len).contains(&seq) {
            Ok(seq)
        } else {
            Err(format!(
                "event {seq} is not in this run, which has events 1 to {len}"
            ))
        };
    }
    let denial = |e: &RunEvent| match e {
        RunEvent::HandoffDenied { .. } | RunEvent::EpisodeActionDenied { .. } => true,
        RunEvent::PolicyDecided { decision, .. } => !decision.is_allowed(),
        _ => false,
    };
    let effect = |e: &RunEvent| e.kind().starts_with("effect.");
    let escalation = |e: &RunEvent| e.kind() == "human.escalated";
    let found = match point {
        "first" => Some(0).filter(|_| len > 0),
        "last" => len.checked_sub(1),
        "first-denial" => events.iter().position(denial),
        "last-denial" => events.iter().rposition(denial),
        "first-effect" => events.iter().position(effect),
        "last-effect" => events.iter().rposition(effect),
        "first-escalation" => events.iter().position(escalation),
        "last-escalation" => events.iter().rposition(escalation),
        other => {
            return Err(format!(
                "`{other}` is neither an event number nor a point ({})",
                POINTS.join(", ")
            ));
        }
    };
    let what = point
        .trim_start_matches("first-")
        .trim_start_matches("last-");
    found
        .map(|i| i + 1)
        .ok_or_else(|| format!("this run has no {what}"))
}

/// The run's state right after event `seq` (1-based).
#[must_use]
pub fn state_at(events: &[RunEvent], seq: usize) -> RunState {
    RunState::fold(events.iter().take(seq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_decider::RunEvent;

    fn kinds(events: &[RunEvent]) -> Vec<&'static str> {
        events.iter().map(RunEvent::kind).collect()
    }

    #[test]
    fn numbers_and_named_points_and_what_is_wrong_with_others() {
        let events: Vec<RunEvent> = vec![RunEvent::RunFailed { reason: "x".into() }];
        assert_eq!(kinds(&events), ["run.failed"]);
        assert_eq!(point_in(&events, "1"), Ok(1));
        assert_eq!(point_in(&events, "last"), Ok(1));
        assert!(
            point_in(&events, "2")
                .unwrap_err()
                .contains("events 1 to 1")
        );
        assert_eq!(
            point_in(&events, "last-denial"),
            Err("this run has no denial".to_owned())
        );
        assert!(
            point_in(&events, "middle")
                .unwrap_err()
                .contains("first-effect")
        );
    }
}
