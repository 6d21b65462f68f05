//! `docket disclose RUN --seq N --pointer P`: the disclosures behind the commitments of
//! one event (payload encoding 3), for an auditor who holds a redacted export to check a
//! value against its digest (docs/export-format.md#checking-a-disclosure).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, anyhow};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use clap::Args;
use docket_decider::{
    COMMITTED_PAYLOAD, CommittedPayload, RunId, digest_text, disclosed_pointer,
    open_disclosure, pointer_touches,
};
use docket_store::{EventStore as _, Payload, StoredDisclosure, StreamId};
use futures::StreamExt as _;
use serde_json::json;

use crate::runs::EXIT_COMPLETED;

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
    crate::runs::run_async(data, |data, out| {
        Box::pin(async move {
            let rt = crate::runs::open_read_for(&data, &args.run).await?;
            disclose(rt.store(), &args, out).await
        })
    })
}

async fn disclose(
    store: &docket_store::EmbeddedStore,
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
            "no run {run} in this data directory (`docket runs` lists them)"
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
                Some(StoredDisclosure::Shredded(note)) if pointer_touches(&args.pointer, &slot.pointer) => {
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
