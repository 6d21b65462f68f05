//! The agents of docket's geo example (the GEO analysis pipeline): Governance validates the
//! analysis request and, at the end, the recommendations; Observation collects AI-answer
//! snapshots (from a bundled data set) and detects brand mentions; Intelligence computes
//! GEO scores (mention rate, share of voice); Reasoning finds the focus brand's gaps and
//! gives them priorities; Strategy turns each gap into a recommendation citing it.
//!
//! Each agent is a pure function from request to response ([`governance::handle`]...), run
//! as a binary by [`serve::run`]. Every computation is deterministic: ordered maps, fixed
//! rounding, no clock.

pub mod governance;
pub mod intelligence;
pub mod observation;
pub mod payloads;
pub mod reasoning;
pub mod serve;
pub mod strategy;

mod answer;
pub use answer::Failure;
