//! Segment files: a 32-byte header, then batch frames, each holding the records of one group commit.
//!
//! A batch frame is `magic "DKTB" ‖ payload length u32 LE ‖ CRC-32 of payload u32 LE ‖ payload`.
//! The writer syncs a batch before it writes the next, so only the last frame of the last
//! segment can be torn; damage anywhere else is corruption. A durable log's last segment may
//! end in zero bytes (the runway, see `writer::RUNWAY`): a zero where a frame would start is
//! the end of the log.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
#[cfg(any(test, feature = "fault-injection"))]
use std::sync::Arc;

use crate::codec::{FORMAT_VERSION, readable_format};
use crate::error::{Damage, StoreError, io_err};
#[cfg(any(test, feature = "fault-injection"))]
use crate::fault::FaultPlan;

/// The kinds of file operation the log performs (what a fault plan counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileOp {
    Write,
    Sync,
    Truncate,
    Create,
}

pub(crate) const SEGMENT_MAGIC: &[u8; 8] = b"DOCKETLG";
pub(crate) const SEGMENT_HEADER_LEN: u64 = 32;
pub(crate) const BATCH_MAGIC: [u8; 4] = *b"DKTB";
pub(crate) const BATCH_HEADER_LEN: usize = 12;

pub(crate) fn segment_path(log_dir: &Path, no: u64) -> PathBuf {
    log_dir.join(format!("{no:020}.seg"))
}

/// Parses a segment file name (`<20 digits>.seg`).
pub(crate) fn segment_number(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `magic ‖ format u32 LE ‖ 0u32 ‖ segment number u64 LE ‖ CRC-32 of bytes 0..24 u32 LE ‖ 0u32`.
pub(crate) fn segment_header(no: u64) -> [u8; SEGMENT_HEADER_LEN as usize] {
    let mut h = [0u8; SEGMENT_HEADER_LEN as usize];
    h[..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&no.to_le_bytes());
    let crc = crc32fast::hash(&h[..24]);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h
}

fn le_u32(bytes: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[..4]);
    u32::from_le_bytes(b)
}

fn le_u64(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(b)
}

/// Checks a segment header: magic, format version, checksum, and the number its name promises.
pub(crate) fn check_segment_header(
    bytes: &[u8],
    named: u64,
    path: &Path,
) -> Result<(), StoreError> {
    let corrupt = |damage| StoreError::Corrupt {
        segment: path.to_path_buf(),
        offset: 0,
        damage: Box::new(damage),
        streams_after: Vec::new(),
    };
    if bytes.len() < SEGMENT_HEADER_LEN as usize {
        return Err(corrupt(Damage::BadSegmentHeader("shorter than 32 bytes")));
    }
    if &bytes[..8] != SEGMENT_MAGIC {
        return Err(corrupt(Damage::BadSegmentHeader("wrong magic")));
    }
    let crc = crc32fast::hash(&bytes[..24]);
    if crc != le_u32(&bytes[24..28]) {
        return Err(corrupt(Damage::BadSegmentHeader("checksum mismatch")));
    }
    if le_u32(&bytes[12..16]) != 0 || le_u32(&bytes[28..32]) != 0 {
        return Err(corrupt(Damage::BadSegmentHeader(
            "reserved bytes are not zero",
        )));
    }
    let version = le_u32(&bytes[8..12]);
    if !readable_format(version) {
        return Err(StoreError::UnsupportedFormat {
            path: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let found = le_u64(&bytes[16..24]);
    if found != named {
        return Err(corrupt(Damage::MisnumberedSegment { named, found }));
    }
    Ok(())
}

/// Fills in the 12-byte header of a batch frame whose payload follows it in `frame`.
pub(crate) fn seal_batch(frame: &mut [u8]) {
    let payload_len = u32::try_from(frame.len() - BATCH_HEADER_LEN).unwrap_or(u32::MAX);
    let crc = crc32fast::hash(&frame[BATCH_HEADER_LEN..]);
    frame[..4].copy_from_slice(&BATCH_MAGIC);
    frame[4..8].copy_from_slice(&payload_len.to_le_bytes());
    frame[8..12].copy_from_slice(&crc.to_le_bytes());
}

/// Checks the batch frame starting at `bytes[0]`; returns its payload.
pub(crate) fn check_batch(bytes: &[u8]) -> Result<&[u8], Damage> {
    if bytes.len() < BATCH_HEADER_LEN {
        return Err(Damage::TruncatedFrame {
            declared: BATCH_HEADER_LEN as u64,
            available: bytes.len() as u64,
        });
    }
    if bytes[..4] != BATCH_MAGIC {
        return Err(Damage::BadFrameMagic {
            found: u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
        });
    }
    let len = le_u32(&bytes[4..8]) as usize;
    let Some(payload) = bytes.get(BATCH_HEADER_LEN..BATCH_HEADER_LEN + len) else {
        return Err(Damage::TruncatedFrame {
            declared: len as u64,
            available: (bytes.len() - BATCH_HEADER_LEN) as u64,
        });
    };
    let stored = le_u32(&bytes[8..12]);
    let computed = crc32fast::hash(payload);
    if stored != computed {
        return Err(Damage::BadFrameChecksum { stored, computed });
    }
    Ok(payload)
}

/// Whether everything from `from` on is zero: the unused runway of a durable log's last
/// segment, not a torn batch (a batch frame starts with a non-zero magic).
pub(crate) fn zero_runway(bytes: &[u8], from: usize) -> bool {
    bytes
        .get(from..)
        .is_some_and(|rest| rest.iter().all(|&b| b == 0))
}

/// Whether any valid batch frame starts after `from` (then damage at `from` is not a torn tail).
pub(crate) fn valid_frame_after(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from + 1;
    while at + BATCH_HEADER_LEN <= bytes.len() {
        if bytes[at..at + 4] == BATCH_MAGIC && check_batch(&bytes[at..]).is_ok() {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// A segment file as the writer sees it: positioned writes, syncs, truncation, with optional faults.
pub(crate) struct LogFile {
    file: File,
    pub(crate) path: PathBuf,
    #[cfg(any(test, feature = "fault-injection"))]
    faults: Option<Arc<FaultPlan>>,
}

#[cfg(any(test, feature = "fault-injection"))]
pub(crate) type Faults = Option<Arc<FaultPlan>>;
/// Without fault injection compiled in, there is nothing to inject.
#[cfg(not(any(test, feature = "fault-injection")))]
#[derive(Clone, Copy, Default)]
pub(crate) struct Faults;

impl LogFile {
    /// Opens an existing segment for appending.
    pub(crate) fn open(path: PathBuf, faults: &Faults) -> Result<LogFile, StoreError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err("opening segment", &path))?;
        #[cfg(not(any(test, feature = "fault-injection")))]
        let _ = faults;
        Ok(LogFile {
            file,
            path,
            #[cfg(any(test, feature = "fault-injection"))]
            faults: faults.clone(),
        })
    }

    /// Creates a new segment with its header, synced together with its directory entry.
    pub(crate) fn create(
        log_dir: &Path,
        no: u64,
        faults: &Faults,
        sync: bool,
    ) -> Result<LogFile, StoreError> {
        let path = segment_path(log_dir, no);
        #[cfg(any(test, feature = "fault-injection"))]
        if let Some(plan) = faults {
            plan.before(FileOp::Create)
                .map_err(io_err("creating segment", &path))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err("creating segment", &path))?;
        #[cfg(not(any(test, feature = "fault-injection")))]
        let _ = faults;
        let log = LogFile {
            file,
            path,
            #[cfg(any(test, feature = "fault-injection"))]
            faults: faults.clone(),
        };
        log.write_at(0, &segment_header(no))?;
        if sync {
            log.sync()?;
            sync_dir(log_dir)?;
        }
        Ok(log)
    }

    fn fault(&self, op: FileOp) -> io::Result<()> {
        #[cfg(any(test, feature = "fault-injection"))]
        if let Some(plan) = &self.faults {
            return plan.before(op);
        }
        let _ = op;
        Ok(())
    }

    pub(crate) fn write_at(&self, offset: u64, bytes: &[u8]) -> Result<(), StoreError> {
        if let Err(e) = self.fault(FileOp::Write) {
            // A failing write may still have put some bytes down, as a torn write does.
            let _ = self.file.write_all_at(&bytes[..bytes.len() / 2], offset);
            return Err(io_err("writing segment", &self.path)(e));
        }
        self.file
            .write_all_at(bytes, offset)
            .map_err(io_err("writing segment", &self.path))
    }

    /// `fdatasync`: the batch's bytes and the file length reach stable storage.
    pub(crate) fn sync(&self) -> Result<(), StoreError> {
        self.fault(FileOp::Sync)
            .map_err(io_err("syncing segment", &self.path))?;
        self.file
            .sync_data()
            .map_err(io_err("syncing segment", &self.path))
    }

    /// Writes `len` zero bytes at `offset`: the runway a durable log overwrites in place (see
    /// `writer::RUNWAY`).
    pub(crate) fn write_zeros(&self, offset: u64, len: u64) -> Result<(), StoreError> {
        self.write_at(offset, &vec![0u8; len as usize])
    }

    pub(crate) fn truncate(&self, len: u64) -> Result<(), StoreError> {
        self.fault(FileOp::Truncate)
            .map_err(io_err("truncating segment", &self.path))?;
        self.file
            .set_len(len)
            .map_err(io_err("truncating segment", &self.path))
    }
}

/// Makes a directory entry (a new segment, the marker) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("syncing directory", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_checks() {
        let p = Path::new("x.seg");
        let h = segment_header(7);
        assert!(check_segment_header(&h, 7, p).is_ok());
        assert!(matches!(
            check_segment_header(&h, 8, p),
            Err(StoreError::Corrupt {
                damage,
                ..
            }) if *damage == Damage::MisnumberedSegment { named: 8, found: 7 }
        ));
        let mut future = h;
        future[8..12].copy_from_slice(&4u32.to_le_bytes());
        let crc = crc32fast::hash(&future[..24]);
        future[24..28].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            check_segment_header(&future, 7, p),
            Err(StoreError::UnsupportedFormat {
                found: 4,
                supported: 3,
                ..
            })
        ));
        let mut flipped = h;
        flipped[17] ^= 1;
        assert!(check_segment_header(&flipped, 7, p).is_err());
        assert_eq!(segment_number("00000000000000000007.seg"), Some(7));
        assert_eq!(segment_number("7.seg"), None);
        assert_eq!(segment_number("notes.txt"), None);
    }

    #[test]
    fn batch_frames_detect_damage_and_resync() {
        let mut frame = vec![0u8; BATCH_HEADER_LEN];
        frame.extend_from_slice(b"hello records");
        seal_batch(&mut frame);
        assert_eq!(check_batch(&frame), Ok(&b"hello records"[..]));
        let mut two = frame.clone();
        two.extend_from_slice(&frame);
        let mut bad = two.clone();
        bad[14] ^= 0xff;
        assert!(matches!(
            check_batch(&bad),
            Err(Damage::BadFrameChecksum { .. })
        ));
        assert_eq!(valid_frame_after(&bad, 0), Some(frame.len()));
        assert!(matches!(
            check_batch(&frame[..frame.len() - 1]),
            Err(Damage::TruncatedFrame { .. })
        ));
        assert_eq!(valid_frame_after(&frame[..frame.len() - 1], 0), None);
    }
}
