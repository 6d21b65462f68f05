//! Properties of the agent protocol's wire format: every valid request and response
//! survives JSON unchanged, and no input bytes make parsing panic.

use docket_decider::{
    Action, AgentRequest, AgentResponse, Confidence, ContextInput, DecisionInput, Priority,
    ResponseStatus, TaskRestrictions, ToolCall, Usage, ValidateRequest, ValidateResponse,
    parse_response,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(".{0,8}", json_value(), 0..4).prop_map(|m| m.into_iter().collect())
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z_-]{0,12}"
}

fn request() -> impl Strategy<Value = AgentRequest> {
    let ids = (name(), name(), name(), name(), 1..10_u32);
    let routing = (name(), name(), "[A-Z]{2,6}_[A-Z]{2,8}", 1..600_000_u64);
    let priority = prop_oneof![
        Just(Priority::High),
        Just(Priority::Normal),
        Just(Priority::Low)
    ];
    let decision = prop::collection::vec(
        (name(), name(), json_value()).prop_map(|(source_agent, output_type, payload)| {
            DecisionInput::new(source_agent, output_type, payload.into())
        }),
        0..3,
    );
    let context = prop::collection::vec(
        (name(), name(), json_value()).prop_map(|(source_agent, output_type, payload)| {
            ContextInput {
                source_agent: source_agent.into(),
                output_type,
                payload: payload.into(),
            }
        }),
        0..3,
    );
    (
        ids,
        routing,
        priority,
        json_object(),
        decision,
        context,
        proptest::option::of(task()),
    )
        .prop_map(
            |(
                (request_id, correlation_id, run_id, episode_id, attempt),
                (source_agent, target_agent, capability_code, timeout_ms),
                priority,
                context,
                decision_inputs,
                context_inputs,
                task,
            )| AgentRequest {
                request_id: request_id.into(),
                correlation_id,
                run_id: run_id.into(),
                episode_id: episode_id.into(),
                attempt,
                source_agent: source_agent.into(),
                target_agent: target_agent.into(),
                capability_code,
                timeout_ms,
                priority,
                context,
                decision_inputs,
                context_inputs,
                task,
            },
        )
}

/// A handoff's task: an id and a few tool patterns it forbids.
fn task() -> impl Strategy<Value = TaskRestrictions> {
    (
        name(),
        proptest::collection::vec("[A-Z][a-z]{1,6}(\\([a-z *]{0,8}\\))?", 0..3),
    )
        .prop_map(|(id, denied_tools)| TaskRestrictions { id, denied_tools })
}

fn non_finish_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        (name(), name(), json_value(), proptest::option::of(task())).prop_map(
            |(to, output_type, payload, task)| Action::Handoff {
                to: to.into(),
                output_type,
                payload,
                task,
            }
        ),
        (name(), "[A-Z]{2,6}_[A-Z]{2,8}", json_object()).prop_map(
            |(target_agent, capability_code, inputs)| Action::RequestCapability {
                target_agent: target_agent.into(),
                capability_code,
                inputs,
                priority: None
            }
        ),
        (
            "[a-z ]{0,20}[a-z]",
            prop::collection::vec("[a-z]{1,8}", 0..3)
        )
            .prop_map(|(reason, choices)| Action::Escalate { reason, choices }),
        // Side effects
        (name(), name(), prop::option::of(name()), json_value()).prop_map(
            |(kind, lane, idempotency_key, params)| Action::RequestEffect {
                kind,
                lane,
                idempotency_key,
                params,
                not_before: None,
            }
        ),
    ]
}

fn actions() -> impl Strategy<Value = Vec<Action>> {
    (
        prop::collection::vec(non_finish_action(), 0..4),
        prop::option::of(json_value()),
    )
        .prop_map(|(mut actions, finish)| {
            if let Some(output) = finish {
                actions.push(Action::Finish { output });
            }
            actions
        })
}

fn confidence() -> impl Strategy<Value = Confidence> {
    prop_oneof![
        Just(Confidence::High),
        Just(Confidence::Medium),
        Just(Confidence::Low),
        Just(Confidence::Speculative)
    ]
}

/// Responses that follow every protocol rule, for each status.
fn valid_response() -> impl Strategy<Value = AgentResponse> {
    let status = prop_oneof![
        Just(ResponseStatus::Success),
        Just(ResponseStatus::Partial),
        Just(ResponseStatus::Error),
        Just(ResponseStatus::Timeout),
    ];
    let tool_calls = prop::collection::vec(
        (name(), ".{0,16}").prop_map(|(name, arguments)| ToolCall { name, arguments }),
        0..3,
    );
    let extra = (0..5_u32, any::<u32>(), any::<u32>());
    (
        name(),
        status,
        confidence(),
        actions(),
        tool_calls,
        extra,
        prop::collection::vec("[a-z]{1,10}", 0..3),
        json_object(),
    )
        .prop_map(
            |(
                request_id,
                status,
                confidence,
                mut actions,
                tool_calls,
                extra,
                warnings,
                metadata,
            )| {
                let (more_calls, input_tokens, output_tokens) = extra;
                let usage = Usage {
                    input_tokens: u64::from(input_tokens),
                    output_tokens: u64::from(output_tokens),
                    tool_calls: tool_calls.len() as u32 + more_calls,
                };
                let (confidence_level, error_code, error_message) = match status {
                    ResponseStatus::Success | ResponseStatus::Partial => {
                        (Some(confidence), None, None)
                    }
                    ResponseStatus::Error => {
                        actions.clear();
                        (
                            None,
                            Some("DATA_MISSING_INPUT".to_owned()),
                            Some("no input".to_owned()),
                        )
                    }
                    ResponseStatus::Timeout => (None, None, Some("ran out of time".to_owned())),
                };
                if status == ResponseStatus::Success && actions.is_empty() {
                    actions.push(Action::Finish {
                        output: Value::Null,
                    });
                }
                AgentResponse {
                    request_id: request_id.into(),
                    status,
                    confidence_level,
                    warnings,
                    error_code,
                    error_message,
                    usage,
                    tool_calls,
                    actions,
                    metadata,
                    intent: None,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn requests_round_trip_through_json_unchanged(request in request()) {
        prop_assert_eq!(request.validate(), Ok(()));
        let text = serde_json::to_string(&request).expect("serialises");
        let back: AgentRequest = serde_json::from_str(&text).expect("parses");
        prop_assert_eq!(back, request);
    }

    #[test]
    fn valid_responses_round_trip_through_json_unchanged(response in valid_response()) {
        prop_assert_eq!(response.validate(), Ok(()));
        let text = serde_json::to_string(&response).expect("serialises");
        prop_assert!(!text.contains('\n'), "one response is one line");
        let back = parse_response(text.as_bytes()).expect("parses");
        prop_assert_eq!(back.validate(), Ok(()));
        prop_assert_eq!(back, response);
    }

    #[test]
    fn parsing_any_bytes_returns_instead_of_panicking(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_response(&bytes);
    }

    #[test]
    fn parsing_mangled_responses_returns_instead_of_panicking(
        response in valid_response(),
        cut in any::<prop::sample::Index>(),
    ) {
        let text = serde_json::to_string(&response).expect("serialises");
        let end = cut.index(text.len().max(1));
        if let Ok(parsed) = parse_response(&text.as_bytes()[..end]) {
            // Only the whole document (or it minus trailing whitespace) can parse.
            prop_assert_eq!(parsed, response);
        }
    }
}

mod documented_examples {
    use docket_decider::{AgentRequest, ValidateRequest, ValidateResponse, parse_response};
    use docket_tests::{agent_protocol_doc, doc_example};

    #[test]
    fn the_documented_request_and_response_are_valid_and_belong_together() {
        let doc = agent_protocol_doc();
        let request_text = doc_example(&doc, "request").expect("the doc has a request example");
        let response_text = doc_example(&doc, "response").expect("the doc has a response example");
        let request: AgentRequest = serde_json::from_str(&request_text).expect("request parses");
        assert_eq!(request.validate(), Ok(()));
        assert_eq!(request.decision_inputs.len(), 1);
        assert_eq!(request.context_inputs.len(), 1);
        let response = parse_response(response_text.as_bytes()).expect("response parses");
        assert_eq!(response.validate_for(&request), Ok(()));
    }

    #[test]
    fn the_checked_in_schema_is_the_one_the_types_generate() {
        let path = docket_tests::workspace_root().join("docs/agent-protocol.schema.json");
        // After a change to the protocol types, DOCKET_BLESS_SCHEMA=1 rewrites the file.
        if std::env::var_os("DOCKET_BLESS_SCHEMA").is_some() {
            std::fs::write(&path, docket_decider::agent_protocol_schema_pretty())
                .expect("write the schema");
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        // As JSON values: key order follows serde_json's `preserve_order`, which
        // workspace-wide builds unify on.
        let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
        assert!(
            parse(&checked_in).is_some()
                && parse(&checked_in) == parse(&docket_decider::agent_protocol_schema_pretty()),
            "{} is stale: run `DOCKET_BLESS_SCHEMA=1 cargo test -p docket-tests schema`",
            path.display()
        );
    }
}

/// The documented count limits (docs/agent-protocol.md#limits): a response at each limit
/// passes the structural checks, one entry more is refused naming the list, its count and
/// the limit.
#[test]
fn lists_longer_than_their_limit_are_refused_naming_the_list_and_the_limit() {
    let handoff = |denied: usize| {
        serde_json::json!({
            "type": "handoff", "to": "b", "output_type": "t", "payload": {},
            "task": { "id": "t1", "denied_tools": vec!["shell"; denied] },
        })
    };
    let plain =
        serde_json::json!({ "type": "handoff", "to": "b", "output_type": "t", "payload": {} });
    let response = |actions: Vec<Value>, tool_calls: usize, warnings: usize| {
        let text = serde_json::json!({
            "request_id": "r1",
            "status": "SUCCESS",
            "confidence_level": "HIGH",
            "actions": actions,
            "tool_calls": vec![serde_json::json!({ "name": "search" }); tool_calls],
            "warnings": vec!["degraded"; warnings],
            "usage": { "tool_calls": tool_calls },
        })
        .to_string();
        parse_response(text.as_bytes()).expect("parses")
    };
    let cases = [
        (
            "actions",
            response(vec![plain.clone(); 1_001], 0, 0),
            1_001,
            1_000,
        ),
        (
            "tool_calls",
            response(vec![plain.clone()], 1_001, 0),
            1_001,
            1_000,
        ),
        (
            "warnings",
            response(vec![plain.clone()], 0, 1_001),
            1_001,
            1_000,
        ),
        (
            "actions[0].task.denied_tools",
            response(vec![handoff(1_001)], 0, 0),
            1_001,
            1_000,
        ),
    ];
    for (list, over, count, limit) in cases {
        let refused = over.validate().expect_err(list).to_string();
        assert!(
            refused.contains(list)
                && refused.contains(&count.to_string())
                && refused.contains(&limit.to_string()),
            "{list}: {refused}"
        );
    }
    for at_limit in [
        response(vec![plain.clone(); 1_000], 0, 0),
        response(vec![plain.clone()], 1_000, 1_000),
        response(vec![handoff(1_000)], 0, 0),
    ] {
        at_limit.validate().expect("at the limit");
    }
}
