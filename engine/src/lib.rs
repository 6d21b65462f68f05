//! docket's engine.
//!
//! For now this crate holds the two pieces every agent call goes through:
//! - [`protocol`]: the request an agent receives and the response it answers with
//!   (seed 003's contract, with decision and context inputs kept apart per seed 000's
//!   Guardrail 2), their validation, and the JSON Schema generated from them;
//! - [`executor`]: how a request reaches an agent and its response comes back, in-process,
//!   over a child process's stdin/stdout as JSON lines, or over HTTP, with every failure
//!   returned as an [`executor::AgentCallError`].
//!
//! - [`decider`]: a run as a pure state machine (`decide`, `evolve`, `replay_check`);
//! - [`runtime`]: the tokio shell that calls agents, records their answers, appends each
//!   decided batch to the event log and resumes runs from it;
//! - [`effect`]: side-effect executors (once per idempotency key, verified after a crash)
//!   and the kill switches read before every execution;
//! - [`workflow`]: workflow files (bundle, entry agent, executors).

pub mod decider;
pub mod effect;
pub mod executor;
pub mod protocol;
pub mod runtime;
pub mod workflow;
