//! Fault injection for the log's file layer (tests, and the `fault-injection` feature).
//!
//! Every write, sync, truncation and file creation the log makes is one numbered operation;
//! a plan makes operation `n` fail (a failing write first writes half its bytes, as a torn
//! write would). A plan can also hold the writer before it takes its next batch, so a test can
//! queue many appends and watch them share one sync.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::segment::FileOp;

/// Which operation of the log's file layer to fail, and a gate to hold the writer.
#[derive(Debug, Default)]
pub struct FaultPlan {
    fail_at: AtomicU64,
    armed: AtomicBool,
    seen: AtomicU64,
    held: Mutex<bool>,
    released: Condvar,
    indexer_held: Mutex<bool>,
    indexer_released: Condvar,
    fail_index: AtomicBool,
    disk_full: AtomicBool,
}

impl FaultPlan {
    /// A plan that injects nothing (count operations, hold the writer).
    pub fn new() -> Arc<FaultPlan> {
        Arc::new(FaultPlan::default())
    }

    /// A plan whose operation number `n` (counting from 0) fails with an I/O error.
    pub fn fail_op(n: u64) -> Arc<FaultPlan> {
        let plan = FaultPlan::default();
        plan.fail_at.store(n, Ordering::SeqCst);
        plan.armed.store(true, Ordering::SeqCst);
        Arc::new(plan)
    }

    /// File operations performed (or attempted) so far.
    pub fn ops_seen(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }

    /// Makes the writer wait before taking its next batch, until [`FaultPlan::release`].
    pub fn hold_writer(&self) {
        if let Ok(mut held) = self.held.lock() {
            *held = true;
        }
    }

    pub fn release(&self) {
        if let Ok(mut held) = self.held.lock() {
            *held = false;
        }
        self.released.notify_all();
    }

    /// Makes every later sled write of the indexer fail, until [`FaultPlan::heal_index_writes`].
    pub fn fail_index_writes(&self) {
        self.fail_index.store(true, Ordering::SeqCst);
    }

    /// Lets the indexer's sled writes succeed again.
    pub fn heal_index_writes(&self) {
        self.fail_index.store(false, Ordering::SeqCst);
    }

    /// Fails every file operation of the log with "No space left on device" (ENOSPC), as
    /// a full disk does, until [`FaultPlan::free_space`].
    pub fn fill_disk(&self) {
        self.disk_full.store(true, Ordering::SeqCst);
    }

    /// Ends [`FaultPlan::fill_disk`].
    pub fn free_space(&self) {
        self.disk_full.store(false, Ordering::SeqCst);
    }

    pub(crate) fn index_write_fails(&self) -> bool {
        self.fail_index.load(Ordering::SeqCst)
    }

    /// Makes the indexer wait before writing its next batch to sled, until
    /// [`FaultPlan::release_indexer`]: acknowledged events then live only in the log and memory.
    pub fn hold_indexer(&self) {
        if let Ok(mut held) = self.indexer_held.lock() {
            *held = true;
        }
    }

    pub fn release_indexer(&self) {
        if let Ok(mut held) = self.indexer_held.lock() {
            *held = false;
        }
        self.indexer_released.notify_all();
    }

    pub(crate) fn wait_while_indexer_held(&self) {
        let Ok(mut held) = self.indexer_held.lock() else {
            return;
        };
        while *held {
            held = match self.indexer_released.wait(held) {
                Ok(h) => h,
                Err(_) => return,
            };
        }
    }

    pub(crate) fn wait_while_held(&self) {
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        while *held {
            held = match self.released.wait(held) {
                Ok(h) => h,
                Err(_) => return,
            };
        }
    }

    /// Called before each file operation; `Err` means: fail it.
    pub(crate) fn before(&self, op: FileOp) -> io::Result<()> {
        let n = self.seen.fetch_add(1, Ordering::SeqCst);
        if self.disk_full.load(Ordering::SeqCst) {
            // ENOSPC, as Linux reports a full disk.
            return Err(io::Error::from_raw_os_error(28));
        }
        if self.armed.load(Ordering::SeqCst) && n == self.fail_at.load(Ordering::SeqCst) {
            return Err(io::Error::other(format!("injected fault at {op:?} #{n}")));
        }
        Ok(())
    }
}
