//! The sled index: everything here can be rebuilt from the log.
//!
//! One sled tree, keys prefixed by kind, so that each group commit's entries land in one atomic
//! sled batch together with the log position they cover. sled's own flush is not a sync; after a
//! crash it may have lost its last moments, and opening re-indexes from `covered` onwards.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::event::{Hash, StreamId};
use crate::merkle::{TreeBuilder, TreeHash};

const COVERED: &[u8] = b"m:covered";
const NEXT_STREAM: &[u8] = b"m:next_stream";
const STREAM: u8 = b's';
const EVENT: u8 = b'e';
const SNAPSHOT: u8 = b'n';
const BLOB: u8 = b'b';
const TREE_NODE: u8 = b't';
const TREE_FRONTIER: u8 = b'f';
/// Present once the index keeps Merkle trees: an index written before them lacks the trees
/// of the streams it holds, and opening rebuilds it from the log.
const TREE_MARKER: &[u8] = b"m:merkle";

/// The lowest level of the Merkle tree whose complete subtrees the index keeps: one node per
/// [`BLOCK_LEAVES`] events and about as many again above, so the tree costs the index about
/// 2 x 32 bytes per 256 events. Anything below is recomputed from at most 256 events of the
/// log, which a proof reads in one go (store/FORMAT.md, "Merkle tree").
pub(crate) const NODE_MIN_LEVEL: u32 = 8;
/// Leaves under one node of [`NODE_MIN_LEVEL`].
pub(crate) const BLOCK_LEAVES: u64 = 1 << NODE_MIN_LEVEL;

/// Where a record lives: segment number, byte offset of the record, record length.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Position {
    pub segment: u64,
    pub offset: u64,
    pub len: u32,
}

impl Position {
    fn to_bytes(self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[..8].copy_from_slice(&self.segment.to_be_bytes());
        b[8..16].copy_from_slice(&self.offset.to_be_bytes());
        b[16..].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    fn from_bytes(b: &[u8]) -> Option<Position> {
        if b.len() != 20 {
            return None;
        }
        Some(Position {
            segment: u64::from_be_bytes(b[..8].try_into().ok()?),
            offset: u64::from_be_bytes(b[8..16].try_into().ok()?),
            len: u32::from_be_bytes(b[16..].try_into().ok()?),
        })
    }
}

/// Consecutive events of one stream stored back to back: the index keeps one entry per run,
/// not per event, so appends of many events and long sequential reads touch sled rarely.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Run {
    pub first_seq: u64,
    pub count: u32,
    /// Where the first record starts; `len` covers all the run's records.
    pub pos: Position,
    /// Hash of the run's last event: the last run of a stream gives its head.
    pub last_hash: Hash,
}

/// Longest run indexed as one entry: bounds what a read fetches to reach one event.
pub(crate) const RUN_MAX_EVENTS: usize = 256;

/// Most runs stored under one sled key (a page). Concurrent appenders interleave their records,
/// so a stream's runs are often one event long; sled costs about the same per insert whatever
/// the value's size, so the indexer packs a stream's consecutive runs into one value.
pub(crate) const PAGE_MAX_RUNS: usize = 64;

/// Bytes of one run in a page value.
const RUN_BYTES: usize = 56;

impl Run {
    fn to_bytes(self) -> [u8; RUN_BYTES] {
        let mut b = [0u8; RUN_BYTES];
        b[..20].copy_from_slice(&self.pos.to_bytes());
        b[20..24].copy_from_slice(&self.count.to_be_bytes());
        b[24..].copy_from_slice(&self.last_hash.0);
        b
    }

    fn from_bytes(first_seq: u64, b: &[u8]) -> Option<Run> {
        if b.len() != RUN_BYTES {
            return None;
        }
        Some(Run {
            first_seq,
            count: u32::from_be_bytes(b[20..24].try_into().ok()?),
            pos: Position::from_bytes(&b[..20])?,
            last_hash: Hash(b[24..].try_into().ok()?),
        })
    }

    pub(crate) fn last_seq(&self) -> u64 {
        self.first_seq + u64::from(self.count) - 1
    }
}

/// A stream's number (its short key in the index) and head.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct StreamState {
    pub no: u64,
    pub seq: u64,
    pub hash: Hash,
}

pub(crate) struct Index {
    db: Kv,
    path: PathBuf,
}

/// Where the index's entries live: sled for a writer, whose index outlives the process; a
/// map in memory for a read-only view, which builds its own from the log and must write
/// nothing (sled takes a lock and writes on open).
enum Kv {
    Sled(sled::Db),
    Memory(MemoryMap),
}

/// A value read from either backend.
enum Value {
    Sled(sled::IVec),
    Memory(Vec<u8>),
}

impl std::ops::Deref for Value {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Value::Sled(v) => v,
            Value::Memory(v) => v,
        }
    }
}

impl AsRef<[u8]> for Value {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

type Entry = (Value, Value);

impl Kv {
    fn get(&self, k: &[u8]) -> sled::Result<Option<Value>> {
        match self {
            Kv::Sled(db) => Ok(db.get(k)?.map(Value::Sled)),
            Kv::Memory(m) => Ok(read(m).get(k).cloned().map(Value::Memory)),
        }
    }

    fn contains_key(&self, k: &[u8]) -> sled::Result<bool> {
        match self {
            Kv::Sled(db) => db.contains_key(k),
            Kv::Memory(m) => Ok(read(m).contains_key(k)),
        }
    }

    fn insert(&self, k: &[u8], v: Vec<u8>) -> sled::Result<()> {
        match self {
            Kv::Sled(db) => db.insert(k, v).map(drop),
            Kv::Memory(m) => {
                write(m).insert(k.to_vec(), v);
                Ok(())
            }
        }
    }

    /// One entry removed (the tests damage the index with it).
    #[cfg(test)]
    fn remove(&self, k: &[u8]) -> sled::Result<()> {
        match self {
            Kv::Sled(db) => db.remove(k).map(drop),
            Kv::Memory(m) => {
                write(m).remove(k);
                Ok(())
            }
        }
    }

    /// The last entry with a key in `lo..=hi`.
    fn last_in(&self, lo: &[u8], hi: &[u8]) -> sled::Result<Option<Entry>> {
        match self {
            Kv::Sled(db) => db
                .range(lo..=hi)
                .next_back()
                .transpose()
                .map(|e| e.map(|(k, v)| (Value::Sled(k), Value::Sled(v)))),
            Kv::Memory(m) => Ok(read(m)
                .range(lo.to_vec()..=hi.to_vec())
                .next_back()
                .map(|(k, v)| (Value::Memory(k.clone()), Value::Memory(v.clone())))),
        }
    }

    /// Removes every entry with a key in `lo..=hi`; how many.
    fn remove_in(&self, lo: &[u8], hi: &[u8]) -> sled::Result<usize> {
        match self {
            Kv::Sled(db) => {
                let keys: Vec<_> = db.range(lo..=hi).keys().collect::<sled::Result<_>>()?;
                for k in &keys {
                    db.remove(k)?;
                }
                db.flush()?;
                Ok(keys.len())
            }
            Kv::Memory(m) => {
                let mut map = write(m);
                let keys: Vec<Vec<u8>> = map
                    .range(lo.to_vec()..=hi.to_vec())
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in &keys {
                    map.remove(k);
                }
                Ok(keys.len())
            }
        }
    }

    /// Calls `f` with each entry with a key in `lo..=hi`, in key order, until it says stop.
    fn each_in(
        &self,
        lo: &[u8],
        hi: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, StoreError>,
    ) -> Result<(), Result<sled::Error, StoreError>> {
        match self {
            Kv::Sled(db) => {
                for item in db.range(lo..=hi) {
                    let (k, v) = item.map_err(Ok)?;
                    if !f(&k, &v).map_err(Err)? {
                        break;
                    }
                }
            }
            Kv::Memory(m) => {
                for (k, v) in read(m).range(lo.to_vec()..=hi.to_vec()) {
                    if !f(k, v).map_err(Err)? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn apply(&self, batch: IndexBatch) -> sled::Result<()> {
        match self {
            Kv::Sled(db) => {
                let mut b = sled::Batch::default();
                for (k, v) in batch.0 {
                    b.insert(k, v);
                }
                db.apply_batch(b)
            }
            Kv::Memory(m) => {
                write(m).extend(batch.0);
                Ok(())
            }
        }
    }
}

type MemoryMap = std::sync::RwLock<BTreeMap<Vec<u8>, Vec<u8>>>;

/// The memory index's map, for reading (a panic elsewhere cannot leave it half-written:
/// every write is one `insert` or `extend`).
fn read(m: &MemoryMap) -> std::sync::RwLockReadGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
    m.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write(m: &MemoryMap) -> std::sync::RwLockWriteGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
    m.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Index entries of one commit, applied atomically.
#[derive(Default)]
pub(crate) struct IndexBatch(Vec<(Vec<u8>, Vec<u8>)>);

fn key(prefix: u8, no: u64, seq: u64) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = prefix;
    k[1..9].copy_from_slice(&no.to_be_bytes());
    k[9..].copy_from_slice(&seq.to_be_bytes());
    k
}

fn node_key(no: u64, level: u32, index: u64) -> [u8; 18] {
    let mut k = [0u8; 18];
    k[0] = TREE_NODE;
    k[1..9].copy_from_slice(&no.to_be_bytes());
    k[9] = level as u8;
    k[10..].copy_from_slice(&index.to_be_bytes());
    k
}

fn frontier_key(no: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = TREE_FRONTIER;
    k[1..].copy_from_slice(&no.to_be_bytes());
    k
}

fn blob_key(hash: &Hash) -> [u8; 33] {
    let mut k = [0u8; 33];
    k[0] = BLOB;
    k[1..].copy_from_slice(&hash.0);
    k
}

impl IndexBatch {
    pub(crate) fn run(&mut self, no: u64, run: Run) {
        self.page(no, &[run]);
    }

    /// Stores consecutive runs of stream `no` (each starting where the previous ended) under one
    /// key, the first run's sequence: the value is their 56-byte encodings back to back, and
    /// each run's first sequence follows from the key and the counts before it.
    pub(crate) fn page(&mut self, no: u64, runs: &[Run]) {
        let Some(first) = runs.first() else { return };
        let mut v = Vec::with_capacity(runs.len() * RUN_BYTES);
        for run in runs {
            v.extend_from_slice(&run.to_bytes());
        }
        self.0.push((key(EVENT, no, first.first_seq).to_vec(), v));
    }

    /// Registers a new stream under its short number (its head comes from its last run).
    pub(crate) fn new_stream(&mut self, id: &StreamId, no: u64) {
        let mut k = Vec::with_capacity(1 + id.as_str().len());
        k.push(STREAM);
        k.extend_from_slice(id.as_str().as_bytes());
        self.0.push((k, no.to_be_bytes().to_vec()));
    }

    pub(crate) fn blob(&mut self, hash: &Hash, pos: Position) {
        self.0
            .push((blob_key(hash).to_vec(), pos.to_bytes().to_vec()));
    }

    /// The log is indexed up to (segment, offset); also records the next stream number, and
    /// that this index keeps Merkle trees.
    pub(crate) fn covered(&mut self, segment: u64, offset: u64, next_stream: u64) {
        let mut v = [0u8; 16];
        v[..8].copy_from_slice(&segment.to_be_bytes());
        v[8..].copy_from_slice(&offset.to_be_bytes());
        self.0.push((COVERED.to_vec(), v.to_vec()));
        self.0
            .push((NEXT_STREAM.to_vec(), next_stream.to_be_bytes().to_vec()));
        self.0.push((TREE_MARKER.to_vec(), vec![1u8]));
    }

    /// A complete subtree of stream `no`'s Merkle tree: the root of the `2^level` leaves from
    /// leaf `index << level` (levels from [`NODE_MIN_LEVEL`] up).
    pub(crate) fn tree_node(&mut self, no: u64, level: u32, index: u64, hash: &TreeHash) {
        self.0
            .push((node_key(no, level, index).to_vec(), hash.0.to_vec()));
    }

    /// Stream `no`'s tree as far as this batch indexes it: its size and the roots of its
    /// complete subtrees (the next leaf is pushed onto them).
    pub(crate) fn frontier(&mut self, no: u64, tree: &TreeBuilder) {
        let mut v = Vec::with_capacity(8 + 33 * tree.frontier().len());
        v.extend_from_slice(&tree.size().to_be_bytes());
        for (level, hash) in tree.frontier() {
            v.push(*level as u8);
            v.extend_from_slice(&hash.0);
        }
        self.0.push((frontier_key(no).to_vec(), v));
    }
}

impl Index {
    pub(crate) fn open(path: &Path) -> Result<Index, StoreError> {
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(64 * 1024 * 1024)
            .mode(sled::Mode::HighThroughput);
        // sled 0.34 releases its file lock from its own I/O threads, shortly after the last
        // handle is dropped; an in-process reopen right after a close can see it still held.
        let mut attempts = 0;
        let db = loop {
            match config.open() {
                Ok(db) => break db,
                Err(e) if attempts < 300 && e.to_string().contains("could not acquire lock") => {
                    attempts += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e @ (sled::Error::Corruption { .. } | sled::Error::ReportableBug(_))) => {
                    return Err(StoreError::IndexDamaged {
                        what: e.to_string(),
                        path: path.to_path_buf(),
                    });
                }
                Err(e) => {
                    return Err(StoreError::Index {
                        what: format!("opening: {e}"),
                        path: path.to_path_buf(),
                    });
                }
            }
        };
        Ok(Index {
            db: Kv::Sled(db),
            path: path.to_path_buf(),
        })
    }

    /// An empty index held in memory, for a read-only view of the log under `dir`: nothing
    /// is written to disk, and it is gone when the view is dropped.
    pub(crate) fn in_memory(dir: &Path) -> Index {
        Index {
            db: Kv::Memory(MemoryMap::default()),
            path: dir.to_path_buf(),
        }
    }

    /// Opens the index, or, when sled finds its own files damaged (a crash can leave them so),
    /// moves them aside to `index.damaged` and starts an empty index: everything in it can be
    /// rebuilt from the log, which the caller then re-indexes from its start. Returns whether
    /// it was rebuilt.
    pub(crate) fn open_or_rebuild(path: &Path) -> Result<(Index, bool), StoreError> {
        match Index::open(path) {
            Ok(index) => Ok((index, false)),
            Err(StoreError::IndexDamaged { what, .. }) => {
                let aside = path.with_extension("damaged");
                tracing::warn!(index = %path.display(), aside = %aside.display(), damage = %what,
                    "the index is damaged; moving it aside and rebuilding it from the log");
                if aside.exists() {
                    std::fs::remove_dir_all(&aside).map_err(|e| StoreError::Index {
                        what: format!("removing an older damaged index: {e}"),
                        path: aside.clone(),
                    })?;
                }
                std::fs::rename(path, &aside).map_err(|e| StoreError::Index {
                    what: format!("moving the damaged index aside: {e}"),
                    path: path.to_path_buf(),
                })?;
                Ok((Index::open(path)?, true))
            }
            Err(other) => Err(other),
        }
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> StoreError {
        StoreError::Index {
            what: format!("{what}: {e}"),
            path: self.path.clone(),
        }
    }

    fn damaged(&self, what: &str) -> StoreError {
        StoreError::Index {
            what: format!("damaged entry: {what}"),
            path: self.path.clone(),
        }
    }

    pub(crate) fn apply(&self, batch: IndexBatch) -> Result<(), StoreError> {
        self.db.apply(batch).map_err(|e| self.err("writing", e))
    }

    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        match &self.db {
            Kv::Sled(db) => db.flush().map(|_| ()).map_err(|e| self.err("flushing", e)),
            Kv::Memory(_) => Ok(()),
        }
    }

    /// Turns a failure of [`Kv::each_in`] into the store's error.
    fn each_err(&self, e: Result<sled::Error, StoreError>) -> StoreError {
        match e {
            Ok(e) => self.err("reading", e),
            Err(e) => e,
        }
    }

    /// (segment, offset) up to which the log is indexed, and the next stream number.
    pub(crate) fn covered(&self) -> Result<Option<(u64, u64, u64)>, StoreError> {
        let Some(v) = self.db.get(COVERED).map_err(|e| self.err("reading", e))? else {
            return Ok(None);
        };
        let n = self
            .db
            .get(NEXT_STREAM)
            .map_err(|e| self.err("reading", e))?;
        let (Ok(seg), Ok(off)) = (
            v.get(..8)
                .unwrap_or_default()
                .try_into()
                .map(u64::from_be_bytes),
            v.get(8..16)
                .unwrap_or_default()
                .try_into()
                .map(u64::from_be_bytes),
        ) else {
            return Err(self.damaged("covered position"));
        };
        let next = n
            .and_then(|n| n.as_ref().try_into().ok().map(u64::from_be_bytes))
            .ok_or_else(|| self.damaged("next stream number"))?;
        Ok(Some((seg, off, next)))
    }

    /// Every stream and its head, in stream id order.
    pub(crate) fn streams(&self) -> Result<Vec<(StreamId, StreamState)>, StoreError> {
        let mut entries = Vec::new();
        // Stream keys are `s` and the id's bytes: all sort between `s` and `t`.
        self.db
            .each_in(&[STREAM], &[STREAM + 1], |k, v| {
                if k.first() == Some(&STREAM) {
                    entries.push((k.to_vec(), v.to_vec()));
                }
                Ok(true)
            })
            .map_err(|e| self.each_err(e))?;
        let mut out = Vec::new();
        for (k, v) in entries {
            let id = std::str::from_utf8(&k[1..])
                .ok()
                .and_then(|s| StreamId::new(s).ok())
                .ok_or_else(|| self.damaged("stream id"))?;
            let no = v
                .as_slice()
                .try_into()
                .map(u64::from_be_bytes)
                .map_err(|_| self.damaged("stream number"))?;
            let (k, v) = self
                .db
                .last_in(&key(EVENT, no, 0), &key(EVENT, no, u64::MAX))
                .map_err(|e| self.err("reading", e))?
                .ok_or_else(|| self.damaged("stream without events"))?;
            let run = *self
                .parse_page(&k, &v)?
                .last()
                .ok_or_else(|| self.damaged("empty event page"))?;
            out.push((
                id,
                StreamState {
                    no,
                    seq: run.last_seq(),
                    hash: run.last_hash,
                },
            ));
        }
        Ok(out)
    }

    /// The runs of one page entry, in order (a page written before pages existed holds one).
    fn parse_page(&self, k: &[u8], v: &[u8]) -> Result<Vec<Run>, StoreError> {
        let mut seq = k
            .get(9..17)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .ok_or_else(|| self.damaged("event key"))?;
        if v.is_empty() || !v.len().is_multiple_of(RUN_BYTES) {
            return Err(self.damaged("event page length"));
        }
        let mut out = Vec::with_capacity(v.len() / RUN_BYTES);
        for b in v.chunks_exact(RUN_BYTES) {
            let run = Run::from_bytes(seq, b).ok_or_else(|| self.damaged("event run"))?;
            if run.count == 0 {
                return Err(self.damaged("empty event run"));
            }
            seq = run.first_seq + u64::from(run.count);
            out.push(run);
        }
        Ok(out)
    }

    /// Runs holding events `from..=to` of stream `no`, in order, holding at least `limit`
    /// events (or all there are).
    pub(crate) fn runs(
        &self,
        no: u64,
        from: u64,
        to: u64,
        limit: usize,
    ) -> Result<Vec<Run>, StoreError> {
        let mut out: Vec<Run> = Vec::new();
        if let Some((k, v)) = self
            .db
            .last_in(&key(EVENT, no, 0), &key(EVENT, no, from))
            .map_err(|e| self.err("reading", e))?
        {
            out.extend(
                self.parse_page(&k, &v)?
                    .into_iter()
                    .filter(|run| run.first_seq + u64::from(run.count) > from),
            );
        }
        let mut events: usize = out.iter().map(|r| r.count as usize).sum();
        let start = out.last().map_or(from, |r| r.first_seq + 1);
        if events >= limit || start > to {
            return Ok(out);
        }
        self.db
            .each_in(&key(EVENT, no, start), &key(EVENT, no, to), |k, v| {
                for run in self.parse_page(k, v)? {
                    events += run.count as usize;
                    out.push(run);
                }
                Ok(events < limit)
            })
            .map_err(|e| self.each_err(e))?;
        Ok(out)
    }

    /// The index's directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this index keeps Merkle trees (false for an empty index too).
    pub(crate) fn keeps_trees(&self) -> Result<bool, StoreError> {
        self.db
            .contains_key(TREE_MARKER)
            .map_err(|e| self.err("reading", e))
    }

    /// Empties the index, for a rebuild from the log.
    pub(crate) fn clear(&self) -> Result<(), StoreError> {
        match &self.db {
            Kv::Sled(db) => db.clear().map_err(|e| self.err("clearing", e)),
            Kv::Memory(m) => {
                write(m).clear();
                Ok(())
            }
        }
    }

    /// A kept node of stream `no`'s tree (see [`IndexBatch::tree_node`]).
    pub(crate) fn tree_node(
        &self,
        no: u64,
        level: u32,
        index: u64,
    ) -> Result<Option<TreeHash>, StoreError> {
        let Some(v) = self
            .db
            .get(&node_key(no, level, index))
            .map_err(|e| self.err("reading", e))?
        else {
            return Ok(None);
        };
        let hash: [u8; 32] = v
            .as_ref()
            .try_into()
            .map_err(|_| self.damaged("Merkle tree node"))?;
        Ok(Some(TreeHash(hash)))
    }

    /// Stream `no`'s tree as far as the index has it (see [`IndexBatch::frontier`]).
    pub(crate) fn frontier(&self, no: u64) -> Result<Option<TreeBuilder>, StoreError> {
        let Some(v) = self
            .db
            .get(&frontier_key(no))
            .map_err(|e| self.err("reading", e))?
        else {
            return Ok(None);
        };
        // Damage to an entry the index rebuilds on open, not an I/O failure.
        let damaged = || StoreError::IndexDamaged {
            what: format!("stream number {no}'s Merkle tree frontier does not decode"),
            path: self.path.clone(),
        };
        let (size, rest) = v.split_at_checked(8).ok_or_else(damaged)?;
        let size = u64::from_be_bytes(size.try_into().map_err(|_| damaged())?);
        if !rest.len().is_multiple_of(33) {
            return Err(damaged());
        }
        let frontier = rest
            .chunks_exact(33)
            .map(|c| {
                let mut hash = [0u8; 32];
                hash.copy_from_slice(&c[1..]);
                (u32::from(c[0]), TreeHash(hash))
            })
            .collect();
        TreeBuilder::resume(size, frontier)
            .map(Some)
            .ok_or_else(damaged)
    }

    /// Removes what an index written before Merkle trees lacks: the marker and every tree
    /// entry.
    #[cfg(test)]
    pub(crate) fn forget_trees(&self) {
        self.db.remove(TREE_MARKER).expect("test index write");
        for prefix in [TREE_NODE, TREE_FRONTIER] {
            let mut keys = Vec::new();
            self.db
                .each_in(&[prefix], &[prefix + 1], |k, _| {
                    if k.first() == Some(&prefix) {
                        keys.push(k.to_vec());
                    }
                    Ok(true)
                })
                .expect("test index read");
            for k in keys {
                self.db.remove(&k).expect("test index write");
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn overwrite_frontier(&self, no: u64, tree: &TreeBuilder) {
        let mut batch = IndexBatch::default();
        batch.frontier(no, tree);
        self.apply(batch).expect("test index write");
    }

    #[cfg(test)]
    pub(crate) fn overwrite_tree_node(&self, no: u64, level: u32, index: u64, hash: &TreeHash) {
        self.db
            .insert(&node_key(no, level, index), hash.0.to_vec())
            .expect("test index write");
    }

    pub(crate) fn blob(&self, hash: &Hash) -> Result<Option<Position>, StoreError> {
        match self
            .db
            .get(&blob_key(hash))
            .map_err(|e| self.err("reading", e))?
        {
            None => Ok(None),
            Some(v) => Position::from_bytes(&v)
                .map(Some)
                .ok_or_else(|| self.damaged("blob position")),
        }
    }

    pub(crate) fn put_snapshot(
        &self,
        no: u64,
        seq: u64,
        event_hash: &Hash,
        state: &[u8],
    ) -> Result<(), StoreError> {
        let mut v = Vec::with_capacity(32 + state.len());
        v.extend_from_slice(&event_hash.0);
        v.extend_from_slice(state);
        self.db
            .insert(&key(SNAPSHOT, no, seq), v)
            .map_err(|e| self.err("writing snapshot", e))
    }

    /// Removes every snapshot of stream `no` the index holds (an erasure must leave no
    /// folded copy of a value); how many.
    pub(crate) fn remove_snapshots(&self, no: u64) -> Result<u64, StoreError> {
        self.db
            .remove_in(&key(SNAPSHOT, no, 0), &key(SNAPSHOT, no, u64::MAX))
            .map(|n| n as u64)
            .map_err(|e| self.err("removing snapshots", e))
    }

    /// The latest snapshot of stream `no` at or before `seq`: (seq, event hash, state).
    pub(crate) fn latest_snapshot(
        &self,
        no: u64,
        seq: u64,
    ) -> Result<Option<(u64, Hash, Vec<u8>)>, StoreError> {
        let found = self
            .db
            .last_in(&key(SNAPSHOT, no, 0), &key(SNAPSHOT, no, seq))
            .map_err(|e| self.err("reading snapshot", e))?;
        let Some((k, v)) = found else {
            return Ok(None);
        };
        let at = k
            .get(9..17)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .ok_or_else(|| self.damaged("snapshot key"))?;
        if v.len() < 32 {
            return Err(self.damaged("snapshot value"));
        }
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&v[..32]);
        Ok(Some((at, Hash(hash), v[32..].to_vec())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first_seq: u64, count: u32, offset: u64) -> Run {
        Run {
            first_seq,
            count,
            pos: Position {
                segment: 1,
                offset,
                len: 100 * count,
            },
            last_hash: Hash([first_seq as u8; 32]),
        }
    }

    #[test]
    fn pages_of_runs_read_back_as_runs_from_any_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("index")).unwrap();
        // Stream 0: a page written one run per entry (as before pages existed), then a page
        // of three runs, then a page of one run. Stream 1 sits after it in key order.
        let mut batch = IndexBatch::default();
        batch.new_stream(&StreamId::new("a").unwrap(), 0);
        batch.new_stream(&StreamId::new("b").unwrap(), 1);
        batch.run(0, run(1, 2, 32));
        batch.page(0, &[run(3, 1, 1000), run(4, 3, 2000), run(7, 1, 3000)]);
        batch.page(0, &[run(8, 5, 4000)]);
        batch.page(1, &[run(1, 1, 5000), run(2, 1, 6000)]);
        index.apply(batch).unwrap();

        let firsts = |from, to, limit| {
            index
                .runs(0, from, to, limit)
                .unwrap()
                .iter()
                .map(|r| (r.first_seq, r.count, r.pos.offset))
                .collect::<Vec<_>>()
        };
        let all = vec![
            (1, 2, 32),
            (3, 1, 1000),
            (4, 3, 2000),
            (7, 1, 3000),
            (8, 5, 4000),
        ];
        assert_eq!(firsts(1, 12, usize::MAX), all);
        // Starting inside a page skips its runs that end before `from`.
        assert_eq!(firsts(5, 12, usize::MAX), all[2..].to_vec());
        assert_eq!(firsts(7, 7, usize::MAX), all[3..4].to_vec());
        assert_eq!(firsts(9, 12, usize::MAX), all[4..].to_vec());
        // `limit` stops after the entry that reaches it.
        assert_eq!(firsts(1, 12, 2), all[..1].to_vec());
        assert_eq!(firsts(1, 12, 3), all[..4].to_vec());

        let heads = index.streams().unwrap();
        assert_eq!(heads.len(), 2);
        assert_eq!((heads[0].1.seq, heads[0].1.hash), (12, Hash([8; 32])));
        assert_eq!((heads[1].1.seq, heads[1].1.hash), (2, Hash([2; 32])));
    }

    #[test]
    fn a_damaged_page_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("index")).unwrap();
        index.db.insert(&key(EVENT, 0, 1), vec![0u8; 57]).unwrap();
        assert!(matches!(
            index.runs(0, 1, 10, usize::MAX),
            Err(StoreError::Index { .. })
        ));
        let mut zero_count = run(1, 1, 32).to_bytes();
        zero_count[20..24].copy_from_slice(&0u32.to_be_bytes());
        index
            .db
            .insert(&key(EVENT, 0, 1), zero_count.to_vec())
            .unwrap();
        assert!(matches!(
            index.runs(0, 1, 10, usize::MAX),
            Err(StoreError::Index { .. })
        ));
    }
}
