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

#[cfg(test)]
mod tests {
    /// Regenerate with `cargo run -p docket-cli -- policy schema > policies/bundle.schema.json`.
    #[test]
    fn checked_in_schema_matches_the_types() {
        assert_eq!(
            include_str!("../bundle.schema.json"),
            super::bundle_json_schema(),
            "bundle.schema.json is stale"
        );
    }
}
