//! `docket fork RUN --from POINT`: a new run that reuses a recorded run's answers before
//! an event and goes live from there (docs/replay.md#fork). The replay crate plans what
//! is reused; the runtime records it and drives the rest, and the finished runs are sealed
//! after it (`docket_app::App`).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, anyhow};
use docket_app::App;
use docket_decider::{AgentResponse, CallId, RunEvent, RunId, ValidateResponse, parse_response};
use docket_replay::{ForkSpec, plan_fork, point_in};

use crate::replay::NewPolicies;

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// What `docket fork` was asked.
pub(crate) struct ForkArgs<'a> {
    pub run: &'a RunId,
    pub from: &'a str,
    pub policies: Option<&'a NewPolicies>,
    pub override_output: Option<&'a str>,
    pub run_id: Option<RunId>,
}

/// `--override-output CALL=FILE`: the call and its answer, read and validated like any
/// agent's answer.
fn read_override(arg: &str) -> anyhow::Result<(CallId, String, AgentResponse)> {
    let (call, file) = arg
        .split_once('=')
        .filter(|(c, f)| !c.is_empty() && !f.is_empty())
        .ok_or_else(|| {
            anyhow!("--override-output {arg}: expected CALL=FILE (e.g. call-3=answer.json)")
        })?;
    let bytes = std::fs::read(Path::new(file))
        .with_context(|| format!("--override-output {call}={file}: cannot read {file}"))?;
    let response = parse_response(&bytes).map_err(|e| {
        anyhow!(
            "--override-output {call}={file}: {file} is not an agent response: at {}: {}",
            e.path,
            e.message
        )
    })?;
    response.validate().map_err(|e| {
        anyhow!("--override-output {call}={file}: {file} is not a valid agent response: {e}")
    })?;
    Ok((CallId::from(call), file.to_owned(), response))
}

/// Plans, records and drives the fork; prints its summary and what it reused. The exit
/// code is the fork's status, as for `docket run`.
pub(crate) async fn fork(app: &App, args: ForkArgs<'_>, out: &mut String) -> anyhow::Result<u8> {
    let rt = app.runtime();
    let recorded = rt.events(args.run).await?;
    let events: Vec<RunEvent> = recorded.iter().map(|e| e.event.clone()).collect();
    let seq = point_in(&events, args.from).map_err(|why| anyhow!("--from {}: {why}", args.from))?;
    let output_override = args.override_output.map(read_override).transpose()?;
    let fork_id = args.run_id.unwrap_or_else(|| rt.new_run_id());
    let plan = plan_fork(
        &events,
        ForkSpec {
            run_id: fork_id,
            from: seq as u64,
            parent_hash: recorded[seq - 1].hash.clone(),
            policies: args
                .policies
                .map(|p| (&p.bundle, p.source.as_str(), p.name.as_str())),
            output_override,
            now_ms: rt.now_ms(),
        },
    )
    .map_err(|e| anyhow!("cannot fork run {}: {e}", args.run))?;
    let reused: Vec<String> = plan
        .reused
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    let reused_total: usize = plan.reused.values().sum();
    let (parting, live_from, replaced) =
        (plan.parting.clone(), plan.live_from, plan.override_replaced);
    let outcome = app.start_fork(plan.request, plan.inputs).await?;
    let history = crate::show::history_of(rt, &outcome.run_id).await?;
    let code = crate::show::summary(out, &outcome, history.handoffs());
    outln!(
        out,
        "reused {reused_total} recorded input(s) of {} before event {live_from}{}",
        args.run,
        if reused.is_empty() {
            String::new()
        } else {
            format!(": {}", reused.join(", "))
        }
    );
    let call = args
        .override_output
        .and_then(|a| a.split_once('='))
        .map(|(call, _)| call);
    if let (Some(call), Some(replaced)) = (call, replaced) {
        outln!(
            out,
            "{call}: answered from the override{}",
            if replaced {
                " instead of its recorded answer"
            } else {
                " (its recorded answer came after the fork point)"
            }
        );
    }
    match parting {
        Some(p) => {
            outln!(
                out,
                "parted from {} at event {} ({}), before event {seq}: {}; live from there",
                args.run,
                p.seq,
                p.input,
                p.why
            );
            for d in &p.differences {
                let show = |v: &Option<serde_json::Value>| {
                    v.as_ref()
                        .map_or_else(|| "(absent)".to_owned(), crate::diff::short)
                };
                outln!(
                    out,
                    "  at {}: parent {}, fork {}",
                    if d.path.is_empty() { "/" } else { &d.path },
                    show(&d.recorded),
                    show(&d.decided)
                );
            }
        }
        None => outln!(out, "live from event {seq} of {}", args.run),
    }
    Ok(code)
}
