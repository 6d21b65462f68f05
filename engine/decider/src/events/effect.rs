//! The payloads of the `effect.*` events (docs/events.md): a side effect's path from an
//! agent's `request_effect` to its settlement, as the decider records it
//! (`decide/effect.rs` decides each step, `state/effect.rs` folds it).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use docket_protocol::{AgentId, CallId, EffectId, EpisodeId};
use docket_protocol::{DryRunReport, EffectReceipt, EffectRequest, Verification};

/// The `source_agent` of the decision inputs docket adds about effects.
pub const EFFECTS_SOURCE: &str = "effects";
/// The output type of an effect's result, handed back to the agent that asked.
pub const EFFECT_RESULT_TYPE: &str = "effect_result";
/// The capability a verifier agent is called with.
pub const VERIFY_EFFECT_CAPABILITY: &str = "verify_effect";

/// `effect.requested`: an agent's `request_effect`, numbered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectRequested {
    /// `{run}/effect-N`.
    pub effect_id: EffectId,
    /// The call whose response asked (its agent gets the result).
    pub request_id: CallId,
    /// The asking agent.
    pub agent: AgentId,
    /// The asking call's episode.
    pub episode_id: EpisodeId,
    /// The effect kind (`publish`...). Not `kind`: that is the event's own tag.
    pub effect_kind: String,
    /// The lane.
    pub lane: String,
    /// As the agent gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// As the agent gave them.
    #[serde(default)]
    pub params: Value,
    /// 1 + the executions of this key in the run that ended without applying.
    pub attempt: u32,
    /// Not executed before this time, ms since the Unix epoch (the agent's `not_before`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before_ms: Option<i64>,
}

/// `effect.deduplicated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectDeduplicated {
    /// The new request.
    pub effect_id: EffectId,
    /// The effect that applied the key.
    pub of: EffectId,
    /// The key.
    pub idempotency_key: String,
    /// Its recorded receipt.
    pub receipt: EffectReceipt,
}

/// `effect.admitted`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectAdmitted {
    /// The effect.
    pub effect_id: EffectId,
    /// Whether a dry run comes next (the policy requires one).
    pub dry_run: bool,
    /// Whether a human approved it on the way (an attempt over the cap).
    pub human_approved: bool,
}

/// `effect.refused`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectRefused {
    /// The effect.
    pub effect_id: EffectId,
    /// The deciding rule (`kill_switch.api`, `publish-api`, `dry_run`, `human`...).
    pub rule_id: String,
    /// Why.
    pub reason: String,
    /// The parent episode a child episode's refused effect escalates to: one the asking
    /// agent has no permission for (decider version 15,
    /// docs/governance.md#effects-escalate-to-the-parent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_to: Option<EpisodeId>,
}

/// Why an effect may go to its execution gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadyBecause {
    /// Its dry run passed.
    DryRunPassed,
    /// A human approved it.
    Approved,
    /// The policy requires a dry run the executor cannot do; a human approved without.
    DryRunWaived,
    /// It was started before, and the executor says it was not applied.
    NotAppliedOnResume,
    /// Its `not_before` time came (its timer fired).
    Due,
    /// Its sandbox run succeeded with drift evidence (a browser lane with
    /// `sandbox_first`): the real target is next.
    SandboxPassed,
}

/// `effect.ready`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectReady {
    /// The effect.
    pub effect_id: EffectId,
    /// Why.
    pub because: ReadyBecause,
}

/// `effect.started`: recorded, durably, before the executor is called.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectStarted {
    /// The effect.
    pub effect_id: EffectId,
    /// Exactly what the executor is given (and given again to `verify`).
    pub request: EffectRequest,
}

/// `effect.sandbox_started`: a browser-lane effect is run against the sandbox target first
/// (docs/governance.md#browser-lane); recorded, durably, before the executor is called.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectSandboxStarted {
    /// The effect.
    pub effect_id: EffectId,
    /// Exactly what the executor is given: the effect's request with `target` `sandbox`.
    pub request: EffectRequest,
}

/// What a sandbox run gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SandboxOutcome {
    /// The executor acted on the sandbox; its receipt (with the drift evidence it gave).
    Receipt {
        /// The receipt.
        receipt: EffectReceipt,
    },
    /// The executor refused or failed it (`UNSTABLE_SELECTORS` among others), or the call
    /// gave no usable answer.
    Error {
        /// The executor's code, or docket's (`EFFECT_TIMEOUT`...).
        code: String,
        /// What happened.
        message: String,
    },
}

/// `effect.sandbox_ran` (input): the answer of the sandbox run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectSandboxRan {
    /// The effect.
    pub effect_id: EffectId,
    /// What came back.
    pub outcome: SandboxOutcome,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `effect.verifier_called`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectVerifierCalled {
    /// The effect.
    pub effect_id: EffectId,
    /// The verifier's call.
    pub request_id: CallId,
    /// The verifier agent (the bundle's `verifier` for the effect's policy).
    pub verifier: String,
}

/// How an effect's path ended after it was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettledStatus {
    /// Verified applied (by the executor, the verifier or a human).
    Verified,
    /// A human reviewing it did not confirm it.
    Unverified,
}

/// Who settled an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettledBy {
    /// The executor's `verify`.
    Executor,
    /// The verifier agent.
    Verifier,
    /// A human on a review ticket.
    Human,
}

/// `effect.settled`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectSettled {
    /// The effect.
    pub effect_id: EffectId,
    /// Verified or not.
    pub status: SettledStatus,
    /// By whom.
    pub by: SettledBy,
    /// What they said.
    pub reason: String,
}

/// What a dry run gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum DryRunOutcome {
    /// The executor's report (`ok` says whether it passed).
    Report {
        /// The report.
        report: DryRunReport,
    },
    /// The executor does not do dry runs.
    Unsupported,
    /// The call gave no usable answer (or no executor serves the kind).
    Error {
        /// `EFFECT_TIMEOUT`, `EFFECT_NO_EXECUTOR`...
        code: String,
        /// What happened.
        message: String,
    },
}

/// `effect.dry_run` (input).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectDryRun {
    /// The effect.
    pub effect_id: EffectId,
    /// What came back.
    pub outcome: DryRunOutcome,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `effect.kill_switch_checked` (input).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectKillSwitchChecked {
    /// The effect about to execute.
    pub effect_id: EffectId,
    /// The switches engaged (`global`, lane names), as read; every switch when the read
    /// failed.
    pub engaged: Vec<String>,
    /// Why the switches could not be read, when they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `effect.applied` (input).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectApplied {
    /// The effect.
    pub effect_id: EffectId,
    /// The executor's receipt.
    pub receipt: EffectReceipt,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
    /// In a fork: the ancestor's effect that applied this idempotency key, whose receipt
    /// this is; the executor was not called again (docs/replay.md#fork). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<EffectId>,
}

/// `effect.failed` (input).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectFailed {
    /// The effect.
    pub effect_id: EffectId,
    /// The executor's error code.
    pub code: String,
    /// What it said.
    pub message: String,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// `effect.verified` and `effect.recovered` (inputs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectVerification {
    /// The effect.
    pub effect_id: EffectId,
    /// The executor's answer (`unknown` when `verify` itself failed).
    pub verification: Verification,
    /// For `effect.recovered`: why the result was missing (a resume, or the execute
    /// call's error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// What a human effect ticket asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectTicketStep {
    /// The policy needs a human's approval (or an attempt over the retry cap):
    /// approving continues the path, denying refuses the effect.
    Approval,
    /// A dry run is required and the executor cannot do one: approving executes without
    /// it, denying refuses the effect.
    DryRunUnsupported,
    /// needs_review: nobody could confirm whether the effect applied. Approving records
    /// it verified (a human checked), denying records it unverified; never re-executed.
    Review,
    /// A browser-lane executor reported unstable selectors (in the sandbox or on the real
    /// target) and acted on nothing; the effect is not tried again. A person reviews the
    /// page: approving records that they carried the effect out by hand (settled verified,
    /// by a human), denying refuses it (docs/governance.md#browser-lane).
    ManualReview,
}
