//! Forensic replay: re-derive every decision a run recorded, with the bundle and the
//! decider version it recorded, and say where and why a log diverges
//! (docs/replay.md). Nothing here calls an agent, a tool or an effect executor: the
//! recorded answers are the inputs, and the decider is pure.
//!
//! ```text
//! recorded events ──▶ batches (an input and what was decided of it)
//!                       │ decide(state, recorded bundle, input) == recorded?
//!                       ▼
//!                  ReplayReport: counts, the run's result, or the first Divergence
//! ```

// A library reports every failure as an error value naming what and where; it never
// aborts its caller. (Tests are exempt: see clippy.toml.)
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod affected;
mod align;
mod causes;
mod decisions;
mod diff;
mod fork;
mod inspect;
mod report;
mod what_if;

pub use affected::{Affected, AffectedRun, RuleEffect, affected_runs};
pub use align::{FieldDiff, OnlyIn, RunDiff, Step, StepDiff, diff_runs, steps};
pub use decisions::{DecisionArea, Outcome};
pub use diff::{Difference, differences};
pub use fork::{ForkError, ForkPlan, ForkSpec, Parting, plan_fork};
pub use inspect::{
    BudgetAt, CircuitAt, EpisodeAt, FlowAt, Inspection, OpenTicket, POINTS, PendingCall,
    PendingTool, Received, episode_tree, inspect, inspect_from, is_denial, point_in, request_hash,
    state_at, state_at_from,
};
pub use report::{
    DIVERGENCE, Divergence, REJECTED, ReplayError, ReplayReport, Rewording, replay,
    replay_with_progress, replay_with_shredded,
};
pub use what_if::{
    Change, ChangeKind, Consequence, Decided, PathChange, WhatIf, decision_of, what_if,
    what_if_with_shredded,
};
