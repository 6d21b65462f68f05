//! Strategy: one recommendation per gap, in Reasoning's order and with Reasoning's
//! priority. Intelligence's scores, when they arrive as read-only context, only colour the
//! expected impact (Guardrail 2); no recommendation proposes questions to sample
//! (Guardrail 3) — except in the example's drills, where Strategy misbehaves on purpose so
//! a run shows the guardrail that stops it (examples/geo/README.md).

use docket_protocol::{Action, AgentRequest, AgentResponse};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Failure;
use crate::answer::{context_input, decision_input, handoff, respond};
use crate::payloads::{
    Drill, Gap, GapsAndOpportunities, GeoScores, Priority, Recommendation, Recommendations, agents,
    output_types,
};

/// Writes the recommendations and hands them to Governance.
pub fn handle(request: &AgentRequest) -> AgentResponse {
    respond(request, plan(request))
}

fn plan(request: &AgentRequest) -> Result<(Action, Vec<String>), Failure> {
    let analysis: GapsAndOpportunities =
        decision_input(request, output_types::GAPS_AND_OPPORTUNITIES)?;
    if analysis.gaps.is_empty() {
        return Err(Failure::new(
            "INPUT_NO_GAPS",
            "reasoning reported no gaps to act on",
        ));
    }
    let context: Option<GeoScores> = context_input(request, output_types::GEO_SCORES);
    let recommendations = recommend(&analysis, context.as_ref());
    let action = match drill(request) {
        None => handoff(
            agents::GOVERNANCE,
            output_types::RECOMMENDATIONS,
            &recommendations,
        ),
        Some(Drill::QuestionFeedbackLoop) => ask_for_questions(&analysis),
        Some(Drill::QuestionsInRecommendations) => handoff(
            agents::GOVERNANCE,
            output_types::RECOMMENDATIONS,
            &with_questions(&analysis.focus_brand, &recommendations),
        ),
    };
    Ok((action, Vec::new()))
}

/// The drill the run's original request names, if any (`context.handoff.original_request`,
/// which the bundle lets Strategy see in full).
fn drill(request: &AgentRequest) -> Option<Drill> {
    let drill = request
        .context
        .get("handoff")?
        .get("original_request")?
        .get("drill")?;
    Drill::deserialize(drill).ok()
}

/// Drill `question_feedback_loop`: instead of recommending, ask Observation for new
/// questions on the gaps' topics — the feedback loop Guardrail 3 forbids.
fn ask_for_questions(analysis: &GapsAndOpportunities) -> Action {
    let topics: Vec<&str> = analysis.gaps.iter().map(|g| g.topic.as_str()).collect();
    let mut inputs = serde_json::Map::new();
    inputs.insert("topics".to_owned(), json!(topics));
    inputs.insert("brands".to_owned(), json!([analysis.focus_brand]));
    Action::RequestCapability {
        target_agent: agents::OBSERVATION.into(),
        capability_code: QUESTION_GENERATION.to_owned(),
        inputs,
        priority: None,
    }
}

/// The capability Observation owns (the bundle's responsibility lock `guardrail-3`).
const QUESTION_GENERATION: &str = "question_generation";

/// Drill `questions_in_recommendations`: each recommendation also suggests a question to
/// sample next time — which the exit checkpoint rejects.
fn with_questions(focus: &str, recommendations: &Recommendations) -> Value {
    let mut value = serde_json::to_value(recommendations).unwrap_or_default();
    if let Some(items) = value["recommendations"].as_array_mut() {
        for item in items {
            let topic = item["topic"].as_str().unwrap_or_default().to_owned();
            item["questions_to_sample"] = json!([format!("Is {focus} a good choice for {topic}?")]);
        }
    }
    value
}

/// The recommendations for `analysis`'s gaps, in their order.
#[must_use]
pub fn recommend(analysis: &GapsAndOpportunities, context: Option<&GeoScores>) -> Recommendations {
    let focus = &analysis.focus_brand;
    let recommendations = analysis
        .gaps
        .iter()
        .enumerate()
        .map(|(i, gap)| Recommendation {
            id: format!("rec-{}", i + 1),
            gap_id: gap.id.clone(),
            priority: gap.priority,
            topic: gap.topic.clone(),
            action: action(focus, gap),
            rationale: format!(
                "AI assistants mention {focus} in {} of answers on {:?}, {} in {}.",
                percent(gap.focus_rate),
                gap.topic,
                gap.leader,
                percent(gap.leader_rate)
            ),
            expected_impact: impact(focus, gap, context),
        })
        .collect();
    Recommendations { recommendations }
}

fn action(focus: &str, gap: &Gap) -> String {
    match gap.priority {
        Priority::High => format!(
            "Publish in-depth comparison and buying-guide content for {:?} that positions {focus} \
             against {}, and get it cited by independent reviews.",
            gap.topic, gap.leader
        ),
        Priority::Medium => format!(
            "Strengthen {focus}'s documentation and case studies on {:?} so assistants have \
             current sources to cite.",
            gap.topic
        ),
        Priority::Low => format!(
            "Keep {focus}'s pages on {:?} up to date and monitor; the gap to {} is small.",
            gap.topic, gap.leader
        ),
    }
}

/// Uses Intelligence's scores only to describe the expected effect.
fn impact(focus: &str, gap: &Gap, context: Option<&GeoScores>) -> String {
    let closing = format!(
        "Closing the gap would raise {focus}'s mention rate on {:?} by up to {} points",
        gap.topic,
        (gap.delta * 100.0).round()
    );
    match context.and_then(|scores| scores.brands.get(focus)) {
        Some(overall) => format!(
            "{closing} (overall GEO score today: {:.1}, share of voice {}).",
            overall.geo_score,
            percent(overall.share_of_voice)
        ),
        None => format!("{closing}."),
    }
}

fn percent(rate: f64) -> String {
    format!("{:.0}%", rate * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn gap(id: &str, topic: &str, delta: f64, priority: Priority) -> Gap {
        Gap {
            id: id.into(),
            topic: topic.into(),
            focus_rate: 0.25,
            leader: "Globex".into(),
            leader_rate: 0.25 + delta,
            delta,
            priority,
        }
    }

    fn analysis() -> GapsAndOpportunities {
        GapsAndOpportunities {
            focus_brand: "Acme".into(),
            gaps: vec![
                gap("gap-1", "crm", 0.75, Priority::High),
                gap("gap-2", "mail", 0.1, Priority::Low),
            ],
            opportunities: Vec::new(),
            patterns: Vec::new(),
        }
    }

    #[test]
    fn one_recommendation_per_gap_citing_it_with_its_priority() {
        let recs = recommend(&analysis(), None).recommendations;
        let cited: Vec<(&str, &str, Priority)> = recs
            .iter()
            .map(|r| (r.id.as_str(), r.gap_id.as_str(), r.priority))
            .collect();
        assert_eq!(
            cited,
            [
                ("rec-1", "gap-1", Priority::High),
                ("rec-2", "gap-2", Priority::Low)
            ]
        );
        assert!(recs[0].rationale.contains("25%"), "{}", recs[0].rationale);
        assert!(recs[0].expected_impact.contains("75 points"));
    }

    fn request_with(original_request: Value) -> AgentRequest {
        let mut request =
            AgentRequest::new("r1", agents::REASONING, agents::STRATEGY, "STRATEGY_PLAN")
                .with_decision_input(
                    agents::REASONING,
                    output_types::GAPS_AND_OPPORTUNITIES,
                    serde_json::to_value(analysis()).expect("serialises"),
                );
        request.context.insert(
            "handoff".to_owned(),
            json!({ "original_request": original_request }),
        );
        request
    }

    #[test]
    fn a_drill_in_the_original_request_is_acted_out_and_nothing_else_changes_strategy() {
        let plain = handle(&request_with(json!({"topics": ["crm"]})));
        let Some(Action::Handoff { to, payload, .. }) = plain.actions.first() else {
            panic!("expected a handoff: {plain:?}");
        };
        assert_eq!(to, agents::GOVERNANCE);
        assert!(
            payload["recommendations"][0]
                .get("questions_to_sample")
                .is_none()
        );

        let feedback = handle(&request_with(json!({"drill": "question_feedback_loop"})));
        let Some(Action::RequestCapability {
            target_agent,
            capability_code,
            inputs,
            ..
        }) = feedback.actions.first()
        else {
            panic!("expected a capability request: {feedback:?}");
        };
        assert_eq!(target_agent.as_str(), agents::OBSERVATION);
        assert_eq!(capability_code, "question_generation");
        assert_eq!(inputs["topics"], json!(["crm", "mail"]));

        let questions = handle(&request_with(
            json!({"drill": "questions_in_recommendations"}),
        ));
        let Some(Action::Handoff { payload, .. }) = questions.actions.first() else {
            panic!("expected a handoff: {questions:?}");
        };
        assert_eq!(
            payload["recommendations"][0]["questions_to_sample"],
            json!(["Is Acme a good choice for crm?"])
        );
    }

    #[test]
    fn context_scores_change_only_the_expected_impact() {
        let context = GeoScores {
            focus_brand: "Acme".into(),
            answers: 10,
            // Context that would rank topics differently if Strategy used it to decide.
            brands: BTreeMap::from([(
                "Acme".to_owned(),
                crate::payloads::BrandScore {
                    answers: 10,
                    answers_mentioning: 9,
                    mentions: 12,
                    mention_rate: 0.9,
                    share_of_voice: 0.6,
                    geo_score: 78.0,
                },
            )]),
            by_topic: BTreeMap::new(),
            by_engine: BTreeMap::new(),
        };
        let without = recommend(&analysis(), None).recommendations;
        let with = recommend(&analysis(), Some(&context)).recommendations;
        for (a, b) in without.iter().zip(&with) {
            assert_eq!(
                (&a.id, &a.gap_id, a.priority, &a.action, &a.rationale),
                (&b.id, &b.gap_id, b.priority, &b.action, &b.rationale)
            );
        }
        assert!(with[0].expected_impact.contains("GEO score today: 78.0"));
    }
}
