//! A run driven, then the runs that finished sealed: what every front end does after it
//! records an input.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use docket_decider::{Command, RunId, RunRequested};
use docket_evidence::KeyPlace;
use docket_runtime::{HumanDecision, HumanOverride, RunOutcome, Runtime, RuntimeError, Workflow};
use docket_store::StreamId;
use serde_json::Value;

use crate::Store;
use crate::seal::{Sealing, Unsealed, seal};

/// A data directory's runtime, with what follows each drive: sealing the runs that
/// finished. A failure to seal is not the drive's: it goes to the front end's `report`
/// (a warning on a terminal, a log line in a server), and the next drive seals them.
pub struct App {
    runtime: Runtime<Store>,
    data: PathBuf,
    key: KeyPlace,
    report: fn(&Unsealed),
    /// What the last seal read, shared by every clone (one seal at a time in a process):
    /// a seal reads only what was sealed since.
    sealing: Arc<tokio::sync::Mutex<Sealing>>,
}

impl Clone for App {
    fn clone(&self) -> Self {
        Self {
            runtime: self.runtime.clone(),
            data: self.data.clone(),
            key: self.key.clone(),
            report: self.report,
            sealing: Arc::clone(&self.sealing),
        }
    }
}

impl App {
    /// The runtime over the data directory `data`, sealing with the key at `key`;
    /// `report` says that finished runs were not sealed.
    #[must_use]
    pub fn new(
        runtime: Runtime<Store>,
        data: impl Into<PathBuf>,
        key: KeyPlace,
        report: fn(&Unsealed),
    ) -> Self {
        Self {
            runtime,
            data: data.into(),
            key,
            report,
            sealing: Arc::default(),
        }
    }

    /// The runtime.
    #[must_use]
    pub fn runtime(&self) -> &Runtime<Store> {
        &self.runtime
    }

    /// The data directory.
    #[must_use]
    pub fn data(&self) -> &Path {
        &self.data
    }

    /// Seals the runs that finished and are not sealed at their current size, when there
    /// is a signing key; a failure goes to `report`.
    pub async fn seal(&self) {
        self.seal_after(None).await;
    }

    /// Seals `run` if it finished (and, at this process's first seal, every run left
    /// unsealed), when there is a signing key; a failure goes to `report`.
    pub async fn seal_run(&self, run: &RunId) {
        match StreamId::new(run.as_str()) {
            Ok(stream) => self.seal_after(Some(&stream)).await,
            Err(_) => self.seal_after(None).await,
        }
    }

    async fn seal_after(&self, run: Option<&StreamId>) {
        let mut sealing = self.sealing.lock().await;
        if let Err(e) = seal(
            self.runtime.store(),
            &self.data,
            &self.key,
            &mut sealing,
            run,
        )
        .await
        {
            (self.report)(&e);
        }
    }

    /// The outcome of a drive, after sealing its run when it went well.
    async fn sealed(
        &self,
        outcome: Result<RunOutcome, RuntimeError>,
    ) -> Result<RunOutcome, RuntimeError> {
        let outcome = outcome?;
        self.seal_run(&outcome.run_id).await;
        Ok(outcome)
    }

    /// Starts a run of `workflow` on `input` ([`Runtime::start`]), then seals.
    ///
    /// # Errors
    /// [`RuntimeError`], as [`Runtime::start`]; nothing is sealed then.
    pub async fn start(
        &self,
        workflow: &Workflow,
        input: Value,
        run_id: Option<RunId>,
    ) -> Result<RunOutcome, RuntimeError> {
        let outcome = self.runtime.start(workflow, input, run_id).await;
        self.sealed(outcome).await
    }

    /// Resumes `run` ([`Runtime::resume`]), then seals.
    ///
    /// # Errors
    /// [`RuntimeError`], as [`Runtime::resume`]; nothing is sealed then.
    pub async fn resume(&self, run: &RunId) -> Result<RunOutcome, RuntimeError> {
        let outcome = self.runtime.resume(run).await;
        self.sealed(outcome).await
    }

    /// Records a human's decision on `ticket` and drives on ([`Runtime::decide_ticket`]),
    /// then seals.
    ///
    /// # Errors
    /// [`RuntimeError`], as [`Runtime::decide_ticket`]; nothing is sealed then.
    pub async fn decide_ticket(
        &self,
        run: &RunId,
        ticket: &str,
        decision: HumanDecision,
    ) -> Result<RunOutcome, RuntimeError> {
        let outcome = self.runtime.decide_ticket(run, ticket, decision).await;
        self.sealed(outcome).await
    }

    /// Records an override of the rule blocking `run` and drives on
    /// ([`Runtime::override_block`]), then seals.
    ///
    /// # Errors
    /// [`RuntimeError`], as [`Runtime::override_block`]; nothing is sealed then.
    pub async fn override_block(
        &self,
        run: &RunId,
        o: HumanOverride,
    ) -> Result<RunOutcome, RuntimeError> {
        let outcome = self.runtime.override_block(run, o).await;
        self.sealed(outcome).await
    }

    /// Cancels `run` ([`Runtime::cancel`]), then seals.
    ///
    /// # Errors
    /// [`RuntimeError`], as [`Runtime::cancel`]; nothing is sealed then.
    pub async fn cancel(
        &self,
        run: &RunId,
        by: &str,
        reason: &str,
    ) -> Result<RunOutcome, RuntimeError> {
        let outcome = self.runtime.cancel(run, by, reason).await;
        self.sealed(outcome).await
    }

    /// Records a fork planned by replay (`docket_replay::plan_fork`) and drives it on
    /// ([`Runtime::start_fork`]), then seals.
    ///
    /// # Errors
    /// [`RuntimeError`], as [`Runtime::start_fork`]; nothing is sealed then.
    pub async fn start_fork(
        &self,
        request: RunRequested,
        inputs: Vec<Command>,
    ) -> Result<RunOutcome, RuntimeError> {
        let outcome = self.runtime.start_fork(request, inputs).await;
        self.sealed(outcome).await
    }
}
