//! A readable structural diff of two JSON values: the JSON pointers where they differ,
//! with the value on each side, so a divergence names the field that changed rather than
//! printing two events to compare by eye.

use serde::Serialize;
use serde_json::Value;

/// One place where two values differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// JSON pointer (RFC 6901) of the place, from the compared values' roots.
    pub path: String,
    /// The value there on the recorded side (`None`: absent).
    pub recorded: Option<Value>,
    /// The value there on the side decided now (`None`: absent).
    pub decided: Option<Value>,
}

/// Where `recorded` and `decided` differ, in document order (object keys in the values'
/// own order), at most `limit` places.
#[must_use]
pub fn differences(recorded: &Value, decided: &Value, limit: usize) -> Vec<Difference> {
    let mut out = Vec::new();
    walk(recorded, decided, &mut String::new(), limit, &mut out);
    out
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn walk(a: &Value, b: &Value, path: &mut String, limit: usize, out: &mut Vec<Difference>) {
    if out.len() >= limit || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                step(&escape(key), x.get(key), y.get(key), path, limit, out);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                step(&i.to_string(), x.get(i), y.get(i), path, limit, out);
            }
        }
        _ => out.push(Difference {
            path: path.clone(),
            recorded: Some(a.clone()),
            decided: Some(b.clone()),
        }),
    }
}

/// One member (`segment`) of two compared objects or arrays: walked into when on both
/// sides, else a difference of presence.
fn step(
    segment: &str,
    a: Option<&Value>,
    b: Option<&Value>,
    path: &mut String,
    limit: usize,
    out: &mut Vec<Difference>,
) {
    let len = path.len();
    path.push('/');
    path.push_str(segment);
    match (a, b) {
        (Some(p), Some(q)) => walk(p, q, path, limit, out),
        (p, q) => {
            if out.len() < limit {
                out.push(Difference {
                    path: path.clone(),
                    recorded: p.cloned(),
                    decided: q.cloned(),
                });
            }
        }
    }
    path.truncate(len);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_each_changed_added_and_removed_place() {
        let recorded = json!({"a": 1, "b": {"c": [1, 2]}, "gone": true, "x/y": 0});
        let decided = json!({"a": 1, "b": {"c": [1, 3, 4]}, "new": "n", "x/y": 1});
        let found: Vec<(String, Option<Value>, Option<Value>)> =
            differences(&recorded, &decided, 10)
                .into_iter()
                .map(|d| (d.path, d.recorded, d.decided))
                .collect();
        assert_eq!(
            found,
            [
                ("/b/c/1".to_owned(), Some(json!(2)), Some(json!(3))),
                ("/b/c/2".to_owned(), None, Some(json!(4))),
                ("/gone".to_owned(), Some(json!(true)), None),
                ("/x~1y".to_owned(), Some(json!(0)), Some(json!(1))),
                ("/new".to_owned(), None, Some(json!("n"))),
            ]
        );
        assert!(differences(&recorded, &recorded, 10).is_empty());
        assert_eq!(differences(&recorded, &decided, 2).len(), 2);
    }
}
