//! The rules a parsed request or response must follow beyond its JSON shape
//! (docs/agent-protocol.md#rules-a-response-must-follow: a confidence level with SUCCESS
//! and PARTIAL, an error message with ERROR, the echoed request_id...). Each failure names
//! the field, as a path such as `actions[2].to`.

use docket_protocol::{Action, AgentRequest, AgentResponse, IntentClassification, ResponseStatus};

/// A request or response that parsed but breaks a protocol rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ValidationError {
    /// The offending field, e.g. `confidence_level` or `actions[1].to`.
    pub field: String,
    /// What is wrong with it.
    pub problem: ValidationProblem,
}

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationProblem {
    /// A string that must say something is empty or blank.
    #[error("must not be empty")]
    Empty,
    /// A number that counts from 1 is 0.
    #[error("must be at least 1")]
    Zero,
    /// The field is missing but the status requires it.
    #[error("required when status is {status}")]
    RequiredWith {
        /// The response's status.
        status: ResponseStatus,
    },
    /// The field is present but contradicts the status.
    #[error("not allowed when status is {status}")]
    NotAllowedWith {
        /// The response's status.
        status: ResponseStatus,
    },
    /// The response does not echo the request's request_id.
    #[error("expected {expected:?} (the request's request_id), got {actual:?}")]
    RequestIdMismatch {
        /// The request's request_id.
        expected: String,
        /// What the response carried.
        actual: String,
    },
    /// An error_code not of the CATEGORY_SPECIFIC_ERROR form.
    #[error(
        "{value:?} is not of the form CATEGORY_SPECIFIC_ERROR (upper-case words joined by `_`)"
    )]
    BadErrorCode {
        /// The code as sent.
        value: String,
    },
    /// A finish action followed by more actions.
    #[error("finish must be the last action, but {following} action(s) follow it")]
    FinishNotLast {
        /// How many actions come after it.
        following: usize,
    },
    /// A call_tool followed by more actions (its result comes back in a new request).
    #[error(
        "call_tool `{name}` must be the last action (its result comes back in a new request), but {following} action(s) follow it"
    )]
    CallToolNotLast {
        /// The tool asked for.
        name: String,
        /// How many actions come after it.
        following: usize,
    },
    /// A wait followed by more actions (the agent is called again once it is due).
    #[error(
        "wait must be the last action (the agent is called again once it is due), but {following} action(s) follow it"
    )]
    WaitNotLast {
        /// How many actions come after it.
        following: usize,
    },
    /// A wait's or a scheduled effect's time or duration that does not say when.
    #[error("{0}")]
    BadWait(String),
    /// A task's denied tool that is not a tool pattern.
    #[error("{pattern:?} is not a tool pattern (`Tool` or `Tool(glob)`): {reason}")]
    BadToolPattern {
        /// The pattern as sent.
        pattern: String,
        /// Why it does not parse.
        reason: String,
    },
    /// A list longer than the protocol allows (docs/agent-protocol.md#limits).
    #[error("lists {count} entries, more than the limit of {limit}")]
    TooMany {
        /// How many the response lists.
        count: usize,
        /// The most a response may list.
        limit: usize,
    },
    /// An intent confidence outside 0 to 1 (docs/agent-protocol.md#intent-classification).
    #[error("{0} is not a confidence from 0 to 1")]
    NotAFraction(String),
    /// A target capability without the agent it belongs to.
    #[error("names a capability but no target_agent")]
    CapabilityWithoutAgent,
    /// More secondary targets than secondary intents.
    #[error(
        "lists {targets} target(s) for {intents} secondary intent(s): one per intent, in order"
    )]
    MoreTargetsThanIntents {
        /// secondary_targets.len().
        targets: usize,
        /// secondary_intents.len().
        intents: usize,
    },
    /// usage.tool_calls counts fewer calls than tool_calls lists.
    #[error("{reported} is less than the {listed} entries in tool_calls")]
    UsageBelowListed {
        /// usage.tool_calls.
        reported: u32,
        /// tool_calls.len().
        listed: usize,
    },
}

/// The most actions one response may carry (docs/agent-protocol.md#limits).
pub const MAX_ACTIONS: usize = 1_000;
/// The most entries of `tool_calls`, of `warnings`, and of a handed-off task's
/// `denied_tools`, in one response.
pub const MAX_LIST_ENTRIES: usize = 1_000;

/// A list of `count` entries within `limit`, or the problem naming the list.
fn at_most(field: &str, count: usize, limit: usize) -> Result<(), ValidationError> {
    if count > limit {
        fail(field, ValidationProblem::TooMany { count, limit })
    } else {
        Ok(())
    }
}

fn fail(field: impl Into<String>, problem: ValidationProblem) -> Result<(), ValidationError> {
    Err(ValidationError {
        field: field.into(),
        problem,
    })
}

fn non_empty(field: impl FnOnce() -> String, value: &str) -> Result<(), ValidationError> {
    if value.trim().is_empty() {
        fail(field(), ValidationProblem::Empty)
    } else {
        Ok(())
    }
}

/// CATEGORY_SPECIFIC_ERROR: at least two upper-case words of letters and digits joined by
/// single underscores, starting with a letter.
fn is_error_code(code: &str) -> bool {
    let words: Vec<&str> = code.split('_').collect();
    words.len() >= 2
        && code.starts_with(|c: char| c.is_ascii_uppercase())
        && words.iter().all(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        })
}

/// The protocol's rules for a request beyond its JSON shape (a trait because the request
/// is `docket_protocol`'s type).
pub trait ValidateRequest {
    /// Checks the request's own rules.
    ///
    /// # Errors
    /// The first rule broken, naming the field.
    fn validate(&self) -> Result<(), ValidationError>;
}

/// The protocol's rules for a response beyond its JSON shape (a trait because the
/// response is `docket_protocol`'s type).
pub trait ValidateResponse {
    /// Checks the response against the request it answers.
    ///
    /// # Errors
    /// The first rule broken, naming the field.
    fn validate_for(&self, request: &AgentRequest) -> Result<(), ValidationError>;

    /// Checks the response's own rules.
    ///
    /// # Errors
    /// The first rule broken, naming the field.
    fn validate(&self) -> Result<(), ValidationError>;
}

impl ValidateRequest for AgentRequest {
    /// Checks the request's own rules: ids and agents named, attempt and timeout at least 1,
    /// every input labelled with its producing agent and output type.
    ///
    /// # Errors
    /// The first rule broken, naming the field.
    fn validate(&self) -> Result<(), ValidationError> {
        for (field, value) in [
            ("request_id", self.request_id.as_str()),
            ("correlation_id", self.correlation_id.as_str()),
            ("run_id", self.run_id.as_str()),
            ("episode_id", self.episode_id.as_str()),
            ("source_agent", self.source_agent.as_str()),
            ("target_agent", self.target_agent.as_str()),
            ("capability_code", self.capability_code.as_str()),
        ] {
            non_empty(|| field.to_owned(), value)?;
        }
        if self.attempt == 0 {
            return fail("attempt", ValidationProblem::Zero);
        }
        if self.timeout_ms == 0 {
            return fail("timeout_ms", ValidationProblem::Zero);
        }
        for (i, input) in self.decision_inputs.iter().enumerate() {
            non_empty(
                || format!("decision_inputs[{i}].source_agent"),
                &input.source_agent,
            )?;
            non_empty(
                || format!("decision_inputs[{i}].output_type"),
                &input.output_type,
            )?;
        }
        for (i, input) in self.context_inputs.iter().enumerate() {
            non_empty(
                || format!("context_inputs[{i}].source_agent"),
                &input.source_agent,
            )?;
            non_empty(
                || format!("context_inputs[{i}].output_type"),
                &input.output_type,
            )?;
        }
        Ok(())
    }
}

impl ValidateResponse for AgentResponse {
    /// Checks the response against the request it answers: the request_id echo first,
    /// then [`ValidateResponse::validate`].
    ///
    /// # Errors
    /// The first rule broken, naming the field.
    fn validate_for(&self, request: &AgentRequest) -> Result<(), ValidationError> {
        if self.request_id != request.request_id {
            return fail(
                "request_id",
                ValidationProblem::RequestIdMismatch {
                    expected: request.request_id.to_string(),
                    actual: self.request_id.to_string(),
                },
            );
        }
        self.validate()
    }

    /// Checks the response's own rules (docs/agent-protocol.md#rules-a-response-must-follow):
    /// - SUCCESS and PARTIAL need `confidence_level` and carry no error fields;
    /// - SUCCESS needs at least one action (the only way to say what was done);
    /// - ERROR needs `error_message`, and carries no confidence and no actions;
    /// - `error_code`, when present, is CATEGORY_SPECIFIC_ERROR;
    /// - `usage.tool_calls` is at least the number of `tool_calls` listed;
    /// - names in tool calls and actions are not empty, and `finish` comes last;
    /// - no list is longer than its limit ([`MAX_ACTIONS`], [`MAX_LIST_ENTRIES`]).
    ///
    /// # Errors
    /// The first rule broken, naming the field.
    fn validate(&self) -> Result<(), ValidationError> {
        use ResponseStatus::{Error, Partial, Success, Timeout};
        let status = self.status;
        non_empty(|| "request_id".to_owned(), &self.request_id)?;
        match status {
            Success | Partial => {
                if self.confidence_level.is_none() {
                    return fail(
                        "confidence_level",
                        ValidationProblem::RequiredWith { status },
                    );
                }
                if self.error_code.is_some() {
                    return fail("error_code", ValidationProblem::NotAllowedWith { status });
                }
                if self.error_message.is_some() {
                    return fail(
                        "error_message",
                        ValidationProblem::NotAllowedWith { status },
                    );
                }
                if status == Success && self.actions.is_empty() {
                    return fail("actions", ValidationProblem::RequiredWith { status });
                }
            }
            Error => {
                match &self.error_message {
                    None => {
                        return fail("error_message", ValidationProblem::RequiredWith { status });
                    }
                    Some(message) => non_empty(|| "error_message".to_owned(), message)?,
                }
                if self.confidence_level.is_some() {
                    return fail(
                        "confidence_level",
                        ValidationProblem::NotAllowedWith { status },
                    );
                }
                if !self.actions.is_empty() {
                    return fail("actions", ValidationProblem::NotAllowedWith { status });
                }
            }
            Timeout => {}
        }
        if let Some(code) = &self.error_code
            && !is_error_code(code)
        {
            return fail(
                "error_code",
                ValidationProblem::BadErrorCode {
                    value: code.clone(),
                },
            );
        }
        at_most("actions", self.actions.len(), MAX_ACTIONS)?;
        at_most("tool_calls", self.tool_calls.len(), MAX_LIST_ENTRIES)?;
        at_most("warnings", self.warnings.len(), MAX_LIST_ENTRIES)?;
        for (i, warning) in self.warnings.iter().enumerate() {
            non_empty(|| format!("warnings[{i}]"), warning)?;
        }
        for (i, call) in self.tool_calls.iter().enumerate() {
            non_empty(|| format!("tool_calls[{i}].name"), &call.name)?;
        }
        if (self.usage.tool_calls as usize) < self.tool_calls.len() {
            return fail(
                "usage.tool_calls",
                ValidationProblem::UsageBelowListed {
                    reported: self.usage.tool_calls,
                    listed: self.tool_calls.len(),
                },
            );
        }
        if let Some(intent) = &self.intent {
            validate_intent(intent)?;
        }
        for (i, action) in self.actions.iter().enumerate() {
            validate_action(i, action)?;
            if let Action::CallTool { name, .. } = action
                && i + 1 < self.actions.len()
            {
                return fail(
                    format!("actions[{i}]"),
                    ValidationProblem::CallToolNotLast {
                        name: name.clone(),
                        following: self.actions.len() - i - 1,
                    },
                );
            }
            if matches!(action, Action::Wait { .. }) && i + 1 < self.actions.len() {
                return fail(
                    format!("actions[{i}]"),
                    ValidationProblem::WaitNotLast {
                        following: self.actions.len() - i - 1,
                    },
                );
            }
            if matches!(action, Action::Finish { .. } | Action::FinishEpisode { .. })
                && i + 1 < self.actions.len()
            {
                return fail(
                    format!("actions[{i}]"),
                    ValidationProblem::FinishNotLast {
                        following: self.actions.len() - i - 1,
                    },
                );
            }
        }
        Ok(())
    }
}

/// An intent classification names its intent, a confidence from 0 to 1, no capability
/// without its agent, and at most one target per secondary intent
/// (docs/agent-protocol.md#intent-classification).
fn validate_intent(intent: &IntentClassification) -> Result<(), ValidationError> {
    non_empty(
        || "intent.primary_intent".to_owned(),
        &intent.primary_intent,
    )?;
    let confidence = intent.intent_confidence;
    if !(0.0..=1.0).contains(&confidence) {
        return fail(
            "intent.intent_confidence",
            ValidationProblem::NotAFraction(confidence.to_string()),
        );
    }
    if let Some(agent) = &intent.target_agent {
        non_empty(|| "intent.target_agent".to_owned(), agent)?;
    } else if intent.target_capability.is_some() {
        return fail(
            "intent.target_capability",
            ValidationProblem::CapabilityWithoutAgent,
        );
    }
    if let Some(code) = &intent.target_capability {
        non_empty(|| "intent.target_capability".to_owned(), code)?;
    }
    let (intents, targets) = (&intent.secondary_intents, &intent.secondary_targets);
    at_most("intent.secondary_intents", intents.len(), MAX_LIST_ENTRIES)?;
    if targets.len() > intents.len() {
        return fail(
            "intent.secondary_targets",
            ValidationProblem::MoreTargetsThanIntents {
                targets: targets.len(),
                intents: intents.len(),
            },
        );
    }
    for (i, name) in intents.iter().enumerate() {
        non_empty(|| format!("intent.secondary_intents[{i}]"), name)?;
    }
    for (i, target) in targets.iter().enumerate() {
        non_empty(
            || format!("intent.secondary_targets[{i}].agent"),
            &target.agent,
        )?;
        if let Some(code) = &target.capability {
            non_empty(|| format!("intent.secondary_targets[{i}].capability"), code)?;
        }
    }
    Ok(())
}

fn validate_action(i: usize, action: &Action) -> Result<(), ValidationError> {
    match action {
        Action::Handoff {
            to,
            output_type,
            task,
            ..
        } => {
            non_empty(|| format!("actions[{i}].to"), to)?;
            non_empty(|| format!("actions[{i}].output_type"), output_type)?;
            let Some(task) = task else {
                return Ok(());
            };
            non_empty(|| format!("actions[{i}].task.id"), &task.id)?;
            at_most(
                &format!("actions[{i}].task.denied_tools"),
                task.denied_tools.len(),
                MAX_LIST_ENTRIES,
            )?;
            for (j, pattern) in task.denied_tools.iter().enumerate() {
                let at = || format!("actions[{i}].task.denied_tools[{j}]");
                non_empty(at, pattern)?;
                if let Err(reason) = docket_policies::ToolPattern::parse(pattern) {
                    return fail(
                        at(),
                        ValidationProblem::BadToolPattern {
                            pattern: pattern.clone(),
                            reason,
                        },
                    );
                }
            }
            Ok(())
        }
        Action::RequestCapability {
            target_agent,
            capability_code,
            ..
        } => {
            non_empty(|| format!("actions[{i}].target_agent"), target_agent)?;
            non_empty(|| format!("actions[{i}].capability_code"), capability_code)
        }
        Action::Escalate { reason, choices } => {
            non_empty(|| format!("actions[{i}].reason"), reason)?;
            for (j, choice) in choices.iter().enumerate() {
                non_empty(|| format!("actions[{i}].choices[{j}]"), choice)?;
            }
            Ok(())
        }
        Action::Finish { .. } => Ok(()),
        // Episodes
        Action::Spawn {
            agent,
            episode_type,
            goal,
            ..
        } => {
            non_empty(|| format!("actions[{i}].agent"), agent)?;
            non_empty(|| format!("actions[{i}].episode_type"), episode_type)?;
            non_empty(|| format!("actions[{i}].goal"), goal)
        }
        Action::WriteDomain { domain, .. } => non_empty(|| format!("actions[{i}].domain"), domain),
        Action::FinishEpisode { .. } => Ok(()),
        // Side effects
        Action::RequestEffect {
            kind,
            lane,
            idempotency_key,
            not_before,
            ..
        } => {
            non_empty(|| format!("actions[{i}].kind"), kind)?;
            non_empty(|| format!("actions[{i}].lane"), lane)?;
            if let Some(Err(why)) = not_before.as_deref().map(super::time_ms) {
                return fail(
                    format!("actions[{i}].not_before"),
                    ValidationProblem::BadWait(why),
                );
            }
            match idempotency_key {
                Some(key) => non_empty(|| format!("actions[{i}].idempotency_key"), key),
                None => Ok(()),
            }
        }
        // Governed tools
        Action::CallTool { name, .. } => non_empty(|| format!("actions[{i}].name"), name),
        // Durable timers
        Action::Wait { reason, .. } => {
            non_empty(|| format!("actions[{i}].reason"), reason)?;
            match super::wait_due_ms(action, 0) {
                Some(Err((field, why))) => fail(
                    format!("actions[{i}].{field}"),
                    ValidationProblem::BadWait(why),
                ),
                _ => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_protocol::{AgentId, Confidence, RunId, ToolCall};
    use serde_json::json;

    fn request() -> AgentRequest {
        AgentRequest::new("r1", "reasoning", "strategy", "STRATEGY_RECOMMEND")
            .in_run("run-1", "ep-1", "c1")
    }

    fn finish() -> Action {
        Action::Finish {
            output: json!({"ok": true}),
        }
    }

    fn field_of(result: Result<(), ValidationError>) -> (String, ValidationProblem) {
        let err = result.expect_err("validation should fail");
        (err.field, err.problem)
    }

    #[test]
    fn a_well_formed_success_passes() {
        let response = AgentResponse::success("r1", Confidence::High, vec![finish()]);
        assert_eq!(response.validate_for(&request()), Ok(()));
    }

    #[test]
    fn request_id_must_be_echoed() {
        let response = AgentResponse::success("r2", Confidence::High, vec![finish()]);
        let (field, problem) = field_of(response.validate_for(&request()));
        assert_eq!(field, "request_id");
        assert_eq!(
            problem,
            ValidationProblem::RequestIdMismatch {
                expected: "r1".into(),
                actual: "r2".into()
            }
        );
    }

    #[test]
    fn success_and_partial_need_confidence() {
        for status in [ResponseStatus::Success, ResponseStatus::Partial] {
            let mut response = AgentResponse::success("r1", Confidence::High, vec![finish()]);
            response.status = status;
            response.confidence_level = None;
            let err = response.validate().expect_err("confidence is required");
            assert_eq!(err.field, "confidence_level");
            assert_eq!(
                err.to_string(),
                format!("confidence_level: required when status is {status}")
            );
        }
    }

    #[test]
    fn an_intent_classification_is_checked_field_by_field() {
        let intent = |confidence: f64| IntentClassification {
            primary_intent: "business_case".into(),
            intent_confidence: confidence,
            target_agent: Some("CST".into()),
            target_capability: Some("CST_FRAMEWORK".into()),
            secondary_intents: vec!["document_generation".into()],
            secondary_targets: vec![docket_protocol::IntentTarget {
                agent: "DOC".into(),
                capability: Some("DOC_GENERATE".into()),
            }],
        };
        let answer = |i: IntentClassification| {
            AgentResponse::success("r1", Confidence::High, vec![finish()]).with_intent(i)
        };
        for confidence in [0.0, 0.85, 1.0] {
            assert_eq!(answer(intent(confidence)).validate(), Ok(()));
        }
        let err = answer(intent(1.3)).validate().expect_err("above 1");
        assert_eq!(
            err.to_string(),
            "intent.intent_confidence: 1.3 is not a confidence from 0 to 1"
        );
        assert_eq!(
            field_of(answer(intent(-0.2)).validate()).0,
            "intent.intent_confidence"
        );
        let mut blank = intent(0.9);
        blank.primary_intent = " ".into();
        assert_eq!(
            field_of(answer(blank).validate()).0,
            "intent.primary_intent"
        );
        let mut no_agent = intent(0.9);
        no_agent.target_agent = None;
        assert_eq!(
            field_of(answer(no_agent).validate()),
            (
                "intent.target_capability".into(),
                ValidationProblem::CapabilityWithoutAgent
            )
        );
        let mut extra = intent(0.9);
        extra.secondary_intents.clear();
        assert_eq!(
            field_of(answer(extra).validate()),
            (
                "intent.secondary_targets".into(),
                ValidationProblem::MoreTargetsThanIntents {
                    targets: 1,
                    intents: 0
                }
            )
        );
    }

    #[test]
    fn success_needs_an_action_partial_does_not() {
        let mut response = AgentResponse::success("r1", Confidence::Low, vec![]);
        assert_eq!(field_of(response.validate()).0, "actions");
        response.status = ResponseStatus::Partial;
        assert_eq!(response.validate(), Ok(()));
    }

    #[test]
    fn error_needs_a_message_and_no_actions_or_confidence() {
        let mut response = AgentResponse::error("r1", "DATA_MISSING_INPUT", "no gaps");
        assert_eq!(response.validate(), Ok(()));

        response.error_message = None;
        assert_eq!(field_of(response.validate()).0, "error_message");
        response.error_message = Some("  ".into());
        assert_eq!(
            field_of(response.validate()),
            ("error_message".into(), ValidationProblem::Empty)
        );
        response.error_message = Some("no gaps".into());

        response.actions = vec![finish()];
        assert_eq!(field_of(response.validate()).0, "actions");
        response.actions.clear();

        response.confidence_level = Some(Confidence::High);
        assert_eq!(field_of(response.validate()).0, "confidence_level");
    }

    #[test]
    fn error_fields_are_not_allowed_with_success() {
        let mut response = AgentResponse::success("r1", Confidence::High, vec![finish()]);
        response.error_message = Some("oops".into());
        assert_eq!(
            field_of(response.validate()),
            (
                "error_message".into(),
                ValidationProblem::NotAllowedWith {
                    status: ResponseStatus::Success
                }
            )
        );
    }

    #[test]
    fn error_code_must_be_category_specific_error() {
        for good in [
            "DATA_MISSING_REQUIRED_INPUT",
            "INPUT_VALIDATION_FAILED",
            "HTTP_503",
        ] {
            assert!(is_error_code(good), "{good}");
        }
        for bad in [
            "oops",
            "DATA",
            "DATA__X",
            "_DATA_X",
            "data_missing",
            "DATA_X_",
            "1_X",
        ] {
            assert!(!is_error_code(bad), "{bad}");
            let response = AgentResponse::error("r1", bad, "message");
            assert_eq!(field_of(response.validate()).0, "error_code");
        }
    }

    #[test]
    fn timeout_may_carry_partial_actions_and_error_fields() {
        let mut response = AgentResponse::error("r1", "TIME_BUDGET_EXHAUSTED", "ran out");
        response.status = ResponseStatus::Timeout;
        response.actions = vec![finish()];
        assert_eq!(response.validate(), Ok(()));
    }

    #[test]
    fn action_fields_are_named_with_their_index() {
        let response = AgentResponse::success(
            "r1",
            Confidence::High,
            vec![
                Action::Escalate {
                    reason: "why".into(),
                    choices: Vec::new(),
                },
                Action::Handoff {
                    to: AgentId::default(),
                    output_type: "gaps".into(),
                    payload: json!({}),
                    task: None,
                },
            ],
        );
        let err = response.validate().expect_err("empty `to`");
        assert_eq!(err.to_string(), "actions[1].to: must not be empty");

        let response = AgentResponse::success(
            "r1",
            Confidence::High,
            vec![Action::RequestCapability {
                target_agent: "intelligence".into(),
                capability_code: String::new(),
                inputs: Default::default(),
                priority: None,
            }],
        );
        assert_eq!(
            field_of(response.validate()).0,
            "actions[0].capability_code"
        );
    }

    #[test]
    fn finish_must_be_last() {
        let response = AgentResponse::success(
            "r1",
            Confidence::High,
            vec![
                finish(),
                Action::Escalate {
                    reason: "x".into(),
                    choices: Vec::new(),
                },
            ],
        );
        assert_eq!(
            field_of(response.validate()),
            (
                "actions[0]".into(),
                ValidationProblem::FinishNotLast { following: 1 }
            )
        );
    }

    #[test]
    fn usage_counts_at_least_the_listed_tool_calls() {
        let mut response = AgentResponse::success("r1", Confidence::High, vec![finish()]);
        response.tool_calls = vec![
            ToolCall {
                name: "Bash".into(),
                arguments: "ls".into(),
            };
            2
        ];
        response.usage.tool_calls = 1;
        assert_eq!(field_of(response.validate()).0, "usage.tool_calls");
        response.usage.tool_calls = 2;
        assert_eq!(response.validate(), Ok(()));
        response.tool_calls[1].name.clear();
        assert_eq!(field_of(response.validate()).0, "tool_calls[1].name");
    }

    #[test]
    fn request_rules_name_the_field() {
        assert_eq!(request().validate(), Ok(()));
        let mut bad = request();
        bad.attempt = 0;
        assert_eq!(
            field_of(bad.validate()),
            ("attempt".into(), ValidationProblem::Zero)
        );
        let mut bad = request();
        bad.run_id = RunId::default();
        assert_eq!(field_of(bad.validate()).0, "run_id");
        let bad = request().with_context_input("", "geo_scores", json!({}));
        assert_eq!(field_of(bad.validate()).0, "context_inputs[0].source_agent");
    }
}
