//! What a block stopped, recorded on `run.blocked` for a human
//! override to continue (`decide/overrides.rs` decides overrides).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use docket_policies::Authority;
use docket_protocol::{Action, AgentId, CallId, EpisodeId, TaskRestrictions};

/// What a block stopped, recorded on `run.blocked` for an override to
/// continue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overridable {
    /// The level of seed 002's precedence the blocking rule sits at: a person's role must
    /// be above it.
    pub level: Authority,
    /// What an override continues.
    pub step: HeldStep,
    /// The episodes the block ended, reopened by an override.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub episodes: Vec<EpisodeId>,
    /// For a hard stop whose last failure was a tool call a deny pattern denied: that
    /// pattern (absolute unless the bundle says otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_pattern: Option<String>,
}

/// The step a block stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HeldStep {
    /// A handoff a policy denied; `then`: the agent's actions after it.
    Handoff {
        /// Sender.
        from: AgentId,
        /// Receiver.
        to: AgentId,
        /// The output type it claimed.
        output_type: String,
        /// The payload as the agent gave it (scoped when an override lets it cross).
        payload: Value,
        /// The call whose answer it was (absent for the run's input).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<CallId>,
        /// The answer's actions after the handoff.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        then: Vec<Action>,
        /// The task the handoff gives its receiver, kept when an
        /// override lets it cross.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<TaskRestrictions>,
    },
    /// An answer's actions a DANGEROUS verdict held back.
    Actions {
        /// The agent.
        agent: AgentId,
        /// Its call.
        request_id: CallId,
        /// The actions.
        actions: Vec<Action>,
    },
    /// A spawn of a forbidden child type (the first action), then the answer's other actions.
    Spawn {
        /// The spawning agent.
        agent: AgentId,
        /// Its call.
        request_id: CallId,
        /// The spawn and the actions after it.
        actions: Vec<Action>,
    },
    /// A call the failure ladder's hard stop gave up on: an override retries it.
    Retry {
        /// The call.
        request_id: CallId,
    },
}

impl HeldStep {
    /// The level of seed 002's precedence the rule that stopped this step sits at: a risk
    /// classifier is a safety skill (3); the bundle's rules (matrix, contracts, provenance,
    /// recursion policy, failure ladder) are global rules (2).
    #[must_use]
    pub fn level(&self) -> Authority {
        match self {
            Self::Actions { .. } => Authority::SafetySkill,
            Self::Handoff { .. } | Self::Spawn { .. } | Self::Retry { .. } => {
                Authority::GlobalRules
            }
        }
    }

    /// What an override continues, in a few words.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Handoff {
                from,
                to,
                output_type,
                ..
            } => format!("the handoff {from} → {to} ({output_type}) crosses"),
            Self::Actions {
                agent, request_id, ..
            } => format!("{agent}'s held actions ({request_id}) are carried out"),
            Self::Spawn { agent, actions, .. } => {
                let child = actions.first().and_then(|a| match a {
                    Action::Spawn { episode_type, .. } => Some(episode_type.as_str()),
                    _ => None,
                });
                format!(
                    "{agent}'s spawn of a `{}` child episode starts",
                    child.unwrap_or("?")
                )
            }
            Self::Retry { request_id } => format!("the call {request_id} is retried"),
        }
    }
}
