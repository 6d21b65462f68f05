//! The response an agent answers with (docs/agent-protocol.md#the-response): its status,
//! confidence, warnings and error fields, the usage it reports, the tool calls it made, and
//! the actions it asks the engine to take.

use crate::ids::{AgentId, CallId};
use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An agent's answer to one request. Unknown fields are rejected, so a misspelt field is
/// reported instead of silently ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AgentResponse {
    /// The request's `request_id`, echoed exactly; a mismatch is an agent error.
    pub request_id: CallId,
    /// The outcome.
    pub status: ResponseStatus,
    /// Confidence in the result; required when status is SUCCESS or PARTIAL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence_level: Option<Confidence>,
    /// What was limited or degraded (mostly with PARTIAL).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// A CATEGORY_SPECIFIC_ERROR code, only with ERROR or TIMEOUT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// A human-readable description; required with ERROR, allowed with TIMEOUT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// What the call consumed, counted against the episode's budget.
    #[serde(default)]
    pub usage: Usage,
    /// Every tool the agent invoked while handling the request, so deny patterns such as
    /// `Bash(rm -rf *)` can be checked against what actually ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// What the agent asks the engine to do, in order. None is taken without the engine's
    /// checks: each goes through the policy bundle first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<Action>,
    /// Free-form information about the response (processing_time_ms, versions...); never
    /// interpreted by the engine.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// The intent classification of the agent that answers the user's request, when the
    /// bundle names it the classifying agent (docs/agent-protocol.md#intent-classification).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<IntentClassification>,
}

/// What the classifying agent (the orchestrator) understood the user to want, and where
/// it routes it (docs/agent-protocol.md#intent-classification). docket holds the answer's
/// routing to it under the bundle's `[intent_classification]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct IntentClassification {
    /// The primary intent, in the agent's words (`financial_projection`).
    pub primary_intent: String,
    /// The confidence in that classification, from 0 to 1.
    pub intent_confidence: f64,
    /// The agent the primary intent is routed to; absent when no agent can take it (a
    /// limitation acknowledged) or the agent asks first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_agent: Option<AgentId>,
    /// The capability of `target_agent` the intent maps to (`ANL_PROJECTION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_capability: Option<String>,
    /// Further intents of a multi-part request (`document_generation`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secondary_intents: Vec<String>,
    /// The target of each secondary intent, in the same order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secondary_targets: Vec<IntentTarget>,
}

/// Where a secondary intent goes: an agent and, optionally, its capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct IntentTarget {
    /// The agent.
    pub agent: AgentId,
    /// Its capability the intent maps to (`DOC_GENERATE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
}

/// The response status (docs/agent-protocol.md#the-response).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResponseStatus {
    /// The request was completed fully.
    Success,
    /// Completed with limitations (say which in `warnings`).
    Partial,
    /// The request failed (say why in `error_message`).
    Error,
    /// The agent ran out of time itself; partial results may come as actions.
    Timeout,
}

impl ResponseStatus {
    /// The wire spelling (`SUCCESS`...).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "SUCCESS",
            Self::Partial => "PARTIAL",
            Self::Error => "ERROR",
            Self::Timeout => "TIMEOUT",
        }
    }
}

impl fmt::Display for ResponseStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Confidence levels (docs/agent-protocol.md#the-response). Ordered so that
/// `High > Medium > Low > Speculative`, which is what preferring the higher-confidence
/// output compares (docs/governance.md#escalation-and-tickets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Confidence {
    /// Well supported.
    High,
    /// Reasonably supported.
    Medium,
    /// Weakly supported.
    Low,
    /// A guess; must not be presented as fact.
    Speculative,
}

impl Confidence {
    fn rank(self) -> u8 {
        match self {
            Self::Speculative => 0,
            Self::Low => 1,
            Self::Medium => 2,
            Self::High => 3,
        }
    }
}

impl Ord for Confidence {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl PartialOrd for Confidence {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// What one call consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Model input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Model output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Tool invocations; at least the number of entries in `tool_calls`.
    #[serde(default)]
    pub tool_calls: u32,
}

/// One tool invocation, as the agent made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The tool's name, e.g. `Bash`.
    pub name: String,
    /// The arguments as one string, e.g. `rm -rf /tmp/x`.
    #[serde(default)]
    pub arguments: String,
}

impl ToolCall {
    /// The `Name(arguments)` form that deny patterns such as `Bash(rm -rf *)` are written
    /// against.
    #[must_use]
    pub fn invocation(&self) -> String {
        format!("{}({})", self.name, self.arguments)
    }
}

/// The task a handoff gives its receiver and what it forbids there (seed 002's task
/// constraints, docs/agent-protocol.md#task-restrictions): a task restricts, never grants.
/// Its `denied_tools` are decided after the bundle's deny patterns and the agent's MUST NOT
/// rules and before its allowed tools, for the receiver's `call_tool` actions and the tool
/// calls it reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskRestrictions {
    /// The task's id, as the orchestrator names it (recorded and shown in denials).
    pub id: String,
    /// Tool patterns (`Tool` or `Tool(glob)`, as in the bundle's deny patterns) the task
    /// forbids the receiver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_tools: Vec<String>,
}

/// One thing an agent asks the engine to do. Tagged by `"type"`; an unknown type is
/// rejected when the response is parsed, naming the type and the ones that exist.
//
// Not `#[non_exhaustive]` on purpose: when an action is added, every `match` in the
// decider (another crate) must be made to handle it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Hand the work to the next agent, as the interaction matrix allows.
    Handoff {
        /// The receiving agent.
        to: AgentId,
        /// The output type, as named in the policy bundle; the payload is validated
        /// against its schema.
        output_type: String,
        /// The output itself.
        payload: Value,
        /// The task this handoff gives the receiver, with the restrictions it puts on it
        /// (docs/agent-protocol.md#task-restrictions). Optional.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<TaskRestrictions>,
    },
    /// Ask another agent for one of its capabilities. The engine makes the call (agents
    /// never call each other directly) and brings the answer back.
    RequestCapability {
        /// The agent that owns the capability.
        target_agent: AgentId,
        /// The capability, as registered.
        capability_code: String,
        /// The capability's inputs, validated against its input schema.
        #[serde(default)]
        inputs: Map<String, Value>,
        /// How urgent the call is where calls to the agent wait for room
        /// (docs/agent-protocol.md#priority); absent, the bundle's `defaults.priority`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        priority: Option<crate::Priority>,
    },
    /// Stop and ask a human. As the last action of a response it is a question: the
    /// agent is called again with the human's answer (docs/agent-protocol.md#asking-a-human);
    /// followed by other actions, it holds them until a human approves.
    Escalate {
        /// Why a human is needed, or the question, shown to the person deciding.
        reason: String,
        /// Options the human may choose from (`docket answer --choice`); none for an open
        /// question or an approval.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        choices: Vec<String>,
    },
    /// The work asked of this agent is done; `output` is its result.
    Finish {
        /// The result, any JSON.
        #[serde(default)]
        output: Value,
    },
    // Episodes (docs/governance.md#episodes)
    /// Start a child episode run by `agent`, as the spawning agent's recursion policy
    /// allows (depth, children, total episodes, child types, budget shares). Its
    /// `EpisodeResult` comes back to this agent in a new request.
    Spawn {
        /// The agent that runs the child episode.
        agent: AgentId,
        /// The child's type (`verify`, `retrieve`, `summarize`, `rewrite`, `tool_probe`...),
        /// checked against allowed and forbidden child types.
        episode_type: String,
        /// The child's single goal.
        goal: String,
        /// What the child may consume; omitted dimensions get the most allowed.
        #[serde(default)]
        budget: crate::BudgetRequest,
        /// Inputs for the child, delivered as its decision input with the goal.
        #[serde(default)]
        inputs: Map<String, Value>,
        /// Why this child is needed: one of the triggers the bundle allows for the child
        /// type's recursion class (`side_effect_attempted` for a `verify` child...);
        /// required for a child type with a class (docs/governance.md#recursion-classes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trigger: Option<String>,
    },
    /// Write a new version of a domain this agent owns (docs/governance.md#write-domains);
    /// history is never changed. Other agents with the domain in their read scopes see the
    /// latest version.
    WriteDomain {
        /// The domain id, as declared in the bundle.
        domain: String,
        /// The new version's content.
        content: Value,
    },
    /// End this agent's episode with a result (docs/governance.md#episodes).
    FinishEpisode {
        /// The episode's result.
        result: crate::EpisodeResult,
    },
    // Side effects (docs/governance.md#side-effects)
    /// Ask docket to carry out a side effect (a publish, a DM...). docket decides it under
    /// the bundle's side-effect policy, dry-runs it where required, checks the kill
    /// switch, executes it at most once per idempotency key, verifies it, and calls this
    /// agent again with the result as a decision input of type `effect_result`.
    RequestEffect {
        /// The effect kind, as the bundle's `[[side_effects]]` names it (`publish`...).
        kind: String,
        /// The lane (`api`, `browser`...).
        lane: String,
        /// Applied at most once in the run; a second request with a key already applied
        /// gets the recorded receipt back. Required when the policy says so (the default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idempotency_key: Option<String>,
        /// What the executor needs (the post's text, the recipient...).
        #[serde(default)]
        params: Value,
        /// Not executed before this time (RFC 3339 with its offset): decided and dry-run
        /// at once, executed once it is due, its kill switch and policy read then.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_before: Option<String>,
    },
    // Governed tools (docs/agent-protocol.md#tools-call_tool)
    /// Ask docket to run a tool for you. docket decides the call before any executor runs
    /// it (deny patterns, MUST NOT rules, allowed tools, review patterns), runs an allowed
    /// one through the workflow's `[tools.NAME]` executor, and calls this agent again with
    /// the outcome as a decision input of type `tool_result`. Must be the last action.
    CallTool {
        /// The tool: a `[tools.NAME]` section, or `SECTION:TOOL` for an MCP server's tool.
        name: String,
        /// Its arguments (any JSON; an object for MCP tools).
        #[serde(default)]
        arguments: Value,
    },
    // Durable timers (docs/agent-protocol.md#waiting-wait)
    /// Wait, then be called again: until a time (`until`, RFC 3339 with an offset) or for
    /// a duration (`for`, e.g. `90s`, `2h 30m`, `PT2H`), at most one of them; or for an
    /// outside event (`event`, its name), with `until` or `for` as its timeout. docket
    /// records the wait and calls this agent again once the timer is due (a decision input
    /// of type `timer_fired`), or the event is delivered (`event`) or its timeout passes
    /// (`event_timed_out`). Must be the last action.
    Wait {
        /// The time to wait until.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<String>,
        /// How long to wait, from the time the response was recorded.
        #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
        duration: Option<String>,
        /// The outside event waited for (a name the bundle's `[[signals]]` declares).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event: Option<String>,
        /// Why, shown to people (`docket status`) and recorded.
        reason: String,
    },
}

impl Action {
    /// The wire name of this action's `"type"`.
    #[must_use]
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Handoff { .. } => "handoff",
            Self::RequestCapability { .. } => "request_capability",
            Self::Escalate { .. } => "escalate",
            Self::Finish { .. } => "finish",
            // Episodes
            Self::Spawn { .. } => "spawn",
            Self::WriteDomain { .. } => "write_domain",
            Self::FinishEpisode { .. } => "finish_episode",
            // Side effects
            Self::RequestEffect { .. } => "request_effect",
            // Governed tools
            Self::CallTool { .. } => "call_tool",
            // Durable timers
            Self::Wait { .. } => "wait",
        }
    }
}

impl AgentResponse {
    /// The error code of a failed answer: its `error_code`, else `AGENT_TIMEOUT` for a
    /// TIMEOUT and `AGENT_ERROR` for an ERROR.
    #[must_use]
    pub fn failure_code(&self) -> String {
        self.error_code.clone().unwrap_or_else(|| {
            if self.status == ResponseStatus::Timeout {
                "AGENT_TIMEOUT".to_owned()
            } else {
                "AGENT_ERROR".to_owned()
            }
        })
    }

    /// A SUCCESS response with the given confidence and actions.
    #[must_use]
    pub fn success(
        request_id: impl Into<CallId>,
        confidence: Confidence,
        actions: Vec<Action>,
    ) -> Self {
        Self {
            request_id: request_id.into(),
            status: ResponseStatus::Success,
            confidence_level: Some(confidence),
            warnings: Vec::new(),
            error_code: None,
            error_message: None,
            usage: Usage::default(),
            tool_calls: Vec::new(),
            actions,
            metadata: Map::new(),
            intent: None,
        }
    }

    /// An ERROR response with a code and a message.
    #[must_use]
    pub fn error(
        request_id: impl Into<CallId>,
        error_code: impl Into<String>,
        error_message: impl Into<String>,
    ) -> Self {
        Self {
            request_id: request_id.into(),
            status: ResponseStatus::Error,
            confidence_level: None,
            warnings: Vec::new(),
            error_code: Some(error_code.into()),
            error_message: Some(error_message.into()),
            usage: Usage::default(),
            tool_calls: Vec::new(),
            actions: Vec::new(),
            metadata: Map::new(),
            intent: None,
        }
    }

    /// This response with the agent's intent classification.
    #[must_use]
    pub fn with_intent(mut self, intent: IntentClassification) -> Self {
        self.intent = Some(intent);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> AgentResponse {
        let mut response = AgentResponse::success(
            "r1",
            Confidence::Medium,
            vec![
                Action::RequestCapability {
                    target_agent: "intelligence".into(),
                    capability_code: "GEO_SCORE".into(),
                    inputs: Map::new(),
                    priority: None,
                },
                Action::Handoff {
                    to: "strategy".into(),
                    output_type: "gaps".into(),
                    payload: json!({"gaps": [{"id": "g1", "priority": 1}]}),
                    task: None,
                },
                Action::Escalate {
                    reason: "conflicting scores".into(),
                    choices: Vec::new(),
                },
                Action::Finish {
                    output: json!({"done": true}),
                },
            ],
        );
        response.status = ResponseStatus::Partial;
        response.warnings = vec!["benchmark data from 2023".into()];
        response.usage = Usage {
            input_tokens: 10,
            output_tokens: 20,
            tool_calls: 1,
        };
        response.tool_calls = vec![ToolCall {
            name: "Bash".into(),
            arguments: "ls".into(),
        }];
        response
    }

    #[test]
    fn round_trips_through_json() {
        let response = sample();
        let text = serde_json::to_string(&response).expect("serialises");
        let back: AgentResponse = serde_json::from_str(&text).expect("parses back");
        assert_eq!(back, response);
    }

    #[test]
    fn actions_are_tagged_by_type_in_snake_case() {
        let value = serde_json::to_value(sample()).expect("serialises");
        let types: Vec<&str> = value["actions"]
            .as_array()
            .expect("actions is an array")
            .iter()
            .filter_map(|a| a["type"].as_str())
            .collect();
        assert_eq!(
            types,
            ["request_capability", "handoff", "escalate", "finish"]
        );
        assert_eq!(value["status"], "PARTIAL");
        assert_eq!(value["confidence_level"], "MEDIUM");
    }

    #[test]
    fn unknown_action_type_names_the_type_and_the_known_ones() {
        let err = serde_json::from_value::<AgentResponse>(json!({
            "request_id": "r1", "status": "SUCCESS", "confidence_level": "HIGH",
            "actions": [{"type": "spawn_episode", "goal": "x"}]
        }))
        .expect_err("spawn_episode is not an action (spawn is)");
        let message = err.to_string();
        assert!(message.contains("spawn_episode"), "{message}");
        assert!(message.contains("handoff"), "{message}");
    }

    #[test]
    fn unknown_fields_are_rejected_in_responses_and_actions() {
        let err = serde_json::from_value::<AgentResponse>(json!({
            "request_id": "r1", "status": "SUCCESS", "confidence": "HIGH"
        }))
        .expect_err("`confidence` is misspelt");
        assert!(err.to_string().contains("confidence"), "{err}");

        let err = serde_json::from_value::<AgentResponse>(json!({
            "request_id": "r1", "status": "SUCCESS", "confidence_level": "HIGH",
            "actions": [{"type": "escalate", "reason": "x", "urgency": 3}]
        }))
        .expect_err("escalate has no urgency field");
        assert!(err.to_string().contains("urgency"), "{err}");
    }

    #[test]
    fn optional_fields_may_be_null_or_absent() {
        let response: AgentResponse = serde_json::from_value(json!({
            "request_id": "r1", "status": "ERROR", "confidence_level": null,
            "error_code": null, "error_message": "failed"
        }))
        .expect("nulls are accepted for optional fields");
        assert_eq!(response.confidence_level, None);
        assert_eq!(response.error_code, None);
        assert_eq!(response.usage, Usage::default());
        assert!(response.actions.is_empty() && response.warnings.is_empty());
    }

    #[test]
    fn confidence_orders_high_above_speculative() {
        assert!(Confidence::High > Confidence::Medium);
        assert!(Confidence::Medium > Confidence::Low);
        assert!(Confidence::Low > Confidence::Speculative);
    }

    #[test]
    fn tool_call_invocation_matches_deny_pattern_form() {
        let call = ToolCall {
            name: "Bash".into(),
            arguments: "rm -rf /".into(),
        };
        assert_eq!(call.invocation(), "Bash(rm -rf /)");
    }
}
