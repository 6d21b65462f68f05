//! `docket export RUN --format html`: a run's log, and what checking it found now, as one
//! self-contained page (docs/report.md), built by the evidence crate from the log alone.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use docket_decider::RunId;
use docket_evidence::{ChainCheck, LoggedEvent, Verification, html_report};
use docket_store::{EventStore as _, StreamId};

use crate::runs::EXIT_COMPLETED;

/// What `docket export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// One self-contained HTML page (no script, nothing loaded from the network): header,
    /// verification, denials, episode tree, handoffs, decisions, effects, human
    /// decisions, budgets over time, events (docs/report.md).
    Html,
}

/// The arguments of `docket export`.
#[derive(Args)]
pub(crate) struct ExportArgs {
    /// The run id.
    run: RunId,
    /// What to write.
    #[arg(long, value_enum)]
    format: Format,
    /// Where to write it: a file, or `-` for standard output (default: RUN.html in the
    /// current directory).
    #[arg(long, value_name = "FILE|-")]
    out: Option<PathBuf>,
}

/// `docket export`, on the same async runtime and error reporting as the run commands.
pub(crate) fn main(args: ExportArgs, data: Option<PathBuf>) -> std::process::ExitCode {
    crate::runs::run_async(data, |data, out| {
        Box::pin(async move {
            let rt = crate::runs::open(&data).await?;
            export(&rt, args, out).await
        })
    })
}

async fn export(
    rt: &docket_runtime::Runtime<docket_store::EmbeddedStore>,
    args: ExportArgs,
    out: &mut String,
) -> anyhow::Result<u8> {
    let ExportArgs {
        run,
        format,
        out: to,
    } = args;
    let Format::Html = format;
    let events: Vec<LoggedEvent> = rt
        .events(&run)
        .await?
        .into_iter()
        .map(|e| LoggedEvent {
            seq: e.seq,
            recorded_at_ns: e.recorded_at_ns,
            hash: e.hash,
            event: e.event,
        })
        .collect();
    let stream = StreamId::new(run.as_str()).map_err(|e| anyhow::anyhow!("run id {run}: {e}"))?;
    let checked = rt
        .store()
        .verify(&stream)
        .await
        .with_context(|| format!("cannot verify run {run}'s log"))?;
    let verification = Verification {
        chain: ChainCheck::from(&checked),
        // Signed checkpoints are not kept yet: the report says so.
        checkpoint: None,
    };
    let page =
        html_report(&events, &verification).map_err(|e| anyhow::anyhow!("run {run}: {e}"))?;
    let path = to.unwrap_or_else(|| PathBuf::from(format!("{run}.html")));
    if path == Path::new("-") {
        out.push_str(&page);
        return Ok(EXIT_COMPLETED);
    }
    std::fs::write(&path, page.as_bytes())
        .with_context(|| format!("cannot write the report to {}", path.display()))?;
    let _ = writeln!(
        out,
        "wrote the report of run {run} ({} events, {} bytes) to {}",
        events.len(),
        page.len(),
        path.display()
    );
    Ok(EXIT_COMPLETED)
}
