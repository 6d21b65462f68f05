//! Canonical encoding of events and blobs (postcard), and of records inside a batch.
//!
//! An event record's body is `canonical body ‖ prev hash ‖ own hash`; the canonical body is
//! exactly the bytes the chain hash covers (see FORMAT.md). From format 2 an event's canonical
//! body, or a blob's content, may be stored compressed (zstd) in a record of its own tag;
//! [`parse_record`] gives every record back as its uncompressed equivalent, so hashes, leaves
//! and everything above the log see the same bytes either way.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::event::{BlobRef, Event, Hash, Payload, StreamId, WallTime};

/// Version of the on-disk format (directory marker, segment headers, records, hash inputs).
/// Format 2 added compressed records, format 3 compressed them with docket's dictionary
/// (so a build that reads format 2 only refuses such a store by its marker rather than
/// taking its records for damage); format 1 and 2 logs are read as before.
pub const FORMAT_VERSION: u32 = 3;

/// The version of what the hashes cover: the canonical body, the chain and the Merkle
/// leaves (FORMAT.md §3, §4, §9). Format 2 changed only how records are stored, not this;
/// exports name it, since a verifier of an export needs nothing else.
pub const HASHED_FORMAT_VERSION: u32 = 1;

/// The oldest format this build reads.
pub const OLDEST_FORMAT_VERSION: u32 = 1;

/// Whether this build reads format `version`.
pub(crate) fn readable_format(version: u32) -> bool {
    (OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version)
}

pub(crate) const TAG_EVENT: u8 = 1;
pub(crate) const TAG_BLOB: u8 = 2;
/// An event record whose canonical body is zstd-compressed (format 2).
pub(crate) const TAG_EVENT_COMPRESSED: u8 = 3;
/// A blob record whose content is zstd-compressed (format 2).
pub(crate) const TAG_BLOB_COMPRESSED: u8 = 4;

/// Bytes below which nothing is compressed: a short body gains nothing.
const COMPRESS_FROM: usize = 128;
/// zstd's level: the fastest, whose ratio on docket's JSON payloads is zlib's level 1's.
const COMPRESSION_LEVEL: i32 = 1;
/// The most bytes a compressed record may claim to expand to (a record can never hold more).
const MAX_EXPANDED: usize = 1 << 30;

/// The zstd dictionary records are compressed with (FORMAT.md §2): trained on docket's
/// own records (`store/zstd/README.md`), so that a record of a few hundred bytes finds
/// the field names, rule ids and envelopes it shares with every other record there
/// instead of spelling them out, and zstd starts from the dictionary's entropy tables
/// instead of building its own for each record. Part of the format: a frame names it by
/// [`DICTIONARY_ID`], and a reader needs these exact bytes to expand such a frame.
pub const DICTIONARY: &[u8] = include_bytes!("../zstd/records-1.dict");

/// The id [`DICTIONARY`] declares and every frame compressed with it names.
pub const DICTIONARY_ID: u32 = 1_145_787_393;

/// [`DICTIONARY`] prepared once for compressing at [`COMPRESSION_LEVEL`].
static ENCODER_DICTIONARY: std::sync::LazyLock<zstd::dict::EncoderDictionary<'static>> =
    std::sync::LazyLock::new(|| zstd::dict::EncoderDictionary::copy(DICTIONARY, COMPRESSION_LEVEL));

/// [`DICTIONARY`] prepared once for expanding.
static DECODER_DICTIONARY: std::sync::LazyLock<zstd::dict::DecoderDictionary<'static>> =
    std::sync::LazyLock::new(|| zstd::dict::DecoderDictionary::copy(DICTIONARY));

/// `bytes` compressed with [`DICTIONARY`], when that makes them shorter.
pub(crate) fn compress(bytes: &[u8]) -> Option<Vec<u8>> {
    thread_local! {
        /// One compression context per thread, reused: creating one per record would cost
        /// more than compressing a typical record.
        static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    if bytes.len() < COMPRESS_FROM {
        return None;
    }
    let packed = COMPRESSOR.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            let mut fresh =
                zstd::bulk::Compressor::with_prepared_dictionary(&ENCODER_DICTIONARY).ok()?;
            // The frame declares its content size, which `expand` requires, and the
            // dictionary's id (zstd's default), which tells a reader which one to use.
            fresh.include_contentsize(true).ok()?;
            fresh.include_dictid(true).ok()?;
            *slot = Some(fresh);
        }
        slot.as_mut()?.compress(bytes).ok()
    })?;
    (packed.len() + 16 < bytes.len()).then_some(packed)
}

/// Bytes an expansion holds before the frame's own output shows it needs more. A frame's
/// declared size is checked against [`MAX_EXPANDED`] but otherwise believed only as far as
/// the frame really expands, so a damaged or forged size costs no memory it does not fill.
const EXPANSION_STEP: usize = 64 * 1024;

/// The bytes a compressed record holds, expanded; the frame must declare its size, and
/// name either no dictionary (records written before [`DICTIONARY`]) or it. Memory grows
/// with the output actually produced (doubling from [`EXPANSION_STEP`]), never past the
/// declared size.
fn expand(packed: &[u8]) -> Result<Vec<u8>, String> {
    use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};
    thread_local! {
        static PLAIN: std::cell::RefCell<Option<Decoder<'static>>> =
            const { std::cell::RefCell::new(None) };
        static WITH_DICTIONARY: std::cell::RefCell<Option<Decoder<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    let size = match zstd::zstd_safe::get_frame_content_size(packed) {
        Ok(Some(size)) => size,
        Ok(None) => return Err("compressed record does not declare its size".into()),
        Err(_) => return Err("compressed record is not a zstd frame".into()),
    };
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s <= MAX_EXPANDED)
        .ok_or_else(|| {
            format!("compressed record claims {size} bytes, more than any record holds")
        })?;
    let with_dictionary = match zstd::zstd_safe::get_dict_id_from_frame(packed).map(u32::from) {
        None => false,
        Some(DICTIONARY_ID) => true,
        Some(other) => {
            return Err(format!(
                "compressed record names zstd dictionary {other}, not docket's \
                 {DICTIONARY_ID} (store/FORMAT.md §2)"
            ));
        }
    };
    let decoder = if with_dictionary {
        &WITH_DICTIONARY
    } else {
        &PLAIN
    };
    let expanded = decoder.with(|cell| -> std::io::Result<Vec<u8>> {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| std::io::Error::other("decompressor in use"))?;
        let decoder = match slot.as_mut() {
            Some(decoder) => {
                decoder.reinit()?;
                decoder
            }
            None => slot.insert(if with_dictionary {
                Decoder::with_prepared_dictionary(&DECODER_DICTIONARY)?
            } else {
                Decoder::new()?
            }),
        };
        let mut out = Vec::with_capacity(size.min(EXPANSION_STEP));
        let mut input = InBuffer::around(packed);
        loop {
            if out.len() == out.capacity() {
                if out.len() == size {
                    // Full at the declared size: the frame must end here.
                    let mut spare = [0u8; 1];
                    let mut probe = OutBuffer::around(&mut spare[..]);
                    let left = decoder.run(&mut input, &mut probe)?;
                    if probe.pos() > 0 {
                        return Err(std::io::Error::other(format!(
                            "it expands to more than the {size} bytes it declares"
                        )));
                    }
                    if left != 0 {
                        return Err(std::io::Error::other("the frame is cut short"));
                    }
                    return Ok(out);
                }
                let more = out.capacity().max(EXPANSION_STEP).min(size - out.len());
                out.reserve_exact(more);
            }
            let (before, consumed) = (out.len(), input.pos());
            let mut output = OutBuffer::around_pos(&mut out, before);
            let left = decoder.run(&mut input, &mut output)?;
            if left == 0 {
                return Ok(out);
            }
            if out.len() == before && input.pos() == consumed {
                return Err(std::io::Error::other("the frame is cut short"));
            }
        }
    });
    let out = expanded.map_err(|e| format!("compressed record does not expand: {e}"))?;
    if out.len() == size {
        Ok(out)
    } else {
        Err(format!(
            "compressed record expands to {} bytes, it declares {size}",
            out.len()
        ))
    }
}

#[derive(Serialize)]
struct BodyOut<'a> {
    stream: &'a str,
    seq: u64,
    kind: &'a str,
    kind_version: u32,
    recorded_at: i64,
    policy: Option<[u8; 32]>,
    payload: PayloadOut<'a>,
}

#[derive(Serialize)]
enum PayloadOut<'a> {
    Inline(#[serde(with = "serde_bytes")] &'a [u8]),
    Blob { hash: [u8; 32], len: u64 },
}

#[derive(Deserialize)]
struct BodyIn<'a> {
    stream: &'a str,
    seq: u64,
    kind: &'a str,
    kind_version: u32,
    recorded_at: i64,
    policy: Option<[u8; 32]>,
    #[serde(borrow)]
    payload: PayloadIn<'a>,
}

#[derive(Deserialize)]
enum PayloadIn<'a> {
    Inline(#[serde(with = "serde_bytes")] &'a [u8]),
    Blob { hash: [u8; 32], len: u64 },
}

/// The fields of an event that its hash covers, borrowed.
pub(crate) struct BodyFields<'a> {
    pub stream: &'a str,
    pub seq: u64,
    pub kind: &'a str,
    pub kind_version: u32,
    pub recorded_at: WallTime,
    pub policy: Option<Hash>,
    pub payload: PayloadView<'a>,
}

pub(crate) enum PayloadView<'a> {
    Inline(&'a [u8]),
    Blob(BlobRef),
}

/// Appends the canonical body encoding of `fields` to `out`.
pub(crate) fn encode_body(fields: &BodyFields<'_>, out: &mut Vec<u8>) {
    let body = BodyOut {
        stream: fields.stream,
        seq: fields.seq,
        kind: fields.kind,
        kind_version: fields.kind_version,
        recorded_at: fields.recorded_at.0,
        policy: fields.policy.map(|h| h.0),
        payload: match fields.payload {
            PayloadView::Inline(bytes) => PayloadOut::Inline(bytes),
            PayloadView::Blob(r) => PayloadOut::Blob {
                hash: r.hash.0,
                len: r.len,
            },
        },
    };
    // Serializing into a Vec cannot fail for these types (no maps, no unsized sequences).
    let taken = std::mem::take(out);
    *out = match postcard::to_extend(&body, taken) {
        Ok(v) => v,
        Err(_) => unreachable_encoding(),
    };
}

#[cold]
fn unreachable_encoding() -> Vec<u8> {
    // postcard only fails on sequences of unknown length or a failing writer; neither occurs here.
    Vec::new()
}

/// Appends a framed record (`len u32 LE ‖ tag ‖ body`) to a batch buffer; returns its offset in `out`.
pub(crate) fn push_record(out: &mut Vec<u8>, tag: u8, body_parts: &[&[u8]]) -> usize {
    let start = out.len();
    let body_len: usize = body_parts.iter().map(|p| p.len()).sum();
    let len = u32::try_from(1 + body_len).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.push(tag);
    for part in body_parts {
        out.extend_from_slice(part);
    }
    start
}

/// Fills in the 5-byte header (`len u32 LE ‖ tag`) of a record built in place: `record` is the
/// whole record, header included.
pub(crate) fn seal_record(record: &mut [u8], tag: u8) {
    let len = u32::try_from(record.len() - 4).unwrap_or(u32::MAX);
    record[..4].copy_from_slice(&len.to_le_bytes());
    record[4] = tag;
}

/// One record inside a batch payload, as its uncompressed equivalent: `tag` is
/// [`TAG_EVENT`] or [`TAG_BLOB`] (or an unknown tag) and `body` is what the hashes cover.
pub(crate) struct RawRecord<'a> {
    /// Offset of the record (its length prefix) within the batch payload.
    pub offset: usize,
    /// Whole record length including the 5-byte header, as stored.
    pub len: usize,
    pub tag: u8,
    pub body: Cow<'a, [u8]>,
}

/// Splits a batch payload into records; `Err((offset, what))` on a malformed one.
pub(crate) fn split_records(payload: &[u8]) -> Result<Vec<RawRecord<'_>>, (usize, String)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < payload.len() {
        let rec = parse_record(&payload[at..]).map_err(|what| (at, what))?;
        let len = rec.len;
        out.push(RawRecord { offset: at, ..rec });
        at += len;
    }
    Ok(out)
}

/// Parses one record at the start of `bytes`.
pub(crate) fn parse_record(bytes: &[u8]) -> Result<RawRecord<'_>, String> {
    let Some(len_bytes) = bytes.get(..4) else {
        return Err("record header is cut short".into());
    };
    let mut len4 = [0u8; 4];
    len4.copy_from_slice(len_bytes);
    let len = u32::from_le_bytes(len4) as usize;
    if len == 0 {
        return Err("record length is zero".into());
    }
    let Some(rest) = bytes.get(4..4 + len) else {
        return Err(format!(
            "record declares {len} bytes, only {} remain",
            bytes.len() - 4
        ));
    };
    let (tag, body) = (rest[0], &rest[1..]);
    let (tag, body) = match tag {
        TAG_EVENT_COMPRESSED => {
            let Some(split) = body.len().checked_sub(64) else {
                return Err(format!(
                    "compressed event record is {} bytes, shorter than its two hashes",
                    body.len()
                ));
            };
            let mut whole = expand(&body[..split])?;
            whole.extend_from_slice(&body[split..]);
            (TAG_EVENT, Cow::Owned(whole))
        }
        TAG_BLOB_COMPRESSED => {
            if body.len() < 32 {
                return Err("compressed blob record shorter than its hash".into());
            }
            let mut whole = body[..32].to_vec();
            whole.extend_from_slice(&expand(&body[32..])?);
            (TAG_BLOB, Cow::Owned(whole))
        }
        _ => (tag, Cow::Borrowed(body)),
    };
    Ok(RawRecord {
        offset: 0,
        len: 4 + len,
        tag,
        body,
    })
}

/// Appends a blob record for `content` to `out` (compressed when `compress` and that is
/// shorter); returns its offset in `out`.
pub(crate) fn push_blob(out: &mut Vec<u8>, hash: &Hash, content: &[u8], compress: bool) -> usize {
    match compress.then(|| self::compress(content)).flatten() {
        Some(packed) => push_record(out, TAG_BLOB_COMPRESSED, &[&hash.0, &packed]),
        None => push_record(out, TAG_BLOB, &[&hash.0, content]),
    }
}

/// Replaces the event record built at `record[at..]` (header, canonical body, prev, hash,
/// sealed as [`TAG_EVENT`]) by its compressed form when that is shorter.
pub(crate) fn compress_event_record(records: &mut Vec<u8>, at: usize) {
    let body_end = records.len() - 64;
    let Some(packed) = compress(&records[at + 5..body_end]) else {
        return;
    };
    let hashes = records.split_off(body_end);
    records.truncate(at + 5);
    records.extend_from_slice(&packed);
    records.extend_from_slice(&hashes);
    seal_record(&mut records[at..], TAG_EVENT_COMPRESSED);
}

/// Decodes an event record body into an [`Event`], returning also the canonical body bytes.
/// When the record belongs to `expected`, the event shares that id instead of a new one.
pub(crate) fn decode_event<'a>(
    record_body: &'a [u8],
    expected: Option<&StreamId>,
) -> Result<(Event, &'a [u8]), String> {
    if record_body.len() < 64 {
        return Err(format!(
            "event record is {} bytes, shorter than its two hashes",
            record_body.len()
        ));
    }
    let (body, hashes) = record_body.split_at(record_body.len() - 64);
    let (wire, rest): (BodyIn<'_>, &[u8]) =
        postcard::take_from_bytes(body).map_err(|e| format!("event body: {e}"))?;
    if !rest.is_empty() {
        return Err(format!(
            "{} unexpected bytes after the event body",
            rest.len()
        ));
    }
    let stream = match expected {
        Some(id) if id.as_str() == wire.stream => id.clone(),
        _ => StreamId::new(wire.stream).map_err(|e| e.to_string())?,
    };
    let mut prev = [0u8; 32];
    prev.copy_from_slice(&hashes[..32]);
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&hashes[32..]);
    let payload = match wire.payload {
        PayloadIn::Inline(bytes) => Payload::Inline(bytes.to_vec()),
        PayloadIn::Blob { hash, len } => Payload::Blob(BlobRef {
            hash: Hash(hash),
            len,
        }),
    };
    let event = Event {
        stream,
        seq: wire.seq,
        kind: wire.kind.to_owned(),
        kind_version: wire.kind_version,
        recorded_at: WallTime(wire.recorded_at),
        policy: wire.policy.map(Hash),
        payload,
        prev: Hash(prev),
        hash: Hash(hash),
    };
    Ok((event, body))
}

/// Re-encodes an event's canonical body (used to check an event built elsewhere).
pub(crate) fn body_of(event: &Event) -> Vec<u8> {
    let payload = match &event.payload {
        Payload::Inline(bytes) => PayloadView::Inline(bytes),
        Payload::Blob(r) => PayloadView::Blob(*r),
    };
    let mut out = Vec::new();
    encode_body(
        &BodyFields {
            stream: event.stream.as_str(),
            seq: event.seq,
            kind: &event.kind,
            kind_version: event.kind_version,
            recorded_at: event.recorded_at,
            policy: event.policy,
            payload,
        },
        &mut out,
    );
    out
}

/// Splits a blob record body into its hash and content.
pub(crate) fn decode_blob(record_body: &[u8]) -> Result<(Hash, &[u8]), String> {
    if record_body.len() < 32 {
        return Err("blob record shorter than its hash".into());
    }
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&record_body[..32]);
    Ok((Hash(hash), &record_body[32..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_split_rejects_cut_records() {
        let mut batch = Vec::new();
        push_record(&mut batch, TAG_BLOB, &[&[7u8; 40]]);
        push_record(&mut batch, TAG_BLOB, &[&[8u8; 3]]);
        let recs = split_records(&batch).map_err(|e| e.1).unwrap_or_default();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].offset, 45);
        assert_eq!(&*recs[1].body, &[8u8; 3]);
        let cut = &batch[..batch.len() - 1];
        assert_eq!(split_records(cut).err().map(|e| e.0), Some(45));
        assert!(decode_blob(&[0u8; 10]).is_err());
    }

    /// docket-like JSON, as the records the dictionary is for.
    fn record_like(i: usize) -> Vec<u8> {
        format!(
            "{{\"kind\":\"handoff.allowed\",\"from\":\"observation\",\"to\":\"intelligence\",\
             \"audit\":{{\"fields_included\":[\"/gaps/{i}/id\",\"/gaps/{i}/priority\"]}},\
             \"decision\":{{\"verdict\":\"allow\",\"rule_id\":\"matrix.observation.intelligence\"}}}}"
        )
        .into_bytes()
    }

    #[test]
    fn records_are_compressed_with_the_dictionary_they_name() {
        // The embedded dictionary declares the id frames name.
        assert_eq!(
            &DICTIONARY[..4],
            &[0x37, 0xa4, 0x30, 0xec],
            "zstd dictionary magic"
        );
        assert_eq!(
            u32::from_le_bytes([DICTIONARY[4], DICTIONARY[5], DICTIONARY[6], DICTIONARY[7]]),
            DICTIONARY_ID
        );
        let bytes = record_like(7);
        let packed = compress(&bytes).expect("shorter");
        assert_eq!(
            zstd::zstd_safe::get_dict_id_from_frame(&packed).map(u32::from),
            Some(DICTIONARY_ID)
        );
        assert_eq!(expand(&packed).expect("expands"), bytes);
        // Frames of records written before the dictionary (no dictionary named) expand as
        // they did.
        let mut plain = zstd::bulk::Compressor::new(1).expect("compressor");
        plain.include_contentsize(true).expect("content size");
        let old = plain.compress(&bytes).expect("compresses");
        assert_eq!(zstd::zstd_safe::get_dict_id_from_frame(&old), None);
        assert_eq!(expand(&old).expect("expands"), bytes);
        // A frame naming another dictionary is refused, naming it.
        let other = [&DICTIONARY[..4], &7u32.to_le_bytes()[..], &DICTIONARY[8..]].concat();
        let mut foreign = zstd::bulk::Compressor::with_dictionary(1, &other).expect("compressor");
        foreign.include_contentsize(true).expect("content size");
        let foreign = foreign.compress(&bytes).expect("compresses");
        let refused = expand(&foreign).expect_err("another dictionary");
        assert!(refused.contains("dictionary 7"), "{refused}");
    }

    /// The offset and width of a frame header's content size field (RFC 8878 §3.1.1.1).
    fn content_size_field(frame: &[u8]) -> (usize, usize) {
        let descriptor = frame[4];
        let single_segment = descriptor & 0x20 != 0;
        let dictionary_id = [0, 1, 2, 4][usize::from(descriptor & 0x03)];
        let width = match descriptor >> 6 {
            0 => usize::from(single_segment),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        (5 + usize::from(!single_segment) + dictionary_id, width)
    }

    #[test]
    fn a_record_expands_as_far_as_its_frame_really_does() {
        // Several times the first step, so the output grows more than once.
        let bytes: Vec<u8> = (0..5 * EXPANSION_STEP)
            .flat_map(|i| format!("{{\"n\":{i}}}").into_bytes())
            .take(5 * EXPANSION_STEP + 17)
            .collect();
        let packed = compress(&bytes).expect("shorter");
        assert_eq!(expand(&packed).expect("expands"), bytes);

        // The same frame claiming more than it holds: refused, naming both sizes, the
        // claim never taken as memory to set aside (the fuzz regression
        // `segments-zstd-declared-size` counts that).
        let (at, width) = content_size_field(&packed);
        assert_eq!(width, 4, "a 4-byte content size field");
        let mut forged = packed.clone();
        let claim = u32::try_from(MAX_EXPANDED / 2).expect("fits");
        forged[at..at + 4].copy_from_slice(&claim.to_le_bytes());
        let refused = expand(&forged).expect_err("claims more than it holds");
        assert!(refused.contains("does not expand"), "{refused}");

        // Claiming less than it holds: refused too.
        let mut short = packed.clone();
        let claim = u32::try_from(bytes.len() - 1).expect("fits");
        short[at..at + 4].copy_from_slice(&claim.to_le_bytes());
        let refused = expand(&short).expect_err("holds more than it claims");
        assert!(refused.contains("does not expand"), "{refused}");

        // A frame cut short.
        let refused = expand(&packed[..packed.len() / 2]).expect_err("cut short");
        assert!(refused.contains("does not expand"), "{refused}");
    }

    #[test]
    fn garbage_event_bodies_are_errors_not_panics() {
        for len in 0..200 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            let _ = decode_event(&bytes, None);
        }
        assert!(decode_event(&[0u8; 10], None).is_err());
    }
}
