//! The words for people inside a run's events, apart from its decisions.
//!
//! Replay compares what a build decides with what the log records. The decisions (event
//! kinds, verdicts, rules, subjects, ids, what was delivered to an agent, what happens
//! next) must reproduce exactly. The prose a decision is explained in (a policy's
//! reason, a rule's note, a stop reason, an error's message) may be worded otherwise by a
//! later build: such a difference is reported as a wording difference, not a divergence
//! (docs/replay.md#wording). The places are listed here, and only here, as JSON pointers
//! into an event as `docket events --json` prints it; none is inside what an agent
//! receives, so a reworded reason that reaches an agent still diverges.

use serde_json::Value;

use super::RunEvent;

/// JSON pointers (RFC 6901) of the places in an event that hold words for people; `*`
/// stands for any array index. A place is wording only when it holds a string on both
/// sides compared.
pub const WORDING: &[&str] = &[
    // Why the event happened, in the event's own words (run.blocked, run.failed,
    // episode.stopped, human.escalated, output.archived, effect.refused, tool.denied, ...).
    "/reason",
    // The error object of a denial or a block (docs/events.md#the-error-object).
    "/error/message",
    // A policy decision: its reason and the note of each rule it consulted.
    "/decision/reason",
    "/decision/chain/*/note",
    "/contract/reason",
    "/contract/chain/*/note",
    "/provenance/*/reason",
    "/provenance/*/chain/*/note",
];

/// Whether `pointer` (a JSON pointer into an event) names a place of [`WORDING`].
#[must_use]
pub fn is_wording(pointer: &str) -> bool {
    WORDING.iter().any(|pattern| matches(pattern, pointer))
}

fn matches(pattern: &str, pointer: &str) -> bool {
    let mut p = pattern.split('/');
    let mut q = pointer.split('/');
    loop {
        match (p.next(), q.next()) {
            (None, None) => return true,
            (Some("*"), Some(index))
                if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) => {}
            (Some(a), Some(b)) if a == b => {}
            _ => return false,
        }
    }
}

/// Whether `recorded` and `decided` (a batch, a log) are the same decisions, worded alike
/// or not: as many events, each equal to its counterpart once every place of [`WORDING`]
/// that holds a string on both sides is set aside.
#[must_use]
pub fn same_decisions(recorded: &[RunEvent], decided: &[RunEvent]) -> bool {
    recorded.len() == decided.len()
        && recorded
            .iter()
            .zip(decided)
            .all(|(r, d)| same_event_decisions(r, d))
}

fn same_event_decisions(recorded: &RunEvent, decided: &RunEvent) -> bool {
    if recorded == decided {
        return true;
    }
    if recorded.kind() != decided.kind() {
        return false;
    }
    let (Ok(mut a), Ok(mut b)) = (
        serde_json::to_value(recorded),
        serde_json::to_value(decided),
    ) else {
        return false;
    };
    for pattern in WORDING {
        let segments: Vec<&str> = pattern.split('/').skip(1).collect();
        set_aside(&mut a, &mut b, &segments);
    }
    a == b
}

/// Replaces the strings at `segments` (a pattern of [`WORDING`]) with null on both sides,
/// where both sides hold one.
fn set_aside(a: &mut Value, b: &mut Value, segments: &[&str]) {
    let Some((first, rest)) = segments.split_first() else {
        if a.is_string() && b.is_string() {
            *a = Value::Null;
            *b = Value::Null;
        }
        return;
    };
    if *first == "*" {
        if let (Value::Array(x), Value::Array(y)) = (a, b) {
            for (p, q) in x.iter_mut().zip(y.iter_mut()) {
                set_aside(p, q, rest);
            }
        }
    } else if let (Some(p), Some(q)) = (a.get_mut(*first), b.get_mut(*first)) {
        set_aside(p, q, rest);
    }
}
