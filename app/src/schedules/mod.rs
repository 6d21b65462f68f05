//! Schedules (docs/schedules.md): runs of a workflow started on a cron expression or an
//! interval, by whatever drives runs (`docket serve` over a data directory, the workers
//! over PostgreSQL). `spec.rs` is what a schedule is and the instants it fires at; `file.rs`
//! keeps the schedules of a data directory in a file beside the log; `fire.rs` fires the
//! schedules due, exactly once per instant: the run a firing starts has an id made of the
//! schedule's name and the instant, so a firing done twice (a crash between starting the
//! run and moving the schedule on, two workers) finds its run already recorded.

use std::path::PathBuf;

use docket_store_postgres::{PgError, PostgresStore, ScheduleRow};
use serde::{Deserialize, Serialize};

use crate::Store;

mod file;
mod fire;
mod spec;

pub use file::{SCHEDULE_FIRINGS_FILE, SCHEDULES_FILE, ScheduleFile};
pub use fire::{Fired, ScheduleFirer};
pub use spec::{
    CatchUp, Change, MAX_CATCH_UP, MAX_NAME, MAX_SCHEDULES, Missed, NewSchedule, Overlap, Plan,
    Schedule, Timing,
};

/// What became of one instant a schedule was due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Its run was started (`run_id`).
    Started,
    /// The run going (`previous_run`) was cancelled, then its run was started.
    StartedAfterCancelling,
    /// Nothing started: the run going (`previous_run`) was still going (overlap `skip`,
    /// or a queued firing replaced by a later one).
    Skipped,
    /// Remembered, to start once the run going (`previous_run`) ends (overlap
    /// `queue-one`).
    Queued,
    /// Fell due while nothing fired the schedule and was not run (catch-up `latest`, or
    /// beyond the catch-up bound).
    Missed,
    /// Its run could not be started (`error` says why: the workflow file gone, ...).
    Failed,
}

impl Outcome {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Started => "started",
            Outcome::StartedAfterCancelling => "started_after_cancelling",
            Outcome::Skipped => "skipped",
            Outcome::Queued => "queued",
            Outcome::Missed => "missed",
            Outcome::Failed => "failed",
        }
    }
}

/// One firing of a schedule, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Firing {
    pub schedule: String,
    /// The instant it was due (ms since the Unix epoch).
    pub due_at_ms: i64,
    /// When it was fired (ms since the Unix epoch), by the clock of the process firing.
    pub fired_at_ms: i64,
    /// How late: `fired_at_ms - due_at_ms`.
    pub late_ms: i64,
    /// Who fired it: `docket serve`, or the worker (as `docket worker` names itself in
    /// its leases).
    #[serde(default)]
    pub fired_by: String,
    pub outcome: Outcome,
    /// The run it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The run still going that it skipped or queued behind, or that it cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_run: Option<String>,
    /// For firings missed together: the last instant of them, and how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed_until_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed_count: Option<u64>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A schedule could not be made, changed, read or fired.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchedulesError {
    /// A field of a schedule that is not what it must be.
    #[error("{message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// The name is taken (by a schedule kept, removed ones included).
    #[error("a schedule named {name:?} exists already{}", if *.removed { " (removed; a name is never reused, so that its runs' ids stay its own)" } else { "" })]
    Exists { name: String, removed: bool },
    /// As many schedules as a store keeps ([`MAX_SCHEDULES`]).
    #[error(
        "{count} schedules are kept already, as many as docket keeps; remove one first (removed ones are kept too)"
    )]
    Full { count: usize },
    /// No schedule of that name.
    #[error("no schedule named {name:?}")]
    Unknown { name: String },
    /// Pausing a paused schedule, unpausing an active one, changing a removed one.
    #[error("schedule {name:?} is {state}: {what}")]
    NotNow {
        name: String,
        state: &'static str,
        what: &'static str,
    },
    /// The schedules file could not be read or written.
    #[error("schedules: cannot {during} {path}: {source}")]
    Io {
        during: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The schedules file is not what docket writes.
    #[error("schedules: {path} is corrupt ({message})")]
    Corrupt { path: PathBuf, message: String },
    /// The database.
    #[error("schedules: {0}")]
    Database(#[from] PgError),
    /// The work on the file was cut short (its thread panicked or the process is
    /// stopping).
    #[error("schedules: the work on {location} did not finish: {message}")]
    Unfinished { location: String, message: String },
    /// Changed by another process meanwhile, again and again.
    #[error("schedule {name:?} kept changing meanwhile; nothing was changed by this request")]
    Busy { name: String },
}

/// The schedules of a store: a data directory's file, or the database's tables.
#[derive(Clone)]
pub enum Schedules {
    File(ScheduleFile),
    Database(PostgresStore),
}

/// How many times a change made against a version that moved meanwhile is tried again.
const TRIES: usize = 8;

impl Schedules {
    /// The schedules of `store`: the database's for a PostgreSQL store, else those of the
    /// data directory `data`.
    #[must_use]
    pub fn of(store: &Store, data: &std::path::Path) -> Schedules {
        match store.postgres() {
            Some(pg) => Schedules::Database(pg.clone()),
            None => Schedules::File(ScheduleFile::new(data)),
        }
    }

    /// Where they are kept, as messages name it.
    #[must_use]
    pub fn location(&self) -> String {
        match self {
            Schedules::File(f) => f.path().display().to_string(),
            Schedules::Database(pg) => {
                format!("PostgreSQL at {} (table docket_schedules)", pg.database())
            }
        }
    }

    /// Every schedule kept, removed ones included, by name.
    ///
    /// # Errors
    /// [`SchedulesError`]: the file or the database.
    pub async fn list(&self) -> Result<Vec<Schedule>, SchedulesError> {
        match self {
            Schedules::File(f) => f.on(ScheduleFile::list).await,
            Schedules::Database(pg) => pg
                .schedules()
                .await?
                .into_iter()
                .map(|r| from_row(&r))
                .collect(),
        }
    }

    /// The schedule named `name`.
    ///
    /// # Errors
    /// [`SchedulesError::Unknown`], the file or the database.
    pub async fn get(&self, name: &str) -> Result<Schedule, SchedulesError> {
        let found = match self {
            Schedules::File(f) => {
                let name = name.to_owned();
                f.on(move |f| f.get(&name)).await?
            }
            Schedules::Database(pg) => {
                pg.schedule(name).await?.map(|r| from_row(&r)).transpose()?
            }
        };
        found.ok_or_else(|| SchedulesError::Unknown {
            name: name.to_owned(),
        })
    }

    /// Keeps a new schedule.
    ///
    /// # Errors
    /// [`SchedulesError::Exists`] for a name taken; the file or the database.
    pub async fn add(&self, schedule: Schedule) -> Result<Schedule, SchedulesError> {
        match self {
            Schedules::File(f) => f.on(move |f| f.add(schedule)).await,
            Schedules::Database(pg) => {
                let row = to_row(&schedule)?;
                let count = pg.schedules().await?.len();
                if count >= MAX_SCHEDULES {
                    return Err(SchedulesError::Full { count });
                }
                if pg.insert_schedule(&row).await? {
                    Ok(schedule)
                } else {
                    let removed = pg
                        .schedule(&schedule.name)
                        .await?
                        .map(|r| from_row(&r))
                        .transpose()?
                        .is_some_and(|s| s.removed.is_some());
                    Err(SchedulesError::Exists {
                        name: schedule.name,
                        removed,
                    })
                }
            }
        }
    }

    /// Writes `schedule` if it is still at the version it was read at (its `version`),
    /// as the next version; whether it was. `release` also ends a firing's claim.
    ///
    /// # Errors
    /// The file or the database.
    pub async fn replace(
        &self,
        schedule: &Schedule,
        release: bool,
    ) -> Result<bool, SchedulesError> {
        match self {
            Schedules::File(f) => {
                let schedule = schedule.clone();
                f.on(move |f| f.replace(&schedule)).await
            }
            Schedules::Database(pg) => {
                let row = to_row(schedule)?;
                Ok(pg.replace_schedule(&row, release).await?)
            }
        }
    }

    /// Ends `holder`'s claim of the schedule `name` without changing it (a database's; a
    /// data directory's schedules are not claimed).
    ///
    /// # Errors
    /// The database.
    pub async fn release(&self, name: &str, holder: &str) -> Result<(), SchedulesError> {
        match self {
            Schedules::File(_) => Ok(()),
            Schedules::Database(pg) => Ok(pg.release_schedule(name, holder).await?),
        }
    }

    /// Applies `change` to the schedule `name` as it stands, against its version, tried
    /// again when another process changed it meanwhile; the schedule as written.
    async fn change(
        &self,
        name: &str,
        change: impl Fn(&mut Schedule) -> Result<(), SchedulesError>,
    ) -> Result<Schedule, SchedulesError> {
        for _ in 0..TRIES {
            let mut schedule = self.get(name).await?;
            change(&mut schedule)?;
            if self.replace(&schedule, false).await? {
                schedule.version += 1;
                return Ok(schedule);
            }
        }
        Err(SchedulesError::Busy {
            name: name.to_owned(),
        })
    }

    /// Pauses (`on`) or unpauses the schedule `name`, recording who and when. Unpaused,
    /// it is next due at its first instant after `at_ms`: what fell due while it was
    /// paused is not caught up.
    ///
    /// # Errors
    /// [`SchedulesError::NotNow`] when it is removed, already paused or not paused;
    /// [`SchedulesError::Unknown`]; the file or the database.
    pub async fn set_paused(
        &self,
        name: &str,
        on: bool,
        by: &str,
        at_ms: i64,
    ) -> Result<Schedule, SchedulesError> {
        self.change(name, |s| {
            let refuse = |what| SchedulesError::NotNow {
                name: s.name.clone(),
                state: s.state_word(),
                what,
            };
            if s.removed.is_some() {
                return Err(refuse("a removed schedule is neither paused nor unpaused"));
            }
            let by = Change {
                by: by.to_owned(),
                at_ms,
            };
            if on {
                if s.paused.is_some() {
                    return Err(refuse("it is paused already"));
                }
                s.paused = Some(by);
            } else {
                if s.paused.is_none() {
                    return Err(refuse("it is not paused"));
                }
                s.paused = None;
                s.unpaused = Some(by);
                s.next_at_ms = s.next_after(at_ms)?;
            }
            Ok(())
        })
        .await
    }

    /// Removes the schedule `name`: it fires no more, and is kept, with its firings, as
    /// removed by `by` at `at_ms`.
    ///
    /// # Errors
    /// [`SchedulesError::NotNow`] when it is removed already; [`SchedulesError::Unknown`];
    /// the file or the database.
    pub async fn remove(
        &self,
        name: &str,
        by: &str,
        at_ms: i64,
    ) -> Result<Schedule, SchedulesError> {
        self.change(name, |s| {
            if s.removed.is_some() {
                return Err(SchedulesError::NotNow {
                    name: s.name.clone(),
                    state: "removed",
                    what: "it is removed already",
                });
            }
            s.removed = Some(Change {
                by: by.to_owned(),
                at_ms,
            });
            s.queued_at_ms = None;
            Ok(())
        })
        .await
    }

    /// Records firings; one recorded already (the same schedule, instant and outcome: a
    /// firing done again after a crash, or by a second worker) is kept as it was.
    ///
    /// # Errors
    /// The file or the database.
    pub async fn record(&self, firings: Vec<Firing>) -> Result<(), SchedulesError> {
        if firings.is_empty() {
            return Ok(());
        }
        match self {
            Schedules::File(f) => f.on(move |f| f.record(&firings)).await,
            Schedules::Database(pg) => {
                let rows = firings
                    .iter()
                    .map(|f| {
                        Ok((
                            f.schedule.clone(),
                            f.due_at_ms,
                            f.outcome.as_str().to_owned(),
                            serde_json::to_string(f).map_err(|e| corrupt_db(pg, &e))?,
                        ))
                    })
                    .collect::<Result<Vec<_>, SchedulesError>>()?;
                Ok(pg.record_firings(&rows).await?)
            }
        }
    }

    /// The firings of `name` (every schedule's when `None`), oldest first, the last
    /// `limit` of them.
    ///
    /// # Errors
    /// The file or the database.
    pub async fn firings(
        &self,
        name: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Firing>, SchedulesError> {
        match self {
            Schedules::File(f) => {
                let name = name.map(str::to_owned);
                f.on(move |f| f.firings(name.as_deref(), limit)).await
            }
            Schedules::Database(pg) => pg
                .firings(name, i64::try_from(limit).unwrap_or(i64::MAX))
                .await?
                .iter()
                .map(|body| serde_json::from_str(body).map_err(|e| corrupt_db(pg, &e)))
                .collect(),
        }
    }

    /// Claims the schedules due by `now_ms` (or holding a queued firing) for firing them:
    /// for a database, each for `hold_ms` against other workers (a worker that dies while
    /// firing leaves it to another once that lapses); a data directory's are fired by the
    /// one process recording in it.
    ///
    /// # Errors
    /// The file or the database.
    pub async fn claim_due(
        &self,
        now_ms: i64,
        holder: &str,
        hold_ms: i64,
    ) -> Result<Vec<Schedule>, SchedulesError> {
        match self {
            Schedules::File(f) => Ok(f
                .on(ScheduleFile::list)
                .await?
                .into_iter()
                .filter(|s| s.active() && (s.next_at_ms <= now_ms || s.queued_at_ms.is_some()))
                .collect()),
            Schedules::Database(pg) => pg
                .claim_schedules(now_ms, holder, hold_ms)
                .await?
                .iter()
                .map(from_row)
                .collect(),
        }
    }
}

fn corrupt_db(pg: &PostgresStore, e: &serde_json::Error) -> SchedulesError {
    SchedulesError::Corrupt {
        path: PathBuf::from(format!("{} (docket_schedules)", pg.database())),
        message: e.to_string(),
    }
}

fn to_row(s: &Schedule) -> Result<ScheduleRow, SchedulesError> {
    Ok(ScheduleRow {
        name: s.name.clone(),
        body: serde_json::to_string(s).map_err(|e| SchedulesError::Corrupt {
            path: PathBuf::from("docket_schedules"),
            message: e.to_string(),
        })?,
        version: i64::try_from(s.version).unwrap_or(i64::MAX),
        next_at_ms: s.next_at_ms,
        active: s.active(),
        queued: s.queued_at_ms.is_some(),
    })
}

fn from_row(r: &ScheduleRow) -> Result<Schedule, SchedulesError> {
    let mut s: Schedule = serde_json::from_str(&r.body).map_err(|e| SchedulesError::Corrupt {
        path: PathBuf::from(format!("docket_schedules row {:?}", r.name)),
        message: e.to_string(),
    })?;
    s.version = u64::try_from(r.version).unwrap_or(0);
    Ok(s)
}

#[cfg(test)]
mod tests;
