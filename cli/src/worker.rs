//! `docket worker` and `docket run --queue`: runs of a PostgreSQL store left for workers,
//! and the workers that drive them (docs/postgres.md, "Workers").

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use docket_app::{App, WorkerConfig};
use docket_decider::RunId;
use docket_evidence::KeyPlace;
use docket_runtime::{RuntimeError, Workflow};
use serde_json::Value;

use crate::command::{open, run_async};

#[derive(Args)]
pub(crate) struct WorkerArgs {
    /// This worker's name, as leases and `docket runs` show who drives a run (the
    /// process's id is added, so two workers of one name stay apart).
    #[arg(long, value_name = "NAME", default_value = "worker")]
    name: String,
    /// Runs driven at once.
    #[arg(long, value_name = "K", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    concurrency: u64,
    /// Seconds a claim holds without renewal: a dead worker's runs go on elsewhere after
    /// at most this long (renewed every third of it).
    #[arg(long, value_name = "SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=3600))]
    lease: u64,
    /// Seconds a queued run waits before it is claimed as if it had the next priority up:
    /// a LOW run goes before HIGH runs that became ready more than twice this after it.
    /// Give every worker of a database the same.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    priority_aging: u64,
}

/// Records a run of `workflow` and queues it for a worker, at its bundle's priority; says
/// its id.
pub(crate) async fn queue(
    app: &App,
    workflow: &Workflow,
    input: Value,
    run_id: RunId,
    path: &Path,
    out: &mut String,
) -> anyhow::Result<u8> {
    if !app.shared() {
        return Err(anyhow!("--queue needs a PostgreSQL store"));
    }
    let recorded = app
        .runtime()
        .record_start(workflow, input, Some(run_id.clone()))
        .await
        .map_err(|e| anyhow!("cannot start a run of {}: {e}", path.display()))?;
    let requested = recorded.state().request().cloned();
    drop(recorded);
    let queued = match requested {
        Some(requested) => app.queue_requested(&requested).await,
        None => app.queue(&run_id).await,
    };
    let unqueued = format!(
        "run {run_id} is recorded but could not be queued; `docket resume {run_id}` drives it"
    );
    queued.map_err(|e| match e {
        RuntimeError::Store(e) => crate::command::postgres_error(e, &unqueued),
        other => anyhow!("{unqueued}: {other}"),
    })?;
    let _ = writeln!(out, "{run_id} queued");
    Ok(0)
}

/// Runs `docket worker` until SIGINT or SIGTERM, then gives its runs back.
pub(crate) fn main(args: WorkerArgs, data: Option<PathBuf>) -> ExitCode {
    run_async(data, |data, out| {
        Box::pin(async move { work(args, &data, out).await })
    })
}

async fn work(args: WorkerArgs, data: &Path, out: &mut String) -> anyhow::Result<u8> {
    if crate::command::postgres_url().is_none() {
        return Err(anyhow!(
            "a worker drives the runs of a PostgreSQL store: give one with --store postgres://USER@HOST[:PORT]/DATABASE (or DOCKET_STORE); a data directory's runs are driven by the command that starts them"
        ));
    }
    let rt = open(data).await?;
    let app = crate::verify::app(&rt, data);
    // A worker without the store's key drives runs it cannot seal: said once, at start.
    match docket_evidence::signer_in(data, &crate::command::key_place()) {
        Ok(Some(_)) => {}
        Ok(None) if matches!(crate::command::key_place(), KeyPlace::Unsigned) => {}
        Ok(None) => say!(
            "warning: no signing key in {}: the runs this worker finishes are not sealed; copy the store's key there (from the machine that ran `docket store init`) or set DOCKET_SIGNING_KEY (DOCKET_SIGNING_KEY=none: unsigned on purpose)",
            docket_evidence::keys_dir(data).display()
        ),
        Err(e) => say!("warning: the runs this worker finishes are not sealed: {e}"),
    }
    let lease = Duration::from_secs(args.lease);
    let config = WorkerConfig {
        concurrency: usize::try_from(args.concurrency).unwrap_or(usize::MAX),
        lease,
        renew_every: lease / 3,
        priority_aging: Duration::from_secs(args.priority_aging),
        ..WorkerConfig::new(args.name.clone())
    };
    say!(
        "worker {} driving the runs of {} ({} at once, lease {} s); stop it with Ctrl-C or SIGTERM",
        args.name,
        rt.store().postgres().map_or("the store", |s| s.database()),
        args.concurrency,
        args.lease
    );
    let report = docket_app::work(app, config, stopped())
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let _ = writeln!(
        out,
        "worker {}: {} runs claimed, {} settled, {} lost to other workers, {} failed",
        args.name, report.claimed, report.settled, report.lost, report.failed
    );
    Ok(0)
}

/// Completes at SIGINT or SIGTERM.
async fn stopped() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
