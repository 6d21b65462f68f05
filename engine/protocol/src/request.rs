//! The request the engine sends to an agent (docs/agent-protocol.md#the-request): what is
//! asked, the run, episode and attempt it belongs to, and its inputs split into decision
//! and context inputs (docs/governance.md#guardrail-2-decision-inputs-and-context).

use super::TaskRestrictions;
use crate::conflict::SettledConflict;
use crate::ids::{AgentId, CallId, EpisodeId, RunId};
use crate::response::Confidence;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

/// How long the engine waits for an answer when nothing says otherwise: 30,000 ms (30 s).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

/// One call of one agent. Agents must ignore fields they do not know, so the engine can
/// add fields without breaking existing agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentRequest {
    /// Unique id of this request; the response must echo it exactly. A retry of the same
    /// step gets a new request_id and a higher `attempt`.
    pub request_id: CallId,
    /// Links every request of one workflow (the same for the whole run), for debugging
    /// and audit.
    pub correlation_id: String,
    /// The run this call belongs to.
    pub run_id: RunId,
    /// The episode (a bounded agent run with its own budget) this call belongs to.
    pub episode_id: EpisodeId,
    /// 1 for the first call of a step, 2 for its first retry, and so on.
    pub attempt: u32,
    /// The agent the work comes from (`external` for the run's input).
    pub source_agent: AgentId,
    /// The agent that must handle this request.
    pub target_agent: AgentId,
    /// The capability asked of the target agent, as registered in the policy bundle.
    pub capability_code: String,
    /// How long the engine waits for the response, in milliseconds; after that the call
    /// fails with a timeout and the agent process (if any) is killed.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// HIGH may be served first when the engine is busy.
    #[serde(default)]
    pub priority: Priority,
    /// Session context (session, user, workflow position...): continuity, not data to
    /// decide from.
    #[serde(default)]
    pub context: Map<String, Value>,
    /// What the agent may decide from: prioritise, rank and choose only from these
    /// (docs/governance.md#guardrail-2-decision-inputs-and-context).
    #[serde(default)]
    pub decision_inputs: Vec<DecisionInput>,
    /// Read-only, non-decisive references
    /// (docs/governance.md#guardrail-2-decision-inputs-and-context): usable for impact
    /// estimation, timeline planning and reference, never for prioritisation, ranking or
    /// decisions.
    #[serde(default)]
    pub context_inputs: Vec<ContextInput>,
    /// The task the handoff that called you gave you, and the tools it forbids you
    /// (docs/agent-protocol.md#task-restrictions); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskRestrictions>,
}

/// The request's priority (docs/agent-protocol.md#the-request).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Priority {
    /// Served first when the engine has a queue.
    High,
    /// The default.
    #[default]
    Normal,
    /// Served after HIGH and NORMAL.
    Low,
}

/// An input the agent may decide from, labelled with where it came from so a later check
/// can tell which agent produced what a decision rests on (Guardrail 2 provenance).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DecisionInput {
    /// The agent that produced this input (`external` for the run's input).
    pub source_agent: AgentId,
    /// The output type of the handoff that carried it, as named in the policy bundle
    /// (e.g. `gaps_and_opportunities`), or the capability code for a capability request.
    pub output_type: String,
    /// The input itself, already validated against the output type's schema.
    // Shared with the `handoff.allowed` that delivered it: a run holds each payload once.
    pub payload: Arc<Value>,
    /// The confidence the producing agent answered with, when it gave one
    /// (docs/agent-protocol.md#labelled-inputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence_level: Option<Confidence>,
    /// The producing agent's warnings: a PARTIAL answer says its limitations there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// When this output was kept over others of its type from a fan-out: every output,
    /// and how and by whom the conflict was settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<SettledConflict>,
}

impl DecisionInput {
    /// An input with no labels beyond where it came from.
    #[must_use]
    pub fn new(
        source_agent: impl Into<AgentId>,
        output_type: impl Into<String>,
        payload: Arc<Value>,
    ) -> Self {
        Self {
            source_agent: source_agent.into(),
            output_type: output_type.into(),
            payload,
            confidence_level: None,
            warnings: Vec::new(),
            conflict: None,
        }
    }
}

/// A read-only reference the agent may consult but must not decide from (Guardrail 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ContextInput {
    /// The agent that produced this reference.
    pub source_agent: AgentId,
    /// The output type it was produced as (e.g. `geo_scores`).
    pub output_type: String,
    /// The reference itself.
    // Shared with the `handoff.allowed` that delivered it.
    pub payload: Arc<Value>,
}

impl AgentRequest {
    /// A request with the protocol's defaults (timeout 30 s, NORMAL priority, empty context
    /// and inputs); the remaining fields are set with struct update syntax or the builders
    /// below.
    #[must_use]
    pub fn new(
        request_id: impl Into<CallId>,
        source_agent: impl Into<AgentId>,
        target_agent: impl Into<AgentId>,
        capability_code: impl Into<String>,
    ) -> Self {
        let request_id = request_id.into();
        Self {
            correlation_id: request_id.to_string(),
            run_id: RunId::default(),
            episode_id: EpisodeId::default(),
            request_id,
            attempt: 1,
            source_agent: source_agent.into(),
            target_agent: target_agent.into(),
            capability_code: capability_code.into(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            priority: Priority::Normal,
            context: Map::new(),
            decision_inputs: Vec::new(),
            context_inputs: Vec::new(),
            task: None,
        }
    }

    /// Sets the run, episode and correlation ids.
    #[must_use]
    pub fn in_run(
        mut self,
        run_id: impl Into<RunId>,
        episode_id: impl Into<EpisodeId>,
        correlation_id: impl Into<String>,
    ) -> Self {
        self.run_id = run_id.into();
        self.episode_id = episode_id.into();
        self.correlation_id = correlation_id.into();
        self
    }

    /// Sets the timeout in milliseconds.
    #[must_use]
    pub fn with_timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    /// Adds a decision input.
    #[must_use]
    pub fn with_decision_input(
        mut self,
        source_agent: impl Into<AgentId>,
        output_type: impl Into<String>,
        payload: Value,
    ) -> Self {
        self.decision_inputs.push(DecisionInput::new(
            source_agent,
            output_type,
            Arc::new(payload),
        ));
        self
    }

    /// Adds a read-only context input.
    #[must_use]
    pub fn with_context_input(
        mut self,
        source_agent: impl Into<AgentId>,
        output_type: impl Into<String>,
        payload: Value,
    ) -> Self {
        self.context_inputs.push(ContextInput {
            source_agent: source_agent.into(),
            output_type: output_type.into(),
            payload: Arc::new(payload),
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_follow_seed_003() {
        let request: AgentRequest = serde_json::from_value(json!({
            "request_id": "r1",
            "correlation_id": "c1",
            "run_id": "run-1",
            "episode_id": "ep-1",
            "attempt": 1,
            "source_agent": "reasoning",
            "target_agent": "strategy",
            "capability_code": "STRATEGY_RECOMMEND"
        }))
        .expect("minimal request parses");
        assert_eq!(request.timeout_ms, 30_000);
        assert_eq!(request.priority, Priority::Normal);
        assert!(request.context.is_empty());
        assert!(request.decision_inputs.is_empty());
        assert!(request.context_inputs.is_empty());
    }

    #[test]
    fn wire_names_are_snake_case_and_enum_values_upper_case() {
        let request = AgentRequest::new("r1", "reasoning", "strategy", "STRATEGY_RECOMMEND")
            .in_run("run-1", "ep-1", "c1")
            .with_decision_input("reasoning", "gaps", json!({"gaps": []}))
            .with_context_input("intelligence", "geo_scores", json!({"score": 0.4}));
        let value = serde_json::to_value(&request).expect("serialises");
        assert_eq!(value["priority"], "NORMAL");
        assert_eq!(value["timeout_ms"], 30_000);
        assert_eq!(value["decision_inputs"][0]["source_agent"], "reasoning");
        assert_eq!(value["context_inputs"][0]["output_type"], "geo_scores");
        let back: AgentRequest = serde_json::from_value(value).expect("parses back");
        assert_eq!(back, request);
    }

    #[test]
    fn decision_and_context_inputs_stay_apart() {
        let request = AgentRequest::new("r1", "reasoning", "strategy", "S").with_context_input(
            "intelligence",
            "geo_scores",
            json!(1),
        );
        let value = serde_json::to_value(&request).expect("serialises");
        assert_eq!(value["decision_inputs"], json!([]));
        assert_eq!(value["context_inputs"][0]["source_agent"], "intelligence");
    }

    #[test]
    fn unknown_request_fields_are_ignored_for_forward_compatibility() {
        let request: Result<AgentRequest, _> = serde_json::from_value(json!({
            "request_id": "r1", "correlation_id": "c1", "run_id": "run", "episode_id": "e",
            "attempt": 1, "source_agent": "a", "target_agent": "b", "capability_code": "C",
            "added_in_a_later_version": true
        }));
        assert!(request.is_ok());
    }

    #[test]
    fn bad_priority_is_rejected_naming_the_value() {
        let err = serde_json::from_value::<AgentRequest>(json!({
            "request_id": "r1", "correlation_id": "c1", "run_id": "run", "episode_id": "e",
            "attempt": 1, "source_agent": "a", "target_agent": "b", "capability_code": "C",
            "priority": "URGENT"
        }))
        .expect_err("URGENT is not a priority");
        assert!(err.to_string().contains("URGENT"), "{err}");
    }
}
