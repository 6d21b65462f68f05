//! docket's application layer: what the `docket` command (`docket-cli`) and the server
//! (`docket-serve`) both do over a data directory, above the runtime (`docket-runtime`),
//! replay (`docket-replay`) and evidence (`docket-evidence`):
//! - [`App`]: starting, resuming, deciding, overriding, cancelling and forking a run, each
//!   followed by sealing the runs that finished (when the data directory has a signing
//!   key, docs/checkpoints.md); [`App::seal`] alone for a caller that drives runs
//!   itself;
//! - [`replace_handoff_rules`]: a new version of a bundle's handoff rules, registered,
//!   with the recorded runs of that bundle the change would have decided otherwise
//!   ([`affected_runs`], replay's what-if of each).
//!
//! - [`HandedOn`]: a run driven on after a person's input, or queued for workers where
//!   they share the runs ([`App::hand_on`]);
//! - [`copy_store`]: every run of one store into another, byte for byte;
//! - [`Store`]: the backend runs are recorded in, a data directory or a PostgreSQL
//!   database ([`StoreLocation`], as `--store` names it);
//! - [`KillSwitches`]: the kill switches of a store (its data directory's file, or the
//!   database's tables), and [`kill_switch_source`], what the runtime reads them through;
//! - [`Schedules`]: the schedules of a store (docs/schedules.md), and [`ScheduleFirer`],
//!   which fires those due, exactly once per instant;
//! - [`option_number`]: a person's answer to a question ticket, given as an option's text,
//!   as the option's number.
//!
//! It prints nothing and names no command: its errors carry data, and each front end
//! words them for its people.

// A library reports every failure as an error value naming what and where; it never
// aborts its caller.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod choice;
mod copy;
mod drive;
mod governance;
mod hand_on;
mod kill_switch;
mod schedules;
mod seal;
mod store;
mod timers;
mod worker;

pub use choice::{ChoiceError, option_number};
pub use copy::{Copied, CopyError, CopyKeysError, KeysAt, copy_keys, copy_store};
pub use drive::App;
pub use governance::{ReplaceError, RulesReplaced, affected_runs, replace_handoff_rules};
pub use hand_on::HandedOn;
pub use kill_switch::{DatabaseKillSwitch, KillSwitches, KillSwitchesError, kill_switch_source};
pub use schedules::{
    CatchUp, Change, Fired, Firing, MAX_CATCH_UP, MAX_NAME, MAX_SCHEDULES, Missed, NewSchedule,
    Outcome, Overlap, Plan, SCHEDULE_FIRINGS_FILE, SCHEDULES_FILE, Schedule, ScheduleFile,
    ScheduleFirer, Schedules, SchedulesError, Timing,
};
pub use seal::{Unsealed, first_key};
pub use store::{Store, StoreLocation};
pub use timers::DueTimers;
pub use worker::{WorkerConfig, WorkerError, WorkerReport, work};
