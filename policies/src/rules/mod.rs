//! The governance rules (docs/governance.md), one file per rule. A rule's file holds its
//! section of the bundle (spec types and their serde defaults), its checks (`check`, over
//! the shared `validate::Checker`, and `rule_ids` for the ids it declares), its step of the
//! normal form (`normalize`), any index it compiles for `PolicyBundle`, its decision
//! functions (methods of `PolicyBundle`) and their tests.
//!
//! - `authority.rs`: who may override whom (each agent's `authority`).
//! - `capability.rs`: which capabilities agents may request of each other (each agent's
//!   `capabilities`, `[[responsibility_locks]]`).
//! - `circuit_breaker.rs`: when calls to a failing agent stop (`defaults.circuit_breaker`).
//! - `context_parts.rs`: which parts of the run (original input, prior outputs,
//!   observations, agent identity) reach a handoff's receiver
//!   (`multi_agent_handoffs.context_parts`, each handoff rule's `context_parts`).
//! - `contract.rs`: the output types edges carry and their schemas (`[[output_types]]`).
//! - `domain.rs`: who writes and reads which domain (`[[domains]]`, each agent's
//!   `write_scopes` and `read_scopes`).
//! - `escalation.rs`: what follows a failure, up to the hard stop (`[escalation]`).
//! - `intent.rs`: the classifying agent's intent classification, held to its routing
//!   (`[intent_classification]`).
//! - `handoff.rs`: who may hand off to whom (`[interactions]`), with `flow.rs` for what
//!   the declared flow order (`interactions.flow_order`) forbids.
//! - `provenance.rs`: where the ids a handoff cites must come from (`[[provenance]]`).
//! - `recursion.rs`: when an episode may spawn a child, and with what budget
//!   (`[recursion]`), with `recursion_class.rs` for what a child is for: its class, the
//!   triggers a spawn names, verification before repair (`[recursion.classes]`).
//! - `scope.rs`: what context crosses a handoff (`[multi_agent_handoffs]`, each agent's
//!   `context_requirements`), with `translate.rs` for summarising and recasting.
//! - `side_effect.rs`: what a side effect needs before it runs (`[[side_effects]]`, each
//!   agent's `side_effects`).
//! - `signals.rs`: which outside events may reach a run, from whom, to which agents, and
//!   the domains they are written and annotated in (`[[signals]]`).
//! - `tools.rs`: which tool calls an agent may make (`[[deny_patterns]]`,
//!   `[[review_patterns]]`, each agent's `allowed_tools` and `must_not_tools`).
//! - `waiting.rs`: how long an agent may wait on a timer, and whether waiting counts
//!   against wall time (`[waiting]`).
//!
//! Outside this directory a rule is named once in each central file: its field of
//! `BundleSpec` or `AgentSpec` (`model.rs`), its calls in `validate`, `canonical::normalize`
//! and, for an index, `PolicyBundle::from_spec` (`compiled.rs`), its `DecisionKind`
//! variant(s) (`decision.rs`), and the re-exports of `lib.rs`.

pub(crate) mod authority;
pub(crate) mod capability;
pub(crate) mod circuit_breaker;
pub(crate) mod context_parts;
pub(crate) mod contract;
pub(crate) mod domain;
pub(crate) mod escalation;
pub(crate) mod flow;
pub(crate) mod handoff;
pub(crate) mod intent;
pub(crate) mod provenance;
pub(crate) mod recursion;
pub(crate) mod recursion_class;
pub(crate) mod scope;
pub(crate) mod side_effect;
pub(crate) mod signals;
pub(crate) mod tools;
pub(crate) mod waiting;
