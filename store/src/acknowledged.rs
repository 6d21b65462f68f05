//! The acknowledged end of the log (FORMAT.md §15): a 32-byte file beside the log naming a
//! position up to which every batch was acknowledged as durable.
//!
//! A crash can tear only a batch that was never acknowledged, so a damaged batch that ends
//! at or before this position is damage, never a torn write. The index knows the same (its
//! coverage), but readers that may not open the index (views, `verify`) and a writer whose
//! index was deleted need a witness of their own. The writer rewrites the file after each
//! index write, behind the acknowledgements, never on their path; it is not synced (after a
//! power loss it may lag: it then knows less, never more, than was acknowledged).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::error::{StoreError, io_err};

/// The file's name in the store's directory.
pub(crate) const ACKNOWLEDGED_FILE: &str = "acknowledged";
const MAGIC: &[u8; 4] = b"DKAK";
const VERSION: u32 = 1;
const LEN: usize = 32;

/// A position in the log: segment number, then byte offset in it (ordered that way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LogPoint {
    pub segment: u64,
    pub offset: u64,
}

fn encode(end: LogPoint) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[..4].copy_from_slice(MAGIC);
    b[4..8].copy_from_slice(&VERSION.to_le_bytes());
    b[8..16].copy_from_slice(&end.segment.to_le_bytes());
    b[16..24].copy_from_slice(&end.offset.to_le_bytes());
    let crc = crc32fast::hash(&b[..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode(b: &[u8]) -> Result<LogPoint, &'static str> {
    if b.len() != LEN {
        return Err("it is not 32 bytes long");
    }
    if &b[..4] != MAGIC {
        return Err("it does not start with DKAK");
    }
    let word = |r: std::ops::Range<usize>| {
        let mut w = [0u8; 8];
        w[..r.len()].copy_from_slice(&b[r]);
        u64::from_le_bytes(w)
    };
    if word(24..28) != u64::from(crc32fast::hash(&b[..24])) {
        return Err("its checksum does not match");
    }
    if word(4..8) != u64::from(VERSION) || word(28..32) != 0 {
        return Err("it is of a version this build does not read");
    }
    Ok(LogPoint {
        segment: word(8..16),
        offset: word(16..24),
    })
}

/// The acknowledged end recorded in the store at `dir`, if there is a sound one. A file that
/// is absent (a store written before it was kept) or unreadable says nothing; the second
/// with a warning.
pub(crate) fn read(dir: &Path) -> Option<LogPoint> {
    let path = dir.join(ACKNOWLEDGED_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            warn!(file = %path.display(), error = %e, "the acknowledged end of the log cannot be read; not used");
            return None;
        }
    };
    match decode(&bytes) {
        Ok(end) => Some(end),
        Err(why) => {
            warn!(file = %path.display(), %why, "the acknowledged end of the log is not sound; not used");
            None
        }
    }
}

/// The writer's handle on the file.
pub(crate) struct AcknowledgedFile {
    file: File,
    path: PathBuf,
}

impl AcknowledgedFile {
    /// Opens (creating it if need be) the file of the store at `dir` and records `end`.
    pub(crate) fn create(dir: &Path, end: LogPoint) -> Result<AcknowledgedFile, StoreError> {
        let path = dir.join(ACKNOWLEDGED_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err("opening", &path))?;
        let this = AcknowledgedFile { file, path };
        this.record(end)
            .and_then(|()| this.file.set_len(LEN as u64))
            .map_err(io_err(
                "writing the acknowledged end of the log to",
                &this.path,
            ))?;
        Ok(this)
    }

    /// Records that every batch up to `end` was acknowledged: one write of 32 bytes in place
    /// (a reader that catches it half written finds its checksum wrong and ignores it).
    pub(crate) fn record(&self, end: LogPoint) -> std::io::Result<()> {
        self.file.write_all_at(&encode(end), 0)
    }

    /// [`Self::record`], a failure logged: the file is a witness for readers, and a writer
    /// that cannot keep it loses nothing it acknowledged.
    pub(crate) fn record_or_warn(&self, end: LogPoint) {
        if let Err(e) = self.record(end) {
            warn!(file = %self.path.display(), error = %e, "cannot record the acknowledged end of the log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let end = LogPoint {
            segment: 3,
            offset: 4096,
        };
        let b = encode(end);
        assert_eq!(decode(&b), Ok(end));
        for i in 0..LEN {
            let mut bad = b;
            bad[i] ^= 0x10;
            assert!(decode(&bad).is_err(), "byte {i}");
        }
        assert!(decode(&b[..31]).is_err());
        assert!(
            LogPoint {
                segment: 2,
                offset: 9999
            } < end
        );
    }
}
