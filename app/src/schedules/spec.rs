//! What a schedule is (docs/schedules.md): its name, the workflow and input of the runs it
//! starts, when it fires (a cron expression in a time zone, or an interval), what it does
//! when the run it started last is still going, and after downtime; and, computed from
//! these alone, the instants it fires at. No clock is read here: every function is given
//! the time.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::SchedulesError;

/// The most firings of one schedule started at once after downtime (catch-up `all`); the
/// earlier ones are recorded as missed, together.
pub const MAX_CATCH_UP: usize = 100;

/// The most schedules a store keeps (removed ones included): each active one is read at
/// every round of firing.
pub const MAX_SCHEDULES: usize = 1_000;

/// The longest a schedule's name may be: its runs' ids add 17 characters to it.
pub const MAX_NAME: usize = 64;

/// When a schedule fires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Timing {
    /// At each instant a cron expression names (5 fields, to the minute), read
    /// in a time zone (an IANA name, `UTC` by default).
    Cron { cron: String, time_zone: String },
    /// Every interval (`90s`, `15m`, `1h`, `PT2H`), counted from when the schedule was
    /// made.
    Every { every: String, every_ms: i64 },
}

/// What a firing does while the run the schedule started last is still going.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Overlap {
    /// Starts nothing: the firing is recorded as skipped.
    Skip,
    /// Remembers one firing, started once the run going ends (a later firing replaces it).
    QueueOne,
    /// Cancels the run going (`run.cancelled`, by the schedule), then starts.
    CancelPrevious,
}

/// What a schedule does with the firings that fell due while nothing fired it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CatchUp {
    /// Starts each (the latest [`MAX_CATCH_UP`]; earlier ones are recorded as missed).
    All,
    /// Starts only the latest; the others are recorded as missed.
    Latest,
}

impl Overlap {
    /// `skip`, `queue-one` or `cancel-previous`.
    #[must_use]
    pub fn parse(word: &str) -> Option<Overlap> {
        match word {
            "skip" => Some(Overlap::Skip),
            "queue-one" => Some(Overlap::QueueOne),
            "cancel-previous" => Some(Overlap::CancelPrevious),
            _ => None,
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::QueueOne => "queue-one",
            Overlap::CancelPrevious => "cancel-previous",
        }
    }
}

impl CatchUp {
    /// `all` or `latest`.
    #[must_use]
    pub fn parse(word: &str) -> Option<CatchUp> {
        match word {
            "all" => Some(CatchUp::All),
            "latest" => Some(CatchUp::Latest),
            _ => None,
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::All => "all",
            CatchUp::Latest => "latest",
        }
    }
}

/// Who changed a schedule (paused, unpaused or removed it) and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub by: String,
    /// ms since the Unix epoch.
    pub at_ms: i64,
}

/// A schedule as kept: what it is, who made it, and where its firing stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Its name: letters, digits, `.`, `_`, `-`, starting with a letter or digit, at most
    /// [`MAX_NAME`]; never reused, even once removed.
    pub name: String,
    /// The workflow file of the runs it starts (an absolute path), loaded at each firing.
    pub workflow: String,
    /// The input of every run it starts.
    pub input: Value,
    pub timing: Timing,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    /// Who made it, and when (ms since the Unix epoch).
    pub made_by: String,
    pub made_at_ms: i64,
    /// Paused: nothing fires until it is unpaused, and the firings meanwhile are not
    /// caught up.
    #[serde(default)]
    pub paused: Option<Change>,
    /// The last unpause.
    #[serde(default)]
    pub unpaused: Option<Change>,
    /// Removed: it fires no more, and is kept with its firings.
    #[serde(default)]
    pub removed: Option<Change>,
    /// The next instant it is due, ms since the Unix epoch.
    pub next_at_ms: i64,
    /// The run its last firing started.
    #[serde(default)]
    pub last_run: Option<String>,
    /// A firing remembered under `queue-one`: the instant it was due.
    #[serde(default)]
    pub queued_at_ms: Option<i64>,
    /// Changes so far: every change is made against the version read (a change made
    /// meanwhile by another process wins, and this one is tried again or dropped).
    #[serde(default)]
    pub version: u64,
}

/// A schedule to make, as a person gives it.
#[derive(Clone, Debug)]
pub struct NewSchedule {
    pub name: String,
    pub workflow: String,
    pub input: Value,
    /// A cron expression, or else `every`.
    pub cron: Option<String>,
    pub every: Option<String>,
    /// Default `UTC`.
    pub time_zone: Option<String>,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    pub by: String,
}

/// Whether `name` may name a schedule (see [`Schedule::name`]).
fn check_name(name: &str) -> Result<(), SchedulesError> {
    let why = if name.is_empty() {
        Some("is empty".to_owned())
    } else if name.len() > MAX_NAME {
        Some(format!("is longer than {MAX_NAME} characters"))
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        Some(format!("has {c:?}"))
    } else if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        Some("does not start with a letter or digit".to_owned())
    } else {
        None
    };
    match why {
        Some(why) => Err(SchedulesError::Invalid {
            field: "name",
            message: format!(
                "schedule name {name:?} {why}; use letters, digits, '.', '_' or '-' (at most {MAX_NAME}, starting with a letter or digit)"
            ),
        }),
        None => Ok(()),
    }
}

/// The time zone named `name` (IANA, from the time zone database built into docket).
fn time_zone(name: &str) -> Result<jiff::tz::TimeZone, SchedulesError> {
    jiff::tz::db()
        .get(name)
        .map_err(|e| SchedulesError::Invalid {
            field: "time_zone",
            message: format!(
                "unknown time zone {name:?} (give an IANA name such as UTC or Europe/Paris): {e}"
            ),
        })
}

/// The cron expression `expr` read in the time zone `zone`.
fn cron(expr: &str, zone: &str) -> Result<cronexpr::Crontab, SchedulesError> {
    let invalid = |why: String| SchedulesError::Invalid {
        field: "cron",
        message: format!(
            "{expr:?} is not a cron expression (five fields: minute hour day-of-month month day-of-week, e.g. \"0 8 * * MON-FRI\"): {why}"
        ),
    };
    let fields = expr.split_whitespace().count();
    if fields != 5 {
        return Err(invalid(format!("it has {fields} fields")));
    }
    time_zone(zone)?;
    cronexpr::parse_crontab(&format!("{} {zone}", expr.trim())).map_err(|e| invalid(e.to_string()))
}

impl Timing {
    /// The timing a person gives: exactly one of a cron expression (in `time_zone`) and an
    /// interval, each checked.
    ///
    /// # Errors
    /// [`SchedulesError::Invalid`] naming the field.
    pub fn parse(
        cron_expr: Option<&str>,
        every: Option<&str>,
        zone: Option<&str>,
    ) -> Result<Timing, SchedulesError> {
        match (cron_expr, every) {
            (Some(_), Some(_)) => Err(SchedulesError::Invalid {
                field: "every",
                message: "give a cron expression or an interval, not both".to_owned(),
            }),
            (None, None) => Err(SchedulesError::Invalid {
                field: "cron",
                message: "a schedule needs a cron expression or an interval (every)".to_owned(),
            }),
            (Some(expr), None) => {
                let zone = zone.unwrap_or("UTC");
                time_zone(zone)?;
                cron(expr, zone)?;
                Ok(Timing::Cron {
                    cron: expr.trim().to_owned(),
                    time_zone: zone.to_owned(),
                })
            }
            (None, Some(text)) => {
                if zone.is_some_and(|z| z != "UTC") {
                    return Err(SchedulesError::Invalid {
                        field: "time_zone",
                        message: "a time zone reads a cron expression; an interval is the same in every zone".to_owned(),
                    });
                }
                let ms = docket_decider::wait_duration_ms(text).map_err(|message| {
                    SchedulesError::Invalid {
                        field: "every",
                        message,
                    }
                })?;
                if ms < 1000 {
                    return Err(SchedulesError::Invalid {
                        field: "every",
                        message: format!("{text:?} is shorter than a second"),
                    });
                }
                Ok(Timing::Every {
                    every: text.trim().to_owned(),
                    every_ms: ms,
                })
            }
        }
    }

    /// How it reads: `cron "0 8 * * *" (Europe/Paris)` or `every 15m`.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Timing::Cron { cron, time_zone } => format!("cron {cron:?} ({time_zone})"),
            Timing::Every { every, .. } => format!("every {every}"),
        }
    }
}

impl Schedule {
    /// A new schedule made at `now_ms`, first due at its first instant after then.
    ///
    /// # Errors
    /// [`SchedulesError::Invalid`]: the name, the timing, or nobody named as its maker.
    pub fn new(new: NewSchedule, now_ms: i64) -> Result<Schedule, SchedulesError> {
        check_name(&new.name)?;
        if new.by.trim().is_empty() {
            return Err(SchedulesError::Invalid {
                field: "by",
                message: "who makes the schedule is required".to_owned(),
            });
        }
        let timing = Timing::parse(
            new.cron.as_deref(),
            new.every.as_deref(),
            new.time_zone.as_deref(),
        )?;
        let mut schedule = Schedule {
            name: new.name,
            workflow: new.workflow,
            input: new.input,
            timing,
            overlap: new.overlap,
            catch_up: new.catch_up,
            made_by: new.by,
            made_at_ms: now_ms,
            paused: None,
            unpaused: None,
            removed: None,
            next_at_ms: 0,
            last_run: None,
            queued_at_ms: None,
            version: 0,
        };
        schedule.next_at_ms = schedule.next_after(now_ms)?;
        Ok(schedule)
    }

    /// Whether it fires (neither paused nor removed).
    #[must_use]
    pub fn active(&self) -> bool {
        self.paused.is_none() && self.removed.is_none()
    }

    /// `active`, `paused` or `removed`.
    #[must_use]
    pub fn state_word(&self) -> &'static str {
        if self.removed.is_some() {
            "removed"
        } else if self.paused.is_some() {
            "paused"
        } else {
            "active"
        }
    }

    /// The first instant it fires at strictly after `after_ms` (ms since the Unix epoch).
    ///
    /// # Errors
    /// [`SchedulesError::Invalid`] when its cron expression or time zone no longer parse
    /// (a file edited by hand), or the expression names no instant in the next four years.
    pub fn next_after(&self, after_ms: i64) -> Result<i64, SchedulesError> {
        match &self.timing {
            Timing::Every { every_ms, .. } => {
                let every = (*every_ms).max(1);
                let since = after_ms.saturating_sub(self.made_at_ms);
                let k = if since < 0 { 0 } else { since / every + 1 };
                Ok(self.made_at_ms.saturating_add(k.saturating_mul(every)))
            }
            Timing::Cron {
                cron: expr,
                time_zone: zone,
            } => {
                let tab = cron(expr, zone)?;
                let tz = time_zone(zone)?;
                let find = |ms: i64| {
                    let at = cronexpr::MakeTimestamp::from_millisecond(ms)
                        .map_err(|e| no_instant(expr, &e))?;
                    tab.find_next(at)
                        .map(|z| z.timestamp().as_millisecond())
                        .map_err(|e| no_instant(expr, &e))
                };
                // A time of day read twice when the clocks go back fires once, at its
                // first occurrence: the wall clock of a firing never goes back.
                let floor = zoned(after_ms, &tz)?.datetime();
                let mut next = find(after_ms)?;
                for _ in 0..10_000 {
                    if zoned(next, &tz)?.datetime() > floor {
                        break;
                    }
                    next = find(next)?;
                }
                Ok(next)
            }
        }
    }

    /// The id of the run its firing due at `due_ms` starts: `NAME-YYYYMMDDTHHMMSSZ` (UTC),
    /// the same whichever process fires it, so that a run is started once per firing.
    #[must_use]
    pub fn run_id(&self, due_ms: i64) -> String {
        let stamp = jiff::Timestamp::from_millisecond(due_ms)
            .map(|t| t.strftime("%Y%m%dT%H%M%SZ").to_string())
            .unwrap_or_else(|_| due_ms.to_string());
        format!("{}-{stamp}", self.name)
    }

    /// What firing it at `now_ms` does with the instants due since [`Schedule::next_at_ms`]
    /// under its catch-up rule; `None` when nothing is due.
    ///
    /// # Errors
    /// As [`Schedule::next_after`].
    pub fn plan(&self, now_ms: i64) -> Result<Option<Plan>, SchedulesError> {
        if self.next_at_ms > now_ms {
            return Ok(None);
        }
        // The newest MAX_CATCH_UP instants due, oldest first; the older ones counted.
        let mut due = VecDeque::new();
        let mut older = 0u64;
        let mut older_until = self.next_at_ms;
        match &self.timing {
            Timing::Every { every_ms, .. } => {
                let every = (*every_ms).max(1);
                let total = (now_ms - self.next_at_ms) / every + 1;
                let first = (total - i64::try_from(MAX_CATCH_UP).unwrap_or(i64::MAX)).max(0);
                for k in first..total {
                    due.push_back(self.next_at_ms.saturating_add(k.saturating_mul(every)));
                }
                if first > 0 {
                    older = u64::try_from(first).unwrap_or(0);
                    older_until = self
                        .next_at_ms
                        .saturating_add((first - 1).saturating_mul(every));
                }
            }
            Timing::Cron { .. } => {
                // Counted one by one, up to a bound (minutes of years of downtime).
                let mut at = self.next_at_ms;
                let mut seen = 0u64;
                while at <= now_ms && seen < MAX_COUNTED {
                    due.push_back(at);
                    if due.len() > MAX_CATCH_UP
                        && let Some(gone) = due.pop_front()
                    {
                        older += 1;
                        older_until = gone;
                    }
                    seen += 1;
                    at = self.next_after(at)?;
                }
            }
        }
        let older = (older > 0).then_some(Missed {
            from_ms: self.next_at_ms,
            until_ms: older_until,
            count: older,
        });
        let mut due: Vec<i64> = due.into();
        let (start, missed) = match self.catch_up {
            CatchUp::All => (due, Vec::new()),
            CatchUp::Latest => {
                let latest = due.pop().into_iter().collect();
                (latest, due)
            }
        };
        Ok(Some(Plan {
            start,
            missed,
            older,
            next_at_ms: self.next_after(now_ms)?,
        }))
    }
}

/// How many instants of a cron expression one firing counts after downtime (five million
/// minutes: over nine years); beyond, the rest are neither counted nor started.
const MAX_COUNTED: u64 = 5_000_000;

/// `ms` as a time in `zone`.
fn zoned(ms: i64, zone: &jiff::tz::TimeZone) -> Result<jiff::Zoned, SchedulesError> {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_zoned(zone.clone()))
        .map_err(|e| SchedulesError::Invalid {
            field: "next_at_ms",
            message: format!("{ms} is no time docket can read: {e}"),
        })
}

fn no_instant(expr: &str, e: &cronexpr::Error) -> SchedulesError {
    SchedulesError::Invalid {
        field: "cron",
        message: format!("{expr:?} names no instant to come: {e}"),
    }
}

/// What one firing does with the instants due (all in ms since the Unix epoch, oldest
/// first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The instants whose runs it starts (under its overlap rule).
    pub start: Vec<i64>,
    /// The instants it records as missed, one by one (catch-up `latest`).
    pub missed: Vec<i64>,
    /// Instants older than those, recorded as missed together.
    pub older: Option<Missed>,
    /// When it is due next.
    pub next_at_ms: i64,
}

/// Firings missed together: from, until (the last of them) and how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Missed {
    pub from_ms: i64,
    pub until_ms: i64,
    pub count: u64,
}
