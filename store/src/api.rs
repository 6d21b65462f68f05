//! The backend-neutral store trait. The embedded log implements it today; a PostgreSQL-protocol
//! backend will implement it for several workers sharing one database.

use std::future::Future;
use std::ops::RangeInclusive;

use futures::Stream;

use crate::error::{ChainBreak, StoreError};
use crate::event::{Event, Hash, NewEvent, StreamId};

/// What an append recorded: the sequence of its first event and the hash of each, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    pub stream: StreamId,
    pub first_seq: u64,
    pub hashes: Vec<Hash>,
}

impl Appended {
    /// The stream's version after this append.
    pub fn last_seq(&self) -> u64 {
        self.first_seq + self.hashes.len() as u64 - 1
    }
}

/// A stream and its latest acknowledged event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamHead {
    pub stream: StreamId,
    pub seq: u64,
    pub hash: Hash,
}

/// A state folded up to `seq`, tied to the hash of the event at `seq` so it cannot be
/// applied to a different history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub stream: StreamId,
    pub seq: u64,
    pub event_hash: Hash,
    pub state: Vec<u8>,
}

/// The result of checking a whole stream against its chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    pub stream: StreamId,
    /// Events checked and found sound, from sequence 1.
    pub verified: u64,
    /// The first thing wrong, if anything.
    pub first_break: Option<ChainBreak>,
}

impl VerifyReport {
    pub fn is_sound(&self) -> bool {
        self.first_break.is_none()
    }
}

/// Durable, hash-chained, per-stream event storage.
pub trait EventStore: Send + Sync {
    /// Appends `events` after version `expected_version` (0: the stream is new). Returns only once
    /// the events are durable; a different current version is a [`StoreError::Conflict`].
    fn append(
        &self,
        stream: &StreamId,
        expected_version: u64,
        events: Vec<NewEvent>,
    ) -> impl Future<Output = Result<Appended, StoreError>> + Send;

    /// Events with sequences in `range` that exist when the read starts, in order, checked
    /// against the chain as they are read. Memory is bounded whatever the stream's length.
    fn read(
        &self,
        stream: &StreamId,
        range: RangeInclusive<u64>,
    ) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static;

    /// Events from sequence `from` on, then each new one as it is acknowledged; never ends while
    /// the store is open.
    fn tail(
        &self,
        stream: &StreamId,
        from: u64,
    ) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static;

    /// The stream's head, `None` if it has no events.
    fn head(
        &self,
        stream: &StreamId,
    ) -> impl Future<Output = Result<Option<StreamHead>, StoreError>> + Send;

    /// Every stream with at least one event, in stream id order.
    fn streams(&self) -> impl Future<Output = Result<Vec<StreamHead>, StoreError>> + Send;

    /// Records a state folded up to `seq` (which must exist). Snapshots are a cache of the log:
    /// one written just before a crash may be lost, never wrong.
    fn put_snapshot(
        &self,
        stream: &StreamId,
        seq: u64,
        state: Vec<u8>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The latest snapshot at or before `seq`.
    fn latest_snapshot(
        &self,
        stream: &StreamId,
        at_or_before: u64,
    ) -> impl Future<Output = Result<Option<Snapshot>, StoreError>> + Send;

    /// Re-checks the whole stream: density, links, hashes, blobs.
    fn verify(
        &self,
        stream: &StreamId,
    ) -> impl Future<Output = Result<VerifyReport, StoreError>> + Send;

    /// Stores `bytes` durably under their BLAKE3 hash (once, however often it is put).
    fn put_blob(&self, bytes: Vec<u8>) -> impl Future<Output = Result<Hash, StoreError>> + Send;

    /// A blob's bytes, checked against its hash; `None` if the store has no such blob.
    fn get_blob(
        &self,
        hash: &Hash,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send;
}
