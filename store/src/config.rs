//! How a store is opened.

/// Whether an append waits for its bytes to reach stable storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// `fdatasync` before acknowledging (group commit: concurrent appends share one sync).
    #[default]
    Sync,
    /// Acknowledge after `write`, never sync. Loses acknowledged events on power loss:
    /// for tests and throwaway data only.
    UnsafeNoSync,
}

#[derive(Clone, Debug)]
pub struct StoreConfig {
    pub durability: Durability,
    /// Payloads longer than this many bytes are stored once as a content-addressed blob
    /// ([`crate::BLOB_THRESHOLD`] unless a test needs another: the choice changes hashes).
    pub blob_threshold: usize,
    /// A new segment file is started once the current one would grow past this size.
    pub segment_max_bytes: u64,
    /// Whether an event's canonical body or a blob is stored compressed when that makes it
    /// shorter (FORMAT.md §2); what the hashes cover is the same either way. On by default;
    /// off to compare, or for a log that older builds must read (they refuse format 2 and 3).
    pub compress: bool,
    /// How long opening waits for another process's writer lock on the directory before it
    /// gives up with [`crate::StoreError::Held`] (store/FORMAT.md §10).
    pub lock_wait: std::time::Duration,
    /// Told, once, who holds the lock when opening has to wait for it (a command says so
    /// on its terminal).
    pub on_lock_wait: Option<fn(&std::path::Path, &crate::LockHolder)>,
    /// Injects I/O faults into the log's file layer.
    #[cfg(any(test, feature = "fault-injection"))]
    pub faults: Option<std::sync::Arc<crate::fault::FaultPlan>>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            durability: Durability::Sync,
            blob_threshold: crate::seal::BLOB_THRESHOLD,
            segment_max_bytes: 64 * 1024 * 1024,
            compress: true,
            lock_wait: std::time::Duration::from_secs(10),
            on_lock_wait: None,
            #[cfg(any(test, feature = "fault-injection"))]
            faults: None,
        }
    }
}

impl StoreConfig {
    pub(crate) fn syncs(&self) -> bool {
        self.durability == Durability::Sync
    }

    #[cfg(any(test, feature = "fault-injection"))]
    pub(crate) fn faults(&self) -> crate::segment::Faults {
        self.faults.clone()
    }

    #[cfg(not(any(test, feature = "fault-injection")))]
    pub(crate) fn faults(&self) -> crate::segment::Faults {
        crate::segment::Faults
    }
}
