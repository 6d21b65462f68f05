//! Observation: selects the questions in scope (question selection is Observation's alone,
//! Guardrail 3), collects the AI-answer snapshots for them from the bundled data set, and
//! detects brand mentions.

use std::collections::BTreeMap;

use docket_protocol::{Action, AgentRequest, AgentResponse};
use serde::Deserialize;

use crate::Failure;
use crate::answer::{decision_input, handoff, respond_incomplete};
use crate::payloads::{AiAnswerSnapshots, Snapshot, ValidatedScope, agents, output_types};

/// The bundled data set (`examples/geo/data/snapshots.json`).
pub const DATA_SET: &str = include_str!("../../data/snapshots.json");

#[derive(Debug, Deserialize)]
struct DataSet {
    questions: Vec<Question>,
    snapshots: Vec<RawSnapshot>,
}

#[derive(Debug, Deserialize)]
struct Question {
    id: String,
    topic: String,
    region: String,
    text: String,
}

#[derive(Debug, Deserialize)]
struct RawSnapshot {
    id: String,
    question_id: String,
    engine: String,
    captured_on: String,
    answer: String,
}

/// Collects the snapshots for the validated scope.
pub fn handle(request: &AgentRequest) -> AgentResponse {
    respond_incomplete(request, observe(request))
}

fn observe(request: &AgentRequest) -> Result<(Action, Vec<String>), Failure> {
    let scope: ValidatedScope = decision_input(request, output_types::VALIDATED_SCOPE)?;
    let data: DataSet = serde_json::from_str(DATA_SET)
        .map_err(|err| Failure::new("DATA_SET_UNREADABLE", format!("bundled snapshots: {err}")))?;
    let observed = collect(&scope, &data);
    if observed.snapshots.is_empty() {
        return Err(Failure::new(
            "DATA_NO_SNAPSHOTS",
            "no snapshot with an answer matches the scope's topics, regions and time range",
        ));
    }
    let mut warnings = Vec::new();
    if !observed.missing.is_empty() {
        warnings.push(format!(
            "{} snapshot(s) in scope had no answer text and are not scored: {}",
            observed.missing.len(),
            observed.missing.join(", ")
        ));
    }
    for topic in &scope.validated_scope.topics {
        if !observed.snapshots.iter().any(|s| &s.topic == topic) {
            warnings.push(format!("no snapshots for topic {topic:?}"));
        }
    }
    Ok((
        handoff(
            agents::INTELLIGENCE,
            output_types::AI_ANSWER_SNAPSHOTS,
            &observed,
        ),
        warnings,
    ))
}

fn collect(scope: &ValidatedScope, data: &DataSet) -> AiAnswerSnapshots {
    let wanted = &scope.validated_scope;
    let range = &scope.constraints.time_range;
    let questions: BTreeMap<&str, &Question> = data
        .questions
        .iter()
        .filter(|q| {
            wanted
                .topics
                .iter()
                .any(|t| t.eq_ignore_ascii_case(&q.topic))
        })
        .filter(|q| {
            wanted
                .regions
                .iter()
                .any(|r| r.eq_ignore_ascii_case(&q.region))
        })
        .map(|q| (q.id.as_str(), q))
        .collect();
    let mut snapshots = Vec::new();
    let mut missing = Vec::new();
    for raw in &data.snapshots {
        let Some(question) = questions.get(raw.question_id.as_str()) else {
            continue;
        };
        if let Some(range) = range
            && (raw.captured_on < range.from || raw.captured_on > range.to)
        {
            continue;
        }
        if raw.answer.trim().is_empty() {
            missing.push(raw.id.clone());
            continue;
        }
        let mentions = wanted
            .brands
            .iter()
            .map(|brand| (brand.clone(), count_mentions(&raw.answer, brand)))
            .filter(|(_, count)| *count > 0)
            .collect();
        snapshots.push(Snapshot {
            id: raw.id.clone(),
            topic: question.topic.clone(),
            region: question.region.clone(),
            question: question.text.clone(),
            engine: raw.engine.clone(),
            captured_on: raw.captured_on.clone(),
            answer: raw.answer.clone(),
            mentions,
        });
    }
    AiAnswerSnapshots {
        focus_brand: wanted.focus_brand.clone(),
        brands: wanted.brands.clone(),
        snapshots,
        missing,
    }
}

/// Whole-word, case-insensitive occurrences of `brand` in `text` ("Acme's" counts,
/// "Acmeware" does not).
#[must_use]
pub fn count_mentions(text: &str, brand: &str) -> u32 {
    let text = text.to_lowercase();
    let brand = brand.trim().to_lowercase();
    if brand.is_empty() {
        return 0;
    }
    let mut count = 0;
    let mut from = 0;
    while let Some(found) = text[from..].find(&brand) {
        let start = from + found;
        let end = start + brand.len();
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        if boundary(before) && boundary(after) {
            count += 1;
        }
        from = end;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payloads::{Constraints, Scope, TimeRange};

    #[test]
    fn mentions_are_whole_words_and_case_insensitive() {
        assert_eq!(count_mentions("Acme, acme's and ACME!", "Acme"), 3);
        assert_eq!(count_mentions("Acmeware is not Acme", "Acme"), 1);
        assert_eq!(count_mentions("nothing here", "Acme"), 0);
        assert_eq!(count_mentions("Globex Desk", "globex desk"), 1);
    }

    fn scope(topics: &[&str], regions: &[&str], range: Option<TimeRange>) -> ValidatedScope {
        ValidatedScope {
            validated_scope: Scope {
                focus_brand: "Acme".into(),
                brands: vec!["Acme".into(), "Globex".into(), "Initech".into()],
                topics: topics.iter().map(|s| (*s).to_owned()).collect(),
                regions: regions.iter().map(|s| (*s).to_owned()).collect(),
            },
            constraints: Constraints { time_range: range },
            warnings: Vec::new(),
        }
    }

    #[test]
    fn collects_the_snapshots_in_scope_from_the_bundled_data() {
        let data: DataSet = serde_json::from_str(DATA_SET).expect("the data set parses");
        let observed = collect(&scope(&["crm for startups"], &["US"], None), &data);
        let ids: Vec<&str> = observed.snapshots.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["s01", "s02", "s03"]);
        // s01: "Globex CRM ... Initech ...; Globex also ..."
        assert_eq!(
            observed.snapshots[0].mentions,
            BTreeMap::from([("Globex".to_owned(), 2), ("Initech".to_owned(), 1)])
        );
    }

    #[test]
    fn empty_answers_are_listed_as_missing_and_time_range_filters() {
        let data: DataSet = serde_json::from_str(DATA_SET).expect("the data set parses");
        let observed = collect(&scope(&["email marketing"], &["EU"], None), &data);
        assert_eq!(observed.missing, ["s12"]);
        assert_eq!(observed.snapshots.len(), 2);
        let window = TimeRange {
            from: "2026-01-14".into(),
            to: "2026-01-31".into(),
        };
        let observed = collect(&scope(&["email marketing"], &["EU"], Some(window)), &data);
        assert!(observed.snapshots.is_empty());
    }
}
