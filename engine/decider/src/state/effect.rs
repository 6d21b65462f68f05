//! Side effects as folded from their events: each effect's record (request, decision,
//! phase, attempts, receipt, verification) and the work the runtime must do next for it
//! (docs/governance.md#side-effects).

use super::RunState;
use serde::{Deserialize, Serialize};

use crate::events::effect::*;
use crate::events::{RunEvent, TicketSubject};
use docket_protocol::RunId;
use docket_protocol::{DryRunReport, EffectReceipt, EffectRequest, Verification};

/// Where an effect stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectPhase {
    /// Requested, being decided in its batch.
    Requested,
    /// Its dry run is due.
    DryRun,
    /// Due at its execution gate (kill switch, full decision).
    Ready,
    /// Its sandbox run is due, or under way (a browser lane with `sandbox_first`).
    Sandbox,
    /// Decided and dry-run; held by its timer until its `not_before` time.
    Scheduled,
    /// A ticket is open for it.
    AwaitingHuman,
    /// Started: the executor was (or is being) called, no result recorded.
    Started,
    /// Applied; its verification is due.
    Applied,
    /// A verifier agent is re-checking it.
    Verifying,
    /// Final: verified or not after it applied.
    Settled,
    /// Final: its key was already applied; the recorded receipt was returned.
    Deduplicated,
    /// Final: not executed.
    Refused,
    /// Final: the executor failed it.
    Failed,
}

impl EffectPhase {
    /// Nothing more will happen to the effect.
    #[must_use]
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Settled | Self::Deduplicated | Self::Refused | Self::Failed
        )
    }

    /// The word used in messages.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::DryRun => "waiting for its dry run",
            Self::Ready => "waiting for its execution gate",
            Self::Sandbox => "running against its sandbox target",
            Self::Scheduled => "scheduled",
            Self::AwaitingHuman => "waiting for a human",
            Self::Started => "started",
            Self::Applied => "applied, not verified",
            Self::Verifying => "being verified",
            Self::Settled => "settled",
            Self::Deduplicated => "deduplicated",
            Self::Refused => "refused",
            Self::Failed => "failed",
        }
    }
}

/// One side effect of a run, folded from its events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectRecord {
    /// The request as recorded.
    pub requested: EffectRequested,
    /// Where it stands.
    pub phase: EffectPhase,
    /// Passed admission.
    pub admitted: bool,
    /// A dry run passed (or a human waived an impossible one).
    pub dry_run_passed: bool,
    /// A human approved it.
    pub human_approved: bool,
    /// The dry run's report.
    pub dry_run: Option<DryRunReport>,
    /// What the executor was given, once started.
    pub started: Option<EffectRequest>,
    /// How many times it was started (more than once only after a not-applied recovery).
    pub starts: u32,
    /// The receipt, once applied.
    pub receipt: Option<EffectReceipt>,
    /// The last refusal or failure (rule or code, and reason).
    pub outcome: Option<(String, String)>,
    /// What the executor was given for its sandbox run (a browser lane with
    /// `sandbox_first`), once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_started: Option<EffectRequest>,
    /// The sandbox run's receipt, with its drift evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<EffectReceipt>,
    /// The sandbox run succeeded with drift evidence: the real target may follow.
    #[serde(default)]
    pub sandbox_passed: bool,
}

impl EffectRecord {
    /// The idempotency key the executor applies at most once: the agent's, or the effect
    /// id when it gave none (so a resumed run still never applies the effect twice).
    #[must_use]
    pub fn key(&self) -> String {
        self.requested
            .idempotency_key
            .clone()
            .unwrap_or_else(|| self.requested.effect_id.to_string())
    }

    /// What the executor is given (dry run and execution alike).
    #[must_use]
    pub fn executor_request(&self, run_id: &RunId, timeout_ms: u64) -> EffectRequest {
        EffectRequest {
            run_id: run_id.clone(),
            episode_id: self.requested.episode_id.clone(),
            effect_id: self.requested.effect_id.clone(),
            kind: self.requested.effect_kind.clone(),
            lane: self.requested.lane.clone(),
            idempotency_key: self.key(),
            params: self.requested.params.clone(),
            attempt: self.requested.attempt,
            timeout_ms,
            fence: None,
            target: None,
        }
    }
}

/// The next thing the runtime must do for an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectWork {
    /// Call `dry_run` and record `effect.dry_run`.
    DryRun,
    /// Read the kill switches, record them, and execute if `effect.started` follows.
    Execute,
    /// Call `execute` with the recorded sandbox request (`effect.sandbox_started`) and
    /// record `effect.sandbox_ran`. Found again after a crash, it runs again: a sandbox
    /// changes nothing real.
    Sandbox,
    /// Call `verify` on an applied effect and record `effect.verified`.
    Verify,
    /// Started without a recorded result: call `verify` and record `effect.recovered`
    /// (never `execute`).
    Recover,
}

impl RunState {
    /// Effect work due now, in request order. An effect found `Started` here was started
    /// by a process that did not record its result: the runtime executes in the same
    /// step as it records `effect.started`.
    #[must_use]
    pub fn pending_effects(&self) -> Vec<(&EffectRecord, EffectWork)> {
        self.effects
            .values()
            .filter_map(|e| {
                let work = match e.phase {
                    EffectPhase::DryRun => EffectWork::DryRun,
                    EffectPhase::Ready => EffectWork::Execute,
                    EffectPhase::Sandbox => EffectWork::Sandbox,
                    EffectPhase::Applied => EffectWork::Verify,
                    EffectPhase::Started => EffectWork::Recover,
                    _ => return None,
                };
                Some((e, work))
            })
            .collect()
    }

    /// Some effect's path is not over.
    #[must_use]
    pub fn effects_in_flight(&self) -> bool {
        self.effects.values().any(|e| !e.phase.is_final())
    }

    /// Some effect asked by a branch of fan-out `group` is not over (the branch will be
    /// called again with its result, so the group is not joined yet).
    #[must_use]
    pub fn effects_in_flight_in(&self, group: &str) -> bool {
        self.effects.values().any(|e| {
            !e.phase.is_final()
                && self
                    .calls
                    .get(&e.requested.request_id)
                    .is_some_and(|c| c.branch_of.as_deref() == Some(group))
        })
    }

    /// Folds an effect event (`apply` dispatches every `effect.*` kind here).
    pub(crate) fn apply_effect(&mut self, event: &RunEvent) {
        let id = match event {
            RunEvent::EffectRequested(e) => {
                self.effects_requested += 1;
                self.effects.insert(
                    e.effect_id.clone(),
                    EffectRecord {
                        requested: e.clone(),
                        phase: EffectPhase::Requested,
                        admitted: false,
                        dry_run_passed: false,
                        human_approved: false,
                        dry_run: None,
                        started: None,
                        starts: 0,
                        receipt: None,
                        outcome: None,
                        sandbox_started: None,
                        sandbox: None,
                        sandbox_passed: false,
                    },
                );
                return;
            }
            RunEvent::EffectDeduplicated(e) => &e.effect_id,
            RunEvent::EffectAdmitted(e) => &e.effect_id,
            RunEvent::EffectRefused(e) => &e.effect_id,
            RunEvent::EffectReady(e) => &e.effect_id,
            RunEvent::EffectStarted(e) => &e.effect_id,
            RunEvent::EffectSandboxStarted(e) => &e.effect_id,
            RunEvent::EffectSandboxRan(e) => &e.effect_id,
            RunEvent::EffectVerifierCalled(e) => {
                self.verifier_calls
                    .insert(e.request_id.clone(), e.effect_id.clone());
                &e.effect_id
            }
            RunEvent::EffectSettled(e) => &e.effect_id,
            RunEvent::EffectDryRun(e) => &e.effect_id,
            RunEvent::EffectKillSwitchChecked(e) => &e.effect_id,
            RunEvent::EffectApplied(e) => &e.effect_id,
            RunEvent::EffectFailed(e) => &e.effect_id,
            RunEvent::EffectVerified(e) | RunEvent::EffectRecovered(e) => &e.effect_id,
            RunEvent::Escalated {
                subject: TicketSubject::Effect { effect_id, .. },
                ..
            } => effect_id,
            _ => return,
        };
        let Some(rec) = self.effects.get_mut(id) else {
            return;
        };
        match event {
            RunEvent::EffectDeduplicated(e) => {
                rec.phase = EffectPhase::Deduplicated;
                rec.receipt = Some(e.receipt.clone());
            }
            RunEvent::EffectAdmitted(e) => {
                rec.admitted = true;
                rec.human_approved |= e.human_approved;
                rec.phase = if e.dry_run {
                    EffectPhase::DryRun
                } else {
                    EffectPhase::Ready
                };
            }
            RunEvent::EffectRefused(e) => {
                rec.phase = EffectPhase::Refused;
                rec.outcome = Some((e.rule_id.clone(), e.reason.clone()));
            }
            RunEvent::EffectReady(e) => {
                rec.phase = EffectPhase::Ready;
                match e.because {
                    ReadyBecause::DryRunPassed => rec.dry_run_passed = true,
                    ReadyBecause::Approved => rec.human_approved = true,
                    ReadyBecause::DryRunWaived => {
                        rec.dry_run_passed = true;
                        rec.human_approved = true;
                    }
                    ReadyBecause::SandboxPassed => rec.sandbox_passed = true,
                    ReadyBecause::NotAppliedOnResume | ReadyBecause::Due => {}
                }
            }
            RunEvent::EffectStarted(e) => {
                rec.phase = EffectPhase::Started;
                rec.started = Some(e.request.clone());
                rec.starts += 1;
            }
            RunEvent::EffectSandboxStarted(e) => {
                rec.phase = EffectPhase::Sandbox;
                rec.sandbox_started = Some(e.request.clone());
            }
            RunEvent::EffectSandboxRan(e) => match &e.outcome {
                SandboxOutcome::Receipt { receipt } => rec.sandbox = Some(receipt.clone()),
                SandboxOutcome::Error { code, message } => {
                    rec.outcome = Some((code.clone(), message.clone()));
                }
            },
            RunEvent::EffectVerifierCalled(_) => rec.phase = EffectPhase::Verifying,
            RunEvent::EffectSettled(_) => rec.phase = EffectPhase::Settled,
            RunEvent::EffectDryRun(e) => {
                if let DryRunOutcome::Report { report } = &e.outcome {
                    rec.dry_run = Some(report.clone());
                }
            }
            RunEvent::EffectApplied(e) => {
                rec.phase = EffectPhase::Applied;
                rec.receipt = Some(e.receipt.clone());
            }
            RunEvent::EffectFailed(e) => {
                rec.phase = EffectPhase::Failed;
                rec.outcome = Some((e.code.clone(), e.message.clone()));
            }
            RunEvent::EffectRecovered(e) => {
                if let Verification::Applied { result } = &e.verification {
                    rec.receipt = Some(EffectReceipt {
                        result: result.clone(),
                        drift: None,
                    });
                }
            }
            RunEvent::Escalated { .. } => rec.phase = EffectPhase::AwaitingHuman,
            _ => {}
        }
    }
}
