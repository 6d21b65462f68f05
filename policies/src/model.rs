//! The bundle as users write it (TOML or JSON): plain serde types whose field names and
//! defaults are those of the governance model (docs/governance.md). Nothing here decides
//! anything; `validate` checks it and `compiled` indexes it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::rules::authority::{Authority, OverridePolicy};
use crate::rules::capability::{CapabilitySpec, ResponsibilityLock};
use crate::rules::circuit_breaker::CircuitBreaker;
use crate::rules::contract::OutputTypeSpec;
use crate::rules::domain::DomainSpec;
use crate::rules::escalation::EscalationPolicy;
use crate::rules::handoff::InteractionMatrix;
use crate::rules::intent::IntentClassificationPolicy;
use crate::rules::provenance::ProvenanceRule;
use crate::rules::recursion::RecursionSection;
use crate::rules::scope::{ContextRequirements, HandoffPolicy};
use crate::rules::side_effect::SideEffectPolicy;
use crate::rules::signals::SignalSpec;
use crate::rules::tools::ToolPatternRule;
use crate::rules::waiting::WaitingPolicy;

/// A whole policy bundle: every governance rule of one multi-agent system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BundleSpec {
    /// Name and version of the bundle.
    pub bundle: BundleMeta,
    /// Request defaults and circuit-breaker thresholds (docs/agent-protocol.md#the-request,
    /// docs/governance.md#circuit-breaker).
    #[serde(default)]
    pub defaults: RequestDefaults,
    /// The agent registry.
    #[serde(default)]
    pub agents: Vec<AgentSpec>,
    /// Versioned output types that edges carry (docs/governance.md#data-contracts).
    #[serde(default)]
    pub output_types: Vec<OutputTypeSpec>,
    /// Write domains (docs/governance.md#write-domains).
    #[serde(default)]
    pub domains: Vec<DomainSpec>,
    /// Tool-call patterns denied to every agent, whatever its allowed tools
    /// (docs/governance.md#tools).
    #[serde(default)]
    pub deny_patterns: Vec<ToolPatternRule>,
    /// Tool-call patterns that need a human's approval (REVIEW_REQUIRED,
    /// docs/governance.md#tools).
    #[serde(default)]
    pub review_patterns: Vec<ToolPatternRule>,
    /// Who may hand off to whom (docs/governance.md#interaction-matrix).
    #[serde(default)]
    pub interactions: InteractionMatrix,
    /// Capabilities owned exclusively by one agent
    /// (docs/governance.md#guardrail-3-responsibility-locks).
    #[serde(default)]
    pub responsibility_locks: Vec<ResponsibilityLock>,
    /// What context crosses a handoff (docs/governance.md#handoff-modes).
    #[serde(default)]
    pub multi_agent_handoffs: HandoffPolicy,
    /// Recursion policies and budget rules (docs/governance.md#recursion-limits,
    /// docs/governance.md#budgets).
    #[serde(default)]
    pub recursion: RecursionSection,
    /// Side-effect policies per effect kind and lane (docs/governance.md#side-effects).
    #[serde(default)]
    pub side_effects: Vec<SideEffectPolicy>,
    /// Retry → escalate → block (docs/governance.md#failure-ladder), ending in the hard stop
    /// of docs/governance.md#guardrail-1-retry-hard-stop.
    #[serde(default)]
    pub escalation: EscalationPolicy,
    /// Checkpoint rules on where cited ids come from (docs/governance.md#provenance-rules:
    /// e.g. every recommendation cites a gap Reasoning produced). Left out of the canonical
    /// form when empty, so the hash of a bundle without any is unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<ProvenanceRule>,
    /// What no human override lifts (docs/governance.md#human-override). Left out of the
    /// canonical form when unset, so the hash of a bundle without it is unchanged.
    #[serde(default, skip_serializing_if = "OverridePolicy::is_default")]
    pub overrides: OverridePolicy,
    /// How long agents may wait on timers, and whether waiting counts against wall time
    /// (docs/governance.md#waiting). Left out of the canonical form when unset.
    #[serde(default, skip_serializing_if = "WaitingPolicy::is_default")]
    pub waiting: WaitingPolicy,
    /// Outside events a run may receive: who sends each, which agents wait for it
    /// (docs/governance.md#outside-events). Left out of the canonical form when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<SignalSpec>,
    /// Which agent classifies the user's intent, and how its classification is held to
    /// its routing (docs/governance.md#intent-classification). Left out of the canonical
    /// form when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_classification: Option<IntentClassificationPolicy>,
}

/// Identity of a bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BundleMeta {
    /// Stable name, e.g. `geo-pipeline`.
    pub id: String,
    /// Author-chosen version label; the hash is what identifies the content.
    #[serde(default = "default_version")]
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

fn default_version() -> String {
    "1".to_owned()
}

/// Request priority (docs/agent-protocol.md#the-request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Priority {
    High,
    #[default]
    Normal,
    Low,
}

/// Request defaults: timeout, priority, circuit breaker (docs/agent-protocol.md#the-request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestDefaults {
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub priority: Priority,
    #[serde(default)]
    pub circuit_breaker: CircuitBreaker,
}

impl Default for RequestDefaults {
    fn default() -> Self {
        Self {
            timeout_ms: default_timeout_ms(),
            priority: Priority::Normal,
            circuit_breaker: CircuitBreaker::default(),
        }
    }
}

fn default_timeout_ms() -> u64 {
    30_000
}

/// One agent of the registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    pub id: String,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub authority: Authority,
    /// Capabilities other agents may request of this one
    /// (docs/governance.md#capability-requests).
    #[serde(default)]
    pub capabilities: Vec<CapabilitySpec>,
    /// Tool patterns this agent may call, e.g. `Read`, `Bash(git *)`.
    #[serde(default)]
    pub allowed_tools: Vec<String>,
    /// The agent's own MUST NOT tool patterns (docs/governance.md#tools).
    #[serde(default)]
    pub must_not_tools: Vec<String>,
    /// Domains this agent writes (docs/governance.md#write-domains).
    #[serde(default)]
    pub write_scopes: Vec<String>,
    /// Domains this agent reads (`*` for all).
    #[serde(default)]
    pub read_scopes: Vec<String>,
    /// Side-effect kinds this agent may request; empty means read-only
    /// (docs/governance.md#side-effects).
    #[serde(default)]
    pub side_effects: Vec<String>,
    /// How this agent wants context handed to it
    /// (docs/governance.md#handoff-rules-and-blocked-fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_requirements: Option<ContextRequirements>,
    /// The agent that takes this agent's task over when its output is rejected for a
    /// boundary violation (an error of class `boundary_violation`), instead of this agent
    /// being retried (docs/governance.md#reassignment-on-a-boundary-violation). Left out of
    /// the canonical form when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reassign_to: Option<String>,
}
