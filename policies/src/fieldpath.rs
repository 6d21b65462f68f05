//! Nested field paths (`fraud_indicators.name`, `prior_outputs.*.score`): parsing, and
//! whether a JSON Schema admits one. Arrays are transparent: a path applies to every
//! element. A `*` segment matches any key.

use serde_json::Value;

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
        if let Some(Value::Array(branches)) = s.get(key) {
            if key != "allOf" {
                return branches.iter().any(|b| schema_admits(b, segs));
            }
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
}
