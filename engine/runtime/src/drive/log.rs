//! Reading a run's events back from the store.

use futures::StreamExt;

use std::collections::BTreeMap;

use docket_store::{Disclosures, Event, EventStore, Hash, Payload, StoredDisclosure, StreamId};

use super::RuntimeError;
use docket_decider::{
    COMMITTED_PAYLOAD, CommittedPayload, ContentRef, DisclosureLookup, REFERENCED_PAYLOAD,
    ReferencedPayload, RunEvent,
};

/// An event as recorded, with its envelope.
#[derive(Debug, Clone)]
pub struct RecordedEvent {
    /// Position in the run's log, from 1.
    pub seq: u64,
    /// Wall time it was appended, ns since the Unix epoch.
    pub recorded_at_ns: i64,
    /// Its hash in the chain (hex).
    pub hash: String,
    /// The policy bundle hash in force (hex), if any.
    pub policy: Option<String>,
    /// The decoded event.
    pub event: RunEvent,
    /// For an event of payload encoding 2, the content its payload refers to by hash
    /// (docs/events.md#content-stored-once); `event` holds that content in place.
    pub content: Vec<ContentRef>,
    /// For an event of payload encoding 3, the JSON pointers at which `event` holds the
    /// marker of a value `docket shred` erased (docs/events.md#values-committed-apart):
    /// what was decided of such an event cannot be re-derived.
    pub shredded: Vec<String>,
}

pub(super) async fn read_run<S: EventStore>(
    store: &S,
    stream: &StreamId,
    run_id: &str,
) -> Result<Vec<RecordedEvent>, RuntimeError> {
    let Some(head) = store.head(stream).await.map_err(RuntimeError::Store)? else {
        return Err(RuntimeError::UnknownRun(run_id.to_owned()));
    };
    let mut reader = Box::pin(store.read(stream, 1..=head.seq));
    let mut out = Vec::new();
    let mut disclosed = None;
    while let Some(event) = reader.next().await {
        let event = event.map_err(RuntimeError::Store)?;
        let plain = payload_and_refs(store, &event, &mut disclosed).await?;
        let decoded = decode(run_id, &event, &plain.bytes)?;
        out.push(RecordedEvent {
            seq: event.seq,
            recorded_at_ns: event.recorded_at.0,
            hash: event.hash.to_hex(),
            policy: event.policy.map(|h| h.to_hex()),
            event: decoded,
            content: plain.content,
            shredded: plain.shredded,
        });
    }
    Ok(out)
}

/// One event read from the store, decoded with its envelope.
pub(super) async fn recorded<S: EventStore>(
    store: &S,
    run_id: &str,
    event: &Event,
) -> Result<RecordedEvent, RuntimeError> {
    let plain = payload_and_refs(store, event, &mut None).await?;
    let decoded = decode(run_id, event, &plain.bytes)?;
    Ok(RecordedEvent {
        seq: event.seq,
        recorded_at_ns: event.recorded_at.0,
        hash: event.hash.to_hex(),
        policy: event.policy.map(|h| h.to_hex()),
        event: decoded,
        content: plain.content,
        shredded: plain.shredded,
    })
}

/// An event's plain payload bytes (what encoding 1 records): fetched from the blob store
/// when the whole payload was stored apart, and with the content an encoding-2 payload
/// refers to put back in place (docs/events.md#content-stored-once), so everything that
/// reads events sees what it saw before.
pub(super) async fn payload<S: EventStore>(
    store: &S,
    event: &Event,
) -> Result<Vec<u8>, RuntimeError> {
    Ok(payload_and_refs(store, event, &mut None).await?.bytes)
}

/// [`payload`] for events of one run read in order: `disclosed` keeps the run's
/// disclosures once read (payload encoding 3).
pub(super) async fn payload_of_run<S: EventStore>(
    store: &S,
    event: &Event,
    disclosed: &mut Option<Disclosures>,
) -> Result<Vec<u8>, RuntimeError> {
    Ok(payload_and_refs(store, event, disclosed).await?.bytes)
}

/// An event's payload bytes as recorded (an encoding-2 payload with its references), its
/// blob fetched when the whole payload was stored apart.
pub(super) async fn stored_payload<S: EventStore>(
    store: &S,
    event: &Event,
) -> Result<Vec<u8>, RuntimeError> {
    Ok(match &event.payload {
        Payload::Inline(bytes) => bytes.clone(),
        Payload::Blob(blob) => store
            .get_blob(&blob.hash)
            .await
            .map_err(RuntimeError::Store)?
            .unwrap_or_default(),
    })
}

/// An event's plain payload, with what its encoding says of it.
struct Plain {
    /// The plain payload bytes.
    bytes: Vec<u8>,
    /// The references an encoding-2 payload holds.
    content: Vec<ContentRef>,
    /// Where an encoding-3 payload holds the marker of a shredded value.
    shredded: Vec<String>,
}

/// [`payload`], the references an encoding-2 payload holds and where an encoding-3
/// payload's values were shredded.
async fn payload_and_refs<S: EventStore>(
    store: &S,
    event: &Event,
    disclosed: &mut Option<Disclosures>,
) -> Result<Plain, RuntimeError> {
    let bytes = stored_payload(store, event).await?;
    if event.kind_version == COMMITTED_PAYLOAD {
        let (bytes, shredded) = committed_plain(store, event, &bytes, disclosed).await?;
        return Ok(Plain {
            bytes,
            content: Vec::new(),
            shredded,
        });
    }
    if event.kind_version != REFERENCED_PAYLOAD {
        return Ok(Plain {
            bytes,
            content: Vec::new(),
            shredded: Vec::new(),
        });
    }
    let stream = event.stream.as_str();
    let parsed =
        ReferencedPayload::parse(&event.kind, &bytes).map_err(|source| RuntimeError::Decode {
            run: stream.into(),
            source,
        })?;
    let mut content: BTreeMap<[u8; 32], Vec<u8>> = BTreeMap::new();
    for r in parsed.refs() {
        if content.contains_key(&r.hash) {
            continue;
        }
        if let Some(bytes) = store
            .get_blob(&Hash(r.hash))
            .await
            .map_err(RuntimeError::Store)?
        {
            content.insert(r.hash, bytes);
        }
    }
    let plain = parsed
        .resolve(|r| content.get(&r.hash).cloned())
        .map_err(|source| RuntimeError::Decode {
            run: stream.into(),
            source,
        })?;
    Ok(Plain {
        bytes: docket_policies::canonical_json_bytes(&plain),
        content: parsed.refs().to_vec(),
        shredded: Vec::new(),
    })
}

/// The plain payload of an encoding-3 event: its commitments opened with the run's
/// disclosures (docs/events.md#values-committed-apart), read once into `disclosed`; a
/// shredded value reads as its marker, its pointer listed.
async fn committed_plain<S: EventStore>(
    store: &S,
    event: &Event,
    bytes: &[u8],
    disclosed: &mut Option<Disclosures>,
) -> Result<(Vec<u8>, Vec<String>), RuntimeError> {
    let stream = event.stream.as_str();
    let parsed =
        CommittedPayload::parse(&event.kind, bytes).map_err(|source| RuntimeError::Decode {
            run: stream.into(),
            source,
        })?;
    if parsed.slots().is_empty() {
        return Ok((bytes.to_vec(), Vec::new()));
    }
    if disclosed.is_none() {
        *disclosed = Some(
            store
                .disclosures(&event.stream)
                .await
                .map_err(RuntimeError::Store)?,
        );
    }
    let held = disclosed.as_ref();
    let opened = parsed
        .open(|digest| lookup(held, digest))
        .map_err(|source| RuntimeError::Decode {
            run: stream.into(),
            source,
        })?;
    Ok((
        docket_policies::canonical_json_bytes(&opened.value),
        opened.shredded,
    ))
}

/// A disclosure as the decider reads it.
pub(crate) fn lookup(held: Option<&Disclosures>, digest: &[u8; 32]) -> DisclosureLookup {
    match held.and_then(|h| h.get(digest)) {
        Some(StoredDisclosure::Present(bytes)) => DisclosureLookup::Present(bytes.clone()),
        Some(StoredDisclosure::Shredded(note)) => {
            DisclosureLookup::Shredded(String::from_utf8_lossy(note).into_owned())
        }
        None => DisclosureLookup::Missing,
    }
}

/// An event of run `run` decoded, or an error naming the run and the event kind.
pub(super) fn decode(run: &str, event: &Event, bytes: &[u8]) -> Result<RunEvent, RuntimeError> {
    RunEvent::decode(&event.kind, bytes).map_err(|source| RuntimeError::Decode {
        run: run.into(),
        source,
    })
}
