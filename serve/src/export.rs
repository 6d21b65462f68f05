//! `GET /api/runs/{run}/export`: the bytes `docket export` writes, JSON lines
//! (docs/export-format.md) or the HTML report (docs/report.md), signed when the run was
//! sealed at its current size.
//!
//! This mirrors `cli/src/export.rs` (the same evidence calls); the two should become one
//! function in `docket-evidence` once the export's redaction work there has landed.

use std::collections::BTreeMap;
use std::path::Path;

use docket_decider::RunId;
use docket_evidence::{
    ChainCheck, CheckpointCheck, LoggedEvent, ReportVerification, RunExport, Seal,
    SignedCheckpoint, VerifierKey, html_report,
};
use docket_runtime::{Runtime, RuntimeError};
use docket_store::{EmbeddedStore, Event, EventStore as _, Payload, StreamId};
use futures::StreamExt as _;

use crate::ApiError;

fn failed(run: &RunId) -> impl Fn(String) -> ApiError + '_ {
    move |why| {
        ApiError::internal(format!("cannot export run {run}: {why}")).at(format!("run {run}"))
    }
}

/// The export of `run`: its HTML report when `html`, else its JSON lines.
pub(crate) async fn export(
    rt: &Runtime<EmbeddedStore>,
    data: &Path,
    run: &RunId,
    html: bool,
) -> Result<Vec<u8>, ApiError> {
    let fail = failed(run);
    let store = rt.store();
    let stream = StreamId::new(run.as_str())
        .map_err(|e| ApiError::bad_request(e.to_string()).at(format!("run {run}")))?;
    let Some(head) = store.head(&stream).await.map_err(RuntimeError::Store)? else {
        return Err(RuntimeError::UnknownRun(run.to_string()).into());
    };
    let seal = run_seal(rt, data, run.as_str(), head.seq)
        .await
        .map_err(&fail)?;
    if html {
        let events: Vec<LoggedEvent> = rt
            .events(run)
            .await?
            .into_iter()
            .map(|e| LoggedEvent {
                seq: e.seq,
                recorded_at_ns: e.recorded_at_ns,
                hash: e.hash,
                event: e.event,
            })
            .collect();
        let checked = store.verify(&stream).await.map_err(RuntimeError::Store)?;
        let verification = ReportVerification {
            chain: ChainCheck::from(&checked),
            checkpoint: seal.as_ref().map(|(note, key)| CheckpointCheck {
                note: note.clone(),
                outcome: format!(
                    "signed by {}, this data directory's key; it covers all {} events",
                    key.label(),
                    events.len()
                ),
                sound: true,
            }),
        };
        let page = html_report(&events, &verification).map_err(|e| fail(e.to_string()))?;
        return Ok(page.into_bytes());
    }
    let mut events: Vec<Event> = Vec::new();
    let mut reader = Box::pin(store.read(&stream, 1..=head.seq));
    while let Some(event) = reader.next().await {
        events.push(event.map_err(RuntimeError::Store)?);
    }
    let mut blobs = BTreeMap::new();
    for event in &events {
        if let Payload::Blob(r) = &event.payload
            && !blobs.contains_key(&r.hash)
            && let Some(bytes) = store.get_blob(&r.hash).await.map_err(RuntimeError::Store)?
        {
            blobs.insert(r.hash, bytes);
        }
    }
    for hash in docket_evidence::referenced_blobs(&events, |e| match &e.payload {
        Payload::Inline(bytes) => Some(bytes.as_slice()),
        Payload::Blob(r) => blobs.get(&r.hash).map(Vec::as_slice),
    }) {
        if !blobs.contains_key(&hash)
            && let Some(bytes) = store.get_blob(&hash).await.map_err(RuntimeError::Store)?
        {
            blobs.insert(hash, bytes);
        }
    }
    let seal = seal.map(|(note, key)| Seal {
        note,
        verifier_key: key.to_string(),
    });
    let mut bytes = Vec::new();
    docket_evidence::write_jsonl(
        &RunExport {
            run: &stream,
            events: &events,
            blobs: &blobs,
            seal: seal.as_ref(),
        },
        &mut bytes,
    )
    .map_err(|e| fail(e.to_string()))?;
    Ok(bytes)
}

/// The run's signed checkpoint at `size` and the key of this data directory that signed
/// it, when it was sealed at that size.
async fn run_seal(
    rt: &Runtime<EmbeddedStore>,
    data: &Path,
    run: &str,
    size: u64,
) -> Result<Option<(String, VerifierKey)>, String> {
    let seals = docket_evidence::seals_of(rt.store(), run)
        .await
        .map_err(|e| e.to_string())?;
    let Some(seal) = seals.into_iter().rev().find(|s| s.size == size) else {
        return Ok(None);
    };
    let keys = docket_evidence::verifiers(data).map_err(|e| e.to_string())?;
    let signed = SignedCheckpoint::parse(&seal.checkpoint)
        .map_err(|e| format!("the seal of run {run} in the log of run heads: {e}"))?;
    let key = signed.signed_by(&keys).map_err(|e| {
        format!("the seal of run {run} does not check with this directory's keys: {e}")
    })?;
    Ok(Some((seal.checkpoint, key.clone())))
}
