//! Snapshots as files beside the log (FORMAT.md §12): `snapshots/<stream>/<seq>.snap`.
//!
//! They live outside the sled index so that a reader that may not open the index (a
//! read-only view, `docket verify`, FORMAT.md §10) can read them too. A snapshot is a cache
//! of the log, never a record: written to a temporary file and renamed into place (never
//! synced: one lost in a crash is only a cache lost), checksummed so that a torn or altered
//! file is refused rather than believed, and pruned so that a long run keeps a bounded
//! number of them.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::api::Snapshot;
use crate::error::{StoreError, io_err};
use crate::event::{Hash, StreamId};

/// The directory under a store's root that holds every stream's snapshots.
pub(crate) const SNAPSHOTS_DIR: &str = "snapshots";
const MAGIC: &[u8; 4] = b"DKSF";
/// The version of the file layout below (not of the state inside it).
const FILE_FORMAT: u32 = 1;
const SUFFIX: &str = ".snap";

/// How many of a stream's latest snapshots are kept; older ones are removed when a new one
/// is written, except the first at or after each power of two of sequence, so that
/// inspecting an early point of a long run still starts near it (at most one file per
/// doubling of the run: about 20 for a million events).
pub const KEEP_LATEST_SNAPSHOTS: usize = 3;

/// Why a snapshot file was not believed. Every case means the same to a reader: use an
/// older snapshot or fold the log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotFileError {
    #[error("{path}: cannot be read: {message}")]
    Unreadable { path: PathBuf, message: String },
    #[error("{path}: not a docket snapshot file (it does not start with DKSF)")]
    NotASnapshot { path: PathBuf },
    #[error("{path}: snapshot file format {found}; this build reads format {FILE_FORMAT}")]
    OtherFormat { path: PathBuf, found: u32 },
    #[error("{path}: the file is cut short or its checksum does not match: torn or altered")]
    Checksum { path: PathBuf },
    #[error("{path}: the file names stream {stream} at sequence {seq}, not where it lies")]
    Misplaced {
        path: PathBuf,
        stream: String,
        seq: u64,
    },
}

/// One snapshot file as listed by [`snapshot_files`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFile {
    /// The stream it belongs to, as its directory names it.
    pub stream: StreamId,
    /// The sequence its state was folded up to.
    pub seq: u64,
    /// Where it is.
    pub path: PathBuf,
}

/// A stream's directory name: its id with every byte outside `[A-Za-z0-9._-]` (and a
/// leading `.`) written as `%XX`, so a run id is its own directory's name; an id whose name would be longer than 200 bytes is named by
/// `~` and the hex BLAKE3 of the id instead (the file itself names the stream).
fn dir_name(stream: &StreamId) -> String {
    let mut out = String::new();
    for (i, b) in stream.as_str().bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.len() > 200 {
        format!("~{}", blake3::hash(stream.as_str().as_bytes()).to_hex())
    } else {
        out
    }
}

/// The stream a directory name stands for, when it is an escaped id (not a hashed one).
fn stream_of(name: &str) -> Option<StreamId> {
    if name.starts_with('~') {
        return None;
    }
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    StreamId::new(String::from_utf8(out).ok()?).ok()
}

fn stream_dir(root: &Path, stream: &StreamId) -> PathBuf {
    root.join(SNAPSHOTS_DIR).join(dir_name(stream))
}

fn file_name(seq: u64) -> String {
    format!("{seq:020}{SUFFIX}")
}

fn seq_of(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The file's bytes: magic, format, seq, event hash, stream id, state, then the BLAKE3 of
/// everything before it.
fn encode(stream: &StreamId, seq: u64, event_hash: &Hash, state: &[u8]) -> Vec<u8> {
    let id = stream.as_str().as_bytes();
    let mut out = Vec::with_capacity(4 + 4 + 8 + 32 + 4 + id.len() + 8 + state.len() + 32);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FILE_FORMAT.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&event_hash.0);
    out.extend_from_slice(&(id.len() as u32).to_le_bytes());
    out.extend_from_slice(id);
    out.extend_from_slice(&(state.len() as u64).to_le_bytes());
    out.extend_from_slice(state);
    let sum = blake3::hash(&out);
    out.extend_from_slice(sum.as_bytes());
    out
}

/// Reads the snapshot file at `path`, checking its checksum and that it names the stream
/// and sequence `expected` (when given) says it lies at.
///
/// # Errors
/// [`SnapshotFileError`] naming the file and what is wrong with it.
pub fn read_snapshot_file(
    path: &Path,
    expected: Option<(&StreamId, u64)>,
) -> Result<Snapshot, SnapshotFileError> {
    let bytes = fs::read(path).map_err(|e| SnapshotFileError::Unreadable {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    decode(path, &bytes, expected)
}

fn decode(
    path: &Path,
    bytes: &[u8],
    expected: Option<(&StreamId, u64)>,
) -> Result<Snapshot, SnapshotFileError> {
    let torn = || SnapshotFileError::Checksum {
        path: path.to_path_buf(),
    };
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(SnapshotFileError::NotASnapshot {
            path: path.to_path_buf(),
        });
    }
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
    };
    let format = u32_at(4).ok_or_else(torn)?;
    if format != FILE_FORMAT {
        return Err(SnapshotFileError::OtherFormat {
            path: path.to_path_buf(),
            found: format,
        });
    }
    let (content, sum) = bytes
        .split_at_checked(bytes.len().saturating_sub(32))
        .ok_or_else(torn)?;
    if content.len() < 56 || blake3::hash(content).as_bytes() != sum {
        return Err(torn());
    }
    let seq = u64_at(8).ok_or_else(torn)?;
    let mut hash = [0u8; 32];
    hash.copy_from_slice(content.get(16..48).ok_or_else(torn)?);
    let id_len = u32_at(48).ok_or_else(torn)? as usize;
    let id = content.get(52..52 + id_len).ok_or_else(torn)?;
    let state_at = 52 + id_len;
    let state_len = u64_at(state_at).ok_or_else(torn)? as usize;
    let state = content
        .get(state_at + 8..)
        .filter(|s| s.len() == state_len)
        .ok_or_else(torn)?;
    let stream = std::str::from_utf8(id)
        .ok()
        .and_then(|s| StreamId::new(s).ok())
        .ok_or_else(torn)?;
    if let Some((want, at)) = expected
        && (want != &stream || at != seq)
    {
        return Err(SnapshotFileError::Misplaced {
            path: path.to_path_buf(),
            stream: stream.as_str().to_owned(),
            seq,
        });
    }
    Ok(Snapshot {
        stream,
        seq,
        event_hash: Hash(hash),
        state: state.to_vec(),
    })
}

/// The sequences of a stream's snapshot files, ascending (none when it has no directory).
fn sequences(dir: &Path) -> Result<Vec<u64>, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("listing snapshots in", dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err("listing snapshots in", dir))?;
        if let Some(seq) = entry.file_name().to_str().and_then(seq_of) {
            out.push(seq);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Writes a snapshot of `stream` at `seq` under the store root `root` (a temporary file
/// renamed into place), then prunes the stream's older snapshots.
pub(crate) fn write(
    root: &Path,
    stream: &StreamId,
    seq: u64,
    event_hash: &Hash,
    state: &[u8],
) -> Result<(), StoreError> {
    let dir = stream_dir(root, stream);
    fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    let path = dir.join(file_name(seq));
    let tmp = dir.join(format!("{}.tmp", file_name(seq)));
    let mut file = fs::File::create(&tmp).map_err(io_err("creating", &tmp))?;
    file.write_all(&encode(stream, seq, event_hash, state))
        .map_err(io_err("writing", &tmp))?;
    drop(file);
    fs::rename(&tmp, &path).map_err(io_err("renaming into place", &path))?;
    prune(&dir)
}

/// Which of the snapshots at `seqs` (ascending) pruning keeps: the latest
/// [`KEEP_LATEST_SNAPSHOTS`], and the first at or after each power of two.
pub fn kept_snapshots(seqs: &[u64]) -> Vec<u64> {
    let latest = seqs.len().saturating_sub(KEEP_LATEST_SNAPSHOTS);
    let mut out = Vec::new();
    let mut octave = None;
    for (i, &seq) in seqs.iter().enumerate() {
        let this = 63 - seq.max(1).leading_zeros();
        if i >= latest || octave != Some(this) {
            out.push(seq);
        }
        octave = Some(this);
    }
    out
}

fn prune(dir: &Path) -> Result<(), StoreError> {
    let seqs = sequences(dir)?;
    let keep = kept_snapshots(&seqs);
    for seq in seqs.into_iter().filter(|s| !keep.contains(s)) {
        let path = dir.join(file_name(seq));
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("removing an old snapshot", &path)(e)),
        }
    }
    Ok(())
}

/// The latest readable snapshot of `stream` at or before `at_or_before`; an unreadable or
/// altered file is passed over (and named in the returned list of refusals) for the one
/// before it.
pub(crate) fn latest(
    root: &Path,
    stream: &StreamId,
    at_or_before: u64,
) -> Result<(Option<Snapshot>, Vec<SnapshotFileError>), StoreError> {
    let dir = stream_dir(root, stream);
    let mut refused = Vec::new();
    for seq in sequences(&dir)?.into_iter().rev() {
        if seq > at_or_before {
            continue;
        }
        match read_snapshot_file(&dir.join(file_name(seq)), Some((stream, seq))) {
            Ok(s) => return Ok((Some(s), refused)),
            Err(e) => refused.push(e),
        }
    }
    Ok((None, refused))
}

/// Removes every snapshot of `stream`; how many files were removed.
pub(crate) fn remove_all(root: &Path, stream: &StreamId) -> Result<u64, StoreError> {
    let dir = stream_dir(root, stream);
    let count = sequences(&dir)?.len() as u64;
    match fs::remove_dir_all(&dir) {
        Ok(()) => Ok(count),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io_err("removing the snapshots in", &dir)(e)),
    }
}

/// Every snapshot file in the store at `root`, by stream and sequence, reading nothing but
/// the directory listing (the files are read by [`read_snapshot_file`]). A directory
/// named by a hashed id is listed under the stream its newest file names.
///
/// # Errors
/// [`StoreError::Io`] when the snapshots directory cannot be listed.
pub fn snapshot_files(root: &Path) -> Result<Vec<SnapshotFile>, StoreError> {
    let top = root.join(SNAPSHOTS_DIR);
    let entries = match fs::read_dir(&top) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("listing", &top)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err("listing", &top))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let dir = entry.path();
        let seqs = sequences(&dir)?;
        let stream = match stream_of(&name) {
            Some(s) => s,
            None => match seqs
                .last()
                .and_then(|s| read_snapshot_file(&dir.join(file_name(*s)), None).ok())
            {
                Some(s) => s.stream,
                None => continue,
            },
        };
        for seq in seqs {
            out.push(SnapshotFile {
                stream: stream.clone(),
                seq,
                path: dir.join(file_name(seq)),
            });
        }
    }
    out.sort_by(|a, b| (&a.stream, a.seq).cmp(&(&b.stream, b.seq)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(s: &str) -> StreamId {
        StreamId::new(s).unwrap()
    }

    #[test]
    fn a_stream_id_round_trips_through_its_directory_name() {
        for id in [
            "run-19a7c-2f3e",
            "a/b",
            "..",
            ".x",
            "é ü",
            "_circuits",
            "x%41",
            "r.1",
        ] {
            let name = dir_name(&sid(id));
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.%".contains(&b))
                    && !name.starts_with('.')
            );
            assert_eq!(stream_of(&name), Some(sid(id)), "{id} as {name}");
        }
        assert_eq!(dir_name(&sid("run-1.2")), "run-1.2");
        let long = "x/".repeat(100);
        assert!(dir_name(&sid(&long)).starts_with('~'));
    }

    #[test]
    fn a_file_reads_back_and_any_changed_byte_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let s = sid("run/1");
        write(dir.path(), &s, 7, &Hash([3; 32]), b"the state").unwrap();
        let (found, refused) = latest(dir.path(), &s, 9).unwrap();
        let found = found.unwrap();
        assert!(refused.is_empty());
        assert_eq!(
            (found.seq, found.event_hash, found.state.as_slice()),
            (7, Hash([3; 32]), &b"the state"[..])
        );
        let path = stream_dir(dir.path(), &s).join(file_name(7));
        let good = fs::read(&path).unwrap();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            assert!(decode(&path, &bad, Some((&s, 7))).is_err(), "byte {i}");
        }
        for cut in 0..good.len() {
            assert!(
                decode(&path, &good[..cut], Some((&s, 7))).is_err(),
                "cut {cut}"
            );
        }
        // A file copied to another sequence is refused there.
        fs::copy(&path, path.with_file_name(file_name(8))).unwrap();
        let (found, refused) = latest(dir.path(), &s, 8).unwrap();
        assert_eq!(found.unwrap().seq, 7);
        assert!(matches!(refused[..], [SnapshotFileError::Misplaced { .. }]));
    }

    #[test]
    fn pruning_keeps_the_latest_few_and_one_per_doubling() {
        let seqs: Vec<u64> = (1..=40).map(|i| i * 2048).collect();
        let kept = kept_snapshots(&seqs);
        // The latest three...
        assert!(kept.ends_with(&[38 * 2048, 39 * 2048, 40 * 2048]));
        // ...and the first at or after 2^11, 2^12, ... 2^16.
        assert_eq!(
            kept[..kept.len() - 3],
            [2048, 4096, 8192, 16_384, 32_768, 65_536]
        );
        let dir = tempfile::tempdir().unwrap();
        let s = sid("long");
        for seq in &seqs {
            write(dir.path(), &s, *seq, &Hash([0; 32]), b"s").unwrap();
        }
        let listed: Vec<u64> = snapshot_files(dir.path())
            .unwrap()
            .into_iter()
            .map(|f| f.seq)
            .collect();
        assert_eq!(listed, kept);
        assert_eq!(remove_all(dir.path(), &s).unwrap(), kept.len() as u64);
        assert!(snapshot_files(dir.path()).unwrap().is_empty());
    }
}
