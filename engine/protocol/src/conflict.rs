//! A conflict among a fan-out's outputs as the agent that aggregates them is told of it,
//! and as the run's final output reports it: every output, how the conflict was settled,
//! and by whom (docs/agent-protocol.md#labelled-inputs). Conflicts are never hidden from
//! the agent that aggregates, nor from the user.

use crate::ids::AgentId;
use crate::response::Confidence;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// How a conflict was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Settlement {
    /// The bundle prefers the output of higher confidence, and one output had it.
    HigherConfidence,
    /// The bundle lets authority settle conflicts, and one output came from an agent of
    /// higher authority than the others'.
    HigherAuthority,
    /// A person chose the output to keep (a conflict ticket).
    Person,
}

/// One output of a settled conflict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ConflictingOutput {
    /// The agent that produced it.
    pub source_agent: AgentId,
    /// The confidence it was given with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence_level: Option<Confidence>,
    /// Whether it is the output kept (delivered as the input this note labels).
    pub kept: bool,
    /// The output as delivered to the aggregating agent (scoped for it by the gate when
    /// it was handed off); absent in the run's final output, which reports the conflict
    /// and not content that never crossed to the caller. An output not kept stays
    /// readable in the log as archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Arc<Value>>,
}

/// A conflict among a fan-out's outputs of one type for one agent, and how it was settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SettledConflict {
    /// The output type the branches disagreed on.
    pub output_type: String,
    /// The agent the outputs were for (the one that aggregates them).
    pub receiver: AgentId,
    /// How it was settled.
    pub settled_by: Settlement,
    /// Who settled it: the person, for [`Settlement::Person`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The ticket a person settled it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// Every output, in branch order, the kept one marked.
    pub outputs: Vec<ConflictingOutput>,
}

impl SettledConflict {
    /// The conflict as the run's final output reports it: who said what with which
    /// confidence and how it was settled, without the outputs' content.
    #[must_use]
    pub fn without_payloads(&self) -> Self {
        let mut note = self.clone();
        for output in &mut note.outputs {
            output.payload = None;
        }
        note
    }
}
