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
//! Invariant: decisions are pure. No clock, I/O, randomness, environment or hash-map
//! iteration order reaches them; the same bundle and input give the same decision, so an
//! audit can replay it years later. The only I/O is [`load::load_file`].

// A library reports every failure as an error value naming what and where; it never
// aborts its caller. (Tests are exempt: see clippy.toml.)
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod authority;
pub mod canonical;
pub mod capability;
pub mod compiled;
pub mod contract;
pub mod decision;
pub mod diff;
pub mod domain;
pub mod error;
pub mod escalation;
pub mod fieldpath;
pub mod flow;
pub mod handoff;
pub mod load;
pub mod locate;
pub mod model;
pub mod parse;
pub mod provenance;
pub mod schema;
pub mod scope;
pub mod side_effect;
pub mod spawn;
pub mod tokens;
pub mod toolpattern;
pub mod tools;
pub mod translate;
pub mod validate;

pub use canonical::BundleHash;
pub use capability::{CapabilityDecision, CapabilityRequest};
pub use compiled::PolicyBundle;
pub use decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict};
pub use diff::{BundleDiff, diff};
pub use error::{BundleError, Diagnostic, DiagnosticCode};
pub use escalation::EscalationDecision;
pub use handoff::{HandoffDecision, InputKind};
pub use model::BundleSpec;
pub use parse::{Format, parse};
pub use scope::{HandoffAudit, ScopedContext};
pub use side_effect::SideEffectRequest;
pub use spawn::{Meter, SpawnDecision, SpawnRequest};
