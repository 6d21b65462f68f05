//! The JSON Schema editors use to check bundles, generated from the Rust types. The
//! checked-in copy (`policies/bundle.schema.json`) is tested to equal this output.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::model::BundleSpec;

/// The bundle's JSON Schema, pretty-printed with keys sorted, ending in a newline.
pub fn bundle_json_schema() -> String {
    let schema = serde_json::to_value(schemars::schema_for!(BundleSpec)).unwrap_or(Value::Null);
    let mut s = serde_json::to_string_pretty(&Sorted(&schema)).unwrap_or_default();
    s.push('\n');
    s
}

/// Serialises a value with object keys sorted, whatever order `serde_json::Map` keeps
/// (it keeps insertion order when another crate turns on `preserve_order`).
struct Sorted<'a>(&'a Value);

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut map = s.serialize_map(Some(keys.len()))?;
                for k in keys {
                    if let Some(v) = m.get(k) {
                        map.serialize_entry(k, &Sorted(v))?;
                    }
                }
                map.end()
            }
            Value::Array(items) => s.collect_seq(items.iter().map(Sorted)),
            other => other.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    /// Regenerate with `cargo run -p docket-cli -- policy schema > policies/bundle.schema.json`.
    /// Compared as JSON values: key order depends on serde_json's `preserve_order`, which
    /// workspace-wide builds unify on (the bench crate's Cedar enables it).
    #[test]
    fn checked_in_schema_matches_the_types() {
        let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
        assert_eq!(
            parse(include_str!("../bundle.schema.json")),
            parse(&super::bundle_json_schema()),
            "bundle.schema.json is stale"
        );
    }
}
