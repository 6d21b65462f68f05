//! `docket replay`: forensic replay of recorded runs (docs/replay.md), on the replay
//! crate; the runtime only reads the logs.

use std::fmt::Write as _;

use docket_decider::{RunEvent, RunId};
use docket_replay::{ReplayReport, replay};
use docket_runtime::Runtime;
use docket_store::EmbeddedStore;
use serde_json::json;

use crate::runs::{EXIT_COMPLETED, EXIT_FAILED};

/// Characters of a run's output the text report shows.
const OUTPUT_SHOWN: usize = 160;

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Replays `run`, or every run with `all`; exit 1 when any diverges.
pub(crate) async fn execute(
    rt: &Runtime<EmbeddedStore>,
    run: Option<&RunId>,
    all: bool,
    json: bool,
    out: &mut String,
) -> anyhow::Result<u8> {
    let runs: Vec<RunId> = match run {
        Some(run) if !all => vec![run.clone()],
        _ => rt
            .run_summaries()
            .await?
            .into_iter()
            .map(|s| s.run_id)
            .collect(),
    };
    let mut diverged = 0;
    for run in &runs {
        let events: Vec<RunEvent> = rt.events(run).await?.into_iter().map(|e| e.event).collect();
        let report = replay(&events).map_err(|e| anyhow::anyhow!("run {run}: {e}"))?;
        diverged += usize::from(!report.reproduced());
        if json {
            outln!(
                out,
                "{}",
                serde_json::to_string(&report).unwrap_or_default()
            );
        } else if all {
            outln!(out, "{}", one_line(&report));
        } else {
            text(out, &report);
        }
    }
    if all && !json {
        outln!(
            out,
            "{} runs replayed, {} reproduced, {diverged} diverged",
            runs.len(),
            runs.len() - diverged
        );
    }
    Ok(if diverged == 0 {
        EXIT_COMPLETED
    } else {
        EXIT_FAILED
    })
}

fn one_line(r: &ReplayReport) -> String {
    match &r.divergence {
        None => format!(
            "{}\treproduced\t{} events, {} decisions\t{}",
            r.run_id,
            r.events,
            r.decisions,
            r.status.as_str()
        ),
        Some(d) => format!(
            "{}\tDIVERGED {} at event {}\t{}",
            r.run_id, d.code, d.seq, d.why
        ),
    }
}

fn text(out: &mut String, r: &ReplayReport) {
    outln!(
        out,
        "run {} (decider version {}): {} events, {} inputs, {} decisions",
        r.run_id,
        r.decider_version,
        r.events,
        r.inputs,
        r.decisions
    );
    match &r.divergence {
        None => outln!(out, "every decision reproduced"),
        Some(d) => {
            outln!(
                out,
                "DIVERGED at event {} ({}), error {}: {}",
                d.seq,
                d.input,
                d.code,
                d.why
            );
            outln!(out, "  recorded: {}", d.recorded_kinds.join(", "));
            outln!(out, "  decided:  {}", d.decided_kinds.join(", "));
            for diff in &d.differences {
                let show = |v: &Option<serde_json::Value>| {
                    v.as_ref()
                        .map_or_else(|| "(absent)".to_owned(), |v| v.to_string())
                };
                outln!(
                    out,
                    "  event {} at {}: recorded {}, decided {}",
                    d.at_event + 1,
                    if diff.path.is_empty() {
                        "/"
                    } else {
                        &diff.path
                    },
                    show(&diff.recorded),
                    show(&diff.decided)
                );
            }
            outln!(out, "  help: docs/errors/{}.md", d.code);
        }
    }
    let result = match (&r.stop_reason, &r.output) {
        (Some(why), _) => format!("{} ({why})", r.status.as_str()),
        (None, Some(output)) => {
            let text = json!(output).to_string();
            let shown: String = text.chars().take(OUTPUT_SHOWN).collect();
            let more = if shown.len() < text.len() {
                " ... (--json for all of it)"
            } else {
                ""
            };
            format!("{}, output {shown}{more}", r.status.as_str())
        }
        (None, None) => r.status.as_str().to_owned(),
    };
    outln!(out, "result: {result}");
}
