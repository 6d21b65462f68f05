//! A run whose input is recorded and whose drive has not begun: what a caller holds
//! between the two when it must answer once the input is durable (`docket serve` answers
//! 202 only for what it recorded, and 409 for what it did not).

use std::collections::BTreeSet;
use std::sync::Arc;

use docket_decider::{RunId, RunState, ToolCallId};
use docket_policies::PolicyBundle;
use docket_store::EventStore;
use tracing::Instrument as _;

use super::{RunOutcome, Runtime, RuntimeError};

/// A run's input durably recorded ([`Runtime::record_start`],
/// [`Runtime::record_decision`]), ready to be driven on.
#[must_use = "the run is recorded but not driven until `drive` is awaited"]
pub struct Recorded<S> {
    pub(super) runtime: Runtime<S>,
    pub(super) state: RunState,
    pub(super) bundle: Arc<PolicyBundle>,
    /// Tool calls found started without a result when the input was recorded.
    pub(super) interrupted: BTreeSet<ToolCallId>,
    /// The run's span when recording opened it (a new run), else none.
    pub(super) span: tracing::Span,
}

impl<S: EventStore + 'static> Recorded<S> {
    /// The run.
    #[must_use]
    pub fn run_id(&self) -> Option<&RunId> {
        self.state.run_id()
    }

    /// The run's state once the input was recorded; its version is the last event the
    /// recording wrote.
    #[must_use]
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// Drives the run on until it completes, is blocked, fails or waits for a human.
    ///
    /// # Errors
    /// [`RuntimeError`].
    pub async fn drive(self) -> Result<RunOutcome, RuntimeError> {
        let Self {
            runtime,
            state,
            bundle,
            interrupted,
            span,
        } = self;
        runtime
            .drive(state, bundle, interrupted)
            .instrument(span)
            .await
    }
}
