//! Checking events against their chain: shared by reads, `verify` and recovery.

use crate::chain::{event_hash, genesis};
use std::borrow::Cow;

use crate::codec::{TAG_EVENT, decode_event, parse_record};
use crate::error::ChainBreak;
use crate::event::{Event, Hash, StreamId};
use crate::merkle::{TreeHash, leaf_hash};

/// Checks that `event` (whose canonical body is `body`) is event `seq` of `stream`, links to
/// `prev` (when known) and hashes to what it records.
pub(crate) fn check_link(
    stream: &StreamId,
    seq: u64,
    prev: Option<Hash>,
    event: &Event,
    body: &[u8],
) -> Result<(), ChainBreak> {
    if &event.stream != stream {
        return Err(ChainBreak::ForeignStream {
            seq,
            found: event.stream.clone(),
        });
    }
    if event.seq != seq {
        return Err(ChainBreak::Missing {
            expected: seq,
            found: event.seq,
        });
    }
    let expected_prev = match prev {
        Some(p) => Some(p),
        None if seq == 1 => Some(genesis(stream)),
        None => None,
    };
    if let Some(expected) = expected_prev
        && event.prev != expected
    {
        return Err(ChainBreak::WrongPrev {
            seq,
            expected,
            found: event.prev,
        });
    }
    let computed = event_hash(&event.prev, body);
    if computed != event.hash {
        return Err(ChainBreak::WrongHash {
            seq,
            stored: event.hash,
            computed,
        });
    }
    Ok(())
}

/// Decodes a framed event record read from the log and checks it as event `seq` of `stream`.
pub(crate) fn check_record(
    stream: &StreamId,
    seq: u64,
    prev: Option<Hash>,
    record: &[u8],
) -> Result<Event, ChainBreak> {
    checked_record(stream, seq, prev, record).map(|(event, _)| event)
}

/// [`check_record`], with the event's Merkle leaf hash (over the record as it is before
/// compression, FORMAT.md §9).
pub(crate) fn check_record_leaf(
    stream: &StreamId,
    seq: u64,
    prev: Option<Hash>,
    record: &[u8],
) -> Result<(Event, TreeHash), ChainBreak> {
    checked_record(stream, seq, prev, record).map(|(event, body)| (event, leaf_hash(&body)))
}

/// The checked event and its record body, uncompressed.
fn checked_record<'a>(
    stream: &StreamId,
    seq: u64,
    prev: Option<Hash>,
    record: &'a [u8],
) -> Result<(Event, Cow<'a, [u8]>), ChainBreak> {
    let unreadable = |what: String| ChainBreak::Unreadable { seq, what };
    let raw = parse_record(record).map_err(unreadable)?;
    if raw.len != record.len() {
        return Err(unreadable(format!(
            "record is {} bytes, the index says {}",
            raw.len,
            record.len()
        )));
    }
    if raw.tag != TAG_EVENT {
        return Err(unreadable(format!(
            "record tag {} is not an event",
            raw.tag
        )));
    }
    let (event, body) = decode_event(&raw.body, Some(stream)).map_err(unreadable)?;
    check_link(stream, seq, prev, &event, body)?;
    Ok((event, raw.body))
}

/// Decodes an event's record as every backend keeps it (`canonical body ‖ prev ‖ hash`,
/// unframed) and checks it as event `seq` of `stream` linking to `prev` (the genesis hash
/// for event 1; the link is left unchecked for a later event when `prev` is `None`).
pub fn check_event_record(
    stream: &StreamId,
    seq: u64,
    prev: Option<Hash>,
    record: &[u8],
) -> Result<Event, ChainBreak> {
    let (event, body) =
        decode_event(record, Some(stream)).map_err(|what| ChainBreak::Unreadable { seq, what })?;
    check_link(stream, seq, prev, &event, body)?;
    Ok(event)
}
