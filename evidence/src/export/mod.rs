//! A run as a file an auditor verifies without docket: `docket export RUN --format jsonl`
//! writes it, `docket verify-export FILE` (and the reference verifier in Python,
//! `examples/verifier/`) checks it. The format is specified in docs/export-format.md.

mod check;
mod jsonl;
mod run;

pub use check::{BadLine, ExportSummary, LineFault, SealSummary, verify_export};
pub use jsonl::{
    EXPORT_FORMAT, EXPORT_VERSION, ExportError, Redaction, RunExport, Seal, referenced_blobs,
    write_jsonl,
};
pub use run::{ExportRequest, RunExportError, RunSeal, Sealing, export_run, run_seal};
