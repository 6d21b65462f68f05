//! docket's event log: append-only, hash-chained, durable by default, crash-safe.
//!
//! Every handoff, policy decision and side effect of a run is an [`Event`] in a stream. The
//! [`EventStore`] trait is what the engine sees; [`EmbeddedStore`] implements it with segment
//! files written by one group-commit writer (one `fdatasync` per batch) and a sled index that
//! can always be rebuilt from the log. The byte format and hash inputs are in `FORMAT.md`.
//!
//! The store knows nothing of policies, agents or workflows: it stores opaque payloads.

// A library reports every failure as an error value naming what and where; it never
// aborts its caller. (Tests are exempt: see clippy.toml.)
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod acknowledged;
mod api;
mod chain;
mod codec;
mod config;
#[cfg(any(test, feature = "contract"))]
pub mod contract;
mod digests;
mod disclosures;
mod embedded;
mod error;
mod event;
#[cfg(any(test, feature = "fault-injection"))]
mod fault;
mod index;
mod lock;
pub mod merkle;
pub mod proofs;
mod reader;
mod recovery;
mod scan;
mod seal;
mod segment;
mod shared;
mod snapshots;
mod tree;
mod verify;
mod writer;

pub use api::{
    Appended, ConsistencyProof, EventStore, InclusionProof, Snapshot, StreamDigest, StreamHead,
    TreeHead, VerifyReport,
};
pub use chain::{EVENT_CONTEXT, GENESIS_CONTEXT, blob_hash, event_hash, genesis};
pub use codec::{
    DICTIONARY, DICTIONARY_ID, FORMAT_VERSION, HASHED_FORMAT_VERSION, OLDEST_FORMAT_VERSION,
};
pub use config::{Durability, StoreConfig};
pub use disclosures::{Disclosures, StoredDisclosure, read_disclosures};
pub use embedded::{EmbeddedStore, MAX_PAYLOAD, WriterStats};
pub use error::{ChainBreak, Damage, OutsideTree, StoreError};
pub use event::{BlobRef, Event, Hash, NewEvent, Payload, StreamId, WallTime};
#[cfg(any(test, feature = "fault-injection"))]
pub use fault::FaultPlan;
pub use lock::LockHolder;
pub use recovery::{BlobDamage, LogDamage, RecoveryReport, StreamDamage, ViewReport};
pub use scan::{LogEnd, LogPosition, ScanError, ScanSummary, Scanned, scan_log};
pub use seal::{BLOB_THRESHOLD, SealedEvent, seal_events};
pub use segment::FileOp;
pub use snapshots::{
    KEEP_LATEST_SNAPSHOTS, SnapshotFile, SnapshotFileError, kept_snapshots, read_snapshot_file,
    snapshot_files,
};
pub use verify::check_event_record;

/// The canonical body encoding of an event: the bytes its hash covers after `prev`.
pub fn canonical_body(event: &Event) -> Vec<u8> {
    codec::body_of(event)
}

/// An event's record as the log holds it, `canonical body ‖ prev ‖ hash`: the leaf data
/// of its Merkle tree and what an export carries, so a verifier needs nothing else.
pub fn event_record(event: &Event) -> Vec<u8> {
    let mut record = codec::body_of(event);
    record.extend_from_slice(&event.prev.0);
    record.extend_from_slice(&event.hash.0);
    record
}

/// Decodes an event's record (`canonical body ‖ prev ‖ hash`, as [`event_record`] makes
/// it). Only decodes: whether the hash is right is the chain's question.
pub fn decode_event_record(record: &[u8]) -> Result<Event, RecordError> {
    codec::decode_event(record, None)
        .map(|(event, _)| event)
        .map_err(RecordError)
}

/// A framed log record as it lies in a segment (`len ‖ tag ‖ body`, FORMAT.md §2), given
/// back uncompressed: an event's `canonical body ‖ prev ‖ hash` (`true`) or a blob's
/// `hash ‖ content` (`false`), whether or not the log keeps it compressed. For tools that
/// read segment files themselves.
pub fn open_record(framed: &[u8]) -> Result<(bool, Vec<u8>), RecordError> {
    let raw = codec::parse_record(framed).map_err(RecordError)?;
    match raw.tag {
        codec::TAG_EVENT => Ok((true, raw.body.into_owned())),
        codec::TAG_BLOB => Ok((false, raw.body.into_owned())),
        other => Err(RecordError(format!(
            "record tag {other} is neither an event nor a blob"
        ))),
    }
}

/// Why bytes are not an event record (what is wrong with them, in words).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RecordError(String);

#[cfg(test)]
mod tests;
