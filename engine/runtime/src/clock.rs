//! Where the runtime reads the time. Time enters a run only through recorded events
//! (`at_ms` of inputs, each event's `recorded_at`), and only the runtime reads it, from
//! its [`Clock`]: the system clock in production, a [`SteppingClock`] where a recording
//! must be reproducible to the byte (golden logs, benchmarks that compare logs).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall time, in nanoseconds since the Unix epoch.
pub trait Clock: Send + Sync {
    /// The time now.
    fn now_ns(&self) -> i64;

    /// The time now, in milliseconds.
    fn now_ms(&self) -> i64 {
        self.now_ns().div_euclid(1_000_000)
    }
}

/// The operating system's wall clock (the default).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

/// A clock that starts at a given instant and moves forward by a fixed step at every
/// read, so that a run driven by the same agents in the same order records the same
/// times, and so the same bytes and hashes, every time.
#[derive(Debug)]
pub struct SteppingClock {
    next_ns: AtomicI64,
    step_ns: i64,
}

impl SteppingClock {
    /// Starts at `start_ns`, advancing `step_ns` at each read.
    #[must_use]
    pub fn new(start_ns: i64, step_ns: i64) -> Self {
        Self {
            next_ns: AtomicI64::new(start_ns),
            step_ns,
        }
    }
}

impl Clock for SteppingClock {
    fn now_ns(&self) -> i64 {
        self.next_ns.fetch_add(self.step_ns, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stepping_clock_moves_by_its_step_at_each_read() {
        let clock = SteppingClock::new(1_000_000_000, 2_000_000);
        assert_eq!(clock.now_ns(), 1_000_000_000);
        assert_eq!(clock.now_ms(), 1_002);
        assert_eq!(clock.now_ns(), 1_004_000_000);
    }

    #[test]
    fn the_system_clock_is_past_2020() {
        assert!(SystemClock.now_ms() > 1_577_836_800_000);
    }
}
