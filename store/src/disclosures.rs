//! Disclosures kept outside the log (FORMAT.md §13): the values docket's payload
//! encoding 3 commits to by digest. The log holds only the digests, so these files can be
//! rewritten to erase a value (`docket shred`) without touching a hashed byte.
//!
//! One file per stream, `disclosures/<stream, percent-encoded>`: a header, then records
//! `tag (1) ‖ digest (32) ‖ length (u32 LE) ‖ bytes ‖ CRC-32 of the preceding fields`;
//! tag 1 is a disclosure, tag 2 the tombstone of an erased one (its bytes: who, when,
//! why). A record that is cut short or fails its CRC ends the file: the torn tail of a
//! write that was never acknowledged.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{StoreError, io_err};

/// The file header: magic and version.
const HEADER: &[u8; 8] = b"DKTD\x01\0\0\0";
const TAG_DISCLOSURE: u8 = 1;
const TAG_TOMBSTONE: u8 = 2;

/// What a stream's disclosure file holds for a digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredDisclosure {
    /// The disclosure's bytes.
    Present(Vec<u8>),
    /// Erased; the tombstone's note (who, when, why).
    Shredded(Vec<u8>),
}

/// A stream's disclosures by digest (a tombstone wins over the disclosure it erased).
pub type Disclosures = BTreeMap<[u8; 32], StoredDisclosure>;

/// The directory of the disclosure files.
pub(crate) fn dir_of(store: &Path) -> PathBuf {
    store.join("disclosures")
}

/// The file of `stream`: its id with every byte outside `[A-Za-z0-9._-]` as `%XX`.
pub(crate) fn file_of(store: &Path, stream: &str) -> PathBuf {
    let mut name = String::with_capacity(stream.len());
    for b in stream.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-') || (b == b'.' && !name.is_empty())
        {
            name.push(b as char);
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    dir_of(store).join(name)
}

/// The disclosures kept for `stream` in the data directory `store`, read without opening
/// the store (as `docket verify` reads the log): tombstones included, a torn tail ignored.
///
/// # Errors
/// [`StoreError::Io`] when the file exists but cannot be read.
pub fn read_disclosures(store: &Path, stream: &str) -> Result<Disclosures, StoreError> {
    read(&file_of(store, stream)).map(|(d, _)| d)
}

/// Reads `path`: the disclosures, and the length of its sound prefix (0: no file).
pub(crate) fn read(path: &Path) -> Result<(Disclosures, u64), StoreError> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)
                .map_err(io_err("reading disclosures", path))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((BTreeMap::new(), 0)),
        Err(e) => return Err(io_err("opening disclosures", path)(e)),
    }
    let mut out = BTreeMap::new();
    if bytes.get(..HEADER.len()) != Some(HEADER.as_slice()) {
        return Ok((out, 0));
    }
    let mut at = HEADER.len();
    while let Some((tag, digest, body, next)) = record_at(&bytes, at) {
        match tag {
            TAG_DISCLOSURE => {
                out.entry(digest)
                    .or_insert_with(|| StoredDisclosure::Present(body.to_vec()));
            }
            _ => {
                out.insert(digest, StoredDisclosure::Shredded(body.to_vec()));
            }
        }
        at = next;
    }
    Ok((out, at as u64))
}

/// The record at `at`, if whole and sound.
fn record_at(bytes: &[u8], at: usize) -> Option<(u8, [u8; 32], &[u8], usize)> {
    let tag = *bytes.get(at)?;
    if tag != TAG_DISCLOSURE && tag != TAG_TOMBSTONE {
        return None;
    }
    let digest: [u8; 32] = bytes.get(at + 1..at + 33)?.try_into().ok()?;
    let len = u32::from_le_bytes(bytes.get(at + 33..at + 37)?.try_into().ok()?) as usize;
    let end = (at + 37).checked_add(len)?;
    let body = bytes.get(at + 37..end)?;
    let crc = u32::from_le_bytes(bytes.get(end..end + 4)?.try_into().ok()?);
    (crc32fast::hash(&bytes[at..end]) == crc).then_some((tag, digest, body, end + 4))
}

fn encode(out: &mut Vec<u8>, tag: u8, digest: &[u8; 32], body: &[u8]) {
    let start = out.len();
    out.push(tag);
    out.extend_from_slice(digest);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Appends `records` to `path` after its sound prefix of `sound` bytes (a torn tail is cut
/// first), syncing when `sync`.
pub(crate) fn append(
    path: &Path,
    sound: u64,
    records: &[([u8; 32], Vec<u8>)],
    sync: bool,
) -> Result<u64, StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let fresh = sound == 0;
    if fresh {
        std::fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
    }
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(path)
        .map_err(io_err("opening disclosures", path))?;
    file.set_len(sound)
        .map_err(io_err("cutting the torn tail of", path))?;
    let mut bytes = Vec::new();
    if fresh {
        bytes.extend_from_slice(HEADER);
    }
    for (digest, body) in records {
        encode(&mut bytes, TAG_DISCLOSURE, digest, body);
    }
    use std::io::Seek;
    file.seek(std::io::SeekFrom::Start(sound))
        .map_err(io_err("writing disclosures", path))?;
    file.write_all(&bytes)
        .map_err(io_err("writing disclosures", path))?;
    if sync {
        file.sync_data()
            .map_err(io_err("syncing disclosures", path))?;
        if fresh {
            sync_dir(dir)?;
        }
    }
    Ok(sound + bytes.len() as u64)
}

/// Rewrites `path` without the disclosures of `digests`, a tombstone carrying `note` in
/// each one's place, through a new file renamed over the old one (always synced): after
/// it, no file of the store holds those disclosures.
pub(crate) fn shred(
    path: &Path,
    digests: &[[u8; 32]],
    note: &[u8],
) -> Result<(Disclosures, u64), StoreError> {
    let (current, _) = read(path)?;
    let mut bytes = HEADER.to_vec();
    for (digest, stored) in &current {
        match stored {
            StoredDisclosure::Present(body) if !digests.contains(digest) => {
                encode(&mut bytes, TAG_DISCLOSURE, digest, body);
            }
            StoredDisclosure::Present(_) => encode(&mut bytes, TAG_TOMBSTONE, digest, note),
            StoredDisclosure::Shredded(old) => encode(&mut bytes, TAG_TOMBSTONE, digest, old),
        }
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = path.with_extension("shredding");
    {
        let mut file = File::create(&tmp).map_err(io_err("creating", &tmp))?;
        file.write_all(&bytes).map_err(io_err("writing", &tmp))?;
        file.sync_all().map_err(io_err("syncing", &tmp))?;
    }
    std::fs::rename(&tmp, path).map_err(io_err("replacing", path))?;
    sync_dir(dir)?;
    read(path)
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("syncing the directory", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_a_torn_tail_is_cut_and_shredding_leaves_a_tombstone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file_of(dir.path(), "run/1");
        assert!(path.ends_with("run%2F1"));
        let len =
            append(&path, 0, &[([1; 32], b"[\"s\",\"a\",1]".to_vec())], true).expect("append");
        // A torn record after the sound prefix is ignored, then overwritten.
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(&[1, 2, 3]).expect("write");
        let (read_back, sound) = read(&path).expect("read");
        assert_eq!(sound, len);
        assert_eq!(read_back.len(), 1);
        append(&path, sound, &[([2; 32], b"secret value".to_vec())], false).expect("append");
        let (after, _) = shred(&path, &[[2; 32]], b"by dpo").expect("shred");
        assert_eq!(
            after.get(&[2; 32]),
            Some(&StoredDisclosure::Shredded(b"by dpo".to_vec()))
        );
        assert!(matches!(
            after.get(&[1; 32]),
            Some(StoredDisclosure::Present(_))
        ));
        let raw = std::fs::read(&path).expect("read");
        assert!(!raw.windows(6).any(|w| w == b"secret"));
    }
}
