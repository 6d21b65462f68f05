//! Handoffs as decided: what later decisions read of them (each agent's last delivered
//! decision output by type, for context edges and provenance rules; the crossings counted;
//! what each agent was told of the run), and the record of each decision, which only
//! status, inspect and diff show ([`super::RunHistory`]).

use docket_policies::InputKind;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::RunState;
use crate::events::RunEvent;

use docket_protocol::{AgentId, Confidence};
/// One handoff as decided (allowed or denied).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffRecord {
    /// Sender.
    pub from: AgentId,
    /// Receiver.
    pub to: AgentId,
    /// Output type.
    pub output_type: String,
    /// Decision or context input.
    pub input: InputKind,
    /// Allowed or denied.
    pub allowed: bool,
    /// The deciding rule.
    pub rule_id: String,
    /// Why.
    pub reason: String,
    /// Scoping removed every field of a non-empty payload (flagged).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub every_field_removed: bool,
    /// The confidence the sender answered with, told to the receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence_level: Option<Confidence>,
    /// The sender's warnings, told to the receiver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What an agent was told of the run in its handoff context, as it last crossed the gate
/// (docs/agent-protocol.md#the-handoff-context): crossing again only when it changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextTold {
    /// The run's original request, scoped for the agent under the rules of the pair it
    /// was reached from, by that sender (`external` for the entry agent).
    pub original_request: BTreeMap<AgentId, Arc<Value>>,
    /// The human decisions, scoped for the agent, and how many there were.
    pub decisions: Option<(usize, Arc<Value>)>,
    /// In a later turn of a session, the parts of the session told to the agent, as they
    /// crossed the gate, by output type (`session.told_us`, `session.we_told`,
    /// `session.decisions`): the session does not change during a run, so each crosses
    /// once per agent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub session: BTreeMap<String, Arc<Value>>,
}

/// The allowed handoffs of decision inputs so far, counted, and their senders in the order
/// they first crossed: what each request's handoff context tells (its position, its
/// prior agents), kept as the handoffs are folded rather than read from all of them at
/// every call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DecisionCrossings {
    /// How many there were.
    pub(crate) count: usize,
    /// Their senders, each once, in the order they first crossed.
    pub(crate) senders: Vec<AgentId>,
}

impl HandoffRecord {
    /// The record of a `handoff.allowed` or `handoff.denied` (`None` for other events):
    /// what status, inspect and diff show of a handoff, folded into [`super::RunHistory`]
    /// (no later decision reads it).
    #[must_use]
    pub fn of(event: &RunEvent) -> Option<Self> {
        match event {
            RunEvent::HandoffAllowed {
                from,
                to,
                output_type,
                input,
                decision,
                audit,
                confidence_level,
                warnings,
                ..
            } => Some(Self {
                from: from.clone(),
                to: to.clone(),
                output_type: output_type.clone(),
                input: *input,
                allowed: true,
                rule_id: decision.rule_id.to_string(),
                reason: decision.reason.to_string(),
                every_field_removed: audit.every_field_removed,
                confidence_level: *confidence_level,
                warnings: warnings.clone(),
            }),
            RunEvent::HandoffDenied {
                from,
                to,
                output_type,
                decision,
                ..
            } => Some(Self {
                from: from.clone(),
                to: to.clone(),
                output_type: output_type.clone(),
                input: InputKind::Decision,
                allowed: false,
                rule_id: decision.rule_id.to_string(),
                reason: decision.reason.to_string(),
                every_field_removed: false,
                confidence_level: None,
                warnings: Vec::new(),
            }),
            _ => None,
        }
    }
}

impl RunState {
    /// What later decisions read of an allowed handoff (a denied one changes nothing).
    pub(super) fn apply_handoff(&mut self, event: &RunEvent) {
        if let RunEvent::HandoffAllowed {
            from,
            to,
            output_type,
            input,
            delivered,
            audit,
            flow_position,
            ..
        } = event
        {
            // The entry agent's input from `external` is the original request.
            if from == crate::EXTERNAL && *input == InputKind::Decision {
                let told = self.context_told.entry(to.clone()).or_default();
                told.original_request
                    .insert(from.clone(), delivered.clone());
            }
            if *input == InputKind::Context {
                match (from.as_str(), output_type.as_str()) {
                    (crate::EXTERNAL, "original_request") => {
                        let told = self.context_told.entry(to.clone()).or_default();
                        told.original_request.insert(
                            AgentId::from(audit.from_agent_id.as_str()),
                            delivered.clone(),
                        );
                    }
                    (crate::EXTERNAL | "human", part) if part.starts_with("session.") => {
                        let told = self.context_told.entry(to.clone()).or_default();
                        told.session.insert(part.to_owned(), delivered.clone());
                    }
                    ("human", "decisions") => {
                        let count = delivered
                            .get("decisions")
                            .and_then(Value::as_array)
                            .map_or(0, Vec::len);
                        let told = self.context_told.entry(to.clone()).or_default();
                        told.decisions = Some((count, delivered.clone()));
                    }
                    _ => {}
                }
            }
            if let Some(position) = flow_position {
                self.flow_position = *position;
            }
            if *input == InputKind::Decision {
                self.crossings.count += 1;
                if !self.crossings.senders.contains(from) {
                    self.crossings.senders.push(from.clone());
                }
                self.outputs
                    .entry(from.clone())
                    .or_default()
                    .insert(output_type.clone(), delivered.clone());
            }
        }
    }
}
