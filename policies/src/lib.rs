//! Policy bundles: the governance rules of a multi-agent system (who may hand off to whom,
//! what context crosses, how deep agents may recurse, which side effects need what) as
//! immutable, hashed data, and pure decision functions over them.
//!
//! ```text
//! text ──parse──▶ BundleSpec ──validate──▶ normalize ──hash──▶ PolicyBundle (indexed)
//!                                                                  │
//!        decide_handoff / scope_context / decide_spawn / decide_domain_write /
//!        decide_capability / decide_side_effect / decide_escalation / decide_tool_call /
//!        decide_provenance
//! ```
//!
//! Each governance rule is one file under `rules/`: its section of the bundle, its checks,
//! its step of the normal form and its decisions (the list is in `rules/mod.rs`). The other
//! modules are what the rules share: parsing and locating errors, the checker, canonical
//! encoding and hashing, the compiled bundle, field paths, tool patterns, token counts.
//!
//! Invariant: decisions are pure. No clock, I/O, randomness, environment or hash-map
//! iteration order reaches them; the same bundle and input give the same decision, so an
//! audit can replay it years later. The only I/O is [`load_file`].
//!
//! The modules are private; what other crates use is re-exported here.

// A library reports every failure as an error value naming what and where; it never
// aborts its caller. (Tests are exempt: see clippy.toml.)
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod canonical;
mod compiled;
mod decision;
mod diff;
mod error;
mod fieldpath;
mod handoff_rules;
mod limits;
mod load;
mod locate;
mod model;
mod parse;
mod rules;
mod schema;
mod tokens;
mod toolpattern;
mod translate;
mod validate;

pub use canonical::{
    BundleHash, json_text as canonical_json_text, to_json_bytes as canonical_json_bytes,
};
pub use compiled::PolicyBundle;
pub use decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict};
pub use diff::{BundleDiff, RuleChangeKind, diff};
pub use error::{BundleError, Diagnostic, DiagnosticCode};
pub use fieldpath::select as select_fields;
pub use handoff_rules::{
    HandoffRuleSet, MatchedRule, PairRules, Precedence, Replacement, RuleProblem, RulesError,
};
pub use limits::{MAX_AGENTS, MAX_ENTRIES, MAX_FLOW_ORDER, MAX_PROBLEMS, MAX_RULES};
pub use load::load_file;
pub use locate::line_col;
pub use model::{BundleSpec, Priority};
pub use parse::{Format, parse};
pub use rules::authority::{
    Authority, BOUNDARY_VIOLATION, HUMAN_OVERRIDE_RULE, OverridePolicy, OverrideRequest,
};
pub use rules::capability::{CapabilityDecision, CapabilityRequest};
pub use rules::circuit_breaker::{CircuitBreaker, OnOpen};
pub use rules::context_parts::{
    AgentIdentity, BUNDLE_CONTEXT_PARTS, ContentPart, ContextParts, ContextPartsDecision,
    PartSetting, PriorOutputs, PriorOutputsWhich,
};
pub use rules::escalation::{
    AGENT_ERROR, ERROR_CLASSES, ErrorClass, EscalationAction, EscalationDecision,
    PARTIAL_OUTPUT_REFUSED,
};
pub use rules::flow::{FlowStep, POSITION_RULE as FLOW_POSITION_RULE};
pub use rules::handoff::{DENY_BY_DEFAULT, HandoffDecision, InputKind, PartialOutputs};
pub use rules::intent::{
    DEFAULT_CONFIDENCE_THRESHOLD, INTENT_REQUIRED_RULE, INTENT_ROUTING_RULE, INTENT_SECONDARY_RULE,
    INTENT_TARGETS_RULE, INTENT_THRESHOLD_RULE, IntentAnswer, IntentClaim,
    IntentClassificationPolicy, IntentTarget,
};
pub use rules::recursion::{Meter, SpawnDecision, SpawnRequest, StopCondition};
pub use rules::recursion_class::{
    ClassDecision, ClassRule, RecursionClass, RecursionClasses, VERIFICATION_FIRST,
};
pub use rules::scope::{
    AdmissionProblem, CONTENT_SOURCES, ConflictResolution, ContextAfter, ContextBefore,
    ContextRequirements, EmptiedContent, EmptiedKind, EmptyScope, HandoffAudit, HandoffMode,
    HandoffRule, ScopedContext, Scoper, ScopingRules, SummaryAudit,
};
pub use rules::side_effect::{
    BrowserLane, GLOBAL_KILL_SWITCH, SideEffectRequest, side_effect_permission_rule,
};
pub use rules::signals::{DEFAULT_MAX_SIGNAL_BYTES, MAX_SIGNAL_BYTES, SignalSpec};
pub use rules::tools::Tier;
pub use rules::waiting::{DEFAULT_MAX_WAIT_MS, WaitingPolicy};
pub use schema::bundle_json_schema;
pub use tokens::{
    count_text as count_tokens, count_text_afresh as count_tokens_afresh,
    count_value as count_value_tokens,
};
pub use toolpattern::ToolPattern;
