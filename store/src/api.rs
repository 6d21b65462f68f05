//! The backend-neutral store trait, implemented by the embedded log and by PostgreSQL
//! (`docket-store-postgres`); `crate::contract` holds the checks both pass.

use std::future::Future;
use std::ops::RangeInclusive;

use futures::Stream;

use crate::disclosures::Disclosures;
use crate::error::{ChainBreak, StoreError};
use crate::event::{Event, Hash, NewEvent, StreamId};
use crate::merkle::{ProofFailure, TreeHash, verify_consistency, verify_inclusion};

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

/// A caller's digest of a stream up to event `seq` (whose hash is `event_hash`): what it
/// derives from the events and wants back cheaply, such as docket's run summaries. A cache
/// kept in a file beside the log, never part of it: stale once the stream grows past `seq`,
/// so a reader compares `seq` and `event_hash` with the stream before believing `bytes`
/// (store/FORMAT.md §14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamDigest {
    pub stream: StreamId,
    pub seq: u64,
    pub event_hash: Hash,
    pub bytes: Vec<u8>,
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

/// A stream's RFC 9162 Merkle tree over its first `size` events: what a checkpoint signs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeHead {
    pub size: u64,
    pub root: TreeHash,
}

/// That event `seq` is leaf `seq - 1` of the stream's tree of `tree.size` events: the audit
/// path from its leaf hash to the root (RFC 9162 §2.1.3), nearest sibling first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InclusionProof {
    pub stream: StreamId,
    pub seq: u64,
    /// The event's BLAKE3 chain hash, as `read` and the exports give it.
    pub event_hash: Hash,
    /// SHA-256 of `0x00 ‖ canonical body ‖ prev ‖ hash` (store/FORMAT.md, "Merkle tree").
    pub leaf: TreeHash,
    pub tree: TreeHead,
    pub path: Vec<TreeHash>,
}

impl InclusionProof {
    /// The leaf's index in the tree: `seq - 1`.
    pub fn leaf_index(&self) -> u64 {
        self.seq.saturating_sub(1)
    }

    /// Checks the path against the root, as an auditor's RFC 9162 library would.
    pub fn check(&self) -> Result<(), ProofFailure> {
        verify_inclusion(
            &self.leaf,
            self.leaf_index(),
            self.tree.size,
            &self.path,
            &self.tree.root,
        )
    }
}

/// That the stream's tree of `old.size` events is a prefix of its tree of `new.size` events
/// (RFC 9162 §2.1.4): nothing recorded by then was changed or removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsistencyProof {
    pub stream: StreamId,
    pub old: TreeHead,
    pub new: TreeHead,
    pub path: Vec<TreeHash>,
}

impl ConsistencyProof {
    /// Checks the proof against both roots, as an auditor's RFC 9162 library would.
    pub fn check(&self) -> Result<(), ProofFailure> {
        verify_consistency(
            self.old.size,
            self.new.size,
            &self.old.root,
            &self.new.root,
            &self.path,
        )
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

    /// Appends `events` as [`EventStore::append`] does, with `blobs` written in the same
    /// atomic, durable write, before the events: content the events' payloads refer to by
    /// hash (docket's payload encoding 2, store/FORMAT.md §11). Each blob is stored once:
    /// one the store already holds, or that appears twice, is not written again.
    fn append_with_blobs(
        &self,
        stream: &StreamId,
        expected_version: u64,
        events: Vec<NewEvent>,
        blobs: Vec<Vec<u8>>,
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

    /// Records digests of streams (each replacing the stream's previous one). A digest of a
    /// stream that has no event `seq` is refused ([`StoreError::DigestBeyondHead`]); a
    /// read-only view keeps none (the writer's are the ones it reads).
    fn put_digests(
        &self,
        digests: Vec<StreamDigest>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Every stream's latest digest, in stream id order (none for a stream never given one,
    /// or whose digest was lost: the file is a cache).
    fn digests(&self) -> impl Future<Output = Result<Vec<StreamDigest>, StoreError>> + Send;

    /// Removes every snapshot of `stream` (an erasure must not leave its content in a
    /// cache); how many were removed. The log is untouched: a later read folds it.
    fn remove_snapshots(
        &self,
        stream: &StreamId,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// The stream's Merkle tree head over its first `size` events (`None`: all it holds now).
    /// A stream with no events has the empty tree (size 0).
    fn tree_head(
        &self,
        stream: &StreamId,
        size: Option<u64>,
    ) -> impl Future<Output = Result<TreeHead, StoreError>> + Send;

    /// The inclusion proof of event `seq` in the stream's tree of `tree_size` events (`None`:
    /// all it holds now). Asking for event 0, an event beyond the tree or a tree larger than
    /// the stream is a [`StoreError::OutsideTree`].
    fn inclusion_proof(
        &self,
        stream: &StreamId,
        seq: u64,
        tree_size: Option<u64>,
    ) -> impl Future<Output = Result<InclusionProof, StoreError>> + Send;

    /// The consistency proof from the stream's tree of `old_size` events to its tree of
    /// `new_size` (`None`: all it holds now); [`StoreError::OutsideTree`] when `old_size`
    /// exceeds `new_size` or either exceeds the stream.
    fn consistency_proof(
        &self,
        stream: &StreamId,
        old_size: u64,
        new_size: Option<u64>,
    ) -> impl Future<Output = Result<ConsistencyProof, StoreError>> + Send;

    /// Re-checks the whole stream: density, links, hashes, blobs, and the Merkle tree nodes
    /// the index keeps against the tree the events give.
    fn verify(
        &self,
        stream: &StreamId,
    ) -> impl Future<Output = Result<VerifyReport, StoreError>> + Send;

    /// Keeps disclosures of `stream` (docket's payload encoding 3: the values its payloads
    /// commit to by digest) outside the log, durably, each `(digest, bytes)` once: called
    /// before the events that commit to them are appended (FORMAT.md §12). Refused by a
    /// read-only view.
    fn put_disclosures(
        &self,
        stream: &StreamId,
        disclosures: Vec<([u8; 32], Vec<u8>)>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Every disclosure kept for `stream`, and the tombstones of those erased.
    fn disclosures(
        &self,
        stream: &StreamId,
    ) -> impl Future<Output = Result<Disclosures, StoreError>> + Send;

    /// Erases the disclosures of `digests` kept for `stream`, a tombstone holding `note`
    /// (who, when, why) in each one's place; what the stream keeps afterwards. The log is
    /// untouched, so it keeps verifying; the stream's snapshots (folded state, values in
    /// the clear) are removed with them. Refused by a read-only view.
    fn shred_disclosures(
        &self,
        stream: &StreamId,
        digests: Vec<[u8; 32]>,
        note: Vec<u8>,
    ) -> impl Future<Output = Result<Disclosures, StoreError>> + Send;

    /// Whether other processes append to this store while this one has it open (a
    /// database that workers and servers share): what this process keeps of the log
    /// (its run list) is checked against the store's heads before it is believed. The
    /// embedded log has one writer, this process or none.
    fn shared(&self) -> bool {
        false
    }

    /// Confirms, just before something outside is changed or asked on the stream's behalf
    /// (an effect executed or verified), that this process still holds its claim on the
    /// stream, renewing it, and returns the claim's epoch: the fence an effect executor is
    /// given, higher with every new claim. [`StoreError::Fenced`] when another process
    /// claimed the stream since. A store with one writer (the embedded log) holds every
    /// stream it writes, with no claims and so no fence.
    fn confirm_claim(
        &self,
        stream: &StreamId,
    ) -> impl Future<Output = Result<Option<u64>, StoreError>> + Send {
        let _ = stream;
        async { Ok(None) }
    }

    /// Stores `bytes` durably under their BLAKE3 hash (once, however often it is put).
    fn put_blob(&self, bytes: Vec<u8>) -> impl Future<Output = Result<Hash, StoreError>> + Send;

    /// A blob's bytes, checked against its hash; `None` if the store has no such blob.
    fn get_blob(
        &self,
        hash: &Hash,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send;
}
