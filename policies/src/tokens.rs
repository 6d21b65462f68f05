//! Token counts with a real BPE tokenizer: cl100k_base, counted by `bpe-openai` (the
//! vocabulary is compiled into the binary: nothing is downloaded). Its counts equal
//! tiktoken's for every text (checked against `tiktoken-rs` in the tests below), so
//! counts recorded in audit events stay the same whichever counted them; it is several
//! times faster, and counting sits on every handoff. The tokenizer is built once per
//! process; counting is a pure function of the text.
//!
//! Splitting a text into pieces (the pre-tokenizer) runs cl100k's own patterns, as
//! bpe-openai writes them, on a regex with a search cache per thread: bpe-openai's regex
//! is private and takes its cache from a pool shared by every thread for each piece,
//! which cost more than the search on a busy runtime. The split is checked piece for
//! piece against bpe-openai's (tests below).
//!
//! JSON payloads repeat the same short pieces (keys, quotes and colons, common words), so
//! each thread remembers the count of the pre-tokenizer's short pieces: a piece's count
//! depends on the piece alone, so the cache changes no result, only the time. Whole texts
//! repeat too (a run's payload is counted where it is handed over, again where a context
//! edge carries it, again where a prior output brings it): each thread also remembers the
//! counts of the latest long texts under their BLAKE3 hash, for the same reason.

use std::cell::RefCell;
use std::sync::LazyLock;

use regex_automata::meta::{Cache, Regex};
use regex_automata::{Anchored, Input};
use serde_json::Value;

use crate::canonical;

/// Pieces longer than this are counted each time (they rarely repeat); shorter ones are
/// remembered under their bytes packed in a `u128` (see [`piece_key`]).
const CACHED_PIECE_BYTES: usize = 15;
/// The per-thread cache is emptied when it holds this many pieces.
const CACHED_PIECES: usize = 1 << 16;
/// Texts at least this long are remembered whole (hashing costs a few percent of
/// splitting; a short text's pieces are mostly in the piece cache already).
const CACHED_TEXT_BYTES: usize = 512;
/// The per-thread cache of whole texts is emptied when it holds this many.
const CACHED_TEXTS: usize = 4096;

/// cl100k's pre-tokenizer, as bpe-openai 0.3 builds it: tiktoken's `\s+(?!\S)` is the
/// second pattern, `\s+\s`, whose last character is given back (a look-ahead of one).
const CL100K_PATTERNS: [&str; 3] = [
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$",
    "\\s+\\s",
    "\\s+",
];
/// The pattern of [`CL100K_PATTERNS`] whose match ends in one character of look-ahead.
const LOOKAHEAD_PATTERN: usize = 1;

/// The patterns compiled; `None` only if they did not (then bpe-openai's own split is
/// used, the same pieces more slowly).
static CL100K_SPLIT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new_many(&CL100K_PATTERNS).ok());

/// Piece (as [`piece_key`]) → count, looked up only and never iterated: its order cannot
/// reach a result (foldhash: SipHash cost more than the lookups it serves).
#[expect(
    clippy::disallowed_types,
    reason = "looked up only, never iterated: no order can reach a count"
)]
type PieceCounts = std::collections::HashMap<u128, u32, foldhash::fast::RandomState>;

/// Text (as its BLAKE3 hash) → count, looked up only and never iterated, like
/// [`PieceCounts`].
#[expect(
    clippy::disallowed_types,
    reason = "looked up only, never iterated: no order can reach a count"
)]
type TextCounts = std::collections::HashMap<[u8; 32], usize, foldhash::fast::RandomState>;

/// A piece of at most [`CACHED_PIECE_BYTES`] bytes as one number: its bytes, then its
/// length in the top byte (so that pieces that differ only by trailing zero bytes differ),
/// looked up without a pointer to follow or a string to compare.
fn piece_key(piece: &[u8]) -> u128 {
    let mut bytes = [0u8; 16];
    bytes[..piece.len()].copy_from_slice(piece);
    bytes[15] = piece.len() as u8;
    u128::from_le_bytes(bytes)
}

thread_local! {
    static PIECE_TOKENS: RefCell<PieceCounts> = RefCell::new(PieceCounts::default());
    static TEXT_TOKENS: RefCell<TextCounts> = RefCell::new(TextCounts::default());
    static SPLIT_CACHE: RefCell<Option<Cache>> =
        RefCell::new(CL100K_SPLIT.as_ref().map(Regex::create_cache));
}

/// Calls `each` with the pre-tokenizer's pieces of `text` in order (bpe-openai's
/// `Tokenizer::split` for cl100k, with this thread's search cache).
fn split(text: &str, mut each: impl FnMut(&str)) {
    SPLIT_CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let (Some(regex), Some(cache)) = (CL100K_SPLIT.as_ref(), cache.as_mut()) else {
            bpe_openai::cl100k_base().split(text).for_each(each);
            return;
        };
        let mut last = 0;
        while last < text.len() {
            let rest = &text[last..];
            let input = Input::new(rest).anchored(Anchored::Yes);
            let Some(m) = regex.search_with(cache, &input) else {
                break;
            };
            let mut end = last + m.range().end;
            if m.pattern().as_usize() == LOOKAHEAD_PATTERN
                && let Some(ahead) = text[last..end].chars().next_back()
            {
                end -= ahead.len_utf8();
            }
            if end == last {
                break;
            }
            each(&text[last..end]);
            last = end;
        }
    });
}

/// Tokens in `text`: the sum over the pre-tokenizer's pieces of each piece's BPE count,
/// as `bpe_openai::Tokenizer::count` computes it (cl100k does no normalisation).
pub fn count_text(text: &str) -> usize {
    if text.len() < CACHED_TEXT_BYTES {
        return count_pieces(text);
    }
    let key = *blake3::hash(text.as_bytes()).as_bytes();
    if let Some(n) = TEXT_TOKENS.with(|cache| cache.borrow().get(&key).copied()) {
        return n;
    }
    let n = count_pieces(text);
    TEXT_TOKENS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= CACHED_TEXTS {
            cache.clear();
        }
        cache.insert(key, n);
    });
    n
}

/// [`count_text`] without this thread's memory of whole texts (its memory of short pieces
/// still serves): what counting a text costs the first time it is seen, the floor a
/// benchmark compares the engine with.
pub fn count_text_afresh(text: &str) -> usize {
    count_pieces(text)
}

/// [`count_text`] piece by piece.
fn count_pieces(text: &str) -> usize {
    let bpe = &bpe_openai::cl100k_base().bpe;
    PIECE_TOKENS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let mut total = 0;
        split(text, |piece| {
            let bytes = piece.as_bytes();
            if bytes.len() > CACHED_PIECE_BYTES {
                total += bpe.count(bytes);
                return;
            }
            let key = piece_key(bytes);
            total += if let Some(n) = cache.get(&key) {
                *n as usize
            } else {
                let n = bpe.count(bytes);
                if cache.len() >= CACHED_PIECES {
                    cache.clear();
                }
                cache.insert(key, u32::try_from(n).unwrap_or(u32::MAX));
                n
            };
        });
        total
    })
}

/// Tokens in the compact, key-sorted JSON rendering of `value`.
pub fn count_value(value: &Value) -> usize {
    count_text(&render(value))
}

/// The compact, key-sorted JSON text a context is measured (and summarised) as.
pub fn render(value: &Value) -> String {
    canonical::json_text(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tiktoken(text: &str) -> usize {
        tiktoken_rs::cl100k_base_singleton()
            .encode_ordinary(text)
            .len()
    }

    #[test]
    fn counts_bpe_tokens_not_characters() {
        // "hello world" is two cl100k tokens; a character heuristic would say ~3.
        assert_eq!(count_text("hello world"), 2);
        assert_eq!(count_text(""), 0);
        assert!(count_value(&serde_json::json!({"fraud_score": 0.92})) > 3);
    }

    #[test]
    fn pieces_that_differ_by_trailing_zero_bytes_are_remembered_apart() {
        assert_ne!(piece_key(b"a"), piece_key(b"a\0"));
        assert_ne!(piece_key(b""), piece_key(b"\0"));
        for text in ["a", "a\0", "a", "\0\0", "a\0"] {
            assert_eq!(count_text(text), tiktoken(text), "{text:?}");
        }
    }

    #[test]
    fn the_piece_cache_changes_no_count() {
        let text = r#"{"gap_id":"g-1","gaps":[{"gap_id":"g-2"}]} hello hello"#;
        let cold = bpe_openai::cl100k_base().count(text);
        assert_eq!(count_text(text), cold);
        assert_eq!(count_text(text), cold, "second count, from the cache");
    }

    #[test]
    fn the_text_cache_changes_no_count() {
        let long = |word: &str| format!("{{\"notes\":\"{}\"}}", word.repeat(CACHED_TEXT_BYTES));
        let (a, b) = (long("ab "), long("a b"));
        assert_eq!(a.len(), b.len());
        for text in [&a, &b, &a, &b] {
            assert_eq!(count_text(text), bpe_openai::cl100k_base().count(text));
        }
        assert_ne!(count_text(&a), count_text(&b), "two texts, two counts");
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "a test reading the example files"
    )]
    fn equals_tiktoken_on_the_bundled_examples() {
        // Every JSON file the examples ship (inputs, snapshots, fixtures): real payloads.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let mut seen = 0;
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("examples dir").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "json" || e == "toml") {
                    let text = std::fs::read_to_string(&path).expect("example file");
                    assert_eq!(count_text(&text), tiktoken(&text), "{}", path.display());
                    if let Ok(v) = serde_json::from_str::<Value>(&text) {
                        let rendered = render(&v);
                        assert_eq!(count_text(&rendered), tiktoken(&rendered));
                    }
                    seen += 1;
                }
            }
        }
        assert!(seen > 5, "only {seen} example files found");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The pre-tokenizer is the subtle part (tiktoken's `\s+(?!\S)` look-ahead is
        /// emulated): whitespace runs, newlines, digits, apostrophes, non-Latin scripts.
        #[test]
        fn equals_tiktoken_on_random_text(
            text in "([ \t\r\n]{0,4}|[a-zA-Z]{1,8}|[0-9]{1,5}|'(s|t|re|ve|m|ll|d)|[.,:;!?\"{}\\[\\]]{1,3}|é|ß|日本語|🙂|\u{00a0}|\u{3000})*"
        ) {
            prop_assert_eq!(count_text(&text), tiktoken(&text));
        }

        /// The split with this thread's cache gives bpe-openai's pieces, in order.
        #[test]
        fn splits_as_bpe_openai_does(
            text in "([ \t\r\n]{0,4}|[a-zA-Z]{1,8}|[0-9]{1,5}|'(s|t|re|ve|m|ll|d)|[.,:;!?\"{}\\[\\]]{1,3}|é|日本語|🙂|\u{00a0})*|.*"
        ) {
            let mut ours = Vec::new();
            split(&text, |piece| ours.push(piece.to_owned()));
            let theirs: Vec<&str> = bpe_openai::cl100k_base().split(&text).collect();
            prop_assert_eq!(ours, theirs);
        }

        #[test]
        fn equals_tiktoken_on_any_string(text in any::<String>()) {
            prop_assert_eq!(count_text(&text), tiktoken(&text));
        }
    }
}
