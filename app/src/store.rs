//! The backend a command or server records in: a data directory (the default, no server)
//! or a PostgreSQL database that many processes share (docs/postgres.md).

use std::ops::RangeInclusive;
use std::path::PathBuf;

use docket_store::{
    Appended, ConsistencyProof, Disclosures, EmbeddedStore, Event, EventStore, Hash,
    InclusionProof, NewEvent, Snapshot, StoreError, StreamDigest, StreamHead, StreamId, TreeHead,
    VerifyReport,
};
use docket_store_postgres::PostgresStore;
use futures::Stream;
use futures::future::Either;

/// Where runs are recorded, as `--store` (or `DOCKET_STORE`) names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// A data directory (`--data`, the default).
    Directory(PathBuf),
    /// A PostgreSQL database: its connection URL (which may hold a password: never shown).
    Postgres(String),
}

impl StoreLocation {
    /// `--store VALUE`: a `postgres://` URL, or else a data directory's path.
    #[must_use]
    pub fn parse(value: &str) -> StoreLocation {
        if docket_store_postgres::is_postgres_url(value) {
            StoreLocation::Postgres(value.to_owned())
        } else {
            StoreLocation::Directory(PathBuf::from(value))
        }
    }
}

/// An open store of either backend.
#[derive(Clone)]
pub enum Store {
    Embedded(EmbeddedStore),
    Postgres(PostgresStore),
}

impl Store {
    /// The data directory's store, for what only a data directory has (read-only views,
    /// what opening repaired, the writer's counters).
    #[must_use]
    pub fn embedded(&self) -> Option<&EmbeddedStore> {
        match self {
            Store::Embedded(s) => Some(s),
            Store::Postgres(_) => None,
        }
    }

    /// The database's store.
    #[must_use]
    pub fn postgres(&self) -> Option<&PostgresStore> {
        match self {
            Store::Postgres(s) => Some(s),
            Store::Embedded(_) => None,
        }
    }

    /// Waits for queued appends and closes a data directory (a database's connections
    /// close when the last clone is dropped).
    pub async fn close(self) {
        if let Store::Embedded(s) = self {
            s.close().await;
        }
    }
}

impl From<EmbeddedStore> for Store {
    fn from(s: EmbeddedStore) -> Store {
        Store::Embedded(s)
    }
}

impl From<PostgresStore> for Store {
    fn from(s: PostgresStore) -> Store {
        Store::Postgres(s)
    }
}

/// Calls the same method on whichever backend `self` is.
macro_rules! each {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            Store::Embedded($s) => $call,
            Store::Postgres($s) => $call,
        }
    };
}

impl EventStore for Store {
    async fn append(
        &self,
        stream: &StreamId,
        expected_version: u64,
        events: Vec<NewEvent>,
    ) -> Result<Appended, StoreError> {
        each!(self, s => s.append(stream, expected_version, events).await)
    }

    async fn append_with_blobs(
        &self,
        stream: &StreamId,
        expected_version: u64,
        events: Vec<NewEvent>,
        blobs: Vec<Vec<u8>>,
    ) -> Result<Appended, StoreError> {
        each!(self, s => s.append_with_blobs(stream, expected_version, events, blobs).await)
    }

    fn read(
        &self,
        stream: &StreamId,
        range: RangeInclusive<u64>,
    ) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static {
        match self {
            Store::Embedded(s) => Either::Left(s.read(stream, range)),
            Store::Postgres(s) => Either::Right(s.read(stream, range)),
        }
    }

    fn tail(
        &self,
        stream: &StreamId,
        from: u64,
    ) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static {
        match self {
            Store::Embedded(s) => Either::Left(s.tail(stream, from)),
            Store::Postgres(s) => Either::Right(s.tail(stream, from)),
        }
    }

    async fn head(&self, stream: &StreamId) -> Result<Option<StreamHead>, StoreError> {
        each!(self, s => s.head(stream).await)
    }

    async fn streams(&self) -> Result<Vec<StreamHead>, StoreError> {
        each!(self, s => s.streams().await)
    }

    async fn put_snapshot(
        &self,
        stream: &StreamId,
        seq: u64,
        state: Vec<u8>,
    ) -> Result<(), StoreError> {
        each!(self, s => s.put_snapshot(stream, seq, state).await)
    }

    async fn latest_snapshot(
        &self,
        stream: &StreamId,
        at_or_before: u64,
    ) -> Result<Option<Snapshot>, StoreError> {
        each!(self, s => s.latest_snapshot(stream, at_or_before).await)
    }

    async fn put_digests(&self, digests: Vec<StreamDigest>) -> Result<(), StoreError> {
        each!(self, s => s.put_digests(digests).await)
    }

    async fn digests(&self) -> Result<Vec<StreamDigest>, StoreError> {
        each!(self, s => s.digests().await)
    }

    async fn remove_snapshots(&self, stream: &StreamId) -> Result<u64, StoreError> {
        each!(self, s => s.remove_snapshots(stream).await)
    }

    async fn tree_head(
        &self,
        stream: &StreamId,
        size: Option<u64>,
    ) -> Result<TreeHead, StoreError> {
        each!(self, s => s.tree_head(stream, size).await)
    }

    async fn inclusion_proof(
        &self,
        stream: &StreamId,
        seq: u64,
        tree_size: Option<u64>,
    ) -> Result<InclusionProof, StoreError> {
        each!(self, s => s.inclusion_proof(stream, seq, tree_size).await)
    }

    async fn consistency_proof(
        &self,
        stream: &StreamId,
        old_size: u64,
        new_size: Option<u64>,
    ) -> Result<ConsistencyProof, StoreError> {
        each!(self, s => s.consistency_proof(stream, old_size, new_size).await)
    }

    async fn verify(&self, stream: &StreamId) -> Result<VerifyReport, StoreError> {
        each!(self, s => s.verify(stream).await)
    }

    async fn put_disclosures(
        &self,
        stream: &StreamId,
        disclosures: Vec<([u8; 32], Vec<u8>)>,
    ) -> Result<(), StoreError> {
        each!(self, s => s.put_disclosures(stream, disclosures).await)
    }

    async fn disclosures(&self, stream: &StreamId) -> Result<Disclosures, StoreError> {
        each!(self, s => s.disclosures(stream).await)
    }

    async fn shred_disclosures(
        &self,
        stream: &StreamId,
        digests: Vec<[u8; 32]>,
        note: Vec<u8>,
    ) -> Result<Disclosures, StoreError> {
        each!(self, s => s.shred_disclosures(stream, digests, note).await)
    }

    fn shared(&self) -> bool {
        each!(self, s => s.shared())
    }

    async fn confirm_claim(&self, stream: &StreamId) -> Result<Option<u64>, StoreError> {
        each!(self, s => s.confirm_claim(stream).await)
    }

    async fn put_blob(&self, bytes: Vec<u8>) -> Result<Hash, StoreError> {
        each!(self, s => s.put_blob(bytes).await)
    }

    async fn get_blob(&self, hash: &Hash) -> Result<Option<Vec<u8>>, StoreError> {
        each!(self, s => s.get_blob(hash).await)
    }
}
