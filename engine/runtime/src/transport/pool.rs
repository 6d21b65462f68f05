//! Several child processes of one command: an exchange takes the lowest-numbered process
//! with room for one more (a process takes one line at a time, or `per_process` lines at
//! once when the program says it answers several, [`MultiplexTransport`]), starting it
//! on first use. Calls made one after another therefore always reach the same process,
//! and a second process is started only when the first is full. Waiting for room counts
//! against the exchange's deadline; room is given by the request's priority, then in the
//! order the exchanges came ([`Admission`]).

use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};

use tokio::time::Instant;

use docket_decider::Priority;

use super::admission::Admission;
use super::multiplex::MultiplexTransport;
use super::{CommandConfig, ProcessTransport, TransportError};

/// One process of the pool.
enum Slot {
    /// One line at a time.
    One(Box<ProcessTransport>),
    /// Several lines at once, answers matched by request id.
    Many(MultiplexTransport),
}

/// Up to `size` processes of one command, each taking `per_process` lines at once.
pub(crate) struct ProcessPool {
    slots: Box<[Slot]>,
    /// Exchanges under way on each process.
    load: Mutex<Vec<usize>>,
    per_process: usize,
    /// Room for one line per line the pool may have under way, given by priority.
    admission: Admission,
}

impl ProcessPool {
    /// A pool of at most `size` processes taking `per_process` lines each, none started.
    pub(crate) fn new(
        config: &CommandConfig,
        size: NonZeroUsize,
        per_process: NonZeroUsize,
        retry_clean_exit: bool,
    ) -> Self {
        let slots = (0..size.get())
            .map(|_| {
                if per_process.get() == 1 {
                    Slot::One(Box::new(
                        ProcessTransport::new(config.clone()).retry_clean_exit(retry_clean_exit),
                    ))
                } else {
                    Slot::Many(MultiplexTransport::new(config.clone()))
                }
            })
            .collect();
        Self {
            slots,
            load: Mutex::new(vec![0; size.get()]),
            per_process: per_process.get(),
            admission: Admission::new(size.get().saturating_mul(per_process.get())),
        }
    }

    /// Sends `line`, the request `request_id`, to the lowest-numbered process with room
    /// (waiting for room by `priority`), as [`ProcessTransport::exchange_checked`] does for
    /// one process.
    ///
    /// # Errors
    /// As [`ProcessTransport::exchange_checked`]; [`TransportError::TimedOut`] too when
    /// no process had room before `deadline`.
    pub(crate) async fn exchange_checked<T>(
        &self,
        line: &[u8],
        (request_id, priority): (&str, Priority),
        deadline: Instant,
        check: impl FnOnce(Vec<u8>) -> (T, bool),
    ) -> Result<T, TransportError> {
        let Ok(_pass) = tokio::time::timeout_at(deadline, self.admission.enter(priority)).await
        else {
            return Err(TransportError::TimedOut);
        };
        // Declared after the pass, so dropped before it: the process's room is given back
        // before the next waiter is let in.
        let taken = Taken::take(&self.load, self.per_process);
        match &self.slots[taken.slot] {
            Slot::One(process) => process.exchange_checked(line, deadline, check).await,
            Slot::Many(process) => {
                process
                    .exchange_checked(line, request_id, deadline, check)
                    .await
            }
        }
    }

    /// How many times its processes have been started, all together.
    pub(crate) fn start_count(&self) -> u64 {
        self.slots.iter().map(Slot::start_count).sum()
    }

    /// How many processes have been started at least once.
    pub(crate) fn started(&self) -> usize {
        self.slots.iter().filter(|s| s.start_count() > 0).count()
    }

    /// Kills every running process; the next exchanges start new ones.
    pub(crate) async fn shutdown(&self) {
        for slot in &self.slots {
            match slot {
                Slot::One(process) => process.shutdown().await,
                Slot::Many(process) => process.shutdown().await,
            }
        }
    }
}

impl Slot {
    fn start_count(&self) -> u64 {
        match self {
            Self::One(process) => process.start_count(),
            Self::Many(process) => process.start_count(),
        }
    }
}

/// Room on one process taken for one exchange, given back when the exchange ends,
/// however it ends (a caller that stops waiting drops the exchange mid-way).
struct Taken<'a> {
    load: &'a Mutex<Vec<usize>>,
    slot: usize,
}

impl<'a> Taken<'a> {
    /// Takes room on the lowest-numbered process that has some; the caller holds a
    /// permit, so one has.
    fn take(load: &'a Mutex<Vec<usize>>, per_process: usize) -> Self {
        let mut load_of = load.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = load_of
            .iter()
            .position(|&n| n < per_process)
            .unwrap_or_default();
        if let Some(n) = load_of.get_mut(slot) {
            *n += 1;
        }
        Self { load, slot }
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let mut load = self.load.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = load.get_mut(self.slot) {
            *n = n.saturating_sub(1);
        }
    }
}
