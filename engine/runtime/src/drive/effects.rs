//! The runtime's side of side effects (docs/governance.md#side-effects): the effect work the decider left
//! due (dry runs, execution gates, verifications, recoveries), done one step at a time
//! with the registered executors, each answer recorded as an input before anything else
//! happens.
//!
//! The order that makes an effect safe to resume: the kill switches are read and recorded,
//! the decider appends `effect.started` (durable once the append returns), and only then
//! is `execute` called. Consecutive inputs of one step (a dry run and the kill-switch read
//! after it; a receipt and its verification) are decided one after the other and appended
//! in one durable write: each is still its own batch in the log, so replay is unchanged. An effect found started without a result is never executed
//! blindly: `verify` decides (see `EffectWork::Recover`).

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use docket_policies::PolicyBundle;
use docket_store::EventStore;

use super::{Runtime, RuntimeError};
use crate::effect::{
    EffectCallError, EffectExecutor, EffectFuture, EffectRequest, KillSwitchSource, Verification,
};
use docket_decider::WorkflowSpec;
use docket_decider::{
    Command, DryRunOutcome, EffectApplied, EffectDryRun, EffectFailed, EffectId, EffectInput,
    EffectKillSwitchChecked, EffectPhase, EffectRecord, EffectSandboxRan, EffectVerification,
    EffectWork, RunEvent, RunId, RunState, SandboxOutcome, decide_in_place,
};

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
    crate::telemetry::effect(request)
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

    /// Decides `input` in place and adds its batch to `staged` (appended later, with the
    /// batches staged after it, in one durable write).
    fn stage(
        state: &mut RunState,
        bundle: &PolicyBundle,
        staged: &mut Staged,
        input: EffectInput,
    ) -> Result<(), RuntimeError> {
        let events =
            decide_in_place(state, bundle, Command::RecordEffect(input)).map_err(|rejection| {
                RuntimeError::Rejected {
                    run: staged.run_id.clone(),
                    rejection,
                }
            })?;
        staged.events.extend(events);
        Ok(())
    }

    /// Decides an agent's answer; when it leaves effect work due, returns its batch
    /// unwritten, to share the effect step's first write (the answer is re-asked after a
    /// crash before it, with the same request id, as for any unrecorded answer).
    /// Otherwise appends it at once.
    pub(super) async fn stage_answer(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        command: Command,
    ) -> Result<Option<Staged>, RuntimeError> {
        let mut staged = Staged::new(state);
        let events = decide_in_place(state, bundle, command).map_err(|rejection| {
            RuntimeError::Rejected {
                run: staged.run_id.clone(),
                rejection,
            }
        })?;
        staged.events.extend(events);
        if state.pending_effects().is_empty() {
            self.commit_rebased(state, bundle, staged).await?;
            return Ok(None);
        }
        Ok(Some(staged))
    }

    /// Writes an answer [`Runtime::stage_answer`] held back, if any.
    pub(super) async fn commit_carried(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        carried: Option<Staged>,
    ) -> Result<(), RuntimeError> {
        match carried {
            Some(staged) => self.commit_rebased(state, bundle, staged).await,
            None => Ok(()),
        }
    }

    /// Writes staged batches that start no effect; when another writer appended
    /// meanwhile (a pause, a decision), their inputs are decided again, in order, on the
    /// run as it now stands (`state` then follows the log), as
    /// [`Runtime::decide_and_append`] does for one input.
    async fn commit_rebased(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        staged: Staged,
    ) -> Result<(), RuntimeError> {
        let inputs: Vec<Command> = staged
            .events
            .iter()
            .filter(|e| e.is_input())
            .filter_map(Command::from_event)
            .collect();
        match self.commit(bundle, staged).await {
            Err(RuntimeError::Conflict { run, .. }) => {
                *state = self.load_state(&run).await?.0;
                for command in inputs {
                    self.decide_and_append(state, bundle, command).await?;
                }
                Ok(())
            }
            other => other,
        }
    }

    async fn commit(&self, bundle: &PolicyBundle, staged: Staged) -> Result<(), RuntimeError> {
        if staged.events.is_empty() {
            return Ok(());
        }
        self.append_decided(
            &staged.run_id,
            staged.version,
            staged.redactable,
            bundle,
            &staged.events,
        )
        .await
    }

    /// Confirms this process still holds the run (see [`EventStore::confirm_claim`]) and
    /// returns the fence to give the executor.
    async fn confirm_claim(&self, state: &RunState) -> Result<Option<u64>, RuntimeError> {
        let stream = Self::stream(&state.run_id().cloned().unwrap_or_default())?;
        self.inner
            .store
            .confirm_claim(&stream)
            .await
            .map_err(RuntimeError::Store)
    }

    /// Reads the kill switches (immediately before execution) and stages the recorded
    /// read, which the decider follows with the full decision and `effect.started`.
    async fn stage_gate(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        staged: &mut Staged,
        effect_id: &EffectId,
        lane: &str,
    ) -> Result<(), RuntimeError> {
        let source = self.kill_switch();
        let (engaged, error) = match source.engaged().await {
            Ok(engaged) => (engaged, None),
            Err(e) => {
                let mut all = vec![
                    docket_policies::GLOBAL_KILL_SWITCH.to_owned(),
                    lane.to_owned(),
                ];
                all.sort();
                (all, Some(e.to_string()))
            }
        };
        let input = EffectInput::KillSwitchChecked(EffectKillSwitchChecked {
            effect_id: effect_id.clone(),
            engaged,
            error,
            at_ms: self.now_ms(),
        });
        Self::stage(state, bundle, staged, input)
    }

    /// Commits what is staged; if the effect is now started (`effect.started` durable),
    /// executes it and records the answer with its verification in one write.
    async fn commit_and_execute(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        staged: Staged,
        executor: &dyn EffectExecutor,
        effect_id: &EffectId,
    ) -> Result<(), RuntimeError> {
        self.commit(bundle, staged).await?;
        let started = state
            .effects()
            .get(effect_id)
            .filter(|e| e.phase == EffectPhase::Started)
            .and_then(|e| e.started.clone());
        let Some(mut request) = started else {
            return Ok(());
        };
        // A fork does not apply again a key one of its ancestors applied: that receipt is
        // the result, and the executor is only asked to verify it, as after any receipt.
        if let Some((of, receipt)) = self
            .inherited_receipt(state, &request.idempotency_key)
            .await?
        {
            let mut staged = Staged::new(state);
            let applied = EffectInput::Applied(EffectApplied {
                effect_id: effect_id.clone(),
                receipt,
                at_ms: self.now_ms(),
                reused_from: Some(of),
            });
            Self::stage(state, bundle, &mut staged, applied)?;
            return self.commit(bundle, staged).await;
        }
        // `effect.started` is durable: the append above returned. Where several processes
        // share the runs, this one must still hold the run (renewed now) before the world
        // is changed on its behalf; one that lost it stops here and the new holder
        // verifies the started effect.
        request.fence = self.confirm_claim(state).await?;
        let span = effect_span(&request);
        let answer = bounded(&request, executor.execute(&request))
            .instrument(span.clone())
            .await;
        // Where its outcome is recorded: the next event.
        span.record("docket.seq", state.version() + 1);
        let mut staged = Staged::new(state);
        let effect_id = effect_id.clone();
        match answer {
            Ok(receipt) => {
                let applied = EffectInput::Applied(EffectApplied {
                    effect_id: effect_id.clone(),
                    receipt,
                    at_ms: self.now_ms(),
                    reused_from: None,
                });
                Self::stage(state, bundle, &mut staged, applied)?;
                // Verified at once, recorded in the same write: a crash before it leaves
                // the effect started without a result, which resume verifies anyway.
                let verified = EffectInput::Verified(EffectVerification {
                    effect_id,
                    verification: verification(executor, &request).await,
                    cause: None,
                    at_ms: self.now_ms(),
                });
                Self::stage(state, bundle, &mut staged, verified)?;
            }
            Err(EffectCallError::Failed { code, message, .. }) => {
                let failed = EffectInput::Failed(EffectFailed {
                    effect_id,
                    code,
                    message,
                    at_ms: self.now_ms(),
                });
                Self::stage(state, bundle, &mut staged, failed)?;
            }
            // No answer (timeout, unreachable, malformed): it may have applied.
            Err(other) => {
                let recovered = EffectInput::Recovered(EffectVerification {
                    effect_id,
                    verification: verification(executor, &request).await,
                    cause: Some(format!("execute gave no usable answer: {other}")),
                    at_ms: self.now_ms(),
                });
                Self::stage(state, bundle, &mut staged, recovered)?;
            }
        }
        self.commit(bundle, staged).await
    }

    /// Does one piece of due effect work (the decider's [`NextStep::Effect`]) and records
    /// its answer. The agent's answer asking for the effect (`carried`), a passing dry
    /// run, the kill-switch read and `effect.started` go to the log in one write, and so
    /// do the receipt and its verification: two durable writes per effect on the common
    /// path, each holding whole batches.
    ///
    /// [`NextStep::Effect`]: docket_decider::NextStep::Effect
    pub(super) async fn effect_step(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        workflow: &WorkflowSpec,
        carried: Option<Staged>,
        (record, work): (EffectRecord, EffectWork),
    ) -> Result<(), RuntimeError> {
        let run_id = state.run_id().cloned().unwrap_or_default();
        let effect_id = record.requested.effect_id.clone();
        let lane = record.requested.lane.clone();
        let executor = self
            .inner
            .effects
            .get(workflow, &record.requested.effect_kind);
        let timeout_ms = workflow.effect_timeout_ms(
            &record.requested.effect_kind,
            bundle.spec().defaults.timeout_ms,
        );
        let mut staged = carried.unwrap_or_else(|| Staged::new(state));
        match (work, executor) {
            (EffectWork::DryRun, executor) => {
                let request = record.executor_request(&run_id, timeout_ms);
                let outcome = match &executor {
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
                    effect_id: effect_id.clone(),
                    outcome,
                    at_ms: self.now_ms(),
                });
                Self::stage(state, bundle, &mut staged, input)?;
                let ready = state
                    .effects()
                    .get(&effect_id)
                    .is_some_and(|e| e.phase == EffectPhase::Ready);
                match executor {
                    Ok(ex) if ready => {
                        self.stage_gate(state, bundle, &mut staged, &effect_id, &lane)
                            .await?;
                        self.commit_and_execute(state, bundle, staged, ex.as_ref(), &effect_id)
                            .await?;
                    }
                    _ => self.commit(bundle, staged).await?,
                }
            }
            (EffectWork::Execute, Ok(ex)) => {
                self.stage_gate(state, bundle, &mut staged, &effect_id, &lane)
                    .await?;
                self.commit_and_execute(state, bundle, staged, ex.as_ref(), &effect_id)
                    .await?;
            }
            (EffectWork::Execute, Err(e)) => {
                let input = EffectInput::Failed(EffectFailed {
                    effect_id,
                    code: e.code().to_owned(),
                    message: e.to_string(),
                    at_ms: self.now_ms(),
                });
                Self::stage(state, bundle, &mut staged, input)?;
                self.commit(bundle, staged).await?;
            }
            (EffectWork::Sandbox, executor) => {
                // `effect.sandbox_started` is made durable first (with the answer that
                // asked, if it is carried); a sandbox changes nothing real, so a run found
                // here after a crash simply runs it again.
                self.commit(bundle, staged).await?;
                let mut staged = Staged::new(state);
                let request = record
                    .sandbox_started
                    .clone()
                    .unwrap_or_else(|| record.executor_request(&run_id, timeout_ms));
                let answer = match executor {
                    Ok(ex) => {
                        bounded(&request, ex.execute(&request))
                            .instrument(effect_span(&request))
                            .await
                    }
                    Err(e) => Err(e),
                };
                let outcome = match answer {
                    Ok(receipt) => SandboxOutcome::Receipt { receipt },
                    Err(EffectCallError::Failed { code, message, .. }) => {
                        SandboxOutcome::Error { code, message }
                    }
                    Err(e) => SandboxOutcome::Error {
                        code: e.code().to_owned(),
                        message: e.to_string(),
                    },
                };
                let input = EffectInput::SandboxRan(EffectSandboxRan {
                    effect_id,
                    outcome,
                    at_ms: self.now_ms(),
                });
                Self::stage(state, bundle, &mut staged, input)?;
                self.commit(bundle, staged).await?;
            }
            (EffectWork::Verify | EffectWork::Recover, executor) => {
                let mut request = record
                    .started
                    .clone()
                    .unwrap_or_else(|| record.executor_request(&run_id, timeout_ms));
                // The executor learns the newer claim before it answers: a call on its way
                // from a process that lost the run can no longer apply the key after this.
                request.fence = self.confirm_claim(state).await?;
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
                        at_ms: self.now_ms(),
                    })
                } else {
                    EffectInput::Recovered(EffectVerification {
                        effect_id,
                        verification,
                        cause: Some(
                            "started without a recorded result (the run was resumed)".to_owned(),
                        ),
                        at_ms: self.now_ms(),
                    })
                };
                Self::stage(state, bundle, &mut staged, input)?;
                self.commit(bundle, staged).await?;
            }
        }
        Ok(())
    }
}

/// Batches decided one after the other, waiting to be appended together at `version`.
pub(super) struct Staged {
    run_id: RunId,
    version: u64,
    /// The run's workflow asks for redactable values.
    redactable: bool,
    events: Vec<RunEvent>,
}

impl Staged {
    fn new(state: &RunState) -> Self {
        Self {
            run_id: state.run_id().cloned().unwrap_or_default(),
            version: state.version(),
            redactable: super::redactable(state),
            events: Vec::new(),
        }
    }
}
