//! Governance: checkpoint 1 (validate the analysis request, hand a validated scope to
//! Observation) and checkpoint 2 (validate Strategy's recommendations, finish the run).

use docket_protocol::{Action, AgentRequest, AgentResponse};
use serde::Deserialize;
use serde_json::Value;

use crate::Failure;
use crate::answer::{decision_input, handoff, respond};
use crate::payloads::{
    AnalysisRequest, Constraints, Recommendation, Recommendations, Scope, ValidatedRecommendations,
    ValidatedScope, agents, output_types,
};

/// Entry or exit checkpoint, chosen by the decision input it receives.
pub fn handle(request: &AgentRequest) -> AgentResponse {
    let has = |output_type: &str| {
        request
            .decision_inputs
            .iter()
            .any(|input| input.output_type == output_type)
    };
    let outcome = if has(output_types::RECOMMENDATIONS) {
        validate_recommendations(request)
    } else if has(output_types::ANALYSIS_REQUEST) {
        validate_request(request)
    } else {
        Err(Failure::new(
            "INPUT_MISSING_DECISION_INPUT",
            "governance expects an analysis_request or a recommendations decision input",
        ))
    };
    respond(request, outcome)
}

/// Checkpoint 1.
fn validate_request(request: &AgentRequest) -> Result<(Action, Vec<String>), Failure> {
    let analysis: AnalysisRequest = decision_input(request, output_types::ANALYSIS_REQUEST)?;
    let mut warnings = Vec::new();
    let brands = dedup("brands", &analysis.brands, &mut warnings)?;
    let topics = dedup("topics", &analysis.topics, &mut warnings)?;
    let regions = dedup("regions", &analysis.regions, &mut warnings)?;
    if brands.len() < 2 {
        return Err(Failure::new(
            "INPUT_VALIDATION_FAILED",
            "brands must name the focus brand and at least one competitor",
        ));
    }
    if let Some(range) = &analysis.time_range
        && range.from > range.to
    {
        return Err(Failure::new(
            "INPUT_VALIDATION_FAILED",
            format!("timeRange runs backwards: {} > {}", range.from, range.to),
        ));
    }
    let scope = ValidatedScope {
        validated_scope: Scope {
            focus_brand: brands[0].clone(),
            brands,
            topics,
            regions,
        },
        constraints: Constraints {
            time_range: analysis.time_range,
        },
        warnings: warnings.clone(),
    };
    Ok((
        handoff(agents::OBSERVATION, output_types::VALIDATED_SCOPE, &scope),
        warnings,
    ))
}

/// Trimmed, non-empty, without duplicates (case-insensitive), in the given order.
fn dedup(
    field: &str,
    values: &[String],
    warnings: &mut Vec<String>,
) -> Result<Vec<String>, Failure> {
    let mut kept: Vec<String> = Vec::new();
    for value in values {
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        if kept.iter().any(|k| k.eq_ignore_ascii_case(value)) {
            warnings.push(format!("duplicate {field} entry {value:?} ignored"));
        } else {
            kept.push(value.to_owned());
        }
    }
    if kept.is_empty() {
        return Err(Failure::new(
            "INPUT_VALIDATION_FAILED",
            format!("{field} must name at least one entry"),
        ));
    }
    Ok(kept)
}

/// Checkpoint 2: every recommendation cites a gap, says what to do and why; nothing else
/// rides along. A recommendation carrying anything else (questions to sample, say) is
/// rejected (`RECOMMENDATION_REJECTED`), which the bundle's ladder retries up to its hard
/// stop (Guardrail 1); a malformed or empty set is a validation error, which stops the
/// flow at once.
fn validate_recommendations(request: &AgentRequest) -> Result<(Action, Vec<String>), Failure> {
    let raw: Value = decision_input(request, output_types::RECOMMENDATIONS)?;
    reject_extra_fields(&raw)?;
    let proposed = Recommendations::deserialize(&raw).map_err(|err| {
        Failure::new(
            "INPUT_INVALID_PAYLOAD",
            format!("the recommendations decision input is malformed: {err}"),
        )
    })?;
    if proposed.recommendations.is_empty() {
        return Err(Failure::new(
            "VALIDATION_NO_RECOMMENDATIONS",
            "strategy produced no recommendations",
        ));
    }
    let mut problems = Vec::new();
    for rec in &proposed.recommendations {
        for (field, value) in [
            ("gap_id", &rec.gap_id),
            ("action", &rec.action),
            ("rationale", &rec.rationale),
        ] {
            if value.trim().is_empty() {
                problems.push(format!("{}: {field} is empty", rec.id));
            }
        }
    }
    if !problems.is_empty() {
        return Err(Failure::new(
            "VALIDATION_RECOMMENDATION_REJECTED",
            problems.join("; "),
        ));
    }
    let validated = ValidatedRecommendations {
        recommendations: proposed.recommendations,
        warnings: Vec::new(),
        status: "validated".to_owned(),
    };
    let output = serde_json::to_value(&validated).unwrap_or_default();
    Ok((Action::Finish { output }, Vec::new()))
}

/// Rejects recommendations with fields a recommendation does not have, naming each;
/// questions to sample get Guardrail 3's reason.
fn reject_extra_fields(raw: &Value) -> Result<(), Failure> {
    let items = raw
        .get("recommendations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let (mut questions, mut others) = (Vec::new(), Vec::new());
    for (i, item) in items.iter().enumerate() {
        let Some(fields) = item.as_object() else {
            continue;
        };
        let id = fields
            .get("id")
            .and_then(Value::as_str)
            .map_or_else(|| format!("recommendation {}", i + 1), str::to_owned);
        for field in fields.keys() {
            if Recommendation::FIELDS.contains(&field.as_str()) {
                continue;
            }
            let found = format!("{id}.{field}");
            if field.contains("question") {
                questions.push(found);
            } else {
                others.push(found);
            }
        }
    }
    let mut problems = Vec::new();
    if !questions.is_empty() {
        problems.push(format!(
            "recommendations suggest questions to sample ({}): question generation belongs \
             to Observation alone, and more questions take a new analysis request (Guardrail 3)",
            questions.join(", ")
        ));
    }
    if !others.is_empty() {
        problems.push(format!(
            "fields a recommendation does not have: {}",
            others.join(", ")
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::new("RECOMMENDATION_REJECTED", problems.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_decider::ValidateResponse;
    use docket_protocol::ResponseStatus;
    use serde_json::json;

    fn entry(payload: serde_json::Value) -> AgentRequest {
        AgentRequest::new("r1", "external", agents::GOVERNANCE, "GOVERNANCE_VALIDATE")
            .in_run("run", "ep", "c")
            .with_decision_input("external", output_types::ANALYSIS_REQUEST, payload)
    }

    #[test]
    fn a_valid_request_becomes_a_scope_for_observation() {
        let response = handle(&entry(json!({
            "topics": ["crm for startups", "crm for startups"],
            "brands": ["Acme", "Globex"],
            "regions": ["US"]
        })));
        // A duplicate ignored is warned about; the scope is still whole (seed 000 refuses
        // partial outputs).
        assert_eq!(response.status, ResponseStatus::Success);
        assert_eq!(response.warnings.len(), 1, "duplicate topic warned");
        let Some(Action::Handoff {
            to,
            output_type,
            payload,
            task: None,
        }) = response.actions.first()
        else {
            panic!("expected a handoff: {response:?}");
        };
        assert_eq!(to, agents::OBSERVATION);
        assert_eq!(output_type, output_types::VALIDATED_SCOPE);
        assert_eq!(payload["validatedScope"]["focus_brand"], "Acme");
        assert_eq!(
            payload["validatedScope"]["topics"],
            json!(["crm for startups"])
        );
        assert_eq!(response.validate(), Ok(()));
    }

    #[test]
    fn a_request_without_competitors_is_refused() {
        let response = handle(&entry(json!({
            "topics": ["crm"], "brands": ["Acme"], "regions": ["US"]
        })));
        assert_eq!(response.status, ResponseStatus::Error);
        assert_eq!(
            response.error_code.as_deref(),
            Some("INPUT_VALIDATION_FAILED")
        );
    }

    #[test]
    fn a_recommendation_has_exactly_the_fields_the_checkpoint_knows() {
        let rec = Recommendation {
            id: "rec-1".into(),
            gap_id: "gap-1".into(),
            priority: crate::Priority::High,
            topic: "crm".into(),
            action: "a".into(),
            rationale: "r".into(),
            expected_impact: "e".into(),
        };
        let value = serde_json::to_value(rec).expect("serialises");
        let mut fields: Vec<&str> = value
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut known = Recommendation::FIELDS.to_vec();
        fields.sort_unstable();
        known.sort_unstable();
        assert_eq!(fields, known);
    }

    #[test]
    fn recommendations_with_extra_fields_are_refused() {
        let request = AgentRequest::new("r2", agents::STRATEGY, agents::GOVERNANCE, "G")
            .with_decision_input(
                agents::STRATEGY,
                output_types::RECOMMENDATIONS,
                json!({"recommendations": [{
                    "id": "rec-1", "gap_id": "gap-1", "priority": "HIGH", "topic": "crm",
                    "action": "a", "rationale": "r", "expected_impact": "e",
                    "questions_to_sample": ["is Acme good?"]
                }]}),
            );
        let response = handle(&request);
        assert_eq!(response.status, ResponseStatus::Error);
        assert_eq!(
            response.error_code.as_deref(),
            Some("RECOMMENDATION_REJECTED")
        );
        assert!(
            response.error_message.as_deref().is_some_and(|m| m
                .contains("questions to sample (rec-1.questions_to_sample)")
                && m.contains("Guardrail 3")),
            "{response:?}"
        );
    }
}
