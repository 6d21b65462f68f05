//! The effect protocol on the wire (command and HTTP executors): one call document in, one
//! answer document out. Documented for executor authors in `docs/effect-protocol.md`; the
//! JSON Schema `docs/effect-protocol.schema.json` is generated from these types.

use serde::{Deserialize, Serialize};

use super::EffectRequest;
#[cfg(doc)]
use super::{DryRunReport, EffectCallError, EffectReceipt, Verification};

/// Which of the three operations a call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EffectOp {
    /// Check what executing would do, changing nothing; answers a [`DryRunReport`].
    DryRun,
    /// Apply the effect at most once per idempotency key; answers an [`EffectReceipt`].
    Execute,
    /// Say whether the key's effect was applied; answers a [`Verification`].
    Verify,
}

impl EffectOp {
    /// The wire name (`dry_run`, `execute`, `verify`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::DryRun => "dry_run",
            Self::Execute => "execute",
            Self::Verify => "verify",
        }
    }
}

/// One call to an effect executor: a JSON line on stdin, or an HTTP POST body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct EffectCall {
    /// The operation.
    pub op: EffectOp,
    /// The effect.
    pub request: EffectRequest,
}

/// The executor refused or failed the operation (becomes [`EffectCallError::Failed`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct EffectErrorBody {
    /// A stable code for the record (`RATE_LIMITED`, `INVALID_PARAMS`...).
    pub code: String,
    /// What went wrong, for people.
    pub message: String,
}

/// The answer to one call: the call's `effect_id` echoed, and exactly one of `result`
/// (whose shape depends on the operation) or `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(rename = "EffectAnswer_for_{T}"))]
pub struct EffectAnswer<T> {
    /// The `request.effect_id` of the call answered.
    pub effect_id: String,
    /// The outcome, when the operation succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<T>,
    /// Why it failed, otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<EffectErrorBody>,
}

impl<T> EffectAnswer<T> {
    /// A successful answer.
    pub fn ok(effect_id: impl Into<String>, result: T) -> Self {
        Self {
            effect_id: effect_id.into(),
            result: Some(result),
            error: None,
        }
    }

    /// A failed answer.
    pub fn failed(
        effect_id: impl Into<String>,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            effect_id: effect_id.into(),
            result: None,
            error: Some(EffectErrorBody {
                code: code.into(),
                message: message.into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn calls_round_trip() {
        let call = EffectCall {
            op: EffectOp::Execute,
            request: request(),
        };
        let text = serde_json::to_string(&call).expect("encodes");
        assert!(text.starts_with(r#"{"op":"execute","request":{"#), "{text}");
        assert_eq!(
            serde_json::from_str::<EffectCall>(&text).expect("decodes"),
            call
        );
    }
}
