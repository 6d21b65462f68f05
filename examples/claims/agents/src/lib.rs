//! The agents of docket's claims example (seed 001's multi-agent context controls):
//! Intake captures a claim, Coverage checks the policy, Fraud scores the risk,
//! Recommendation decides approve / deny / investigate, and for injury claims a privacy
//! desk refers the claim to a third-party medical reviewer. What each of them sees is
//! decided by the bundle's handoff rules (examples/claims/README.md), not by the agents.
//!
//! Each agent is a pure function from request to response; every computation is
//! deterministic (no clock, ordered maps).

use docket_protocol::{Action, AgentRequest, AgentResponse, Confidence};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The agents, by the name the binary takes.
pub const AGENTS: [&str; 6] = [
    "intake",
    "coverage",
    "fraud",
    "recommendation",
    "privacy-desk",
    "reviewer",
];

/// The agent function for a name of [`AGENTS`].
pub fn agent(name: &str) -> Option<fn(&AgentRequest) -> AgentResponse> {
    Some(match name {
        "intake" => intake,
        "coverage" => coverage,
        "fraud" => fraud,
        "recommendation" => recommendation,
        "privacy-desk" => privacy_desk,
        "reviewer" => reviewer,
        _ => return None,
    })
}

/// A claim as submitted (the run's input, output type `claim_submission`).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Submission {
    pub claim: Claim,
    pub claimant: Claimant,
    pub policy: Policy,
    #[serde(default)]
    pub prior_claims: u32,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Claim {
    pub id: String,
    /// `auto_collision`, `auto_glass`, `injury`...
    #[serde(rename = "type")]
    pub kind: String,
    pub amount: u64,
    pub incident_date: String,
    pub reported_date: String,
    pub description: String,
    /// A request to handle the claim outside the normal flow (the enforcement scenario).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub special_handling: Option<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Claimant {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssn_last4: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medical_history: Option<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Policy {
    pub number: String,
    pub start_date: String,
    pub coverage_limit: u64,
    pub deductible: u64,
    pub covers: Vec<String>,
}

type Outcome = Result<Action, (&'static str, String)>;

fn respond(request: &AgentRequest, outcome: Outcome) -> AgentResponse {
    match outcome {
        Ok(action) => {
            AgentResponse::success(request.request_id.clone(), Confidence::High, vec![action])
        }
        Err((code, message)) => AgentResponse::error(request.request_id.clone(), code, message),
    }
}

fn handoff(to: &str, output_type: &str, payload: Value) -> Action {
    Action::Handoff {
        to: to.into(),
        output_type: output_type.to_owned(),
        payload,
        task: None,
    }
}

/// The decision input of `output_type`, parsed.
fn input<T: DeserializeOwned>(
    request: &AgentRequest,
    output_type: &str,
) -> Result<T, (&'static str, String)> {
    let found = request
        .decision_inputs
        .iter()
        .find(|i| i.output_type == output_type)
        .ok_or_else(|| {
            (
                "INPUT_MISSING_DECISION_INPUT",
                format!("expected a decision input of output type {output_type}"),
            )
        })?;
    T::deserialize(&*found.payload).map_err(|e| {
        (
            "INPUT_INVALID_PAYLOAD",
            format!("the {output_type} decision input is malformed: {e}"),
        )
    })
}

fn has_input(request: &AgentRequest, output_type: &str) -> bool {
    request
        .decision_inputs
        .iter()
        .any(|i| i.output_type == output_type)
}

/// A read-only context input of `output_type` (a prior output), if present, as its
/// producer wrote it.
fn context(request: &AgentRequest, output_type: &str) -> Option<Value> {
    request
        .context_inputs
        .iter()
        .find(|i| i.output_type == output_type || i.output_type == format!("prior:{output_type}"))
        .map(|i| unrecast(&i.payload).clone())
}

/// A payload recast as a message (`{role, content, source_agent_id}`, docs/governance.md
/// "Translation and token budgets") is read through to its content.
fn unrecast(payload: &Value) -> &Value {
    match (payload.get("role"), payload.get("content")) {
        (Some(_), Some(content)) => content,
        _ => payload,
    }
}

/// Intake: records the claim for everyone downstream. Its output is shared in full
/// (rule `intake_to_any_full`), so it keeps only the last four digits of the SSN.
pub fn intake(request: &AgentRequest) -> AgentResponse {
    let outcome = input::<Submission>(request, "claim_submission").map(|mut s| {
        let ssn = s.claimant.ssn.take().unwrap_or_default();
        s.claimant.ssn_last4 = Some(
            ssn.chars()
                .rev()
                .take(4)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect(),
        );
        handoff(
            "coverage_agent",
            "claim_record",
            json!({
                "claim": s.claim,
                "claimant": s.claimant,
                "policy": s.policy,
                "prior_claims": s.prior_claims,
                "trigger": "claim_received",
                "metadata": { "claim_id": s.claim.id, "channel": "web" },
            }),
        )
    });
    respond(request, outcome)
}

/// Coverage: is the claim's type covered, and what would be paid.
pub fn coverage(request: &AgentRequest) -> AgentResponse {
    let outcome = input::<Submission>(request, "claim_record").map(|s| {
        let covered = s.policy.covers.contains(&s.claim.kind);
        let payable = if covered {
            s.claim
                .amount
                .min(s.policy.coverage_limit)
                .saturating_sub(s.policy.deductible)
        } else {
            0
        };
        handoff(
            "fraud_agent",
            "coverage_assessment",
            json!({
                "claim": s.claim,
                "coverage": {
                    "covered": covered,
                    "payable": payable,
                    "coverage_limit": s.policy.coverage_limit,
                    "deductible": s.policy.deductible,
                    "policy_number": s.policy.number,
                    "policy_start_date": s.policy.start_date,
                    "prior_claims": s.prior_claims,
                },
                "claimant": s.claimant,
            }),
        )
    });
    respond(request, outcome)
}

/// Days from 1970-01-01 of a `YYYY-MM-DD` date (Howard Hinnant's `days_from_civil`).
fn days(date: &str) -> Option<i64> {
    let mut parts = date.splitn(3, '-').map(str::parse::<i64>);
    let (y, m, d) = (
        parts.next()?.ok()?,
        parts.next()?.ok()?,
        parts.next()?.ok()?,
    );
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// Fraud: a rule-based score with its indicators, plus notes for investigators only.
pub fn fraud(request: &AgentRequest) -> AgentResponse {
    #[derive(Deserialize)]
    struct Assessed {
        claim: Claim,
        coverage: Value,
    }
    let outcome = input::<Assessed>(request, "coverage_assessment").and_then(|a| {
        let at = |d: &str| days(d).ok_or(("INPUT_INVALID_PAYLOAD", format!("{d:?} is not a date (YYYY-MM-DD)")));
        let incident = at(&a.claim.incident_date)?;
        let reported = at(&a.claim.reported_date)?;
        let start = at(a.coverage["policy_start_date"].as_str().unwrap_or_default())?;
        let limit = a.coverage["coverage_limit"].as_u64().unwrap_or(0);
        let prior = a.coverage["prior_claims"].as_u64().unwrap_or(0);
        let mut score = 0.05;
        let mut indicators = Vec::new();
        if incident - start < 90 {
            score += 0.35;
            indicators.push("incident_within_90_days_of_policy_start");
        }
        if limit > 0 && a.claim.amount * 10 > limit * 8 {
            score += 0.25;
            indicators.push("amount_near_coverage_limit");
        }
        if reported - incident > 30 {
            score += 0.15;
            indicators.push("reported_more_than_30_days_late");
        }
        if prior > 0 {
            score += 0.15 * prior.min(2) as f64;
            indicators.push("prior_claims");
        }
        let score = (score * 100.0_f64).round() / 100.0;
        let risk = if score < 0.3 { "low" } else if score < 0.6 { "medium" } else { "high" };
        let assessment = json!({
            "fraud_score": score,
            "fraud_indicators": indicators,
            "risk_level": risk,
            "internal_notes": format!("Adjuster memo on {}: claimant sounded rehearsed on the phone; check the body shop invoice.", a.claim.id),
            "investigator_comments": "Do not disclose the scoring rules to the claimant.",
            "model_version": "claims-rules-2026.11",
        });
        // The enforcement scenario: the claim asks for the investigation to be shared
        // with the third party directly, which the bundle does not allow.
        if a.claim.special_handling.as_deref() == Some("share_investigation_with_reviewer") {
            return Ok(handoff("external_agent", "fraud_assessment", assessment));
        }
        Ok(handoff("recommendation_agent", "fraud_assessment", assessment))
    });
    respond(request, outcome)
}

/// The value of `name` in a summary of `path: value` lines (docs/governance.md,
/// "Translation and token budgets").
fn summary_value<'a>(summary: &'a str, name: &str) -> Option<&'a str> {
    summary
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(": "))
}

/// Recommendation: approve, deny or investigate; injury claims go to a third-party
/// medical review first, through the privacy desk.
pub fn recommendation(request: &AgentRequest) -> AgentResponse {
    let claim = context(request, "claim_record").unwrap_or(Value::Null);
    let coverage = context(request, "coverage_assessment").unwrap_or(Value::Null);
    let claim_id = claim["claim"]["id"]
        .as_str()
        .unwrap_or("unknown")
        .to_owned();
    let covered = coverage["coverage"]["covered"].as_bool();
    let payable = coverage["coverage"]["payable"].as_u64().unwrap_or(0);
    let outcome = if has_input(request, "review_result") {
        input::<Value>(request, "review_result").map(|review| {
            let review = unrecast(&review);
            let consistent = review["outcome"] == "consistent_with_claim";
            let decision = match (covered, consistent) {
                (Some(true), true) => "approve",
                (Some(true), false) => "investigate",
                _ => "deny",
            };
            Action::Finish {
                output: json!({
                    "claim_id": claim_id,
                    "recommendation": decision,
                    "payable": if decision == "approve" { payable } else { 0 },
                    "reasons": [format!("third-party medical review: {}", review["outcome"].as_str().unwrap_or("none"))],
                }),
            }
        })
    } else {
        input::<Value>(request, "fraud_assessment").map(|fraud| {
            // What crossed the handoff (rule fraud_to_recommendation_scoped) is the score,
            // the indicators and the risk level, recast as a system message, or their
            // summary as `path: value` lines when they exceed the token budget.
            let fraud = unrecast(&fraud);
            let (risk, score) = match fraud["summary"].as_str() {
                Some(text) => (
                    summary_value(text, "risk_level").unwrap_or("unknown").to_owned(),
                    summary_value(text, "fraud_score").unwrap_or("?").to_owned(),
                ),
                None => (
                    fraud["risk_level"].as_str().unwrap_or("unknown").to_owned(),
                    fraud["fraud_score"].to_string(),
                ),
            };
            if claim["claim"]["type"] == "injury" && covered == Some(true) {
                return handoff("sensitive_agent", "review_referral", json!({
                    "trigger": "independent_medical_review",
                    "metadata": { "claim_id": claim_id, "claim_type": "injury", "risk_level": risk },
                    "fraud_score": score,
                }));
            }
            let decision = match (covered, risk.as_str()) {
                (Some(false), _) => "deny",
                (Some(true), "low") => "approve",
                _ => "investigate",
            };
            Action::Finish {
                output: json!({
                    "claim_id": claim_id,
                    "recommendation": decision,
                    "payable": if decision == "approve" { payable } else { 0 },
                    "reasons": [
                        format!("covered: {}", covered.map_or("unknown".into(), |c| c.to_string())),
                        format!("fraud risk {risk} (score {score})"),
                    ],
                }),
            }
        })
    };
    respond(request, outcome)
}

/// The privacy desk: the only agent that may talk to the third-party reviewer, and only
/// in minimal mode (rule `sensitive_to_external_minimal`): the reviewer gets the trigger
/// and the metadata, never the claimant or the medical history.
pub fn privacy_desk(request: &AgentRequest) -> AgentResponse {
    let claim = context(request, "claim_record").unwrap_or(Value::Null);
    let outcome = input::<Value>(request, "review_referral").map(|referral| {
        // Everything the reviewer would need, written out in full: the minimal mode of
        // the handoff decides what actually leaves.
        handoff(
            "external_agent",
            "review_request",
            json!({
                "trigger": referral["trigger"],
                "metadata": referral["metadata"],
                "claimant": claim["claimant"],
                "medical_history": claim["claimant"]["medical_history"],
                "description": claim["claim"]["description"],
            }),
        )
    });
    respond(request, outcome)
}

/// The third-party medical reviewer, outside the trust boundary.
pub fn reviewer(request: &AgentRequest) -> AgentResponse {
    let outcome = input::<Value>(request, "review_request").map(|req| {
        handoff("recommendation_agent", "review_result", json!({
            "claim_id": req["metadata"]["claim_id"],
            "reviewer": "Northwind Independent Medical Review",
            "outcome": "consistent_with_claim",
            "fields_received": req.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default(),
        }))
    });
    respond(request, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_count_days_from_the_epoch() {
        assert_eq!(days("1970-01-01"), Some(0));
        assert_eq!(
            days("2026-11-24")
                .zip(days("2026-10-25"))
                .map(|(a, b)| a - b),
            Some(30)
        );
        assert_eq!(
            days("2024-03-01")
                .zip(days("2024-02-28"))
                .map(|(a, b)| a - b),
            Some(2)
        );
        assert_eq!(days("not a date"), None);
    }

    #[test]
    fn summary_values_are_read_back_from_their_lines() {
        let text = "fraud_indicators: prior_claims\nfraud_score: 0.2\nrisk_level: low";
        assert_eq!(summary_value(text, "risk_level"), Some("low"));
        assert_eq!(summary_value(text, "fraud_score"), Some("0.2"));
        assert_eq!(summary_value(text, "missing"), None);
    }

    #[test]
    fn every_named_agent_exists() {
        for name in AGENTS {
            assert!(agent(name).is_some(), "{name}");
        }
        assert!(agent("nobody").is_none());
    }
}
