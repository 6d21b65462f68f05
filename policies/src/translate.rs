//! Conversation translation (docs/governance.md#translation-and-token-budgets) without an LLM, so
//! it is deterministic and replayable: summarising renders leaf fields as `path: value` lines in
//! sorted path order and keeps as many as fit the token budget; recasting wraps the context as a
//! message.

use serde_json::{Map, Value, json};

use crate::rules::scope::MessageRole;
use crate::tokens;

/// Longest rendering of one value in a summary line, in characters.
const MAX_VALUE_CHARS: usize = 240;

/// `value` itself if it fits `max_tokens`, else `{summary, fields_omitted}` that does.
pub fn summarize(value: &Value, max_tokens: usize) -> Value {
    if tokens::count_value(value) <= max_tokens {
        return value.clone();
    }
    let mut lines = Vec::new();
    flatten(value, String::new(), &mut lines);
    let total = lines.len();
    let build = |n: usize| {
        let text = lines
            .iter()
            .take(n)
            .map(|(_, line)| line.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        json!({ "summary": text, "fields_omitted": total - n })
    };
    // Largest prefix of lines that fits: token counts grow with the prefix.
    let (mut lo, mut hi) = (0usize, total);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if tokens::count_value(&build(mid)) <= max_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let fitted = build(lo);
    if tokens::count_value(&fitted) <= max_tokens {
        fitted
    } else {
        // Even the empty summary does not fit: pass nothing rather than exceed the budget.
        Value::Null
    }
}

/// A summary made to a token budget ([`summarize_within`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// What the receiver gets: `{summary, fields_omitted}` as `wrap` presents it, or
    /// `null` when not even a summary without lines fits the budget.
    pub value: Value,
    /// The path of each line kept, as the summary names it (`items[0].id`).
    pub kept: Vec<String>,
    /// Lines left out.
    pub omitted: usize,
}

/// The context as `path: value` lines, as many as fit `max_tokens` once `wrap` has
/// presented the summary (a recast message, say): the whole of what the receiver gets is
/// within the budget, always. Unlike [`summarize`], a context that would fit whole is
/// summarised all the same (its lines all kept); an empty object or `null` has no line.
/// When not even a summary of no line fits, the receiver gets `null` (never more than the
/// budget).
pub fn summarize_within(
    value: &Value,
    max_tokens: usize,
    wrap: impl Fn(Value) -> Value,
) -> Summary {
    let mut lines = Vec::new();
    // Nothing (an empty object, `null`) has no line to summarise.
    if !(value.is_null() || value.as_object().is_some_and(Map::is_empty)) {
        flatten(value, String::new(), &mut lines);
    }
    let total = lines.len();
    let build = |n: usize| {
        let text = lines
            .iter()
            .take(n)
            .map(|(_, line)| line.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        wrap(json!({ "summary": text, "fields_omitted": total - n }))
    };
    let fits = |v: &Value| tokens::count_value(v) <= max_tokens;
    // Largest prefix of lines that fits: token counts grow with the prefix (checked below,
    // so that a count that does not grow can cost lines, never the budget).
    let (mut lo, mut hi) = (0usize, total);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(&build(mid)) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    loop {
        let made = build(lo);
        if fits(&made) {
            return Summary {
                value: made,
                kept: lines
                    .iter()
                    .take(lo)
                    .map(|(path, _)| path.clone())
                    .collect(),
                omitted: total - lo,
            };
        }
        if lo == 0 {
            return Summary {
                value: Value::Null,
                kept: Vec::new(),
                omitted: total,
            };
        }
        lo -= 1;
    }
}

/// Each leaf of `v` as its path and its summary line, `path: value`, in sorted order.
fn flatten(v: &Value, prefix: String, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                if let Some(child) = m.get(k) {
                    flatten(child, p, out);
                }
            }
        }
        Value::Array(items) if items.iter().any(|i| i.is_object() || i.is_array()) => {
            for (i, item) in items.iter().enumerate() {
                flatten(item, format!("{prefix}[{i}]"), out);
            }
        }
        leaf => {
            let text = match leaf {
                Value::String(s) => s.clone(),
                other => tokens::render(other),
            };
            let short: String = text.chars().take(MAX_VALUE_CHARS).collect();
            let ellipsis = if short.len() < text.len() { "…" } else { "" };
            let name = if prefix.is_empty() {
                "value"
            } else {
                prefix.as_str()
            };
            out.push((name.to_owned(), format!("{name}: {short}{ellipsis}")));
        }
    }
}

/// Presents `context` as a message of `role` from `source_agent_id`.
pub fn recast(context: Value, role: MessageRole, source_agent_id: &str) -> Value {
    let role = match role {
        MessageRole::System => "system",
        MessageRole::User => "user",
        MessageRole::Assistant => "assistant",
    };
    let mut m = Map::new();
    m.insert("role".to_owned(), Value::from(role));
    m.insert("source_agent_id".to_owned(), Value::from(source_agent_id));
    m.insert("content".to_owned(), context);
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_fits_the_budget_and_is_deterministic() {
        let big: Map<String, Value> = (0..200)
            .map(|i| {
                (
                    format!("field_{i:03}"),
                    Value::from(format!("value number {i} with some words")),
                )
            })
            .collect();
        let v = Value::Object(big);
        let s = summarize(&v, 100);
        assert!(tokens::count_value(&s) <= 100);
        assert_eq!(s, summarize(&v, 100));
        let omitted = s.get("fields_omitted").and_then(Value::as_u64).unwrap();
        assert!(omitted > 0 && omitted < 200);
        assert!(
            s["summary"]
                .as_str()
                .unwrap()
                .starts_with("field_000: value number 0")
        );
    }

    #[test]
    fn small_values_pass_unchanged() {
        let v = json!({"a": 1});
        assert_eq!(summarize(&v, 50), v);
    }
}
