//! The agents of docket's consulting example (seed 003, the inter-agent communication
//! contract): ORC classifies the user's intent and routes; CST frames the engagement and
//! asks ANL for a net present value through a capability request; ORC fans out to ANL
//! (a market projection), AUD (a reviewed market figure) and CHA (channels, which runs
//! out of time and answers with a partial result); DOC writes the business case; ORC
//! assembles the answer. When ORC cannot tell what the user wants (its confidence below
//! the threshold docket tells it), it asks.
//!
//! Each agent is a pure function from request to response; nothing reads a clock.

use docket_protocol::{
    Action, AgentRequest, AgentResponse, Confidence, IntentClassification, IntentTarget,
    ResponseStatus,
};
use serde_json::{Value, json};

/// The agents, by the name the binary takes.
pub const AGENTS: [&str; 9] = [
    "orc", "cst", "anl", "aud", "cha", "doc", "prf", "spo", "chg",
];

/// The agent function for a name of [`AGENTS`].
pub fn agent(name: &str) -> Option<fn(&AgentRequest) -> AgentResponse> {
    Some(match name {
        "orc" => orc,
        "cst" => cst,
        "anl" => anl,
        "aud" => aud,
        "cha" => cha,
        "doc" => doc,
        "prf" => prf,
        "spo" | "chg" => other_specialist,
        _ => return None,
    })
}

/// The threshold below which ORC asks the user what they meant (seed 003: handle
/// ambiguity) when its request does not say: docket's default. The bundle sets it
/// (`[intent_classification] confidence_threshold`), and docket tells ORC in its request
/// (`context.intent_classification`): see [`intent_threshold`].
pub const DEFAULT_INTENT_THRESHOLD: f64 = 0.7;

/// The confidence threshold ORC is held to: its request's
/// `context.intent_classification.confidence_threshold`, else [`DEFAULT_INTENT_THRESHOLD`].
pub fn intent_threshold(request: &AgentRequest) -> f64 {
    request
        .context
        .get("intent_classification")
        .and_then(|c| c["confidence_threshold"].as_f64())
        .unwrap_or(DEFAULT_INTENT_THRESHOLD)
}

/// Set (to anything) in ORC's environment, ORC routes even when unsure, until docket
/// refuses it: the drill of `hasty.toml`, where the bundle's intent classification
/// contract sends it back to ask the user.
pub const ORC_HASTY_ENV: &str = "CONSULTING_ORC_HASTY";

fn handoff(to: &str, output_type: &str, payload: Value) -> Action {
    Action::Handoff {
        to: to.into(),
        output_type: output_type.to_owned(),
        payload,
        task: None,
    }
}

fn ok(request: &AgentRequest, confidence: Confidence, actions: Vec<Action>) -> AgentResponse {
    AgentResponse::success(request.request_id.clone(), confidence, actions)
}

fn error(request: &AgentRequest, code: &str, message: impl Into<String>) -> AgentResponse {
    AgentResponse::error(request.request_id.clone(), code, message.into())
}

/// The payload of the decision input of `output_type`, read through a recast message.
fn input<'a>(request: &'a AgentRequest, output_type: &str) -> Option<&'a Value> {
    request
        .decision_inputs
        .iter()
        .find(|i| i.output_type == output_type)
        .map(
            |i| match (i.payload.get("role"), i.payload.get("content")) {
                (Some(_), Some(content)) => content,
                _ => &*i.payload,
            },
        )
}

/// A prior output (read-only context) of `output_type`.
fn prior<'a>(request: &'a AgentRequest, output_type: &str) -> Option<&'a Value> {
    let wanted = format!("prior:{output_type}");
    request
        .context_inputs
        .iter()
        .find(|i| i.output_type == wanted)
        .map(|i| &*i.payload)
}

/// Intent classification (seed 003's contract): the primary intent, its confidence and
/// the agent it maps to.
pub fn classify(message: &str) -> (&'static str, f64) {
    let m = message.to_lowercase();
    if m.contains("business case") || m.contains("market entry") {
        ("business_case", 0.85)
    } else if m.contains("channel") {
        ("channel_strategy", 0.8)
    } else {
        ("unclear", 0.4)
    }
}

/// The answer's sentence on the German market: the size of the estimate kept and what it
/// is (its `source`: a reviewed report or a projection), as the document carries them.
pub fn market_sentence(document: &Value) -> String {
    match (
        document["market_size"].as_f64(),
        document["market_source"].as_str(),
    ) {
        (Some(size), Some(source)) => format!("the German market is {size:.0} a year ({source})"),
        (Some(size), None) => format!("the German market is {size:.0} a year (source not given)"),
        (None, _) => "no estimate of the German market arrived".to_owned(),
    }
}

/// ORC: classifies, routes, fans out, aggregates; asks when unsure.
pub fn orc(request: &AgentRequest) -> AgentResponse {
    if let Some(document) = input(request, "document") {
        let result = &document["result_json"];
        // Proofreading last: PRF's capability, or, when PRF cannot be reached (its
        // circuit open, or failing past retrying), the answer as it is, saying so.
        let proofreading = match (
            input(request, "PRF_CHECK"),
            input(request, "capability_failed"),
        ) {
            (Some(check), _) => json!({ "checked": true, "issues": check["issues"] }),
            (None, Some(failed)) => json!({
                "checked": false,
                "why": format!("{}: {}", failed["error_code"].as_str().unwrap_or("FAILED"), failed["error_message"].as_str().unwrap_or_default()),
            }),
            (None, None) => {
                return ok(
                    request,
                    Confidence::High,
                    vec![Action::RequestCapability {
                        target_agent: "PRF".into(),
                        capability_code: "PRF_CHECK".into(),
                        inputs: json!({ "text": result["title"] })
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                        priority: None,
                    }],
                );
            }
        };
        return ok(
            request,
            Confidence::High,
            vec![Action::Finish {
                output: json!({
                    "answer": format!(
                        "Your business case \"{}\" is ready. The investment returns an NPV of {} at {}; {}; channels assessed: {}.",
                        result["title"].as_str().unwrap_or_default(),
                        result["npv"], result["discount_rate"], market_sentence(result),
                        result["channels"].as_array().map(|c| c.len()).unwrap_or(0)
                    ),
                    "document": result,
                    "limitations": result["limitations"],
                    "proofreading": proofreading,
                }),
            }],
        );
    }
    let market = input(request, "market_estimate");
    let channels = input(request, "channel_plan");
    if market.is_some() || channels.is_some() {
        // The join: every branch has answered (a conflict between market estimates was
        // settled by confidence before this call; the loser is archived in the log).
        let framework = prior(request, "framework").map(|f| f["result_json"].clone());
        let framework = framework.unwrap_or(Value::Null);
        let mut limitations: Vec<Value> = Vec::new();
        if let Some(c) = channels
            && let Some(w) = c["warnings"].as_array()
        {
            limitations.extend(w.iter().cloned());
        }
        return ok(
            request,
            Confidence::High,
            vec![handoff(
                "DOC",
                "document_request",
                json!({
                    "template_type": "business_case",
                    "title": "Market Entry Analysis: Germany",
                    "workflow_position": "Step 3 of 3 (Document)",
                    "npv": framework["npv"],
                    "discount_rate": framework["discount_rate"],
                    "scenarios": framework["scenarios"],
                    "market_size": market.map(|m| m["result_json"]["market_size"].clone()),
                    "market_source": market.map(|m| m["result_json"]["source"].clone()),
                    "channels": channels.map(|c| c["result_json"]["channels"].clone()),
                    "limitations": limitations,
                }),
            )],
        );
    }
    if let Some(framework) = input(request, "framework") {
        let budget = framework["constraints"]["budget_range"][1]
            .as_f64()
            .unwrap_or(0.0);
        let position = |step: &str| format!("Step 2 of 3 ({step})");
        return ok(
            request,
            Confidence::High,
            vec![
                handoff(
                    "ANL",
                    "projection_request",
                    json!({
                        "workflow_position": position("Market projection"),
                        "baseline": 3.1e9, "growth_rate": 0.05, "years": 3,
                    }),
                ),
                handoff(
                    "AUD",
                    "review_request",
                    json!({
                        "workflow_position": position("Market figure review"),
                        "document_ref": "destatis-2025-market-report",
                    }),
                ),
                handoff(
                    "CHA",
                    "channel_request",
                    json!({
                        "workflow_position": position("Channels"),
                        "market": "Germany", "budget": budget,
                    }),
                ),
            ],
        );
    }
    let Some(user) = input(request, "user_request") else {
        return error(
            request,
            "INPUT_MISSING_DECISION_INPUT",
            "ORC expects a user_request",
        );
    };
    // A later turn of the session (`docket send`): the user's follow-up, answered from
    // what the session already holds, without asking again what they told us.
    if let Some(follow_up) = user["message"].as_str()
        && let Some(session) = request
            .context
            .get("handoff")
            .and_then(|h| h.get("session"))
        && let Some(response) = follow_up_answer(request, user, session, follow_up)
    {
        return response;
    }
    let message = user["user_message"].as_str().unwrap_or_default();
    let (mut intent, mut confidence) = classify(message);
    let threshold = intent_threshold(request);
    // Told by docket that its last answer routed below the threshold, ORC asks instead.
    let refused = request
        .context
        .get("previous_attempt")
        .is_some_and(|p| p["error_code"] == "INTENT_POLICY_VIOLATION");
    let hasty = std::env::var_os(ORC_HASTY_ENV).is_some() && !refused;
    if confidence < threshold && hasty {
        // The drill: ORC routes its likeliest guess at the confidence it has.
        intent = "business_case";
    } else if confidence < threshold {
        match input(request, "human_answer") {
            None => {
                return ok(
                    request,
                    Confidence::Medium,
                    vec![Action::Escalate {
                        reason: "What would help you most with the German market: a business case for entering it, or a channel strategy?".into(),
                        choices: vec!["business case".into(), "channel strategy".into()],
                    }],
                )
                .with_intent(classification(intent, confidence, None));
            }
            Some(answer) => {
                // The user said what they want.
                intent = match answer["choice"].as_str() {
                    Some("channel strategy") => "channel_strategy",
                    _ => "business_case",
                };
                confidence = 1.0;
            }
        }
    }
    if intent != "business_case" {
        // No agent of this engagement takes it: a limitation acknowledged.
        return ok(
            request,
            Confidence::Medium,
            vec![Action::Finish {
                output: json!({ "answer": "Channel strategies are not part of this example; ask for a business case." }),
            }],
        )
        .with_intent(classification(intent, confidence, None));
    }
    // Route to CST with the handoff context of the contract; DOC writes the case later.
    ok(
        request,
        Confidence::High,
        vec![handoff(
            "CST",
            "engagement_brief",
            json!({
                "session_id": user["session_id"],
                "original_request": message,
                "workflow_position": "Step 1 of 3 (Financial framework)",
                "prior_agents": ["ORC"],
                "intent": { "primary_intent": intent, "intent_confidence": confidence, "target_agent": "CST", "target_capability": "CST_FRAMEWORK" },
                "constraints": user["constraints"],
                "financials": user["financials"],
            }),
        )],
    )
    .with_intent(classification(
        intent,
        confidence,
        Some(("CST", "CST_FRAMEWORK")),
    ))
}

/// ORC's answer to a follow-up in a later turn of the session (seed 003's conversation
/// context), read from `context.handoff.session`: the business case an earlier turn
/// delivered (`we_told`) is built on rather than computed again, and what the user chose
/// when asked (`decisions`) is not asked again. `None` when no earlier turn delivered a
/// business case: the follow-up is then routed as a new request.
pub fn follow_up_answer(
    request: &AgentRequest,
    user: &Value,
    session: &Value,
    follow_up: &str,
) -> Option<AgentResponse> {
    let (turn, case) = session["we_told"]
        .as_array()?
        .iter()
        .rev()
        .find_map(|t| Some((t["turn"].as_u64()?, t["output"]["document"].as_object()?)))?;
    let chosen = session["decisions"]
        .as_array()
        .and_then(|d| {
            d.iter()
                .rev()
                .find_map(|d| match (d["answer"].as_str(), d["choice"].as_u64()) {
                    (Some(words), _) => Some(format!("\"{words}\"")),
                    (None, Some(n)) => Some(format!("option {n}")),
                    _ => None,
                })
        })
        .map(|c| format!(" (you answered {c} when asked, so I do not ask again)"))
        .unwrap_or_default();
    let first_request = session["told_us"][0]["request"]["user_message"]
        .as_str()
        .unwrap_or_default();
    let npv = case.get("npv").and_then(Value::as_f64).unwrap_or(0.0);
    let budget = user["constraints"]["budget_range"][1]
        .as_f64()
        .unwrap_or(0.0);
    let share = if budget > 0.0 {
        npv / budget * 100.0
    } else {
        0.0
    };
    let answer = format!(
        "Building on your business case \"{}\" from turn {turn}{chosen}, answering \"{first_request}\": its NPV of {npv} is {share:.2}% of the upper end of your budget ({budget}). You asked: \"{follow_up}\".",
        case.get("title")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    Some(
        ok(
            request,
            Confidence::High,
            vec![Action::Finish {
                output: json!({
                    "answer": answer,
                    "builds_on": { "turn": turn, "npv": npv, "budget": budget },
                }),
            }],
        )
        .with_intent(classification("follow_up", 0.9, None)),
    )
}

/// ORC's intent classification (seed 003's INTENT CLASSIFICATION): the business case is
/// framed by CST and written up by DOC, its secondary intent.
fn classification(
    intent: &str,
    confidence: f64,
    target: Option<(&str, &str)>,
) -> IntentClassification {
    let writes_up = target.is_some();
    IntentClassification {
        primary_intent: intent.to_owned(),
        intent_confidence: confidence,
        target_agent: target.map(|(agent, _)| agent.into()),
        target_capability: target.map(|(_, capability)| capability.to_owned()),
        secondary_intents: if writes_up {
            vec!["document_generation".to_owned()]
        } else {
            Vec::new()
        },
        secondary_targets: if writes_up {
            vec![IntentTarget {
                agent: "DOC".into(),
                capability: Some("DOC_GENERATE".to_owned()),
            }]
        } else {
            Vec::new()
        },
    }
}

/// CST: frames the engagement; asks ANL for the NPV of the investment's cash flows.
pub fn cst(request: &AgentRequest) -> AgentResponse {
    let Some(brief) = input(request, "engagement_brief") else {
        return error(
            request,
            "INPUT_MISSING_DECISION_INPUT",
            "CST expects an engagement_brief",
        );
    };
    let scenarios = json!(["conservative", "base", "aggressive"]);
    let framework = |npv: Value, warnings: Vec<String>| {
        json!({
            "session_id": brief["session_id"],
            "original_request": brief["original_request"],
            "workflow_position": "Step 1 of 3 (Financial framework)",
            "prior_agents": ["ORC", "CST"],
            "constraints": brief["constraints"],
            "status": if warnings.is_empty() { "SUCCESS" } else { "PARTIAL" },
            "warnings": warnings,
            "result_json": {
                "framework": "market_entry_assessment",
                "scenarios": scenarios,
                "npv": npv,
                "discount_rate": brief["financials"]["discount_rate"],
            },
            "constraints_echo": brief["constraints"],
        })
    };
    if let Some(npv) = input(request, "ANL_NPV") {
        return ok(
            request,
            Confidence::High,
            vec![handoff(
                "ORC",
                "framework",
                framework(npv["npv"].clone(), Vec::new()),
            )],
        );
    }
    if let Some(failed) = input(request, "capability_failed") {
        let why = format!(
            "NPV unavailable: {}",
            failed["error_message"]
                .as_str()
                .unwrap_or("the analyst did not answer")
        );
        return ok(
            request,
            Confidence::Low,
            vec![handoff(
                "ORC",
                "framework",
                framework(Value::Null, vec![why]),
            )],
        );
    }
    let financials = &brief["financials"];
    ok(
        request,
        Confidence::High,
        vec![Action::RequestCapability {
            target_agent: "ANL".into(),
            capability_code: "ANL_NPV".into(),
            inputs: json!({
                "cash_flows": financials["cash_flows"],
                "discount_rate": financials["discount_rate"],
                "periods": "annual",
            })
            .as_object()
            .cloned()
            .unwrap_or_default(),
            priority: None,
        }],
    )
}

/// The net present value of `cash_flows` at `rate`, period 0 undiscounted, to the cent.
pub fn npv(cash_flows: &[f64], rate: f64) -> f64 {
    let value: f64 = cash_flows
        .iter()
        .enumerate()
        .map(|(t, cf)| cf / (1.0 + rate).powi(t as i32))
        .sum();
    (value * 100.0).round() / 100.0
}

/// ANL: the NPV capability, and a market projection (MEDIUM confidence: a model, not a
/// measurement).
pub fn anl(request: &AgentRequest) -> AgentResponse {
    if let Some(inputs) = input(request, "ANL_NPV") {
        let flows: Option<Vec<f64>> = inputs["cash_flows"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect());
        let (Some(flows), Some(rate)) = (flows, inputs["discount_rate"].as_f64()) else {
            return error(
                request,
                "INPUT_VALIDATION_FAILED",
                "cash_flows and discount_rate are required",
            );
        };
        if flows.len() < 2 {
            return error(
                request,
                "INPUT_VALIDATION_FAILED",
                "Cash flows array must contain at least two values (initial investment and one return period)",
            );
        }
        return ok(
            request,
            Confidence::High,
            vec![Action::Finish {
                output: json!({ "npv": npv(&flows, rate), "currency": "USD", "discount_rate": rate, "periods": flows.len() }),
            }],
        );
    }
    let Some(req) = input(request, "projection_request") else {
        return error(
            request,
            "INPUT_MISSING_DECISION_INPUT",
            "ANL expects ANL_NPV or a projection_request",
        );
    };
    let baseline = req["baseline"].as_f64().unwrap_or(0.0);
    let growth = req["growth_rate"].as_f64().unwrap_or(0.0);
    let years = req["years"].as_i64().unwrap_or(1) as i32;
    let size = (baseline * (1.0 + growth).powi(years)).round();
    ok(
        request,
        Confidence::Medium,
        vec![handoff(
            "ORC",
            "market_estimate",
            json!({
                "workflow_position": req["workflow_position"],
                "status": "SUCCESS",
                "confidence_level": "MEDIUM",
                "result_json": { "market_size": size, "source": format!("ANL's projection: the 2022 baseline grown {:.0} % a year for {years} years", growth * 100.0) },
            }),
        )],
    )
}

/// AUD: reviews the market figure of the report it is given (HIGH confidence: a
/// published figure, not a model).
pub fn aud(request: &AgentRequest) -> AgentResponse {
    let Some(req) = input(request, "review_request") else {
        return error(
            request,
            "INPUT_MISSING_DECISION_INPUT",
            "AUD expects a review_request",
        );
    };
    ok(
        request,
        Confidence::High,
        vec![handoff(
            "ORC",
            "market_estimate",
            json!({
                "workflow_position": req["workflow_position"],
                "status": "SUCCESS",
                "confidence_level": "HIGH",
                "result_json": { "market_size": 4.2e9, "source": format!("AUD's review of {}", req["document_ref"].as_str().unwrap_or_default()) },
            }),
        )],
    )
}

/// CHA: channels; its secondary source does not answer in time, so it answers TIMEOUT
/// with what it has (seed 003: include partial results, note what was not completed).
pub fn cha(request: &AgentRequest) -> AgentResponse {
    let Some(req) = input(request, "channel_request") else {
        return error(
            request,
            "INPUT_MISSING_DECISION_INPUT",
            "CHA expects a channel_request",
        );
    };
    let warning =
        "Partner-reseller data did not arrive in time: that channel is not assessed".to_owned();
    let mut response = AgentResponse::error(
        request.request_id.clone(),
        "CHANNEL_SOURCE_TIMEOUT",
        "the reseller survey did not answer within the time allowed",
    );
    response.status = ResponseStatus::Timeout;
    response.warnings = vec![warning.clone()];
    response.actions = vec![handoff(
        "ORC",
        "channel_plan",
        json!({
            "workflow_position": req["workflow_position"],
            "status": "TIMEOUT",
            "warnings": [warning],
            "result_json": {
                "market": req["market"],
                "channels": [
                    { "channel": "direct online", "share_of_budget": 0.5 },
                    { "channel": "trade fairs", "share_of_budget": 0.2 },
                ],
                "not_assessed": ["partner resellers"],
            },
        }),
    )];
    response
}

/// DOC: the business case document.
pub fn doc(request: &AgentRequest) -> AgentResponse {
    let Some(req) = input(request, "document_request") else {
        return error(
            request,
            "INPUT_MISSING_DECISION_INPUT",
            "DOC expects a document_request",
        );
    };
    ok(
        request,
        Confidence::High,
        vec![handoff(
            "ORC",
            "document",
            json!({
                "workflow_position": req["workflow_position"],
                "status": "SUCCESS",
                "result_json": {
                    "title": req["title"],
                    "template_type": req["template_type"],
                    "npv": req["npv"],
                    "discount_rate": req["discount_rate"],
                    "scenarios": req["scenarios"],
                    "market_size": req["market_size"],
                    "market_source": req["market_source"],
                    "channels": req["channels"],
                    "limitations": req["limitations"],
                    "sections": ["Executive summary", "Market", "Financials", "Channels", "Risks"],
                },
            }),
        )],
    )
}

/// Set (to anything) in PRF's environment, PRF fails every call: the outage drill of
/// `outage.toml`, which opens PRF's circuit breaker across runs.
pub const PRF_OUTAGE_ENV: &str = "CONSULTING_PRF_OUTAGE";

/// PRF: proofreads the document's text (`PRF_CHECK`).
pub fn prf(request: &AgentRequest) -> AgentResponse {
    if std::env::var_os(PRF_OUTAGE_ENV).is_some() {
        return error(
            request,
            "PROOFREADING_SERVICE_DOWN",
            "the proofreading service is down (outage drill)",
        );
    }
    match input(request, "PRF_CHECK") {
        Some(inputs) => ok(
            request,
            Confidence::High,
            vec![Action::Finish {
                output: json!({ "issues": 0, "checked_chars": inputs["text"].as_str().map_or(0, str::len) }),
            }],
        ),
        None => other_specialist(request),
    }
}

/// SPO and CHG: registered on the platform, not part of this engagement; they
/// answer what they are asked with a note saying so, back to ORC.
pub fn other_specialist(request: &AgentRequest) -> AgentResponse {
    let note = json!({
        "status": "SUCCESS",
        "result_json": { "note": format!("{} has nothing to add to this engagement", request.target_agent) },
    });
    ok(
        request,
        Confidence::Low,
        vec![handoff("ORC", "specialist_note", note)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npv_discounts_every_period_but_the_first() {
        // The seed's example: its 24,156.72 is wrong; 17,206.82 is right.
        let flows = [-100_000.0, 25_000.0, 35_000.0, 45_000.0, 55_000.0];
        assert_eq!(npv(&flows, 0.12), 17_206.82);
        assert_eq!(npv(&[-100.0, 110.0], 0.10), 0.0);
    }

    #[test]
    fn intents_are_classified_with_a_confidence() {
        assert_eq!(
            classify("Help me build a business case for market entry"),
            ("business_case", 0.85)
        );
        assert!(classify("I need help with Germany").1 < DEFAULT_INTENT_THRESHOLD);
    }

    #[test]
    fn the_answer_names_the_kept_market_estimate_for_what_it_is() {
        let projection = anl(&AgentRequest::new("r1", "ORC", "ANL", "projection_request")
            .with_decision_input(
                "ORC",
                "projection_request",
                json!({ "baseline": 3.1e9, "growth_rate": 0.05, "years": 3 }),
            ));
        let Some(Action::Handoff { payload, .. }) = projection.actions.first() else {
            panic!("ANL hands its projection on: {projection:?}");
        };
        let estimate = &payload["result_json"];
        let document = json!({
            "market_size": estimate["market_size"],
            "market_source": estimate["source"],
        });
        assert_eq!(
            market_sentence(&document),
            "the German market is 3588637500 a year (ANL's projection: the 2022 baseline grown 5 % a year for 3 years)"
        );
        assert_eq!(
            market_sentence(&json!({ "market_size": null })),
            "no estimate of the German market arrived"
        );
    }

    #[test]
    fn every_named_agent_exists() {
        for name in AGENTS {
            assert!(agent(name).is_some(), "{name}");
        }
        assert!(agent("XYZ").is_none());
    }
}
