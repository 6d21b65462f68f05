//! Writing a run as JSON lines: a header, one line per event carrying the exact bytes
//! its hashes cover, the run's Merkle tree head, and its signed checkpoint when sealed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use docket_decider::{REFERENCED_PAYLOAD, ReferencedPayload};
use docket_store::merkle::{TreeBuilder, event_leaf_hash};
use docket_store::{
    EVENT_CONTEXT, Event, GENESIS_CONTEXT, HASHED_FORMAT_VERSION, Hash, Payload, StreamId,
};
use serde::Serialize;
use serde_json::value::RawValue;

/// The `format` the header names.
pub const EXPORT_FORMAT: &str = "docket.export.jsonl";
/// Version of the export format (docs/export-format.md): 2 added `content` lines, the
/// content encoding-2 events refer to. A reader reads 1 and 2 and refuses others.
pub const EXPORT_VERSION: u32 = 2;

/// A run's signed checkpoint and the key that checks it, when the run is sealed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seal {
    /// The C2SP signed note (docs/checkpoints.md), with its signature lines.
    pub note: String,
    /// The verifier key in the C2SP form `name+keyid+key`.
    pub verifier_key: String,
}

/// Everything an export of one run holds.
pub struct RunExport<'a> {
    pub run: &'a StreamId,
    /// The run's events from sequence 1, as read from the log.
    pub events: &'a [Event],
    /// The content of every blob an event refers to: a payload kept as a blob, and the
    /// content an encoding-2 payload refers to ([`referenced_blobs`]).
    pub blobs: &'a BTreeMap<Hash, Vec<u8>>,
    pub seal: Option<&'a Seal>,
}

/// Why an export could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "event {seq} of run {run} refers to blob {hash}, which the data directory does not hold"
    )]
    MissingBlob { run: String, seq: u64, hash: Hash },
    #[error(
        "event {found} of run {run} is out of place: an export holds every event from 1 in order, expected {expected}"
    )]
    OutOfOrder {
        run: String,
        expected: u64,
        found: u64,
    },
    #[error("could not write the export: {0}")]
    Write(#[from] std::io::Error),
}

#[derive(Serialize)]
struct Header<'a> {
    #[serde(rename = "type")]
    line: &'static str,
    format: &'static str,
    version: u32,
    run: &'a str,
    events: u64,
    store_format: u32,
    chain: Chain,
    tree: Tree,
}

#[derive(Serialize)]
struct Chain {
    algorithm: &'static str,
    event_context: &'static str,
    genesis_context: &'static str,
    genesis: String,
}

#[derive(Serialize)]
struct Tree {
    algorithm: &'static str,
    leaf: &'static str,
}

#[derive(Serialize)]
struct EventLine<'a> {
    #[serde(rename = "type")]
    line: &'static str,
    seq: u64,
    leaf_index: u64,
    kind: &'a str,
    kind_version: u32,
    recorded_at_ns: i64,
    policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_bytes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_blob: Option<BlobLine>,
    prev: String,
    hash: String,
    record: String,
}

#[derive(Serialize)]
struct BlobLine {
    hash: String,
    len: u64,
    content: String,
}

/// Content an encoding-2 event refers to (docs/events.md#content-stored-once), written
/// once, right after the first event line that refers to it.
#[derive(Serialize)]
struct ContentLine {
    #[serde(rename = "type")]
    line: &'static str,
    hash: String,
    len: u64,
    content: String,
}

#[derive(Serialize)]
struct TreeLine {
    #[serde(rename = "type")]
    line: &'static str,
    size: u64,
    root: String,
}

#[derive(Serialize)]
struct CheckpointLine<'a> {
    #[serde(rename = "type")]
    line: &'static str,
    note: &'a str,
    verifier_key: &'a str,
}

/// The header line of an export of `events` events of `run`: a reader expects exactly
/// this, so a changed word in it is caught like a changed event.
fn header(run: &StreamId, events: u64) -> Header<'_> {
    Header {
        line: "header",
        format: EXPORT_FORMAT,
        version: EXPORT_VERSION,
        run: run.as_str(),
        events,
        store_format: HASHED_FORMAT_VERSION,
        chain: Chain {
            algorithm: "BLAKE3 derive-key: hash = derive_key(event_context, prev ‖ canonical body)",
            event_context: EVENT_CONTEXT,
            genesis_context: GENESIS_CONTEXT,
            genesis: docket_store::genesis(run).to_hex(),
        },
        tree: Tree {
            algorithm: "RFC 9162 SHA-256",
            leaf: "SHA-256(0x00 ‖ record), leaf index = seq - 1",
        },
    }
}

/// [`header`] as a JSON value, for comparing with a header read back.
pub(super) fn header_value(run: &StreamId, events: u64) -> serde_json::Value {
    serde_json::to_value(header(run, events)).unwrap_or_default()
}

/// Writes `export` as JSON lines (docs/export-format.md). The same run always gives the
/// same bytes: nothing here reads a clock.
pub fn write_jsonl(export: &RunExport<'_>, out: &mut impl Write) -> Result<(), ExportError> {
    let run = export.run.as_str();
    line(out, &header(export.run, export.events.len() as u64))?;
    let mut tree = TreeBuilder::new();
    let mut written: BTreeSet<Hash> = BTreeSet::new();
    for (i, event) in export.events.iter().enumerate() {
        let expected = i as u64 + 1;
        if event.seq != expected {
            return Err(ExportError::OutOfOrder {
                run: run.to_owned(),
                expected,
                found: event.seq,
            });
        }
        let (bytes, payload_blob) = match &event.payload {
            Payload::Inline(bytes) => (bytes.as_slice(), None),
            Payload::Blob(r) => {
                let Some(content) = export.blobs.get(&r.hash) else {
                    return Err(ExportError::MissingBlob {
                        run: run.to_owned(),
                        seq: event.seq,
                        hash: r.hash,
                    });
                };
                let blob = BlobLine {
                    hash: r.hash.to_hex(),
                    len: r.len,
                    content: STANDARD.encode(content),
                };
                (content.as_slice(), Some(blob))
            }
        };
        let (payload, payload_bytes) = match json_text(bytes) {
            Some(raw) => (Some(raw), None),
            None => (None, Some(STANDARD.encode(bytes))),
        };
        tree.push(event_leaf_hash(event));
        let record = docket_store::event_record(event);
        line(
            out,
            &EventLine {
                line: "event",
                seq: event.seq,
                leaf_index: event.seq - 1,
                kind: &event.kind,
                kind_version: event.kind_version,
                recorded_at_ns: event.recorded_at.0,
                policy: event.policy.map(|h| h.to_hex()),
                payload,
                payload_bytes,
                payload_blob,
                prev: event.prev.to_hex(),
                hash: event.hash.to_hex(),
                record: STANDARD.encode(record),
            },
        )?;
        // Its content not given yet follows it, once (docs/export-format.md).
        if event.kind_version == REFERENCED_PAYLOAD {
            for hash in refs_of(event, bytes) {
                if !written.insert(hash) {
                    continue;
                }
                let Some(content) = export.blobs.get(&hash) else {
                    return Err(ExportError::MissingBlob {
                        run: run.to_owned(),
                        seq: event.seq,
                        hash,
                    });
                };
                line(
                    out,
                    &ContentLine {
                        line: "content",
                        hash: hash.to_hex(),
                        len: content.len() as u64,
                        content: STANDARD.encode(content),
                    },
                )?;
            }
        }
    }
    line(
        out,
        &TreeLine {
            line: "tree",
            size: tree.size(),
            root: STANDARD.encode(tree.root().0),
        },
    )?;
    if let Some(seal) = export.seal {
        line(
            out,
            &CheckpointLine {
                line: "checkpoint",
                note: &seal.note,
                verifier_key: &seal.verifier_key,
            },
        )?;
    }
    Ok(())
}

/// The blobs an encoding-2 event's payload `bytes` refers to, in order (none for a
/// payload that does not parse: the export shows it as recorded, and its verifier
/// refuses it).
fn refs_of(event: &Event, bytes: &[u8]) -> Vec<Hash> {
    ReferencedPayload::parse(&event.kind, bytes)
        .map(|p| p.refs().iter().map(|r| Hash(r.hash)).collect())
        .unwrap_or_default()
}

/// The blobs the encoding-2 `events` refer to inside their payloads, whose content an
/// export carries: `payload` gives an event's payload bytes (a payload kept as a blob
/// included).
pub fn referenced_blobs<'a>(
    events: &'a [Event],
    mut payload: impl FnMut(&'a Event) -> Option<&'a [u8]>,
) -> Vec<Hash> {
    let mut out = Vec::new();
    for event in events {
        if event.kind_version != REFERENCED_PAYLOAD {
            continue;
        }
        if let Some(bytes) = payload(event) {
            for hash in refs_of(event, bytes) {
                if !out.contains(&hash) {
                    out.push(hash);
                }
            }
        }
    }
    out
}

/// A payload's JSON text exactly as recorded, when it is JSON that fits on one line.
fn json_text(bytes: &[u8]) -> Option<Box<RawValue>> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.contains(['\n', '\r']) {
        return None;
    }
    RawValue::from_string(text.to_owned()).ok()
}

fn line(out: &mut impl Write, value: &impl Serialize) -> Result<(), ExportError> {
    serde_json::to_writer(&mut *out, value).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(())
}
