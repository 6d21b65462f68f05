//! Durable timers as folded from their events (docs/agent-protocol.md#waiting-wait): each
//! timer an agent's `wait` set, when it is due, and when it fired.

use serde::{Deserialize, Serialize};

use super::RunState;
use crate::events::RunEvent;
use crate::events::timer::TimerSet;
use docket_protocol::TimerId;

/// One durable timer of a run: the `timer.set` that made it, and its firing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerRecord {
    /// What was set: who waits, until when, why.
    pub set: TimerSet,
    /// When it fired (recorded), once it has.
    pub fired_at_ms: Option<i64>,
    /// The timeout of a wait for an outside event that was delivered first: it never
    /// fires.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cleared: bool,
}

impl TimerRecord {
    /// Set, not yet fired, and not cleared.
    #[must_use]
    pub fn pending(&self) -> bool {
        self.fired_at_ms.is_none() && !self.cleared
    }
}

impl RunState {
    /// Every timer of the run, by id.
    #[must_use]
    pub fn timers(&self) -> &std::collections::BTreeMap<TimerId, TimerRecord> {
        &self.timers
    }

    /// Whether a timer is set and has not fired (an agent waits for it).
    #[must_use]
    pub fn timers_pending(&self) -> bool {
        self.timers.values().any(TimerRecord::pending)
    }

    /// Whether a branch of the fan-out `group` waits on a timer (the group is not joined
    /// before it fires).
    #[must_use]
    pub fn timers_pending_in(&self, group: &str) -> bool {
        self.timers.values().any(|t| {
            t.pending()
                && self
                    .calls
                    .get(&t.set.request_id)
                    .is_some_and(|c| c.branch_of.as_deref() == Some(group))
        })
    }

    /// The pending timer due first (the earlier id on a tie): what the run waits for when
    /// nothing else is to be done.
    #[must_use]
    pub fn next_timer(&self) -> Option<&TimerRecord> {
        self.timers
            .values()
            .filter(|t| t.pending())
            .min_by_key(|t| t.set.due_at_ms)
    }

    /// When the timer the run waits for is due, ms since the Unix epoch: a running run
    /// whose next step is that timer ([`NextStep::WaitForTimer`]). What a process that
    /// fires timers apart from drives keeps for the run.
    ///
    /// [`NextStep::WaitForTimer`]: super::NextStep::WaitForTimer
    #[must_use]
    pub fn waits_until_ms(&self) -> Option<i64> {
        match self.next_step() {
            super::NextStep::WaitForTimer(timer) => Some(timer.set.due_at_ms),
            _ => None,
        }
    }

    /// Whether the time waiting on pending timers is left out of wall time: some pending
    /// timer does not count against it.
    pub(crate) fn timer_wait_uncounted(&self) -> bool {
        self.timers
            .values()
            .any(|t| t.pending() && !t.set.counts_against_wall_time)
            || self.signal_wait_uncounted()
    }

    /// Folds a timer event.
    pub(super) fn apply_timer(&mut self, event: &RunEvent) {
        match event {
            RunEvent::TimerSet(set) => {
                self.timers_set += 1;
                // A scheduled effect is held until the timer fires.
                if let Some(effect) = set.effect_id.as_ref().and_then(|e| self.effects.get_mut(e)) {
                    effect.phase = super::EffectPhase::Scheduled;
                }
                self.timers.insert(
                    set.timer_id.clone(),
                    TimerRecord {
                        set: set.clone(),
                        fired_at_ms: None,
                        cleared: false,
                    },
                );
            }
            RunEvent::TimerFired(fired) => {
                if let Some(t) = self.timers.get_mut(&fired.timer_id) {
                    t.fired_at_ms = Some(fired.at_ms);
                }
            }
            _ => {}
        }
    }
}
