//! The effect protocol's data: what an effect executor is asked (`EffectRequest`) and what
//! it may answer (a dry-run report, a receipt, a verification), and why a call produced no
//! usable answer. Documented for executor authors in `docs/effect-protocol.md`.

use crate::ids::{EffectId, EpisodeId, RunId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the executor is asked to do, with everything it needs to do it idempotently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EffectRequest {
    /// The run the effect belongs to.
    pub run_id: RunId,
    /// The episode that asked for it.
    pub episode_id: EpisodeId,
    /// Unique in the run (`{run}/effect-N`).
    pub effect_id: EffectId,
    /// Effect kind, as the bundle's `[[side_effects]]` names it (`publish`, `dm`...).
    pub kind: String,
    /// Lane (`api`, `browser`...).
    pub lane: String,
    /// The key the executor must apply at most once.
    pub idempotency_key: String,
    /// The effect's parameters, as the agent gave them.
    #[serde(default)]
    pub params: Value,
    /// Which attempt this is for the key, from 1.
    pub attempt: u32,
    /// The call is cut off after this long.
    pub timeout_ms: u64,
    /// Where several processes share the runs (workers over PostgreSQL): the claim on the
    /// run under which this call is made, higher with every new claim. An executor that
    /// keeps the highest fence it has seen per key can refuse a lower one: that call comes
    /// from a process that lost the run while the call was on its way. Given at call time,
    /// never recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// On a browser lane (docs/effect-protocol.md#browser-lanes): which target an `execute`
    /// (and a `verify` of it) drives, the sandbox or the real site. Absent on other lanes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<EffectTarget>,
}

/// The target a browser-lane call drives (docs/effect-protocol.md#browser-lanes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EffectTarget {
    /// The executor's sandbox: a copy of the site where acting changes nothing real.
    Sandbox,
    /// The real site.
    Live,
}

impl EffectTarget {
    /// The wire name (`sandbox`, `live`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Sandbox => "sandbox",
            Self::Live => "live",
        }
    }
}

/// The error code with which a browser-lane executor reports that the page's selectors
/// are unstable (a selector it needs matches no element, or several): it acted on
/// nothing, and docket opens a manual-review ticket instead of trying again
/// (docs/effect-protocol.md#browser-lanes).
pub const UNSTABLE_SELECTORS: &str = "UNSTABLE_SELECTORS";

/// The answer to a dry run: would the effect work, and what would it do?
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DryRunReport {
    /// The dry run passed: executing is expected to succeed.
    pub ok: bool,
    /// What the effect would do (a rendered payload, a diff...), for the record.
    #[serde(default)]
    pub preview: Value,
    /// Why it would fail, or any note for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The executor's receipt for an applied effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EffectReceipt {
    /// What the outside world returned (a post id, a message id...).
    #[serde(default)]
    pub result: Value,
    /// On a browser lane, what the page was when the executor acted; docket refuses a
    /// browser-lane receipt without it. Absent on other lanes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftEvidence>,
}

/// Drift evidence: fingerprints of the page a browser-lane executor acted on, recorded so
/// that a later run (or an auditor) can tell whether the page changed
/// (docs/effect-protocol.md#browser-lanes). Each is 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DriftEvidence {
    /// SHA-256 of the screenshot the executor took (or of the rendering it stands for:
    /// the executor's documentation says which).
    pub screenshot_sha256: String,
    /// SHA-256 of the page's DOM as the executor serialised it when it acted.
    pub dom_sha256: String,
}

impl DriftEvidence {
    /// What is wrong with the evidence, if anything: a fingerprint that is not 64
    /// lowercase hex digits, named by its field.
    #[must_use]
    pub fn problem(&self) -> Option<String> {
        [
            ("screenshot_sha256", &self.screenshot_sha256),
            ("dom_sha256", &self.dom_sha256),
        ]
        .into_iter()
        .find(|(_, v)| {
            v.len() != 64
                || !v
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
        .map(|(field, v)| format!("drift.{field} {v:?} is not 64 lowercase hex digits"))
    }
}

/// Whether the effect behind an idempotency key happened, as the executor knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Verification {
    /// It happened; this is its receipt.
    Applied {
        /// What it returned.
        #[serde(default)]
        result: Value,
    },
    /// It did not happen: executing it is safe.
    NotApplied,
    /// The executor cannot tell; a human must look (the effect becomes needs_review).
    Unknown {
        /// Why it cannot tell.
        message: String,
    },
}

/// An effect call that produced no usable answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EffectCallError {
    /// The executor refused or failed the effect and said why.
    #[error("effect executor failed `{effect_id}` with {code}: {message}")]
    Failed {
        /// The effect.
        effect_id: EffectId,
        /// The executor's error code.
        code: String,
        /// What it said.
        message: String,
    },
    /// No answer within the request's `timeout_ms`.
    #[error("effect executor did not answer `{effect_id}` within {timeout_ms} ms")]
    Timeout {
        /// The effect.
        effect_id: EffectId,
        /// The limit.
        timeout_ms: u64,
    },
    /// The answer could not be understood (not JSON, wrong shape, wrong effect id...).
    #[error("effect executor answered `{effect_id}` with something malformed: {message}")]
    Malformed {
        /// The effect.
        effect_id: EffectId,
        /// What was wrong.
        message: String,
    },
    /// The executor could not be reached (process died, connection refused...).
    #[error("effect executor for `{effect_id}` is unavailable: {message}")]
    Unavailable {
        /// The effect.
        effect_id: EffectId,
        /// What happened.
        message: String,
    },
    /// No executor serves this effect kind.
    #[error("no effect executor for kind `{kind}` (declare one in the workflow's [effects])")]
    NoExecutor {
        /// The kind.
        kind: String,
    },
}

impl EffectCallError {
    /// A stable code for the record (`EFFECT_TIMEOUT`...).
    #[must_use]
    pub fn code(&self) -> &str {
        match self {
            Self::Failed { code, .. } => code,
            Self::Timeout { .. } => "EFFECT_TIMEOUT",
            Self::Malformed { .. } => "EFFECT_MALFORMED",
            Self::Unavailable { .. } => "EFFECT_UNAVAILABLE",
            Self::NoExecutor { .. } => "EFFECT_NO_EXECUTOR",
        }
    }
}
