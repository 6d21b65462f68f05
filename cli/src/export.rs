//! `docket export` and `docket verify-export`: a run as a file an auditor verifies without
//! docket (`--format jsonl`, docs/export-format.md) or reads (`--format html`, one
//! self-contained page, docs/report.md), and the offline check of an export.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use clap::{Args, ValueEnum};
use docket_app::Store;
use docket_decider::RunId;
use docket_evidence::{ExportRequest, LoggedEvent, Sealing, VerifierKey};
use docket_runtime::Runtime;
use docket_store::{EventStore as _, StreamId};
use serde_json::json;

use crate::command::{EXIT_COMPLETED, EXIT_FAILED};

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// What `docket export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// JSON lines an auditor verifies with BLAKE3, SHA-256 and Ed25519 alone: every event
    /// with the exact bytes its hashes cover, the tree head, the signed checkpoint
    /// (docs/export-format.md).
    Jsonl,
    /// One self-contained HTML page (no script, nothing loaded from the network): header,
    /// verification, denials, episode tree, handoffs, decisions, effects, human
    /// decisions, budgets over time, events (docs/report.md).
    Html,
}

impl Format {
    fn extension(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::Html => "html",
        }
    }
}

/// The arguments of `docket export`.
#[derive(Args)]
pub(crate) struct ExportArgs {
    /// The run id.
    run: RunId,
    /// What to write.
    #[arg(long, value_enum)]
    format: Format,
    /// Where to write it: a file, or `-` for standard output (default: RUN.jsonl or
    /// RUN.html in the current directory).
    #[arg(long, value_name = "FILE|-")]
    out: Option<PathBuf>,
    /// Withhold the values at these JSON pointers into the events' payloads
    /// (`/output/claimant/name`; `*` stands for any one step), in every event, or with
    /// `SEQ:POINTER` in event SEQ only. A value is withheld whole: the commitment of the
    /// smallest committed value holding the pointer stays, its disclosure is left out, and
    /// the export still verifies; `docket disclose` reveals it later, value by value.
    /// Only runs recorded in payload encoding 3 can be redacted
    /// (docs/export-format.md#redacted-exports). JSON lines only.
    #[arg(long, value_name = "[SEQ:]POINTER", num_args = 1..)]
    redact: Vec<docket_evidence::Redaction>,
}

/// The arguments of `docket verify-export`.
#[derive(Args)]
pub(crate) struct VerifyExportArgs {
    /// The export (a .jsonl file from `docket export --format jsonl`).
    file: PathBuf,
    /// The verifier key you trust (`name+keyid+key`, as `docket keys show` prints it on
    /// the instance), or a file holding it: the checkpoint must be signed by it. Without
    /// it, the key the export carries is used, which proves only that the file is
    /// consistent with itself.
    #[arg(long, value_name = "KEY|FILE")]
    key: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `docket export`, on the same async runtime and error reporting as the run commands.
pub(crate) fn main(args: ExportArgs, data: Option<PathBuf>) -> std::process::ExitCode {
    crate::command::run_async(data, |data, out| {
        Box::pin(async move {
            let rt = crate::command::open_read_for(&data, &args.run).await?;
            export(&rt, &data, args, out).await
        })
    })
}

async fn export(
    rt: &Runtime<Store>,
    data: &Path,
    args: ExportArgs,
    out: &mut String,
) -> anyhow::Result<u8> {
    let ExportArgs {
        run,
        format,
        out: to,
        redact,
    } = args;
    if !redact.is_empty() && format != Format::Jsonl {
        return Err(anyhow!(
            "--redact applies to --format jsonl: an HTML report shows the run's values as they are"
        ));
    }
    let store = rt.store();
    let stream = StreamId::new(run.as_str()).map_err(|e| anyhow!("run id {run}: {e}"))?;
    let Some(head) = store.head(&stream).await? else {
        return Err(anyhow!(
            "no run {run} in {} (`docket runs` lists them)",
            crate::command::place(store, data)
        ));
    };
    let sealing = docket_evidence::run_seal(store, data, run.as_str(), head.seq).await?;
    let events;
    let request = match format {
        Format::Jsonl => ExportRequest::Jsonl { redact: &redact },
        Format::Html => {
            events = logged_events(rt, &run).await?;
            ExportRequest::Html { events: &events }
        }
    };
    let bytes = docket_evidence::export_run(store, &stream, head.seq, &sealing, request).await?;
    let what = match format {
        Format::Jsonl => "export",
        Format::Html => "report",
    };
    let path = to.unwrap_or_else(|| PathBuf::from(format!("{run}.{}", format.extension())));
    if path == Path::new("-") {
        std::io::stdout()
            .lock()
            .write_all(&bytes)
            .with_context(|| format!("cannot write the {what} to standard output"))?;
        return Ok(EXIT_COMPLETED);
    }
    std::fs::write(&path, &bytes)
        .with_context(|| format!("cannot write the {what} to {}", path.display()))?;
    let signed = match &sealing {
        Sealing::Signed(seal) => format!("signed by {}", seal.key.label()),
        Sealing::Unsealed => "not signed: the run has no checkpoint at this size (a finished run is sealed once the data directory has a key: `docket keys generate`)".to_owned(),
        Sealing::Unverified { why, .. } => {
            say!(
                "warning: run {run} is exported unsigned: {why}; `docket verify {run}` says more"
            );
            format!("not signed: {why}")
        }
    };
    outln!(
        out,
        "wrote the {what} of run {run} ({} events, {} bytes) to {}; {signed}",
        head.seq,
        bytes.len(),
        path.display()
    );
    if format == Format::Jsonl {
        outln!(
            out,
            "check it with `docket verify-export {}`",
            path.display()
        );
    }
    Ok(EXIT_COMPLETED)
}

/// Writes run `run`'s export in `format` to `path`, as `docket export --out PATH` does
/// (for `docket demo`).
pub(crate) async fn export_to(
    rt: &Runtime<Store>,
    data: &Path,
    run: &RunId,
    format: Format,
    path: &Path,
) -> anyhow::Result<()> {
    let args = ExportArgs {
        run: run.clone(),
        format,
        out: Some(path.to_owned()),
        redact: Vec::new(),
    };
    export(rt, data, args, &mut String::new()).await.map(drop)
}

/// Run `run`'s events decoded with plain payloads, for its HTML report.
async fn logged_events(rt: &Runtime<Store>, run: &RunId) -> anyhow::Result<Vec<LoggedEvent>> {
    Ok(rt
        .events(run)
        .await?
        .into_iter()
        .map(|e| LoggedEvent {
            seq: e.seq,
            recorded_at_ns: e.recorded_at_ns,
            hash: e.hash,
            event: e.event,
        })
        .collect())
}

/// Checks an export file offline; exit 1 at its first bad line.
pub(crate) fn verify_export(args: &VerifyExportArgs, out: &mut String) -> anyhow::Result<u8> {
    let trusted = args
        .key
        .as_deref()
        .map(|key| {
            let text = match std::fs::read_to_string(key) {
                Ok(text) => text,
                Err(_) => key.to_owned(),
            };
            VerifierKey::parse(text.trim()).map_err(|e| anyhow!("--key: {e}"))
        })
        .transpose()?;
    let path = &args.file;
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open the export {}", path.display()))?;
    let verdict = docket_evidence::verify_export(std::io::BufReader::new(file), trusted.as_ref());
    let shown = path.display();
    match verdict {
        Ok(summary) if args.json => {
            let line = json!({
                "file": shown.to_string(),
                "sound": true,
                "run": summary.run,
                "events": summary.events,
                "root": base64_of(&summary.root.0),
                "signed": summary.checkpoint.is_some(),
                "signed_by": summary.checkpoint.as_ref().map(|c| c.key.clone()),
                "key_trusted": summary.checkpoint.as_ref().is_some_and(|c| c.key_trusted),
                "values_disclosed": summary.disclosed,
                "values_withheld": summary.withheld,
            });
            outln!(out, "{line}");
            Ok(EXIT_COMPLETED)
        }
        Ok(summary) => {
            outln!(
                out,
                "{shown}: sound: run {}, {} events, every record, link and hash checks; tree root {}",
                summary.run,
                summary.events,
                base64_of(&summary.root.0),
            );
            if summary.withheld > 0 {
                outln!(
                    out,
                    "values: {} disclosed, each checked against its commitment; {} withheld (redacted or shredded: their commitments stay, so the chain still verifies)",
                    summary.disclosed,
                    summary.withheld
                );
            }
            match summary.checkpoint {
                Some(seal) if seal.key_trusted => outln!(
                    out,
                    "checkpoint: {} signed by {}, the key you gave",
                    seal.origin,
                    seal.key
                ),
                Some(seal) => outln!(
                    out,
                    "checkpoint: {} signed by {}, the key the export carries; pass --key with the key you trust to check who signed it",
                    seal.origin,
                    seal.key
                ),
                None => outln!(
                    out,
                    "checkpoint: none (the export is not signed; it proves its own consistency, not who wrote it)"
                ),
            }
            Ok(EXIT_COMPLETED)
        }
        Err(bad) if args.json => {
            let line = json!({
                "file": shown.to_string(),
                "sound": false,
                "line": bad.line,
                "error": bad.fault.to_string(),
            });
            outln!(out, "{line}");
            Ok(EXIT_FAILED)
        }
        Err(bad) => {
            outln!(out, "{shown}: {bad}");
            Ok(EXIT_FAILED)
        }
    }
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
