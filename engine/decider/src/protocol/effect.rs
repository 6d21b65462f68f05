//! Accepting an effect executor's answer (docs/effect-protocol.md): the bytes checked
//! against the call they answer, with the path of a malformed field in the error.

use docket_protocol::{EffectCallError, EffectErrorBody, EffectOp, EffectRequest};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Checks an answer that arrived as bytes against the request it answers: JSON, the same
/// `effect_id`, exactly one of `result` / `error`, a `result` of the operation's shape.
///
/// # Errors
/// [`EffectCallError::Malformed`] naming what was wrong, or [`EffectCallError::Failed`]
/// when the executor answered an error.
pub fn accept_answer<T: DeserializeOwned>(
    request: &EffectRequest,
    op: EffectOp,
    bytes: &[u8],
) -> Result<T, EffectCallError> {
    let malformed = |message: String| EffectCallError::Malformed {
        effect_id: request.effect_id.clone(),
        message,
    };
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| malformed(format!("the {} answer is not JSON: {e}", op.name())))?;
    let Value::Object(mut fields) = value else {
        return Err(malformed(format!(
            "the {} answer is not a JSON object",
            op.name()
        )));
    };
    match fields.get("effect_id") {
        Some(Value::String(id)) if *id == request.effect_id => {}
        Some(Value::String(id)) => {
            return Err(malformed(format!(
                "the answer's effect_id {id:?} is not the request's {:?}",
                request.effect_id.as_str()
            )));
        }
        Some(_) => return Err(malformed("effect_id is not a string".to_owned())),
        None => return Err(malformed("the answer has no effect_id".to_owned())),
    }
    if let Some(unknown) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "effect_id" | "result" | "error"))
    {
        return Err(malformed(format!(
            "unknown field `{unknown}` in the answer"
        )));
    }
    match (fields.remove("result"), fields.remove("error")) {
        (Some(result), None) => decode(result)
            .map_err(|e| malformed(format!("the {} result is invalid: {e}", op.name()))),
        (None, Some(error)) => {
            let body: EffectErrorBody =
                decode(error).map_err(|e| malformed(format!("the error is invalid: {e}")))?;
            Err(EffectCallError::Failed {
                effect_id: request.effect_id.clone(),
                code: body.code,
                message: body.message,
            })
        }
        (Some(_), Some(_)) => Err(malformed(
            "the answer has both `result` and `error`".to_owned(),
        )),
        (None, None) => Err(malformed(
            "the answer has neither `result` nor `error`".to_owned(),
        )),
    }
}

/// Decodes with the path of the offending field in the message (`preview.x: ...`).
fn decode<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_protocol::{DryRunReport, EffectReceipt, Verification};
    use serde_json::json;

    fn request() -> EffectRequest {
        EffectRequest {
            run_id: "run".into(),
            episode_id: "ep".into(),
            effect_id: "run/effect-1".into(),
            kind: "publish".into(),
            lane: "api".into(),
            idempotency_key: "k1".into(),
            params: json!({"text": "hi"}),
            attempt: 1,
            timeout_ms: 1000,
            fence: None,
            target: None,
        }
    }

    fn answer<T: DeserializeOwned>(op: EffectOp, text: &str) -> Result<T, EffectCallError> {
        accept_answer(&request(), op, text.as_bytes())
    }

    fn malformed_message<T: DeserializeOwned + std::fmt::Debug>(
        op: EffectOp,
        text: &str,
    ) -> String {
        match answer::<T>(op, text) {
            Err(EffectCallError::Malformed { message, .. }) => message,
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    #[test]
    fn results_of_each_operation_are_accepted() {
        let report: DryRunReport = answer(
            EffectOp::DryRun,
            r#"{"effect_id":"run/effect-1","result":{"ok":true,"preview":{"x":1}}}"#,
        )
        .expect("dry run");
        assert!(report.ok);
        let receipt: EffectReceipt = answer(
            EffectOp::Execute,
            r#"{"effect_id":"run/effect-1","result":{"result":{"post_id":"p"}}}"#,
        )
        .expect("execute");
        assert_eq!(receipt.result["post_id"], "p");
        let verification: Verification = answer(
            EffectOp::Verify,
            r#"{"effect_id":"run/effect-1","result":{"status":"not_applied"}}"#,
        )
        .expect("verify");
        assert_eq!(verification, Verification::NotApplied);
    }

    #[test]
    fn an_error_answer_is_a_failure_with_its_code() {
        let err = answer::<EffectReceipt>(
            EffectOp::Execute,
            r#"{"effect_id":"run/effect-1","error":{"code":"RATE_LIMITED","message":"slow down"}}"#,
        )
        .expect_err("failed");
        assert_eq!(err.code(), "RATE_LIMITED");
    }

    #[test]
    fn malformed_answers_say_what_is_wrong() {
        for (text, expected) in [
            ("not json", "not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"result":{}}"#, "no effect_id"),
            (r#"{"effect_id":"other","result":{}}"#, "\"other\""),
            (r#"{"effect_id":"run/effect-1"}"#, "neither"),
            (
                r#"{"effect_id":"run/effect-1","result":{},"error":{"code":"a","message":"b"}}"#,
                "both",
            ),
            (
                r#"{"effect_id":"run/effect-1","result":{"status":"maybe"}}"#,
                "verify result is invalid",
            ),
            (r#"{"effect_id":"run/effect-1","reslt":{}}"#, "`reslt`"),
        ] {
            let message = malformed_message::<Verification>(EffectOp::Verify, text);
            assert!(message.contains(expected), "{text}: {message}");
        }
        let message = malformed_message::<DryRunReport>(
            EffectOp::DryRun,
            r#"{"effect_id":"run/effect-1","result":{"ok":"yes"}}"#,
        );
        assert!(message.contains("ok:"), "{message}");
    }
}
