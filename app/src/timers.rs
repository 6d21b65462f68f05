//! The runs a process keeps waiting on timers (docs/agent-protocol.md#waiting-wait), for a
//! process whose drives end at a timer not yet due ([`Runtime::set_timers_elsewhere`]):
//! each waiting run is one entry, its id and when its timer is due, not a sleeping drive
//! holding its state. The timer itself is in the run's log; this is only when to look
//! again, rebuilt from the log when the process starts.
//!
//! [`Runtime::set_timers_elsewhere`]: docket_runtime::Runtime::set_timers_elsewhere

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use docket_decider::RunId;
use tokio::sync::Notify;

/// The longest single wait: the clock is read again after it, so a wall clock set forward
/// or back moves a firing by at most this much.
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// Waiting runs by when their timer is due (ms since the Unix epoch), one entry per run.
#[derive(Debug, Default)]
pub struct DueTimers {
    entries: Mutex<Entries>,
    /// Told when an entry may now be the first due.
    changed: Notify,
}

#[derive(Debug, Default)]
struct Entries {
    by_due: BTreeSet<(i64, RunId)>,
    by_run: BTreeMap<RunId, i64>,
}

impl DueTimers {
    /// Keeps `run` until `due_ms`, in place of any earlier entry for it.
    pub fn insert(&self, run: RunId, due_ms: i64) {
        let first = {
            let mut e = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(old) = e.by_run.insert(run.clone(), due_ms) {
                e.by_due.remove(&(old, run.clone()));
            }
            e.by_due.insert((due_ms, run.clone()));
            e.by_due.first().is_some_and(|(_, r)| *r == run)
        };
        if first {
            self.changed.notify_one();
        }
    }

    /// Whether `run` waits here.
    #[must_use]
    pub fn contains(&self, run: &RunId) -> bool {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_run
            .contains_key(run)
    }

    /// How many runs wait.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_run
            .len()
    }

    /// Whether no run waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the runs due by `now_ms`, the earliest first.
    fn take_due(&self, now_ms: i64) -> Vec<RunId> {
        let mut e = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut due = Vec::new();
        while let Some((at, _)) = e.by_due.first()
            && *at <= now_ms
        {
            let Some((_, run)) = e.by_due.pop_first() else {
                break;
            };
            e.by_run.remove(&run);
            due.push(run);
        }
        due
    }

    fn next_due(&self) -> Option<i64> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_due
            .first()
            .map(|(at, _)| *at)
    }

    /// Waits until some run is due by `now` (read again after every wait), and takes the
    /// runs due then, the earliest first. One task waits at a time.
    pub async fn due(&self, now: impl Fn() -> i64) -> Vec<RunId> {
        loop {
            let now_ms = now();
            let due = self.take_due(now_ms);
            if !due.is_empty() {
                return due;
            }
            let wait = self.next_due().map_or(LONGEST_WAIT, |at| {
                Duration::from_millis(u64::try_from(at - now_ms).unwrap_or(0))
            });
            // An entry due earlier than the one waited for wakes the wait.
            let _ = tokio::time::timeout(wait.min(LONGEST_WAIT), self.changed.notified()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_come_due_in_order_one_entry_each() {
        let t = DueTimers::default();
        t.insert("b".into(), 20);
        t.insert("a".into(), 10);
        t.insert("c".into(), 30);
        // A run kept again replaces its entry.
        t.insert("c".into(), 15);
        assert_eq!(t.len(), 3);
        assert_eq!(t.take_due(9), Vec::<RunId>::new());
        assert_eq!(t.take_due(15), vec![RunId::from("a"), RunId::from("c")]);
        assert_eq!(t.next_due(), Some(20));
        assert_eq!(t.take_due(100), vec![RunId::from("b")]);
        assert!(t.is_empty());
    }

    #[tokio::test]
    async fn an_earlier_entry_wakes_the_wait() {
        let t = std::sync::Arc::new(DueTimers::default());
        let start = std::time::Instant::now();
        let now = move || i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX);
        t.insert("late".into(), 3_600_000);
        let waiter = {
            let t = t.clone();
            tokio::spawn(async move { t.due(now).await })
        };
        tokio::task::yield_now().await;
        t.insert("soon".into(), 0);
        let due = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken, not left waiting for the hour")
            .expect("joined");
        assert_eq!(due, vec![RunId::from("soon")]);
        assert_eq!(t.len(), 1);
    }
}
