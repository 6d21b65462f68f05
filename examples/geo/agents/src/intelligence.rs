//! Intelligence: GEO scores per brand (mention rate, share of voice, and a combined score),
//! overall, per topic and per assistant.

use std::collections::BTreeMap;

use docket_protocol::{Action, AgentRequest, AgentResponse};

use crate::Failure;
use crate::answer::{decision_input, handoff, ratio, respond};
use crate::payloads::{AiAnswerSnapshots, BrandScore, GeoScores, Snapshot, agents, output_types};

/// Computes the GEO scores and hands them to Reasoning.
pub fn handle(request: &AgentRequest) -> AgentResponse {
    respond(request, compute(request))
}

fn compute(request: &AgentRequest) -> Result<(Action, Vec<String>), Failure> {
    let observed: AiAnswerSnapshots = decision_input(request, output_types::AI_ANSWER_SNAPSHOTS)?;
    if observed.snapshots.is_empty() {
        return Err(Failure::new("DATA_NO_ANSWERS", "no snapshots to score"));
    }
    let scores = geo_scores(&observed);
    Ok((
        handoff(agents::REASONING, output_types::GEO_SCORES, &scores),
        Vec::new(),
    ))
}

/// The scores of every brand over all snapshots, per topic and per engine.
#[must_use]
pub fn geo_scores(observed: &AiAnswerSnapshots) -> GeoScores {
    let all: Vec<&Snapshot> = observed.snapshots.iter().collect();
    let group = |key: fn(&Snapshot) -> &str| {
        let mut groups: BTreeMap<String, Vec<&Snapshot>> = BTreeMap::new();
        for snapshot in &observed.snapshots {
            groups
                .entry(key(snapshot).to_owned())
                .or_default()
                .push(snapshot);
        }
        groups
            .into_iter()
            .map(|(k, v)| (k, score_brands(&observed.brands, &v)))
            .collect()
    };
    GeoScores {
        focus_brand: observed.focus_brand.clone(),
        answers: u32::try_from(all.len()).unwrap_or(u32::MAX),
        brands: score_brands(&observed.brands, &all),
        by_topic: group(|s| &s.topic),
        by_engine: group(|s| &s.engine),
    }
}

fn score_brands(brands: &[String], snapshots: &[&Snapshot]) -> BTreeMap<String, BrandScore> {
    let answers = u32::try_from(snapshots.len()).unwrap_or(u32::MAX);
    let mentions_of = |brand: &str| -> (u32, u32) {
        snapshots.iter().fold((0, 0), |(answering, total), s| {
            let n = s.mentions.get(brand).copied().unwrap_or(0);
            (answering + u32::from(n > 0), total + n)
        })
    };
    let all_mentions: u32 = brands.iter().map(|b| mentions_of(b).1).sum();
    brands
        .iter()
        .map(|brand| {
            let (answers_mentioning, mentions) = mentions_of(brand);
            let mention_rate = ratio(answers_mentioning, answers);
            let share_of_voice = ratio(mentions, all_mentions);
            let geo_score = (1000.0 * (0.6 * mention_rate + 0.4 * share_of_voice)).round() / 10.0;
            (
                brand.clone(),
                BrandScore {
                    answers,
                    answers_mentioning,
                    mentions,
                    mention_rate,
                    share_of_voice,
                    geo_score,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(id: &str, topic: &str, engine: &str, mentions: &[(&str, u32)]) -> Snapshot {
        Snapshot {
            id: id.into(),
            topic: topic.into(),
            region: "US".into(),
            question: "q".into(),
            engine: engine.into(),
            captured_on: "2026-01-01".into(),
            answer: "a".into(),
            mentions: mentions
                .iter()
                .map(|(b, n)| ((*b).to_owned(), *n))
                .collect(),
        }
    }

    #[test]
    fn mention_rate_share_of_voice_and_geo_score() {
        let observed = AiAnswerSnapshots {
            focus_brand: "Acme".into(),
            brands: vec!["Acme".into(), "Globex".into()],
            snapshots: vec![
                snapshot("s1", "crm", "a", &[("Acme", 2), ("Globex", 1)]),
                snapshot("s2", "crm", "b", &[("Globex", 1)]),
                snapshot("s3", "mail", "a", &[]),
                snapshot("s4", "mail", "b", &[("Globex", 4)]),
            ],
            missing: Vec::new(),
        };
        let scores = geo_scores(&observed);
        assert_eq!(scores.answers, 4);
        let acme = scores.brands["Acme"];
        // 1 of 4 answers; 2 of 8 mentions.
        assert_eq!((acme.mention_rate, acme.share_of_voice), (0.25, 0.25));
        assert_eq!(acme.geo_score, 25.0);
        let globex = scores.brands["Globex"];
        // 3 of 4 answers; 6 of 8 mentions: 100 × (0.6 × 0.75 + 0.4 × 0.75).
        assert_eq!((globex.mention_rate, globex.share_of_voice), (0.75, 0.75));
        assert_eq!(globex.geo_score, 75.0);
        assert_eq!(scores.by_topic["crm"]["Acme"].mention_rate, 0.5);
        assert_eq!(scores.by_topic["mail"]["Acme"].share_of_voice, 0.0);
        assert_eq!(scores.by_engine["b"]["Globex"].mentions, 5);
    }

    #[test]
    fn rates_are_rounded_to_four_decimals() {
        let observed = AiAnswerSnapshots {
            focus_brand: "Acme".into(),
            brands: vec!["Acme".into()],
            snapshots: vec![
                snapshot("s1", "t", "a", &[("Acme", 1)]),
                snapshot("s2", "t", "a", &[]),
                snapshot("s3", "t", "a", &[]),
            ],
            missing: Vec::new(),
        };
        assert_eq!(geo_scores(&observed).brands["Acme"].mention_rate, 0.3333);
    }
}
