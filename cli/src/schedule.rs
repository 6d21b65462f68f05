//! `docket schedule add|list|show|pause|unpause|remove` (docs/schedules.md): runs of a
//! workflow started on a cron expression or an interval by whatever drives runs (`docket
//! serve` on a data directory, `docket worker` over PostgreSQL). The schedules live beside
//! the log, not in it, so they can be changed while a server fires them: a data
//! directory's file, or the database's tables (`docket_app::Schedules` chooses).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use clap::{Args, Subcommand};
use docket_app::{CatchUp, Firing, NewSchedule, Overlap, Schedule, Schedules};
use docket_runtime::{Clock as _, SystemClock, Workflow};
use serde_json::json;

use crate::command::Access;
use crate::words::date_ms;

#[derive(Subcommand)]
pub(crate) enum ScheduleCommand {
    /// Make a schedule: runs of a workflow on a cron expression or an interval.
    ///
    /// `docket serve` fires it on a data directory, the workers over PostgreSQL; each
    /// firing's run is named NAME-YYYYMMDDTHHMMSSZ after the instant it was due.
    Add(Add),
    /// List the schedules (removed ones too), with when each is next due.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show a schedule and its firings.
    ///
    /// Each firing: when it was due, how late it fired, the run it started or why none.
    Show {
        /// The schedule's name.
        name: String,
        /// The last N firings (default 20).
        #[arg(long, value_name = "N", default_value_t = 20)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pause a schedule: nothing fires until it is unpaused.
    ///
    /// What falls due while it is paused is not caught up.
    Pause(Who),
    /// Unpause a schedule: it is next due at its first instant from now.
    #[command(alias = "resume")]
    Unpause(Who),
    /// Remove a schedule: it fires no more.
    ///
    /// It is kept, with its firings, and its name is not reused.
    Remove(Who),
}

#[derive(Args)]
pub(crate) struct Add {
    /// The schedule's name: letters, digits, '.', '_', '-' (at most 64).
    name: String,
    /// The workflow file of the runs it starts (read again at each firing).
    #[arg(long, value_name = "PATH")]
    workflow: PathBuf,
    /// The runs' input as JSON (default: the workflow's `input` file), read now.
    #[arg(long, value_name = "FILE")]
    input: Option<String>,
    /// A cron expression: minute hour day-of-month month day-of-week, e.g. "0 8 * * MON-FRI".
    #[arg(
        long,
        value_name = "EXPR",
        required_unless_present = "every",
        conflicts_with = "every"
    )]
    cron: Option<String>,
    /// An interval instead: 90s, 15m, 2h 30m, 1d, PT2H (from now on).
    #[arg(long, value_name = "DURATION")]
    every: Option<String>,
    /// The time zone the cron expression is read in (an IANA name).
    #[arg(long, value_name = "TZ", default_value = "UTC")]
    time_zone: String,
    /// While the run it started last is still going: skip the firing, queue one to start
    /// when it ends, or cancel it and start.
    #[arg(long, value_name = "RULE", default_value = "skip", value_parser = ["skip", "queue-one", "cancel-previous"])]
    overlap: String,
    /// After downtime: start every firing missed (the latest 100) or only the latest.
    #[arg(long, value_name = "RULE", default_value = "latest", value_parser = ["all", "latest"])]
    catch_up: String,
    /// Who makes it (recorded in the schedule and in every run it starts).
    #[arg(long, value_name = "NAME")]
    by: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub(crate) struct Who {
    /// The schedule's name.
    name: String,
    /// Who does it (recorded with the schedule).
    #[arg(long, value_name = "NAME")]
    by: String,
}

pub(crate) fn main(command: ScheduleCommand, data: &Path) -> ExitCode {
    let data = data.to_path_buf();
    crate::command::run_async(Some(data), |data, out| {
        Box::pin(async move {
            execute(command, &data, out).await?;
            Ok(crate::command::EXIT_COMPLETED)
        })
    })
}

/// The schedules of the store: the PostgreSQL database `--store` names, else the data
/// directory `data` (made a store first when a change is the first thing in it).
async fn schedules(data: &Path, changes: bool) -> anyhow::Result<Schedules> {
    match crate::command::postgres_url() {
        Some(url) => {
            let (doing, access) = if changes {
                ("to change the schedules", Access::Write)
            } else {
                ("to read the schedules", Access::Read)
            };
            Ok(Schedules::Database(
                crate::command::open_postgres(url, doing, access).await?,
            ))
        }
        None => {
            if changes {
                crate::kill_switch::make_store(data).await?;
            }
            Ok(Schedules::File(docket_app::ScheduleFile::new(data)))
        }
    }
}

fn now_ms() -> i64 {
    SystemClock.now_ms()
}

async fn execute(command: ScheduleCommand, data: &Path, out: &mut String) -> anyhow::Result<()> {
    match command {
        ScheduleCommand::Add(a) => add(a, data, out).await,
        ScheduleCommand::List { json } => {
            let all = schedules(data, false).await?.list().await?;
            if json {
                let doc = json!({ "schedules": all.iter().map(schedule_json).collect::<Vec<_>>() });
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&doc).unwrap_or_default()
                );
                return Ok(());
            }
            if all.is_empty() {
                let _ = writeln!(out, "no schedules");
            }
            for s in &all {
                let _ = writeln!(out, "{}", line(s));
            }
            Ok(())
        }
        ScheduleCommand::Show { name, limit, json } => {
            let store = schedules(data, false).await?;
            let s = store.get(&name).await?;
            let firings = store.firings(Some(&name), limit).await?;
            if json {
                let mut doc = schedule_json(&s);
                doc["firings"] = json!(firings);
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&doc).unwrap_or_default()
                );
                return Ok(());
            }
            let _ = writeln!(out, "{}", line(&s));
            let _ = writeln!(
                out,
                "  workflow {}; overlap {}, catch-up {}; made by {} at {}",
                s.workflow,
                s.overlap.as_str(),
                s.catch_up.as_str(),
                s.made_by,
                date_ms(s.made_at_ms)
            );
            for (what, c) in [
                ("paused", &s.paused),
                ("unpaused", &s.unpaused),
                ("removed", &s.removed),
            ] {
                if let Some(c) = c {
                    let _ = writeln!(out, "  {what} by {} at {}", c.by, date_ms(c.at_ms));
                }
            }
            if let Some(q) = s.queued_at_ms {
                let _ = writeln!(out, "  queued: the firing due at {}", date_ms(q));
            }
            if firings.is_empty() {
                let _ = writeln!(out, "  no firings yet");
            }
            for f in &firings {
                let _ = writeln!(out, "  {}", firing_line(f));
            }
            Ok(())
        }
        ScheduleCommand::Pause(w) => {
            let s = schedules(data, true)
                .await?
                .set_paused(&w.name, true, &w.by, now_ms())
                .await?;
            let _ = writeln!(out, "schedule {} paused (by {})", s.name, w.by);
            Ok(())
        }
        ScheduleCommand::Unpause(w) => {
            let s = schedules(data, true)
                .await?
                .set_paused(&w.name, false, &w.by, now_ms())
                .await?;
            let _ = writeln!(
                out,
                "schedule {} unpaused (by {}); next due {}",
                s.name,
                w.by,
                date_ms(s.next_at_ms)
            );
            Ok(())
        }
        ScheduleCommand::Remove(w) => {
            let s = schedules(data, true)
                .await?
                .remove(&w.name, &w.by, now_ms())
                .await?;
            let _ = writeln!(out, "schedule {} removed (by {})", s.name, w.by);
            Ok(())
        }
    }
}

async fn add(a: Add, data: &Path, out: &mut String) -> anyhow::Result<()> {
    // The workflow is checked now and named by an absolute path, read again at each
    // firing wherever the server or worker runs from.
    let path = std::fs::canonicalize(&a.workflow)
        .with_context(|| format!("--workflow {}: cannot read it", a.workflow.display()))?;
    let wf = Workflow::load(&path)?;
    let input = crate::runs::read_input(a.input.as_deref(), &wf)?;
    let store = schedules(data, true).await?;
    let new = NewSchedule {
        name: a.name,
        workflow: path.display().to_string(),
        input,
        cron: a.cron,
        every: a.every,
        time_zone: Some(a.time_zone),
        overlap: Overlap::parse(&a.overlap).ok_or_else(|| anyhow!("--overlap {}", a.overlap))?,
        catch_up: CatchUp::parse(&a.catch_up)
            .ok_or_else(|| anyhow!("--catch-up {}", a.catch_up))?,
        by: a.by,
    };
    let schedule = Schedule::new(new, now_ms()).map_err(|e| match &e {
        docket_app::SchedulesError::Invalid { field, .. } => {
            anyhow!("--{}: {e}", field.replace('_', "-"))
        }
        _ => anyhow!(e),
    })?;
    let s = store.add(schedule).await?;
    if a.json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&schedule_json(&s)).unwrap_or_default()
        );
    } else {
        let _ = writeln!(
            out,
            "schedule {} made (by {}): {}, next due {}; kept in {}",
            s.name,
            s.made_by,
            s.timing.describe(),
            date_ms(s.next_at_ms),
            store.location()
        );
    }
    Ok(())
}

fn line(s: &Schedule) -> String {
    format!(
        "{}  {}  {}  next {}{}",
        s.name,
        s.state_word(),
        s.timing.describe(),
        date_ms(s.next_at_ms),
        s.last_run
            .as_deref()
            .map(|r| format!("  last run {r}"))
            .unwrap_or_default()
    )
}

fn firing_line(f: &Firing) -> String {
    let mut text = format!(
        "{} {} ({} ms late)",
        date_ms(f.due_at_ms),
        f.outcome.as_str().replace('_', " "),
        f.late_ms
    );
    if let Some(run) = &f.run_id {
        let _ = write!(text, " run {run}");
    }
    if let Some(p) = &f.previous_run {
        let _ = write!(text, " (previous run {p})");
    }
    if let (Some(until), Some(n)) = (f.missed_until_ms, f.missed_count) {
        let _ = write!(text, ": {n} firings until {}", date_ms(until));
    }
    if let Some(e) = &f.error {
        let _ = write!(text, ": {e}");
    }
    text
}

/// A schedule as `--json` and the API show it.
pub(crate) fn schedule_json(s: &Schedule) -> serde_json::Value {
    let mut v = serde_json::to_value(s).unwrap_or_default();
    v["state"] = json!(s.state_word());
    v
}
