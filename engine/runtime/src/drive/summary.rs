//! Listing runs without loading them: a run's status, open tickets and size follow from
//! its events' kinds and two small payloads (`human.escalated`, `human.decided`), so a
//! listing reads envelopes and never builds a `RunState` (which holds the workflow, the
//! bundle text, every call and payload: tens of KB per run, hundreds of MB for 100,000).
//!
//! The status rules mirror `RunState::apply`; the tests check both agree on every log
//! they produce.

use futures::StreamExt;
use serde::Deserialize;

use docket_store::{Event, EventStore, StreamHead};

use super::RuntimeError;
use super::log::{decode, payload, stored_payload};
use docket_decider::{RunEvent, RunId, RunStatus};

/// A run as `docket runs` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// The run.
    pub run_id: RunId,
    /// Its workflow's name.
    pub workflow: String,
    /// Where it stands (the same as its folded state's status).
    pub status: RunStatus,
    /// Events recorded.
    pub events: u64,
    /// Tickets waiting for a human decision, in the order they were opened.
    pub open_tickets: Vec<String>,
    /// Blocked by a rule a person may override (`docket override`; decider version 6).
    pub overridable: bool,
}

/// The parts of `run.requested` a listing shows (serde skips the rest unread into memory).
#[derive(Deserialize)]
struct Requested {
    workflow: Named,
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

/// The kinds that end a run: nothing is appended after them.
fn is_final_kind(kind: &str) -> bool {
    matches!(kind, "run.completed" | "run.blocked" | "run.failed")
}

/// The workflow's name from `run.requested`, without decoding the rest.
/// The workflow's name from `run.requested`'s payload as stored: the name is never a
/// content position, so a listing does not fetch the bundle source's blob.
fn workflow_name(run: &str, event: &Event, bytes: &[u8]) -> Result<String, RuntimeError> {
    serde_json::from_slice::<Requested>(bytes)
        .map(|r| r.workflow.name)
        .map_err(|e| RuntimeError::Decode {
            run: run.into(),
            source: docket_decider::DecodeError {
                kind: event.kind.clone(),
                message: e.to_string(),
            },
        })
}

/// The run's summary, or `None` when the stream is not a run (no `run.requested` first).
/// With `only_waiting`, a run whose last event ends it is skipped after reading that one
/// event, so finished runs cost one read; a run whose last event opened its first ticket
/// costs two (that one and `run.requested`); other runs are read through.
pub(super) async fn summarize<S: EventStore>(
    store: &S,
    head: &StreamHead,
    only_waiting: bool,
) -> Result<Option<RunSummary>, RuntimeError> {
    let run_id = head.stream.as_str();
    let mut last = Box::pin(store.read(&head.stream, head.seq..=head.seq));
    if let Some(event) = last.next().await {
        let event = event.map_err(RuntimeError::Store)?;
        if only_waiting && is_final_kind(&event.kind) {
            return Ok(None);
        }
        // The common waiting run: its last event opened its first ticket. An escalation
        // sets the status to waiting and nothing after it changed that; tickets are
        // numbered from 1 in order, so this is the run's only ticket and it is open: no
        // need to read the rest.
        if event.kind == "human.escalated"
            && let RunEvent::Escalated { ticket, .. } =
                decode(run_id, &event, &payload(store, &event).await?)?
            && ticket == "ticket-1"
            && head.seq > 1
        {
            let mut first = Box::pin(store.read(&head.stream, 1..=1));
            if let Some(first) = first.next().await {
                let first = first.map_err(RuntimeError::Store)?;
                if first.kind == "run.requested" {
                    return Ok(Some(RunSummary {
                        run_id: run_id.into(),
                        workflow: workflow_name(
                            run_id,
                            &first,
                            &stored_payload(store, &first).await?,
                        )?,
                        status: RunStatus::WaitingForHuman,
                        events: head.seq,
                        open_tickets: vec![ticket.into()],
                        overridable: false,
                    }));
                }
            }
        }
    }
    let mut events = Box::pin(store.read(&head.stream, 1..=head.seq));
    let mut summary = RunSummary {
        run_id: run_id.into(),
        workflow: String::new(),
        status: RunStatus::NotStarted,
        events: 0,
        open_tickets: Vec::new(),
        overridable: false,
    };
    while let Some(event) = events.next().await {
        let event = event.map_err(RuntimeError::Store)?;
        summary.events = event.seq;
        match event.kind.as_str() {
            "run.requested" if event.seq == 1 => {
                summary.workflow =
                    workflow_name(run_id, &event, &stored_payload(store, &event).await?)?;
                summary.status = RunStatus::Running;
            }
            _ if event.seq == 1 => return Ok(None),
            "human.escalated" => {
                if let RunEvent::Escalated { ticket, .. } =
                    decode(run_id, &event, &payload(store, &event).await?)?
                {
                    summary.open_tickets.push(ticket.into());
                }
                summary.status = RunStatus::WaitingForHuman;
            }
            "human.decided" => {
                if let RunEvent::HumanDecided { ticket, .. } =
                    decode(run_id, &event, &payload(store, &event).await?)?
                {
                    summary.open_tickets.retain(|t| *t != ticket);
                }
                if summary.status == RunStatus::WaitingForHuman && summary.open_tickets.is_empty() {
                    summary.status = RunStatus::Running;
                }
            }
            "run.completed" => summary.status = RunStatus::Completed,
            "run.blocked" => {
                summary.status = RunStatus::Blocked;
                if let RunEvent::RunBlocked { overridable, .. } =
                    decode(run_id, &event, &payload(store, &event).await?)?
                {
                    summary.overridable = overridable.is_some();
                }
            }
            // A person lifted the block (decider version 6): the run goes on.
            "human.overrode" => {
                summary.overridable = false;
                summary.status = if summary.open_tickets.is_empty() {
                    RunStatus::Running
                } else {
                    RunStatus::WaitingForHuman
                };
            }
            "run.failed" => summary.status = RunStatus::Failed,
            "run.cancelled" => summary.status = RunStatus::Cancelled,
            _ => {}
        }
    }
    if summary.status == RunStatus::NotStarted {
        return Ok(None);
    }
    if only_waiting && summary.status != RunStatus::WaitingForHuman {
        return Ok(None);
    }
    Ok(Some(summary))
}

/// How many runs a listing reads at once (each read waits on the store's blocking pool).
const LISTING_READS: usize = 32;

impl<S: EventStore + 'static> super::Runtime<S> {
    async fn summaries(&self, only_waiting: bool) -> Result<Vec<RunSummary>, RuntimeError> {
        let heads = self.store().streams().await.map_err(RuntimeError::Store)?;
        let store = self.store();
        // Heads by value: a closure over borrowed heads makes a future that is `Send` only
        // for one borrow, which a server's handlers (spawned, so `Send` for all) refuse.
        let found: Vec<Result<Option<RunSummary>, RuntimeError>> = futures::stream::iter(heads)
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

    /// Every run's status, workflow, size and open tickets, in id order, read from event
    /// kinds without folding states (`runs()` folds each run whole).
    ///
    /// # Errors
    /// [`RuntimeError`] for log and decoding problems.
    pub async fn run_summaries(&self) -> Result<Vec<RunSummary>, RuntimeError> {
        self.summaries(false).await
    }

    /// The runs waiting for a human, with their open tickets, in id order. A finished run
    /// costs one event read (its last); only runs still going are read through.
    ///
    /// # Errors
    /// [`RuntimeError`] for log and decoding problems.
    pub async fn waiting_runs(&self) -> Result<Vec<RunSummary>, RuntimeError> {
        self.summaries(true).await
    }
}
