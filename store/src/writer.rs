//! The single log writer: group commit.
//!
//! It takes every append waiting in its channel, checks expected versions in arrival order,
//! writes them as one batch frame, issues one `fdatasync`, and only then makes them readable
//! and acknowledges each. Their sled index entries are written by a second thread behind it;
//! until then reads find them in memory. After an I/O failure it answers the batch as failed
//! and cuts the file back to the last synced length: after a failed fsync the kernel may
//! have dropped the batch's dirty pages, so nothing is acknowledged that was not proven
//! durable, and the next batch is written afresh from that length (a full disk that is
//! freed again costs only the batches written while it was full). Only when the cut itself
//! fails does it refuse further batches, trying the cut again before each.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tracing::{debug, error, info_span};

use crate::acknowledged::{AcknowledgedFile, LogPoint};
use crate::api::Appended;
use crate::codec::push_blob;
use crate::error::StoreError;
use crate::error::io_err;
use crate::event::{Hash, StreamId};
use crate::index::{
    IndexBatch, NODE_MIN_LEVEL, PAGE_MAX_RUNS, Position, RUN_MAX_EVENTS, Run, StreamState,
};
use crate::merkle::TreeHash;
use crate::segment::{
    BATCH_HEADER_LEN, Faults, LogFile, SEGMENT_HEADER_LEN, seal_batch, segment_path, sync_dir,
};
use crate::shared::{Shared, StreamMap, lock};

/// Longest the writer waits for more appends before a batch, when the previous batch held
/// several (PostgreSQL's `commit_delay`): a fraction of one sync. It stops waiting as soon as
/// as many requests as the previous batch held have arrived.
const COMMIT_DELAY: Duration = Duration::from_micros(100);

/// How long the writer keeps polling its channel after a batch of one request (when the request
/// before came back within this time too) before it blocks on it. A blocked writer costs the request that finds it asleep a thread wake-up (tens of µs
/// on a busy VM), which is much of a lone appender's non-sync latency; a closed-loop appender's
/// next request arrives within this time of its acknowledgement. The writer yields the core
/// between polls, so threads that need it run first.
const IDLE_SPIN: Duration = Duration::from_micros(100);

/// How far past a durable log's end the writer keeps the segment file written with zeros and
/// synced (PostgreSQL zero-fills its WAL segments for the same reason). Appending into a file
/// that grows makes every `fdatasync` commit the file's new size to the file system's journal
/// too; overwriting bytes already there does not. Measured here (ext4): 250-byte appends
/// 190 µs per sync against 245 µs growing; 80 KB appends 305 µs against 466 µs. The runway is
/// extended in steps of this size, in the same write and sync as the batch that reaches its end.
pub(crate) const RUNWAY: u64 = 1024 * 1024;

/// Stop draining the channel once a batch holds this much.
const MAX_BATCH_BYTES: usize = 32 * 1024 * 1024;

pub(crate) enum Request {
    Append(Box<AppendJob>),
    Blob {
        hash: Hash,
        bytes: Vec<u8>,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
}

/// Events encoded and hashed by the appender, assuming the head it saw is still the head.
pub(crate) struct AppendJob {
    pub stream: StreamId,
    pub expected: u64,
    /// The hash the first event links to: the writer checks it is still the head's.
    pub first_prev: Hash,
    /// Framed event records, back to back.
    pub records: Vec<u8>,
    /// (offset in `records`, record length) of each event.
    pub spans: Vec<(usize, u32)>,
    pub hashes: Vec<Hash>,
    /// Each event's Merkle leaf hash, computed by the appender (off the writer's thread); the
    /// indexer folds them into the stream's tree.
    pub leaves: Vec<TreeHash>,
    /// Each blob the events bring that the log did not hold when they were encoded, as its
    /// framed record (compressed there when that is shorter).
    pub blobs: Vec<(Hash, Vec<u8>)>,
    /// `blobs_remembered` when the appender looked its blobs up.
    pub blobs_seen: u64,
    pub reply: oneshot::Sender<Result<Appended, StoreError>>,
}

impl Request {
    fn size(&self) -> usize {
        match self {
            Request::Append(j) => {
                j.records.len() + j.blobs.iter().map(|b| b.1.len()).sum::<usize>()
            }
            Request::Blob { bytes, .. } => bytes.len(),
        }
    }
}

enum Accepted {
    Append {
        job: Box<AppendJob>,
        state: StreamState,
        /// Offset of the job's records within the frame.
        at: usize,
        blob_at: Vec<(Hash, usize, u32)>,
    },
    Blob {
        reply: oneshot::Sender<Result<(), StoreError>>,
        placed: Option<(Hash, usize, u32)>,
    },
}

/// A durable, acknowledged batch on its way to the index.
struct Durable {
    new_streams: Vec<(StreamId, u64)>,
    runs: Vec<(u64, Run)>,
    /// (stream number, first sequence, leaf hashes) of each append.
    leaves: Vec<(u64, u64, Vec<TreeHash>)>,
    blobs: Vec<(Hash, Position)>,
    /// (segment, end offset, next stream number) once this batch is indexed.
    covered: (u64, u64, u64),
}

pub(crate) struct Writer {
    pub shared: Arc<Shared>,
    pub rx: Receiver<Request>,
    /// Heads as written to the log; acknowledged heads (`shared.heads`) may trail them while
    /// the indexer catches up.
    pub log_heads: StreamMap<StreamState>,
    pub file: LogFile,
    pub segment: u64,
    /// Length of the current segment: everything before it is synced (or, unsynced mode, written).
    pub len: u64,
    /// The segment file's length: from `len` to here it holds zeros (the runway; durable mode only).
    pub zeroed_to: u64,
    pub next_stream: u64,
    pub faults: Faults,
    pub poisoned: Option<String>,
    /// A failed batch's bytes are still to be cut off the file (the cut failed too): tried
    /// again before the next batch, which is refused until it succeeds.
    pub cut_pending: bool,
    /// Where the indexer records how far the log was acknowledged (§15).
    pub acknowledged: Option<AcknowledgedFile>,
    /// Blobs lately found or written in the log, so that content appended again and again
    /// (a workflow's bundle in every run) is recognised without asking sled.
    pub stored_blobs: StoredBlobs,
}

/// How many blob hashes [`StoredBlobs`] remembers (32 bytes each, twice).
const STORED_BLOBS_KEPT: usize = 16 * 1024;

/// The hashes of blobs the log is known to hold, the latest [`STORED_BLOBS_KEPT`] found or
/// written. A blob in the log stays there, so a remembered hash is never wrong; one not
/// remembered is looked up. The lookup goes to sled, and every sled read waits while the
/// indexer applies its write (sled's lock), often tens of milliseconds under load: on the
/// writer's thread, that wait delays the whole batch and every append queued behind it.
#[derive(Default)]
pub(crate) struct StoredBlobs {
    known: std::collections::HashSet<Hash, foldhash::fast::RandomState>,
    order: std::collections::VecDeque<Hash>,
}

impl StoredBlobs {
    /// Whether the log holds the blob: remembered, or found (and then remembered).
    fn has(&mut self, shared: &Shared, hash: &Hash) -> bool {
        if self.known.contains(hash) {
            return true;
        }
        let found = matches!(shared.blob_position(hash), Ok(Some(_)));
        if found {
            self.note(shared, *hash);
        }
        found
    }

    /// Whether the log holds a blob its appender did not find when `blobs_remembered` was
    /// `seen`: only a blob written since can be there, and every one is remembered, so
    /// memory answers unless so many were remembered since that some were forgotten.
    fn has_since(&mut self, shared: &Shared, hash: &Hash, seen: u64) -> bool {
        let since = shared
            .stats
            .blobs_remembered
            .load(Ordering::SeqCst)
            .saturating_sub(seen);
        if since < STORED_BLOBS_KEPT as u64 {
            self.known.contains(hash)
        } else {
            self.has(shared, hash)
        }
    }

    /// [`Self::remember`], counted in `blobs_remembered`.
    fn note(&mut self, shared: &Shared, hash: Hash) {
        if self.remember(hash) {
            shared.stats.blobs_remembered.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Remembers a blob durable in the log, forgetting the oldest beyond the limit; whether
    /// it was not remembered already.
    fn remember(&mut self, hash: Hash) -> bool {
        if !self.known.insert(hash) {
            return false;
        }
        self.order.push_back(hash);
        if self.order.len() > STORED_BLOBS_KEPT
            && let Some(old) = self.order.pop_front()
        {
            self.known.remove(&old);
        }
        true
    }
}

impl Writer {
    pub(crate) fn run(mut self) {
        // Indexing (sled) runs on its own thread, overlapping the next batch's write and sync.
        let (to_indexer, from_writer) = mpsc::channel::<Durable>();
        let shared = self.shared.clone();
        let acknowledged = self.acknowledged.take();
        let indexer = std::thread::Builder::new()
            .name("docket-log-indexer".into())
            .spawn(move || index_batches(&shared, &from_writer, acknowledged.as_ref()));
        let indexer = match indexer {
            Ok(handle) => Some((to_indexer, handle)),
            Err(e) => {
                self.poisoned = Some(format!("starting the indexer: {e}"));
                None
            }
        };
        let sender = indexer.as_ref().map(|(tx, _)| tx.clone());
        let mut last_batch = 0usize;
        // Whether the last request came within [`IDLE_SPIN`] of the batch before it: only then
        // is polling for the next one likely to pay (an appender that appends now and then
        // would only cost the writer CPU).
        let mut came_back = true;
        while let Some((first, quick)) = self.next_request(last_batch <= 1 && came_back) {
            came_back = quick;
            #[cfg(any(test, feature = "fault-injection"))]
            if let Some(plan) = &self.faults {
                plan.wait_while_held();
            }
            let mut bytes = first.size();
            let mut batch = vec![first];
            // When appends are concurrent, wait a moment for those just acknowledged to come
            // back, so concurrent appenders move as one group instead of alternating halves;
            // but only until as many requests as the previous batch held are queued (a lone
            // appender never waits: its previous batch held one).
            if last_batch > 1 {
                self.gather(last_batch as u64);
            }
            while bytes < MAX_BATCH_BYTES {
                let next = self.rx.try_recv().ok();
                let Some(r) = next else { break };
                bytes += r.size();
                batch.push(r);
            }
            last_batch = batch.len();
            self.shared
                .stats
                .queued
                .fetch_sub(batch.len() as u64, Ordering::SeqCst);
            let started = Instant::now();
            self.commit(batch, sender.as_ref());
            add_elapsed(&self.shared.stats.commit_ns, started);
        }
        drop(sender);
        if let Some((tx, handle)) = indexer {
            drop(tx);
            handle.thread().unpark();
            let _ = handle.join();
        }
        lock(&self.shared.watchers).clear();
        if let Err(e) = self.shared.index.flush() {
            error!(error = %e, "flushing the index on close");
        }
    }

    /// The next request, and whether it came within [`IDLE_SPIN`]. With `poll` (after a batch of
    /// one, when the previous request came back that quickly) the queue is polled for
    /// [`IDLE_SPIN`], yielding the core in between, before it is waited for. Concurrent
    /// appenders are gathered by [`Self::gather`] instead, and a polling writer would take CPU
    /// they need. `None` once every sender is gone.
    fn next_request(&self, poll: bool) -> Option<(Request, bool)> {
        let start = Instant::now();
        if poll {
            loop {
                match self.rx.try_recv() {
                    Ok(r) => return Some((r, true)),
                    Err(mpsc::TryRecvError::Disconnected) => return None,
                    Err(mpsc::TryRecvError::Empty) => {}
                }
                if start.elapsed() >= IDLE_SPIN {
                    break;
                }
                std::thread::yield_now();
            }
        }
        let r = self.rx.recv().ok()?;
        Some((r, start.elapsed() < IDLE_SPIN))
    }

    /// Sleeps until `want` requests are queued (counting the one in hand) or the commit delay
    /// is over. The appender whose request completes the count unparks this thread.
    fn gather(&self, want: u64) {
        let stats = &self.shared.stats;
        let deadline = Instant::now() + COMMIT_DELAY;
        stats.gather_until.store(want, Ordering::SeqCst);
        loop {
            if stats.queued.load(Ordering::SeqCst) >= want {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::park_timeout(left);
        }
        stats.gather_until.store(0, Ordering::SeqCst);
    }

    fn commit(&mut self, batch: Vec<Request>, indexer: Option<&mpsc::Sender<Durable>>) {
        // While the index cannot be written, nothing more is taken: the indexer retries, and
        // the acknowledged batches it holds stay readable from memory meanwhile.
        let refused = self
            .poisoned
            .clone()
            .or_else(|| lock(&self.shared.index_failed).clone());
        if let Some(cause) = refused {
            for r in batch {
                reject(r, || StoreError::Poisoned {
                    cause: cause.clone(),
                });
            }
            return;
        }
        if self.cut_pending {
            if let Err(e) = self.cut_back() {
                error!(error = %e, segment = %self.file.path.display(), "cutting a failed batch off the log failed again");
                for r in batch {
                    reject(r, || same_failure(&e));
                }
                return;
            }
            self.cut_pending = false;
        }
        let span = info_span!("group_commit", requests = batch.len());
        let _guard = span.enter();

        let mut frame = vec![0u8; BATCH_HEADER_LEN];
        let mut accepted = Vec::with_capacity(batch.len());
        let mut placed_blobs: HashMap<Hash, (usize, u32)> = HashMap::new();
        // `log_heads` advance as appends are accepted, before the batch is durable: if the
        // write or sync fails, they are put back from here.
        let mut undo: Vec<(StreamId, Option<StreamState>)> = Vec::new();
        let next_stream_before = self.next_stream;
        {
            let compress = self.shared.config.compress;
            let heads = &mut self.log_heads;
            let stored = &mut self.stored_blobs;
            for req in batch {
                match req {
                    Request::Append(job) => {
                        let current = heads.get(&job.stream).copied();
                        let (actual, head_hash) =
                            current.map_or((0, None), |s| (s.seq, Some(s.hash)));
                        let links = head_hash.is_none_or(|h| h == job.first_prev);
                        if actual != job.expected || !links {
                            let _ = job.reply.send(Err(StoreError::Conflict {
                                stream: job.stream.clone(),
                                expected: job.expected,
                                actual,
                            }));
                            continue;
                        }
                        if !undo.iter().any(|(id, _)| *id == job.stream) {
                            undo.push((job.stream.clone(), current));
                        }
                        let no = match current {
                            Some(s) => s.no,
                            None => {
                                self.next_stream += 1;
                                self.next_stream - 1
                            }
                        };
                        let mut blob_at = Vec::new();
                        for (hash, record) in &job.blobs {
                            if let Some(&(at, len)) = placed_blobs.get(hash) {
                                blob_at.push((*hash, at, len));
                                continue;
                            }
                            if stored.has_since(&self.shared, hash, job.blobs_seen) {
                                continue;
                            }
                            let at = frame.len();
                            frame.extend_from_slice(record);
                            let len = (frame.len() - at) as u32;
                            placed_blobs.insert(*hash, (at, len));
                            blob_at.push((*hash, at, len));
                        }
                        let at = frame.len();
                        frame.extend_from_slice(&job.records);
                        let last = job.hashes.last().copied().unwrap_or(job.first_prev);
                        let state = StreamState {
                            no,
                            seq: job.expected + job.hashes.len() as u64,
                            hash: last,
                        };
                        match heads.get_mut(&job.stream) {
                            Some(head) => *head = state,
                            None => {
                                heads.insert(job.stream.clone(), state);
                            }
                        }
                        accepted.push(Accepted::Append {
                            job,
                            state,
                            at,
                            blob_at,
                        });
                    }
                    Request::Blob { hash, bytes, reply } => {
                        let known =
                            placed_blobs.contains_key(&hash) || stored.has(&self.shared, &hash);
                        let placed = if known {
                            None
                        } else {
                            let at = push_blob(&mut frame, &hash, &bytes, compress);
                            let len = (frame.len() - at) as u32;
                            placed_blobs.insert(hash, (at, len));
                            Some((hash, at, len))
                        };
                        accepted.push(Accepted::Blob { reply, placed });
                    }
                }
            }
        }
        if frame.len() == BATCH_HEADER_LEN {
            // Nothing new to write (conflicts, or blobs already stored).
            for a in accepted {
                if let Accepted::Blob { reply, .. } = a {
                    let _ = reply.send(Ok(()));
                }
            }
            return;
        }
        seal_batch(&mut frame);

        if let Err(e) = self.write_durably(&frame) {
            error!(error = %e, segment = %self.file.path.display(), "log write failed; the batch is answered as failed");
            for (stream, before) in undo {
                match before {
                    Some(state) => self.log_heads.insert(stream, state),
                    None => self.log_heads.remove(&stream),
                };
            }
            self.next_stream = next_stream_before;
            let again = same_failure(&e);
            let mut first = Some(e);
            for a in accepted {
                let err = first.take().unwrap_or_else(|| same_failure(&again));
                match a {
                    Accepted::Append { job, .. } => {
                        let _ = job.reply.send(Err(err));
                    }
                    Accepted::Blob { reply, .. } => {
                        let _ = reply.send(Err(err));
                    }
                }
            }
            return;
        }

        let base = self.len;
        let end = base + frame.len() as u64;
        let pos = |at: usize, len: u32| Position {
            segment: self.segment,
            offset: base + at as u64,
            len,
        };
        let mut new_streams = Vec::new();
        let mut runs = Vec::new();
        let mut leaves = Vec::new();
        let mut blobs = Vec::new();
        let mut events = 0u64;
        for a in &mut accepted {
            match a {
                Accepted::Append {
                    job,
                    state,
                    at,
                    blob_at,
                } => {
                    for (hash, bat, blen) in blob_at {
                        blobs.push((*hash, pos(*bat, *blen)));
                    }
                    for (k, chunk) in job.spans.chunks(RUN_MAX_EVENTS).enumerate() {
                        let bytes: u32 = chunk.iter().map(|s| s.1).sum();
                        let first = k * RUN_MAX_EVENTS;
                        let run = Run {
                            first_seq: job.expected + 1 + first as u64,
                            count: chunk.len() as u32,
                            pos: pos(*at + chunk[0].0, bytes),
                            last_hash: job.hashes[first + chunk.len() - 1],
                        };
                        runs.push((state.no, run));
                    }
                    if job.expected == 0 {
                        new_streams.push((job.stream.clone(), state.no));
                    }
                    leaves.push((state.no, job.expected + 1, std::mem::take(&mut job.leaves)));
                    events += job.hashes.len() as u64;
                }
                Accepted::Blob { placed, .. } => {
                    if let Some((hash, at, len)) = placed {
                        blobs.push((*hash, pos(*at, *len)));
                    }
                }
            }
        }
        self.len = end;

        // Durable: make the batch readable (until sled has it, from memory), then acknowledge.
        {
            let mut recent = lock(&self.shared.recent_runs);
            for (no, run) in &runs {
                recent.entry(*no).or_default().push_back(*run);
            }
        }
        lock(&self.shared.recent_blobs).extend(blobs.iter().copied());
        for (hash, _) in &blobs {
            self.stored_blobs.note(&self.shared, *hash);
        }
        let stats = &self.shared.stats;
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats.events.fetch_add(events, Ordering::Relaxed);
        let mut updated = Vec::with_capacity(accepted.len());
        {
            let mut heads = lock(&self.shared.heads);
            for a in &accepted {
                if let Accepted::Append { job, state, .. } = a {
                    heads.insert(job.stream.clone(), *state);
                    updated.push((job.stream.clone(), state.seq));
                }
            }
        }
        self.shared.notify(&updated);
        debug!(events, bytes = frame.len(), "batch acknowledged");
        for a in accepted {
            match a {
                Accepted::Append { job, .. } => {
                    let _ = job.reply.send(Ok(Appended {
                        stream: job.stream,
                        first_seq: job.expected + 1,
                        hashes: job.hashes,
                    }));
                }
                Accepted::Blob { reply, .. } => {
                    let _ = reply.send(Ok(()));
                }
            }
        }
        let durable = Durable {
            new_streams,
            runs,
            leaves,
            blobs,
            covered: (self.segment, end, self.next_stream),
        };
        if let Some(tx) = indexer
            && tx.send(durable).is_err()
        {
            self.poisoned = Some("the indexer stopped".to_owned());
        }
    }

    /// Writes the frame at the end of the log (starting a new segment if needed) and syncs it.
    /// On failure, cuts the file back to the last durable length (or leaves that to the next
    /// batch, when the cut fails too).
    fn write_durably(&mut self, frame: &[u8]) -> Result<(), StoreError> {
        let started = Instant::now();
        let result = self.write_and_sync(frame);
        add_elapsed(&self.shared.stats.write_ns, started);
        if result.is_err()
            && let Err(cut) = self.cut_back()
        {
            error!(error = %cut, "cutting the failed batch off the log failed too; tried again before the next batch");
            self.cut_pending = true;
        }
        result
    }

    fn write_and_sync(&mut self, frame: &[u8]) -> Result<(), StoreError> {
        let max = self.shared.config.segment_max_bytes;
        let syncs = self.shared.config.syncs();
        if self.len > SEGMENT_HEADER_LEN && self.len + frame.len() as u64 > max {
            if self.zeroed_to > self.len {
                // Only the last segment may end in a runway: recovery reads zeros anywhere
                // else as damage.
                self.file.truncate(self.len)?;
                if syncs {
                    self.file.sync()?;
                }
                self.zeroed_to = self.len;
            }
            let next = LogFile::create(
                &self.shared.log_dir,
                self.segment + 1,
                &self.faults,
                self.shared.config.syncs(),
            )?;
            self.file = next;
            self.segment += 1;
            self.len = SEGMENT_HEADER_LEN;
            self.zeroed_to = SEGMENT_HEADER_LEN;
        }
        let end = self.len + frame.len() as u64;
        self.extend_runway(end, max)?;
        self.file.write_at(self.len, frame)?;
        if syncs {
            self.shared.stats.syncs.fetch_add(1, Ordering::Relaxed);
            self.file.sync()?;
        }
        Ok(())
    }

    /// Cuts the current segment back to the last durable length, with its runway, and syncs
    /// it; removes a next segment whose creation failed (it never held a batch), so that the
    /// next batch starts from a log exactly as it was before the failed one.
    fn cut_back(&mut self) -> Result<(), StoreError> {
        let syncs = self.shared.config.syncs();
        let next = segment_path(&self.shared.log_dir, self.segment + 1);
        if next.exists() {
            std::fs::remove_file(&next).map_err(io_err("removing the unused segment", &next))?;
            if syncs {
                sync_dir(&self.shared.log_dir)?;
            }
        }
        self.file.truncate(self.len)?;
        if syncs {
            self.file.sync()?;
        }
        self.zeroed_to = self.len;
        Ok(())
    }

    /// In durable mode, makes sure the file holds zeros up to `end` and a runway beyond it
    /// (within the segment's size limit), written before the batch and synced with it.
    fn extend_runway(&mut self, end: u64, max: u64) -> Result<(), StoreError> {
        if !self.shared.config.syncs() || end <= self.zeroed_to {
            return Ok(());
        }
        let to = (end + RUNWAY).min(max.max(end));
        if to > end {
            self.file.write_zeros(end, to - end)?;
        }
        self.zeroed_to = to;
        Ok(())
    }
}

/// Adds the time since `started` to a nanosecond counter of [`WriterStats`](crate::WriterStats).
fn add_elapsed(counter: &std::sync::atomic::AtomicU64, started: Instant) {
    let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    counter.fetch_add(ns, Ordering::Relaxed);
}

/// The same failure again, for another request of a failed batch (an I/O error cannot be
/// cloned: its kind and message are).
fn same_failure(e: &StoreError) -> StoreError {
    match e {
        StoreError::Io { op, path, source } => StoreError::Io {
            op,
            path: path.clone(),
            source: source.raw_os_error().map_or_else(
                || std::io::Error::new(source.kind(), source.to_string()),
                std::io::Error::from_raw_os_error,
            ),
        },
        other => StoreError::Poisoned {
            cause: other.to_string(),
        },
    }
}

fn reject(r: Request, err: impl Fn() -> StoreError) {
    match r {
        Request::Append(job) => {
            let _ = job.reply.send(Err(err()));
        }
        Request::Blob { reply, .. } => {
            let _ = reply.send(Err(err()));
        }
    }
}

/// How long the indexer gathers durable batches into one sled write: sled costs about as much
/// per key as a few thousand events' worth of log writing, so each write should carry many
/// batches, packed per stream into pages; reads are served from memory meanwhile. With 256
/// streams appended concurrently, 100 ms (against 20) took the process from about 5.9 to 5.3 µs
/// of CPU per event, the index's catching up included (`store_append -- profile 256 400`).
const INDEX_GATHER: Duration = Duration::from_millis(100);

/// How long the indexer waits before writing again to sled after a write failed (a full
/// disk, say), while the writer takes no appends.
const INDEX_RETRY: Duration = Duration::from_millis(500);

/// The indexer thread: writes durable batches' index entries to sled, several batches per sled
/// write, in order, then drops them from the in-memory tail, and records the acknowledged
/// end of the log they reach (§15). If sled fails, the entries stay in memory (reads still
/// work), the writer stops taking appends, and the same entries are written again every
/// [`INDEX_RETRY`] until sled takes them; then the writer takes appends again.
fn index_batches(shared: &Shared, rx: &Receiver<Durable>, acknowledged: Option<&AcknowledgedFile>) {
    // Runs of the gathered batches per stream number, in log (so sequence) order.
    let mut per_stream: BTreeMap<u64, Vec<Run>> = BTreeMap::new();
    // Batches sled refused, written again with the next attempt.
    let mut failed: Vec<Durable> = Vec::new();
    let mut closing = false;
    loop {
        let mut group = std::mem::take(&mut failed);
        if group.is_empty() {
            let Ok(first) = rx.recv() else { break };
            // Sleep rather than wait on the channel, so batches arriving meanwhile do not wake
            // this thread one by one (the cores are the appenders' and the writer's).
            // The writer unparks it when it stops, so closing does not wait out the gathering.
            std::thread::park_timeout(INDEX_GATHER);
            group.push(first);
        } else {
            match rx.recv_timeout(INDEX_RETRY) {
                Ok(d) => group.push(d),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // One last attempt: what sled does not take then, reopening re-indexes.
                Err(mpsc::RecvTimeoutError::Disconnected) => closing = true,
            }
        }
        group.extend(rx.try_iter());
        #[cfg(any(test, feature = "fault-injection"))]
        if let Some(plan) = &shared.config.faults {
            plan.wait_while_indexer_held();
        }
        if let (Some(file), Some((segment, offset, _))) =
            (acknowledged, group.last().map(|d| d.covered))
        {
            // The batches are durable and acknowledged, whatever sled makes of them.
            file.record_or_warn(LogPoint { segment, offset });
        }
        per_stream.clear();
        let started = Instant::now();
        let written = write_index(shared, &group, &mut per_stream);
        add_elapsed(&shared.stats.index_ns, started);
        match written {
            Ok(()) => {
                if lock(&shared.index_failed).take().is_some() {
                    tracing::info!("the index is written again; the writer takes appends again");
                }
            }
            Err(e) => {
                let cause = e.to_string();
                error!(error = %cause, "index write failed; appends are refused until it succeeds");
                *lock(&shared.index_failed) = Some(cause);
                if closing {
                    break;
                }
                failed = group;
                continue;
            }
        }
        {
            // sled now has these runs: they are the oldest of each stream's in-memory tail.
            let mut recent = lock(&shared.recent_runs);
            for (no, runs) in &per_stream {
                if let Some(tail) = recent.get_mut(no) {
                    tail.drain(..runs.len().min(tail.len()));
                    if tail.is_empty() {
                        recent.remove(no);
                    }
                }
            }
        }
        let mut recent = lock(&shared.recent_blobs);
        for d in &group {
            for (hash, _) in &d.blobs {
                recent.remove(hash);
            }
        }
        if closing {
            break;
        }
    }
}

/// Writes the index entries of `group` (its pages, blobs, tree nodes and coverage) to sled
/// in one atomic batch; `per_stream` gets the runs written, per stream.
fn write_index(
    shared: &Shared,
    group: &[Durable],
    per_stream: &mut BTreeMap<u64, Vec<Run>>,
) -> Result<(), StoreError> {
    let mut index = IndexBatch::default();
    grow_trees(shared, group, &mut index)?;
    for d in group {
        for (id, no) in &d.new_streams {
            index.new_stream(id, *no);
        }
        for (no, run) in &d.runs {
            per_stream.entry(*no).or_default().push(*run);
        }
        for (hash, pos) in &d.blobs {
            index.blob(hash, *pos);
        }
    }
    for (no, runs) in per_stream.iter() {
        for page in pages(runs) {
            index.page(*no, page);
        }
    }
    if let Some((segment, end, next_stream)) = group.last().map(|d| d.covered) {
        index.covered(segment, end, next_stream);
    }
    #[cfg(any(test, feature = "fault-injection"))]
    if shared
        .config
        .faults
        .as_ref()
        .is_some_and(|p| p.index_write_fails())
    {
        return Err(StoreError::Index {
            what: "injected index write failure".into(),
            path: std::path::PathBuf::from("index"),
        });
    }
    shared.index.apply(index)
}

/// Pushes the leaves of durable batches onto their streams' Merkle trees, as the index
/// kept them: the nodes they close from [`NODE_MIN_LEVEL`] up and each stream's new frontier
/// go into `index`, with the pages of the same batches.
fn grow_trees(
    shared: &Shared,
    group: &[Durable],
    index: &mut IndexBatch,
) -> Result<(), StoreError> {
    let mut per_stream: BTreeMap<u64, Vec<(u64, &[TreeHash])>> = BTreeMap::new();
    for d in group {
        for (no, first_seq, leaves) in &d.leaves {
            per_stream
                .entry(*no)
                .or_default()
                .push((*first_seq, leaves.as_slice()));
        }
    }
    for (no, appends) in per_stream {
        let mut tree = shared.index.frontier(no)?.unwrap_or_default();
        for (first_seq, leaves) in appends {
            if tree.size() + 1 != first_seq {
                return Err(StoreError::IndexDamaged {
                    what: format!(
                        "stream number {no}'s Merkle tree holds {} events, the next append starts at {first_seq}",
                        tree.size()
                    ),
                    path: shared.index.path().to_path_buf(),
                });
            }
            for leaf in leaves {
                tree.push_reporting(*leaf, |level, at, node| {
                    if level >= NODE_MIN_LEVEL {
                        index.tree_node(no, level, at, node);
                    }
                });
            }
        }
        index.frontier(no, &tree);
    }
    Ok(())
}

/// Splits one stream's runs (in sequence order) into pages: at most [`PAGE_MAX_RUNS`] runs,
/// each starting where the previous one ended.
fn pages(runs: &[Run]) -> impl Iterator<Item = &[Run]> {
    let mut rest = runs;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut n = 1;
        while n < rest.len().min(PAGE_MAX_RUNS)
            && rest[n - 1].first_seq + u64::from(rest[n - 1].count) == rest[n].first_seq
        {
            n += 1;
        }
        let (page, tail) = rest.split_at(n);
        rest = tail;
        Some(page)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first_seq: u64, count: u32) -> Run {
        Run {
            first_seq,
            count,
            pos: Position {
                segment: 1,
                offset: 32,
                len: count,
            },
            last_hash: Hash([0; 32]),
        }
    }

    #[test]
    fn stored_blobs_remember_the_latest_and_forget_the_oldest() {
        let mut stored = StoredBlobs::default();
        let hash = |i: usize| {
            let mut h = [0u8; 32];
            h[..8].copy_from_slice(&(i as u64).to_le_bytes());
            Hash(h)
        };
        for i in 0..=STORED_BLOBS_KEPT {
            assert!(stored.remember(hash(i)));
        }
        // Remembering a hash again does not count it twice.
        assert!(!stored.remember(hash(STORED_BLOBS_KEPT)));
        assert_eq!(stored.order.len(), STORED_BLOBS_KEPT);
        assert_eq!(stored.known.len(), STORED_BLOBS_KEPT);
        assert!(!stored.known.contains(&hash(0)), "the oldest is forgotten");
        assert!(stored.known.contains(&hash(1)));
        assert!(stored.known.contains(&hash(STORED_BLOBS_KEPT)));
    }

    #[test]
    fn pages_hold_consecutive_runs_up_to_the_limit() {
        let mut runs: Vec<Run> = (1..=PAGE_MAX_RUNS as u64 + 3).map(|s| run(s, 1)).collect();
        // A gap (which the writer never produces) starts a new page rather than hiding it.
        runs.push(run(PAGE_MAX_RUNS as u64 + 10, 2));
        runs.push(run(PAGE_MAX_RUNS as u64 + 12, 1));
        let sizes: Vec<usize> = pages(&runs).map(<[Run]>::len).collect();
        assert_eq!(sizes, vec![PAGE_MAX_RUNS, 3, 2]);
        assert_eq!(pages(&[]).count(), 0);
    }
}
