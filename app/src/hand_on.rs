//! What follows a person's input once it is recorded: on a data directory the command
//! that recorded it drives the run on; where workers share the runs (PostgreSQL) it queues
//! the run for them and never drives it itself, since a worker may hold it and only the
//! holder's appends are fenced (docs/postgres.md, "Workers").

use docket_decider::{RunId, RunState, RunStatus};
use docket_runtime::{Recorded, RunOutcome, RuntimeError};
use docket_store::StreamId;

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

    /// Queues `run` for workers (a resume, on a shared store). Nothing to do on a data
    /// directory, whose runs are driven by the command that records in it.
    ///
    /// # Errors
    /// [`RuntimeError::Store`]: the database failed.
    pub async fn queue(&self, run: &RunId) -> Result<(), RuntimeError> {
        let Some(shared) = self.runtime().store().postgres() else {
            return Ok(());
        };
        let stream = StreamId::new(run.as_str()).map_err(RuntimeError::Store)?;
        shared.enqueue(&stream).await.map_err(RuntimeError::Store)
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
        let run = state.run_id().cloned().unwrap_or_default();
        self.queue(&run).await?;
        Ok(HandedOn::Queued(state))
    }
}
