//! The JSON Schema editors use to check bundles, generated from the Rust types. The
//! checked-in copy (`policies/bundle.schema.json`) is tested to equal this output.

use crate::model::BundleSpec;

/// The bundle's JSON Schema, pretty-printed, ending in a newline.
pub fn bundle_json_schema() -> String {
    let schema = schemars::schema_for!(BundleSpec);
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
}
