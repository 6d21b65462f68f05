//! The payloads handed between the geo agents (the output types of
//! `examples/geo/policy.toml`), and the agent and output type names the policy bundle
//! refers to. Top-level field names are the pipeline's established camelCase names where
//! it has them (`validatedScope`, `timeRange`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Agent names, as used in `handoff.to`.
pub mod agents {
    /// Validates the request (entry) and the recommendations (exit).
    pub const GOVERNANCE: &str = "governance";
    /// Collects AI-answer snapshots; owns question selection (Guardrail 3).
    pub const OBSERVATION: &str = "observation";
    /// Computes GEO scores.
    pub const INTELLIGENCE: &str = "intelligence";
    /// Finds gaps and sets priorities.
    pub const REASONING: &str = "reasoning";
    /// Writes recommendations from Reasoning's gaps.
    pub const STRATEGY: &str = "strategy";
}

/// Output type names, as used in `handoff.output_type` and the inputs' `output_type`.
pub mod output_types {
    /// External → Governance.
    pub const ANALYSIS_REQUEST: &str = "analysis_request";
    /// Governance → Observation.
    pub const VALIDATED_SCOPE: &str = "validated_scope";
    /// Observation → Intelligence.
    pub const AI_ANSWER_SNAPSHOTS: &str = "ai_answer_snapshots";
    /// Intelligence → Reasoning (and to Strategy as read-only context).
    pub const GEO_SCORES: &str = "geo_scores";
    /// Reasoning → Strategy.
    pub const GAPS_AND_OPPORTUNITIES: &str = "gaps_and_opportunities";
    /// Strategy → Governance.
    pub const RECOMMENDATIONS: &str = "recommendations";
    /// Governance → External (the `finish` output).
    pub const VALIDATED_RECOMMENDATIONS: &str = "validated_recommendations";
}

/// External → Governance: `{ topics, brands, regions, timeRange? }`. The first brand is
/// the one the analysis is for (the focus brand); the others are its competitors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalysisRequest {
    /// Topics to analyse.
    pub topics: Vec<String>,
    /// Focus brand first, then competitors.
    pub brands: Vec<String>,
    /// Regions (e.g. `US`, `EU`).
    pub regions: Vec<String>,
    /// Optional capture window.
    #[serde(rename = "timeRange", default, skip_serializing_if = "Option::is_none")]
    pub time_range: Option<TimeRange>,
    /// The example's drills only: how Strategy should misbehave (examples/geo/README.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drill: Option<Drill>,
}

/// A way Strategy misbehaves on request, so a run shows the guardrail that stops it
/// (examples/geo/README.md). Strategy reads it from the run's original request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Drill {
    /// Strategy asks Observation to generate questions on the gaps' topics (a feedback
    /// loop into question generation): refused by the bundle's lock, Guardrail 3.
    QuestionFeedbackLoop,
    /// Strategy writes questions to sample into its recommendations: rejected at
    /// Checkpoint 2 on every retry until the hard stop, Guardrail 1.
    QuestionsInRecommendations,
}

/// An inclusive window of capture dates (`YYYY-MM-DD`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeRange {
    /// First day.
    pub from: String,
    /// Last day.
    pub to: String,
}

/// Governance → Observation: `{ validatedScope, constraints, warnings? }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidatedScope {
    /// What to observe.
    #[serde(rename = "validatedScope")]
    pub validated_scope: Scope,
    /// Limits Observation must respect.
    pub constraints: Constraints,
    /// What Governance adjusted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The validated scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// The brand the analysis is for.
    pub focus_brand: String,
    /// All brands, focus first.
    pub brands: Vec<String>,
    /// Topics, deduplicated.
    pub topics: Vec<String>,
    /// Regions, deduplicated.
    pub regions: Vec<String>,
}

/// Constraints on observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Constraints {
    /// Only snapshots captured in this window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_range: Option<TimeRange>,
}

/// Observation → Intelligence: AI-answer snapshots with their brand mentions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AiAnswerSnapshots {
    /// The brand the analysis is for.
    pub focus_brand: String,
    /// All brands, focus first.
    pub brands: Vec<String>,
    /// Snapshots with an answer, in data-set order.
    pub snapshots: Vec<Snapshot>,
    /// Ids of snapshots in scope whose answer was empty (not scored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// One answer an AI assistant gave to one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Snapshot id in the data set.
    pub id: String,
    /// The question's topic.
    pub topic: String,
    /// The question's region.
    pub region: String,
    /// The question asked.
    pub question: String,
    /// The assistant that answered.
    pub engine: String,
    /// When the answer was captured (`YYYY-MM-DD`).
    pub captured_on: String,
    /// The answer text.
    pub answer: String,
    /// Whole-word, case-insensitive mentions per brand (brands with none are absent).
    pub mentions: BTreeMap<String, u32>,
}

/// Intelligence → Reasoning: GEO scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeoScores {
    /// The brand the analysis is for.
    pub focus_brand: String,
    /// Answers scored.
    pub answers: u32,
    /// Per brand, over all answers.
    pub brands: BTreeMap<String, BrandScore>,
    /// Per topic, per brand. (Absent when scoped away, e.g. in Strategy's read-only context.)
    #[serde(default)]
    pub by_topic: BTreeMap<String, BTreeMap<String, BrandScore>>,
    /// Per engine (assistant), per brand.
    #[serde(default)]
    pub by_engine: BTreeMap<String, BTreeMap<String, BrandScore>>,
}

/// A brand's visibility in a set of answers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BrandScore {
    /// Answers in the set.
    pub answers: u32,
    /// Answers that mention the brand.
    pub answers_mentioning: u32,
    /// Mentions of the brand (an answer can mention it several times).
    pub mentions: u32,
    /// answers_mentioning / answers.
    pub mention_rate: f64,
    /// The brand's mentions / all brands' mentions.
    pub share_of_voice: f64,
    /// 100 × (0.6 × mention_rate + 0.4 × share_of_voice), rounded to 0.1.
    pub geo_score: f64,
}

/// Reasoning → Strategy: gaps (with priorities), opportunities and patterns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GapsAndOpportunities {
    /// The brand the analysis is for.
    pub focus_brand: String,
    /// Topics where a competitor is more visible, most urgent first.
    pub gaps: Vec<Gap>,
    /// Topics no brand dominates.
    pub opportunities: Vec<Opportunity>,
    /// Observations across topics (e.g. an assistant that rarely names the focus brand).
    pub patterns: Vec<Pattern>,
}

/// A topic where the focus brand trails the leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// `gap-1`, `gap-2`... in priority order; recommendations cite it.
    pub id: String,
    /// The topic.
    pub topic: String,
    /// The focus brand's mention rate on the topic.
    pub focus_rate: f64,
    /// The most visible brand on the topic.
    pub leader: String,
    /// The leader's mention rate.
    pub leader_rate: f64,
    /// leader_rate − focus_rate.
    pub delta: f64,
    /// HIGH (delta ≥ 0.5), MEDIUM (≥ 0.25) or LOW.
    pub priority: Priority,
}

/// Gap priority, set by Reasoning only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Priority {
    /// Act first.
    High,
    /// Act next.
    Medium,
    /// Act when there is room.
    Low,
}

/// A topic where no brand is mentioned in more than half the answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Opportunity {
    /// The topic.
    pub topic: String,
    /// The highest mention rate of any brand on it.
    pub leader_rate: f64,
}

/// A pattern across topics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pattern {
    /// The assistant concerned.
    pub engine: String,
    /// The focus brand's mention rate on that assistant.
    pub focus_rate: f64,
    /// The focus brand's mention rate over all assistants.
    pub overall_rate: f64,
}

/// Strategy → Governance: `{ recommendations: [] }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recommendations {
    /// In Reasoning's priority order.
    pub recommendations: Vec<Recommendation>,
}

/// One recommendation. A recommendation with any other field is rejected at the exit
/// checkpoint, so nothing such as questions to sample can ride along (Guardrail 3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recommendation {
    /// `rec-1`, `rec-2`...
    pub id: String,
    /// The gap it addresses (Reasoning's id): its provenance.
    pub gap_id: String,
    /// Copied from the gap, never recomputed (Guardrail 2).
    pub priority: Priority,
    /// The topic.
    pub topic: String,
    /// What to do.
    pub action: String,
    /// Why, in terms of the gap.
    pub rationale: String,
    /// The expected effect; may use Intelligence's scores as read-only context.
    pub expected_impact: String,
}

impl Recommendation {
    /// The fields a recommendation has; the exit checkpoint rejects any other.
    pub const FIELDS: [&'static str; 7] = [
        "id",
        "gap_id",
        "priority",
        "topic",
        "action",
        "rationale",
        "expected_impact",
    ];
}

/// Governance → External: `{ recommendations, warnings?, status }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidatedRecommendations {
    /// The recommendations, unchanged.
    pub recommendations: Vec<Recommendation>,
    /// What the checkpoint noted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// `validated`.
    pub status: String,
}
