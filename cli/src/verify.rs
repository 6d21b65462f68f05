//! `docket verify` (read-only: over a data directory it never opens the store; over a
//! PostgreSQL store, every stream through the store's own check), and the application
//! layer the run commands drive runs through, which seals the finished ones after them
//! (docs/checkpoints.md).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::Args;
use docket_app::{App, Store, Unsealed};
use docket_evidence::{Problem, Verification, VerifierKey, VerifyOptions};
use docket_runtime::Runtime;
use docket_store::{EventStore as _, StreamId};
use serde_json::json;

/// `docket verify`.
#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// The run to verify (default: every run, as with --all).
    #[arg(value_name = "RUN")]
    run: Option<String>,
    /// Every run in the data directory.
    #[arg(long, conflicts_with = "run")]
    all: bool,
    /// A signed checkpoint you kept earlier (a run's, from `docket verify RUN --json`, or
    /// the heads log's, a copy of <data>/checkpoints/heads.note): its signature is
    /// checked, and that the log now extends it (a consistency proof).
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<PathBuf>,
    /// Trust only this verifier key (name+keyid+base64, or a file holding one) instead
    /// of the data directory's own; repeat for several. Pin the key you were given: whoever
    /// can write the data directory can also replace its key.
    #[arg(long, value_name = "KEY|FILE")]
    key: Vec<String>,
    /// Fail on any finished run without a verified seal, and when there is no key.
    #[arg(long)]
    require_signed: bool,
    /// Print the whole report as JSON.
    #[arg(long)]
    json: bool,
}

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

fn parse_key(arg: &str) -> anyhow::Result<VerifierKey> {
    match VerifierKey::parse(arg) {
        Ok(key) => Ok(key),
        Err(as_key) => {
            let path = Path::new(arg);
            if !path.exists() {
                return Err(anyhow!(
                    "--key {arg}: not a verifier key ({as_key}) nor a file"
                ));
            }
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--key {arg}: cannot read the file"))?;
            VerifierKey::parse(text.trim_end()).map_err(|e| anyhow!("--key {arg}: {e}"))
        }
    }
}

/// Exit 0 when everything checks, 1 on any failure.
pub(crate) fn execute(args: VerifyArgs, data: &Path, out: &mut String) -> anyhow::Result<u8> {
    let _ = args.all;
    let keys = if args.key.is_empty() {
        None
    } else {
        Some(
            args.key
                .iter()
                .map(|k| parse_key(k))
                .collect::<anyhow::Result<Vec<_>>>()?,
        )
    };
    let checkpoint = args
        .checkpoint
        .as_ref()
        .map(|path| {
            std::fs::read_to_string(path)
                .with_context(|| format!("--checkpoint {}: cannot read it", path.display()))
        })
        .transpose()?;
    let options = VerifyOptions {
        run: args.run.clone(),
        checkpoint,
        keys,
        require_signed: args.require_signed,
    };
    let report = docket_evidence::verify(data, &options)?;
    if args.json {
        outln!(
            out,
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print_text(out, &report, args.checkpoint.as_deref());
    }
    Ok(u8::from(!report.is_sound()))
}

/// `docket verify` over the PostgreSQL store `--store` names: every stream (or RUN's)
/// checked by the store itself (`EventStore::verify`: every chain link, hash, blob and
/// Merkle leaf). The data directory's file checks do not apply, and signed seals are
/// checked in an export (`docket verify-export`). Exit 0 when all are sound, 1 otherwise.
pub(crate) async fn execute_store(args: VerifyArgs, out: &mut String) -> anyhow::Result<u8> {
    let Some(url) = crate::command::postgres_url() else {
        return Err(anyhow!("docket verify: no PostgreSQL store named"));
    };
    for (given, flag) in [
        (args.checkpoint.is_some(), "--checkpoint"),
        (!args.key.is_empty(), "--key"),
        (args.require_signed, "--require-signed"),
    ] {
        if given {
            crate::command::not_with_postgres(
                &format!("`docket verify {flag}` (checking signed seals and checkpoints)"),
                "export the run (`docket export RUN --format jsonl --store URL`) and check its signed checkpoint with `docket verify-export FILE --key KEY`",
            )?;
        }
    }
    let store =
        crate::command::open_postgres(url, "to verify it", crate::command::Access::Read).await?;
    let database = store.database().to_owned();
    let streams: Vec<StreamId> = match &args.run {
        Some(run) => {
            let stream = StreamId::new(run).map_err(|e| anyhow!("run id {run}: {e}"))?;
            if store.head(&stream).await?.is_none() {
                return Err(anyhow!(
                    "no run {run} in PostgreSQL at {database} (`docket runs` lists them)"
                ));
            }
            vec![stream]
        }
        None => store
            .streams()
            .await?
            .into_iter()
            .map(|h| h.stream)
            .collect(),
    };
    let mut reports = Vec::with_capacity(streams.len());
    for stream in &streams {
        reports.push(store.verify(stream).await?);
    }
    let failed = reports.iter().filter(|r| !r.is_sound()).count();
    let runs = reports
        .iter()
        .filter(|r| docket_evidence::is_run_stream(r.stream.as_str()))
        .count();
    let about = "every stream verified through the store (chain links, hashes, blobs, Merkle leaves); the data directory's file checks (segments, index, signed seals and the heads checkpoint) do not apply to a PostgreSQL store: `docket verify-export` checks a run's signed checkpoint in its export";
    if args.json {
        let doc = json!({
            "store": "postgres",
            "database": database,
            "note": about,
            "streams": reports.iter().map(|r| json!({
                "stream": r.stream.as_str(),
                "run": docket_evidence::is_run_stream(r.stream.as_str()),
                "verified": r.verified,
                "sound": r.is_sound(),
                "problem": r.first_break.as_ref().map(ToString::to_string),
            })).collect::<Vec<_>>(),
            "sound": failed == 0,
        });
        outln!(
            out,
            "{}",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        );
    } else {
        for r in &reports {
            let what = if docket_evidence::is_run_stream(r.stream.as_str()) {
                r.stream.as_str().to_owned()
            } else {
                format!("stream {}", r.stream)
            };
            match &r.first_break {
                Some(b) => outln!(out, "FAIL  {what}  after {} sound events: {b}", r.verified),
                None => outln!(
                    out,
                    "ok    {what}  {} events, chain, blobs and tree sound",
                    r.verified
                ),
            }
        }
        outln!(out, "note: PostgreSQL at {database}: {about}");
        outln!(
            out,
            "{runs} run(s), {} stream(s): {} sound, {failed} failed; {}",
            reports.len(),
            reports.len() - failed,
            if failed == 0 {
                "verified"
            } else {
                "VERIFICATION FAILED"
            }
        );
    }
    Ok(u8::from(failed > 0))
}

fn problem_text(p: &Problem) -> String {
    match p.seq {
        Some(seq) if !p.what.starts_with("event ") => {
            format!("event {seq}: {} ({})", p.what, p.why)
        }
        _ => format!("{} ({})", p.what, p.why),
    }
}

pub(crate) fn print_text(out: &mut String, report: &Verification, checkpoint: Option<&Path>) {
    let mut failed = 0;
    for run in &report.runs {
        if let Some(p) = &run.problem {
            failed += 1;
            outln!(out, "FAIL  {}  {}", run.run_id, problem_text(p));
            continue;
        }
        let seal = run.seals.iter().max_by_key(|s| s.size);
        let state = match (run.seal_state, seal) {
            ("sealed", Some(s)) => format!(
                "sealed by {}",
                s.signed_by.as_deref().unwrap_or("an unchecked key")
            ),
            ("sealed-then-grew", Some(s)) => format!(
                "sealed at {} events, {} recorded since (not finished again yet)",
                s.size,
                run.events - s.size
            ),
            ("not-sealed-yet", _) => {
                "finished, not sealed yet (the next command that drives runs seals it)".to_owned()
            }
            ("unsigned", _) => "unsigned (no key: `docket keys generate` makes one)".to_owned(),
            _ => "in progress".to_owned(),
        };
        let snapshots = match run.snapshots_checked {
            0 => String::new(),
            1 => ", its snapshot matches the log".to_owned(),
            n => format!(", its {n} snapshots match the log"),
        };
        outln!(
            out,
            "ok    {}  {} events, chain and blobs sound{snapshots}{}, {state}",
            run.run_id,
            run.events,
            match run.shredded {
                0 => String::new(),
                1 => ", 1 value shredded (its tombstone kept)".to_owned(),
                n => format!(", {n} values shredded (their tombstones kept)"),
            }
        );
    }
    let heads = &report.heads;
    match &heads.problem {
        Some(p) => outln!(out, "FAIL  run heads  {}", problem_text(p)),
        None if heads.events == 0 => {}
        None => outln!(
            out,
            "ok    run heads  {} seals{}",
            heads.events,
            match (&heads.checkpoint_size, &heads.checkpoint_signed_by) {
                (Some(size), Some(key)) => format!(", checkpoint at {size} signed by {key}"),
                (Some(size), None) => format!(", checkpoint at {size} (signature not checked)"),
                _ => String::new(),
            }
        ),
    }
    if let Some(cp) = &report.checkpoint {
        let name = checkpoint.map_or_else(String::new, |p| p.display().to_string());
        match &cp.problem {
            Some(p) => outln!(out, "FAIL  checkpoint {name}  {}", problem_text(p)),
            None => outln!(
                out,
                "ok    checkpoint {name}  {} at size {} signed by {}; the log now holds {} and extends it (consistency proof of {} hashes)",
                cp.origin,
                cp.size,
                cp.signed_by.as_deref().unwrap_or("?"),
                cp.now,
                cp.proof_hashes
            ),
        }
    }
    for (stream, p) in &report.stream_problems {
        outln!(out, "FAIL  stream {stream}  {}", problem_text(p));
    }
    if let Some(p) = &report.log_problem {
        outln!(out, "FAIL  log  {}", problem_text(p));
    }
    for note in &report.notes {
        outln!(out, "note: {note}");
    }
    let keys = if report.keys.is_empty() {
        "no key".to_owned()
    } else {
        format!("{} key {}", report.keys_from, report.keys.join(", "))
    };
    outln!(
        out,
        "{} run(s): {} sound, {failed} failed; {keys}; {}",
        report.runs.len(),
        report.runs.len() - failed,
        if report.is_sound() {
            "verified"
        } else {
            "VERIFICATION FAILED"
        }
    );
}

/// The application layer over `rt` and the data directory `data`: each command that
/// drives runs seals the finished ones after it, when the data directory has a key. A
/// failure is reported, not fatal: the command did what it was asked, and the next one
/// catches up.
pub(crate) fn app(rt: &Runtime<Store>, data: &Path) -> App<Store> {
    App::new(rt.clone(), data, unsealed)
}

fn unsealed(e: &Unsealed) {
    match e {
        Unsealed::Key(_) => say!("warning: {e}"),
        Unsealed::Seal(_) => {
            say!("warning: {e}; the next command that drives runs tries again");
        }
    }
}
