//! Typed errors: each variant says what went wrong and where.

use std::path::PathBuf;

use crate::event::{Hash, StreamId};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("I/O error while {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "{path} is not a docket store (no DOCKET-STORE marker, but the directory is not empty)"
    )]
    ForeignDirectory { path: PathBuf },

    #[error(
        "{path} is written in format version {found}; this build reads only version {supported}"
    )]
    UnsupportedFormat {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    #[error("log damaged in {segment} at byte offset {offset}: {damage}")]
    Corrupt {
        segment: PathBuf,
        offset: u64,
        damage: Box<Damage>,
    },

    #[error(
        "the index covers {segment} up to byte {indexed_to}, but the file holds only {len} bytes: \
         acknowledged events are missing from the log"
    )]
    LogShorterThanIndex {
        segment: PathBuf,
        len: u64,
        indexed_to: u64,
    },

    #[error(
        "optimistic concurrency conflict on stream {stream}: expected version {expected}, actual {actual}"
    )]
    Conflict {
        stream: StreamId,
        expected: u64,
        actual: u64,
    },

    #[error("invalid {what} {name:?}: {reason}")]
    InvalidName {
        what: &'static str,
        name: String,
        reason: &'static str,
    },

    #[error("append to stream {stream} carries no events")]
    EmptyAppend { stream: StreamId },

    #[error("an append to stream {stream} holds {len} bytes; the limit is {max}")]
    TooLarge {
        stream: StreamId,
        len: usize,
        max: usize,
    },

    #[error("a {len}-byte blob exceeds the limit of {max} bytes")]
    BlobTooLarge { len: usize, max: usize },

    #[error("snapshot at sequence {seq} of stream {stream} is beyond its head {head}")]
    SnapshotBeyondHead {
        stream: StreamId,
        seq: u64,
        head: u64,
    },

    #[error(
        "the log writer stopped after an I/O failure ({cause}); nothing after it was acknowledged. \
         Reopen the store to re-verify the log"
    )]
    Poisoned { cause: String },

    #[error("index error ({what}) in {path}")]
    Index { what: String, path: PathBuf },

    /// The index's own files are damaged; opening a store rebuilds it from the log.
    #[error("the index in {path} is damaged ({what}); opening the store rebuilds it from the log")]
    IndexDamaged { what: String, path: PathBuf },

    #[error("the store is closed")]
    Closed,
}

/// What is wrong with a damaged part of the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Damage {
    #[error("bad segment header ({0})")]
    BadSegmentHeader(&'static str),
    #[error("segment number {found} in a file named for segment {named}")]
    MisnumberedSegment { named: u64, found: u64 },
    #[error("batch frame magic is {found:#010x}, not a docket batch")]
    BadFrameMagic { found: u32 },
    #[error("batch frame checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    BadFrameChecksum { stored: u32, computed: u32 },
    #[error("batch frame declares {declared} bytes but only {available} remain")]
    TruncatedFrame { declared: u64, available: u64 },
    #[error("record does not decode: {0}")]
    BadRecord(String),
    #[error("a valid batch follows a damaged one, so this is not a torn tail")]
    DamageBeforeValidData,
    #[error("segment {0} is missing from the sequence of segment files")]
    MissingSegment(u64),
    #[error("stream {stream}: {break_}")]
    Chain {
        stream: StreamId,
        break_: ChainBreak,
    },
}

/// The first thing wrong with a stream's chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChainBreak {
    #[error("sequence {expected} is missing (found {found} next)")]
    Missing { expected: u64, found: u64 },
    #[error("event at sequence {seq} belongs to stream {found}")]
    ForeignStream { seq: u64, found: StreamId },
    #[error("event at sequence {seq} links to {found}, but the previous hash is {expected}")]
    WrongPrev {
        seq: u64,
        expected: Hash,
        found: Hash,
    },
    #[error("event at sequence {seq} hashes to {computed}, but records {stored}")]
    WrongHash {
        seq: u64,
        stored: Hash,
        computed: Hash,
    },
    #[error("blob {hash} of sequence {seq} is missing or does not match its hash")]
    BadBlob { seq: u64, hash: Hash },
    #[error("event at sequence {seq} is unreadable: {what}")]
    Unreadable { seq: u64, what: String },
    #[error("the index says the head is {indexed}, the log holds {found} events")]
    HeadMismatch { indexed: u64, found: u64 },
}

impl ChainBreak {
    /// The first sequence at which the chain is wrong.
    pub fn seq(&self) -> u64 {
        match self {
            ChainBreak::Missing { expected, .. } => *expected,
            ChainBreak::ForeignStream { seq, .. }
            | ChainBreak::WrongPrev { seq, .. }
            | ChainBreak::WrongHash { seq, .. }
            | ChainBreak::BadBlob { seq, .. }
            | ChainBreak::Unreadable { seq, .. } => *seq,
            ChainBreak::HeadMismatch { indexed, found } => (*indexed).min(*found) + 1,
        }
    }
}

pub(crate) fn io_err(
    op: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.into();
    move |source| StoreError::Io { op, path, source }
}
