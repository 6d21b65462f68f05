//! `docket verify` (read-only: over a data directory it never opens the store; over a
//! PostgreSQL store, every stream through the store's own check), and the application
//! layer the run commands drive runs through, which seals the finished ones after them
//! (docs/checkpoints.md).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::Args;
use docket_app::{App, Store, Unsealed};
use docket_evidence::{Problem, StoreTrust, Verification, VerifierKey, VerifyOptions};
use docket_runtime::Runtime;

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
    /// A directory of checkpoints published earlier (`docket checkpoint publish --to
    /// DIR`): the log must extend every one (a consistency proof each), so a rewrite with
    /// every hash and seal recomputed is caught.
    #[arg(long, value_name = "DIR")]
    against: Option<PathBuf>,
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

/// The keys `--key` names (`None`: the store's own) and the checkpoint `--checkpoint`
/// names, read.
fn keys_and_checkpoint(
    args: &VerifyArgs,
) -> anyhow::Result<(Option<Vec<VerifierKey>>, Option<String>)> {
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
    Ok((keys, checkpoint))
}

/// The checkpoints `--against DIR` keeps.
fn against(args: &VerifyArgs) -> anyhow::Result<Vec<String>> {
    args.against
        .as_deref()
        .map_or_else(|| Ok(Vec::new()), crate::checkpoint::kept)
}

/// Exit 0 when everything checks, 1 on any failure.
pub(crate) fn execute(args: VerifyArgs, data: &Path, out: &mut String) -> anyhow::Result<u8> {
    let (keys, checkpoint) = keys_and_checkpoint(&args)?;
    let options = VerifyOptions {
        run: args.run.clone(),
        checkpoint,
        against: against(&args)?,
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

/// `docket verify` over the PostgreSQL store `--store` names: every stream (or RUN's and
/// the heads log's) checked by the store itself (chain links, hashes, blobs, Merkle
/// leaves), then each run's seals against their signatures and the run's tree, the heads
/// log against its signed checkpoint kept in the database, and `--checkpoint` by a
/// consistency proof. The keys trusted are `--key`, else the verifier keys recorded in
/// the database by the processes that sealed. Exit 0 when all are sound, 1 otherwise.
pub(crate) async fn execute_store(args: VerifyArgs, out: &mut String) -> anyhow::Result<u8> {
    let Some(url) = crate::command::postgres_url() else {
        return Err(anyhow!("docket verify: no PostgreSQL store named"));
    };
    let (given, checkpoint) = keys_and_checkpoint(&args)?;
    let store =
        crate::command::open_postgres(url, "to verify it", crate::command::Access::Read).await?;
    let database = store.database().to_owned();
    // Read before the log: the database takes a heads checkpoint only once the seals it
    // covers are durable.
    let heads_note = store
        .latest_heads_checkpoint()
        .await
        .map_err(|e| crate::command::postgres_error(e.into(), "cannot read the heads checkpoint"))?
        .map(|held| held.note);
    let (keys, from) = match given {
        Some(keys) => (keys, "given"),
        None => {
            let rows = store.keys().await.map_err(|e| {
                crate::command::postgres_error(e.into(), "cannot read the verifier keys")
            })?;
            let keys = rows
                .iter()
                .map(|row| {
                    VerifierKey::parse(&row.verifier).map_err(|e| {
                        anyhow!("PostgreSQL at {database}: a verifier key in docket_keys is damaged: {e}")
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let from = if keys.is_empty() { "none" } else { "database" };
            (keys, from)
        }
    };
    let options = VerifyOptions {
        run: args.run.clone(),
        checkpoint,
        against: against(&args)?,
        keys: None,
        require_signed: args.require_signed,
    };
    let trust = StoreTrust {
        keys,
        from,
        heads_note,
    };
    let location = format!("PostgreSQL at {database}");
    let report =
        docket_evidence::verify_store(&Store::from(store), &location, trust, &options).await?;
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
    for cp in &report.against {
        match &cp.problem {
            Some(p) => outln!(
                out,
                "FAIL  published {} at size {}  {}",
                if cp.origin.is_empty() {
                    "checkpoint"
                } else {
                    cp.origin.as_str()
                },
                cp.size,
                problem_text(p)
            ),
            None => outln!(
                out,
                "ok    published {} at size {} signed by {}; the log now holds {} and extends it (consistency proof of {} hashes)",
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
/// drives runs seals the finished ones after it, when there is a key
/// (`DOCKET_SIGNING_KEY`, else the data directory's). A failure is reported, not fatal:
/// the command did what it was asked, and the next one catches up.
pub(crate) fn app(rt: &Runtime<Store>, data: &Path) -> App {
    App::new(rt.clone(), data, crate::command::key_place(), unsealed)
}

fn unsealed(e: &Unsealed) {
    match e {
        Unsealed::Key(docket_evidence::KeyError::Missing { .. }) => {
            say!("warning: {e} (`docket keys generate` makes one)");
        }
        Unsealed::Key(_) => say!("warning: {e}"),
        Unsealed::Seal(_) | Unsealed::Database(_) => {
            say!("warning: {e}; the next command that drives runs tries again");
        }
    }
}
