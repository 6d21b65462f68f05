//! Several child processes of one command, each speaking JSON lines one exchange at a
//! time: an exchange takes the lowest-numbered idle process, starting it on first use, so
//! calls made one after another always reach the same process and a second process is
//! started only when two exchanges are under way at once. Waiting for an idle process
//! counts against the exchange's deadline, in the order the exchanges came.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::{CommandConfig, ProcessTransport, TransportError};

/// Up to `size` processes of one command.
pub(crate) struct ProcessPool {
    processes: Box<[ProcessTransport]>,
    idle: Mutex<BTreeSet<usize>>,
    /// One permit per idle process; tokio's semaphore serves waiters in order.
    permits: Semaphore,
}

impl ProcessPool {
    /// A pool of at most `size` processes, none started yet.
    pub(crate) fn new(config: &CommandConfig, size: NonZeroUsize, retry_clean_exit: bool) -> Self {
        let processes = (0..size.get())
            .map(|_| ProcessTransport::new(config.clone()).retry_clean_exit(retry_clean_exit))
            .collect();
        Self {
            processes,
            idle: Mutex::new((0..size.get()).collect()),
            permits: Semaphore::new(size.get()),
        }
    }

    /// As [`ProcessTransport::exchange_checked`], on the lowest-numbered idle process.
    ///
    /// # Errors
    /// As [`ProcessTransport::exchange_checked`]; [`TransportError::TimedOut`] too when
    /// no process became idle before `deadline`.
    pub(crate) async fn exchange_checked<T>(
        &self,
        line: &[u8],
        deadline: Instant,
        check: impl FnOnce(Vec<u8>) -> (T, bool),
    ) -> Result<T, TransportError> {
        let Ok(Ok(_permit)) = tokio::time::timeout_at(deadline, self.permits.acquire()).await
        else {
            return Err(TransportError::TimedOut);
        };
        let taken = Taken::take(&self.idle);
        self.processes[taken.slot]
            .exchange_checked(line, deadline, check)
            .await
    }

    /// How many times its processes have been started, all together.
    pub(crate) fn start_count(&self) -> u64 {
        self.processes
            .iter()
            .map(ProcessTransport::start_count)
            .sum()
    }

    /// How many processes have been started at least once.
    pub(crate) fn started(&self) -> usize {
        self.processes
            .iter()
            .filter(|p| p.start_count() > 0)
            .count()
    }

    /// Kills every running process; the next exchanges start new ones.
    pub(crate) async fn shutdown(&self) {
        for process in &self.processes {
            process.shutdown().await;
        }
    }
}

/// An idle process taken for one exchange, given back when the exchange ends, however it
/// ends (a caller that stops waiting drops the exchange mid-way).
struct Taken<'a> {
    idle: &'a Mutex<BTreeSet<usize>>,
    slot: usize,
}

impl<'a> Taken<'a> {
    /// Takes the lowest-numbered idle process; the caller holds a permit, so one is idle.
    fn take(idle: &'a Mutex<BTreeSet<usize>>) -> Self {
        let slot = idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_first()
            .unwrap_or_default();
        Self { idle, slot }
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(self.slot);
    }
}
