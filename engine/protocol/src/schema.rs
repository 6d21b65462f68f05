//! The JSON Schemas of the two protocols (agents; effect executors), generated from the
//! Rust types so the documents and the code cannot drift apart. They are checked in at
//! `docs/agent-protocol.schema.json` and `docs/effect-protocol.schema.json`; the
//! integration tests fail when a checked-in file differs from what these functions make
//! (`DOCKET_BLESS_SCHEMA=1 cargo test -p docket-tests schema` rewrites them).

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Value, json};

use super::effect::{DryRunReport, EffectReceipt, Verification};
use super::effect_wire::{EffectAnswer, EffectCall};
use super::request::AgentRequest;
use super::response::AgentResponse;

/// One JSON Schema (draft 2020-12) holding both documents: an instance is valid if it is
/// an [`AgentRequest`] or an [`AgentResponse`]; `#/$defs/AgentRequest` and
/// `#/$defs/AgentResponse` validate one kind alone. Describes what the engine accepts
/// (the deserialising side): fields with defaults are optional.
#[must_use]
pub fn agent_protocol_schema() -> Value {
    document(
        "docket agent protocol",
        "The request docket sends to an agent and the response the agent answers with. \
         See docs/agent-protocol.md.",
        |generator| {
            vec![
                one::<AgentRequest>(generator),
                one::<AgentResponse>(generator),
            ]
        },
    )
}

/// The JSON Schema (draft 2020-12) of the effect protocol: `#/$defs/EffectCall` for a
/// call, and one answer definition per operation.
#[must_use]
pub fn effect_protocol_schema() -> Value {
    document(
        "docket effect protocol",
        "A call docket sends to an effect executor and the answer to each operation \
         (dry_run, execute, verify). See docs/effect-protocol.md.",
        |generator| {
            vec![
                one::<EffectCall>(generator),
                one::<EffectAnswer<DryRunReport>>(generator),
                one::<EffectAnswer<EffectReceipt>>(generator),
                one::<EffectAnswer<Verification>>(generator),
            ]
        },
    )
}

/// [`agent_protocol_schema`] as the pretty-printed text checked in (trailing newline).
#[must_use]
pub fn agent_protocol_schema_pretty() -> String {
    pretty(&agent_protocol_schema())
}

/// [`effect_protocol_schema`] as the pretty-printed text checked in (trailing newline).
#[must_use]
pub fn effect_protocol_schema_pretty() -> String {
    pretty(&effect_protocol_schema())
}

fn one<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// A document whose instances are one of `documents`, with every definition they use.
fn document(
    title: &str,
    description: &str,
    documents: impl FnOnce(&mut SchemaGenerator) -> Vec<Schema>,
) -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let one_of = documents(&mut generator);
    let definitions = generator.take_definitions(true);
    // The description names the crate the types lived in when the checked-in files were
    // first generated; it stays as it is so those files do not change.
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "description": format!(
            "{description} Generated from the docket-decider crate's Rust types; do not edit by hand."
        ),
        "oneOf": one_of,
        "$defs": definitions,
    })
}

fn pretty(schema: &Value) -> String {
    // Serialising a `Value` cannot fail: its keys are strings.
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}
