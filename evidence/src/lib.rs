//! Evidence about recorded runs that an auditor can check without trusting docket.
//!
//! The store keeps each run's hash chain and Merkle tree (`docket_store::merkle`); this
//! crate turns them into things an outsider can hold: signed checkpoints, proofs,
//! verification of a whole data directory, exports in documented formats and reports.
//! It reads the log and never drives a run: nothing here calls an agent, a tool or an
//! effect executor.

// A library reports every failure as an error value naming what and where.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod report;

pub use report::{
    ChainCheck, CheckpointCheck, LoggedEvent, ReportError, Verification, date_ms, date_ns,
    html_report,
};
