//! Handoffs as decided: every decision in order, and each agent's last delivered
//! decision output by type (what context edges and provenance rules read).

use docket_policies::InputKind;
use serde::{Deserialize, Serialize};

use super::RunState;
use crate::event::RunEvent;

use crate::ids::AgentId;
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
    /// Scoping removed every field of a non-empty payload (flagged from decider version 2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub every_field_removed: bool,
}

impl RunState {
    pub(super) fn apply_handoff(&mut self, event: &RunEvent) {
        match event {
            RunEvent::HandoffAllowed {
                from,
                to,
                output_type,
                input,
                decision,
                delivered,
                audit,
                flow_position,
                ..
            } => {
                if let Some(position) = flow_position {
                    self.flow_position = *position;
                }
                if *input == InputKind::Decision {
                    self.outputs
                        .entry(from.clone())
                        .or_default()
                        .insert(output_type.clone(), delivered.clone());
                }
                self.handoffs.push(HandoffRecord {
                    from: from.clone(),
                    to: to.clone(),
                    output_type: output_type.clone(),
                    input: *input,
                    allowed: true,
                    rule_id: decision.rule_id.to_string(),
                    reason: decision.reason.to_string(),
                    every_field_removed: audit.every_field_removed,
                });
            }
            RunEvent::HandoffDenied {
                from,
                to,
                output_type,
                decision,
                ..
            } => self.handoffs.push(HandoffRecord {
                from: from.clone(),
                to: to.clone(),
                output_type: output_type.clone(),
                input: InputKind::Decision,
                allowed: false,
                rule_id: decision.rule_id.to_string(),
                reason: decision.reason.to_string(),
                every_field_removed: false,
            }),
            _ => {}
        }
    }
}
