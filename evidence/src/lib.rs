//! Evidence about recorded runs that an auditor can check without trusting docket.
//!
//! The store keeps each run's hash chain and Merkle tree (`docket_store::merkle`); this
//! crate turns them into things an outsider can hold: signed checkpoints, proofs,
//! verification of a whole data directory, exports in documented formats and reports.
//! It reads the log and never drives a run: nothing here calls an agent, a tool or an
//! effect executor.

// A library reports every failure as an error value naming what and where.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod checkpoint;
mod export;
mod keys;
mod note;
mod report;
mod seal;
mod snapshot_check;
mod verify;

pub use checkpoint::{
    Checkpoint, CheckpointError, SignedCheckpoint, Subject, heads_origin, run_origin,
};
pub use export::{
    BadLine, EXPORT_FORMAT, EXPORT_VERSION, ExportError, ExportRequest, ExportSummary, LineFault,
    Redaction, RunExport, RunExportError, RunSeal, Seal, SealSummary, Sealing, export_run,
    referenced_blobs, run_seal, verify_export, write_jsonl,
};
pub use keys::{
    KeyError, KeyPlace, default_name as default_key_name, first_key, generate as generate_key,
    generate_in as generate_key_in, keys_dir, record_verifier, retire_verifier, signer, signer_in,
    verifier, verifiers,
};
pub use note::{NoteError, NoteSignature, SignedNote, SignerKey, VerifierKey, check_key_name};
pub use report::{
    ChainCheck, CheckpointCheck, LoggedEvent, ReportError, ReportVerification, date_ms, date_ns,
    html_report,
};
pub use seal::{
    FINISHING_KINDS, HEADS_STREAM, HeadsLog, PublishError, Published, RunSealed, SEALED_KIND,
    SEALED_VERSION, SealError, SealReport, heads_checkpoint_path, is_run_stream,
    keep_heads_checkpoint, publish_checkpoint, seal_finished, seal_runs, seals_of,
};
pub use verify::{
    CheckpointVerdict, HeadsVerdict, Problem, RunVerdict, SealSeen, StoreTrust, Verification,
    VerifyError, VerifyOptions, verify, verify_store,
};
