//! Opening a store: check the directory, repair the index from the log, cut a torn tail.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs;
use std::path::{Path, PathBuf};

use tracing::{info, info_span, warn};

use crate::acknowledged::{self, AcknowledgedFile, LogPoint};
use crate::chain::blob_hash;
use crate::codec::{
    FORMAT_VERSION, TAG_BLOB, TAG_EVENT, decode_blob, decode_event, parse_record, readable_format,
    split_records,
};
use crate::config::StoreConfig;
use crate::error::{Damage, StoreError, io_err};
use crate::event::{Hash, StreamId};
use crate::index::{Index, IndexBatch, NODE_MIN_LEVEL, Position, RUN_MAX_EVENTS, Run, StreamState};
use crate::lock::is_lock_file;
use crate::merkle::{TreeBuilder, leaf_hash};
use crate::segment::{
    BATCH_HEADER_LEN, BATCH_MAGIC, LogFile, SEGMENT_HEADER_LEN, check_batch, check_segment_header,
    segment_header, segment_number, segment_path, sync_dir, valid_frame_after, zero_runway,
};
use crate::shared::StreamMap;
use crate::verify::check_link;

pub(crate) const MARKER: &str = "DOCKET-STORE";
const MARKER_PREFIX: &str = "docket-store format ";

/// What opening had to repair.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Events found in the log beyond what the index covered, now indexed.
    pub reindexed_events: u64,
    /// Bytes of an unacknowledged, torn last batch that were cut off (with any zero runway
    /// after it).
    pub truncated_bytes: u64,
    /// The index's files were damaged (moved aside to `index.damaged`), or its entries
    /// contradicted each other, and the index was rebuilt from the whole log.
    pub index_rebuilt: bool,
    /// The index was written before it kept Merkle trees and was rebuilt from the whole log
    /// with them.
    pub trees_built: bool,
}

pub(crate) struct Recovered {
    pub index: Index,
    pub heads: StreamMap<StreamState>,
    pub file: LogFile,
    pub segment: u64,
    pub len: u64,
    /// The last segment's file length: zeros from `len` on (a durable log's runway).
    pub zeroed_to: u64,
    pub next_stream: u64,
    /// Where the writer records how far the log was acknowledged (§15).
    pub acknowledged: AcknowledgedFile,
    pub report: RecoveryReport,
}

/// The format version a marker file's bytes name.
pub(crate) fn marker_version(path: &Path, bytes: &[u8]) -> Result<u32, StoreError> {
    let bad = |why| StoreError::BadMarker {
        path: path.to_path_buf(),
        why,
    };
    let text = std::str::from_utf8(bytes).map_err(|_| bad("it is not text"))?;
    let version = text
        .strip_prefix(MARKER_PREFIX)
        .ok_or_else(|| bad("it does not start with `docket-store format `"))?;
    let version = version
        .trim_end()
        .parse::<u32>()
        .map_err(|_| bad("the format it names is not a number"))?;
    if !readable_format(version) {
        return Err(StoreError::UnsupportedFormat {
            path: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    Ok(version)
}

/// Checks the marker, creating a new store in an empty (or absent) directory; returns the
/// format version the marker names.
fn check_marker(dir: &Path, sync: bool) -> Result<u32, StoreError> {
    let marker = dir.join(MARKER);
    match fs::read(&marker) {
        Ok(bytes) => marker_version(&marker, &bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(io_err("creating store directory", dir))?;
            let mut entries = fs::read_dir(dir)
                .map_err(io_err("listing store directory", dir))?
                .filter(|e| !e.as_ref().is_ok_and(|e| is_lock_file(&e.file_name())));
            if entries.next().is_some() {
                return Err(StoreError::ForeignDirectory {
                    path: dir.to_path_buf(),
                });
            }
            let log_dir = dir.join("log");
            fs::create_dir(&log_dir).map_err(io_err("creating log directory", &log_dir))?;
            write_marker(dir, sync)?;
            Ok(FORMAT_VERSION)
        }
        Err(e) => Err(io_err("reading marker", &marker)(e)),
    }
}

/// Writes the marker naming this build's format (a new file renamed over the old one).
/// A writer opening an older format's store rewrites it, so that builds which cannot read
/// what it appends (compressed records, format 2) refuse the store instead of calling
/// those records damage.
fn write_marker(dir: &Path, sync: bool) -> Result<(), StoreError> {
    let marker = dir.join(MARKER);
    let tmp = dir.join("DOCKET-STORE.tmp");
    fs::write(&tmp, format!("{MARKER_PREFIX}{FORMAT_VERSION}\n"))
        .map_err(io_err("writing marker", &tmp))?;
    if sync {
        fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(io_err("syncing marker", &tmp))?;
    }
    fs::rename(&tmp, &marker).map_err(io_err("renaming marker", &marker))?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// The segment files of a log directory.
pub(crate) struct Segments {
    /// Segment numbers 1, 2, 3... without a gap: the log.
    pub numbers: Vec<u64>,
    /// The first file named as a segment beyond a gap in the numbering, and what is wrong:
    /// the log cannot be read past the last segment before it.
    pub gap: Option<(PathBuf, Damage)>,
    /// Files not named as segments (`<20 digits>.seg`): not part of the log, left alone.
    pub ignored: Vec<PathBuf>,
}

impl Segments {
    /// The gap as the error a writer refuses to open with.
    pub(crate) fn refuse_gap(&self) -> Result<(), StoreError> {
        match &self.gap {
            Some((path, damage)) => Err(StoreError::Corrupt {
                segment: path.clone(),
                offset: 0,
                damage: Box::new(damage.clone()),
                streams_after: Vec::new(),
            }),
            None => Ok(()),
        }
    }
}

/// Lists the segments of `log_dir`; a file that is not named as one is ignored, with a
/// warning (the writer only ever creates segment names, so it cannot be part of the log).
pub(crate) fn list_segments(log_dir: &Path) -> Result<Segments, StoreError> {
    let mut named = Vec::new();
    let mut ignored = Vec::new();
    for entry in fs::read_dir(log_dir).map_err(io_err("listing log directory", log_dir))? {
        let entry = entry.map_err(io_err("listing log directory", log_dir))?;
        match entry.file_name().to_str().and_then(segment_number) {
            Some(no) => named.push(no),
            None => {
                warn!(file = %entry.path().display(), "not a segment file: ignored (the log directory holds only <20 digits>.seg files)");
                ignored.push(entry.path());
            }
        }
    }
    named.sort_unstable();
    ignored.sort();
    let run = named
        .iter()
        .enumerate()
        .take_while(|(i, no)| **no == *i as u64 + 1)
        .count();
    let gap = named.get(run).map(|&found| {
        (
            segment_path(log_dir, found),
            Damage::StraySegment {
                found,
                after: run as u64,
            },
        )
    });
    named.truncate(run);
    Ok(Segments {
        numbers: named,
        gap,
        ignored,
    })
}

/// The streams with events recorded from `from` on, read past damage there: the records
/// of the damaged batch that still decode, then every sound batch after it. What a reader
/// stopping at `from` does not show. Best effort: what cannot be read is passed over.
pub(crate) fn streams_after(log_dir: &Path, segments: &[u64], from: LogPoint) -> Vec<StreamId> {
    let mut seen: Vec<StreamId> = Vec::new();
    let mut note = |payload: &[u8]| {
        let mut at = 0;
        while let Some(rest) = payload.get(at..).filter(|r| !r.is_empty()) {
            let Ok(rec) = parse_record(rest) else {
                if let Some(stream) = stream_of_cut_record(rest)
                    && !seen.contains(&stream)
                {
                    seen.push(stream);
                }
                break;
            };
            if rec.tag == TAG_EVENT
                && let Ok((event, _)) = decode_event(&rec.body, None)
                && !seen.contains(&event.stream)
            {
                seen.push(event.stream);
            }
            at += rec.len;
        }
    };
    for &seg in segments.iter().filter(|&&s| s >= from.segment) {
        let Ok(bytes) = fs::read(segment_path(log_dir, seg)) else {
            continue;
        };
        let mut at = if seg == from.segment {
            from.offset as usize
        } else {
            SEGMENT_HEADER_LEN as usize
        };
        if seg == from.segment && at >= SEGMENT_HEADER_LEN as usize {
            // The damaged batch itself, as far as its records still decode.
            if let Some(header) = bytes.get(at..at + BATCH_HEADER_LEN)
                && header[..4] == BATCH_MAGIC
            {
                let mut len = [0u8; 4];
                len.copy_from_slice(&header[4..8]);
                let end = (at + BATCH_HEADER_LEN)
                    .saturating_add(u32::from_le_bytes(len) as usize)
                    .min(bytes.len());
                note(&bytes[at + BATCH_HEADER_LEN..end]);
            }
            match valid_frame_after(&bytes, at) {
                Some(next) => at = next,
                None => continue,
            }
        }
        while at < bytes.len() {
            match check_batch(&bytes[at..]) {
                Ok(payload) => {
                    note(payload);
                    at += BATCH_HEADER_LEN + payload.len();
                }
                Err(_) => match valid_frame_after(&bytes, at) {
                    Some(next) => at = next,
                    None => break,
                },
            }
        }
    }
    seen
}

/// The stream of an event record cut short, when it is stored uncompressed and its id
/// (at the start of its canonical body, §3) is still there.
fn stream_of_cut_record(record: &[u8]) -> Option<StreamId> {
    if record.get(4) != Some(&TAG_EVENT) {
        return None;
    }
    let len = usize::from(*record.get(5)?);
    if len >= 0x80 {
        // A longer id's length takes more than one varint byte: not worth guessing at.
        return None;
    }
    let id = std::str::from_utf8(record.get(6..6 + len)?).ok()?;
    StreamId::new(id).ok()
}

/// Damage at `here`, said as damage to an acknowledged batch when `acknowledged` is
/// beyond it.
pub(crate) fn judged(damage: Damage, here: LogPoint, acknowledged: Option<LogPoint>) -> Damage {
    match acknowledged {
        Some(end) if here < end => Damage::AcknowledgedBatch {
            damage: Box::new(damage),
            segment: end.segment,
            offset: end.offset,
        },
        _ => damage,
    }
}

pub(crate) fn open(dir: &Path, config: &StoreConfig) -> Result<Recovered, StoreError> {
    let span = info_span!("open_store", dir = %dir.display());
    let _guard = span.enter();
    let sync = config.syncs();
    if check_marker(dir, sync)? < FORMAT_VERSION {
        write_marker(dir, sync)?;
    }
    let log_dir = dir.join("log");
    let listed = list_segments(&log_dir)?;
    // Nothing is appended after a gap: it would be unreadable to every reader.
    listed.refuse_gap()?;
    let segments = listed.numbers;
    // Read before the log, as every reader does (§15).
    let marked = acknowledged::read(dir);
    let (index, index_rebuilt) = Index::open_or_rebuild(&dir.join("index"))?;
    let mut report = RecoveryReport {
        index_rebuilt,
        ..RecoveryReport::default()
    };
    if index.covered()?.is_some() && !index.keeps_trees()? {
        info!("the index predates Merkle trees: rebuilding it from the log");
        index.clear()?;
        report.trees_built = true;
    }
    let scanned = match scan(&index, &log_dir, &segments, config, marked, &mut report) {
        Err(StoreError::IndexDamaged { what, .. }) => {
            // The index's trees do not follow from its own entries (damage to sled's data,
            // not to its files): like damaged files, rebuilt from the log.
            warn!(damage = %what, "the index is inconsistent; rebuilding it from the log");
            index.clear()?;
            report.index_rebuilt = true;
            report.reindexed_events = 0;
            scan(&index, &log_dir, &segments, config, marked, &mut report)?
        }
        other => other?,
    };
    if report != RecoveryReport::default() {
        info!(?report, "recovered");
    }
    let Scanned {
        heads,
        file,
        segment,
        len,
        zeroed_to,
        next_stream,
    } = scanned;
    let acknowledged = AcknowledgedFile::create(
        dir,
        LogPoint {
            segment,
            offset: len,
        },
    )?;
    Ok(Recovered {
        index,
        heads,
        file,
        segment,
        len,
        zeroed_to,
        next_stream,
        acknowledged,
        report,
    })
}

/// What reading the log beyond the index's coverage found.
struct Scanned {
    heads: StreamMap<StreamState>,
    file: LogFile,
    segment: u64,
    len: u64,
    zeroed_to: u64,
    next_stream: u64,
}

/// Checks every batch frame of the log and indexes those beyond the index's coverage,
/// cutting a torn tail; an [`StoreError::IndexDamaged`] when the index's entries contradict
/// each other or the log.
///
/// Every frame is checked, not only those the index lacks: a writer must not append after
/// damage, since every reader stops there. What is before the index's coverage or the
/// acknowledged end (`marked`, §15) was acknowledged: damage there is never cut as torn.
fn scan(
    index: &Index,
    log_dir: &Path,
    segments: &[u64],
    config: &StoreConfig,
    marked: Option<LogPoint>,
    report: &mut RecoveryReport,
) -> Result<Scanned, StoreError> {
    let sync = config.syncs();
    let log_dir = log_dir.to_path_buf();
    let mut heads: StreamMap<StreamState> = index.streams()?.into_iter().collect();
    let mut trees: HashMap<u64, TreeBuilder> = HashMap::new();
    let covered = index.covered()?;
    let (covered_seg, covered_off, mut next_stream) = covered.unwrap_or((1, SEGMENT_HEADER_LEN, 0));
    let indexed_to = covered.map(|(segment, offset, _)| LogPoint { segment, offset });
    let acknowledged = indexed_to.max(marked);
    let missing = |segment: PathBuf, offset: u64, end: LogPoint| StoreError::Corrupt {
        segment,
        offset,
        damage: Box::new(Damage::AcknowledgedMissing {
            segment: end.segment,
            offset: end.offset,
        }),
        streams_after: Vec::new(),
    };

    let Some(&last) = segments.last() else {
        if covered.is_some() {
            return Err(StoreError::LogShorterThanIndex {
                segment: segment_path(&log_dir, covered_seg),
                len: 0,
                indexed_to: covered_off,
            });
        }
        if let Some(end) = marked.filter(|m| {
            *m > LogPoint {
                segment: 1,
                offset: SEGMENT_HEADER_LEN,
            }
        }) {
            return Err(missing(segment_path(&log_dir, 1), 0, end));
        }
        let file = LogFile::create(&log_dir, 1, &config.faults(), sync)?;
        return Ok(Scanned {
            heads,
            file,
            segment: 1,
            len: SEGMENT_HEADER_LEN,
            zeroed_to: SEGMENT_HEADER_LEN,
            next_stream,
        });
    };
    if covered_seg > last {
        return Err(StoreError::LogShorterThanIndex {
            segment: segment_path(&log_dir, covered_seg),
            len: 0,
            indexed_to: covered_off,
        });
    }

    let mut last_len = SEGMENT_HEADER_LEN;
    let mut zeroed_to = SEGMENT_HEADER_LEN;
    for seg in 1..=last {
        let path = segment_path(&log_dir, seg);
        let is_last = seg == last;
        let bytes = fs::read(&path).map_err(io_err("reading segment", &path))?;
        if is_last && (bytes.len() as u64) < SEGMENT_HEADER_LEN {
            let start = LogPoint {
                segment: seg,
                offset: SEGMENT_HEADER_LEN,
            };
            if let Some(end) = acknowledged.filter(|a| *a > start) {
                return Err(missing(path, 0, end));
            }
            // Torn while being created: it never held a batch.
            warn!(segment = %path.display(), "rewriting the header of a segment torn at creation");
            let file = LogFile::open(path.clone(), &config.faults())?;
            file.truncate(0)?;
            file.write_at(0, &segment_header(seg))?;
            if sync {
                file.sync()?;
            }
            last_len = SEGMENT_HEADER_LEN;
            zeroed_to = SEGMENT_HEADER_LEN;
            break;
        }
        check_segment_header(&bytes, seg, &path)?;
        // Frames before this offset are in the index already: checked, not indexed again.
        let index_from = match seg.cmp(&covered_seg) {
            std::cmp::Ordering::Less => u64::MAX,
            std::cmp::Ordering::Equal => covered_off,
            std::cmp::Ordering::Greater => SEGMENT_HEADER_LEN,
        } as usize;
        let mut at = SEGMENT_HEADER_LEN as usize;
        let mut file_len = bytes.len();
        while at < bytes.len() {
            match check_batch(&bytes[at..]) {
                Ok(payload) => {
                    let end = at + BATCH_HEADER_LEN + payload.len();
                    if at >= index_from {
                        report.reindexed_events += index_frame(
                            index,
                            (&mut heads, &mut trees),
                            &mut next_stream,
                            &path,
                            seg,
                            (at as u64, end as u64),
                            payload,
                            None,
                        )?;
                    } else if end > index_from {
                        return Err(StoreError::IndexDamaged {
                            what: format!(
                                "it covers {} up to byte {index_from}, inside the batch at byte {at}",
                                path.display()
                            ),
                            path: index.path().to_path_buf(),
                        });
                    }
                    at = end;
                }
                Err(_) if is_last && zero_runway(&bytes, at) => {
                    // The runway a durable writer keeps ahead of the log: its end, not damage.
                    break;
                }
                Err(damage) => {
                    let here = LogPoint {
                        segment: seg,
                        offset: at as u64,
                    };
                    let acked = acknowledged.is_some_and(|a| here < a);
                    if acked || !is_last || valid_frame_after(&bytes, at).is_some() {
                        return Err(StoreError::Corrupt {
                            segment: path,
                            offset: at as u64,
                            damage: Box::new(judged(damage, here, acknowledged)),
                            streams_after: streams_after(&log_dir, segments, here),
                        });
                    }
                    warn!(segment = %path.display(), offset = at, bytes = bytes.len() - at, %damage,
                        "cutting a torn, unacknowledged last batch");
                    let file = LogFile::open(path.clone(), &config.faults())?;
                    file.truncate(at as u64)?;
                    if sync {
                        file.sync()?;
                    }
                    report.truncated_bytes = (bytes.len() - at) as u64;
                    file_len = at;
                    break;
                }
            }
        }
        if seg == covered_seg && at < index_from {
            return Err(StoreError::LogShorterThanIndex {
                segment: path,
                len: at as u64,
                indexed_to: covered_off,
            });
        }
        if is_last {
            last_len = at.min(file_len) as u64;
            zeroed_to = file_len as u64;
        }
    }
    let end = LogPoint {
        segment: last,
        offset: last_len,
    };
    if let Some(acked) = marked.filter(|m| *m > end) {
        return Err(missing(segment_path(&log_dir, last), last_len, acked));
    }
    let file = LogFile::open(segment_path(&log_dir, last), &config.faults())?;
    Ok(Scanned {
        heads,
        file,
        segment: last,
        len: last_len,
        zeroed_to,
        next_stream,
    })
}

/// Indexes the records of one batch found beyond the index's coverage, checking each event
/// against its stream's chain.
#[allow(clippy::too_many_arguments)]
fn index_frame(
    index: &Index,
    (heads, trees): (&mut StreamMap<StreamState>, &mut HashMap<u64, TreeBuilder>),
    next_stream: &mut u64,
    path: &Path,
    seg: u64,
    (frame_at, frame_end): (u64, u64),
    payload: &[u8],
    mut contain: Option<&mut Contained>,
) -> Result<u64, StoreError> {
    let payload_at = frame_at + BATCH_HEADER_LEN as u64;
    let corrupt = |offset: u64, damage: Damage| StoreError::Corrupt {
        segment: path.to_path_buf(),
        offset,
        damage: Box::new(damage),
        streams_after: Vec::new(),
    };
    let records = split_records(payload)
        .map_err(|(off, what)| corrupt(payload_at + off as u64, Damage::BadRecord(what)))?;
    let mut batch = IndexBatch::default();
    let mut events = 0;
    // Streams whose trees grew in this frame: their frontiers are written with it.
    let mut grown = Vec::new();
    // Back-to-back events of one stream are indexed as one run, as the writer does.
    let mut open_run: Option<(u64, Run)> = None;
    for rec in records {
        let offset = payload_at + rec.offset as u64;
        let pos = Position {
            segment: seg,
            offset,
            len: rec.len as u32,
        };
        match rec.tag {
            TAG_BLOB => {
                let (hash, content) =
                    decode_blob(&rec.body).map_err(|w| corrupt(offset, Damage::BadRecord(w)))?;
                if blob_hash(content) != hash {
                    if let Some(c) = contain.as_deref_mut() {
                        c.blobs.push(BlobDamage {
                            address: hash,
                            segment: path.to_path_buf(),
                            offset,
                        });
                        continue;
                    }
                    return Err(corrupt(
                        offset,
                        Damage::BadRecord(format!("blob {hash} does not match its content")),
                    ));
                }
                batch.blob(&hash, pos);
            }
            TAG_EVENT => {
                let (event, body) = decode_event(&rec.body, None)
                    .map_err(|w| corrupt(offset, Damage::BadRecord(w)))?;
                if contain
                    .as_deref()
                    .is_some_and(|c| c.streams.contains_key(&event.stream))
                {
                    // Past the first break of its stream: nothing after it is believed.
                    continue;
                }
                let head = heads.get(&event.stream).copied();
                let seq = head.map_or(1, |h| h.seq + 1);
                if let Err(break_) =
                    check_link(&event.stream, seq, head.map(|h| h.hash), &event, body)
                {
                    let damage = Damage::Chain {
                        stream: event.stream.clone(),
                        break_,
                    };
                    let Some(c) = contain.as_deref_mut() else {
                        return Err(corrupt(offset, damage));
                    };
                    c.streams.insert(
                        event.stream.clone(),
                        StreamDamage {
                            stream: event.stream,
                            seq,
                            segment: path.to_path_buf(),
                            offset,
                            damage,
                        },
                    );
                    continue;
                }
                let no = match head {
                    Some(h) => h.no,
                    None => {
                        *next_stream += 1;
                        *next_stream - 1
                    }
                };
                let tree = match trees.entry(no) {
                    Entry::Occupied(kept) => kept.into_mut(),
                    Entry::Vacant(new) => {
                        let kept = match head {
                            Some(_) => index.frontier(no)?,
                            None => Some(TreeBuilder::new()),
                        };
                        new.insert(kept.unwrap_or_default())
                    }
                };
                if tree.size() + 1 != seq {
                    return Err(StoreError::IndexDamaged {
                        what: format!(
                            "the Merkle tree of stream {} holds {} events, its head is {}",
                            event.stream,
                            tree.size(),
                            seq - 1
                        ),
                        path: path.to_path_buf(),
                    });
                }
                tree.push_reporting(leaf_hash(&rec.body), |level, at, node| {
                    if level >= NODE_MIN_LEVEL {
                        batch.tree_node(no, level, at, node);
                    }
                });
                grown.push(no);
                let state = StreamState {
                    no,
                    seq,
                    hash: event.hash,
                };
                match &mut open_run {
                    Some((run_no, run))
                        if *run_no == no
                            && run.first_seq + u64::from(run.count) == seq
                            && run.pos.offset + u64::from(run.pos.len) == offset
                            && (run.count as usize) < RUN_MAX_EVENTS =>
                    {
                        run.count += 1;
                        run.pos.len += pos.len;
                        run.last_hash = event.hash;
                    }
                    _ => {
                        if let Some((run_no, run)) = open_run.take() {
                            batch.run(run_no, run);
                        }
                        open_run = Some((
                            no,
                            Run {
                                first_seq: seq,
                                count: 1,
                                pos,
                                last_hash: event.hash,
                            },
                        ));
                    }
                }
                if head.is_none() {
                    batch.new_stream(&event.stream, no);
                }
                heads.insert(event.stream, state);
                events += 1;
            }
            other => {
                return Err(corrupt(
                    offset,
                    Damage::BadRecord(format!("unknown record tag {other}")),
                ));
            }
        }
    }
    if let Some((run_no, run)) = open_run {
        batch.run(run_no, run);
    }
    grown.sort_unstable();
    grown.dedup();
    for no in grown {
        if let Some(tree) = trees.get(&no) {
            batch.frontier(no, tree);
        }
    }
    // Entries and the coverage they extend land in one atomic sled batch.
    batch.covered(seg, frame_end, *next_stream);
    index.apply(batch)?;
    Ok(events)
}

/// A stream whose events fail their checks, as a read-only view found it: everything
/// before `seq` is sound and readable, nothing from `seq` on is believed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamDamage {
    pub stream: StreamId,
    /// The first sequence that fails.
    pub seq: u64,
    pub segment: PathBuf,
    /// Byte offset of the failing record in the segment file.
    pub offset: u64,
    pub damage: Damage,
}

impl StreamDamage {
    /// The damage as the error a read of the stream ends with.
    pub fn to_error(&self) -> StoreError {
        StoreError::StreamDamaged {
            stream: self.stream.clone(),
            seq: self.seq,
            segment: self.segment.clone(),
            offset: self.offset,
            damage: Box::new(self.damage.clone()),
        }
    }
}

/// A blob whose content does not hash to its address: events referring to it read as
/// having no such blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobDamage {
    pub address: Hash,
    pub segment: PathBuf,
    pub offset: u64,
}

/// Where a read-only view stopped reading the log, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDamage {
    pub segment: PathBuf,
    pub offset: u64,
    pub damage: Damage,
    /// Streams with events recorded after the damage, which the view does not show past it
    /// (read on from the next sound batch; best effort).
    pub streams_after: Vec<StreamId>,
}

/// What a read-only view found wrong, without repairing any of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewReport {
    /// Streams whose events fail their checks, in stream order; the others are readable.
    pub damaged_streams: Vec<StreamDamage>,
    pub damaged_blobs: Vec<BlobDamage>,
    /// Damage to the log's framing that no crash explains: nothing after it was read, so
    /// runs may lack the events recorded after it.
    pub log_damage: Option<LogDamage>,
    /// The last frame of the last segment is incomplete: a writer is putting it down, or a
    /// crash tore it (the next writer cuts it). It was never acknowledged.
    pub unfinished_at: Option<(PathBuf, u64)>,
}

/// What a read-only view keeps between refreshes.
#[derive(Default)]
pub(crate) struct Contained {
    pub streams: StreamMap<StreamDamage>,
    pub blobs: Vec<BlobDamage>,
    pub log_damage: Option<LogDamage>,
    pub unfinished_at: Option<(PathBuf, u64)>,
}

impl Contained {
    pub(crate) fn report(&self) -> ViewReport {
        let mut damaged_streams: Vec<StreamDamage> = self.streams.values().cloned().collect();
        damaged_streams.sort_by(|a, b| a.stream.cmp(&b.stream));
        ViewReport {
            damaged_streams,
            damaged_blobs: self.blobs.clone(),
            log_damage: self.log_damage.clone(),
            unfinished_at: self.unfinished_at.clone(),
        }
    }
}

/// Whether `dir` holds a store a view can read: `Ok(false)` for a directory a writer is
/// only creating (nothing in it but the lock files). Never creates anything.
fn check_view_marker(dir: &Path) -> Result<bool, StoreError> {
    if !dir.exists() {
        return Err(StoreError::NoDataDirectory {
            path: dir.to_path_buf(),
        });
    }
    if !dir.is_dir() {
        return Err(StoreError::NotADataDirectory {
            path: dir.to_path_buf(),
        });
    }
    if dir.join(MARKER).exists() {
        // Reads the marker; creates nothing, since it is there.
        check_marker(dir, false)?;
        return Ok(true);
    }
    let mut entries = fs::read_dir(dir)
        .map_err(io_err("listing data directory", dir))?
        .filter(|e| !e.as_ref().is_ok_and(|e| is_lock_file(&e.file_name())));
    if entries.next().is_some() {
        return Err(StoreError::NotADataDirectory {
            path: dir.to_path_buf(),
        });
    }
    Ok(false)
}

/// Opens a read-only view of the store in `dir`: its log indexed into `index` (in memory),
/// taking no lock and writing nothing.
pub(crate) fn open_view(
    dir: &Path,
    index: &Index,
    contained: &mut Contained,
) -> Result<StreamMap<StreamState>, StoreError> {
    let _span = info_span!("open_view", dir = %dir.display()).entered();
    if !check_view_marker(dir)? {
        return Ok(StreamMap::default());
    }
    refresh_view(dir, index, contained)
}

/// Reads what was appended since the view last read (all of it, the first time), checking
/// every chain link and hash, containing a broken stream to itself, stopping before an
/// unfinished last frame; returns every stream's head (a damaged stream's: its last
/// sound event).
pub(crate) fn refresh_view(
    dir: &Path,
    index: &Index,
    contained: &mut Contained,
) -> Result<StreamMap<StreamState>, StoreError> {
    let log_dir = dir.join("log");
    let mut heads: StreamMap<StreamState> = index.streams()?.into_iter().collect();
    if contained.log_damage.is_some() || !log_dir.is_dir() {
        return Ok(heads);
    }
    contained.unfinished_at = None;
    // Read before the log (§15): the writer records it only once what it covers is durable,
    // so the segments read afterwards hold at least that much.
    let acknowledged = acknowledged::read(dir);
    let listed = list_segments(&log_dir)?;
    let segments = &listed.numbers;
    let (covered_seg, covered_off, mut next_stream) =
        index.covered()?.unwrap_or((1, SEGMENT_HEADER_LEN, 0));
    let mut end = LogPoint {
        segment: covered_seg,
        offset: covered_off,
    };
    let mut trees: HashMap<u64, TreeBuilder> = HashMap::new();
    let mut damaged: Option<(PathBuf, LogPoint, Damage)> = None;
    'segments: for &seg in segments.iter().filter(|&&s| s >= covered_seg) {
        let path = segment_path(&log_dir, seg);
        let is_last = Some(&seg) == segments.last();
        let mut at = if seg == covered_seg {
            covered_off
        } else {
            SEGMENT_HEADER_LEN
        } as usize;
        // A writer appends while this reads: a read of the file may catch a batch half
        // written. What looks like damage in the last segment is read again before it is
        // believed (only bytes past the end of the log can have changed).
        let mut attempts = 0;
        'read: loop {
            let bytes = fs::read(&path).map_err(io_err("reading segment", &path))?;
            let here = |at: usize| LogPoint {
                segment: seg,
                offset: at as u64,
            };
            if is_last && bytes.len() < SEGMENT_HEADER_LEN as usize {
                contained.unfinished_at = Some((path.clone(), 0));
                break 'segments;
            }
            if let Err(e) = check_segment_header(&bytes, seg, &path) {
                let d = log_damage_of(e, &path, 0);
                damaged = Some((d.segment, here(0), d.damage));
                break 'segments;
            }
            while at < bytes.len() {
                if is_last && zero_runway(&bytes, at) {
                    break;
                }
                match check_batch(&bytes[at..]) {
                    Ok(payload) => {
                        let frame_end = at + BATCH_HEADER_LEN + payload.len();
                        if let Err(e) = index_frame(
                            index,
                            (&mut heads, &mut trees),
                            &mut next_stream,
                            &path,
                            seg,
                            (at as u64, frame_end as u64),
                            payload,
                            Some(contained),
                        ) {
                            let d = log_damage_of(e, &path, at as u64);
                            damaged = Some((d.segment, here(d.offset as usize), d.damage));
                            break 'segments;
                        }
                        at = frame_end;
                    }
                    Err(damage) => {
                        let acked = acknowledged.is_some_and(|a| here(at) < a);
                        let torn = !acked && is_last && valid_frame_after(&bytes, at).is_none();
                        if torn {
                            contained.unfinished_at = Some((path.clone(), at as u64));
                            end = here(at);
                            break 'segments;
                        }
                        if is_last && !acked && attempts < 3 {
                            attempts += 1;
                            continue 'read;
                        }
                        damaged = Some((
                            path.clone(),
                            here(at),
                            judged(damage, here(at), acknowledged),
                        ));
                        break 'segments;
                    }
                }
            }
            end = here(at);
            break;
        }
    }
    if damaged.is_none() {
        damaged = match (&listed.gap, acknowledged) {
            (Some((path, damage)), _) => Some((
                path.clone(),
                LogPoint {
                    segment: end.segment + 1,
                    offset: 0,
                },
                damage.clone(),
            )),
            // The log ends before what was acknowledged: batches are missing.
            (None, Some(a)) if end < a => Some((
                segment_path(&log_dir, end.segment),
                end,
                Damage::AcknowledgedMissing {
                    segment: a.segment,
                    offset: a.offset,
                },
            )),
            _ => None,
        };
    }
    if let Some((segment, from, damage)) = damaged {
        contained.log_damage = Some(LogDamage {
            segment,
            offset: from.offset,
            damage,
            streams_after: streams_after(&log_dir, segments, from),
        });
    }
    Ok(heads)
}

/// A failure to index a frame, as damage to the log at `offset` of `path`.
fn log_damage_of(e: StoreError, path: &Path, offset: u64) -> LogDamage {
    match e {
        StoreError::Corrupt {
            segment,
            offset,
            damage,
            ..
        } => LogDamage {
            segment,
            offset,
            damage: *damage,
            streams_after: Vec::new(),
        },
        other => LogDamage {
            segment: path.to_path_buf(),
            offset,
            damage: Damage::BadRecord(other.to_string()),
            streams_after: Vec::new(),
        },
    }
}
