//! Listing runs without loading them: a run's status, open tickets and size follow from
//! its events' kinds and two small payloads (`human.escalated`, `human.decided`), so a
//! listing reads envelopes and never builds a `RunState` (which holds the workflow, the
//! bundle text, every call and payload: tens of KB per run, hundreds of MB for 100,000).
//!
//! The status rules mirror `RunState::apply`; the tests check both agree on every log
//! they produce.

use docket_decider::HumanDecided;
use futures::StreamExt;
use serde::{Deserialize, Serialize};

#[cfg(any(test, feature = "testing"))]
use docket_store::StreamHead;
use docket_store::{Event, EventStore, Hash, StreamId};

use super::RuntimeError;
use super::log::{decode, payload, stored_payload};
use docket_decider::{RunEvent, RunId, RunStatus};

/// A run as `docket runs` and `GET /api/runs` list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run.
    pub run_id: RunId,
    /// Its workflow's name.
    pub workflow: String,
    /// Where it stands (the same as its folded state's status).
    pub status: RunStatus,
    /// Events recorded: the sequence of its last event.
    pub events: u64,
    /// Tickets waiting for a human decision, in the order they were opened.
    pub open_tickets: Vec<String>,
    /// Blocked by a rule a person may override (`docket override`).
    pub overridable: bool,
    /// A person paused it (`docket pause`) and nobody has unpaused it yet: nothing new
    /// starts, whatever its status says it waits for.
    #[serde(default)]
    pub paused: bool,
    /// When the run was requested (`run.requested`'s `at_ms`, ms since the Unix epoch).
    #[serde(default)]
    pub started_at_ms: Option<i64>,
    /// For a later turn of a session (docs/agent-protocol.md#sessions): the session's id
    /// and the turn; `None` for a session's first run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionMark>,
    /// Its durable timers not yet fired, in the order they were set: what a running run
    /// waits for besides people (an agent's `wait`, an event's timeout, a scheduled side
    /// effect). Empty once the run has finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timers: Vec<PendingTimer>,
    /// The outside events its agents wait for, in the order they began to wait.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub awaited_events: Vec<AwaitedEvent>,
}

/// A timer of a run that has not fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingTimer {
    /// `{run}/timer-N`.
    pub timer_id: String,
    /// When it is due, ms since the Unix epoch.
    pub due_at_ms: i64,
}

/// An outside event an agent of a run waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwaitedEvent {
    /// The event's name.
    pub name: String,
    /// The call whose response waits for it.
    pub request_id: String,
    /// The timer of its timeout, when it has one (its due time is among `timers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// Which session a run continues, and as which turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMark {
    /// The session's id (its first run's id).
    pub id: String,
    /// The run's turn (from 2).
    pub turn: u32,
}

/// The parts of `run.requested` a listing shows (serde skips the rest unread into memory).
#[derive(Deserialize)]
struct Requested {
    workflow: Named,
    #[serde(default)]
    at_ms: Option<i64>,
    #[serde(default)]
    session: Option<SessionMark>,
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

/// The kinds that end a run: nothing is appended after them.
#[cfg(any(test, feature = "testing"))]
fn is_final_kind(kind: &str) -> bool {
    matches!(kind, "run.completed" | "run.blocked" | "run.failed")
}

/// The workflow's name and start from `run.requested`'s payload as stored: neither is a
/// content position, so a listing does not fetch the bundle source's blob.
fn requested(run: &str, event: &Event, bytes: &[u8]) -> Result<Requested, RuntimeError> {
    serde_json::from_slice::<Requested>(bytes).map_err(|e| RuntimeError::Decode {
        run: run.into(),
        source: docket_decider::DecodeError {
            kind: event.kind.clone(),
            message: e.to_string(),
        },
    })
}

/// What one event changes in a run's summary: the kinds a listing reads, with the little of
/// their payloads it needs. Made from an event as it is appended ([`Change::of`]) or as it
/// is read back ([`Change::read`]), so the run list kept current while runs are driven and
/// the one read from the log fold the same way.
pub(super) enum Change {
    Requested {
        workflow: String,
        at_ms: Option<i64>,
        session: Option<SessionMark>,
    },
    Escalated(String),
    Decided(String),
    Completed,
    Blocked {
        overridable: bool,
    },
    Overrode,
    Failed,
    Cancelled,
    Paused(bool),
    TimerSet(PendingTimer),
    TimerFired(String),
    Awaited(AwaitedEvent),
    /// An awaited event delivered (its timeout will not fire) or timed out: by call.
    AwaitEnded(String),
    Other,
}

impl Change {
    /// From an event as decided.
    pub(super) fn of(event: &RunEvent) -> Change {
        match event {
            RunEvent::RunRequested(r) => Change::Requested {
                workflow: r.workflow.name.clone(),
                at_ms: Some(r.at_ms),
                session: r.session.as_deref().map(|s| SessionMark {
                    id: s.id.to_string(),
                    turn: s.turn,
                }),
            },
            RunEvent::Escalated { ticket, .. } => Change::Escalated(ticket.to_string()),
            RunEvent::HumanDecided(HumanDecided { ticket, .. }) => {
                Change::Decided(ticket.to_string())
            }
            RunEvent::RunCompleted { .. } => Change::Completed,
            RunEvent::RunBlocked { overridable, .. } => Change::Blocked {
                overridable: overridable.is_some(),
            },
            RunEvent::HumanOverrode(_) => Change::Overrode,
            RunEvent::RunFailed { .. } => Change::Failed,
            RunEvent::RunCancelled(_) => Change::Cancelled,
            RunEvent::RunPaused(_) => Change::Paused(true),
            RunEvent::RunUnpaused(_) => Change::Paused(false),
            RunEvent::TimerSet(t) => Change::TimerSet(PendingTimer {
                timer_id: t.timer_id.to_string(),
                due_at_ms: t.due_at_ms,
            }),
            RunEvent::TimerFired(t) => Change::TimerFired(t.timer_id.to_string()),
            RunEvent::SignalAwaited(a) => Change::Awaited(AwaitedEvent {
                name: a.name.clone(),
                request_id: a.request_id.to_string(),
                timeout: a.timeout.as_ref().map(ToString::to_string),
            }),
            RunEvent::SignalDelivered(d) => Change::AwaitEnded(d.request_id.to_string()),
            RunEvent::SignalTimedOut(t) => Change::AwaitEnded(t.request_id.to_string()),
            _ => Change::Other,
        }
    }

    /// From an event as stored, decoding its payload only for the kinds that need it.
    pub(super) async fn read<S: EventStore>(
        store: &S,
        run_id: &str,
        event: &Event,
    ) -> Result<Change, RuntimeError> {
        Ok(match event.kind.as_str() {
            "run.requested" => {
                let r = requested(run_id, event, &stored_payload(store, event).await?)?;
                Change::Requested {
                    workflow: r.workflow.name,
                    at_ms: r.at_ms,
                    session: r.session,
                }
            }
            "human.escalated" | "human.decided" | "run.blocked" | "timer.set" | "timer.fired"
            | "signal.awaited" | "signal.delivered" | "signal.timed_out" => {
                Change::of(&decode(run_id, event, &payload(store, event).await?)?)
            }
            "run.completed" => Change::Completed,
            "human.overrode" => Change::Overrode,
            "run.failed" => Change::Failed,
            "run.cancelled" => Change::Cancelled,
            "run.paused" => Change::Paused(true),
            "run.unpaused" => Change::Paused(false),
            _ => Change::Other,
        })
    }
}

impl RunSummary {
    /// A run nothing is known of yet: folding its events from the first gives its summary.
    pub(super) fn empty(run_id: &str) -> RunSummary {
        RunSummary {
            run_id: run_id.into(),
            workflow: String::new(),
            status: RunStatus::NotStarted,
            events: 0,
            open_tickets: Vec::new(),
            overridable: false,
            paused: false,
            started_at_ms: None,
            session: None,
            timers: Vec::new(),
            awaited_events: Vec::new(),
        }
    }

    /// Folds event `seq`. `false` when the stream is not a run (its first event is not
    /// `run.requested`). The rules mirror `RunState::apply`.
    pub(super) fn apply(&mut self, seq: u64, change: Change) -> bool {
        self.events = seq;
        match change {
            Change::Requested {
                workflow,
                at_ms,
                session,
            } if seq == 1 => {
                self.workflow = workflow;
                self.started_at_ms = at_ms;
                self.session = session;
                self.status = RunStatus::Running;
            }
            _ if seq == 1 => return false,
            Change::Requested { .. } | Change::Other => {}
            Change::Escalated(ticket) => {
                self.open_tickets.push(ticket);
                self.status = RunStatus::WaitingForHuman;
            }
            Change::Decided(ticket) => {
                self.open_tickets.retain(|t| *t != ticket);
                if self.status == RunStatus::WaitingForHuman && self.open_tickets.is_empty() {
                    self.status = RunStatus::Running;
                }
            }
            Change::Completed => self.finish(RunStatus::Completed),
            Change::Blocked { overridable } => {
                self.status = RunStatus::Blocked;
                self.overridable = overridable;
            }
            // A person lifted the block: the run goes on.
            Change::Overrode => {
                self.overridable = false;
                self.status = if self.open_tickets.is_empty() {
                    RunStatus::Running
                } else {
                    RunStatus::WaitingForHuman
                };
            }
            Change::Failed => self.finish(RunStatus::Failed),
            Change::Cancelled => self.finish(RunStatus::Cancelled),
            Change::Paused(paused) => self.paused = paused,
            Change::TimerSet(timer) => self.timers.push(timer),
            Change::TimerFired(timer) => self.timers.retain(|t| t.timer_id != timer),
            Change::Awaited(awaited) => self.awaited_events.push(awaited),
            // A delivered event's timeout no longer fires (`RunState` clears its timer); a
            // timed-out wait's timer has fired already.
            Change::AwaitEnded(call) => {
                if let Some(at) = self
                    .awaited_events
                    .iter()
                    .position(|a| a.request_id == call)
                {
                    let ended = self.awaited_events.remove(at);
                    if let Some(timer) = ended.timeout {
                        self.timers.retain(|t| t.timer_id != timer);
                    }
                }
            }
        }
        true
    }

    /// Whether the run waits for an outside event and, before it, for no timer but that
    /// wait's timeout (as `RunState::awaits_signal` says of the folded run): a process
    /// driving it stops there, and the one that records the event drives it on (or a
    /// resume fires the timeout), so a running run nobody drives is not interrupted.
    #[must_use]
    pub fn awaits_event(&self) -> bool {
        if self.awaited_events.is_empty() {
            return false;
        }
        self.timers
            .iter()
            .min_by_key(|t| (t.due_at_ms, t.timer_id.as_str()))
            .is_none_or(|next| {
                self.awaited_events
                    .iter()
                    .any(|a| a.timeout.as_deref() == Some(next.timer_id.as_str()))
            })
    }

    /// A final status: nothing the run waited for will come.
    fn finish(&mut self, status: RunStatus) {
        self.status = status;
        self.timers.clear();
        self.awaited_events.clear();
    }
}

/// Folds the events `from..=to` of a run onto `summary`, checking that event `from - 1`
/// (when `from > 1`) has hash `after`: a summary cached at an event the log no longer
/// holds at that place is not built upon. `Ok(None)`: the stream is not a run, or the
/// check failed. Returns the hash of the last event folded.
pub(super) async fn fold_range<S: EventStore>(
    store: &S,
    stream: &StreamId,
    summary: &mut RunSummary,
    after: Option<Hash>,
    to: u64,
) -> Result<Option<Hash>, RuntimeError> {
    let run_id = stream.as_str();
    let from = summary.events + 1;
    let start = if after.is_some() { from - 1 } else { from };
    let mut events = Box::pin(store.read(stream, start..=to));
    let mut last = after;
    while let Some(event) = events.next().await {
        let event = event.map_err(RuntimeError::Store)?;
        if event.seq < from {
            if Some(event.hash) != after {
                return Ok(None);
            }
            continue;
        }
        let change = Change::read(store, run_id, &event).await?;
        if !summary.apply(event.seq, change) {
            return Ok(None);
        }
        last = Some(event.hash);
    }
    Ok(last)
}

/// The run's summary, or `None` when the stream is not a run (no `run.requested` first),
/// read from its log (the test oracle `testing::run_summaries_from_log` of the run list).
/// With `only_waiting`, a run whose last event ends it is skipped after reading that one
/// event, so finished runs cost one read; a run whose last event opened its first ticket
/// costs two (that one and `run.requested`); other runs are read through.
#[cfg(any(test, feature = "testing"))]
pub(crate) async fn summarize<S: EventStore>(
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
                    let r = requested(run_id, &first, &stored_payload(store, &first).await?)?;
                    return Ok(Some(RunSummary {
                        run_id: run_id.into(),
                        workflow: r.workflow.name,
                        status: RunStatus::WaitingForHuman,
                        events: head.seq,
                        open_tickets: vec![ticket.into()],
                        overridable: false,
                        paused: false,
                        started_at_ms: r.at_ms,
                        session: r.session,
                        timers: Vec::new(),
                        awaited_events: Vec::new(),
                    }));
                }
            }
        }
    }
    let mut summary = RunSummary::empty(run_id);
    if fold_range(store, &head.stream, &mut summary, None, head.seq)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    if summary.status == RunStatus::NotStarted {
        return Ok(None);
    }
    if only_waiting && summary.status != RunStatus::WaitingForHuman {
        return Ok(None);
    }
    Ok(Some(summary))
}

impl<S: EventStore + 'static> super::Runtime<S> {
    /// Every run's status, workflow, size and open tickets (only those waiting for a
    /// human with `waiting`), in id order, from the run list (`list_runs`).
    pub(crate) async fn summaries(&self, waiting: bool) -> Result<Vec<RunSummary>, RuntimeError> {
        let query = super::RunQuery {
            waiting,
            ..super::RunQuery::default()
        };
        let page = self.list_runs(&query, |_| true).await?;
        let mut out: Vec<RunSummary> = page.runs.into_iter().map(|r| r.summary).collect();
        out.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        Ok(out)
    }

    /// Every run's status, workflow, size and open tickets, in id order, from the run list
    /// (`list_runs`).
    ///
    /// # Errors
    /// [`RuntimeError`] when the list cannot be loaded.
    pub async fn run_summaries(&self) -> Result<Vec<RunSummary>, RuntimeError> {
        self.summaries(false).await
    }
}
