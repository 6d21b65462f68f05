//! The JSON Schema of the protocol, generated from the Rust types so the two cannot drift
//! apart. `docs/agent-protocol.schema.json` is this function's output, checked in; a test
//! fails when they differ.

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use super::request::AgentRequest;
use super::response::AgentResponse;

/// One JSON Schema (draft 2020-12) holding both documents: an instance is valid if it is
/// an [`AgentRequest`] or an [`AgentResponse`]; `#/$defs/AgentRequest` and
/// `#/$defs/AgentResponse` validate one kind alone. Describes what the engine accepts
/// (the deserialising side): fields with defaults are optional.
#[must_use]
pub fn json_schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let request = generator.subschema_for::<AgentRequest>();
    let response = generator.subschema_for::<AgentResponse>();
    let definitions = generator.take_definitions(true);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "docket agent protocol",
        "description": "The request docket sends to an agent and the response the agent \
            answers with. See docs/agent-protocol.md. Generated from the docket-decider \
            crate's Rust types; do not edit by hand.",
        "oneOf": [request, response],
        "$defs": definitions,
    })
}

/// [`json_schema`] as the pretty-printed text checked in at
/// `docs/agent-protocol.schema.json` (with a trailing newline).
#[must_use]
pub fn json_schema_pretty() -> String {
    // Serialising a `Value` cannot fail: its keys are strings.
    let mut text = serde_json::to_string_pretty(&json_schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn checked_in_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/agent-protocol.schema.json")
    }

    /// Set DOCKET_BLESS_SCHEMA=1 to rewrite the checked-in file after changing the types.
    #[test]
    fn checked_in_schema_equals_the_generated_one() {
        let generated = json_schema_pretty();
        let path = checked_in_path();
        if std::env::var_os("DOCKET_BLESS_SCHEMA").is_some() {
            std::fs::write(&path, &generated).expect("write the schema");
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        // Compared as JSON values: key order depends on serde_json's `preserve_order`,
        // which workspace-wide builds unify on (the bench crate's Cedar enables it).
        let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
        assert!(
            parse(&checked_in).is_some() && parse(&checked_in) == parse(&generated),
            "{} is out of date; regenerate it with \
             `DOCKET_BLESS_SCHEMA=1 cargo test -p docket-decider schema` and commit it",
            path.display()
        );
    }

    #[test]
    fn schema_names_both_documents_and_every_action() {
        let schema = json_schema();
        let defs = &schema["$defs"];
        assert!(defs["AgentRequest"].is_object());
        assert!(defs["AgentResponse"].is_object());
        let text = serde_json::to_string(defs).expect("serialises");
        for name in [
            "handoff",
            "request_capability",
            "escalate",
            "finish",
            "SPECULATIVE",
        ] {
            assert!(text.contains(name), "schema lacks {name}");
        }
        let required = defs["AgentResponse"]["required"]
            .as_array()
            .expect("required list");
        assert!(required.contains(&json!("request_id")));
        assert!(required.contains(&json!("status")));
        assert!(!required.contains(&json!("warnings")));
    }
}
