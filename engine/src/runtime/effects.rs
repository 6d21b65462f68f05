//! The runtime's side of side effects (seed 004 §1, §8): the effect work the decider left
//! due (dry runs, execution gates, verifications, recoveries), done one step at a time
//! with the registered executors, each answer recorded as an input before anything else
//! happens.
//!
//! The order that makes an effect safe to resume: the kill switches are read and recorded,
//! the decider appends `effect.started` (durable once the append returns), and only then
//! is `execute` called. An effect found started without a result is never executed
//! blindly: `verify` decides (see `EffectWork::Recover`).

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use docket_policies::PolicyBundle;
use docket_store::EventStore;

use super::{Runtime, RuntimeError, now_ms};
use crate::decider::{
    Command, DryRunOutcome, EffectApplied, EffectDryRun, EffectFailed, EffectInput,
    EffectKillSwitchChecked, EffectPhase, EffectVerification, EffectWork, RunState,
};
use crate::effect::{
    EffectCallError, EffectExecutor, EffectFuture, EffectRequest, KillSwitchSource, Verification,
};
use crate::workflow::WorkflowSpec;

/// Waits for an executor call, at most its `timeout_ms` plus a second (executors enforce
/// the timeout themselves; this catches one that does not).
async fn bounded<T>(
    request: &EffectRequest,
    call: EffectFuture<'_, T>,
) -> Result<T, EffectCallError> {
    let bound = Duration::from_millis(request.timeout_ms.saturating_add(1_000));
    match tokio::time::timeout(bound, call).await {
        Ok(answer) => answer,
        Err(_) => Err(EffectCallError::Timeout {
            effect_id: request.effect_id.clone(),
            timeout_ms: request.timeout_ms,
        }),
    }
}

fn effect_span(request: &EffectRequest) -> tracing::Span {
    tracing::info_span!(
        "effect",
        run = %request.run_id,
        effect_id = %request.effect_id,
        kind = %request.kind,
        lane = %request.lane,
        key = %request.idempotency_key,
    )
}

/// What `verify` says, with an unusable answer read as "unknown" (a human decides).
async fn verification(executor: &dyn EffectExecutor, request: &EffectRequest) -> Verification {
    match bounded(request, executor.verify(request))
        .instrument(effect_span(request))
        .await
    {
        Ok(v) => v,
        Err(e) => Verification::Unknown {
            message: format!("verify failed: {e}"),
        },
    }
}

impl<S: EventStore + 'static> Runtime<S> {
    /// Registers an in-process effect executor for effect `kind`.
    pub fn register_effect(&self, kind: &str, executor: Arc<dyn EffectExecutor>) {
        self.inner.effects.register(kind, executor);
    }

    /// Where the kill switches are read before every execution (by default in memory,
    /// none engaged).
    pub fn set_kill_switch(&self, source: Arc<dyn KillSwitchSource>) {
        *self
            .inner
            .kill_switch
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = source;
    }

    fn kill_switch(&self) -> Arc<dyn KillSwitchSource> {
        self.inner
            .kill_switch
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    async fn record_effect(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        input: EffectInput,
    ) -> Result<(), RuntimeError> {
        self.decide_and_append(state, bundle, Command::RecordEffect(input))
            .await
    }

    /// Does the first piece of due effect work and records its answer; false when none
    /// is due.
    pub(super) async fn effect_step(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        workflow: &WorkflowSpec,
    ) -> Result<bool, RuntimeError> {
        let Some((record, work)) = state
            .pending_effects()
            .first()
            .map(|(r, w)| ((*r).clone(), *w))
        else {
            return Ok(false);
        };
        let run_id = state.run_id().unwrap_or_default().to_owned();
        let effect_id = record.requested.effect_id.clone();
        let executor = self
            .inner
            .effects
            .get(workflow, &record.requested.effect_kind);
        match work {
            EffectWork::DryRun => {
                let request = record.executor_request(&run_id, bundle.spec().defaults.timeout_ms);
                let outcome = match executor {
                    Err(e) => DryRunOutcome::Error {
                        code: e.code().to_owned(),
                        message: e.to_string(),
                    },
                    Ok(ex) if !ex.supports_dry_run() => DryRunOutcome::Unsupported,
                    Ok(ex) => match bounded(&request, ex.dry_run(&request))
                        .instrument(effect_span(&request))
                        .await
                    {
                        Ok(report) => DryRunOutcome::Report { report },
                        Err(e) => DryRunOutcome::Error {
                            code: e.code().to_owned(),
                            message: e.to_string(),
                        },
                    },
                };
                let input = EffectInput::DryRun(EffectDryRun {
                    effect_id,
                    outcome,
                    at_ms: now_ms(),
                });
                self.record_effect(state, bundle, input).await?;
            }
            EffectWork::Execute => {
                let executor = match executor {
                    Ok(ex) => ex,
                    Err(e) => {
                        let input = EffectInput::Failed(EffectFailed {
                            effect_id,
                            code: e.code().to_owned(),
                            message: e.to_string(),
                            at_ms: now_ms(),
                        });
                        self.record_effect(state, bundle, input).await?;
                        return Ok(true);
                    }
                };
                // Read immediately before execution, so a switch flipped while the run
                // goes takes effect at its next effect.
                let (engaged, error) = match self.kill_switch().engaged() {
                    Ok(engaged) => (engaged, None),
                    Err(e) => {
                        let mut all = vec![
                            docket_policies::side_effect::GLOBAL_KILL_SWITCH.to_owned(),
                            record.requested.lane.clone(),
                        ];
                        all.sort();
                        (all, Some(e.to_string()))
                    }
                };
                let input = EffectInput::KillSwitchChecked(EffectKillSwitchChecked {
                    effect_id: effect_id.clone(),
                    engaged,
                    error,
                    at_ms: now_ms(),
                });
                self.record_effect(state, bundle, input).await?;
                let started = state
                    .effects
                    .get(&effect_id)
                    .filter(|e| e.phase == EffectPhase::Started)
                    .and_then(|e| e.started.clone());
                let Some(request) = started else {
                    return Ok(true);
                };
                // `effect.started` is durable: the append above returned.
                let answer = bounded(&request, executor.execute(&request))
                    .instrument(effect_span(&request))
                    .await;
                let input = match answer {
                    Ok(receipt) => EffectInput::Applied(EffectApplied {
                        effect_id,
                        receipt,
                        at_ms: now_ms(),
                    }),
                    Err(EffectCallError::Failed { code, message, .. }) => {
                        EffectInput::Failed(EffectFailed {
                            effect_id,
                            code,
                            message,
                            at_ms: now_ms(),
                        })
                    }
                    // No answer (timeout, unreachable, malformed): it may have applied.
                    Err(other) => EffectInput::Recovered(EffectVerification {
                        effect_id,
                        verification: verification(executor.as_ref(), &request).await,
                        cause: Some(format!("execute gave no usable answer: {other}")),
                        at_ms: now_ms(),
                    }),
                };
                self.record_effect(state, bundle, input).await?;
            }
            EffectWork::Verify | EffectWork::Recover => {
                let request = record.started.clone().unwrap_or_else(|| {
                    record.executor_request(&run_id, bundle.spec().defaults.timeout_ms)
                });
                let verification = match executor {
                    Ok(ex) => verification(ex.as_ref(), &request).await,
                    Err(e) => Verification::Unknown {
                        message: e.to_string(),
                    },
                };
                let input = if work == EffectWork::Verify {
                    EffectInput::Verified(EffectVerification {
                        effect_id,
                        verification,
                        cause: None,
                        at_ms: now_ms(),
                    })
                } else {
                    EffectInput::Recovered(EffectVerification {
                        effect_id,
                        verification,
                        cause: Some(
                            "started without a recorded result (the run was resumed)".to_owned(),
                        ),
                        at_ms: now_ms(),
                    })
                };
                self.record_effect(state, bundle, input).await?;
            }
        }
        Ok(true)
    }
}
