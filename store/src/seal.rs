//! Turning new events into the records every backend keeps: the canonical body, the link to
//! the previous event and the chain hash (store/FORMAT.md §3), and the Merkle leaf over
//! them. Computed by docket, never by a database, so a run's hashes and trees do not depend
//! on where it is stored.

use crate::chain::{blob_hash, event_hash};
use crate::codec::{BodyFields, PayloadView, encode_body};
use crate::error::StoreError;
use crate::event::{BlobRef, Hash, NewEvent, StreamId, check_name};
use crate::merkle::{TreeHash, leaf_hash};

/// Payloads longer than this many bytes are kept once as a content-addressed blob and the
/// event carries a reference to it. Every backend uses this default: where the payload goes
/// changes the event's body, and so its hash.
pub const BLOB_THRESHOLD: usize = 64 * 1024;

/// An event sealed as event `seq` of its stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedEvent {
    pub seq: u64,
    pub hash: Hash,
    /// `canonical body ‖ prev ‖ hash`: what a backend keeps, and the Merkle leaf's data.
    pub record: Vec<u8>,
    /// SHA-256 of `0x00 ‖ record` (RFC 9162 leaf).
    pub leaf: TreeHash,
    /// The payload, when it went to a blob: its hash and bytes.
    pub blob: Option<(Hash, Vec<u8>)>,
}

/// Appends `canonical body ‖ prev ‖ hash` of `event` as event `seq` after `prev` to `out`;
/// its hash, and the blob reference its payload became if it is longer than
/// `blob_threshold`.
pub(crate) fn write_record(
    stream: &StreamId,
    seq: u64,
    prev: &Hash,
    event: &NewEvent,
    blob_threshold: usize,
    out: &mut Vec<u8>,
) -> Result<(Hash, Option<BlobRef>), StoreError> {
    check_name("event kind", &event.kind)?;
    let blob = (event.payload.len() > blob_threshold).then(|| BlobRef {
        hash: blob_hash(&event.payload),
        len: event.payload.len() as u64,
    });
    let at = out.len();
    encode_body(
        &BodyFields {
            stream: stream.as_str(),
            seq,
            kind: &event.kind,
            kind_version: event.kind_version,
            recorded_at: event.recorded_at,
            policy: event.policy,
            payload: match blob {
                Some(r) => PayloadView::Blob(r),
                None => PayloadView::Inline(&event.payload),
            },
        },
        out,
    );
    let hash = event_hash(prev, &out[at..]);
    out.extend_from_slice(&prev.0);
    out.extend_from_slice(&hash.0);
    Ok((hash, blob))
}

/// Seals `events` as the successors of event `after` (whose hash is `prev`; the stream's
/// genesis hash when `after` is 0), as every backend records them.
pub fn seal_events(
    stream: &StreamId,
    after: u64,
    prev: Hash,
    events: Vec<NewEvent>,
) -> Result<Vec<SealedEvent>, StoreError> {
    let mut sealed = Vec::with_capacity(events.len());
    let mut link = prev;
    for (i, event) in events.into_iter().enumerate() {
        let seq = after + 1 + i as u64;
        let mut record = Vec::with_capacity(event.payload.len().min(BLOB_THRESHOLD) + 160);
        let (hash, blob) = write_record(stream, seq, &link, &event, BLOB_THRESHOLD, &mut record)?;
        sealed.push(SealedEvent {
            seq,
            hash,
            leaf: leaf_hash(&record),
            record,
            blob: blob.map(|r| (r.hash, event.payload)),
        });
        link = hash;
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::genesis;
    use crate::event::WallTime;

    fn new(payload: Vec<u8>) -> NewEvent {
        NewEvent {
            kind: "k".into(),
            kind_version: 1,
            recorded_at: WallTime(7),
            policy: None,
            payload,
        }
    }

    #[test]
    fn sealed_records_decode_to_the_events_the_chain_names() {
        let stream = StreamId::new("s").unwrap();
        let sealed = seal_events(
            &stream,
            0,
            genesis(&stream),
            vec![new(b"a".to_vec()), new(vec![1; BLOB_THRESHOLD + 1])],
        )
        .unwrap();
        let first = crate::decode_event_record(&sealed[0].record).unwrap();
        assert_eq!(
            (first.seq, first.prev, first.hash),
            (1, genesis(&stream), sealed[0].hash)
        );
        let second = crate::decode_event_record(&sealed[1].record).unwrap();
        assert_eq!((second.seq, second.prev), (2, sealed[0].hash));
        assert_eq!(
            second.hash,
            event_hash(&second.prev, &crate::canonical_body(&second))
        );
        assert!(
            matches!(second.payload, crate::Payload::Blob(r) if r.len == BLOB_THRESHOLD as u64 + 1)
        );
        assert_eq!(
            sealed[1].blob.as_ref().map(|(_, b)| b.len()),
            Some(BLOB_THRESHOLD + 1)
        );
        assert_eq!(sealed[0].leaf, crate::merkle::event_leaf_hash(&first));
    }

    #[test]
    fn a_kind_that_is_no_name_is_refused() {
        let stream = StreamId::new("s").unwrap();
        let mut event = new(Vec::new());
        event.kind = String::new();
        assert!(matches!(
            seal_events(&stream, 0, genesis(&stream), vec![event]),
            Err(StoreError::InvalidName { .. })
        ));
    }
}
