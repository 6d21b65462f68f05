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
use docket_policies::Priority;
use tokio::sync::Notify;

/// The longest single wait: the clock is read again after it, so a wall clock set forward
/// or back moves a firing by at most this much.
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// Waiting runs by when their timer is due (ms since the Unix epoch), one entry per run;
/// those due are handed out in the claim order of workers (docs/postgres.md#claim-order):
/// by when they fell due plus one aging step for `NORMAL` and two for `LOW`.
#[derive(Debug)]
pub struct DueTimers {
    entries: Mutex<Entries>,
    /// Told when an entry may now be the first due.
    changed: Notify,
    /// One aging step, in ms.
    aging_ms: i64,
}

impl Default for DueTimers {
    fn default() -> Self {
        DueTimers::with_aging(docket_store_postgres::DEFAULT_PRIORITY_AGING)
    }
}

#[derive(Debug, Default)]
struct Entries {
    /// Not yet due, by due time.
    by_due: BTreeSet<(i64, RunId)>,
    /// Due, by place in the claim order (due time plus the priority's aging steps).
    ready: BTreeSet<(i64, RunId)>,
    /// Each run's entry: its due time, its priority and whether it was found due.
    by_run: BTreeMap<RunId, Entry>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    due_ms: i64,
    priority: Priority,
    /// Its place in `ready`, once due.
    place: Option<i64>,
}

impl Entries {
    fn remove(&mut self, run: &RunId) {
        if let Some(old) = self.by_run.remove(run) {
            match old.place {
                Some(place) => self.ready.remove(&(place, run.clone())),
                None => self.by_due.remove(&(old.due_ms, run.clone())),
            };
        }
    }
}

fn steps(priority: Priority) -> i64 {
    match priority {
        Priority::High => 0,
        Priority::Normal => 1,
        Priority::Low => 2,
    }
}

impl DueTimers {
    /// Handing out the runs due with `aging` as one step of the claim order.
    #[must_use]
    pub fn with_aging(aging: Duration) -> DueTimers {
        DueTimers {
            entries: Mutex::default(),
            changed: Notify::new(),
            aging_ms: i64::try_from(aging.as_millis()).unwrap_or(i64::MAX),
        }
    }

    /// Keeps `run`, of `priority` (its bundle's `[defaults] priority`), until `due_ms`, in
    /// place of any earlier entry for it.
    pub fn insert(&self, run: RunId, due_ms: i64, priority: Priority) {
        let first = {
            let mut e = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            e.remove(&run);
            e.by_run.insert(
                run.clone(),
                Entry {
                    due_ms,
                    priority,
                    place: None,
                },
            );
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

    /// Takes the first run in the claim order among those due by `now_ms`.
    fn take_due(&self, now_ms: i64) -> Option<RunId> {
        let mut e = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some((at, _)) = e.by_due.first()
            && *at <= now_ms
        {
            let Some((at, run)) = e.by_due.pop_first() else {
                break;
            };
            let Some(entry) = e.by_run.get_mut(&run) else {
                continue;
            };
            let place = at.saturating_add(steps(entry.priority).saturating_mul(self.aging_ms));
            entry.place = Some(place);
            e.ready.insert((place, run));
        }
        let (_, run) = e.ready.pop_first()?;
        e.by_run.remove(&run);
        Some(run)
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
    /// first due in the claim order: `HIGH` before `NORMAL` before `LOW`, one priority in
    /// the order its runs fell due, and a run that fell due an aging step per priority
    /// earlier before any other. One task waits at a time; a caller with room for one
    /// drive takes one run, so runs due later still get their place among those waiting.
    pub async fn due(&self, now: impl Fn() -> i64) -> RunId {
        loop {
            let now_ms = now();
            if let Some(run) = self.take_due(now_ms) {
                return run;
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

    const MINUTE: i64 = 60_000;

    fn all_due(t: &DueTimers, now_ms: i64) -> Vec<RunId> {
        std::iter::from_fn(|| t.take_due(now_ms)).collect()
    }

    #[test]
    fn runs_come_due_in_order_one_entry_each() {
        let t = DueTimers::default();
        t.insert("b".into(), 20, Priority::Normal);
        t.insert("a".into(), 10, Priority::Normal);
        t.insert("c".into(), 30, Priority::Normal);
        // A run kept again replaces its entry.
        t.insert("c".into(), 15, Priority::Normal);
        assert_eq!(t.len(), 3);
        assert_eq!(t.take_due(9), None);
        assert_eq!(all_due(&t, 15), vec![RunId::from("a"), RunId::from("c")]);
        assert_eq!(t.next_due(), Some(20));
        assert_eq!(all_due(&t, 100), vec![RunId::from("b")]);
        assert!(t.is_empty());
    }

    /// docs/postgres.md#claim-order, for the runs a server keeps on timers: those due are
    /// taken HIGH before NORMAL before LOW, one priority in the order it fell due, and a
    /// LOW run due more than two aging steps before a HIGH one goes first.
    #[test]
    fn runs_due_are_taken_by_priority_and_a_long_due_one_is_not_starved() {
        let t = DueTimers::default();
        let now = 10 * MINUTE;
        t.insert("low".into(), now - 10, Priority::Low);
        t.insert("normal".into(), now - 20, Priority::Normal);
        t.insert("high-2".into(), now - 5, Priority::High);
        t.insert("high-1".into(), now - 6, Priority::High);
        t.insert("low-long-due".into(), now - 3 * MINUTE, Priority::Low);
        t.insert("later".into(), now + 1, Priority::High);
        assert_eq!(
            all_due(&t, now),
            ["low-long-due", "high-1", "high-2", "normal", "low"].map(RunId::from)
        );
        // Kept again before it is taken, a run waits at its new due time.
        t.insert("moved".into(), now, Priority::High);
        t.insert("moved".into(), now + 5, Priority::High);
        assert_eq!(all_due(&t, now + 1), [RunId::from("later")]);
        assert_eq!(t.len(), 1);
    }

    #[tokio::test]
    async fn an_earlier_entry_wakes_the_wait() {
        let t = std::sync::Arc::new(DueTimers::default());
        let start = std::time::Instant::now();
        let now = move || i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX);
        t.insert("late".into(), 3_600_000, Priority::Normal);
        let waiter = {
            let t = t.clone();
            tokio::spawn(async move { t.due(now).await })
        };
        tokio::task::yield_now().await;
        t.insert("soon".into(), 0, Priority::Normal);
        let due = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken, not left waiting for the hour")
            .expect("joined");
        assert_eq!(due, RunId::from("soon"));
        assert_eq!(t.len(), 1);
    }
}
