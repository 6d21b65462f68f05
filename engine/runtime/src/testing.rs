//! Test oracles (feature `testing`, for other crates' tests and benchmarks): ways of
//! listing runs that production does not use. The run list ([`Runtime::list_runs`],
//! [`Runtime::run_summaries`]) is checked against them and measured by them: every run
//! folded whole, and every run's summary read from its log.

use futures::StreamExt;

use docket_decider::RunId;
use docket_store::EventStore;

use crate::drive::summarize;
use crate::{RunOutcome, RunSummary, Runtime, RuntimeError};

/// How many runs a listing reads at once (each read waits on the store's blocking pool).
const LISTING_READS: usize = 32;

/// Every run in the store with its folded state, in id order.
///
/// # Errors
/// [`RuntimeError`].
pub async fn runs<S: EventStore + 'static>(
    runtime: &Runtime<S>,
) -> Result<Vec<RunOutcome>, RuntimeError> {
    let mut heads = runtime
        .store()
        .streams()
        .await
        .map_err(RuntimeError::Store)?;
    heads.sort_by(|a, b| a.stream.as_str().cmp(b.stream.as_str()));
    let mut runs = Vec::new();
    for head in heads {
        // The instance's own streams (`_circuits`, `_heads`): run ids never start with `_`.
        if head.stream.as_str().starts_with('_') {
            continue;
        }
        let run_id = RunId::from(head.stream.as_str());
        let state = runtime.state(&run_id).await?;
        if state.request().is_some() {
            runs.push(RunOutcome { run_id, state });
        }
    }
    Ok(runs)
}

/// The runs waiting for a human, with their open tickets, in id order, from the run list.
///
/// # Errors
/// [`RuntimeError`] when the list cannot be loaded.
pub async fn waiting_runs<S: EventStore + 'static>(
    runtime: &Runtime<S>,
) -> Result<Vec<RunSummary>, RuntimeError> {
    runtime.summaries(true).await
}

/// Every run's summary (only those waiting for a human with `only_waiting`), read from
/// the log, in id order: what the run list cost before it was kept (`run_list.rs`).
///
/// # Errors
/// [`RuntimeError`] for log and decoding problems.
pub async fn run_summaries_from_log<S: EventStore + 'static>(
    runtime: &Runtime<S>,
    only_waiting: bool,
) -> Result<Vec<RunSummary>, RuntimeError> {
    let store = runtime.store();
    let heads = store.streams().await.map_err(RuntimeError::Store)?;
    // Heads by value: a closure over borrowed heads makes a future that is `Send` only
    // for one borrow, which a server's handlers (spawned, so `Send` for all) refuse.
    let found: Vec<Result<Option<RunSummary>, RuntimeError>> = futures::stream::iter(heads)
        .filter(|head| futures::future::ready(!head.stream.as_str().starts_with('_')))
        .map(|head| async move { summarize(store, &head, only_waiting).await })
        .buffered(LISTING_READS)
        .collect()
        .await;
    let mut out = Vec::new();
    for summary in found {
        out.extend(summary?);
    }
    out.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    Ok(out)
}
