//! What follows a person's input once it is recorded: on a data directory the command
//! that recorded it drives the run on; where workers share the runs (PostgreSQL) it queues
//! the run for them and never drives it itself, since a worker may hold it and only the
//! holder's appends are fenced (docs/postgres.md, "Workers").

use docket_decider::{RunId, RunRequested, RunState, RunStatus};
use docket_runtime::{Recorded, RunOutcome, RuntimeError};
use docket_store::StreamId;
use docket_store_postgres::RunPriority;

use crate::{App, Store};

/// What became of a run after its input was recorded.
#[derive(Debug)]
pub enum HandedOn {
    /// Driven here until it stopped.
    Driven(RunOutcome),
    /// Queued for workers, as it stood once the input was recorded.
    Queued(RunState),
    /// Settled by the input itself (finished, or waiting for a person again): nothing for
    /// a worker to do.
    Settled(RunState),
}

impl App {
    /// Whether workers drive this store's runs (a PostgreSQL store).
    #[must_use]
    pub fn shared(&self) -> bool {
        self.runtime().store().postgres().is_some()
    }

    /// Queues `run` for workers (a resume, on a shared store), at its priority. Nothing to
    /// do on a data directory, whose runs are driven by the command that records in it.
    ///
    /// # Errors
    /// [`RuntimeError::Store`]: the database failed; the errors of reading the run's
    /// request.
    pub async fn queue(&self, run: &RunId) -> Result<(), RuntimeError> {
        if !self.shared() {
            return Ok(());
        }
        let (requested, _) = self.runtime().requested(run).await?;
        self.queue_requested(&requested).await
    }

    /// Queues the run `requested` started for workers, at the priority of its bundle
    /// (docs/postgres.md#claim-order). Nothing to do on a data directory.
    ///
    /// # Errors
    /// [`RuntimeError::Store`]: the database failed; [`RuntimeError::Bundle`]: the
    /// recorded bundle does not compile.
    pub async fn queue_requested(&self, requested: &RunRequested) -> Result<(), RuntimeError> {
        let Some(shared) = self.runtime().store().postgres() else {
            return Ok(());
        };
        let priority = run_priority(self.runtime().run_priority(requested)?);
        let stream = StreamId::new(requested.run_id.as_str()).map_err(RuntimeError::Store)?;
        shared
            .enqueue(&stream, priority)
            .await
            .map_err(RuntimeError::Store)
    }

    /// Drives `recorded` on here, then seals; or, on a shared store, queues its run for
    /// workers.
    ///
    /// # Errors
    /// [`RuntimeError`]: the drive failed, or the run could not be queued (its input
    /// stays recorded: a later resume or any queueing drives it).
    pub async fn hand_on(&self, recorded: Recorded<Store>) -> Result<HandedOn, RuntimeError> {
        if !self.shared() {
            let outcome = recorded.drive().await?;
            self.seal_run(&outcome.run_id).await;
            return Ok(HandedOn::Driven(outcome));
        }
        let state = recorded.state().clone();
        drop(recorded);
        if state.status() != RunStatus::Running {
            return Ok(HandedOn::Settled(state));
        }
        if let Some(requested) = state.request() {
            self.queue_requested(requested).await?;
        }
        Ok(HandedOn::Queued(state))
    }
}

/// The bundle's word for a priority as the claim order's.
pub(crate) fn run_priority(p: docket_policies::Priority) -> RunPriority {
    match p {
        docket_policies::Priority::High => RunPriority::High,
        docket_policies::Priority::Normal => RunPriority::Normal,
        docket_policies::Priority::Low => RunPriority::Low,
    }
}
