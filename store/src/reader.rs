//! Reading records back: neighbouring records are read with one positioned read.

use std::os::unix::fs::FileExt;

use crate::api::VerifyReport;
use crate::chain::blob_hash;
use crate::codec::{TAG_BLOB, decode_blob, parse_record};
use crate::error::{ChainBreak, Damage, StoreError, io_err};
use crate::event::{Event, Hash, Payload, StreamId};
use crate::index::{Position, Run};
use crate::segment::segment_path;
use crate::shared::Shared;
use crate::tree::TreeCheck;

/// Most runs fetched per index scan (callers also bound the events of a read by its range).
pub(crate) const READ_CHUNK: usize = 4096;
/// Largest span of neighbouring records fetched in one read.
const MAX_SPAN: u64 = 4 * 1024 * 1024;
/// Largest gap of other streams' records a read spans to reach the next run of its own:
/// where many runs are recorded at once their batches interleave, and a read of one run
/// would otherwise fetch megabytes of the others' to use a few kilobytes.
const MAX_GAP: u64 = 64 * 1024;

/// Calls `f` with each record of `runs` whose sequence is in `from..=to` (or why it cannot be
/// read), in order; neighbouring runs are fetched with one positioned read.
pub(crate) fn for_each_record(
    shared: &Shared,
    runs: &[Run],
    (from, to): (u64, u64),
    mut f: impl FnMut(u64, Position, Result<&[u8], String>) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let mut i = 0;
    let mut buf = Vec::new();
    while i < runs.len() {
        let first = runs[i].pos;
        let mut j = i + 1;
        let mut end = first.offset + u64::from(first.len);
        while j < runs.len() {
            let p = runs[j].pos;
            let p_end = p.offset + u64::from(p.len);
            if p.segment != first.segment
                || p.offset < end
                || p.offset - end > MAX_GAP
                || p_end - first.offset > MAX_SPAN
            {
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
        for run in &runs[i..j] {
            let mut at = (run.pos.offset - first.offset) as usize;
            let run_end = at + run.pos.len as usize;
            for k in 0..u64::from(run.count) {
                let seq = run.first_seq + k;
                let len = buf
                    .get(at..at + 4)
                    .filter(|_| at + 4 <= got.min(run_end))
                    .map(|b| 4 + u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
                let pos = Position {
                    segment: first.segment,
                    offset: first.offset + at as u64,
                    len: len.unwrap_or(0) as u32,
                };
                let bytes = match len {
                    Some(len) if at + len <= got.min(run_end) => Ok(&buf[at..at + len]),
                    _ if got < run_end => Err("the segment ends before this record".to_owned()),
                    _ => Err("the record overruns its indexed run".to_owned()),
                };
                let stop = bytes.is_err();
                if seq >= from && seq <= to && !f(seq, pos, bytes)? {
                    return Ok(());
                }
                if stop {
                    return Ok(());
                }
                at += len.unwrap_or(0);
                if seq >= to {
                    return Ok(());
                }
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

pub(crate) fn corrupt(
    shared: &Shared,
    pos: Position,
    stream: &StreamId,
    break_: ChainBreak,
) -> StoreError {
    StoreError::Corrupt {
        segment: segment_path(&shared.log_dir, pos.segment),
        offset: pos.offset,
        damage: Box::new(Damage::Chain {
            stream: stream.clone(),
            break_,
        }),
        streams_after: Vec::new(),
    }
}

/// Reads and checks events `from..=to` of a stream, about [`READ_CHUNK`] of them (callers
/// continue from the last one returned); `prev` is the hash of event `from - 1` when known.
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
    let runs = shared.runs(no, from, to, READ_CHUNK)?;
    let events: u64 = runs.iter().map(|r| u64::from(r.count)).sum();
    out.reserve(events.min(to.saturating_sub(from) + 1) as usize);
    let mut expected = from;
    let start_len = out.len();
    let mut last = runs.first().map(|r| r.pos);
    for_each_record(shared, &runs, (from, to), |seq, pos, bytes| {
        last = Some(pos);
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
    // Nothing at all where the head says events are: the index lost them.
    if out.len() == start_len && from <= to {
        return Err(StoreError::Corrupt {
            segment: last.map_or_else(
                || shared.log_dir.clone(),
                |p| segment_path(&shared.log_dir, p.segment),
            ),
            offset: last.map_or(0, |p| p.offset),
            damage: Box::new(Damage::Chain {
                stream: stream.clone(),
                break_: ChainBreak::HeadMismatch {
                    indexed: to,
                    found: expected - 1,
                },
            }),
            streams_after: Vec::new(),
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
    let mut tree = TreeCheck::new(shared, head.no)?;
    while next <= head.seq && report.first_break.is_none() {
        let runs = shared.runs(head.no, next, head.seq, READ_CHUNK)?;
        if runs.is_empty() {
            report.first_break = Some(ChainBreak::HeadMismatch {
                indexed: head.seq,
                found: next - 1,
            });
            break;
        }
        let before = next;
        for_each_record(shared, &runs, (next, head.seq), |seq, _pos, bytes| {
            if seq != next {
                report.first_break = Some(ChainBreak::Missing {
                    expected: next,
                    found: seq,
                });
                return Ok(false);
            }
            let checked = bytes
                .map_err(|what| ChainBreak::Unreadable { seq, what })
                .and_then(|b| crate::verify::check_record_leaf(stream, seq, prev, b));
            let (event, leaf) = match checked {
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
            if let Some(wrong) = tree.push(leaf)? {
                report.first_break = Some(wrong);
                return Ok(false);
            }
            Ok(true)
        })?;
        if next == before && report.first_break.is_none() {
            report.first_break = Some(ChainBreak::Missing {
                expected: next,
                found: runs.first().map_or(0, |r| r.first_seq),
            });
        }
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
    let Some(pos) = shared.blob_position(hash)? else {
        return Ok(None);
    };
    let mut out = None;
    let run = Run {
        first_seq: 0,
        count: 1,
        pos,
        last_hash: *hash,
    };
    for_each_record(shared, &[run], (0, 0), |_, _, bytes| {
        let damaged = |what: String| StoreError::Corrupt {
            segment: segment_path(&shared.log_dir, pos.segment),
            offset: pos.offset,
            damage: Box::new(Damage::BadRecord(what)),
            streams_after: Vec::new(),
        };
        let bytes = bytes.map_err(damaged)?;
        let raw = parse_record(bytes).map_err(damaged)?;
        if raw.tag != TAG_BLOB {
            return Err(damaged(format!("record tag {} is not a blob", raw.tag)));
        }
        let (stored, content) = decode_blob(&raw.body).map_err(damaged)?;
        if stored != *hash || blob_hash(content) != *hash {
            return Err(damaged(format!("blob {hash} does not match its content")));
        }
        out = Some(content.to_vec());
        Ok(false)
    })?;
    Ok(out)
}
