//! Token counts with a real BPE tokenizer (cl100k_base from `tiktoken-rs`, whose
//! vocabulary is compiled into the binary: nothing is downloaded). The tokenizer is built
//! once per process; counting is a pure function of the text.

use serde_json::Value;

use crate::canonical;

/// Tokens in `text`.
pub fn count_text(text: &str) -> usize {
    tiktoken_rs::cl100k_base_singleton()
        .encode_ordinary(text)
        .len()
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

    #[test]
    fn counts_bpe_tokens_not_characters() {
        // "hello world" is two cl100k tokens; a character heuristic would say ~3.
        assert_eq!(count_text("hello world"), 2);
        assert_eq!(count_text(""), 0);
        assert!(count_value(&serde_json::json!({"fraud_score": 0.92})) > 3);
    }
}
