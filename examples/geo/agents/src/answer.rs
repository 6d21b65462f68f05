//! Building responses and reading inputs, shared by the five agents.

use docket_protocol::{Action, AgentRequest, AgentResponse, Confidence, ResponseStatus};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why an agent could not do its work: becomes an ERROR response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// A CATEGORY_SPECIFIC_ERROR code.
    pub code: &'static str,
    /// What was wrong.
    pub message: String,
}

impl Failure {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// The payload of the decision input of `output_type`, parsed.
pub(crate) fn decision_input<T: DeserializeOwned>(
    request: &AgentRequest,
    output_type: &str,
) -> Result<T, Failure> {
    let input = request
        .decision_inputs
        .iter()
        .find(|input| input.output_type == output_type)
        .ok_or_else(|| {
            Failure::new(
                "INPUT_MISSING_DECISION_INPUT",
                format!("expected a decision input of output type {output_type}"),
            )
        })?;
    T::deserialize(&*input.payload).map_err(|err| {
        Failure::new(
            "INPUT_INVALID_PAYLOAD",
            format!("the {output_type} decision input is malformed: {err}"),
        )
    })
}

/// The payload of a read-only context input of `output_type`, if present and well formed.
pub(crate) fn context_input<T: DeserializeOwned>(
    request: &AgentRequest,
    output_type: &str,
) -> Option<T> {
    request
        .context_inputs
        .iter()
        .find(|input| input.output_type == output_type)
        .and_then(|input| T::deserialize(&*input.payload).ok())
}

/// One handoff (or finish) action carrying `payload`.
pub(crate) fn handoff<T: Serialize>(to: &str, output_type: &str, payload: &T) -> Action {
    Action::Handoff {
        to: to.into(),
        output_type: output_type.to_owned(),
        payload: serde_json::to_value(payload).unwrap_or_default(),
        task: None,
    }
}

/// The response of a complete answer: SUCCESS/HIGH, SUCCESS/MEDIUM with its warnings
/// (a duplicate ignored, a topic without gaps), or ERROR. Seed 000 refuses partial
/// outputs, so an answer that is whole says so even when it has something to warn about.
pub(crate) fn respond(
    request: &AgentRequest,
    outcome: Result<(Action, Vec<String>), Failure>,
) -> AgentResponse {
    answer(request, outcome, ResponseStatus::Success)
}

/// The response of an answer that may be incomplete: PARTIAL/MEDIUM when there are
/// warnings (data that could not be collected), else as [`respond`].
pub(crate) fn respond_incomplete(
    request: &AgentRequest,
    outcome: Result<(Action, Vec<String>), Failure>,
) -> AgentResponse {
    answer(request, outcome, ResponseStatus::Partial)
}

fn answer(
    request: &AgentRequest,
    outcome: Result<(Action, Vec<String>), Failure>,
    with_warnings: ResponseStatus,
) -> AgentResponse {
    match outcome {
        Ok((action, warnings)) => {
            let mut response =
                AgentResponse::success(request.request_id.clone(), Confidence::High, vec![action]);
            if !warnings.is_empty() {
                response.status = with_warnings;
                response.confidence_level = Some(Confidence::Medium);
                response.warnings = warnings;
            }
            response
        }
        Err(failure) => {
            AgentResponse::error(request.request_id.clone(), failure.code, failure.message)
        }
    }
}

/// Rounds to 4 decimals, so scores print the same everywhere.
pub(crate) fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// `part / whole`, 0 when `whole` is 0, rounded to 4 decimals.
pub(crate) fn ratio(part: u32, whole: u32) -> f64 {
    if whole == 0 {
        0.0
    } else {
        round4(f64::from(part) / f64::from(whole))
    }
}
