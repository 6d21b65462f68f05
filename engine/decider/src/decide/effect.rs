//! Side effects in the decider (docs/governance.md#side-effects): the path of one
//! `request_effect`, each step a recorded event.
//!
//! ```text
//! effect.requested ─▶ key applied before? ─yes─▶ effect.deduplicated (the recorded receipt)
//!        │ budget gate, admission decision (kind/lane policy, permission, key, attempt cap)
//!        ▼
//! effect.admitted ─▶ [dry run required] effect.dry_run (input) ─▶ effect.ready
//!        ▼                       (unsupported: a human decides; failed: effect.refused)
//! effect.kill_switch_checked (input) ─▶ full decision (kill switch first, dry run,
//!        │                               approval) ─▶ effect.refused | ticket
//!        ▼
//! effect.started (durable before the executor runs) ─▶ effect.applied | effect.failed
//!        ▼
//! effect.verified (input) ─▶ applied: effect.settled
//!                            not applied / unknown: the bundle's verifier agent is called
//!                            (never the publisher), else a needs_review ticket
//! ```
//!
//! An effect started without a recorded result (a crash, an execute call that gave no
//! answer) is never executed blindly: the runtime asks the executor and records
//! `effect.recovered`; applied → settled, not applied → `effect.ready` (executed once
//! more, through the kill switch again), unknown → needs_review ticket.
//!
//! On a browser lane the path gains a sandbox run and drift evidence (`browser.rs`).
//!
//! Every effect ends with one call back to the agent that asked, carrying an
//! `effect_result` decision input (applied, deduplicated, refused, failed, unverified).
//!
//! Each step's rows of the transition table, with the tests covering them, are in
//! `transitions.rs` at the crate root.

use docket_protocol::{CallId, EffectId, EpisodeId, TimerId};
use serde_json::{Value, json};
use std::sync::Arc;

use docket_policies::{
    PolicyBundle, PolicyDecision, SideEffectRequest, Verdict, side_effect_permission_rule,
};

use super::super::state::{EffectPhase, EffectRecord, RunState};
use super::{Batch, Rejection};
use crate::events::effect::*;
use crate::events::timer::TimerSet;
use crate::events::{
    CRITIQUE_FIRST, EFFECT_ESCALATION, RunEvent, SCHEDULED_EFFECTS, TicketSubject,
};
use docket_protocol::Verification;
use docket_protocol::{Action, AgentResponse, DecisionInput};

/// A recorded effect input, handed to `decide` as [`super::Command::RecordEffect`].
#[derive(Debug, Clone, PartialEq)]
pub enum EffectInput {
    /// `effect.dry_run`.
    DryRun(EffectDryRun),
    /// `effect.kill_switch_checked`.
    KillSwitchChecked(EffectKillSwitchChecked),
    /// `effect.sandbox_ran`.
    SandboxRan(EffectSandboxRan),
    /// `effect.applied`.
    Applied(EffectApplied),
    /// `effect.failed`.
    Failed(EffectFailed),
    /// `effect.verified`.
    Verified(EffectVerification),
    /// `effect.recovered`.
    Recovered(EffectVerification),
}

impl EffectInput {
    /// The effect it is about.
    #[must_use]
    pub fn effect_id(&self) -> &EffectId {
        match self {
            Self::DryRun(e) => &e.effect_id,
            Self::KillSwitchChecked(e) => &e.effect_id,
            Self::SandboxRan(e) => &e.effect_id,
            Self::Applied(e) => &e.effect_id,
            Self::Failed(e) => &e.effect_id,
            Self::Verified(e) | Self::Recovered(e) => &e.effect_id,
        }
    }

    pub(crate) fn at_ms(&self) -> i64 {
        match self {
            Self::DryRun(e) => e.at_ms,
            Self::KillSwitchChecked(e) => e.at_ms,
            Self::SandboxRan(e) => e.at_ms,
            Self::Applied(e) => e.at_ms,
            Self::Failed(e) => e.at_ms,
            Self::Verified(e) | Self::Recovered(e) => e.at_ms,
        }
    }

    pub(crate) fn to_event(&self) -> RunEvent {
        match self.clone() {
            Self::DryRun(e) => RunEvent::EffectDryRun(e),
            Self::KillSwitchChecked(e) => RunEvent::EffectKillSwitchChecked(e),
            Self::SandboxRan(e) => RunEvent::EffectSandboxRan(e),
            Self::Applied(e) => RunEvent::EffectApplied(e),
            Self::Failed(e) => RunEvent::EffectFailed(e),
            Self::Verified(e) => RunEvent::EffectVerified(e),
            Self::Recovered(e) => RunEvent::EffectRecovered(e),
        }
    }

    pub(crate) fn from_event(event: &RunEvent) -> Option<Self> {
        Some(match event.clone() {
            RunEvent::EffectDryRun(e) => Self::DryRun(e),
            RunEvent::EffectKillSwitchChecked(e) => Self::KillSwitchChecked(e),
            RunEvent::EffectSandboxRan(e) => Self::SandboxRan(e),
            RunEvent::EffectApplied(e) => Self::Applied(e),
            RunEvent::EffectFailed(e) => Self::Failed(e),
            RunEvent::EffectVerified(e) => Self::Verified(e),
            RunEvent::EffectRecovered(e) => Self::Recovered(e),
            _ => return None,
        })
    }

    /// The phases in which this input can be recorded.
    fn expected(&self) -> &'static [EffectPhase] {
        match self {
            Self::DryRun(_) => &[EffectPhase::DryRun],
            Self::KillSwitchChecked(_) => &[EffectPhase::Ready],
            Self::SandboxRan(_) => &[EffectPhase::Sandbox],
            Self::Applied(_) | Self::Recovered(_) => &[EffectPhase::Started],
            // A kind no executor serves fails before it starts.
            Self::Failed(_) => &[EffectPhase::Ready, EffectPhase::Started],
            Self::Verified(_) => &[EffectPhase::Applied],
        }
    }
}

/// Whether an effect input applies to the run as it stands.
pub(super) fn check_input(state: &RunState, input: &EffectInput) -> Result<(), Rejection> {
    let id = input.effect_id();
    let rec = state
        .effects
        .get(id)
        .ok_or_else(|| Rejection::UnknownEffect(id.to_string()))?;
    if input.expected().contains(&rec.phase) {
        Ok(())
    } else {
        Err(Rejection::EffectNotAwaiting {
            effect_id: id.clone(),
            input: input.to_event().kind(),
            phase: rec.phase.as_str(),
        })
    }
}

/// The episode budget gate (docs/governance.md#budgets: an episode past 70% of its budget
/// must finalize or escalate, so a further effect is refused with that reason; so is an
/// effect asked for from an episode that has stopped).
fn budget_gate(
    state: &RunState,
    bundle: &PolicyBundle,
    episode_id: &EpisodeId,
) -> Option<PolicyDecision> {
    state.episode_gate(bundle, episode_id)
}

impl Batch<'_> {
    /// An agent's `request_effect`: number it, deduplicate by key, gate it on the budget
    /// and admit or refuse it (or ask a human).
    pub(super) fn request_effect(&mut self, agent: &str, request_id: &CallId, action: &Action) {
        let Action::RequestEffect {
            kind,
            lane,
            idempotency_key,
            params,
            not_before,
        } = action
        else {
            return;
        };
        let Some(asker) = self.state.calls.get(request_id) else {
            return;
        };
        let episode_id = asker.recorded.episode_id.clone();
        let effect_id = EffectId::from(format!(
            "{}/effect-{}",
            self.run_id(),
            self.state.effects_requested + 1
        ));
        let same_key = |e: &&EffectRecord| {
            idempotency_key.is_some() && e.requested.idempotency_key == *idempotency_key
        };
        // Executions of this key that ended without applying (failed, or given up).
        let failed_before = self
            .state
            .effects
            .values()
            .filter(same_key)
            .filter(|e| e.phase.is_final() && e.starts > 0 && e.receipt.is_none())
            .count();
        let applied = self
            .state
            .effects
            .values()
            .filter(same_key)
            .filter_map(|e| {
                e.receipt
                    .clone()
                    .map(|r| (e.requested.effect_id.clone(), r))
            })
            // The effects map lists effects in the order they were requested: the first
            // applied one with this key.
            .next();
        let in_flight = self
            .state
            .effects
            .values()
            .filter(same_key)
            .find(|e| !e.phase.is_final() && e.receipt.is_none())
            .map(|e| e.requested.effect_id.clone());
        self.push(RunEvent::EffectRequested(EffectRequested {
            effect_id: effect_id.clone(),
            request_id: request_id.clone(),
            agent: agent.into(),
            episode_id: episode_id.clone(),
            effect_kind: kind.clone(),
            lane: lane.clone(),
            idempotency_key: idempotency_key.clone(),
            params: params.clone(),
            attempt: u32::try_from(failed_before)
                .unwrap_or(u32::MAX)
                .saturating_add(1),
            // Validated before it was recorded.
            not_before_ms: not_before
                .as_deref()
                .and_then(|t| crate::protocol::time_ms(t).ok()),
        }));
        if let (Some((of, receipt)), Some(key)) = (applied, idempotency_key) {
            self.push(RunEvent::EffectDeduplicated(EffectDeduplicated {
                effect_id: effect_id.clone(),
                of: of.clone(),
                idempotency_key: key.clone(),
                receipt,
            }));
            self.reply_effect(&effect_id, "deduplicated", json!({ "of": of }));
            return;
        }
        if let Some(other) = in_flight {
            self.refuse_effect(
                &effect_id,
                "idempotency.in_flight",
                format!("effect {other} with the same idempotency key is still in progress"),
            );
            return;
        }
        if not_before.is_some() && self.state.decider_version() < SCHEDULED_EFFECTS {
            self.refuse_effect(
                &effect_id,
                "decider_version",
                format!(
                    "runs recorded by decider version {} cannot schedule effects (scheduled effects came with version {SCHEDULED_EFFECTS})",
                    self.state.decider_version()
                ),
            );
            return;
        }
        if let Some(decision) = budget_gate(&self.state, self.bundle, &episode_id) {
            self.decided(&effect_id, decision);
            return;
        }
        let Some(rec) = self.state.effects.get(&effect_id) else {
            return;
        };
        let decision = self
            .bundle
            .decide_side_effect_admission(&side_effect_request(
                rec,
                Vec::new(),
                self.critiqued(rec),
            ));
        self.decided(&effect_id, decision);
    }

    /// Records an admission decision and acts on it.
    fn decided(&mut self, effect_id: &EffectId, decision: PolicyDecision) {
        self.record_effect_decision(effect_id, decision, |b| b.admit(effect_id, false));
    }

    /// Records a decision about an effect; then `allowed`, or the refusal, or an approval
    /// ticket, as the verdict says.
    fn record_effect_decision(
        &mut self,
        effect_id: &EffectId,
        decision: PolicyDecision,
        allowed: impl FnOnce(&mut Self),
    ) {
        let verdict = decision.verdict;
        let rule = decision.rule_id.to_string();
        let reason = decision.reason.to_string();
        self.push(RunEvent::PolicyDecided {
            subject: effect_id.to_string(),
            decision,
        });
        match verdict {
            Verdict::Allow => allowed(self),
            Verdict::Deny => self.refuse_effect(effect_id, &rule, reason),
            Verdict::NeedsApproval => {
                self.effect_ticket(effect_id, EffectTicketStep::Approval, reason);
            }
        }
    }

    fn admit(&mut self, effect_id: &EffectId, human_approved: bool) {
        let Some(rec) = self.state.effects.get(effect_id) else {
            return;
        };
        let dry_run = self
            .bundle
            .side_effect_policy(&rec.requested.effect_kind, &rec.requested.lane)
            .is_some_and(|p| p.dry_run_required);
        self.push(RunEvent::EffectAdmitted(EffectAdmitted {
            effect_id: effect_id.to_owned(),
            dry_run,
            human_approved,
        }));
        if !dry_run && !self.sandbox_first(effect_id) {
            self.hold_until_due(effect_id);
        }
    }

    /// An effect due at its execution gate ([`ReadyBecause`]), unless a browser lane
    /// runs it in its sandbox first (`browser.rs`) or its `not_before` is later than this
    /// batch's recorded time: then it is held by a timer.
    pub(super) fn ready(&mut self, effect_id: &EffectId, because: ReadyBecause) {
        self.push(RunEvent::EffectReady(EffectReady {
            effect_id: effect_id.to_owned(),
            because,
        }));
        if because != ReadyBecause::NotAppliedOnResume && !self.sandbox_first(effect_id) {
            self.hold_until_due(effect_id);
        }
    }

    /// Holds a ready effect whose `not_before` is later than now (the batch's recorded
    /// time) by a timer naming it: it goes to its execution gate, where the kill switch
    /// and the policy are read, when the timer fires (`on_effect_due`).
    fn hold_until_due(&mut self, effect_id: &EffectId) {
        let Some(rec) = self.state.effects.get(effect_id) else {
            return;
        };
        let Some(due_at_ms) = rec.requested.not_before_ms.filter(|t| *t > self.now_ms) else {
            return;
        };
        let timer_id = TimerId::from(format!(
            "{}/timer-{}",
            self.run_id(),
            self.state.timers_set + 1
        ));
        let set = TimerSet {
            timer_id,
            request_id: rec.requested.request_id.clone(),
            agent: rec.requested.agent.clone(),
            episode_id: rec.requested.episode_id.clone(),
            due_at_ms,
            reason: format!(
                "{} on {} is scheduled: not executed before its time",
                rec.requested.effect_kind, rec.requested.lane
            ),
            counts_against_wall_time: self.bundle.waiting_counts_against_wall_time(),
            effect_id: Some(effect_id.to_owned()),
        };
        self.push(RunEvent::TimerSet(set));
    }

    /// A scheduled effect's timer fired: it goes to its execution gate.
    pub(super) fn on_effect_due(&mut self, effect_id: &EffectId) {
        if let Some(rec) = self.state.effects.get(effect_id) {
            self.episode = rec.requested.episode_id.clone();
        }
        self.push(RunEvent::EffectReady(EffectReady {
            effect_id: effect_id.to_owned(),
            because: ReadyBecause::Due,
        }));
    }

    /// A recorded effect input: what follows from it.
    pub(super) fn on_effect_input(&mut self, input: &EffectInput) {
        let effect_id = input.effect_id().clone();
        match input {
            EffectInput::DryRun(e) => match &e.outcome {
                DryRunOutcome::Report { report } if report.ok => {
                    self.ready(&effect_id, ReadyBecause::DryRunPassed);
                }
                DryRunOutcome::Report { report } => {
                    let why = report.message.clone().unwrap_or_default();
                    self.refuse_effect(&effect_id, "dry_run", format!("the dry run failed: {why}"));
                }
                DryRunOutcome::Unsupported => self.effect_ticket(
                    &effect_id,
                    EffectTicketStep::DryRunUnsupported,
                    "the policy requires a dry run and this effect's executor cannot do one; \
                     approve to execute without it, deny to refuse the effect"
                        .to_owned(),
                ),
                DryRunOutcome::Error { code, message } => self.refuse_effect(
                    &effect_id,
                    "dry_run",
                    format!("the dry run gave no answer ({code}): {message}"),
                ),
            },
            EffectInput::KillSwitchChecked(e) => self.execution_gate(&effect_id, &e.engaged),
            EffectInput::SandboxRan(e) => self.on_sandbox_ran(e),
            // Recorded; the runtime verifies next.
            EffectInput::Applied(_) => {}
            EffectInput::Failed(e) => {
                if !self.unstable_on_live(&effect_id, &e.code, &e.message) {
                    self.reply_effect(
                        &effect_id,
                        "failed",
                        json!({ "code": e.code, "message": e.message }),
                    );
                }
            }
            EffectInput::Verified(e) => match &e.verification {
                Verification::Applied { .. } if self.applied_without_evidence(&effect_id) => {}
                Verification::Applied { .. } => self.settle_effect(
                    &effect_id,
                    SettledStatus::Verified,
                    SettledBy::Executor,
                    "the executor verified it applied".to_owned(),
                ),
                other => self.verification_failed(&effect_id, other),
            },
            EffectInput::Recovered(e) => match &e.verification {
                Verification::Applied { .. } if self.applied_without_evidence(&effect_id) => {}
                Verification::Applied { .. } => self.settle_effect(
                    &effect_id,
                    SettledStatus::Verified,
                    SettledBy::Executor,
                    "recovered: the executor says it applied".to_owned(),
                ),
                // Executed once more, through the kill switch again; an effect whose
                // execution went unanswered twice is given up, not retried forever.
                Verification::NotApplied if self.state.effects.get(&effect_id).is_some_and(|r| r.starts < 2) => {
                    self.push(RunEvent::EffectReady(EffectReady {
                        effect_id,
                        because: ReadyBecause::NotAppliedOnResume,
                    }));
                }
                Verification::NotApplied => self.refuse_effect(
                    &effect_id,
                    "execution_unanswered",
                    "its execution went unanswered twice and the executor says it did not apply; \
                     a new request with the same key is a new attempt under the retry cap"
                        .to_owned(),
                ),
                Verification::Unknown { message } => self.effect_ticket(
                    &effect_id,
                    EffectTicketStep::Review,
                    format!(
                        "needs_review: the effect was started but its result is unknown ({message}); \
                         approve if it is in place, deny if not (it is never executed again)"
                    ),
                ),
            },
        }
    }

    /// Whether the asking episode has had its second look (a critique child finished ok);
    /// runs of decider versions before [`CRITIQUE_FIRST`] are not held by `critique_first`.
    fn critiqued(&self, rec: &EffectRecord) -> bool {
        self.state.decider_version() < CRITIQUE_FIRST
            || self
                .state
                .episodes
                .get(&rec.requested.episode_id)
                .is_some_and(|e| e.critiqued)
    }

    /// The full decision, immediately before execution, with the kill switches as read.
    fn execution_gate(&mut self, effect_id: &EffectId, engaged: &[String]) {
        let Some(rec) = self.state.effects.get(effect_id) else {
            return;
        };
        let decision = self.bundle.decide_side_effect(&side_effect_request(
            rec,
            engaged.to_vec(),
            self.critiqued(rec),
        ));
        let mut request = rec.executor_request(&self.run_id(), self.effect_timeout_ms(rec));
        request.target = self.live_target(effect_id);
        self.record_effect_decision(effect_id, decision, |b| {
            b.push(RunEvent::EffectStarted(EffectStarted {
                effect_id: effect_id.to_owned(),
                request,
            }));
        });
    }

    /// How long the executor has for one call of this effect: the workflow's
    /// `[effects.KIND] timeout_ms`, else the bundle's default.
    pub(super) fn effect_timeout_ms(&self, rec: &EffectRecord) -> u64 {
        let default_ms = self.bundle.spec().defaults.timeout_ms;
        self.state.run.as_ref().map_or(default_ms, |run| {
            run.workflow
                .effect_timeout_ms(&rec.requested.effect_kind, default_ms)
        })
    }

    /// Verification failed or is unknown: an agent re-checks before a human is asked
    /// (docs/governance.md#side-effects). The policy's verifier agent re-checks (never the
    /// publisher); without one, a human.
    fn verification_failed(&mut self, effect_id: &EffectId, verification: &Verification) {
        let Some(rec) = self.state.effects.get(effect_id).cloned() else {
            return;
        };
        let said = match verification {
            Verification::NotApplied => "not applied".to_owned(),
            Verification::Unknown { message } => format!("unknown ({message})"),
            Verification::Applied { .. } => "applied".to_owned(),
        };
        let verifier = self
            .bundle
            .side_effect_policy(&rec.requested.effect_kind, &rec.requested.lane)
            .and_then(|p| p.verifier.clone());
        let Some(verifier) = verifier else {
            self.effect_ticket(
                effect_id,
                EffectTicketStep::Review,
                format!(
                    "needs_review: the executor reported the effect applied, but its verification says {said}; \
                     approve if it is in place, deny if not (it is never executed again)"
                ),
            );
            return;
        };
        let payload = json!({
            "effect_id": effect_id,
            "kind": rec.requested.effect_kind,
            "lane": rec.requested.lane,
            "idempotency_key": rec.key(),
            "params": rec.requested.params,
            "receipt": rec.receipt,
            "verification": verification,
        });
        let request = self
            .new_request(&rec.requested.agent, &verifier, VERIFY_EFFECT_CAPABILITY)
            .with_decision_input(EFFECTS_SOURCE, "effect_receipt", payload);
        self.push(RunEvent::EffectVerifierCalled(EffectVerifierCalled {
            effect_id: effect_id.to_owned(),
            request_id: request.request_id.clone(),
            verifier,
        }));
        self.schedule(request, None, None, None);
    }

    /// The verifier's answer: `finish` with `{"verified": true}` settles the effect;
    /// anything else (false, no verdict, an error) goes to a human.
    pub(super) fn on_verifier_answer(
        &mut self,
        effect_id: &EffectId,
        verifier: &str,
        response: Option<&AgentResponse>,
        failure: Option<&str>,
    ) {
        let output = response.and_then(|r| {
            r.actions.iter().find_map(|a| match a {
                Action::Finish { output } => Some(output.clone()),
                _ => None,
            })
        });
        let verified = output
            .as_ref()
            .and_then(|o| o.get("verified"))
            .and_then(Value::as_bool);
        let said = output
            .as_ref()
            .and_then(|o| o.get("reason"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| failure.map(str::to_owned))
            .unwrap_or_default();
        if verified == Some(true) {
            self.settle_effect(
                effect_id,
                SettledStatus::Verified,
                SettledBy::Verifier,
                format!("{verifier}: {said}"),
            );
        } else {
            self.effect_ticket(
                effect_id,
                EffectTicketStep::Review,
                format!(
                    "needs_review: verifier {verifier} could not confirm the effect ({said}); \
                     approve if it is in place, deny if not (it is never executed again)"
                ),
            );
        }
    }

    /// A human decided an effect ticket.
    pub(super) fn on_effect_ticket(
        &mut self,
        effect_id: &EffectId,
        step: EffectTicketStep,
        approved: bool,
        by: &str,
        reason: &str,
    ) {
        let admitted = self
            .state
            .effects
            .get(effect_id)
            .is_some_and(|e| e.admitted);
        match (step, approved) {
            (EffectTicketStep::Approval, true) if !admitted => self.admit(effect_id, true),
            (EffectTicketStep::Approval, true) => self.ready(effect_id, ReadyBecause::Approved),
            (EffectTicketStep::DryRunUnsupported, true) => {
                self.ready(effect_id, ReadyBecause::DryRunWaived);
            }
            (EffectTicketStep::ManualReview, true) => self.settle_effect(
                effect_id,
                SettledStatus::Verified,
                SettledBy::Human,
                format!("{by} carried it out by hand (or found it in place): {reason}"),
            ),
            (
                EffectTicketStep::Approval
                | EffectTicketStep::DryRunUnsupported
                | EffectTicketStep::ManualReview,
                false,
            ) => self.refuse_effect(
                effect_id,
                "human",
                format!("{by} denied the effect: {reason}"),
            ),
            (EffectTicketStep::Review, approved) => self.settle_effect(
                effect_id,
                if approved {
                    SettledStatus::Verified
                } else {
                    SettledStatus::Unverified
                },
                SettledBy::Human,
                format!("{by}: {reason}"),
            ),
        }
    }

    pub(super) fn refuse_effect(&mut self, effect_id: &EffectId, rule_id: &str, reason: String) {
        let escalated_to = self.escalates_to(effect_id, rule_id);
        self.push(RunEvent::EffectRefused(EffectRefused {
            effect_id: effect_id.to_owned(),
            rule_id: rule_id.to_owned(),
            reason: reason.clone(),
            escalated_to: escalated_to.clone(),
        }));
        // Refusals count as failures of their class (`effect_refused`,
        // docs/governance.md#stop-conditions), escalated ones excepted; at the limit the
        // asking episode stops `failure_repeats` instead of being told.
        let episode = self
            .state
            .effects
            .get(effect_id)
            .map(|e| e.requested.episode_id.clone());
        if episode.is_some_and(|id| self.refusals_repeat(&id)) {
            return;
        }
        let mut told = json!({ "rule_id": rule_id, "reason": reason });
        if let (Some(parent), Some(map)) = (escalated_to, told.as_object_mut()) {
            map.insert("escalated_to".to_owned(), json!(parent));
        }
        self.reply_effect(effect_id, "refused", told);
    }

    /// The parent episode an effect refused by `rule_id` escalates to: one asked for in a
    /// child episode by an agent without permission for its kind (subagents are read-only
    /// and leave side effects to their parent; docs/governance.md#effects-escalate-to-the-parent).
    fn escalates_to(&self, effect_id: &EffectId, rule_id: &str) -> Option<EpisodeId> {
        if self.state.decider_version() < EFFECT_ESCALATION {
            return None;
        }
        let rec = self.state.effects.get(effect_id)?;
        if rule_id != side_effect_permission_rule(&rec.requested.agent) {
            return None;
        }
        self.episode(&rec.requested.episode_id)?.parent
    }

    fn settle_effect(
        &mut self,
        effect_id: &EffectId,
        status: SettledStatus,
        by: SettledBy,
        reason: String,
    ) {
        self.push(RunEvent::EffectSettled(EffectSettled {
            effect_id: effect_id.to_owned(),
            status,
            by,
            reason: reason.clone(),
        }));
        let word = match status {
            SettledStatus::Verified => "applied",
            SettledStatus::Unverified => "unverified",
        };
        self.reply_effect(
            effect_id,
            word,
            json!({ "verified_by": by, "reason": reason }),
        );
    }

    pub(super) fn effect_ticket(
        &mut self,
        effect_id: &EffectId,
        step: EffectTicketStep,
        reason: String,
    ) {
        let Some(rec) = self.state.effects.get(effect_id) else {
            return;
        };
        let what = format!(
            "{} asks for `{}` in lane `{}` (key {}, {effect_id})",
            rec.requested.agent,
            rec.requested.effect_kind,
            rec.requested.lane,
            rec.key()
        );
        let ticket = self.next_ticket();
        self.push(RunEvent::Escalated {
            ticket,
            reason: format!("{what}: {reason}"),
            subject: TicketSubject::Effect {
                effect_id: effect_id.to_owned(),
                step,
            },
        });
    }

    /// Calls the asking agent again with the effect's result as a decision input, the way
    /// a capability's answer comes back.
    fn reply_effect(&mut self, effect_id: &EffectId, status: &str, extra: Value) {
        let Some(rec) = self.state.effects.get(effect_id).cloned() else {
            return;
        };
        let Some(asker) = self.state.calls.get(&rec.requested.request_id).cloned() else {
            return;
        };
        let mut result = json!({
            "effect_id": effect_id,
            "kind": rec.requested.effect_kind,
            "lane": rec.requested.lane,
            "idempotency_key": rec.key(),
            "status": status,
            "receipt": rec.receipt,
        });
        if let (Some(map), Value::Object(more)) = (result.as_object_mut(), extra) {
            map.extend(more);
        }
        let Some(mut request) = self.request_again(&asker.recorded.request_id) else {
            return;
        };
        request.decision_inputs.push(DecisionInput::new(
            EFFECTS_SOURCE,
            EFFECT_RESULT_TYPE,
            Arc::new(result),
        ));
        let asked = asker.recorded.request_id.clone();
        self.schedule_again(&asked, request, asker.reply_to, None, asker.branch_of);
    }
}

/// The policy question for an effect as it stands.
fn side_effect_request(
    rec: &EffectRecord,
    engaged: Vec<String>,
    critiqued: bool,
) -> SideEffectRequest {
    SideEffectRequest {
        agent: rec.requested.agent.to_string(),
        kind: rec.requested.effect_kind.clone(),
        lane: rec.requested.lane.clone(),
        idempotency_key: rec.requested.idempotency_key.clone(),
        dry_run_passed: rec.dry_run_passed,
        human_approved: rec.human_approved,
        sandbox_passed: rec.sandbox_passed,
        critiqued,
        attempt: rec.requested.attempt,
        engaged_kill_switches: engaged,
    }
}
