//! Side effects in `docket status`: each effect of the run, where it stands, and its
//! receipt or the reason it did not run.

use std::fmt::Write as _;

use serde_json::{Value, json};

use docket_decider::RunState;

/// The effects section of `docket status` (nothing when the run asked for none).
pub(crate) fn list_text(out: &mut String, state: &RunState) {
    if state.effects().is_empty() {
        return;
    }
    let _ = writeln!(out, "effects:");
    for (id, rec) in state.effects() {
        let r = &rec.requested;
        let detail = match (&rec.receipt, &rec.outcome) {
            (Some(receipt), _) => format!(" receipt {}", receipt.result),
            (None, Some((rule, reason))) => format!(" [{rule}] {reason}"),
            (None, None) => String::new(),
        };
        let _ = writeln!(
            out,
            "  {id} {} in lane {} by {} ({}), key {}: {}{detail}",
            r.effect_kind,
            r.lane,
            r.agent,
            r.episode_id,
            rec.key(),
            rec.phase.as_str()
        );
    }
}

/// The effects of `docket status --json`.
pub(crate) fn list_json(state: &RunState) -> Value {
    Value::Array(
        state
            .effects()
            .iter()
            .map(|(id, rec)| {
                let r = &rec.requested;
                json!({
                    "effect_id": id,
                    "kind": r.effect_kind,
                    "lane": r.lane,
                    "agent": r.agent,
                    "episode_id": r.episode_id,
                    "idempotency_key": rec.key(),
                    "phase": rec.phase.as_str(),
                    "receipt": rec.receipt.as_ref().map(|x| x.result.clone()),
                    "outcome": rec.outcome.as_ref().map(|(rule, reason)| json!({"rule": rule, "reason": reason})),
                })
            })
            .collect(),
    )
}
