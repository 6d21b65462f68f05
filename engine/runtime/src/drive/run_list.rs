//! The run list: every run's summary (id, workflow, start, status, open tickets, last
//! sequence) in one table in memory, so a page of `docket runs` or `GET /api/runs` is a
//! scan of that table rather than a read of every run's log.
//!
//! The table is loaded once, on the first listing (or when a server starts,
//! [`super::Runtime::load_run_list`]), from the store's stream digests (a cache in a file
//! beside the log that read-only views read too, store/FORMAT.md §14): a digest at the run's head is believed as it is; one behind
//! it is read on from its event (whose hash must still be the digest's); a run without one
//! is read from its first event. From then on every batch this runtime appends is folded
//! into the table as it is acknowledged (every batch of a run is appended by
//! `append_decided`; a batch appended to the store past the runtime is seen at the next
//! load, as a stale digest), and a batch that changes what the list shows
//! (status, tickets, override) also rewrites the run's digest, so the next process to load
//! the list reads little. The log stays the truth: a digest lost (the file deleted), or
//! left stale by a process that did not keep the list, only costs reading the run again.
//!
//! A read-only view cannot read the index (store/FORMAT.md §10): its list is read from
//! the log once per process, which is what `docket runs` in a terminal costs. Where other
//! processes append too (a shared store: workers and servers over one database), each
//! listing first reads every run's head (one query) and reads on the runs that moved.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard, PoisonError};

use futures::StreamExt;

use docket_decider::{RunEvent, RunId, RunStatus};
use docket_store::{EventStore, Hash, StreamDigest, StreamHead, StreamId};

use super::RuntimeError;
use super::summary::{Change, RunSummary, fold_range};

/// How many runs loading reads at once (each read waits on the store's blocking pool).
const LOADING_READS: usize = 32;

/// Digests written per index write while loading.
const DIGESTS_PER_WRITE: usize = 10_000;

/// What a digest holds: the summary, tagged so that a digest written by another build of
/// the list is read again rather than misread.
#[derive(serde::Serialize, serde::Deserialize)]
struct Digest {
    v: u32,
    #[serde(flatten)]
    summary: RunSummary,
}

/// 2: summaries say whether the run is paused; 3: which timers and outside events it
/// waits for.
const DIGEST_VERSION: u32 = 3;

fn encode(summary: &RunSummary) -> Vec<u8> {
    serde_json::to_vec(&Digest {
        v: DIGEST_VERSION,
        summary: summary.clone(),
    })
    .unwrap_or_default()
}

fn decode(bytes: &[u8]) -> Option<RunSummary> {
    serde_json::from_slice::<Digest>(bytes)
        .ok()
        .filter(|d| d.v == DIGEST_VERSION)
        .map(|d| d.summary)
}

/// A run's place in the list: its summary and the hash of its last event folded.
#[derive(Clone)]
struct Entry {
    summary: RunSummary,
    hash: Hash,
}

#[derive(Default, PartialEq, Eq, Clone, Copy)]
enum Loaded {
    /// Nothing kept: appends are not followed (a process that never lists pays nothing).
    #[default]
    No,
    /// Being read: runs appended meanwhile are read again once it is done.
    Loading,
    Yes,
}

#[derive(Default)]
struct Table {
    loaded: Loaded,
    /// By run id as text: the list's order, and what a cursor continues from.
    runs: BTreeMap<String, Entry>,
    /// Runs appended to in a way the table could not follow (while loading, or a batch
    /// after a gap): read on from the log before the next answer.
    stale: BTreeSet<String>,
    /// Runs whose log cannot be read into a summary, with why: listed apart, never hiding
    /// the others.
    unreadable: BTreeMap<String, String>,
}

/// The table and the lock that makes one caller load it while the others wait.
#[derive(Default)]
pub(super) struct RunList {
    table: Mutex<Table>,
    load: tokio::sync::Mutex<()>,
}

impl RunList {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Folds a batch appended at `version` (the run's sequence before it), whose events'
    /// hashes are `hashes`. Returns the run's digest to write when the batch changed what
    /// the list shows of it.
    pub(super) fn appended(
        &self,
        run: &RunId,
        version: u64,
        events: &[RunEvent],
        hashes: &[Hash],
    ) -> Option<StreamDigest> {
        let mut table = self.table();
        match table.loaded {
            Loaded::No => return None,
            Loaded::Loading => {
                table.stale.insert(run.to_string());
                return None;
            }
            Loaded::Yes => {}
        }
        let key = run.as_str();
        let mut entry = match table.runs.get(key) {
            Some(e) if e.summary.events == version => e.clone(),
            // Already folded (read from the log after this batch was acknowledged).
            Some(e) if e.summary.events >= version + events.len() as u64 => return None,
            None if version == 0 => Entry {
                summary: RunSummary::empty(key),
                hash: Hash([0; 32]),
            },
            _ => {
                table.stale.insert(key.to_owned());
                return None;
            }
        };
        let before = entry.summary.clone();
        for ((seq, event), hash) in (version + 1..).zip(events).zip(hashes) {
            if !entry.summary.apply(seq, Change::of(event)) {
                return None;
            }
            entry.hash = *hash;
        }
        let changed = RunSummary {
            events: entry.summary.events,
            ..before
        } != entry.summary;
        let digest = if changed { digest_of(&entry) } else { None };
        table.runs.insert(key.to_owned(), entry);
        digest
    }
}

/// The digest of an entry (`None` for an id that is not a stream's, which no entry has:
/// each was appended or read as a stream).
fn digest_of(entry: &Entry) -> Option<StreamDigest> {
    Some(StreamDigest {
        stream: StreamId::new(entry.summary.run_id.as_str()).ok()?,
        seq: entry.summary.events,
        event_hash: entry.hash,
        bytes: encode(&entry.summary),
    })
}

/// Which runs a page lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunQuery {
    /// Only runs in this status.
    pub status: Option<ListedStatus>,
    /// Only runs of the workflow of this name.
    pub workflow: Option<String>,
    /// Only runs requested at or after this time (ms since the Unix epoch).
    pub started_after: Option<i64>,
    /// Only runs requested before this time (ms since the Unix epoch).
    pub started_before: Option<i64>,
    /// Only runs waiting for a human.
    pub waiting: bool,
    /// Only runs whose id (as text) comes after this one: the previous page's last.
    pub cursor: Option<String>,
    /// At most this many (`None`: all).
    pub limit: Option<usize>,
}

/// A status a listing filters by: a run's own, or interrupted (running, and driven by no
/// live process, which only the caller knows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListedStatus {
    /// The run's status.
    Is(RunStatus),
    /// Running with no live driver.
    Interrupted,
}

/// A listed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRun {
    /// Its summary.
    pub summary: RunSummary,
    /// Running, and no live process drives it.
    pub interrupted: bool,
}

/// One page of runs, in run id order (as text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunPage {
    /// The runs.
    pub runs: Vec<ListedRun>,
    /// The last run's id when more runs match after it.
    pub next_cursor: Option<String>,
    /// Runs whose log could not be read into a summary, with why (the others are listed).
    pub unreadable: Vec<(String, String)>,
}

impl RunQuery {
    fn keeps(&self, s: &RunSummary, interrupted: bool) -> bool {
        let status = match self.status {
            None => true,
            Some(ListedStatus::Interrupted) => interrupted,
            Some(ListedStatus::Is(status)) => s.status == status,
        };
        status
            && (!self.waiting || s.status == RunStatus::WaitingForHuman)
            && self.workflow.as_ref().is_none_or(|w| *w == s.workflow)
            && self
                .started_after
                .is_none_or(|t| s.started_at_ms.is_some_and(|at| at >= t))
            && self
                .started_before
                .is_none_or(|t| s.started_at_ms.is_some_and(|at| at < t))
    }
}

impl<S: EventStore + 'static> super::Runtime<S> {
    /// Reads the run list into memory if it is not yet (a server calls it when it starts,
    /// so its first listing is as fast as the next, and every batch it appends from then on
    /// keeps the list and the runs' digests current).
    ///
    /// # Errors
    /// [`RuntimeError::Store`] when the store's streams or digests cannot be read; a run
    /// that cannot be read is listed apart ([`RunPage::unreadable`]).
    pub async fn load_run_list(&self) -> Result<(), RuntimeError> {
        let list = &self.inner.run_list;
        let _loading = list.load.lock().await;
        if list.table().loaded == Loaded::Yes {
            return Ok(());
        }
        list.table().loaded = Loaded::Loading;
        let store = self.store();
        let loaded = async {
            let heads = store.streams().await.map_err(RuntimeError::Store)?;
            let digests = store.digests().await.map_err(RuntimeError::Store)?;
            Ok::<_, RuntimeError>((heads, digests))
        }
        .await;
        let (heads, digests) = match loaded {
            Ok(found) => found,
            Err(e) => {
                list.table().loaded = Loaded::No;
                return Err(e);
            }
        };
        let mut digests: BTreeMap<StreamId, StreamDigest> =
            digests.into_iter().map(|d| (d.stream.clone(), d)).collect();
        let work: Vec<(StreamHead, Option<StreamDigest>)> = heads
            .into_iter()
            // The instance's own streams (`_circuits`, `_heads`, `_bundles`): run ids never
            // start with `_`.
            .filter(|h| !h.stream.as_str().starts_with('_'))
            .map(|h| {
                let d = digests.remove(&h.stream);
                (h, d)
            })
            .collect();
        let read: Vec<(String, Found)> = futures::stream::iter(work)
            .map(|(head, digest)| async move {
                let id = head.stream.as_str().to_owned();
                (id, entry_of(store, &head, digest).await)
            })
            .buffered(LOADING_READS)
            .collect()
            .await;
        let mut write = Vec::new();
        let stale = {
            let mut table = list.table();
            for (id, found) in read {
                match found {
                    Ok(Some((entry, rewrite))) => {
                        if rewrite {
                            write.extend(digest_of(&entry));
                        }
                        table.runs.insert(id, entry);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(run = %id, error = %e, "a run cannot be listed");
                        table.unreadable.insert(id, e.to_string());
                    }
                }
            }
            table.loaded = Loaded::Yes;
            std::mem::take(&mut table.stale)
        };
        self.read_on(stale).await;
        // Digests for the next process: a failure to write them costs it a read, no more.
        for chunk in write.chunks(DIGESTS_PER_WRITE) {
            if let Err(e) = store.put_digests(chunk.to_vec()).await {
                tracing::warn!(error = %e, "run digests not written; the next start reads those runs again");
                break;
            }
        }
        Ok(())
    }

    /// Reads on, from the log, the runs the table could not follow.
    async fn read_on(&self, stale: BTreeSet<String>) {
        let list = &self.inner.run_list;
        for id in stale {
            let Ok(stream) = StreamId::new(&id) else {
                continue;
            };
            let head = match self.store().head(&stream).await {
                Ok(Some(head)) => head,
                Ok(None) => continue,
                Err(e) => {
                    list.table().unreadable.insert(id, e.to_string());
                    continue;
                }
            };
            let digest = list.table().runs.get(&id).map(|e| StreamDigest {
                stream: stream.clone(),
                seq: e.summary.events,
                event_hash: e.hash,
                bytes: encode(&e.summary),
            });
            let found = entry_of(self.store(), &head, digest).await;
            let mut table = list.table();
            match found {
                Ok(Some((entry, _))) => {
                    table.unreadable.remove(&id);
                    // Keep whichever has folded more: both are prefixes of the same log.
                    if table
                        .runs
                        .get(&id)
                        .is_none_or(|e| e.summary.events <= entry.summary.events)
                    {
                        table.runs.insert(id, entry);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    table.unreadable.insert(id, e.to_string());
                }
            }
        }
    }

    /// One page of runs from the run list (loaded first if need be). `driven` says whether
    /// a live process drives a run: a running run it does not is listed as interrupted.
    ///
    /// # Errors
    /// [`RuntimeError::Store`] when the list cannot be loaded.
    pub async fn list_runs(
        &self,
        query: &RunQuery,
        driven: impl Fn(&RunId) -> bool,
    ) -> Result<RunPage, RuntimeError> {
        self.load_run_list().await?;
        let list = &self.inner.run_list;
        if self.store().shared() {
            // Others append to these runs (workers, other servers): a run whose head
            // moved past what the table folded is read on first, as a stale digest is.
            let heads = self.store().streams().await.map_err(RuntimeError::Store)?;
            let mut table = list.table();
            for h in heads {
                let id = h.stream.as_str();
                if id.starts_with('_') {
                    continue;
                }
                if table.runs.get(id).is_none_or(|e| e.summary.events != h.seq) {
                    table.stale.insert(id.to_owned());
                }
            }
        }
        let stale = std::mem::take(&mut list.table().stale);
        if !stale.is_empty() {
            self.read_on(stale).await;
        }
        let table = list.table();
        let limit = query.limit.unwrap_or(usize::MAX);
        let from = query
            .cursor
            .as_ref()
            .map_or(Bound::Unbounded, |c| Bound::Excluded(c.clone()));
        let mut page = RunPage::default();
        for entry in table.runs.range((from, Bound::Unbounded)).map(|(_, e)| e) {
            let s = &entry.summary;
            let interrupted =
                s.status == RunStatus::Running && !s.awaits_event() && !driven(&s.run_id);
            if !query.keeps(s, interrupted) {
                continue;
            }
            if page.runs.len() == limit {
                page.next_cursor = page.runs.last().map(|r| r.summary.run_id.to_string());
                break;
            }
            page.runs.push(ListedRun {
                summary: s.clone(),
                interrupted,
            });
        }
        page.unreadable = table
            .unreadable
            .iter()
            .map(|(id, why)| (id.clone(), why.clone()))
            .collect();
        Ok(page)
    }

    /// Records the digest of a batch that changed what the list shows of its run.
    pub(super) async fn note_appended(
        &self,
        run: &RunId,
        version: u64,
        events: &[RunEvent],
        hashes: &[Hash],
    ) {
        if let Some(digest) = self.inner.run_list.appended(run, version, events, hashes)
            && let Err(e) = self.store().put_digests(vec![digest]).await
        {
            tracing::warn!(run = %run, error = %e, "run digest not written; the next start reads the run again");
        }
    }
}

/// What loading found of one run ([`entry_of`]).
type Found = Result<Option<(Entry, bool)>, RuntimeError>;

/// A run's entry from its digest and the log: `(entry, whether its digest should be
/// written again)`, or `None` when the stream is not a run.
async fn entry_of<S: EventStore>(
    store: &S,
    head: &StreamHead,
    digest: Option<StreamDigest>,
) -> Found {
    let cached = digest.and_then(|d| {
        decode(&d.bytes)
            .filter(|s| s.events == d.seq && s.run_id.as_str() == head.stream.as_str())
            .map(|s| (s, d.event_hash))
    });
    if let Some((summary, hash)) = cached {
        if summary.events == head.seq && hash == head.hash {
            return Ok(Some((Entry { summary, hash }, false)));
        }
        if summary.events < head.seq {
            let mut on = summary.clone();
            if let Some(hash) =
                fold_range(store, &head.stream, &mut on, Some(hash), head.seq).await?
            {
                return Ok(Some((Entry { summary: on, hash }, true)));
            }
        }
    }
    // No digest, or one the log does not continue: read the run from its first event.
    let mut summary = RunSummary::empty(head.stream.as_str());
    match fold_range(store, &head.stream, &mut summary, None, head.seq).await? {
        Some(hash) if summary.status != RunStatus::NotStarted => {
            Ok(Some((Entry { summary, hash }, true)))
        }
        _ => Ok(None),
    }
}
