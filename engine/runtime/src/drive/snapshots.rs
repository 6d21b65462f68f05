//! Run state snapshots (docs/replay.md#long-runs): written while a run is driven, at the
//! points `docket_decider::snapshot_due` names and when a drive stops; read by everything
//! that needs only a run's state (resume, approve, status, inspect), which then folds
//! only the events after the snapshot. A snapshot is a cache of the log: one that is
//! missing, unreadable by this build, or not tied to the event it claims is ignored and
//! the log folded from its first event.

use futures::StreamExt;

use docket_decider::{RunId, RunState, snapshot_due};
use docket_store::{EventStore, StreamId};

use super::{Runtime, RuntimeError, log};

/// A drive that stops writes a snapshot only of a run at least this long: a shorter one
/// folds faster than a snapshot is read.
const STOP_SNAPSHOT_MIN_EVENTS: u64 = 256;

impl<S: EventStore + 'static> Runtime<S> {
    /// A run's state after event `at` (its last when `None` or beyond it): from the latest
    /// snapshot at or before it, then the events after the snapshot.
    ///
    /// # Errors
    /// [`RuntimeError`]: an unknown run, or an event the store or the decoder refuses.
    pub async fn state_at(
        &self,
        run_id: &RunId,
        at: Option<u64>,
    ) -> Result<RunState, RuntimeError> {
        let stream = Self::stream(run_id)?;
        let store = &self.inner.store;
        let Some(head) = store.head(&stream).await.map_err(RuntimeError::Store)? else {
            return Err(RuntimeError::UnknownRun(run_id.to_string()));
        };
        let upto = at.map_or(head.seq, |a| a.min(head.seq));
        if let Some(state) = self.state_from_snapshot(&stream, run_id, upto).await? {
            return Ok(state);
        }
        let mut state = RunState::default();
        self.fold_range(&stream, run_id, &mut state, 1, upto)
            .await?;
        Ok(state)
    }

    /// The state from the latest usable snapshot at or before `upto`, with the events
    /// after it up to `upto` folded on; `None` when there is none to use.
    async fn state_from_snapshot(
        &self,
        stream: &StreamId,
        run_id: &RunId,
        upto: u64,
    ) -> Result<Option<RunState>, RuntimeError> {
        let store = &self.inner.store;
        let snapshot = match store.latest_snapshot(stream, upto).await {
            Ok(Some(s)) => s,
            Ok(None) => return Ok(None),
            Err(e) => {
                tracing::warn!(run = %run_id, error = %e, "snapshot not read; folding the log");
                return Ok(None);
            }
        };
        let mut state = match RunState::decode_snapshot(&snapshot.state) {
            Ok(state) if state.version() == snapshot.seq && snapshot.seq > 0 => state,
            Ok(state) => {
                tracing::warn!(run = %run_id, seq = snapshot.seq, folded = state.version(), "snapshot of another length; folding the log");
                return Ok(None);
            }
            Err(e) => {
                tracing::info!(run = %run_id, seq = snapshot.seq, why = %e, "snapshot not used; folding the log");
                return Ok(None);
            }
        };
        // The snapshot is tied to the hash of the event it was taken at.
        let mut tied = Box::pin(store.read(stream, snapshot.seq..=snapshot.seq));
        match tied.next().await {
            Some(Ok(event)) if event.hash == snapshot.event_hash => {}
            Some(Err(e)) => return Err(RuntimeError::Store(e)),
            _ => {
                tracing::warn!(run = %run_id, seq = snapshot.seq, "snapshot not tied to the log's event; folding the log");
                return Ok(None);
            }
        }
        self.fold_range(stream, run_id, &mut state, snapshot.seq + 1, upto)
            .await?;
        Ok(Some(state))
    }

    /// Folds events `from..=upto` onto `state`.
    async fn fold_range(
        &self,
        stream: &StreamId,
        run_id: &RunId,
        state: &mut RunState,
        from: u64,
        upto: u64,
    ) -> Result<(), RuntimeError> {
        if from > upto {
            return Ok(());
        }
        let store = &self.inner.store;
        let mut reader = Box::pin(store.read(stream, from..=upto));
        let mut disclosed = None;
        while let Some(event) = reader.next().await {
            let event = event.map_err(RuntimeError::Store)?;
            let bytes = log::payload_of_run(store, &event, &mut disclosed).await?;
            state.apply(&log::decode(run_id, &event, &bytes)?);
        }
        Ok(())
    }

    /// Writes a snapshot of `state` (whose version is what the log holds) when the drive
    /// that took the log from `*last` passed a snapshot point, or when `stopping` and the
    /// log moved (for a run of [`STOP_SNAPSHOT_MIN_EVENTS`] or more); `*last` becomes the
    /// state's version. A snapshot that cannot be
    /// written is only a cache lost: logged, and the run goes on.
    pub(super) async fn snapshot_if_due(&self, state: &RunState, last: &mut u64, stopping: bool) {
        let version = state.version();
        let due = if stopping {
            version > *last && version >= STOP_SNAPSHOT_MIN_EVENTS
        } else {
            snapshot_due(*last, version)
        };
        // A run recorded redactable keeps its values only in its disclosures file, so that
        // `docket shred` can erase them: a snapshot (folded state, values in the clear, in
        // the index, whose files cannot be rewritten value by value) would keep a copy.
        // Such a run is folded from its log instead (docs/events.md#values-committed-apart).
        if !due
            || self.payload_encoding(super::redactable(state)) == super::PayloadEncoding::Committed
        {
            return;
        }
        *last = version;
        let Some(run_id) = state.run_id() else {
            return;
        };
        let written = match (Self::stream(run_id), state.encode_snapshot()) {
            (Ok(stream), Ok(bytes)) => self
                .inner
                .store
                .put_snapshot(&stream, version, bytes)
                .await
                .map_err(|e| e.to_string()),
            (Err(e), _) => Err(e.to_string()),
            (_, Err(e)) => Err(e.to_string()),
        };
        if let Err(why) = written {
            tracing::warn!(run = %run_id, version, %why, "snapshot not written");
        }
    }
}
