//! Recording a fork (docs/replay.md#fork): its `run.requested`, naming its parent, and the
//! parent's recorded inputs it reuses, decided as any input and appended in one durable
//! write; then the fork is driven live like any run. Which inputs are reused is planned
//! purely by the replay crate (`docket_replay::plan_fork`); this records the plan.

use docket_decider::{Command, RunRequested, RunState, decide_in_place};
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
        let problems = bundle.admission_problems();
        if !problems.is_empty() {
            return Err(RuntimeError::NotAdmitted {
                bundle: request.bundle_source_name.clone(),
                problems,
            });
        }
        let problems = crate::workflow::check_workflow(&request.workflow, &bundle);
        if !problems.is_empty() {
            return Err(RuntimeError::WorkflowRefused {
                what: format!("fork {run_id} (workflow {})", request.workflow.name),
                problems,
            });
        }
        if self
            .inner
            .store
            .head(&stream)
            .await
            .map_err(RuntimeError::Store)?
            .is_some()
        {
            return Err(RuntimeError::RunExists(run_id));
        }
        let mut state = RunState::default();
        let mut events = Vec::new();
        for command in std::iter::once(Command::Start(request)).chain(inputs) {
            let decided = decide_in_place(&mut state, &bundle, command).map_err(|rejection| {
                RuntimeError::Rejected {
                    run: run_id.clone(),
                    rejection,
                }
            })?;
            events.extend(decided);
        }
        self.append_decided(&run_id, 0, &bundle, &events).await?;
        // A tool call the reused part scheduled was not interrupted: the fork runs it.
        self.drive(state, bundle, Default::default()).await
    }
}
