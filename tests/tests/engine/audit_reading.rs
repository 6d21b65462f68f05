//! An independent reading of what a handoff delivered, to check its audit against
//! (docs/governance.md#the-handoff-audit): its own JSON rendering, its own leaf paths,
//! tiktoken's token counts, and a summary read back from its `path: value` lines. It
//! shares no code with the scoping it checks.

use std::collections::BTreeSet;

use serde_json::Value;

/// Compact JSON, keys sorted: written here, not the crate's canonical writer.
pub(crate) fn render(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).unwrap());
                out.push(':');
                render(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&serde_json::to_string(scalar).unwrap()),
    }
}

/// cl100k_base tokens of the value's compact, key-sorted JSON, as tiktoken counts them.
pub(crate) fn tokens(v: &Value) -> usize {
    let mut text = String::new();
    render(v, &mut text);
    tiktoken_rs::cl100k_base_singleton()
        .encode_ordinary(&text)
        .len()
}

/// Leaf field paths: keys whose values are no non-empty object; an array is transparent
/// when it holds a non-empty object (its elements laid over one another), else a leaf.
pub(crate) fn leaf_paths(v: &Value) -> BTreeSet<String> {
    fn walk(v: &Value, path: &str, out: &mut BTreeSet<String>) {
        let leaf = |out: &mut BTreeSet<String>| {
            if !path.is_empty() {
                out.insert(path.to_owned());
            }
        };
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, child) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(child, &p, out);
                }
            }
            Value::Array(items)
                if items
                    .iter()
                    .any(|i| i.as_object().is_some_and(|m| !m.is_empty())) =>
            {
                for i in items {
                    walk(i, path, out);
                }
            }
            _ => leaf(out),
        }
    }
    let mut out = BTreeSet::new();
    walk(v, "", &mut out);
    out
}

/// What the receiver got, read back: the content under a recast message, and the lines
/// of a summary (`None` when it is no summary).
pub(crate) struct Reading {
    pub(crate) content: Value,
    pub(crate) summary_lines: Option<Vec<String>>,
    pub(crate) fields_omitted: Option<u64>,
}

pub(crate) fn read(delivered: &Value, recast: bool) -> Reading {
    let content = match delivered {
        Value::Object(m) if recast => {
            assert_eq!(
                m.keys().map(String::as_str).collect::<BTreeSet<_>>(),
                BTreeSet::from(["content", "role", "source_agent_id"]),
                "a recast message: {delivered}"
            );
            m["content"].clone()
        }
        other => other.clone(),
    };
    // An object of exactly these two keys is a summary (the payloads read here have no
    // such object of their own).
    let is_summary = content.as_object().is_some_and(|m| {
        m.len() == 2 && m.contains_key("summary") && m.contains_key("fields_omitted")
    });
    if is_summary {
        let text = content["summary"].as_str().unwrap().to_owned();
        let lines = if text.is_empty() {
            Vec::new()
        } else {
            text.split('\n').map(str::to_owned).collect()
        };
        Reading {
            fields_omitted: content["fields_omitted"].as_u64(),
            summary_lines: Some(lines),
            content,
        }
    } else {
        Reading {
            content,
            summary_lines: None,
            fields_omitted: None,
        }
    }
}

/// The payload's leaves a summary's lines hold a value of: a line's path (before `: `,
/// array indices left out) is the leaf's or lies under it.
pub(crate) fn summarised(lines: &[String], payload_leaves: &BTreeSet<String>) -> BTreeSet<String> {
    let paths: Vec<String> = lines
        .iter()
        .map(|line| {
            let (path, _) = line.split_once(": ").expect("a `path: value` line");
            let mut out = String::new();
            let mut skipping = false;
            for c in path.chars() {
                match c {
                    '[' => skipping = true,
                    ']' => skipping = false,
                    _ if !skipping => out.push(c),
                    _ => {}
                }
            }
            out
        })
        .collect();
    payload_leaves
        .iter()
        .filter(|leaf| {
            paths
                .iter()
                .any(|p| p == *leaf || p.starts_with(&format!("{leaf}.")))
        })
        .cloned()
        .collect()
}
