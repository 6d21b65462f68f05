//! The hash chain: BLAKE3 in derive-key mode, so event hashes cannot be confused with
//! hashes made for any other purpose.

use std::sync::LazyLock;

use crate::event::{Hash, StreamId};

/// Context string for event hashes: `hash = BLAKE3-derive-key(EVENT_CONTEXT, prev ‖ body)`.
pub const EVENT_CONTEXT: &str = "docket 2026-11-22 event hash v1";
/// Context string for a stream's genesis value: `BLAKE3-derive-key(GENESIS_CONTEXT, stream id)`.
pub const GENESIS_CONTEXT: &str = "docket 2026-11-22 stream genesis v1";

/// The `prev` of a stream's first event, so the first events of two streams never chain alike.
pub fn genesis(stream: &StreamId) -> Hash {
    Hash(blake3::derive_key(
        GENESIS_CONTEXT,
        stream.as_str().as_bytes(),
    ))
}

/// The hash of an event whose canonical body is `body` and whose predecessor hashed to `prev`.
pub fn event_hash(prev: &Hash, body: &[u8]) -> Hash {
    // Deriving the context key is one more compression per event: do it once. Starting from
    // the 32-byte key is cheaper than cloning a whole hasher (its state is about 2 KB).
    use blake3::hazmat::HasherExt;
    static EVENT_KEY: LazyLock<blake3::hazmat::ContextKey> =
        LazyLock::new(|| blake3::hazmat::hash_derive_key_context(EVENT_CONTEXT));
    let mut hasher = blake3::Hasher::new_from_context_key(&EVENT_KEY);
    hasher.update(&prev.0);
    hasher.update(body);
    Hash(*hasher.finalize().as_bytes())
}

/// A blob's address: plain BLAKE3 of its bytes, so any tool can find it.
pub fn blob_hash(bytes: &[u8]) -> Hash {
    Hash(*blake3::hash(bytes).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn genesis_differs_per_stream_and_from_plain_hash() {
        let a = genesis(&StreamId::new("a").unwrap());
        let b = genesis(&StreamId::new("b").unwrap());
        assert_ne!(a, b);
        assert_ne!(a.0, *blake3::hash(b"a").as_bytes());
    }

    #[test]
    fn event_hash_covers_prev_and_body() {
        let p1 = Hash([1; 32]);
        let p2 = Hash([2; 32]);
        assert_ne!(event_hash(&p1, b"x"), event_hash(&p2, b"x"));
        assert_ne!(event_hash(&p1, b"x"), event_hash(&p1, b"y"));
    }
}
