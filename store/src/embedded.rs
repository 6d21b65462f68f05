//! The embedded store: segment files written by one group-commit writer, indexed in sled.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak, mpsc};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures::Stream;
use tokio::sync::{oneshot, watch};
use tracing::debug_span;

use crate::api::{
    Appended, ConsistencyProof, EventStore, InclusionProof, Snapshot, StreamDigest, StreamHead,
    TreeHead, VerifyReport,
};
use crate::chain::{blob_hash, genesis};
use crate::codec::{TAG_EVENT, compress_event_record, push_blob, seal_record};
use crate::config::StoreConfig;
use crate::disclosures::Disclosures;
use crate::error::StoreError;
use crate::event::{Event, Hash, NewEvent, StreamId};
use crate::index::Index;
use crate::lock::WriterLock;
use crate::reader::{read_blob, read_chunk, read_chunk_into, verify_stream};
use crate::recovery::{self, Contained, RecoveryReport, StreamDamage, ViewReport};
use crate::seal::write_record;
use crate::shared::{Shared, lock};
use crate::tree::record_leaf;
use crate::writer::{AppendJob, Request, Writer};

/// Largest payload or blob, and largest whole append (events and blobs together), in bytes:
/// records and batch frames carry 32-bit lengths.
pub const MAX_PAYLOAD: usize = 1 << 30;

/// Counters of the writer's work since the store was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterStats {
    /// Group commits written.
    pub batches: u64,
    /// `fdatasync` calls made for them.
    pub syncs: u64,
    /// Events acknowledged.
    pub events: u64,
    /// Requests waiting for the writer right now.
    pub queued: u64,
    /// Wall time the log's writer spent committing batches, all of it serial: every append
    /// passes through it one batch at a time.
    pub committing: Duration,
    /// Of `committing`, the time in `write` and `fdatasync`.
    pub writing: Duration,
    /// Wall time the indexer spent writing acknowledged batches to the index (serial too,
    /// but behind the acknowledgements: appends wait for it only when it falls far behind).
    pub indexing: Duration,
    /// Times a thread found one of the process's store maps (heads, watchers, recent runs
    /// and blobs, files) locked by another, and the time it waited, over the process.
    pub lock_waits: u64,
    pub lock_waited: Duration,
}

/// docket's embedded event log. Cheap to clone; the writer stops when the last clone is dropped.
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    tx: Option<mpsc::Sender<Request>>,
    writer: Option<JoinHandle<()>>,
    report: RecoveryReport,
    /// A read-only view's directory and what it found damaged (`None`: a writer).
    view: Option<View>,
    /// Per stream, the sound length of its disclosure file and the digests it holds
    /// (FORMAT.md §12); writes to any of them are serialised by this lock.
    disclosed: std::sync::Mutex<HashMap<String, DisclosedSoFar>>,
    /// The stream digests file (FORMAT.md §14), appended to by a writer only.
    digests: Option<std::sync::Mutex<crate::digests::DigestsFile>>,
    /// The writer lock, released after everything above is dropped (declared last).
    lock: Option<WriterLock>,
}

/// A stream's disclosure file as this process knows it: its sound length and digests.
type DisclosedSoFar = (u64, HashSet<[u8; 32]>);

/// A read-only view: it indexes the log in memory and can read on from where it stopped.
struct View {
    dir: PathBuf,
    contained: std::sync::Mutex<Contained>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the channel lets the writer finish what is queued, flush the index and exit.
        self.tx.take();
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}

impl EmbeddedStore {
    /// Whether `dir` already holds a store (its marker file is there), without opening it:
    /// a store held by another process can be recognised too.
    #[must_use]
    pub fn exists_in(dir: &std::path::Path) -> bool {
        dir.join(crate::recovery::MARKER).exists()
    }

    /// Opens (or creates, in an empty or absent directory) a store, repairing its index from the
    /// log and cutting a torn unacknowledged tail.
    pub async fn open(
        dir: impl AsRef<Path>,
        config: StoreConfig,
    ) -> Result<EmbeddedStore, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        tokio::task::spawn_blocking(move || EmbeddedStore::open_blocking(&dir, config))
            .await
            .map_err(|_| StoreError::Closed)?
    }

    /// [`EmbeddedStore::open`] for callers outside an async context.
    pub fn open_blocking(dir: &Path, config: StoreConfig) -> Result<EmbeddedStore, StoreError> {
        // One writer per directory: before anything is created, checked or repaired.
        let lock = WriterLock::acquire(dir, config.lock_wait, config.on_lock_wait)?;
        let rec = recovery::open(dir, &config)?;
        let faults = config.faults();
        let log_heads = rec.heads.clone();
        let shared = Arc::new(Shared::new(dir.join("log"), config, rec.index, rec.heads));
        let (tx, rx) = mpsc::channel();
        let writer = Writer {
            shared: shared.clone(),
            rx,
            log_heads,
            file: rec.file,
            segment: rec.segment,
            len: rec.len,
            zeroed_to: rec.zeroed_to,
            next_stream: rec.next_stream,
            faults,
            poisoned: None,
            cut_pending: false,
            acknowledged: Some(rec.acknowledged),
            stored_blobs: crate::writer::StoredBlobs::default(),
        };
        let handle = std::thread::Builder::new()
            .name("docket-log-writer".into())
            .spawn(move || writer.run())
            .map_err(crate::error::io_err("starting the log writer for", dir))?;
        let _ = shared.writer_thread.set(handle.thread().clone());
        Ok(EmbeddedStore {
            inner: Arc::new(Inner {
                shared,
                tx: Some(tx),
                writer: Some(handle),
                report: rec.report,
                view: None,
                disclosed: std::sync::Mutex::default(),
                digests: Some(std::sync::Mutex::new(crate::digests::DigestsFile::open(
                    dir,
                ))),
                lock: Some(lock),
            }),
        })
    }

    /// Opens a read-only view of the store in `dir`, while any other process may be
    /// writing it: takes no lock, creates, truncates and repairs nothing (a missing
    /// directory is [`StoreError::NoDataDirectory`]). It reads the whole log, checking
    /// every link and hash, into an index held in memory, so it sees every event
    /// acknowledged before it opened; [`EmbeddedStore::refresh`] reads on. A stream whose
    /// events fail their checks is contained: its sound events stay readable, a read past
    /// them ends with [`StoreError::StreamDamaged`], `streams` leaves it out and
    /// [`EmbeddedStore::view_report`] names it; every other stream reads as usual.
    /// Appends are refused ([`StoreError::ReadOnly`]); snapshots are kept in memory only.
    pub async fn open_read_only(dir: impl AsRef<Path>) -> Result<EmbeddedStore, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        tokio::task::spawn_blocking(move || EmbeddedStore::open_read_only_blocking(&dir))
            .await
            .map_err(|_| StoreError::Closed)?
    }

    /// [`EmbeddedStore::open_read_only`] for callers outside an async context.
    pub fn open_read_only_blocking(dir: &Path) -> Result<EmbeddedStore, StoreError> {
        let index = Index::in_memory(dir);
        let mut contained = Contained::default();
        let heads = recovery::open_view(dir, &index, &mut contained)?;
        let shared = Arc::new(Shared::new(
            dir.join("log"),
            StoreConfig::default(),
            index,
            heads,
        ));
        Ok(EmbeddedStore {
            inner: Arc::new(Inner {
                shared,
                tx: None,
                writer: None,
                report: RecoveryReport::default(),
                view: Some(View {
                    dir: dir.to_path_buf(),
                    contained: std::sync::Mutex::new(contained),
                }),
                disclosed: std::sync::Mutex::default(),
                digests: None,
                lock: None,
            }),
        })
    }

    /// Whether this store was opened read-only.
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        self.inner.view.is_some()
    }

    /// Notes in the writer's holder file that this process drives `stream`, so readers list
    /// the run as driven (`LockHolder::drives`), not as one whose driver died. Every append
    /// notes its stream; a run the process keeps until its timer is due or an outside
    /// event comes is noted without one. Advisory; a read-only view notes nothing.
    pub fn note_driven(&self, stream: &StreamId) {
        if let Some(lock) = &self.inner.lock {
            lock.note(stream);
        }
    }

    /// A read-only view's findings: damaged streams, blobs and log, and an unfinished
    /// last frame (`None` for a writer, which refuses a damaged log when it opens).
    #[must_use]
    pub fn view_report(&self) -> Option<ViewReport> {
        self.inner
            .view
            .as_ref()
            .map(|v| lock(&v.contained).report())
    }

    /// A read-only view reads the events appended since it opened (or last refreshed),
    /// waking its tails; a writer has nothing to do.
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        blocking(move || {
            let Some(view) = &inner.view else {
                return Ok(());
            };
            let mut contained = lock(&view.contained);
            let heads = recovery::refresh_view(&view.dir, &inner.shared.index, &mut contained)?;
            let updated: Vec<(StreamId, u64)> = {
                let mut current = lock(&inner.shared.heads);
                let updated = heads
                    .iter()
                    .filter(|(id, h)| current.get(*id).is_none_or(|c| c.seq != h.seq))
                    .map(|(id, h)| (id.clone(), h.seq))
                    .collect();
                *current = heads;
                updated
            };
            inner.shared.notify(&updated);
            Ok(())
        })
        .await
    }

    /// The damage of `stream`, when a read-only view found it damaged.
    fn damage_of(&self, stream: &StreamId) -> Option<StreamDamage> {
        let view = self.inner.view.as_ref()?;
        lock(&view.contained).streams.get(stream).cloned()
    }

    /// The store's directory (the parent of `log/`).
    fn root(&self) -> PathBuf {
        let log = &self.inner.shared.log_dir;
        log.parent().map_or_else(|| log.clone(), Path::to_path_buf)
    }

    fn refuse_if_read_only(&self) -> Result<(), StoreError> {
        match &self.inner.view {
            Some(view) => Err(StoreError::ReadOnly {
                path: view.dir.clone(),
            }),
            None => Ok(()),
        }
    }

    /// What opening repaired.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
    }

    pub fn stats(&self) -> WriterStats {
        let s = &self.inner.shared.stats;
        WriterStats {
            batches: s.batches.load(Ordering::Relaxed),
            syncs: s.syncs.load(Ordering::Relaxed),
            events: s.events.load(Ordering::Relaxed),
            queued: s.queued.load(Ordering::SeqCst),
            committing: Duration::from_nanos(s.commit_ns.load(Ordering::Relaxed)),
            writing: Duration::from_nanos(s.write_ns.load(Ordering::Relaxed)),
            indexing: Duration::from_nanos(s.index_ns.load(Ordering::Relaxed)),
            lock_waits: crate::shared::LOCK_WAITS.load(Ordering::Relaxed),
            lock_waited: Duration::from_nanos(
                crate::shared::LOCK_WAITED_NS.load(Ordering::Relaxed),
            ),
        }
    }

    /// Waits for queued appends, stops the writer and releases the directory (if this is the
    /// last clone). Open `read` streams then yield [`StoreError::Closed`]; `tail` streams end.
    pub async fn close(self) {
        if let Ok(inner) = Arc::try_unwrap(self.inner) {
            let _ = tokio::task::spawn_blocking(move || drop(inner)).await;
        }
    }

    fn send(&self, request: Request) -> Result<(), StoreError> {
        let tx = self.inner.tx.as_ref().ok_or(StoreError::Closed)?;
        let stats = &self.inner.shared.stats;
        let queued = stats.queued.fetch_add(1, Ordering::SeqCst) + 1;
        tx.send(request).map_err(|_| {
            stats.queued.fetch_sub(1, Ordering::SeqCst);
            StoreError::Closed
        })?;
        // A writer waiting in `recv` is woken by the channel; one gathering a batch sleeps until
        // the request it waits for arrives (or its delay ends).
        if queued == stats.gather_until.load(Ordering::SeqCst)
            && let Some(writer) = self.inner.shared.writer_thread.get()
        {
            writer.unpark();
        }
        Ok(())
    }
}

/// Encodes, hashes and compresses `events` as the successors of (`expected`, `prev`), and
/// frames the blobs they bring that the log does not hold yet, on the caller's task: the
/// writer, which every append passes through one batch at a time, only checks, writes and
/// syncs.
fn encode_job(
    stream: &StreamId,
    expected: u64,
    prev: Hash,
    events: Vec<NewEvent>,
    extra_blobs: Vec<Vec<u8>>,
    shared: &Shared,
    reply: oneshot::Sender<Result<Appended, StoreError>>,
) -> Result<AppendJob, StoreError> {
    let config = &shared.config;
    let blob_threshold = config.blob_threshold;
    let mut records = Vec::with_capacity(
        events
            .iter()
            .map(|e| e.payload.len().min(blob_threshold) + 160)
            .sum(),
    );
    let mut spans = Vec::with_capacity(events.len());
    let mut hashes = Vec::with_capacity(events.len());
    let mut leaves = Vec::with_capacity(events.len());
    let mut link = prev;
    let total: usize = events
        .iter()
        .map(|e| {
            e.payload
                .len()
                .saturating_add(e.kind.len())
                .saturating_add(160)
        })
        .fold(0, usize::saturating_add)
        .saturating_add(
            extra_blobs
                .iter()
                .map(|b| b.len().saturating_add(37))
                .fold(0, usize::saturating_add),
        );
    if total > MAX_PAYLOAD {
        return Err(StoreError::TooLarge {
            stream: stream.clone(),
            len: total,
            max: MAX_PAYLOAD,
        });
    }
    // Content the payloads refer to, hashed here; what the log already holds is left out,
    // the rest framed as the writer will write it. Blobs the writer stores after this look
    // are known to it by `blobs_seen` (`StoredBlobs::has_since`).
    let blobs_seen = shared.stats.blobs_remembered.load(Ordering::SeqCst);
    let mut hashes_seen: Vec<Hash> = Vec::with_capacity(extra_blobs.len());
    let mut blobs: Vec<(Hash, Vec<u8>)> = Vec::with_capacity(extra_blobs.len());
    let mut frame_blob = |hash: Hash, bytes: &[u8], blobs: &mut Vec<(Hash, Vec<u8>)>| {
        if hashes_seen.contains(&hash) {
            return;
        }
        hashes_seen.push(hash);
        if matches!(shared.blob_position(&hash), Ok(Some(_))) {
            return;
        }
        let mut record = Vec::with_capacity(bytes.len() / 2 + 64);
        push_blob(&mut record, &hash, bytes, config.compress);
        blobs.push((hash, record));
    };
    for bytes in extra_blobs {
        frame_blob(blob_hash(&bytes), &bytes, &mut blobs);
    }
    for (i, event) in events.into_iter().enumerate() {
        // The record is built in place: length and tag, then body, prev and hash.
        let at = records.len();
        records.extend_from_slice(&[0; 5]);
        let (hash, blob) = write_record(
            stream,
            expected + 1 + i as u64,
            &link,
            &event,
            blob_threshold,
            &mut records,
        )?;
        seal_record(&mut records[at..], TAG_EVENT);
        // The leaf covers the record as it is before compression (FORMAT.md §9).
        leaves.push(record_leaf(&records[at..]));
        if config.compress {
            compress_event_record(&mut records, at);
        }
        let len = records.len() - at;
        spans.push((at, len as u32));
        hashes.push(hash);
        link = hash;
        if let Some(r) = blob {
            frame_blob(r.hash, &event.payload, &mut blobs);
        }
    }
    Ok(AppendJob {
        stream: stream.clone(),
        expected,
        first_prev: prev,
        records,
        spans,
        hashes,
        leaves,
        blobs,
        blobs_seen,
        reply,
    })
}

/// How long an appender with no other append in flight polls for its acknowledgement, yielding
/// its worker between polls, before it waits to be woken. A worker that sleeps through the
/// sync pays a wake-up when the acknowledgement comes (on this virtual machine 30-100 µs, a
/// third of a sync); one that keeps polling does not. Bounded, and never done by concurrent
/// appenders, whose polling would take the cores the writer and the others need.
const ACK_POLL: Duration = Duration::from_micros(500);

/// Counts an append in flight for as long as its caller waits for it.
struct InFlight<'a> {
    counter: &'a AtomicU64,
    /// No other append was in flight when this one was sent.
    alone: bool,
}

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicU64) -> InFlight<'a> {
        let alone = counter.fetch_add(1, Ordering::SeqCst) == 0;
        InFlight { counter, alone }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The acknowledgement, if it comes within [`ACK_POLL`].
async fn poll_reply(
    rx: &mut oneshot::Receiver<Result<Appended, StoreError>>,
) -> Option<Result<Appended, StoreError>> {
    let start = Instant::now();
    loop {
        match rx.try_recv() {
            Ok(reply) => return Some(reply),
            Err(oneshot::error::TryRecvError::Closed) => return Some(Err(StoreError::Closed)),
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        if start.elapsed() >= ACK_POLL {
            return None;
        }
        tokio::task::yield_now().await;
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| StoreError::Closed)?
}

/// What one chunk read returns: the sound events, and the damage found after them.
type Chunk = (Vec<Event>, Option<StoreError>);

/// Most events one chunk of a `read` or `tail` holds.
const CHUNK_EVENTS: u64 = 4096;
/// Chunks of a `read` checked ahead, on blocking threads, while the caller consumes one: the
/// hash checks dominate reading, and this spreads them over the cores.
const READ_AHEAD: usize = 2;

/// State of a `read` or `tail` stream between chunks. It does not keep the store open: once the
/// store is closed, a read yields `Closed` and a tail ends.
struct Cursor {
    shared: Weak<Shared>,
    stream: StreamId,
    next: u64,
    /// Last sequence to read (`read`), or `None` to follow the head (`tail`).
    to: Option<u64>,
    prev: Option<Hash>,
    buf: VecDeque<Event>,
    watch: Option<watch::Receiver<u64>>,
    /// Damage found after the events in `buf`: yielded once they are.
    failed: Option<StoreError>,
    done: bool,
    /// A `read`'s next chunks, being read on blocking threads: (first sequence, the read).
    ahead: VecDeque<(u64, tokio::task::JoinHandle<Result<Chunk, StoreError>>)>,
    /// The first sequence no chunk in `ahead` covers.
    planned: u64,
}

impl Cursor {
    /// Starts reading events `from..=to` on a blocking thread. Without `prev` (the hash of event
    /// `from - 1`), the read starts one event early, so the first link is checked too.
    fn start_read(
        &self,
        from: u64,
        to: u64,
        prev: Option<Hash>,
    ) -> tokio::task::JoinHandle<Result<Chunk, StoreError>> {
        let weak = self.shared.clone();
        let start = if prev.is_none() && from > 1 {
            from - 1
        } else {
            from
        };
        let stream = self.stream.clone();
        tokio::task::spawn_blocking(move || {
            let shared = weak.upgrade().ok_or(StoreError::Closed)?;
            let Some(no) = shared.head(&stream).map(|h| h.no) else {
                return Ok((Vec::new(), None));
            };
            let mut out = Vec::new();
            let failed = read_chunk_into(&shared, &stream, no, start, to, prev, &mut out).err();
            Ok((out, failed))
        })
    }

    /// Queues reads of the chunks after `planned`, up to `last`, until `depth` are in flight.
    fn plan(&mut self, last: u64, depth: usize) {
        while self.ahead.len() < depth && self.planned <= last {
            let from = self.planned;
            let to = last.min(from.saturating_add(CHUNK_EVENTS - 1));
            // The first chunk links to what this cursor read; later ones start one event
            // early and are stitched on when they arrive.
            let prev = if from == self.next { self.prev } else { None };
            let read = self.start_read(from, to, prev);
            self.ahead.push_back((from, read));
            self.planned = to + 1;
        }
    }

    /// Reads the next chunk, up to `last`, checking its link to what was read before.
    async fn fill(&mut self, last: u64) -> Result<(), StoreError> {
        loop {
            // Reads queued for a chunk that no longer starts where this cursor stands (the
            // previous chunk ended short) are dropped.
            if self
                .ahead
                .front()
                .is_some_and(|(from, _)| *from != self.next)
            {
                self.ahead.clear();
            }
            if self.ahead.is_empty() {
                self.planned = self.next;
                self.plan(last, 1);
            }
            let Some((_, read)) = self.ahead.pop_front() else {
                return Ok(());
            };
            // A read's end is fixed: check the following chunks while this one is consumed.
            if self.to.is_some() {
                self.plan(last, READ_AHEAD);
            }
            let (events, failed) = read.await.map_err(|_| StoreError::Closed)??;
            // A chunk read ahead starts with the event before it: it must be the one this
            // cursor read last. If not, read again in order from here (which names any damage).
            if let (Some(first), Some(prev)) = (events.first(), self.prev)
                && first.seq < self.next
                && first.hash != prev
            {
                self.ahead.clear();
                self.planned = self.next;
                self.plan(last, 1);
                continue;
            }
            self.failed = failed;
            for e in events {
                if e.seq >= self.next {
                    self.next = e.seq + 1;
                    self.prev = Some(e.hash);
                    self.buf.push_back(e);
                } else {
                    self.prev = Some(e.hash);
                }
            }
            if self.failed.is_some() {
                self.ahead.clear();
            }
            return Ok(());
        }
    }

    async fn step(mut self) -> Option<(Result<Event, StoreError>, Cursor)> {
        loop {
            if let Some(e) = self.buf.pop_front() {
                return Some((Ok(e), self));
            }
            if let Some(e) = self.failed.take() {
                self.done = true;
                return Some((Err(e), self));
            }
            if self.done {
                return None;
            }
            let last = match (self.to, &mut self.watch) {
                (Some(to), _) => {
                    if self.next > to {
                        return None;
                    }
                    to
                }
                (None, Some(rx)) => {
                    let head = *rx.borrow_and_update();
                    if self.next > head {
                        if rx.changed().await.is_err() {
                            return None;
                        }
                        continue;
                    }
                    head
                }
                (None, None) => return None,
            };
            if let Err(e) = self.fill(last).await {
                self.done = true;
                return Some((Err(e), self));
            }
        }
    }
}

type Fetch = Pin<Box<dyn Future<Output = Option<(Result<Event, StoreError>, Cursor)>> + Send>>;

/// A `read` or `tail` as a stream. Events already read and checked are handed out straight from
/// the cursor's buffer; only fetching the next chunk (or waiting for an append) runs as a
/// future, so a long read does not build and move a future per event.
struct Events {
    cursor: Option<Cursor>,
    fetch: Option<Fetch>,
}

impl Events {
    fn new(cursor: Cursor) -> Events {
        Events {
            cursor: Some(cursor),
            fetch: None,
        }
    }
}

impl Stream for Events {
    type Item = Result<Event, StoreError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let fetch = match (&mut this.fetch, &mut this.cursor) {
            (Some(fetch), _) => fetch,
            (None, Some(cursor)) => {
                if let Some(e) = cursor.buf.pop_front() {
                    return Poll::Ready(Some(Ok(e)));
                }
                let Some(cursor) = this.cursor.take() else {
                    return Poll::Ready(None);
                };
                this.fetch.insert(Box::pin(cursor.step()))
            }
            (None, None) => return Poll::Ready(None),
        };
        let Poll::Ready(out) = fetch.as_mut().poll(cx) else {
            return Poll::Pending;
        };
        this.fetch = None;
        Poll::Ready(out.map(|(item, cursor)| {
            this.cursor = Some(cursor);
            item
        }))
    }
}

impl EventStore for EmbeddedStore {
    async fn append(
        &self,
        stream: &StreamId,
        expected_version: u64,
        events: Vec<NewEvent>,
    ) -> Result<Appended, StoreError> {
        self.append_with_blobs(stream, expected_version, events, Vec::new())
            .await
    }

    async fn append_with_blobs(
        &self,
        stream: &StreamId,
        expected_version: u64,
        events: Vec<NewEvent>,
        blobs: Vec<Vec<u8>>,
    ) -> Result<Appended, StoreError> {
        self.refuse_if_read_only()?;
        if events.is_empty() {
            return Err(StoreError::EmptyAppend {
                stream: stream.clone(),
            });
        }
        self.note_driven(stream);
        let shared = &self.inner.shared;
        let (actual, prev) = shared
            .head(stream)
            .map_or_else(|| (0, genesis(stream)), |h| (h.seq, h.hash));
        if actual != expected_version {
            return Err(StoreError::Conflict {
                stream: stream.clone(),
                expected: expected_version,
                actual,
            });
        }
        let (tx, mut rx) = oneshot::channel();
        let job = {
            let _span = debug_span!("encode", stream = %stream, events = events.len()).entered();
            encode_job(stream, expected_version, prev, events, blobs, shared, tx)?
        };
        let in_flight = InFlight::enter(&shared.stats.in_flight);
        self.send(Request::Append(Box::new(job)))?;
        if in_flight.alone
            && let Some(reply) = poll_reply(&mut rx).await
        {
            return reply;
        }
        rx.await.map_err(|_| StoreError::Closed)?
    }

    fn read(
        &self,
        stream: &StreamId,
        range: RangeInclusive<u64>,
    ) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static {
        let head = self.inner.shared.head(stream).map_or(0, |h| h.seq);
        let cursor = Cursor {
            shared: Arc::downgrade(&self.inner.shared),
            stream: stream.clone(),
            next: (*range.start()).max(1),
            to: Some((*range.end()).min(head)),
            prev: None,
            buf: VecDeque::new(),
            watch: None,
            failed: None,
            done: false,
            ahead: VecDeque::new(),
            planned: 0,
        };
        // A damaged stream's read ends with its damage, once its sound events are read.
        let damage = self
            .damage_of(stream)
            .filter(|d| *range.end() >= d.seq && *range.start() <= *range.end())
            .map(|d| Err(d.to_error()));
        futures::StreamExt::chain(Events::new(cursor), futures::stream::iter(damage))
    }

    fn tail(
        &self,
        stream: &StreamId,
        from: u64,
    ) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static {
        let cursor = Cursor {
            shared: Arc::downgrade(&self.inner.shared),
            stream: stream.clone(),
            next: from.max(1),
            to: None,
            prev: None,
            buf: VecDeque::new(),
            watch: Some(self.inner.shared.subscribe(stream)),
            failed: None,
            done: false,
            ahead: VecDeque::new(),
            planned: 0,
        };
        Events::new(cursor)
    }

    async fn head(&self, stream: &StreamId) -> Result<Option<StreamHead>, StoreError> {
        // A reader asks for the head to read up to it: a damaged stream says so instead.
        if let Some(d) = self.damage_of(stream) {
            return Err(d.to_error());
        }
        Ok(self.inner.shared.head(stream).map(|h| StreamHead {
            stream: stream.clone(),
            seq: h.seq,
            hash: h.hash,
        }))
    }

    async fn streams(&self) -> Result<Vec<StreamHead>, StoreError> {
        let damaged: Vec<StreamId> = self.view_report().map_or_else(Vec::new, |r| {
            r.damaged_streams.into_iter().map(|d| d.stream).collect()
        });
        let mut out: Vec<StreamHead> = lock(&self.inner.shared.heads)
            .iter()
            .filter(|(id, _)| !damaged.contains(id))
            .map(|(id, h)| StreamHead {
                stream: id.clone(),
                seq: h.seq,
                hash: h.hash,
            })
            .collect();
        out.sort_by(|a, b| a.stream.cmp(&b.stream));
        Ok(out)
    }

    async fn put_snapshot(
        &self,
        stream: &StreamId,
        seq: u64,
        state: Vec<u8>,
    ) -> Result<(), StoreError> {
        let shared = self.inner.shared.clone();
        let head = shared.head(stream);
        let Some(head) = head.filter(|h| seq >= 1 && seq <= h.seq) else {
            return Err(StoreError::SnapshotBeyondHead {
                stream: stream.clone(),
                seq,
                head: head.map_or(0, |h| h.seq),
            });
        };
        let stream = stream.clone();
        // A view writes nothing to the directory: its snapshots stay in its memory.
        let root = self.inner.view.is_none().then(|| self.root());
        blocking(move || {
            let events = read_chunk(&shared, &stream, head.no, seq, seq, None)?;
            let hash = events
                .first()
                .map(|e| e.hash)
                .ok_or(StoreError::SnapshotBeyondHead {
                    stream: stream.clone(),
                    seq,
                    head: head.seq,
                })?;
            match root {
                Some(root) => crate::snapshots::write(&root, &stream, seq, &hash, &state),
                None => shared.index.put_snapshot(head.no, seq, &hash, &state),
            }
        })
        .await
    }

    async fn latest_snapshot(
        &self,
        stream: &StreamId,
        at_or_before: u64,
    ) -> Result<Option<Snapshot>, StoreError> {
        let Some(head) = self.inner.shared.head(stream) else {
            return Ok(None);
        };
        // In the index: a view's own snapshots, or a directory's from before snapshots
        // were files (FORMAT.md §12).
        let indexed = self
            .inner
            .shared
            .index
            .latest_snapshot(head.no, at_or_before)?
            .map(|(seq, event_hash, state)| Snapshot {
                stream: stream.clone(),
                seq,
                event_hash,
                state,
            });
        let (root, id) = (self.root(), stream.clone());
        let (filed, refused) =
            blocking(move || crate::snapshots::latest(&root, &id, at_or_before)).await?;
        for why in refused {
            tracing::warn!(stream = %stream, %why, "snapshot file not used");
        }
        Ok(match (indexed, filed) {
            (Some(i), Some(f)) => Some(if i.seq > f.seq { i } else { f }),
            (i, f) => i.or(f),
        })
    }

    async fn remove_snapshots(&self, stream: &StreamId) -> Result<u64, StoreError> {
        self.refuse_if_read_only()?;
        let shared = self.inner.shared.clone();
        let (root, stream) = (self.root(), stream.clone());
        blocking(move || {
            let indexed = match shared.head(&stream) {
                Some(head) => shared.index.remove_snapshots(head.no)?,
                None => 0,
            };
            Ok(indexed + crate::snapshots::remove_all(&root, &stream)?)
        })
        .await
    }

    async fn put_digests(&self, digests: Vec<StreamDigest>) -> Result<(), StoreError> {
        if digests.is_empty() {
            return Ok(());
        }
        for d in &digests {
            let head = self.inner.shared.head(&d.stream);
            if !head.is_some_and(|h| d.seq >= 1 && d.seq <= h.seq) {
                return Err(StoreError::DigestBeyondHead {
                    stream: d.stream.clone(),
                    seq: d.seq,
                    head: head.map_or(0, |h| h.seq),
                });
            }
        }
        // A read-only view writes nothing: its digests are for the writer to keep.
        if self.inner.digests.is_none() {
            return Ok(());
        }
        let inner = self.inner.clone();
        blocking(move || match &inner.digests {
            Some(file) => lock(file).append(&digests),
            None => Ok(()),
        })
        .await
    }

    async fn digests(&self) -> Result<Vec<StreamDigest>, StoreError> {
        let root = self.root();
        let shared = self.inner.shared.clone();
        blocking(move || {
            // The file is read before the heads are locked: the writer takes that lock for
            // every batch.
            let latest = crate::digests::latest(&root);
            let heads = lock(&shared.heads);
            Ok(latest
                .into_values()
                .filter(|d| heads.contains_key(&d.stream))
                .collect())
        })
        .await
    }

    async fn tree_head(
        &self,
        stream: &StreamId,
        size: Option<u64>,
    ) -> Result<TreeHead, StoreError> {
        let (shared, stream) = (self.inner.shared.clone(), stream.clone());
        blocking(move || crate::tree::tree_head(&shared, &stream, size)).await
    }

    async fn inclusion_proof(
        &self,
        stream: &StreamId,
        seq: u64,
        tree_size: Option<u64>,
    ) -> Result<InclusionProof, StoreError> {
        let (shared, stream) = (self.inner.shared.clone(), stream.clone());
        blocking(move || crate::tree::inclusion(&shared, &stream, seq, tree_size)).await
    }

    async fn consistency_proof(
        &self,
        stream: &StreamId,
        old_size: u64,
        new_size: Option<u64>,
    ) -> Result<ConsistencyProof, StoreError> {
        let (shared, stream) = (self.inner.shared.clone(), stream.clone());
        blocking(move || crate::tree::consistency(&shared, &stream, old_size, new_size)).await
    }

    async fn verify(&self, stream: &StreamId) -> Result<VerifyReport, StoreError> {
        let damage = self.damage_of(stream);
        let (shared, stream) = (self.inner.shared.clone(), stream.clone());
        let mut report = blocking(move || verify_stream(&shared, &stream)).await?;
        if let Some(d) = damage
            && report.first_break.is_none()
        {
            report.first_break = Some(match d.damage {
                crate::error::Damage::Chain { break_, .. } => break_,
                other => crate::error::ChainBreak::Unreadable {
                    seq: d.seq,
                    what: other.to_string(),
                },
            });
        }
        Ok(report)
    }

    async fn put_disclosures(
        &self,
        stream: &StreamId,
        disclosures: Vec<([u8; 32], Vec<u8>)>,
    ) -> Result<(), StoreError> {
        self.refuse_if_read_only()?;
        if disclosures.is_empty() {
            return Ok(());
        }
        let (this, stream) = (self.clone(), stream.as_str().to_owned());
        blocking(move || {
            let path = crate::disclosures::file_of(&this.root(), &stream);
            let mut known = lock(&this.inner.disclosed);
            if !known.contains_key(&stream) {
                let (held, sound) = crate::disclosures::read(&path)?;
                known.insert(stream.clone(), (sound, held.into_keys().collect()));
            }
            let Some((sound, held)) = known.get_mut(&stream) else {
                return Ok(());
            };
            let mut new: Vec<([u8; 32], Vec<u8>)> = Vec::new();
            for (digest, bytes) in disclosures {
                if !held.contains(&digest) && !new.iter().any(|(d, _)| *d == digest) {
                    new.push((digest, bytes));
                }
            }
            if new.is_empty() {
                return Ok(());
            }
            let syncs = this.inner.shared.config.syncs();
            *sound = crate::disclosures::append(&path, *sound, &new, syncs)?;
            held.extend(new.into_iter().map(|(d, _)| d));
            Ok(())
        })
        .await
    }

    async fn disclosures(&self, stream: &StreamId) -> Result<Disclosures, StoreError> {
        let path = crate::disclosures::file_of(&self.root(), stream.as_str());
        blocking(move || crate::disclosures::read(&path).map(|(d, _)| d)).await
    }

    async fn shred_disclosures(
        &self,
        stream: &StreamId,
        digests: Vec<[u8; 32]>,
        note: Vec<u8>,
    ) -> Result<Disclosures, StoreError> {
        self.refuse_if_read_only()?;
        let (this, stream) = (self.clone(), stream.as_str().to_owned());
        blocking(move || {
            let path = crate::disclosures::file_of(&this.root(), &stream);
            let mut known = lock(&this.inner.disclosed);
            let (after, sound) = crate::disclosures::shred(&path, &digests, &note)?;
            // The stream's snapshots hold folded values in the clear: gone too, files and
            // index alike (a run recorded redactable writes none; this purges those of an
            // older build).
            let id = StreamId::new(&stream)?;
            if let Some(head) = this.inner.shared.head(&id) {
                this.inner.shared.index.remove_snapshots(head.no)?;
            }
            crate::snapshots::remove_all(&this.root(), &id)?;
            known.insert(stream, (sound, after.keys().copied().collect()));
            Ok(after)
        })
        .await
    }

    async fn put_blob(&self, bytes: Vec<u8>) -> Result<Hash, StoreError> {
        self.refuse_if_read_only()?;
        if bytes.len() > MAX_PAYLOAD {
            return Err(StoreError::BlobTooLarge {
                len: bytes.len(),
                max: MAX_PAYLOAD,
            });
        }
        let hash = blob_hash(&bytes);
        if self.inner.shared.blob_position(&hash)?.is_some() {
            return Ok(hash);
        }
        let (tx, rx) = oneshot::channel();
        self.send(Request::Blob {
            hash,
            bytes,
            reply: tx,
        })?;
        rx.await.map_err(|_| StoreError::Closed)??;
        Ok(hash)
    }

    async fn get_blob(&self, hash: &Hash) -> Result<Option<Vec<u8>>, StoreError> {
        let (shared, hash) = (self.inner.shared.clone(), *hash);
        blocking(move || read_blob(&shared, &hash)).await
    }
}
