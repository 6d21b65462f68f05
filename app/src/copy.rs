//! `docket store copy`: every run of one store into another, byte for byte
//! (docs/postgres.md, "Moving between backends"). Each event is appended again from its
//! recorded fields, so the target seals it as the source did, and the copy checks that
//! every hash came out the same; the blobs a run refers to (its payloads stored apart, the
//! content an encoding-2 payload names by hash) and its disclosures, erased ones as
//! tombstones, go with it, and the public halves of the keys that sealed them
//! ([`copy_keys`]). Snapshots are a cache and are left behind.

use std::collections::BTreeMap;
use std::path::Path;

use docket_decider::{REFERENCED_PAYLOAD, ReferencedPayload};
use docket_evidence::{KeyError, VerifierKey};
use docket_store::{
    Event, EventStore, Hash, NewEvent, Payload, StoreError, StoredDisclosure, StreamHead, StreamId,
};
use docket_store_postgres::{PgError, PostgresStore};
use futures::StreamExt;

/// Events appended per batch while copying.
const BATCH: u64 = 512;

/// What a copy did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Copied {
    /// Streams copied.
    pub streams: u64,
    /// Streams the target already held whole (a copy that was interrupted goes on).
    pub already: u64,
    pub events: u64,
    pub blobs: u64,
    pub disclosures: u64,
}

/// Why a copy stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CopyError {
    /// Reading the source or writing the target failed.
    #[error("{doing}: {source}")]
    Store {
        doing: String,
        #[source]
        source: StoreError,
    },
    /// The target holds a different history of the stream.
    #[error(
        "stream {stream}: the target already holds {held} events that differ from the source's at event {seq}"
    )]
    Diverged {
        stream: StreamId,
        held: u64,
        seq: u64,
    },
    /// An event sealed by the target came out with another hash than the source's.
    #[error(
        "stream {stream}: event {seq} hashes to {copied} in the target, not {source_hash} as in the source"
    )]
    HashChanged {
        stream: StreamId,
        seq: u64,
        source_hash: Hash,
        copied: Hash,
    },
    /// A blob an event refers to is missing from the source.
    #[error("stream {stream}: event {seq} refers to blob {hash}, which the source does not hold")]
    MissingBlob {
        stream: StreamId,
        seq: u64,
        hash: Hash,
    },
}

fn store_err(doing: impl Into<String>) -> impl FnOnce(StoreError) -> CopyError {
    let doing = doing.into();
    move |source| CopyError::Store { doing, source }
}

/// Copies every stream of `from` into `to`, calling `progress` after each stream.
///
/// # Errors
/// [`CopyError`]; what was copied before stays, and copying again goes on from there.
pub async fn copy_store<A: EventStore, B: EventStore>(
    from: &A,
    to: &B,
    mut progress: impl FnMut(&StreamHead),
) -> Result<Copied, CopyError> {
    let mut copied = Copied::default();
    let heads = from
        .streams()
        .await
        .map_err(store_err("listing the source's streams"))?;
    for head in &heads {
        copy_stream(from, to, head, &mut copied).await?;
        progress(head);
    }
    let digests = from
        .digests()
        .await
        .map_err(store_err("reading the source's run summaries"))?;
    to.put_digests(digests)
        .await
        .map_err(store_err("writing the run summaries to the target"))?;
    Ok(copied)
}

async fn copy_stream<A: EventStore, B: EventStore>(
    from: &A,
    to: &B,
    head: &StreamHead,
    copied: &mut Copied,
) -> Result<(), CopyError> {
    let stream = &head.stream;
    let held = to
        .head(stream)
        .await
        .map_err(store_err(format!("reading stream {stream} in the target")))?
        .map_or(0, |h| h.seq);
    // Disclosures first, as when the events were recorded: an event is never in a store
    // before what it commits to.
    copy_disclosures(from, to, stream, copied).await?;
    let mut next = 1;
    while next <= head.seq {
        let last = head.seq.min(next + BATCH - 1);
        let events: Vec<Event> = from
            .read(stream, next..=last)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(store_err(format!(
                "reading stream {stream} from the source"
            )))?;
        if next <= held {
            // Held already: it must be the same history.
            let theirs: Vec<Event> = to
                .read(stream, next..=last.min(held))
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<_, _>>()
                .map_err(store_err(format!("reading stream {stream} in the target")))?;
            if let Some((ours, _)) = events.iter().zip(&theirs).find(|(a, b)| a.hash != b.hash) {
                return Err(CopyError::Diverged {
                    stream: stream.clone(),
                    held,
                    seq: ours.seq,
                });
            }
        }
        let fresh: Vec<&Event> = events.iter().filter(|e| e.seq > held).collect();
        if let Some(first) = fresh.first() {
            let mut batch = Vec::with_capacity(fresh.len());
            let mut blobs: BTreeMap<Hash, Vec<u8>> = BTreeMap::new();
            for event in &fresh {
                batch.push(NewEvent {
                    kind: event.kind.clone(),
                    kind_version: event.kind_version,
                    recorded_at: event.recorded_at,
                    policy: event.policy,
                    payload: payload(from, event).await?,
                });
                for hash in referenced(event, batch.last().map(|e| e.payload.as_slice())) {
                    if let std::collections::btree_map::Entry::Vacant(slot) = blobs.entry(hash) {
                        let bytes = from
                            .get_blob(&hash)
                            .await
                            .map_err(store_err(format!("reading blob {hash} from the source")))?
                            .ok_or_else(|| CopyError::MissingBlob {
                                stream: stream.clone(),
                                seq: event.seq,
                                hash,
                            })?;
                        slot.insert(bytes);
                    }
                }
            }
            copied.blobs += blobs.len() as u64;
            let appended = to
                .append_with_blobs(stream, first.seq - 1, batch, blobs.into_values().collect())
                .await
                .map_err(store_err(format!("writing stream {stream} to the target")))?;
            for (event, hash) in fresh.iter().zip(&appended.hashes) {
                if event.hash != *hash {
                    return Err(CopyError::HashChanged {
                        stream: stream.clone(),
                        seq: event.seq,
                        source_hash: event.hash,
                        copied: *hash,
                    });
                }
            }
            copied.events += fresh.len() as u64;
        }
        next = last + 1;
    }
    if held >= head.seq {
        copied.already += 1;
    } else {
        copied.streams += 1;
    }
    Ok(())
}

/// The event's payload as it was appended: a payload stored apart read back whole.
async fn payload<A: EventStore>(from: &A, event: &Event) -> Result<Vec<u8>, CopyError> {
    match &event.payload {
        Payload::Inline(bytes) => Ok(bytes.clone()),
        Payload::Blob(r) => from
            .get_blob(&r.hash)
            .await
            .map_err(store_err(format!(
                "reading blob {} from the source",
                r.hash
            )))?
            .ok_or_else(|| CopyError::MissingBlob {
                stream: event.stream.clone(),
                seq: event.seq,
                hash: r.hash,
            }),
    }
}

/// The blobs an encoding-2 payload names by hash (none for other payloads, or one that
/// does not parse: the events are copied as they are, and `verify` judges them).
fn referenced(event: &Event, payload: Option<&[u8]>) -> Vec<Hash> {
    if event.kind_version != REFERENCED_PAYLOAD {
        return Vec::new();
    }
    let Some(bytes) = payload else {
        return Vec::new();
    };
    ReferencedPayload::parse(&event.kind, bytes)
        .map(|p| p.refs().iter().map(|r| Hash(r.hash)).collect())
        .unwrap_or_default()
}

async fn copy_disclosures<A: EventStore, B: EventStore>(
    from: &A,
    to: &B,
    stream: &StreamId,
    copied: &mut Copied,
) -> Result<(), CopyError> {
    let kept = from.disclosures(stream).await.map_err(store_err(format!(
        "reading the disclosures of stream {stream}"
    )))?;
    if kept.is_empty() {
        return Ok(());
    }
    let mut present = Vec::new();
    let mut erased: BTreeMap<Vec<u8>, Vec<[u8; 32]>> = BTreeMap::new();
    for (digest, stored) in kept {
        match stored {
            StoredDisclosure::Present(bytes) => present.push((digest, bytes)),
            // An erased value's bytes are gone: the target keeps its tombstone. The
            // placeholder is erased at once with the same note.
            StoredDisclosure::Shredded(note) => {
                present.push((digest, Vec::new()));
                erased.entry(note).or_default().push(digest);
            }
        }
    }
    copied.disclosures += present.len() as u64;
    let doing = format!("writing the disclosures of stream {stream} to the target");
    to.put_disclosures(stream, present)
        .await
        .map_err(store_err(doing.clone()))?;
    for (note, digests) in erased {
        to.shred_disclosures(stream, digests, note)
            .await
            .map_err(store_err(doing.clone()))?;
    }
    Ok(())
}

/// Where a store keeps the public halves of the keys that sealed its runs.
#[derive(Clone, Copy)]
pub enum KeysAt<'a> {
    /// A data directory's `keys/`.
    Directory(&'a Path),
    /// A PostgreSQL database's table.
    Database(&'a PostgresStore),
}

/// Why the keys did not go with a copy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CopyKeysError {
    #[error("the public keys that sealed the runs were not copied: {0}")]
    Key(#[source] KeyError),
    #[error("the public keys that sealed the runs were not copied: {0}")]
    Database(#[source] PgError),
}

/// Copies the public halves of the keys that sealed the source's runs to the target, so
/// that the seals copied with the runs verify there: into a data directory's
/// `keys/retired/`, or a database's table marked retired (they sealed there, they sign
/// nothing here). The number of keys the target did not hold.
///
/// # Errors
/// [`CopyKeysError`]: a key file or the database could not be read or written.
pub async fn copy_keys(from: KeysAt<'_>, to: KeysAt<'_>) -> Result<usize, CopyKeysError> {
    let keys: Vec<String> = match from {
        KeysAt::Directory(dir) => docket_evidence::verifiers(dir)
            .map_err(CopyKeysError::Key)?
            .iter()
            .map(ToString::to_string)
            .collect(),
        KeysAt::Database(db) => db
            .keys()
            .await
            .map_err(CopyKeysError::Database)?
            .into_iter()
            .map(|k| k.verifier)
            .collect(),
    };
    let mut added = 0;
    match to {
        KeysAt::Directory(dir) => {
            let held: Vec<String> = docket_evidence::verifiers(dir)
                .map_err(CopyKeysError::Key)?
                .iter()
                .map(ToString::to_string)
                .collect();
            for key in keys.iter().filter(|k| !held.contains(k)) {
                let key =
                    VerifierKey::parse(key).map_err(|e| CopyKeysError::Key(KeyError::Key(e)))?;
                docket_evidence::retire_verifier(dir, &key).map_err(CopyKeysError::Key)?;
                added += 1;
            }
        }
        KeysAt::Database(db) => {
            let held: Vec<String> = db
                .keys()
                .await
                .map_err(CopyKeysError::Database)?
                .into_iter()
                .map(|k| k.verifier)
                .collect();
            let new: Vec<String> = keys.into_iter().filter(|k| !held.contains(k)).collect();
            if !new.is_empty() {
                db.record_keys(None, &new)
                    .await
                    .map_err(CopyKeysError::Database)?;
                added = new.len();
            }
        }
    }
    Ok(added)
}
