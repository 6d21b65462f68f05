//! The event envelope: what the log records for every handoff, decision and side effect.

use std::fmt;
use std::sync::Arc;

use crate::error::StoreError;

/// Longest stream id or event kind accepted, in bytes: ids are keys, not payloads.
pub const MAX_NAME_LEN: usize = 256;

/// A 32-byte BLAKE3 digest: an event hash, a blob hash or a policy bundle hash.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    /// Lower-case hex, the form used in documents and exports.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 64 hex digits; `None` for anything else.
    pub fn from_hex(text: &str) -> Option<Hash> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            out[i] = u8::try_from(hi * 16 + lo).ok()?;
        }
        Some(Hash(out))
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({})", self.to_hex())
    }
}

/// One stream per run: the unit of ordering, optimistic concurrency and chaining.
/// Shared, so every event read back from a stream carries its id without a copy.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct StreamId(Arc<str>);

impl StreamId {
    /// Accepts 1..=256 bytes of UTF-8 without control characters (ids appear in logs and paths of exports).
    pub fn new(id: impl Into<String>) -> Result<StreamId, StoreError> {
        let id = id.into();
        check_name("stream id", &id)?;
        Ok(StreamId(id.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) fn check_name(what: &'static str, name: &str) -> Result<(), StoreError> {
    let reason = if name.is_empty() {
        Some("is empty")
    } else if name.len() > MAX_NAME_LEN {
        Some("is longer than 256 bytes")
    } else if name.chars().any(char::is_control) {
        Some("contains a control character")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(StoreError::InvalidName {
            what,
            name: name.chars().take(64).collect(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Wall-clock time as nanoseconds since the Unix epoch (UTC), read by the runtime, never by the store.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct WallTime(pub i64);

/// A content-addressed payload kept outside the event: its BLAKE3 hash (plain `blake3::hash`) and length.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BlobRef {
    pub hash: Hash,
    pub len: u64,
}

/// An event's payload as recorded: inline bytes, or a reference to a blob for one longer than
/// the size threshold.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Payload {
    Inline(Vec<u8>),
    Blob(BlobRef),
}

/// What a caller appends; the store adds stream, sequence and hashes.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NewEvent {
    pub kind: String,
    pub kind_version: u32,
    pub recorded_at: WallTime,
    /// Hash of the policy bundle in force when the event was decided, if any.
    pub policy: Option<Hash>,
    /// Stored inline up to the store's blob threshold, as a blob when longer (FORMAT.md §3).
    pub payload: Vec<u8>,
}

/// An event as recorded in the log.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Event {
    pub stream: StreamId,
    /// Dense, from 1.
    pub seq: u64,
    pub kind: String,
    pub kind_version: u32,
    pub recorded_at: WallTime,
    pub policy: Option<Hash>,
    pub payload: Payload,
    /// Hash of event `seq - 1`, or the stream's genesis value for `seq == 1`.
    pub prev: Hash,
    pub hash: Hash,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_bad_input() {
        let h = Hash([0xab; 32]);
        assert_eq!(Hash::from_hex(&h.to_hex()), Some(h));
        assert_eq!(Hash::from_hex("zz"), None);
        assert_eq!(Hash::from_hex(&"g".repeat(64)), None);
    }

    #[test]
    fn stream_ids_are_validated() {
        assert!(StreamId::new("run-1").is_ok());
        assert!(matches!(
            StreamId::new(""),
            Err(StoreError::InvalidName {
                reason: "is empty",
                ..
            })
        ));
        assert!(StreamId::new("a\nb").is_err());
        assert!(StreamId::new("x".repeat(257)).is_err());
        assert!(StreamId::new("x".repeat(256)).is_ok());
    }
}
