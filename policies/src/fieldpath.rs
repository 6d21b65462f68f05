//! Nested field paths (`fraud_indicators.name`, `prior_outputs.*.score`): parsing,
//! whether a JSON Schema admits one, and selecting or removing what they name in a
//! payload. Arrays are transparent: a path applies to every element. A `*` segment
//! matches any key.

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
    let mut shape = Shape::default();
    shape.add(v);
    let mut out = Vec::new();
    shape.paths(&mut String::new(), &mut out);
    // Paths sort as whole strings (`a-b` before `a.x`); a key holding a dot can spell
    // the same path as a nested key.
    out.sort_unstable();
    out.dedup();
    out
}

/// The keys a payload has at each depth, its arrays' elements laid over one another: an
/// array of a thousand records repeats the same few paths, and each key is looked up
/// among its siblings only, without building or comparing whole paths.
#[derive(Default)]
struct Shape<'v> {
    /// A value ends here (a scalar, an empty object or array, an array of scalars).
    leaf: bool,
    children: std::collections::BTreeMap<&'v str, Shape<'v>>,
}

impl<'v> Shape<'v> {
    fn add(&mut self, v: &'v Value) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, child) in m {
                    self.children.entry(k.as_str()).or_default().add(child);
                }
            }
            Value::Array(items)
                if items
                    .iter()
                    .any(|i| matches!(i, Value::Object(m) if !m.is_empty())) =>
            {
                for i in items {
                    self.add(i);
                }
            }
            _ => self.leaf = true,
        }
    }

    /// Pushes the path of every leaf under this node onto `out`, `path` holding this
    /// node's (restored on return; the root's is empty and is no field).
    fn paths(&self, path: &mut String, out: &mut Vec<String>) {
        if self.leaf && !path.is_empty() {
            out.push(path.clone());
        }
        let at = path.len();
        for (k, child) in &self.children {
            if at > 0 {
                path.push('.');
            }
            path.push_str(k);
            child.paths(path, out);
            path.truncate(at);
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

    /// The leaf paths as the definition reads: every path to a value that is not a
    /// non-empty object (through arrays holding one), collected whole in a sorted set.
    fn leaves_by_definition(v: &Value) -> Vec<String> {
        fn walk(v: &Value, path: &str, out: &mut std::collections::BTreeSet<String>) {
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
                        .any(|i| matches!(i, Value::Object(m) if !m.is_empty())) =>
                {
                    items.iter().for_each(|i| walk(i, path, out));
                }
                _ if !path.is_empty() => {
                    out.insert(path.to_owned());
                }
                _ => {}
            }
        }
        let mut out = std::collections::BTreeSet::new();
        walk(v, "", &mut out);
        out.into_iter().collect()
    }

    fn payload() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        // Few, short keys (dots and dashes among them) so that paths collide and sort
        // differently as strings than segment by segment.
        let key = prop::sample::select(vec!["a", "b", "a.b", "a-b", "ab", "x"]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            Just(json!({})),
            Just(json!([])),
        ];
        leaf.prop_recursive(4, 40, 5, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key.clone(), inner, 0..4).prop_map(|m| {
                    Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn leaves_are_the_leaf_paths_by_definition(v in payload()) {
            proptest::prop_assert_eq!(leaves(&v), leaves_by_definition(&v));
        }
    }
}
