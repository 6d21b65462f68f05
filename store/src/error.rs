//! Typed errors: each variant says what went wrong and where.

use std::path::PathBuf;

use crate::event::{Hash, StreamId};
use crate::merkle::{TreeError, TreeHash};

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
        "{path} is written in format version {found}; this build reads versions {} to {supported}",
        crate::codec::OLDEST_FORMAT_VERSION
    )]
    UnsupportedFormat {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    #[error(
        "log damaged in {} at byte offset {offset}: {damage}{}",
        segment.display(),
        recorded_after(streams_after)
    )]
    Corrupt {
        segment: PathBuf,
        offset: u64,
        damage: Box<Damage>,
        /// Streams with events recorded after the damage (found by reading on from the next
        /// sound batch): what a reader that stops at the damage does not show. Empty when
        /// there are none or the damage was found by a read of one stream.
        streams_after: Vec<StreamId>,
    },

    /// The store's marker file is there but is not a docket store marker.
    #[error(
        "{} is not a docket store marker ({why}): it should hold one line, `docket-store format N`. \
         If the directory is a docket data directory, the marker was damaged: write that line back \
         (N = 3, or the format its segments' headers name)",
        path.display()
    )]
    BadMarker { path: PathBuf, why: &'static str },

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

    #[error("digest of stream {stream} at sequence {seq} is beyond its head {head}")]
    DigestBeyondHead {
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

    /// The append came from a process whose claim on the stream was taken over by another
    /// (docs/postgres.md, "Workers"): refused, atomically with the version check, so two
    /// processes never both extend a run. The process stops driving the stream.
    #[error(
        "stream {stream} is now driven by {holder} (claim {current}); this process held claim {held}, which lapsed: it no longer drives the stream"
    )]
    Fenced {
        stream: StreamId,
        held: u64,
        current: u64,
        holder: String,
    },

    /// A backend other than the embedded log failed (a database refused or lost a
    /// statement): `source` is that backend's own error, which names what it was doing and
    /// where, never a password.
    #[error("{source}")]
    Backend {
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// Another process holds the data directory's writer lock (FORMAT.md §10).
    #[error(
        "the data directory {} is being written by {}; waited {:.1} s for it to finish",
        path.display(),
        holder.as_ref().map_or_else(|| "another process".to_owned(), ToString::to_string),
        waited.as_secs_f64()
    )]
    Held {
        path: PathBuf,
        holder: Option<crate::lock::LockHolder>,
        waited: std::time::Duration,
    },

    /// A read-only open of a directory that does not exist (it is never created).
    #[error("no docket data directory at {path}")]
    NoDataDirectory { path: PathBuf },

    /// A directory with something in it but no store marker, opened read-only.
    #[error("{path} is not a docket data directory (it has no DOCKET-STORE marker)")]
    NotADataDirectory { path: PathBuf },

    /// An append or blob put on a store opened read-only.
    #[error("the data directory {path} was opened read-only: nothing can be recorded through it")]
    ReadOnly { path: PathBuf },

    /// A stream whose events fail their checks, found by a read-only open: the other
    /// streams stay readable (FORMAT.md §10).
    #[error(
        "stream {stream} is damaged from event {seq} on: in {segment} at byte offset {offset}: {damage}"
    )]
    StreamDamaged {
        stream: StreamId,
        seq: u64,
        segment: PathBuf,
        offset: u64,
        damage: Box<Damage>,
    },

    /// A tree head or proof asked of a stream for events or sizes it does not have.
    #[error("stream {stream}: {problem}")]
    OutsideTree {
        stream: StreamId,
        problem: OutsideTree,
    },

    #[error("Merkle tree: {0}")]
    Tree(#[from] TreeError),
}

/// What a tree head or proof request asked for that the stream does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OutsideTree {
    #[error("there is no event 0: events are numbered from 1")]
    EventZero,
    #[error("event {seq} is not in the tree of size {size}, which holds {}", holds(*size))]
    EventBeyondTree { seq: u64, size: u64 },
    #[error("a tree of size {size} was asked for, but {}", there_are(*head))]
    TreeBeyondStream { size: u64, head: u64 },
    #[error(
        "a consistency proof goes from an older tree to a newer, larger one; asked from size {old} to size {new}"
    )]
    Shrinking { old: u64, new: u64 },
}

fn there_are(head: u64) -> String {
    match head {
        0 => "there are no events yet".to_owned(),
        1 => "there is only event 1".to_owned(),
        n => format!("there are only events 1 to {n}"),
    }
}

fn holds(size: u64) -> String {
    match size {
        0 => "no events".to_owned(),
        1 => "only event 1".to_owned(),
        n => format!("events 1 to {n}"),
    }
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
    /// A file named as a segment beyond a gap in the numbering: either segments were removed
    /// or the file is not part of this log.
    #[error(
        "a segment file numbered {found} follows segment {after}: segments {} to {} are missing, or this file is not part of this log (if it does not belong, move it out of log/)",
        after + 1,
        found - 1
    )]
    StraySegment { found: u64, after: u64 },
    /// Damage to a batch the writer acknowledged as durable: a crash cannot tear it.
    #[error(
        "{damage}, in a batch acknowledged as durable (the log was acknowledged up to byte {offset} of segment {segment}): not a torn write"
    )]
    AcknowledgedBatch {
        damage: Box<Damage>,
        segment: u64,
        offset: u64,
    },
    /// The log ends before the position up to which it was acknowledged.
    #[error(
        "the log ends here, but it was acknowledged up to byte {offset} of segment {segment}: acknowledged events are missing"
    )]
    AcknowledgedMissing { segment: u64, offset: u64 },
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
    /// A node of the Merkle tree kept in the index differs from the one the events give (or
    /// is missing). The log is sound; the index is a cache: deleting `index/` rebuilds it.
    #[error(
        "the index's Merkle tree node at level {level}, index {index} (events {} to {}) is {}, but the events give {computed}; delete the store's index/ directory to rebuild it from the log",
        first_seq(*level, *index),
        first_seq(*level, *index) + (1u64 << *level) - 1,
        stored.map_or_else(|| "missing".to_owned(), |h| h.to_hex())
    )]
    TreeNode {
        level: u32,
        index: u64,
        stored: Option<TreeHash>,
        computed: TreeHash,
    },
}

/// `; recorded after it: streams a, b` (at most 20 named), or nothing.
fn recorded_after(streams: &[StreamId]) -> String {
    const NAMED: usize = 20;
    if streams.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = streams.iter().take(NAMED).map(StreamId::as_str).collect();
    let more = streams.len().saturating_sub(NAMED);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "; events of {} {}{more} were recorded after it and cannot be read past it",
        if streams.len() == 1 {
            "stream"
        } else {
            "streams"
        },
        names.join(", ")
    )
}

/// The sequence of the first event under a tree node.
fn first_seq(level: u32, index: u64) -> u64 {
    (index << level) + 1
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
            ChainBreak::TreeNode { level, index, .. } => first_seq(*level, *index),
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
