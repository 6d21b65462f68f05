//! `docket prove RUN --seq N | --from-size M`: RFC 9162 inclusion and consistency proofs
//! over a run's events (docs/proofs.md), each checked before it is printed, so an auditor
//! can check one against a tree head with any RFC 9162 library.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::anyhow;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use clap::{ArgGroup, Args};
use docket_decider::RunId;
use docket_store::merkle::TreeHash;
use docket_store::{EventStore, StoreError, StreamId};
use serde_json::json;

use crate::command::EXIT_COMPLETED;

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

#[derive(Args)]
#[command(group(ArgGroup::new("proof").required(true).args(["seq", "from_size"])))]
pub(crate) struct ProveArgs {
    /// The run id.
    run: RunId,
    /// Prove that event N (leaf index N - 1) is in the run's tree.
    #[arg(long, value_name = "N")]
    seq: Option<u64>,
    /// With --seq: the size of the tree to prove it in (default: the run's events now).
    #[arg(long, value_name = "S", requires = "seq")]
    size: Option<u64>,
    /// Prove that the run's tree of its first M events is a prefix of a later tree.
    #[arg(long, value_name = "M", conflicts_with = "seq")]
    from_size: Option<u64>,
    /// With --from-size: the later tree's size (default: the run's events now).
    #[arg(long, value_name = "N", requires = "from_size")]
    to_size: Option<u64>,
    /// Print one JSON object (fields in docs/proofs.md).
    #[arg(long)]
    json: bool,
}

/// `docket prove`, on the run commands' runtime and error reporting.
pub(crate) fn main(args: ProveArgs, data: Option<PathBuf>) -> ExitCode {
    crate::command::run_async(data, |data, out| {
        Box::pin(async move { prove(args, &data, out).await })
    })
}

/// A tree hash as RFC 9162 tooling and C2SP checkpoints write it: standard base64.
fn b64(hash: &TreeHash) -> String {
    STANDARD.encode(hash.0)
}

/// A request outside the run, in the run's words.
fn in_run_words(run: &RunId, e: StoreError) -> anyhow::Error {
    match e {
        StoreError::OutsideTree { problem, .. } => anyhow!("run {run}: {problem}"),
        other => anyhow::Error::new(other).context(format!("cannot build the proof for run {run}")),
    }
}

async fn prove(args: ProveArgs, data: &Path, out: &mut String) -> anyhow::Result<u8> {
    let run = &args.run;
    // Read-only: an auditor's look creates, locks and repairs nothing.
    let store = crate::command::open_read_for(data, run)
        .await?
        .store()
        .clone();
    let no_run = || anyhow!("no run {run} in {}", crate::command::place(&store, data));
    let stream = StreamId::new(run.as_str()).map_err(|e| anyhow!("run id {run}: {e}"))?;
    if store.head(&stream).await?.is_none() {
        return Err(no_run());
    }
    match args.seq {
        Some(seq) => {
            let proof = store
                .inclusion_proof(&stream, seq, args.size)
                .await
                .map_err(|e| in_run_words(run, e))?;
            proof.check().map_err(|e| {
                anyhow!(
                    "the inclusion proof of event {seq} of run {run} does not check ({e}): \
                     the store's Merkle tree is damaged; `docket verify {run}` names where"
                )
            })?;
            let path: Vec<String> = proof.path.iter().map(b64).collect();
            if args.json {
                let doc = json!({
                    "proof": "inclusion",
                    "run": run.as_str(),
                    "seq": proof.seq,
                    "leaf_index": proof.leaf_index(),
                    "tree_size": proof.tree.size,
                    "event_hash": proof.event_hash.to_string(),
                    "leaf_hash": b64(&proof.leaf),
                    "root": b64(&proof.tree.root),
                    "path": path,
                });
                outln!(out, "{doc}");
            } else {
                outln!(
                    out,
                    "run {run}: event {seq} is leaf {} of the tree of {} events",
                    proof.leaf_index(),
                    proof.tree.size
                );
                outln!(
                    out,
                    "  event hash  {} (BLAKE3, as `docket events --json`)",
                    proof.event_hash
                );
                outln!(out, "  leaf hash   {}", b64(&proof.leaf));
                outln!(out, "  root        {}", b64(&proof.tree.root));
                path_lines(out, &path, "nearest sibling first");
                outln!(
                    out,
                    "checked: the path leads from the leaf hash to the root (RFC 9162 2.1.3.2)"
                );
            }
        }
        None => {
            let from = args.from_size.unwrap_or_default();
            let proof = store
                .consistency_proof(&stream, from, args.to_size)
                .await
                .map_err(|e| in_run_words(run, e))?;
            proof.check().map_err(|e| {
                anyhow!(
                    "the consistency proof of run {run} from size {from} does not check ({e}): \
                     the store's Merkle tree is damaged; `docket verify {run}` names where"
                )
            })?;
            let path: Vec<String> = proof.path.iter().map(b64).collect();
            if args.json {
                let doc = json!({
                    "proof": "consistency",
                    "run": run.as_str(),
                    "old_size": proof.old.size,
                    "old_root": b64(&proof.old.root),
                    "new_size": proof.new.size,
                    "new_root": b64(&proof.new.root),
                    "path": path,
                });
                outln!(out, "{doc}");
            } else {
                outln!(
                    out,
                    "run {run}: the tree of {} events is a prefix of the tree of {} events",
                    proof.old.size,
                    proof.new.size
                );
                outln!(out, "  old root    {}", b64(&proof.old.root));
                outln!(out, "  new root    {}", b64(&proof.new.root));
                path_lines(out, &path, "in RFC 9162 order");
                outln!(
                    out,
                    "checked: the proof leads to both roots (RFC 9162 2.1.4.2)"
                );
            }
        }
    }
    store.close().await;
    Ok(EXIT_COMPLETED)
}

fn path_lines(out: &mut String, path: &[String], order: &str) {
    match path.len() {
        0 => outln!(
            out,
            "  path        (empty: nothing to prove beyond the roots)"
        ),
        n => {
            outln!(out, "  path        {n} hashes, {order}:");
            for (i, hash) in path.iter().enumerate() {
                outln!(out, "    {:>2} {hash}", i + 1);
            }
        }
    }
}
