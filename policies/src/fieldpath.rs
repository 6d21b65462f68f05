//! Nested field paths (`fraud_indicators.name`, `prior_outputs.*.score`): parsing,
//! whether a JSON Schema admits one, and selecting or removing what they name in a
//! payload. Arrays are transparent: a path applies to every element. A `*` segment
//! matches any key.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Splits a path into segments, or says what is wrong with it.
pub fn parse(path: &str) -> Result<Vec<&str>, String> {
    if path.is_empty() {
        return Err("empty field path".to_owned());
    }
    let segs: Vec<&str> = path.split('.').collect();
    if segs.iter().any(|s| s.is_empty()) {
        return Err(format!("field path `{path}` has an empty segment"));
    }
    if segs.iter().any(|s| s.chars().any(char::is_whitespace)) {
        return Err(format!("field path `{path}` contains whitespace"));
    }
    Ok(segs)
}

/// Whether some instance of `schema` can contain a value at `segs`.
pub fn schema_admits(schema: &Value, segs: &[&str]) -> bool {
    let Some((first, rest)) = segs.split_first() else {
        return true;
    };
    let Value::Object(s) = schema else {
        return !matches!(schema, Value::Bool(false));
    };
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = s.get(key)
            && key != "allOf"
        {
            return branches.iter().any(|b| schema_admits(b, segs));
        }
    }
    if s.contains_key("$ref") {
        return true; // references are not followed; assume the path may exist
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"array") || (types.is_empty() && s.contains_key("items")) {
        if let Some(items) = s.get("items") {
            if schema_admits(items, segs) {
                return true;
            }
        } else {
            return true;
        }
        if !types.contains(&"object") {
            return false;
        }
    }
    if !types.is_empty() && !types.contains(&"object") && !types.contains(&"array") {
        return false; // a scalar has no fields
    }
    let props = s.get("properties").and_then(Value::as_object);
    if *first == "*" {
        if props.is_some_and(|p| p.values().any(|v| schema_admits(v, rest))) {
            return true;
        }
    } else if let Some(sub) = props.and_then(|p| p.get(*first)) {
        return schema_admits(sub, rest);
    }
    match s.get("additionalProperties") {
        Some(Value::Bool(false)) => false,
        Some(sub @ Value::Object(_)) => schema_admits(sub, rest),
        _ => true,
    }
}

/// A trie of field paths; `terminal` means "this whole subtree".
#[derive(Default)]
struct Trie {
    terminal: bool,
    children: std::collections::BTreeMap<String, Trie>,
}

impl Trie {
    fn build<S: AsRef<str>>(paths: &[S]) -> Self {
        let mut root = Self::default();
        for p in paths {
            let mut node = &mut root;
            for seg in p.as_ref().split('.') {
                node = node.children.entry(seg.to_owned()).or_default();
            }
            node.terminal = true;
        }
        root
    }
    fn child<'t>(&'t self, key: &str) -> impl Iterator<Item = &'t Trie> {
        self.children
            .get(key)
            .into_iter()
            .chain(self.children.get("*"))
    }
}

/// Keeps only what `paths` select (arrays are transparent).
pub fn select<S: AsRef<str>>(payload: &Value, paths: &[S]) -> Value {
    let trie = Trie::build(paths);
    select_in(payload, &trie).unwrap_or_else(|| Value::Object(Map::new()))
}

fn select_in(v: &Value, t: &Trie) -> Option<Value> {
    if t.terminal {
        return Some(v.clone());
    }
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, child) in m {
                let mut kept: Option<Value> = None;
                for sub in t.child(k) {
                    if let Some(s) = select_in(child, sub) {
                        kept = Some(match kept {
                            Some(prev) => merge(prev, s),
                            None => s,
                        });
                    }
                }
                if let Some(s) = kept {
                    out.insert(k.clone(), s);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Value::Array(items) => {
            let kept: Vec<Value> = items.iter().filter_map(|i| select_in(i, t)).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        _ => None,
    }
}

fn merge(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut x), Value::Object(y)) => {
            for (k, v) in y {
                let merged = match x.remove(&k) {
                    Some(prev) => merge(prev, v),
                    None => v,
                };
                x.insert(k, merged);
            }
            Value::Object(x)
        }
        // Two selections of the same value: either is the whole of it.
        (_, b) => b,
    }
}

/// Removes every field `paths` name (arrays are transparent).
pub fn remove<S: AsRef<str>>(payload: Value, paths: &[S]) -> Value {
    if paths.is_empty() {
        return payload;
    }
    let trie = Trie::build(paths);
    remove_in(payload, &trie)
}

/// In place: objects none of whose keys the trie names are left as they are (rebuilding
/// every object of a large payload was most of a handoff's scoping time).
fn remove_in(mut v: Value, t: &Trie) -> Value {
    prune(&mut v, t);
    v
}

fn prune(v: &mut Value, t: &Trie) {
    match v {
        Value::Object(m) => m.retain(|k, child| {
            if t.child(k).any(|s| s.terminal) {
                return false;
            }
            for s in t.child(k) {
                prune(child, s);
            }
            true
        }),
        Value::Array(items) => items.iter_mut().for_each(|i| prune(i, t)),
        _ => {}
    }
}

/// Sorted leaf field paths of a payload: keys whose values are not objects (arrays are
/// transparent; an array of scalars is a leaf).
pub fn leaves(v: &Value) -> Vec<String> {
    let mut out = BTreeSet::new();
    walk(v, &mut String::new(), &mut out);
    out.into_iter().collect()
}

/// Adds the leaf paths under `v` to `out`, `path` holding the path to `v` (restored on
/// return). A path is allocated only when first seen: an array of a thousand records
/// repeats the same few paths.
fn walk(v: &Value, path: &mut String, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            let at = path.len();
            for (k, child) in m {
                if at > 0 {
                    path.push('.');
                }
                path.push_str(k);
                walk(child, path, out);
                path.truncate(at);
            }
        }
        Value::Array(items)
            if items
                .iter()
                .any(|i| matches!(i, Value::Object(m) if !m.is_empty())) =>
        {
            for i in items {
                walk(i, path, out);
            }
        }
        _ => {
            if !path.is_empty() && !out.contains(path.as_str()) {
                out.insert(path.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_parse_and_reject_empty_segments() {
        assert_eq!(parse("a.b"), Ok(vec!["a", "b"]));
        assert!(parse("a..b").is_err());
        assert!(parse("").is_err());
        assert!(parse("a b").is_err());
    }

    #[test]
    fn closed_schema_rejects_unknown_paths() {
        let s = json!({"type": "object", "additionalProperties": false, "properties": {
            "score": {"type": "number"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": false}}
        }});
        assert!(schema_admits(&s, &["score"]));
        assert!(!schema_admits(&s, &["scor"]));
        assert!(!schema_admits(&s, &["score", "x"]));
        assert!(schema_admits(&s, &["items", "name"]));
        assert!(!schema_admits(&s, &["items", "nope"]));
        assert!(schema_admits(&json!({"type": "object"}), &["anything"]));
    }

    #[test]
    fn select_and_remove_follow_nested_paths_through_arrays() {
        let p = json!({"a": {"b": 1, "c": 2}, "xs": [{"n": 1, "s": "x"}, {"n": 2}], "z": 3});
        assert_eq!(
            select(&p, &["a.b", "xs.n"]),
            json!({"a": {"b": 1}, "xs": [{"n": 1}, {"n": 2}]})
        );
        assert_eq!(
            remove(p.clone(), &["a.c", "xs.s", "z"]),
            json!({"a": {"b": 1}, "xs": [{"n": 1}, {"n": 2}]})
        );
        assert_eq!(select(&p, &["*.b"]), json!({"a": {"b": 1}}));
        assert_eq!(leaves(&p), vec!["a.b", "a.c", "xs.n", "xs.s", "z"]);
    }
}
