//! Snapshots: a run's state encoded so that resuming, `status` and `inspect` start from it
//! and fold only the events after it (docs/replay.md#long-runs). A snapshot is a cache of
//! the log, never a record: one this build cannot read is ignored and the log folded
//! instead, and the state folded from a snapshot plus the events after it equals the
//! state folded from the first event (checked by `docket verify` and by a property test).
//!
//! The encoding: the 4 bytes `DKSS`, the snapshot format version and the decider version
//! of the build that wrote it (each a little-endian u32), then the state as MessagePack
//! with structs as maps. MessagePack rather than postcard because the state holds JSON
//! values and tagged enums, which only a self-describing format decodes. A call made
//! again is stored as its recorded request and the id of the call it repeats, and linked
//! again on decoding, so a snapshot grows with the run's events, not with their square.

use super::RunState;
use crate::events::{DECIDER_VERSION, RunEvent};

/// The first bytes of every snapshot.
const MAGIC: &[u8; 4] = b"DKSS";

/// The version of the snapshot encoding; raised whenever the state's encoding changes, so
/// that a snapshot written by another build is ignored rather than misread.
pub const SNAPSHOT_FORMAT: u32 = 2;

const HEADER: usize = 12;

/// Why a snapshot was not read. Every case means the same to a reader: fold the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The bytes do not start as a docket snapshot.
    #[error("not a docket state snapshot (it does not start with DKSS)")]
    NotASnapshot,
    /// Written in another snapshot format.
    #[error("a snapshot in format {found}, and this build reads format {SNAPSHOT_FORMAT}")]
    OtherFormat {
        /// The format the snapshot says it is in.
        found: u32,
    },
    /// Written by a build with another decider version, whose state may differ.
    #[error(
        "a snapshot written with decider version {found}, and this build is version {DECIDER_VERSION}"
    )]
    OtherDecider {
        /// The decider version the snapshot was written with.
        found: u32,
    },
    /// The state could not be encoded or decoded.
    #[error("the snapshot's state does not {what}: {message}")]
    Body {
        /// `encode` or `decode`.
        what: &'static str,
        /// What the encoder or decoder said.
        message: String,
    },
}

impl RunState {
    /// The state as a snapshot (format [`SNAPSHOT_FORMAT`]).
    ///
    /// # Errors
    /// [`SnapshotError::Body`] if a value of the state cannot be encoded.
    pub fn encode_snapshot(&self) -> Result<Vec<u8>, SnapshotError> {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&SNAPSHOT_FORMAT.to_le_bytes());
        out.extend_from_slice(&DECIDER_VERSION.to_le_bytes());
        let mut encoder = rmp_serde::Serializer::new(&mut out).with_struct_map();
        serde::Serialize::serialize(self, &mut encoder).map_err(|e| SnapshotError::Body {
            what: "encode",
            message: e.to_string(),
        })?;
        Ok(out)
    }

    /// A state from a snapshot this build wrote (same format, same decider version).
    ///
    /// # Errors
    /// [`SnapshotError`]: not a snapshot, another format or decider version, or a body
    /// that does not decode. The caller folds the log instead.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let (header, body) = bytes
            .split_at_checked(HEADER)
            .ok_or(SnapshotError::NotASnapshot)?;
        let word = |at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&header[at..at + 4]);
            u32::from_le_bytes(w)
        };
        if &header[..4] != MAGIC {
            return Err(SnapshotError::NotASnapshot);
        }
        match (word(4), word(8)) {
            (SNAPSHOT_FORMAT, DECIDER_VERSION) => {}
            (SNAPSHOT_FORMAT, found) => return Err(SnapshotError::OtherDecider { found }),
            (found, _) => return Err(SnapshotError::OtherFormat { found }),
        }
        rmp_serde::from_slice(body).map_err(|e| SnapshotError::Body {
            what: "decode",
            message: e.to_string(),
        })
    }

    /// Folds `events`, the ones after this state's version, onto it: from a snapshot, the
    /// state as [`RunState::fold`] would make it of the whole log.
    #[must_use]
    pub fn fold_on<'a>(mut self, events: impl IntoIterator<Item = &'a RunEvent>) -> Self {
        for event in events {
            self.apply(event);
        }
        self
    }

    /// Whether `snapshot` holds exactly the state folded from `events`, the log up to the
    /// sequence it was taken at (what `docket verify` checks of a stored snapshot).
    ///
    /// # Errors
    /// [`SnapshotError`] if the snapshot cannot be read by this build.
    pub fn snapshot_matches<'a>(
        snapshot: &[u8],
        events: impl IntoIterator<Item = &'a RunEvent>,
    ) -> Result<bool, SnapshotError> {
        let stored = Self::decode_snapshot(snapshot)?;
        Ok(stored == Self::fold(events))
    }
}

/// How many events apart the runtime writes snapshots of a run being driven.
///
/// Chosen from the fold rate: a resume reads and folds the events after the latest
/// snapshot at about 15 µs each on the 2-core development machine, so 2,048 of them cost
/// about 30 ms on top of decoding the snapshot, and a resume from any point of a
/// 1,000,000-event run stays within 100 ms (bench/RESULTS.md, replay_speed). The state
/// keeps only what later decisions read, so a snapshot is small; the store keeps the
/// latest few and one per doubling of the run (store/FORMAT.md §12), so they do not grow
/// without bound.
pub const SNAPSHOT_EVERY: u64 = 2048;

/// The distance between snapshots of a run whose log is `version` events long: every
/// [`SNAPSHOT_EVERY`] events at any length (it was every eighth of the run when a state
/// was as large as its log).
#[must_use]
pub fn snapshot_interval(version: u64) -> u64 {
    let _ = version;
    SNAPSHOT_EVERY
}

/// Whether a drive that took a run's log from version `from` to `to` passed a point where
/// a snapshot is due (a multiple of [`SNAPSHOT_EVERY`]).
#[must_use]
pub fn snapshot_due(from: u64, to: u64) -> bool {
    to / SNAPSHOT_EVERY > from / SNAPSHOT_EVERY
}
