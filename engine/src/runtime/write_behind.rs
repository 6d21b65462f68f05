//! Holding a decided batch back until the next one, when the runtime's next step only
//! reads: a dry run, the kill-switch read before an execution, or the verification of an
//! applied effect. Those steps change nothing outside docket, so losing the held batches
//! in a crash only means deciding them again on resume (the agent is asked again with the
//! same request id, the dry run is repeated). The held batches are appended atomically with
//! the next batch that must be durable, at the version they were decided from, so one
//! governed side effect costs two syncs (up to and including `effect.started`, then the
//! result with its verification) instead of five.
//!
//! What is never held: a batch after which the runtime calls an agent, executes an effect
//! (so `effect.started` is durable before `execute`), or stops driving the run.
//!
//! Held batches belong to the task driving the run (keyed by run id and tokio task id, or
//! thread outside a task):
//! another task driving the same run never sees them, so its appends and this one's still
//! meet at the store's expected-version check, as without holding.

use std::collections::HashMap;
use std::sync::Mutex;

use docket_store::NewEvent;

use crate::decider::{EffectWork, RunState, RunStatus};

/// Batches of one run decided but not yet appended, from `base` (the run's version in the
/// log) up to `next` (the version the held state is at).
struct Held {
    base: u64,
    next: u64,
    events: Vec<NewEvent>,
}

/// What drives a run: a tokio task (which may move between threads), or, outside any task
/// (the future given to `block_on`), the thread.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Driver {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

/// Who holds: a run as driven by one task or thread.
pub(super) type Holder = (String, Driver);

/// The held batches of every run being driven (looked up, never iterated).
#[derive(Default)]
pub(super) struct WriteBehind(Mutex<HashMap<Holder, Held>>);

/// The current driver's key for `run`.
pub(super) fn holder(run: &str) -> Holder {
    let driver = tokio::task::try_id()
        .map_or_else(|| Driver::Thread(std::thread::current().id()), Driver::Task);
    (run.to_owned(), driver)
}

impl WriteBehind {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Holder, Held>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The batch to append for `batch`, decided from `version`: the run's held batches
    /// first when they end at `version` (a held run left by an earlier error, which ends
    /// elsewhere, is dropped), and the version the whole is appended at.
    pub(super) fn with_held(
        &self,
        holder: &Holder,
        version: u64,
        batch: Vec<NewEvent>,
    ) -> (u64, Vec<NewEvent>) {
        match self.lock().remove(holder) {
            Some(mut held) if held.next == version => {
                held.events.extend(batch);
                (held.base, held.events)
            }
            _ => (version, batch),
        }
    }

    /// Holds `events` (appendable at `base`; the state is now at `next`).
    pub(super) fn hold(&self, holder: Holder, base: u64, next: u64, events: Vec<NewEvent>) {
        self.lock().insert(holder, Held { base, next, events });
    }

    /// Takes what is held if it ends at `version` (drops it otherwise).
    pub(super) fn take(&self, holder: &Holder, version: u64) -> Option<(u64, Vec<NewEvent>)> {
        self.lock()
            .remove(holder)
            .filter(|held| held.next == version)
            .map(|held| (held.base, held.events))
    }
}

/// Whether the runtime's next step for this state only reads (see the module doc), so the
/// batch that led to it may be held.
pub(super) fn next_step_only_reads(state: &RunState) -> bool {
    state.status == RunStatus::Running
        && matches!(
            state.pending_effects().first().map(|(_, work)| *work),
            Some(EffectWork::DryRun | EffectWork::Execute | EffectWork::Verify)
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_store::WallTime;

    fn event(kind: &str) -> NewEvent {
        NewEvent {
            kind: kind.into(),
            kind_version: 1,
            recorded_at: WallTime(0),
            policy: None,
            payload: Vec::new(),
        }
    }

    fn kinds(events: &[NewEvent]) -> Vec<&str> {
        events.iter().map(|e| e.kind.as_str()).collect()
    }

    #[tokio::test]
    async fn held_batches_go_first_only_for_their_task_and_when_they_end_where_the_next_begins() {
        let wb = std::sync::Arc::new(WriteBehind::default());
        let r = holder("r");
        wb.hold(r.clone(), 3, 5, vec![event("a"), event("b")]);
        let (base, events) = wb.with_held(&r, 5, vec![event("c")]);
        assert_eq!((base, kinds(&events)), (3, vec!["a", "b", "c"]));
        // Taken: nothing is held any more.
        assert_eq!(wb.with_held(&r, 6, vec![event("d")]).0, 6);

        // Left by an earlier error (the state was folded again from the log): dropped.
        wb.hold(r.clone(), 3, 5, vec![event("a"), event("b")]);
        let (base, events) = wb.with_held(&r, 3, vec![event("x")]);
        assert_eq!((base, kinds(&events)), (3, vec!["x"]));
        assert!(wb.take(&r, 5).is_none());

        // Another run, or the same run driven by another task, never sees them.
        wb.hold(r.clone(), 1, 2, vec![event("a")]);
        let s = holder("s");
        assert_eq!(wb.with_held(&s, 2, vec![event("b")]).0, 2);
        let other = wb.clone();
        let (base, len) = tokio::spawn(async move {
            let r_elsewhere = holder("r");
            let (base, events) = other.with_held(&r_elsewhere, 2, vec![event("b")]);
            (base, events.len())
        })
        .await
        .expect("task");
        assert_eq!((base, len), (2, 1));
        assert_eq!(wb.take(&r, 2).map(|(b, e)| (b, e.len())), Some((1, 1)));
    }
}
