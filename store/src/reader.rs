//! Reading records back: neighbouring records are read with one positioned read.

use std::os::unix::fs::FileExt;

use crate::api::VerifyReport;
use crate::chain::blob_hash;
use crate::codec::{TAG_BLOB, decode_blob, parse_record};
use crate::error::{ChainBreak, Damage, StoreError, io_err};
use crate::event::{Event, Hash, Payload, StreamId};
use crate::index::Position;
use crate::segment::segment_path;
use crate::shared::Shared;

/// Events read per index scan: bounds the memory a read holds.
pub(crate) const READ_CHUNK: usize = 1024;
/// Largest span of neighbouring records fetched in one read.
const MAX_SPAN: u64 = 4 * 1024 * 1024;

/// Calls `f` with each record's bytes (or why they cannot be read), in the order given.
fn for_each_record(
    shared: &Shared,
    entries: &[(u64, Position)],
    mut f: impl FnMut(u64, Position, Result<&[u8], String>) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let mut i = 0;
    let mut buf = Vec::new();
    while i < entries.len() {
        let first = entries[i].1;
        let mut j = i + 1;
        let mut end = first.offset + u64::from(first.len);
        while j < entries.len() {
            let p = entries[j].1;
            let p_end = p.offset + u64::from(p.len);
            if p.segment != first.segment || p.offset < end || p_end - first.offset > MAX_SPAN {
                break;
            }
            end = p_end;
            j += 1;
        }
        let file = shared.segment_file(first.segment)?;
        buf.resize((end - first.offset) as usize, 0);
        let got = read_full_at(&file, &mut buf, first.offset).map_err(io_err(
            "reading segment",
            segment_path(&shared.log_dir, first.segment),
        ))?;
        for &(seq, pos) in &entries[i..j] {
            let rel = (pos.offset - first.offset) as usize;
            let rec_end = rel + pos.len as usize;
            let bytes = if rec_end <= got {
                Ok(&buf[rel..rec_end])
            } else {
                Err("the segment ends before this record".to_owned())
            };
            if !f(seq, pos, bytes)? {
                return Ok(());
            }
        }
        i = j;
    }
    Ok(())
}

/// Like `read_exact_at`, but returns how much was read when the file ends early.
fn read_full_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn corrupt(shared: &Shared, pos: Position, stream: &StreamId, break_: ChainBreak) -> StoreError {
    StoreError::Corrupt {
        segment: segment_path(&shared.log_dir, pos.segment),
        offset: pos.offset,
        damage: Box::new(Damage::Chain {
            stream: stream.clone(),
            break_,
        }),
    }
}

/// Reads and checks events `from..=to` of a stream, at most [`READ_CHUNK`]; `prev` is the hash
/// of event `from - 1` when known.
pub(crate) fn read_chunk(
    shared: &Shared,
    stream: &StreamId,
    no: u64,
    from: u64,
    to: u64,
    prev: Option<Hash>,
) -> Result<Vec<Event>, StoreError> {
    let mut out = Vec::new();
    match read_chunk_into(shared, stream, no, from, to, prev, &mut out) {
        Ok(()) => Ok(out),
        Err(e) => Err(e),
    }
}

/// [`read_chunk`], keeping in `out` the sound events read before any damage.
pub(crate) fn read_chunk_into(
    shared: &Shared,
    stream: &StreamId,
    no: u64,
    from: u64,
    to: u64,
    mut prev: Option<Hash>,
    out: &mut Vec<Event>,
) -> Result<(), StoreError> {
    let entries = shared.index.positions(no, from, to, READ_CHUNK)?;
    out.reserve(entries.len());
    let mut expected = from;
    let want = (to - from + 1).min(READ_CHUNK as u64) as usize;
    for_each_record(shared, &entries, |seq, pos, bytes| {
        if seq != expected {
            return Err(corrupt(
                shared,
                pos,
                stream,
                ChainBreak::Missing {
                    expected,
                    found: seq,
                },
            ));
        }
        let event = bytes
            .map_err(|what| ChainBreak::Unreadable { seq, what })
            .and_then(|b| crate::verify::check_record(stream, seq, prev, b))
            .map_err(|b| corrupt(shared, pos, stream, b))?;
        prev = Some(event.hash);
        expected += 1;
        out.push(event);
        Ok(true)
    })?;
    if out.len() < want {
        return Err(StoreError::Corrupt {
            segment: entries.last().map_or_else(
                || shared.log_dir.clone(),
                |e| segment_path(&shared.log_dir, e.1.segment),
            ),
            offset: entries.last().map_or(0, |e| e.1.offset),
            damage: Box::new(Damage::Chain {
                stream: stream.clone(),
                break_: ChainBreak::HeadMismatch {
                    indexed: to,
                    found: expected - 1,
                },
            }),
        });
    }
    Ok(())
}

/// Re-checks a whole stream; stops at the first break.
pub(crate) fn verify_stream(
    shared: &Shared,
    stream: &StreamId,
) -> Result<VerifyReport, StoreError> {
    let mut report = VerifyReport {
        stream: stream.clone(),
        verified: 0,
        first_break: None,
    };
    let Some(head) = shared.head(stream) else {
        return Ok(report);
    };
    let mut prev: Option<Hash> = None;
    let mut next = 1u64;
    while next <= head.seq && report.first_break.is_none() {
        let entries = shared
            .index
            .positions(head.no, next, head.seq, READ_CHUNK)?;
        if entries.is_empty() {
            report.first_break = Some(ChainBreak::HeadMismatch {
                indexed: head.seq,
                found: next - 1,
            });
            break;
        }
        for_each_record(shared, &entries, |seq, _pos, bytes| {
            if seq != next {
                report.first_break = Some(ChainBreak::Missing {
                    expected: next,
                    found: seq,
                });
                return Ok(false);
            }
            let checked = bytes
                .map_err(|what| ChainBreak::Unreadable { seq, what })
                .and_then(|b| crate::verify::check_record(stream, seq, prev, b));
            let event = match checked {
                Ok(e) => e,
                Err(b) => {
                    report.first_break = Some(b);
                    return Ok(false);
                }
            };
            if let Payload::Blob(r) = &event.payload {
                let sound = matches!(read_blob(shared, &r.hash), Ok(Some(bytes)) if bytes.len() as u64 == r.len);
                if !sound {
                    report.first_break = Some(ChainBreak::BadBlob { seq, hash: r.hash });
                    return Ok(false);
                }
            }
            prev = Some(event.hash);
            next += 1;
            report.verified = seq;
            Ok(true)
        })?;
    }
    if report.first_break.is_none() && prev != Some(head.hash) {
        report.first_break = Some(ChainBreak::HeadMismatch {
            indexed: head.seq,
            found: report.verified,
        });
    }
    Ok(report)
}

/// A blob's bytes, checked against its address.
pub(crate) fn read_blob(shared: &Shared, hash: &Hash) -> Result<Option<Vec<u8>>, StoreError> {
    let Some(pos) = shared.index.blob(hash)? else {
        return Ok(None);
    };
    let mut out = None;
    for_each_record(shared, &[(0, pos)], |_, _, bytes| {
        let damaged = |what: String| StoreError::Corrupt {
            segment: segment_path(&shared.log_dir, pos.segment),
            offset: pos.offset,
            damage: Box::new(Damage::BadRecord(what)),
        };
        let bytes = bytes.map_err(damaged)?;
        let raw = parse_record(bytes).map_err(damaged)?;
        if raw.tag != TAG_BLOB {
            return Err(damaged(format!("record tag {} is not a blob", raw.tag)));
        }
        let (stored, content) = decode_blob(raw.body).map_err(damaged)?;
        if stored != *hash || blob_hash(content) != *hash {
            return Err(damaged(format!("blob {hash} does not match its content")));
        }
        out = Some(content.to_vec());
        Ok(false)
    })?;
    Ok(out)
}
