//! `docket diff RUN_A RUN_B`: two runs compared step by step (docs/replay.md#diff), on the
//! replay crate's alignment; the runtime only reads the logs.

use std::fmt::Write as _;

use docket_app::Store;
use docket_decider::{RunEvent, RunId};
use docket_replay::{FieldDiff, diff_runs};
use docket_runtime::Runtime;
use serde_json::Value;

use crate::command::EXIT_COMPLETED;

/// Characters of a value a line shows.
const VALUE_SHOWN: usize = 80;

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// A value as compact JSON, cut to [`VALUE_SHOWN`] characters.
pub(crate) fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= VALUE_SHOWN {
        return text;
    }
    let cut: String = text.chars().take(VALUE_SHOWN).collect();
    format!("{cut}...")
}

fn field(out: &mut String, part: &str, d: &FieldDiff) {
    let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "(absent)".to_owned(), short);
    outln!(
        out,
        "    {part} {}: {} | {}",
        if d.path.is_empty() { "/" } else { &d.path },
        show(&d.a),
        show(&d.b)
    );
}

/// Prints what differs between runs `a` and `b` (`no difference` when nothing does).
/// Exit 0 either way: a difference is an answer, not a failure.
pub(crate) async fn diff(
    rt: &Runtime<Store>,
    a: &RunId,
    b: &RunId,
    json: bool,
    out: &mut String,
) -> anyhow::Result<u8> {
    let read = |run: &RunId| {
        let rt = rt.clone();
        let run = run.clone();
        async move {
            anyhow::Ok(
                rt.events(&run)
                    .await?
                    .into_iter()
                    .map(|e| e.event)
                    .collect::<Vec<RunEvent>>(),
            )
        }
    };
    let (events_a, events_b) = (read(a).await?, read(b).await?);
    let d = diff_runs(&events_a, &events_b);
    if json {
        outln!(out, "{}", serde_json::to_string(&d).unwrap_or_default());
        return Ok(EXIT_COMPLETED);
    }
    if d.no_difference() {
        outln!(
            out,
            "no difference: runs {a} and {b} took the same {} steps the same way",
            d.same
        );
        return Ok(EXIT_COMPLETED);
    }
    outln!(
        out,
        "runs {a} (A) and {b} (B): {} steps the same, {} differ, {} only in A, {} only in B",
        d.same,
        d.differing.len(),
        d.only_a.len(),
        d.only_b.len()
    );
    for s in &d.differing {
        outln!(out, "  {} (event {} in A, {} in B)", s.id, s.seq_a, s.seq_b);
        if let Some((da, db)) = &s.decision {
            let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".to_owned());
            outln!(out, "    decision: {} | {}", show(da), show(db));
        }
        for f in &s.payload {
            field(out, "payload", f);
        }
        for f in &s.outcome {
            field(out, "outcome", f);
        }
    }
    for (side, only) in [("A", &d.only_a), ("B", &d.only_b)] {
        for s in only.iter() {
            outln!(
                out,
                "  only in {side}: {} (event {}){}",
                s.id,
                s.seq,
                s.decision
                    .as_ref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            );
        }
    }
    Ok(EXIT_COMPLETED)
}
