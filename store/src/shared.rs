//! State shared by appenders, the writer thread and readers of one open store.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::Thread;

use tokio::sync::watch;

use crate::config::StoreConfig;
use crate::error::{StoreError, io_err};
use crate::event::{Hash, StreamId};
use crate::index::{Index, Position, Run, StreamState};
use crate::segment::segment_path;

/// A map keyed by stream id. Looked up several times per appended event (heads, the writer's
/// heads, watchers), so it uses a fast hasher rather than SipHash (stream ids are not
/// attacker-chosen keys of a public table); nothing iterates it in an order that matters.
pub(crate) type StreamMap<V> = HashMap<StreamId, V, foldhash::fast::RandomState>;

pub(crate) struct Shared {
    pub log_dir: PathBuf,
    pub config: StoreConfig,
    pub index: Index,
    /// Acknowledged heads; the writer updates them after a batch is durable and indexed.
    pub heads: Mutex<StreamMap<StreamState>>,
    /// Wakes tails: the latest acknowledged sequence per watched stream.
    pub watchers: Mutex<StreamMap<watch::Sender<u64>>>,
    read_files: Mutex<HashMap<u64, Arc<File>>>,
    pub stats: Counters,
    /// Set by the indexer when sled refuses a write: the writer then stops taking appends.
    pub index_failed: Mutex<Option<String>>,
    /// Runs and blobs acknowledged but not yet in sled: appends are acknowledged right after
    /// their sync, and the indexer catches up behind them. Runs are kept per stream number, in
    /// sequence order: the writer pushes at the back, the indexer pops what sled has from the front.
    pub recent_runs: Mutex<BTreeMap<u64, VecDeque<Run>>>,
    pub recent_blobs: Mutex<HashMap<Hash, Position>>,
    /// The writer thread, for the wake-up that ends its gathering.
    pub writer_thread: OnceLock<Thread>,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub batches: AtomicU64,
    pub syncs: AtomicU64,
    pub events: AtomicU64,
    pub queued: AtomicU64,
    /// While the writer gathers a batch: how many queued requests it waits for (0 otherwise).
    /// The appender whose request makes `queued` reach it wakes the writer, so a gathering
    /// writer is woken once per batch rather than once per request.
    pub gather_until: AtomicU64,
    /// Appends sent and not yet answered (or given up by their caller).
    pub in_flight: AtomicU64,
    /// Blob hashes the writer has put in its memory of stored blobs so far: an appender
    /// reads it before looking its blobs up, so the writer knows whether that memory still
    /// holds every blob written since (`writer::StoredBlobs::has_since`).
    pub blobs_remembered: AtomicU64,
    /// Nanoseconds the writer spent committing batches (checks, framing, write, sync,
    /// acknowledgements), and of those in writing and syncing: the serial section's wall time.
    pub commit_ns: AtomicU64,
    pub write_ns: AtomicU64,
    /// Nanoseconds the indexer spent writing batches to the index.
    pub index_ns: AtomicU64,
}

/// Times a thread found one of the store's maps locked by another, and the nanoseconds
/// it waited for it, over the process: how much the threads that share a store serialise
/// on it (`WriterStats::lock_waits`).
pub(crate) static LOCK_WAITS: AtomicU64 = AtomicU64::new(0);
pub(crate) static LOCK_WAITED_NS: AtomicU64 = AtomicU64::new(0);

/// Locks a mutex, recovering the data if a thread panicked while holding it (the data are
/// plain maps). A lock found held is counted with the time waited for it; one found free
/// costs what locking costs.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.try_lock() {
        Ok(guard) => guard,
        Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            let started = std::time::Instant::now();
            let guard = m.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            LOCK_WAITS.fetch_add(1, Ordering::Relaxed);
            LOCK_WAITED_NS.fetch_add(ns, Ordering::Relaxed);
            guard
        }
    }
}

impl Shared {
    pub(crate) fn new(
        log_dir: PathBuf,
        config: StoreConfig,
        index: Index,
        heads: StreamMap<StreamState>,
    ) -> Shared {
        Shared {
            log_dir,
            config,
            index,
            heads: Mutex::new(heads),
            watchers: Mutex::new(StreamMap::default()),
            read_files: Mutex::new(HashMap::new()),
            stats: Counters::default(),
            index_failed: Mutex::new(None),
            recent_runs: Mutex::new(BTreeMap::new()),
            recent_blobs: Mutex::new(HashMap::new()),
            writer_thread: OnceLock::new(),
        }
    }

    /// Runs holding events `from..=to` of stream `no`, from sled and from the not-yet-indexed
    /// tail, contiguous from the first one found (a gap ends the list; the next call starting
    /// there reports it if it is real).
    pub(crate) fn runs(
        &self,
        no: u64,
        from: u64,
        to: u64,
        limit: usize,
    ) -> Result<Vec<Run>, StoreError> {
        // The in-memory tail first: a run leaves it only after sled has it, so whatever is
        // missing from this copy is found by the sled query that follows.
        let recent: Vec<Run> = lock(&self.recent_runs)
            .get(&no)
            .map(|runs| {
                // Runs are in sequence order: skip those ending before `from` by binary search.
                let start = runs.partition_point(|r| r.first_seq + u64::from(r.count) <= from);
                runs.range(start..)
                    .take_while(|r| r.first_seq <= to)
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        // The in-memory tail is the stream's newest events: when it starts at or before
        // `from`, sled has nothing in the range that it lacks. A tail following the head reads
        // only from it, and so never waits for the indexer's sled write (which holds sled's
        // lock on every read until it is applied).
        if recent.first().is_some_and(|r| r.first_seq <= from) {
            // As the index answers: contiguous runs, until they hold `limit` events.
            let mut out: Vec<Run> = Vec::with_capacity(recent.len());
            let mut events = 0usize;
            for run in recent {
                if events >= limit
                    || out
                        .last()
                        .is_some_and(|p| p.first_seq + u64::from(p.count) != run.first_seq)
                {
                    break;
                }
                events += run.count as usize;
                out.push(run);
            }
            return Ok(out);
        }
        let indexed = self.index.runs(no, from, to, limit)?;
        if recent.is_empty() {
            return Ok(indexed);
        }
        let mut merged: BTreeMap<u64, Run> =
            indexed.into_iter().map(|r| (r.first_seq, r)).collect();
        for run in recent {
            merged.insert(run.first_seq, run);
        }
        let mut out: Vec<Run> = Vec::with_capacity(merged.len());
        for run in merged.into_values() {
            if let Some(prev) = out.last()
                && prev.first_seq + u64::from(prev.count) != run.first_seq
            {
                break;
            }
            out.push(run);
        }
        Ok(out)
    }

    /// Where a blob's record is, if the store has it.
    pub(crate) fn blob_position(&self, hash: &Hash) -> Result<Option<Position>, StoreError> {
        if let Some(pos) = lock(&self.recent_blobs).get(hash) {
            return Ok(Some(*pos));
        }
        self.index.blob(hash)
    }

    pub(crate) fn head(&self, stream: &StreamId) -> Option<StreamState> {
        lock(&self.heads).get(stream).copied()
    }

    /// A read-only handle on a segment, kept open for later reads.
    pub(crate) fn segment_file(&self, no: u64) -> Result<Arc<File>, StoreError> {
        let mut files = lock(&self.read_files);
        if let Some(f) = files.get(&no) {
            return Ok(f.clone());
        }
        let path = segment_path(&self.log_dir, no);
        let f = Arc::new(File::open(&path).map_err(io_err("opening segment for reading", &path))?);
        files.insert(no, f.clone());
        Ok(f)
    }

    /// A receiver of the stream's acknowledged head, created atomically with reading it.
    pub(crate) fn subscribe(&self, stream: &StreamId) -> watch::Receiver<u64> {
        let mut watchers = lock(&self.watchers);
        if let Some(tx) = watchers.get(stream) {
            return tx.subscribe();
        }
        let head = self.head(stream).map_or(0, |s| s.seq);
        let (tx, rx) = watch::channel(head);
        watchers.insert(stream.clone(), tx);
        rx
    }

    /// Called by the writer after heads are updated.
    pub(crate) fn notify(&self, updated: &[(StreamId, u64)]) {
        let mut watchers = lock(&self.watchers);
        if watchers.is_empty() {
            return;
        }
        for (stream, seq) in updated {
            if let Some(tx) = watchers.get(stream) {
                if tx.receiver_count() == 0 {
                    watchers.remove(stream);
                } else {
                    tx.send_replace(*seq);
                }
            }
        }
    }
}
