//! Recording a fork (docs/replay.md#fork): its `run.requested`, naming its parent, and the
//! parent's recorded inputs it reuses, decided as any input and appended in one durable
//! write; then the fork is driven live like any run. Which inputs are reused is planned
//! purely by the replay crate (`docket_replay::plan_fork`); this records the plan.
//!
//! In the live part, an effect whose idempotency key an ancestor applied is not executed
//! again: the ancestor's receipt is recorded as its `effect.applied` (`reused_from`).

use docket_decider::{
    Command, EffectId, EffectReceipt, RunEvent, RunId, RunRequested, RunState, Verification,
    decide_in_place,
};
use docket_store::EventStore;

use super::{RunOutcome, Runtime, RuntimeError};

impl<S: EventStore + 'static> Runtime<S> {
    /// Starts the fork `request` (its `forked_from` names the parent), feeds it `inputs`
    /// (the parent's recorded answers, receipts and decisions it reuses: no agent is
    /// called and no effect executed for them), records all of it at once, and drives the
    /// fork live from there.
    ///
    /// # Errors
    /// [`RuntimeError`]: the run id taken, a bundle that does not compile or is not
    /// admitted, a workflow that does not fit it or this machine, an input the decider
    /// refuses (nothing is recorded then).
    pub async fn start_fork(
        &self,
        request: RunRequested,
        inputs: Vec<Command>,
    ) -> Result<RunOutcome, RuntimeError> {
        let run_id = request.run_id.clone();
        let stream = Self::stream(&run_id)?;
        let bundle = self.bundle_for(&request)?;
        self.admit(
            &bundle,
            &request.bundle_source_name,
            &request.workflow,
            format!("fork {run_id} (workflow {})", request.workflow.name),
            &stream,
            &run_id,
        )
        .await?;
        let mut state = RunState::default();
        let mut events = Vec::new();
        for command in std::iter::once(Command::Start(request.into())).chain(inputs) {
            let decided = decide_in_place(&mut state, &bundle, command).map_err(|rejection| {
                RuntimeError::Rejected {
                    run: run_id.clone(),
                    rejection,
                }
            })?;
            events.extend(decided);
        }
        let redactable = super::redactable(&state);
        self.append_decided(&run_id, 0, redactable, &bundle, &events)
            .await?;
        // A tool call the reused part scheduled was not interrupted: the fork runs it.
        self.drive(state, bundle, Default::default()).await
    }

    /// The receipt a fork's ancestors recorded for idempotency key `key`, with the effect
    /// that applied it (its parent's log first, then its parent's parent's...). `None`
    /// for a run that is not a fork, or a key no ancestor applied.
    pub(super) async fn inherited_receipt(
        &self,
        state: &RunState,
        key: &str,
    ) -> Result<Option<(EffectId, EffectReceipt)>, RuntimeError> {
        let parent_of = |r: &RunRequested| r.forked_from.as_deref().map(|f| f.run_id.clone());
        let mut next: Option<RunId> = state.request().and_then(parent_of);
        let mut seen = Vec::new();
        while let Some(run) = next.take() {
            // A chain of forks is finite, but a log edited by hand could loop.
            if seen.contains(&run) {
                break;
            }
            seen.push(run.clone());
            let events = match self.events(&run).await {
                Ok(events) => events,
                // An ancestor removed from the data directory: nothing to reuse from it.
                Err(RuntimeError::UnknownRun(_)) => break,
                Err(e) => return Err(e),
            };
            let mut keys: Vec<(EffectId, String)> = Vec::new();
            let key_of = |keys: &[(EffectId, String)], id: &EffectId| {
                keys.iter().any(|(e, k)| e == id && k == key)
            };
            for recorded in &events {
                match &recorded.event {
                    RunEvent::RunRequested(r) => next = parent_of(r),
                    RunEvent::EffectStarted(s) => {
                        keys.push((s.effect_id.clone(), s.request.idempotency_key.clone()));
                    }
                    RunEvent::EffectApplied(a) if key_of(&keys, &a.effect_id) => {
                        return Ok(Some((a.effect_id.clone(), a.receipt.clone())));
                    }
                    RunEvent::EffectRecovered(v) if key_of(&keys, &v.effect_id) => {
                        if let Verification::Applied { result } = &v.verification {
                            let receipt = EffectReceipt {
                                result: result.clone(),
                                drift: None,
                            };
                            return Ok(Some((v.effect_id.clone(), receipt)));
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(None)
    }
}
