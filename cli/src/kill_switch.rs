//! `docket kill-switch on|off|status`: the emergency stop for side effects. The switches
//! live beside the event log, not in it, so they reach a run going on in another process:
//! every run reads them before each effect execution. For a data directory they are a
//! file (`kill-switches.json`, with a history beside it); for a PostgreSQL store, tables
//! of the database, which every worker and command recording there reads
//! (`docket_app::KillSwitches` chooses).

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use docket_app::KillSwitches;
use docket_policies::GLOBAL_KILL_SWITCH;
use docket_runtime::FileKillSwitch;
use serde_json::json;

use crate::command::Access;

#[derive(Subcommand)]
pub(crate) enum KillSwitchCommand {
    /// Engage a switch: its lane's effects (or all of them) stop.
    ///
    /// No effect of the lane (or, without --lane, none at all) executes until it is
    /// released.
    On(Flip),
    /// Release a switch.
    Off(Flip),
    /// Show the engaged switches (and, with --history, every flip).
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Include every flip so far, with its time (UTC), who and why.
        #[arg(long)]
        history: bool,
    },
}

/// Which switch to flip, by whom and why.
#[derive(Args)]
pub(crate) struct Flip {
    /// The lane (`api`, `browser`...); the global switch when absent.
    #[arg(long, value_name = "LANE")]
    lane: Option<String>,
    /// Who flips it (default: $USER).
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
    /// Why (kept in the switches' history).
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "",
        hide_default_value = true
    )]
    reason: String,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn who(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

pub(crate) fn main(command: KillSwitchCommand, data: &Path) -> ExitCode {
    let data = data.to_path_buf();
    crate::command::run_async(Some(data), |data, out| {
        Box::pin(async move {
            execute(command, &data, out).await?;
            Ok(crate::command::EXIT_COMPLETED)
        })
    })
}

/// The switches of the store: the PostgreSQL database `--store` names (every worker and
/// command recording there reads them), else the data directory `data`. Reading them
/// (`status`) never creates the database's tables.
async fn switches(data: &Path, flips: bool) -> anyhow::Result<KillSwitches> {
    match crate::command::postgres_url() {
        Some(url) => {
            let (doing, access) = if flips {
                ("to flip a kill switch", Access::Write)
            } else {
                ("to read the kill switches", Access::Read)
            };
            Ok(KillSwitches::database(
                crate::command::open_postgres(url, doing, access).await?,
            ))
        }
        None => {
            if flips {
                make_store(data).await?;
            }
            Ok(KillSwitches::file(data))
        }
    }
}

async fn execute(command: KillSwitchCommand, data: &Path, out: &mut String) -> anyhow::Result<()> {
    match command {
        KillSwitchCommand::On(f) => {
            let switches = switches(data, true).await?;
            flip(&switches, f.lane, true, f.by, &f.reason, out).await
        }
        KillSwitchCommand::Off(f) => {
            let switches = switches(data, true).await?;
            flip(&switches, f.lane, false, f.by, &f.reason, out).await
        }
        KillSwitchCommand::Status { json, history } => {
            let switches = switches(data, false).await?;
            let state = switches.state().await?;
            let flips = if history {
                switches.history().await?
            } else {
                Vec::new()
            };
            if json {
                let mut doc = match &switches {
                    KillSwitches::File(_) => json!({ "file": switches.location() }),
                    KillSwitches::Database(_) => json!({ "database": switches.location() }),
                };
                doc["engaged"] = json!(state.engaged);
                if history {
                    doc["history"] = json!(flips);
                }
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&doc).unwrap_or_default()
                );
            } else {
                if state.engaged.is_empty() {
                    let _ = writeln!(out, "no kill switch engaged");
                }
                for (switch, e) in &state.engaged {
                    let _ = writeln!(
                        out,
                        "{switch} engaged by {} at {}{}",
                        e.by,
                        crate::words::date_ms(e.at_ms),
                        because(&e.reason)
                    );
                }
                for flip in &flips {
                    let _ = writeln!(
                        out,
                        "{} {} {} by {}{}",
                        crate::words::date_ms(flip.at_ms),
                        flip.switch,
                        if flip.on { "on" } else { "off" },
                        flip.by,
                        because(&flip.reason)
                    );
                }
            }
            Ok(())
        }
    }
}

/// `: reason`, or nothing when no reason was given.
fn because(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

async fn flip(
    switches: &KillSwitches,
    lane: Option<String>,
    on: bool,
    by: Option<String>,
    reason: &str,
    out: &mut String,
) -> anyhow::Result<()> {
    let switch = lane.unwrap_or_else(|| GLOBAL_KILL_SWITCH.to_owned());
    let flip = switches
        .set(&switch, on, &who(by), reason, now_ms())
        .await?;
    let state = match (flip.on, flip.changed) {
        (true, true) => "engaged",
        (true, false) => "was already engaged",
        (false, true) => "released",
        (false, false) => "was not engaged",
    };
    let _ = writeln!(out, "kill switch {switch} {state} (by {})", flip.by);
    Ok(())
}

/// Makes `dir` a docket store before the first switch file lands in it: the store refuses
/// to initialise a directory that is not empty, so switches engaged before the first run
/// would otherwise keep every later `docket run` out. A directory that is already a store
/// (possibly held by a running `docket run`) is left alone.
pub(crate) fn initialise_store(dir: &Path) -> anyhow::Result<()> {
    if docket_store::EmbeddedStore::exists_in(dir) {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(make_store(dir))
}

/// [`initialise_store`] for a caller already on the async runtime.
pub(crate) async fn make_store(dir: &Path) -> anyhow::Result<()> {
    if docket_store::EmbeddedStore::exists_in(dir) {
        return Ok(());
    }
    docket_store::EmbeddedStore::open(dir, docket_store::StoreConfig::default())
        .await
        .map(drop)
        .with_context(|| format!("cannot open the data directory {}", dir.display()))
}

/// Engages (`on`) or releases a lane's switch in the data directory `dir`, which must
/// already be a store (`docket demo`'s incident drill).
pub(crate) fn engage(
    dir: &Path,
    lane: &str,
    on: bool,
    by: &str,
    reason: &str,
) -> anyhow::Result<()> {
    FileKillSwitch::new(dir)
        .set(lane, on, by, reason, now_ms())
        .map(drop)
        .with_context(|| {
            format!(
                "cannot {} the kill switch {lane} in {}",
                if on { "engage" } else { "release" },
                dir.display()
            )
        })
}
