//! The browser lane (docs/governance.md#browser-lane): an effect whose side-effect policy
//! marks its lane `browser` is driven through a page, so docket asks more of it than of an
//! API call, each step recorded.
//!
//! ```text
//! effect.ready (dry run passed, or admitted without one)
//!        │ sandbox_first and no sandbox run passed yet
//!        ▼
//! effect.sandbox_started (durable before the executor runs) ─▶ effect.sandbox_ran (input)
//!        │ receipt with drift evidence           │ receipt without it: effect.refused
//!        ▼                                       │   [browser.drift_evidence]
//! effect.ready (sandbox_passed) ─▶ the real      │ UNSTABLE_SELECTORS: manual-review ticket
//!        target through the execution gate       │ any other error: effect.refused [sandbox]
//! ```
//!
//! On the real target (`target` `live` in the executor's request) the executor's receipt
//! must carry drift evidence too: an effect the executor verified without it is not
//! settled by the executor but goes to a person (needs_review, naming
//! `browser.drift_evidence`); and `UNSTABLE_SELECTORS` opens a manual-review ticket
//! instead of telling the agent it failed. Nothing here retries an effect by itself.
//!
//! Runs recorded before decider version 14 (`BROWSER_LANE`) decide these effects as on
//! any other lane: [`Batch::browser_lane`] is the one place that asks.

use docket_policies::BrowserLane;
use docket_protocol::{EffectId, EffectReceipt, EffectTarget, UNSTABLE_SELECTORS};

use super::Batch;
use crate::events::BROWSER_LANE;
use crate::events::RunEvent;
use crate::events::effect::{
    EffectSandboxRan, EffectSandboxStarted, EffectTicketStep, ReadyBecause, SandboxOutcome,
};

/// The rule that refuses a browser-lane result without drift evidence.
pub(crate) const DRIFT_EVIDENCE_RULE: &str = "browser.drift_evidence";
/// The rule that refuses an effect whose sandbox run failed.
pub(crate) const SANDBOX_RULE: &str = "sandbox";

/// What is wrong with a browser-lane receipt's drift evidence, if anything.
fn evidence_problem(receipt: &EffectReceipt) -> Option<String> {
    match &receipt.drift {
        None => Some(
            "the receipt carries no drift evidence (drift.screenshot_sha256, drift.dom_sha256)"
                .to_owned(),
        ),
        Some(drift) => drift.problem(),
    }
}

impl Batch<'_> {
    /// The browser-lane settings of an effect's policy, when the run decides browser lanes
    /// (decider version [`BROWSER_LANE`]); `None` for every other effect.
    pub(super) fn browser_lane(&self, effect_id: &EffectId) -> Option<BrowserLane> {
        if self.state.decider_version() < BROWSER_LANE {
            return None;
        }
        let rec = self.state.effects.get(effect_id)?;
        self.bundle
            .browser_lane(&rec.requested.effect_kind, &rec.requested.lane)
            .cloned()
    }

    /// The target of the executor's request on the real site: `live` on a browser lane,
    /// none elsewhere.
    pub(super) fn live_target(&self, effect_id: &EffectId) -> Option<EffectTarget> {
        self.browser_lane(effect_id).map(|_| EffectTarget::Live)
    }

    /// An effect that just became ready for its real target: on a browser lane with
    /// `sandbox_first` whose sandbox run has not passed, records `effect.sandbox_started`
    /// instead (the runtime runs it next) and says so.
    pub(super) fn sandbox_first(&mut self, effect_id: &EffectId) -> bool {
        if !self
            .browser_lane(effect_id)
            .is_some_and(|lane| lane.sandbox_first)
        {
            return false;
        }
        let Some(rec) = self.state.effects.get(effect_id) else {
            return false;
        };
        if rec.sandbox_passed {
            return false;
        }
        let mut request = rec.executor_request(&self.run_id(), self.effect_timeout_ms(rec));
        request.target = Some(EffectTarget::Sandbox);
        self.push(RunEvent::EffectSandboxStarted(EffectSandboxStarted {
            effect_id: effect_id.to_owned(),
            request,
        }));
        true
    }

    /// The sandbox run's answer: the real target is next only after a receipt with drift
    /// evidence.
    pub(super) fn on_sandbox_ran(&mut self, ran: &EffectSandboxRan) {
        let effect_id = &ran.effect_id;
        match &ran.outcome {
            SandboxOutcome::Receipt { receipt } => match evidence_problem(receipt) {
                None => self.ready(effect_id, ReadyBecause::SandboxPassed),
                Some(problem) => self.refuse_effect(
                    effect_id,
                    DRIFT_EVIDENCE_RULE,
                    format!(
                        "the sandbox run succeeded but {problem}: a browser-lane result without drift evidence is refused, and the real target is not driven"
                    ),
                ),
            },
            SandboxOutcome::Error { code, message } if code == UNSTABLE_SELECTORS => {
                self.manual_review(effect_id, "its sandbox run", message);
            }
            SandboxOutcome::Error { code, message } => self.refuse_effect(
                effect_id,
                SANDBOX_RULE,
                format!(
                    "the sandbox run failed ({code}): {message}; the real target is not driven"
                ),
            ),
        }
    }

    /// An effect failed on its real target: on a browser lane, unstable selectors open a
    /// manual-review ticket (returns true); any other failure is the agent's to hear.
    pub(super) fn unstable_on_live(
        &mut self,
        effect_id: &EffectId,
        code: &str,
        message: &str,
    ) -> bool {
        if code != UNSTABLE_SELECTORS || self.browser_lane(effect_id).is_none() {
            return false;
        }
        self.manual_review(effect_id, "the real target", message);
        true
    }

    /// The executor says an effect applied: on a browser lane, a receipt without drift
    /// evidence does not settle it; a person reviews it (returns true).
    pub(super) fn applied_without_evidence(&mut self, effect_id: &EffectId) -> bool {
        if self.browser_lane(effect_id).is_none() {
            return false;
        }
        let problem = match self.state.effects.get(effect_id) {
            Some(rec) => match &rec.receipt {
                Some(receipt) => evidence_problem(receipt),
                None => Some("there is no receipt".to_owned()),
            },
            None => return false,
        };
        let Some(problem) = problem else {
            return false;
        };
        self.effect_ticket(
            effect_id,
            EffectTicketStep::Review,
            format!(
                "needs_review [{DRIFT_EVIDENCE_RULE}]: the executor says the effect applied on the real target, but {problem}, \
                 and a browser-lane result without drift evidence is refused; \
                 approve if it is in place, deny if not (it is never executed again)"
            ),
        );
        true
    }

    /// Unstable selectors: no blind retry, a person reviews the page.
    fn manual_review(&mut self, effect_id: &EffectId, where_: &str, message: &str) {
        self.effect_ticket(
            effect_id,
            EffectTicketStep::ManualReview,
            format!(
                "manual review: the executor reports unstable selectors on {where_} ({message}) and acted on nothing; \
                 it is not tried again. Approve once you have carried it out by hand (or found it in place), deny to refuse it"
            ),
        );
    }
}
