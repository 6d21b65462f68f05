//! Evidence about recorded runs that an auditor can check without trusting docket.
//!
//! The store keeps each run's hash chain and Merkle tree (`docket_store::merkle`); this
//! crate turns them into things an outsider can hold: signed checkpoints, proofs,
//! verification of a whole data directory, exports in documented formats and reports.
//! It reads the log and never drives a run: nothing here calls an agent, a tool or an
//! effect executor.

// A library reports every failure as an error value naming what and where.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod export;

pub use export::{
    BadLine, EXPORT_FORMAT, EXPORT_VERSION, ExportError, ExportSummary, LineFault, RunExport, Seal,
    verify_export, write_jsonl,
};
