//! A stored run's export, as `docket export` writes it and `GET /api/runs/{run}/export`
//! serves it: one function for both, so the command and the API cannot drift apart
//! (format 3, `--redact`, the seal).

use std::collections::BTreeMap;
use std::path::Path;

use docket_store::{Event, EventStore, Payload, StoreError, StreamId};
use futures::StreamExt as _;

use super::jsonl::{ExportError, Redaction, RunExport, Seal, referenced_blobs, write_jsonl};
use crate::checkpoint::SignedCheckpoint;
use crate::note::VerifierKey;
use crate::report::{
    ChainCheck, CheckpointCheck, LoggedEvent, ReportError, ReportVerification, html_report,
};
use crate::seal::{SealError, seals_of};

/// A run's signed checkpoint at its current size, and this data directory's key that
/// signed it.
#[derive(Clone, Debug)]
pub struct RunSeal {
    /// The C2SP signed note.
    pub note: String,
    pub key: VerifierKey,
}

/// Why a stored run could not be exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunExportError {
    #[error("cannot read run {run}: {source}")]
    Store {
        run: String,
        #[source]
        source: StoreError,
    },
    #[error("the seal of run {run}: {why}")]
    Seal { run: String, why: String },
    #[error(transparent)]
    Jsonl(#[from] ExportError),
    #[error("run {run}: {source}")]
    Report {
        run: String,
        #[source]
        source: ReportError,
    },
}

/// What to export.
pub enum ExportRequest<'a> {
    /// JSON lines (docs/export-format.md), withholding these values.
    Jsonl { redact: &'a [Redaction] },
    /// The HTML report (docs/report.md) of these events, decoded by the caller (the
    /// runtime rebuilds plain payloads; this crate does not drive runs).
    Html { events: &'a [LoggedEvent] },
}

/// Whether run `run`'s export at `size` can carry a signed checkpoint.
#[derive(Clone, Debug)]
pub enum Sealing {
    /// Sealed at that size by one of this data directory's keys (the current one or a
    /// retired one).
    Signed(RunSeal),
    /// No checkpoint at that size: the run is unfinished, or was finished before the
    /// directory had a key.
    Unsealed,
    /// A checkpoint at that size that none of this directory's keys signed: its key files
    /// were removed or replaced, or the log of run heads was altered. The export goes out
    /// unsigned (its chain and tree still verify) rather than not at all; `docket verify`
    /// says which it is.
    Unverified {
        /// The checkpoint as kept.
        note: String,
        /// Why it does not check, in the user's words.
        why: String,
    },
}

impl Sealing {
    /// The seal an export carries, if any.
    #[must_use]
    pub fn seal(&self) -> Option<&RunSeal> {
        match self {
            Self::Signed(seal) => Some(seal),
            Self::Unsealed | Self::Unverified { .. } => None,
        }
    }
}

/// Whether run `run` was sealed at `size`, and by which of data directory `data`'s keys.
/// Fails only when the log of run heads or the key files cannot be read.
pub async fn run_seal<S: EventStore>(
    store: &S,
    data: &Path,
    run: &str,
    size: u64,
) -> Result<Sealing, RunExportError> {
    let failed = |why: String| RunExportError::Seal {
        run: run.to_owned(),
        why,
    };
    let seals = seals_of(store, run)
        .await
        .map_err(|e: SealError| failed(e.to_string()))?;
    let Some(seal) = seals.into_iter().rev().find(|s| s.size == size) else {
        return Ok(Sealing::Unsealed);
    };
    let keys = crate::keys::verifiers(data).map_err(|e| failed(e.to_string()))?;
    let signed = match SignedCheckpoint::parse(&seal.checkpoint) {
        Ok(signed) => signed,
        Err(e) => {
            return Ok(Sealing::Unverified {
                note: seal.checkpoint,
                why: format!("its checkpoint in the log of run heads does not parse: {e}"),
            });
        }
    };
    Ok(match signed.signed_by(&keys) {
        Ok(key) => Sealing::Signed(RunSeal {
            note: seal.checkpoint,
            key: key.clone(),
        }),
        Err(e) => Sealing::Unverified {
            note: seal.checkpoint,
            why: format!("its checkpoint does not check with this data directory's keys: {e}"),
        },
    })
}

/// The bytes of run `stream`'s export over its first `size` events.
pub async fn export_run<S: EventStore>(
    store: &S,
    stream: &StreamId,
    size: u64,
    sealing: &Sealing,
    request: ExportRequest<'_>,
) -> Result<Vec<u8>, RunExportError> {
    let failed = |source: StoreError| RunExportError::Store {
        run: stream.to_string(),
        source,
    };
    match request {
        ExportRequest::Html { events } => {
            let checked = store.verify(stream).await.map_err(failed)?;
            let verification = ReportVerification {
                chain: ChainCheck::from(&checked),
                checkpoint: match sealing {
                    Sealing::Signed(s) => Some(CheckpointCheck {
                        note: s.note.clone(),
                        outcome: format!(
                            "signed by {}, this data directory's key; it covers all {} events",
                            s.key.label(),
                            events.len()
                        ),
                        sound: true,
                    }),
                    Sealing::Unverified { note, why } => Some(CheckpointCheck {
                        note: note.clone(),
                        outcome: format!("{why}; verifying the data directory says more"),
                        sound: false,
                    }),
                    Sealing::Unsealed => None,
                },
            };
            let page =
                html_report(events, &verification).map_err(|source| RunExportError::Report {
                    run: stream.to_string(),
                    source,
                })?;
            Ok(page.into_bytes())
        }
        ExportRequest::Jsonl { redact } => {
            let mut events: Vec<Event> = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            let mut reader = Box::pin(store.read(stream, 1..=size));
            while let Some(event) = reader.next().await {
                events.push(event.map_err(failed)?);
            }
            let mut blobs = BTreeMap::new();
            for event in &events {
                if let Payload::Blob(r) = &event.payload
                    && !blobs.contains_key(&r.hash)
                    && let Some(bytes) = store.get_blob(&r.hash).await.map_err(failed)?
                {
                    blobs.insert(r.hash, bytes);
                }
            }
            // The content encoding-2 events refer to (docs/events.md#content-stored-once).
            for hash in referenced_blobs(&events, |e| match &e.payload {
                Payload::Inline(bytes) => Some(bytes.as_slice()),
                Payload::Blob(r) => blobs.get(&r.hash).map(Vec::as_slice),
            }) {
                if !blobs.contains_key(&hash)
                    && let Some(bytes) = store.get_blob(&hash).await.map_err(failed)?
                {
                    blobs.insert(hash, bytes);
                }
            }
            // The values encoding-3 events commit to (docs/events.md#values-committed-apart).
            let disclosures = store.disclosures(stream).await.map_err(failed)?;
            let seal = sealing.seal().map(|s| Seal {
                note: s.note.clone(),
                verifier_key: s.key.to_string(),
            });
            let mut bytes = Vec::new();
            write_jsonl(
                &RunExport {
                    run: stream,
                    events: &events,
                    blobs: &blobs,
                    disclosures: &disclosures,
                    redact,
                    seal: seal.as_ref(),
                },
                &mut bytes,
            )?;
            Ok(bytes)
        }
    }
}
