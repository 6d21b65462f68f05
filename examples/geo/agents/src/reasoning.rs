//! Reasoning: where the focus brand trails the most visible brand, by how much, and how
//! urgent that is. Priorities are set here and nowhere else (Guardrail 2).

use std::collections::BTreeMap;

use docket_protocol::{Action, AgentRequest, AgentResponse};

use crate::Failure;
use crate::answer::{decision_input, handoff, respond, round4};
use crate::payloads::{
    BrandScore, Gap, GapsAndOpportunities, GeoScores, Opportunity, Pattern, Priority, agents,
    output_types,
};

/// Finds gaps, opportunities and patterns, and hands them to Strategy.
pub fn handle(request: &AgentRequest) -> AgentResponse {
    respond(request, reason(request))
}

fn reason(request: &AgentRequest) -> Result<(Action, Vec<String>), Failure> {
    let scores: GeoScores = decision_input(request, output_types::GEO_SCORES)?;
    if !scores.brands.contains_key(&scores.focus_brand) {
        return Err(Failure::new(
            "INPUT_VALIDATION_FAILED",
            format!(
                "the scores do not cover the focus brand {}",
                scores.focus_brand
            ),
        ));
    }
    let analysis = analyse(&scores);
    let warnings = if analysis.gaps.is_empty() {
        vec![format!(
            "{} leads or ties on every topic: no gaps",
            scores.focus_brand
        )]
    } else {
        Vec::new()
    };
    Ok((
        handoff(
            agents::STRATEGY,
            output_types::GAPS_AND_OPPORTUNITIES,
            &analysis,
        ),
        warnings,
    ))
}

/// Gap priority from the mention-rate difference.
#[must_use]
pub fn priority(delta: f64) -> Priority {
    if delta >= 0.5 {
        Priority::High
    } else if delta >= 0.25 {
        Priority::Medium
    } else {
        Priority::Low
    }
}

/// The leader of a group: highest mention rate, then highest share of voice, then name.
fn leader(scores: &BTreeMap<String, BrandScore>) -> Option<(&String, &BrandScore)> {
    scores.iter().max_by(|(a_name, a), (b_name, b)| {
        a.mention_rate
            .total_cmp(&b.mention_rate)
            .then(a.share_of_voice.total_cmp(&b.share_of_voice))
            .then(b_name.cmp(a_name))
    })
}

/// Gaps (most urgent first: priority, then delta, then topic), opportunities and patterns.
#[must_use]
pub fn analyse(scores: &GeoScores) -> GapsAndOpportunities {
    let focus = &scores.focus_brand;
    let mut gaps = Vec::new();
    let mut opportunities = Vec::new();
    for (topic, brands) in &scores.by_topic {
        let Some((leader_name, leader_score)) = leader(brands) else {
            continue;
        };
        let focus_rate = brands.get(focus).map_or(0.0, |s| s.mention_rate);
        let delta = round4(leader_score.mention_rate - focus_rate);
        if leader_name != focus && delta > 0.0 {
            gaps.push(Gap {
                id: String::new(),
                topic: topic.clone(),
                focus_rate,
                leader: leader_name.clone(),
                leader_rate: leader_score.mention_rate,
                delta,
                priority: priority(delta),
            });
        }
        if leader_score.mention_rate <= 0.5 {
            opportunities.push(Opportunity {
                topic: topic.clone(),
                leader_rate: leader_score.mention_rate,
            });
        }
    }
    gaps.sort_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then(b.delta.total_cmp(&a.delta))
            .then(a.topic.cmp(&b.topic))
    });
    for (i, gap) in gaps.iter_mut().enumerate() {
        gap.id = format!("gap-{}", i + 1);
    }
    let overall_rate = scores.brands.get(focus).map_or(0.0, |s| s.mention_rate);
    let patterns = scores
        .by_engine
        .iter()
        .filter_map(|(engine, brands)| {
            let focus_rate = brands.get(focus).map_or(0.0, |s| s.mention_rate);
            (focus_rate < overall_rate).then(|| Pattern {
                engine: engine.clone(),
                focus_rate,
                overall_rate,
            })
        })
        .collect();
    GapsAndOpportunities {
        focus_brand: focus.clone(),
        gaps,
        opportunities,
        patterns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(mention_rate: f64, share_of_voice: f64) -> BrandScore {
        BrandScore {
            answers: 4,
            answers_mentioning: 0,
            mentions: 0,
            mention_rate,
            share_of_voice,
            geo_score: 0.0,
        }
    }

    fn topic(entries: &[(&str, f64)]) -> BTreeMap<String, BrandScore> {
        entries
            .iter()
            .map(|(b, r)| ((*b).to_owned(), score(*r, *r)))
            .collect()
    }

    #[test]
    fn priorities_follow_the_thresholds() {
        assert_eq!(priority(0.75), Priority::High);
        assert_eq!(priority(0.5), Priority::High);
        assert_eq!(priority(0.25), Priority::Medium);
        assert_eq!(priority(0.1), Priority::Low);
    }

    #[test]
    fn gaps_are_ranked_and_numbered_opportunities_and_patterns_found() {
        let scores = GeoScores {
            focus_brand: "Acme".into(),
            answers: 12,
            brands: topic(&[("Acme", 0.5), ("Globex", 0.6)]),
            by_topic: BTreeMap::from([
                ("crm".to_owned(), topic(&[("Acme", 0.25), ("Globex", 1.0)])),
                ("mail".to_owned(), topic(&[("Acme", 0.5), ("Globex", 0.8)])),
                ("desk".to_owned(), topic(&[("Acme", 0.4), ("Globex", 0.5)])),
                ("seo".to_owned(), topic(&[("Acme", 0.75), ("Globex", 0.25)])),
            ]),
            by_engine: BTreeMap::from([
                ("a".to_owned(), topic(&[("Acme", 0.25)])),
                ("b".to_owned(), topic(&[("Acme", 0.75)])),
            ]),
        };
        let analysis = analyse(&scores);
        let ranked: Vec<(&str, &str, Priority)> = analysis
            .gaps
            .iter()
            .map(|g| (g.id.as_str(), g.topic.as_str(), g.priority))
            .collect();
        assert_eq!(
            ranked,
            [
                ("gap-1", "crm", Priority::High),
                ("gap-2", "mail", Priority::Medium),
                ("gap-3", "desk", Priority::Low),
            ]
        );
        assert_eq!(analysis.gaps[0].delta, 0.75);
        assert_eq!(analysis.gaps[0].leader, "Globex");
        let open: Vec<&str> = analysis
            .opportunities
            .iter()
            .map(|o| o.topic.as_str())
            .collect();
        assert_eq!(open, ["desk"]);
        assert_eq!(analysis.patterns.len(), 1);
        assert_eq!(analysis.patterns[0].engine, "a");
    }
}
