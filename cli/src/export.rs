//! `docket export` and `docket verify-export`: a run as a file an auditor verifies without
//! docket (docs/export-format.md).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, anyhow};
use clap::ValueEnum;
use docket_decider::RunId;
use docket_evidence::RunExport;
use docket_store::{EmbeddedStore, EventStore, Payload, StreamId};
use futures::StreamExt;
use serde_json::json;

use crate::runs::{EXIT_COMPLETED, EXIT_FAILED};

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// What `docket export` writes.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum ExportFormat {
    /// JSON lines an auditor verifies with BLAKE3, SHA-256 and Ed25519 alone
    /// (docs/export-format.md).
    Jsonl,
}

/// Writes run `run` of the store in `data` to `out_path` (`-`: standard output; default
/// `<run>.jsonl` in the current directory).
pub(crate) async fn export(
    store: &EmbeddedStore,
    run: &RunId,
    format: ExportFormat,
    out_path: Option<&str>,
    out: &mut String,
) -> anyhow::Result<u8> {
    let stream = StreamId::new(run.as_str()).map_err(|e| anyhow!("{e}"))?;
    let Some(head) = store.head(&stream).await? else {
        return Err(anyhow!(
            "no run {run} in this data directory (`docket runs` lists them)"
        ));
    };
    let mut events = Vec::with_capacity(usize::try_from(head.seq).unwrap_or(0));
    let mut reader = Box::pin(store.read(&stream, 1..=head.seq));
    while let Some(event) = reader.next().await {
        events.push(event.with_context(|| format!("cannot read run {run}"))?);
    }
    let mut blobs = BTreeMap::new();
    for event in &events {
        if let Payload::Blob(r) = &event.payload
            && !blobs.contains_key(&r.hash)
            && let Some(bytes) = store.get_blob(&r.hash).await?
        {
            blobs.insert(r.hash, bytes);
        }
    }
    let ExportFormat::Jsonl = format;
    let export = RunExport {
        run: &stream,
        events: &events,
        blobs: &blobs,
        seal: None,
    };
    let mut bytes = Vec::new();
    docket_evidence::write_jsonl(&export, &mut bytes)?;
    let default_path = format!("{run}.jsonl");
    let path = out_path.unwrap_or(&default_path);
    if path == "-" {
        std::io::stdout()
            .lock()
            .write_all(&bytes)
            .context("cannot write the export to standard output")?;
        return Ok(EXIT_COMPLETED);
    }
    std::fs::write(path, &bytes).with_context(|| format!("cannot write the export to {path}"))?;
    outln!(
        out,
        "wrote {} events of run {run} to {path} (not signed: the run has no checkpoint); check it with `docket verify-export {path}`",
        events.len()
    );
    Ok(EXIT_COMPLETED)
}

/// Checks an export file offline; exit 1 at its first bad line.
pub(crate) fn verify_export(path: &Path, json: bool, out: &mut String) -> anyhow::Result<u8> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open the export {}", path.display()))?;
    let verdict = docket_evidence::verify_export(std::io::BufReader::new(file));
    match (verdict, json) {
        (Ok(summary), false) => {
            outln!(
                out,
                "{}: sound: run {}, {} events, every record, link and hash checks; tree root {} (base64 {})",
                path.display(),
                summary.run,
                summary.events,
                summary.root,
                base64_of(&summary.root.0),
            );
            match summary.checkpoint {
                Some(_) => outln!(out, "checkpoint: present"),
                None => outln!(
                    out,
                    "checkpoint: none (the export is not signed; it proves its own consistency, not who wrote it)"
                ),
            }
            Ok(EXIT_COMPLETED)
        }
        (Ok(summary), true) => {
            let line = json!({
                "file": path.display().to_string(),
                "sound": true,
                "run": summary.run,
                "events": summary.events,
                "root": base64_of(&summary.root.0),
                "signed": summary.checkpoint.is_some(),
            });
            outln!(out, "{line}");
            Ok(EXIT_COMPLETED)
        }
        (Err(bad), false) => {
            outln!(out, "{}: {bad}", path.display());
            Ok(EXIT_FAILED)
        }
        (Err(bad), true) => {
            let line = json!({
                "file": path.display().to_string(),
                "sound": false,
                "line": bad.line,
                "error": bad.fault.to_string(),
            });
            outln!(out, "{line}");
            Ok(EXIT_FAILED)
        }
    }
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
