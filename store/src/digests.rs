//! Stream digests as a file beside the log (FORMAT.md §14): `digests`.
//!
//! A digest is a caller's summary of a stream up to an event (docket's run summaries), kept
//! so that listing a hundred thousand runs does not fold every run's log. They live outside
//! the sled index so that a reader that may not open the index (a read-only view: `docket
//! runs` while `docket serve` drives runs) reads them too. Like snapshots they are a cache,
//! never a record: entries are appended without a sync, a torn or altered entry ends the
//! file for its reader, and every entry is believed only once the stream's event at its
//! sequence has its hash (the runtime checks, `api::StreamDigest`).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::api::StreamDigest;
use crate::error::{StoreError, io_err};
use crate::event::{Hash, StreamId};

/// The file under a store's root.
pub(crate) const DIGESTS_FILE: &str = "digests";
const MAGIC: &[u8; 4] = b"DKDG";
/// The version of the layout below (not of the digests' bytes).
const FILE_FORMAT: u32 = 1;
const HEADER: usize = 8;
/// Bytes of the BLAKE3 of an entry's body that follow it.
const CHECK: usize = 16;

/// The digests file of the store at `root`, as its one writer appends to it.
#[derive(Debug)]
pub(crate) struct DigestsFile {
    path: PathBuf,
    /// Open for appending once written to; closed when the file is rewritten.
    file: Option<fs::File>,
    /// Entries in the file, and streams they named when it was last read: when entries pass
    /// twice the streams (and a floor), the file is rewritten with each stream's latest only.
    entries: usize,
    streams: usize,
}

impl DigestsFile {
    /// Opens the file for appending, reading what it holds to know its size. A torn tail
    /// (an append a crash cut short) is cut, and a file that is not a digests file of this
    /// format is removed, so that what is appended next is read.
    pub(crate) fn open(root: &Path) -> Self {
        let path = root.join(DIGESTS_FILE);
        let read = read_entries(&path);
        let cut = match read.sound {
            Sound::Absent => Ok(()),
            Sound::Foreign => fs::remove_file(&path),
            Sound::Upto(len) => fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| {
                    if f.metadata()?.len() > len {
                        f.set_len(len)
                    } else {
                        Ok(())
                    }
                }),
        };
        if let Err(e) = cut {
            tracing::warn!(path = %path.display(), error = %e, "stream digests could not be cut to their sound entries");
        }
        let (entries, latest) = (read.entries, read.latest);
        Self {
            path,
            file: None,
            entries,
            streams: latest.len(),
        }
    }

    /// Appends `digests`, rewriting the file first when most of it is superseded.
    pub(crate) fn append(&mut self, digests: &[StreamDigest]) -> Result<(), StoreError> {
        if self.entries + digests.len() > 2 * self.streams + 4_096 {
            self.compact(digests)?;
            return Ok(());
        }
        let mut bytes = Vec::new();
        if self.file.is_none() && fs::metadata(&self.path).map_or(true, |m| m.len() < HEADER as u64)
        {
            bytes.extend_from_slice(&header());
        }
        for d in digests {
            entry(d, &mut bytes);
        }
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(
                fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)
                    .map_err(io_err("opening", &self.path))?,
            ),
        };
        file.write_all(&bytes)
            .map_err(io_err("appending to", &self.path))?;
        // Streams are counted again at the next compaction: so the file is rewritten each
        // time its entries about double, whether they repeat streams or name new ones.
        self.entries += digests.len();
        Ok(())
    }

    /// Rewrites the file with each stream's latest digest, `more` included, through a
    /// temporary file renamed into place (a reader holds the old file or the new one).
    fn compact(&mut self, more: &[StreamDigest]) -> Result<(), StoreError> {
        let mut latest = read_entries(&self.path).latest;
        for d in more {
            latest.insert(d.stream.clone(), d.clone());
        }
        let mut bytes = header().to_vec();
        for d in latest.values() {
            entry(d, &mut bytes);
        }
        self.file = None;
        let tmp = self.path.with_extension("tmp");
        fs::write(&tmp, &bytes).map_err(io_err("writing", &tmp))?;
        fs::rename(&tmp, &self.path).map_err(io_err("renaming into place", &self.path))?;
        self.entries = latest.len();
        self.streams = latest.len();
        Ok(())
    }
}

/// Every stream's latest digest in the file of the store at `root`, in stream id order;
/// none when there is no file. Reading stops at the first entry cut short or whose check
/// fails (a torn append, or an altered file), with a warning: what follows is not believed.
pub(crate) fn latest(root: &Path) -> BTreeMap<StreamId, StreamDigest> {
    read_entries(&root.join(DIGESTS_FILE)).latest
}

/// What a read of the file found.
struct Read {
    entries: usize,
    latest: BTreeMap<StreamId, StreamDigest>,
    sound: Sound,
}

/// How much of the file is sound.
enum Sound {
    Absent,
    /// Not a digests file of this format (or unreadable).
    Foreign,
    /// Its first bytes, up to the first entry cut short or failing its check.
    Upto(u64),
}

fn header() -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(MAGIC);
    h[4..].copy_from_slice(&FILE_FORMAT.to_le_bytes());
    h
}

/// One entry: the body's length (u32 LE), the body, the first 16 bytes of its BLAKE3. The
/// body: the stream id's length (u32 LE) and bytes, seq (u64 LE), the event hash, the
/// digest's bytes.
fn entry(d: &StreamDigest, out: &mut Vec<u8>) {
    let id = d.stream.as_str().as_bytes();
    let mut body = Vec::with_capacity(4 + id.len() + 8 + 32 + d.bytes.len());
    body.extend_from_slice(&u32::try_from(id.len()).unwrap_or(u32::MAX).to_le_bytes());
    body.extend_from_slice(id);
    body.extend_from_slice(&d.seq.to_le_bytes());
    body.extend_from_slice(&d.event_hash.0);
    body.extend_from_slice(&d.bytes);
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&blake3::hash(&body).as_bytes()[..CHECK]);
}

fn read_entries(path: &Path) -> Read {
    let mut latest = BTreeMap::new();
    let nothing = |sound| Read {
        entries: 0,
        latest: BTreeMap::new(),
        sound,
    };
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return nothing(Sound::Absent),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "stream digests not read; runs are read from the log");
            return nothing(Sound::Foreign);
        }
    };
    if bytes.len() < HEADER || bytes[..HEADER] != header() {
        tracing::warn!(path = %path.display(), "not a docket digests file of format {FILE_FORMAT}; runs are read from the log");
        return nothing(Sound::Foreign);
    }
    let mut at = HEADER;
    let mut entries = 0;
    while at < bytes.len() {
        match parse(&bytes[at..]) {
            Some((d, used)) => {
                latest.insert(d.stream.clone(), d);
                entries += 1;
                at += used;
            }
            None => {
                tracing::warn!(path = %path.display(), offset = at, "stream digests end in a torn or altered entry; the runs it named are read from the log");
                break;
            }
        }
    }
    Read {
        entries,
        latest,
        sound: Sound::Upto(at as u64),
    }
}

/// The entry at the start of `bytes` and its length, if it is whole and checks.
fn parse(bytes: &[u8]) -> Option<(StreamDigest, usize)> {
    let len = usize::try_from(u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?)).ok()?;
    let body = bytes.get(4..4 + len)?;
    let check = bytes.get(4 + len..4 + len + CHECK)?;
    if blake3::hash(body).as_bytes()[..CHECK] != *check {
        return None;
    }
    let id_len = usize::try_from(u32::from_le_bytes(body.get(..4)?.try_into().ok()?)).ok()?;
    let id = std::str::from_utf8(body.get(4..4 + id_len)?).ok()?;
    let rest = body.get(4 + id_len..)?;
    let seq = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let event_hash = Hash(rest.get(8..40)?.try_into().ok()?);
    let digest = StreamDigest {
        stream: StreamId::new(id).ok()?,
        seq,
        event_hash,
        bytes: rest.get(40..)?.to_vec(),
    };
    Some((digest, 4 + len + CHECK))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(stream: &str, seq: u64, bytes: &[u8]) -> StreamDigest {
        StreamDigest {
            stream: StreamId::new(stream).unwrap(),
            seq,
            event_hash: Hash([u8::try_from(seq % 256).unwrap(); 32]),
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn the_latest_digest_of_each_stream_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = DigestsFile::open(dir.path());
        file.append(&[digest("a", 1, b"one"), digest("b", 2, b"two")])
            .unwrap();
        file.append(&[digest("a", 3, b"three")]).unwrap();
        let read = latest(dir.path());
        assert_eq!(read.len(), 2);
        assert_eq!(read[&StreamId::new("a").unwrap()], digest("a", 3, b"three"));
        assert_eq!(read[&StreamId::new("b").unwrap()], digest("b", 2, b"two"));
        // Reopened, it appends after what is there.
        let mut file = DigestsFile::open(dir.path());
        file.append(&[digest("c", 1, b"")]).unwrap();
        assert_eq!(latest(dir.path()).len(), 3);
    }

    #[test]
    fn a_torn_or_altered_entry_ends_what_is_believed() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = DigestsFile::open(dir.path());
        file.append(&[digest("a", 1, b"one"), digest("b", 2, b"two")])
            .unwrap();
        let path = dir.path().join(DIGESTS_FILE);
        let whole = fs::read(&path).unwrap();
        // Torn: the second entry cut short.
        fs::write(&path, &whole[..whole.len() - 3]).unwrap();
        let read = latest(dir.path());
        assert_eq!(read.keys().map(StreamId::as_str).collect::<Vec<_>>(), ["a"]);
        // The next writer cuts the torn entry, so what it appends is read.
        DigestsFile::open(dir.path())
            .append(&[digest("c", 1, b"")])
            .unwrap();
        let read = latest(dir.path());
        assert_eq!(
            read.keys().map(StreamId::as_str).collect::<Vec<_>>(),
            ["a", "c"]
        );
        // Altered: a byte of the first entry's digest changed.
        let mut altered = whole.clone();
        let at = HEADER + 4 + 4 + 1 + 8 + 32;
        altered[at] ^= 1;
        fs::write(&path, &altered).unwrap();
        assert!(latest(dir.path()).is_empty());
        // Not a digests file at all: the next writer starts it again.
        fs::write(&path, b"something else").unwrap();
        assert!(latest(dir.path()).is_empty());
        DigestsFile::open(dir.path())
            .append(&[digest("d", 1, b"")])
            .unwrap();
        assert_eq!(latest(dir.path()).len(), 1);
    }

    #[test]
    fn a_file_mostly_superseded_is_rewritten_with_the_latest_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = DigestsFile::open(dir.path());
        for seq in 1..=5_000u64 {
            file.append(&[digest("a", seq, b"x"), digest("b", seq, b"y")])
                .unwrap();
        }
        let read = latest(dir.path());
        assert_eq!(read[&StreamId::new("a").unwrap()].seq, 5_000);
        assert_eq!(read[&StreamId::new("b").unwrap()].seq, 5_000);
        let size = fs::metadata(dir.path().join(DIGESTS_FILE)).unwrap().len();
        assert!(
            size < 4_200 * 100,
            "10,000 entries for 2 streams stay bounded: {size} bytes"
        );
    }
}
