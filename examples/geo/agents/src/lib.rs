//! The agents of docket's geo example (the GEO analysis pipeline): Governance validates the
//! analysis request and, at the end, the recommendations; Observation collects AI-answer
//! snapshots (from a bundled data set) and detects brand mentions; Intelligence computes
//! GEO scores (mention rate, share of voice); Reasoning finds the focus brand's gaps and
//! gives them priorities; Strategy turns each gap into a recommendation citing it.
//!
//! Each agent is a pure function from request to response ([`governance`]...), run as a
//! binary by [`serve`]. Every computation is deterministic: ordered maps, fixed
//! rounding, no clock.

mod answer;
mod governance;
mod intelligence;
mod observation;
mod payloads;
mod reasoning;
mod strategy;

pub use answer::Failure;
// Each agent is one function from request to response, named after the agent.
pub use governance::handle as governance;
pub use intelligence::handle as intelligence;
pub use observation::handle as observation;
pub use reasoning::handle as reasoning;
pub use strategy::handle as strategy;
// The payloads of the pipeline's output types, and the agent and output-type names.
pub use docket_example_kit::{ServeError, run as serve, serve_lines};
pub use payloads::{
    AiAnswerSnapshots, AnalysisRequest, BrandScore, Constraints, Drill, Gap, GapsAndOpportunities,
    GeoScores, Opportunity, Pattern, Priority, Recommendation, Recommendations, Scope, Snapshot,
    TimeRange, ValidatedRecommendations, ValidatedScope, agents, output_types,
};
