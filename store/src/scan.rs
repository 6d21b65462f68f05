//! A read-only scan of a store's `log/`, for auditors (`docket verify`).
//!
//! Opening a store takes sled's lock and may repair: cut a torn tail, rebuild the index.
//! An auditor must change nothing and must be able to look while another process drives a
//! run, so this reads the segment files directly, takes no lock, never opens the index and
//! never writes. It checks each segment header and batch CRC (FORMAT.md §2, §6) and hands
//! every record to the caller in log order; checking chains is the caller's business.
//!
//! A damaged last frame of the last segment is reported as [`LogEnd::Unfinished`]: a
//! writer may be putting it down right now, or a crash tore it; either way it was never
//! acknowledged, and the scan leaves it alone. Damage anywhere else is [`LogEnd::Damaged`].

use std::fs;
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::acknowledged::LogPoint;
use crate::codec::{TAG_BLOB, TAG_EVENT, decode_blob, decode_event, split_records};
use crate::error::{Damage, StoreError, io_err};
use crate::event::{Event, Hash, StreamId};
use crate::recovery::{MARKER, Segments, judged, marker_version, streams_after};
use crate::segment::{
    BATCH_HEADER_LEN, SEGMENT_HEADER_LEN, check_batch, check_segment_header, segment_path,
    valid_frame_after, zero_runway,
};

/// Where a record sits in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogPosition {
    /// The segment's number (its file is `log/<20 digits>.seg`).
    pub segment: u64,
    /// Byte offset of the batch frame in the segment file.
    pub frame: u64,
    /// Byte offset of the record (its length prefix) in the segment file.
    pub record: u64,
}

/// A record handed to the caller of [`scan_log`].
#[derive(Debug)]
pub enum Scanned<'a> {
    /// An event, with its canonical body: the bytes its hash covers after `prev`.
    Event {
        event: Event,
        body: &'a [u8],
        at: LogPosition,
    },
    /// A blob: its address as recorded, and its content (not yet checked against it).
    Blob {
        address: Hash,
        content: &'a [u8],
        at: LogPosition,
    },
}

/// How the log ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogEnd {
    /// After the last complete frame (any zeros after it are the writer's runway).
    Clean,
    /// The last frame of the last segment is incomplete or fails its checksum, with nothing
    /// valid after it: being written by another process, or torn by a crash. It was never
    /// acknowledged; the scan stopped there and left it as it is.
    Unfinished {
        segment: PathBuf,
        offset: u64,
        damage: Damage,
    },
    /// Damage that no crash explains (a bad frame with valid data after it, or in any
    /// segment but the last, or in a batch that was acknowledged, or a record that does not
    /// decode), or a log that ends before what was acknowledged: the scan stopped there.
    Damaged {
        segment: PathBuf,
        offset: u64,
        damage: Damage,
        /// Streams with events recorded after the damage (read on from the next sound
        /// batch, best effort), none of which the scan handed over past it.
        streams_after: Vec<StreamId>,
    },
}

/// What a scan read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanSummary {
    pub segments: u64,
    pub frames: u64,
    pub events: u64,
    pub blobs: u64,
    pub end: LogEnd,
    /// Files in `log/` that are not named as segments: not part of the log, not read.
    pub ignored: Vec<PathBuf>,
}

/// Why a directory cannot be scanned at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    #[error("there is no data directory at {0}")]
    NoDirectory(PathBuf),
    #[error(
        "{0} is not a docket data directory (it has no DOCKET-STORE marker: nothing was ever recorded there)"
    )]
    NotAStore(PathBuf),
    #[error("{path}: {why}")]
    BadLayout { path: PathBuf, why: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Reads every record of the log under `dir` in order, without locks or writes, and calls
/// `visit` for each. Returns how the log ended; a torn or half-written tail and damage are
/// reported there, not as errors, so the caller still judges what came before.
///
/// # Errors
/// [`ScanError`] when `dir` is not a readable docket data directory.
pub fn scan_log(dir: &Path, mut visit: impl FnMut(Scanned<'_>)) -> Result<ScanSummary, ScanError> {
    if !dir.is_dir() {
        return Err(ScanError::NoDirectory(dir.to_path_buf()));
    }
    check_marker(dir)?;
    // Read before the log (FORMAT.md §15): what it covers is in the segments read afterwards.
    let acknowledged = crate::acknowledged::read(dir);
    let log_dir = dir.join("log");
    let listed = list_segments(&log_dir)?;
    for path in &listed.ignored {
        warn!(file = %path.display(), "not a segment file: not read");
    }
    let segments = listed.numbers;
    let mut summary = ScanSummary {
        segments: segments.len() as u64,
        frames: 0,
        events: 0,
        blobs: 0,
        end: LogEnd::Clean,
        ignored: listed.ignored,
    };
    let damaged_at = |path: &Path, here: LogPoint, damage: Damage| LogEnd::Damaged {
        segment: path.to_path_buf(),
        offset: here.offset,
        damage,
        streams_after: streams_after(&log_dir, &segments, here),
    };
    let mut end = LogPoint {
        segment: 1,
        offset: SEGMENT_HEADER_LEN,
    };
    let last = segments.last().copied();
    for &no in &segments {
        let path = segment_path(&log_dir, no);
        let is_last = Some(no) == last;
        let here = |at: usize| LogPoint {
            segment: no,
            offset: at as u64,
        };
        let acked = |at: usize| acknowledged.is_some_and(|a| here(at) < a);
        let bytes = fs::read(&path).map_err(io_err("reading segment", &path))?;
        if is_last
            && bytes.len() < SEGMENT_HEADER_LEN as usize
            && !acked(SEGMENT_HEADER_LEN as usize)
        {
            // Being created: it holds no batch yet.
            summary.end = LogEnd::Unfinished {
                segment: path,
                offset: 0,
                damage: Damage::BadSegmentHeader("shorter than 32 bytes"),
            };
            return Ok(summary);
        }
        if let Err(e) = check_segment_header(&bytes, no, &path) {
            match e {
                StoreError::Corrupt { damage, .. } => {
                    summary.end = damaged_at(&path, here(0), *damage);
                    return Ok(summary);
                }
                other => return Err(other.into()),
            }
        }
        let mut at = SEGMENT_HEADER_LEN as usize;
        while at < bytes.len() {
            if is_last && zero_runway(&bytes, at) {
                break;
            }
            let payload = match check_batch(&bytes[at..]) {
                Ok(payload) => payload,
                Err(damage) => {
                    let torn = is_last && !acked(at) && valid_frame_after(&bytes, at).is_none();
                    summary.end = if torn {
                        LogEnd::Unfinished {
                            segment: path.clone(),
                            offset: at as u64,
                            damage,
                        }
                    } else {
                        damaged_at(&path, here(at), judged(damage, here(at), acknowledged))
                    };
                    return Ok(summary);
                }
            };
            summary.frames += 1;
            let frame = at as u64;
            let payload_start = frame + BATCH_HEADER_LEN as u64;
            let records = match split_records(payload) {
                Ok(records) => records,
                Err((offset, what)) => {
                    summary.end = damaged(&path, payload_start + offset as u64, what);
                    return Ok(summary);
                }
            };
            for record in records {
                let position = LogPosition {
                    segment: no,
                    frame,
                    record: payload_start + record.offset as u64,
                };
                match record.tag {
                    TAG_EVENT => match decode_event(&record.body, None) {
                        Ok((event, body)) => {
                            summary.events += 1;
                            visit(Scanned::Event {
                                event,
                                body,
                                at: position,
                            });
                        }
                        Err(what) => {
                            summary.end = damaged(&path, position.record, what);
                            return Ok(summary);
                        }
                    },
                    TAG_BLOB => match decode_blob(&record.body) {
                        Ok((address, content)) => {
                            summary.blobs += 1;
                            visit(Scanned::Blob {
                                address,
                                content,
                                at: position,
                            });
                        }
                        Err(what) => {
                            summary.end = damaged(&path, position.record, what.to_owned());
                            return Ok(summary);
                        }
                    },
                    other => {
                        summary.end = damaged(
                            &path,
                            position.record,
                            format!("unknown record tag {other}"),
                        );
                        return Ok(summary);
                    }
                }
            }
            at += BATCH_HEADER_LEN + payload.len();
        }
        end = here(at);
    }
    if let Some((path, damage)) = listed.gap {
        summary.end = LogEnd::Damaged {
            segment: path,
            offset: 0,
            damage,
            streams_after: Vec::new(),
        };
    } else if let Some(a) = acknowledged.filter(|a| end < *a) {
        summary.end = damaged_at(
            &segment_path(&log_dir, end.segment),
            end,
            Damage::AcknowledgedMissing {
                segment: a.segment,
                offset: a.offset,
            },
        );
    }
    Ok(summary)
}

/// A record that does not decode, inside a sound batch frame. Streams after it are not
/// looked for: a frame whose checksum holds was written so, not damaged since.
fn damaged(path: &Path, offset: u64, what: String) -> LogEnd {
    LogEnd::Damaged {
        segment: path.to_path_buf(),
        offset,
        damage: Damage::BadRecord(what),
        streams_after: Vec::new(),
    }
}

/// The marker must be there and name this format; nothing is created when it is not.
fn check_marker(dir: &Path) -> Result<(), ScanError> {
    let marker = dir.join(MARKER);
    let bytes = match fs::read(&marker) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ScanError::NotAStore(dir.to_path_buf()));
        }
        Err(e) => return Err(io_err("reading marker", &marker)(e).into()),
    };
    marker_version(&marker, &bytes)?;
    Ok(())
}

/// The segments of `log_dir`; a missing log directory is a [`ScanError::BadLayout`].
fn list_segments(log_dir: &Path) -> Result<Segments, ScanError> {
    if !log_dir.is_dir() {
        return Err(ScanError::BadLayout {
            path: log_dir.to_path_buf(),
            why: "the log directory is missing".to_owned(),
        });
    }
    Ok(crate::recovery::list_segments(log_dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime};

    fn event(n: u8) -> NewEvent {
        NewEvent {
            kind: "note".into(),
            kind_version: 1,
            recorded_at: WallTime(i64::from(n)),
            policy: None,
            payload: vec![n; 10],
        }
    }

    fn tree_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push((p.clone(), fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        out
    }

    #[tokio::test]
    async fn scans_while_open_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
            .await
            .unwrap();
        let s = StreamId::new("run-1").unwrap();
        store.append(&s, 0, vec![event(1), event(2)]).await.unwrap();
        store.put_blob(vec![9; 100]).await.unwrap();
        store.append(&s, 2, vec![event(3)]).await.unwrap();
        let log_before = tree_bytes(&dir.path().join("log"));
        let mut seen = Vec::new();
        let mut blobs = 0;
        let summary = scan_log(dir.path(), |r| match r {
            Scanned::Event { event, body, .. } => {
                assert_eq!(crate::chain::event_hash(&event.prev, body), event.hash);
                seen.push(event.seq);
            }
            Scanned::Blob {
                address, content, ..
            } => {
                assert_eq!(crate::chain::blob_hash(content), address);
                blobs += 1;
            }
        })
        .unwrap();
        assert_eq!(seen, vec![1, 2, 3]);
        assert_eq!(blobs, 1);
        assert_eq!(summary.end, LogEnd::Clean);
        assert_eq!(tree_bytes(&dir.path().join("log")), log_before);
    }

    #[tokio::test]
    async fn a_torn_tail_is_reported_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
                .await
                .unwrap();
            let s = StreamId::new("run-1").unwrap();
            store.append(&s, 0, vec![event(1)]).await.unwrap();
            store.append(&s, 1, vec![event(2)]).await.unwrap();
        }
        let seg = segment_path(&dir.path().join("log"), 1);
        let original = fs::read(&seg).unwrap();
        // Cut the last frame short (and the runway after it).
        let end = original.iter().rposition(|&b| b != 0).unwrap() + 1;
        let cut = original[..end - 20].to_vec();
        fs::write(&seg, &cut).unwrap();
        // As a crash leaves it: the batch was never acknowledged, so the acknowledged end
        // (FORMAT.md §15) does not cover it.
        fs::remove_file(dir.path().join(crate::acknowledged::ACKNOWLEDGED_FILE)).unwrap();
        let mut seen = Vec::new();
        let summary = scan_log(dir.path(), |r| {
            if let Scanned::Event { event, .. } = r {
                seen.push(event.seq);
            }
        })
        .unwrap();
        assert_eq!(seen, vec![1]);
        assert!(
            matches!(summary.end, LogEnd::Unfinished { .. }),
            "{summary:?}"
        );
        assert_eq!(fs::read(&seg).unwrap(), cut, "the scan must not repair");
        // Damage in the first frame with a valid frame after it is not a torn tail.
        let mut damaged = original.clone();
        damaged[SEGMENT_HEADER_LEN as usize + BATCH_HEADER_LEN + 6] ^= 0xff;
        fs::write(&seg, &damaged).unwrap();
        let summary = scan_log(dir.path(), |_| {}).unwrap();
        assert!(
            matches!(summary.end, LogEnd::Damaged { offset, .. } if offset == SEGMENT_HEADER_LEN),
            "{summary:?}"
        );
        assert_eq!(fs::read(&seg).unwrap(), damaged);
    }

    #[test]
    fn a_missing_directory_is_an_error_and_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        assert!(matches!(
            scan_log(&missing, |_| {}),
            Err(ScanError::NoDirectory(_))
        ));
        assert!(!missing.exists());
        assert!(matches!(
            scan_log(dir.path(), |_| {}),
            Err(ScanError::NotAStore(_))
        ));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
