//! `docket disclose RUN --seq N --pointer P`: the disclosures behind the commitments of
//! one event (payload encoding 3), for an auditor who holds a redacted export to check a
//! value against its digest (docs/export-format.md#checking-a-disclosure); and `docket
//! shred`, which erases them for an erasure request while the log keeps verifying.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, anyhow};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use clap::Args;
use docket_decider::{
    COMMITTED_PAYLOAD, CommittedPayload, RunId, digest_text, disclosed_pointer, open_disclosure,
    pointer_touches,
};
use docket_store::{EventStore as _, Payload, StoredDisclosure, StreamId};
use futures::StreamExt as _;
use serde_json::json;

use crate::command::EXIT_COMPLETED;

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// The arguments of `docket disclose`.
#[derive(Args)]
pub(crate) struct DiscloseArgs {
    /// The run id.
    run: RunId,
    /// The event whose commitments to open.
    #[arg(long)]
    seq: u64,
    /// A JSON pointer into the event's payload (`/output/claimant/name`; `*` for any one
    /// step): every committed value it reaches, or that holds it, is disclosed.
    #[arg(long)]
    pointer: String,
    /// Print one JSON object per disclosure.
    #[arg(long)]
    json: bool,
}

pub(crate) fn main(args: DiscloseArgs, data: Option<PathBuf>) -> std::process::ExitCode {
    crate::command::run_async(data, |data, out| {
        Box::pin(async move {
            let rt = crate::command::open_read_for(&data, &args.run).await?;
            disclose(rt.store(), &args, out).await
        })
    })
}

async fn disclose(
    store: &docket_app::Store,
    args: &DiscloseArgs,
    out: &mut String,
) -> anyhow::Result<u8> {
    let run = &args.run;
    if !args.pointer.starts_with('/') {
        return Err(anyhow!(
            "--pointer {:?}: a JSON pointer into the payload starts with `/` (e.g. /output/claimant/name)",
            args.pointer
        ));
    }
    let stream = StreamId::new(run.as_str()).map_err(|e| anyhow!("run id {run}: {e}"))?;
    let Some(head) = store.head(&stream).await? else {
        return Err(anyhow!(
            "no run {run} in {} (`docket runs` lists them)",
            if store.postgres().is_some() {
                "the PostgreSQL store"
            } else {
                "this data directory"
            }
        ));
    };
    if args.seq == 0 || args.seq > head.seq {
        return Err(anyhow!(
            "--seq {}: run {run} has events 1 to {}",
            args.seq,
            head.seq
        ));
    }
    let mut reader = Box::pin(store.read(&stream, args.seq..=args.seq));
    let event = reader
        .next()
        .await
        .ok_or_else(|| anyhow!("event {} of run {run} could not be read", args.seq))?
        .with_context(|| format!("cannot read event {} of run {run}", args.seq))?;
    if event.kind_version != COMMITTED_PAYLOAD {
        return Err(anyhow!(
            "event {} of run {run} ({}) is in payload encoding {}: its values are in the record itself, covered by its hash, with nothing to disclose apart (`docket events {run} --json` shows them; docs/events.md#values-committed-apart)",
            args.seq,
            event.kind,
            event.kind_version
        ));
    }
    let bytes = match &event.payload {
        Payload::Inline(bytes) => bytes.clone(),
        Payload::Blob(r) => store
            .get_blob(&r.hash)
            .await?
            .ok_or_else(|| anyhow!("the payload blob of event {} is missing", args.seq))?,
    };
    let parsed = CommittedPayload::parse(&event.kind, &bytes)
        .map_err(|e| anyhow!("event {} of run {run}: {e}", args.seq))?;
    let held = store
        .disclosures(&stream)
        .await
        .with_context(|| format!("cannot read the disclosures of run {run}"))?;
    let mut found = 0;
    for slot in parsed.slots() {
        for digest in &slot.digests {
            let digest_b64 = digest_text(digest);
            match held.get(digest) {
                Some(StoredDisclosure::Present(bytes)) => {
                    let opened = open_disclosure(bytes)
                        .map_err(|e| anyhow!("the disclosure of digest {digest_b64}: {e}"))?;
                    let pointer = disclosed_pointer(&slot.pointer, opened.name.as_deref());
                    if !pointer_touches(&args.pointer, &pointer) {
                        continue;
                    }
                    found += 1;
                    let disclosure = URL_SAFE_NO_PAD.encode(bytes);
                    if args.json {
                        let line = json!({
                            "run": run.as_str(), "seq": args.seq, "pointer": pointer,
                            "digest": digest_b64, "disclosure": disclosure,
                            "salt": opened.salt, "name": opened.name, "value": opened.value,
                        });
                        outln!(out, "{line}");
                    } else {
                        outln!(out, "event {} {pointer}", args.seq);
                        outln!(out, "  digest      {digest_b64}");
                        outln!(out, "  disclosure  {disclosure}");
                        outln!(out, "  salt        {}", opened.salt);
                        if let Some(name) = &opened.name {
                            outln!(out, "  name        {name}");
                        }
                        outln!(out, "  value       {}", opened.value);
                    }
                }
                Some(StoredDisclosure::Shredded(note))
                    if pointer_touches(&args.pointer, &slot.pointer) =>
                {
                    found += 1;
                    let note = String::from_utf8_lossy(note);
                    if args.json {
                        let line = json!({
                            "run": run.as_str(), "seq": args.seq, "pointer": slot.pointer,
                            "digest": digest_b64, "shredded": note,
                        });
                        outln!(out, "{line}");
                    } else {
                        outln!(
                            out,
                            "event {} {} (a value under it)\n  digest      {digest_b64}\n  shredded    {note}",
                            args.seq,
                            slot.pointer
                        );
                    }
                }
                _ => {}
            }
        }
    }
    if found == 0 {
        let slots: Vec<&str> = parsed.slots().iter().map(|s| s.pointer.as_str()).collect();
        return Err(anyhow!(
            "event {} of run {run} ({}) commits to no value at {}: its committed values are under {}",
            args.seq,
            event.kind,
            args.pointer,
            if slots.is_empty() {
                "no pointer (this kind has no content positions)".to_owned()
            } else {
                slots.join(", ")
            }
        ));
    }
    if !args.json {
        outln!(
            out,
            "check: base64url-decode `disclosure` and read [salt, name, value]; SHA-256 of the `disclosure` text itself, base64url without padding, is `digest`, as the export's event payload lists it (docs/export-format.md#checking-a-disclosure)"
        );
    }
    Ok(EXIT_COMPLETED)
}

/// The arguments of `docket shred`.
#[derive(Args)]
pub(crate) struct ShredArgs {
    /// The run id.
    run: RunId,
    /// A JSON pointer into the run's payloads (`*` for any one step): every committed
    /// value it reaches, or that holds it, is erased, in every event of the run that
    /// recorded it.
    #[arg(long)]
    pointer: String,
    /// Only the values event SEQ commits to there (they are erased wherever else the run
    /// recorded them too: a run stores each value once).
    #[arg(long)]
    seq: Option<u64>,
    /// Who asks for the erasure (recorded in the tombstone).
    #[arg(long)]
    by: String,
    /// Why (the erasure request; recorded in the tombstone, never the value).
    #[arg(long)]
    reason: String,
}

pub(crate) fn shred_main(args: ShredArgs, data: Option<PathBuf>) -> std::process::ExitCode {
    crate::command::run_async(data, |data, out| {
        Box::pin(async move {
            let rt = crate::command::open(&data).await?;
            shred(rt.store(), &args, out).await
        })
    })
}

async fn shred(
    store: &docket_app::Store,
    args: &ShredArgs,
    out: &mut String,
) -> anyhow::Result<u8> {
    let run = &args.run;
    if !args.pointer.starts_with('/') {
        return Err(anyhow!(
            "--pointer {:?}: a JSON pointer into the payloads starts with `/` (e.g. /output/claimant)",
            args.pointer
        ));
    }
    if args.by.trim().is_empty() || args.reason.trim().is_empty() {
        return Err(anyhow!(
            "--by and --reason say who asks for the erasure and why: neither may be empty"
        ));
    }
    let stream = StreamId::new(run.as_str()).map_err(|e| anyhow!("run id {run}: {e}"))?;
    let Some(head) = store.head(&stream).await? else {
        return Err(anyhow!(
            "no run {run} in {} (`docket runs` lists them)",
            if store.postgres().is_some() {
                "the PostgreSQL store"
            } else {
                "this data directory"
            }
        ));
    };
    let held = store
        .disclosures(&stream)
        .await
        .with_context(|| format!("cannot read the disclosures of run {run}"))?;
    let mut reader = Box::pin(store.read(&stream, 1..=head.seq));
    let mut digests: Vec<[u8; 32]> = Vec::new();
    let mut at: Vec<String> = Vec::new();
    let mut clear: Vec<String> = Vec::new();
    // The key each erased disclosure of an object was the value of: the tombstone keeps
    // it (never the value), so reading the run shows the marker under its key.
    let mut names: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    while let Some(event) = reader.next().await {
        let event = event.with_context(|| format!("cannot read run {run}"))?;
        if args.seq.is_some_and(|s| s != event.seq) {
            continue;
        }
        let bytes = match &event.payload {
            Payload::Inline(bytes) => bytes.clone(),
            Payload::Blob(r) => store.get_blob(&r.hash).await?.unwrap_or_default(),
        };
        if event.kind_version != COMMITTED_PAYLOAD {
            if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes) {
                for pointer in docket_decider::content_pointers(&event.kind, &value) {
                    if pointer_touches(&args.pointer, &pointer) {
                        clear.push(format!("event {} {pointer}", event.seq));
                    }
                }
            }
            continue;
        }
        let Ok(parsed) = CommittedPayload::parse(&event.kind, &bytes) else {
            continue;
        };
        for slot in parsed.slots() {
            for digest in &slot.digests {
                let Some(StoredDisclosure::Present(bytes)) = held.get(digest) else {
                    continue;
                };
                let name = open_disclosure(bytes).ok().and_then(|d| d.name);
                let pointer = disclosed_pointer(&slot.pointer, name.as_deref());
                if pointer_touches(&args.pointer, &pointer) && !digests.contains(digest) {
                    if event.kind == "run.requested" && pointer == "/bundle_source" {
                        return Err(anyhow!(
                            "--pointer {} reaches event {} /bundle_source, the policy bundle's text replay decides the run with, not a value anyone gave it: it cannot be shredded, and nothing was erased; name the values to erase (e.g. /input/claimant)",
                            args.pointer,
                            event.seq
                        ));
                    }
                    if let Some(name) = name {
                        names.insert(digest_text(digest), name);
                    }
                    digests.push(*digest);
                    at.push(format!("event {} {pointer}", event.seq));
                }
            }
        }
    }
    if !clear.is_empty() {
        return Err(anyhow!(
            "run {run} was not recorded redactable: {} holds {} in payload encoding 1 or 2, its hash covering the value, so erasing it would break the chain and nothing was erased; only a run whose workflow says `[evidence] redactable = true` records values that can be erased (docs/workflow.md#evidence-redactable-values)",
            clear[0],
            args.pointer
        ));
    }
    if digests.is_empty() {
        return Err(anyhow!(
            "run {run} holds no value at {} that is not already erased{}",
            args.pointer,
            args.seq
                .map(|s| format!(" in event {s}"))
                .unwrap_or_default()
        ));
    }
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let note = json!({"by": args.by, "reason": args.reason, "at_ms": since,
        "pointer": args.pointer, "names": names});
    store
        .shred_disclosures(&stream, digests.clone(), note.to_string().into_bytes())
        .await
        .with_context(|| format!("cannot erase the values of run {run}"))?;
    for (digest, at) in digests.iter().zip(&at) {
        outln!(out, "shredded {at} (digest {})", digest_text(digest));
    }
    outln!(
        out,
        "{} value(s) of run {run} erased by {}: their disclosures are gone from {}, their commitments stay, and `docket verify` counts them as shredded",
        digests.len(),
        args.by,
        if store.postgres().is_some() {
            "the PostgreSQL store"
        } else {
            "the data directory"
        }
    );
    Ok(EXIT_COMPLETED)
}
