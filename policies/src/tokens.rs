//! Token counts with a real BPE tokenizer: cl100k_base, counted by `bpe-openai` (the
//! vocabulary is compiled into the binary: nothing is downloaded). Its counts equal
//! tiktoken's for every text (checked against `tiktoken-rs` in the tests below), so
//! counts recorded in audit events stay the same whichever counted them; it is several
//! times faster, and counting sits on every handoff. The tokenizer is built once per
//! process; counting is a pure function of the text.
//!
//! JSON payloads repeat the same short pieces (keys, quotes and colons, common words), so
//! each thread remembers the count of the pre-tokenizer's short pieces: a piece's count
//! depends on the piece alone, so the cache changes no result, only the time.

use std::cell::RefCell;

use serde_json::Value;

use crate::canonical;

/// Pieces longer than this are counted each time (they rarely repeat).
const CACHED_PIECE_BYTES: usize = 24;
/// The per-thread cache is emptied when it holds this many pieces.
const CACHED_PIECES: usize = 1 << 16;

/// Piece → count, looked up only and never iterated: its order cannot reach a result.
#[expect(
    clippy::disallowed_types,
    reason = "looked up only, never iterated: no order can reach a count"
)]
type PieceCounts = std::collections::HashMap<Box<str>, u32>;

thread_local! {
    static PIECE_TOKENS: RefCell<PieceCounts> = RefCell::new(PieceCounts::new());
}

/// Tokens in `text`: the sum over the pre-tokenizer's pieces of each piece's BPE count,
/// as `bpe_openai::Tokenizer::count` computes it (cl100k does no normalisation).
pub fn count_text(text: &str) -> usize {
    let tokenizer = bpe_openai::cl100k_base();
    PIECE_TOKENS.with(|cache| {
        let mut cache = cache.borrow_mut();
        tokenizer
            .split(text)
            .map(|piece| {
                if piece.len() > CACHED_PIECE_BYTES {
                    return tokenizer.bpe.count(piece.as_bytes());
                }
                if let Some(n) = cache.get(piece) {
                    return *n as usize;
                }
                let n = tokenizer.bpe.count(piece.as_bytes());
                if cache.len() >= CACHED_PIECES {
                    cache.clear();
                }
                cache.insert(piece.into(), u32::try_from(n).unwrap_or(u32::MAX));
                n
            })
            .sum()
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
    fn the_piece_cache_changes_no_count() {
        let text = r#"{"gap_id":"g-1","gaps":[{"gap_id":"g-2"}]} hello hello"#;
        let cold = bpe_openai::cl100k_base().count(text);
        assert_eq!(count_text(text), cold);
        assert_eq!(count_text(text), cold, "second count, from the cache");
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

        #[test]
        fn equals_tiktoken_on_any_string(text in any::<String>()) {
            prop_assert_eq!(count_text(&text), tiktoken(&text));
        }
    }
}
