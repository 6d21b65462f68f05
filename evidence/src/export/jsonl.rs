//! Writing a run as JSON lines: a header, one line per event carrying the exact bytes
//! its hashes cover, the run's Merkle tree head, and its signed checkpoint when sealed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use docket_decider::{
    COMMITTED_PAYLOAD, CommittedPayload, REFERENCED_PAYLOAD, ReferencedPayload, content_pointers,
    digest_text, disclosed_pointer, open_disclosure, pointer_touches,
};
use docket_store::merkle::{TreeBuilder, event_leaf_hash};
use docket_store::{
    Disclosures, EVENT_CONTEXT, Event, GENESIS_CONTEXT, HASHED_FORMAT_VERSION, Hash, Payload,
    StoredDisclosure, StreamId,
};
use serde::Serialize;
use serde_json::value::RawValue;

/// The `format` the header names.
pub const EXPORT_FORMAT: &str = "docket.export.jsonl";
/// Version of the export format (docs/export-format.md): 2 added `content` lines, the
/// content encoding-2 events refer to; 3 added `disclosure` and `withheld` lines, the
/// values encoding-3 events commit to. A reader reads 1 to 3 and refuses others.
pub const EXPORT_VERSION: u32 = 4;

/// A value to withhold from an export (`docket export --redact`): a JSON pointer into the
/// plain payloads (`*` for any one step), in every event or in one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redaction {
    /// The event it applies to; `None`: every event.
    pub seq: Option<u64>,
    pub pointer: String,
}

impl std::str::FromStr for Redaction {
    type Err = String;

    /// `POINTER` (every event) or `SEQ:POINTER`, the pointer starting with `/`.
    fn from_str(text: &str) -> Result<Self, String> {
        let (seq, pointer) = match text.split_once(':') {
            Some((seq, pointer)) if !seq.starts_with('/') => {
                let seq = seq.parse::<u64>().map_err(|_| {
                    format!("{text:?}: before `:` comes an event's sequence number, not {seq:?}")
                })?;
                (Some(seq), pointer)
            }
            _ => (None, text),
        };
        if !pointer.starts_with('/') {
            return Err(format!(
                "{text:?}: a JSON pointer into a payload starts with `/` (e.g. /output/claimant/name, or 12:/delivered/email)"
            ));
        }
        Ok(Redaction {
            seq,
            pointer: pointer.to_owned(),
        })
    }
}

impl std::fmt::Display for Redaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.seq {
            Some(seq) => write!(f, "{seq}:{}", self.pointer),
            None => f.write_str(&self.pointer),
        }
    }
}

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
    /// The run's disclosures (payload encoding 3; empty for a run recorded before it).
    pub disclosures: &'a Disclosures,
    /// The values to withhold.
    pub redact: &'a [Redaction],
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
    #[error(
        "event {seq} of run {run} commits to the value at {pointer} (digest {digest}), whose disclosure the data directory does not hold"
    )]
    MissingDisclosure {
        run: String,
        seq: u64,
        pointer: String,
        digest: String,
    },
    #[error(
        "withholding {redaction}: run {run} was not recorded redactable: event {seq} holds {pointer} in payload encoding {version}, its hash covering the value itself, so it cannot be withheld without breaking the chain; a run whose workflow says `[evidence] redactable = true` records its values as commitments that can be (docs/workflow.md#evidence-redactable-values)"
    )]
    CannotWithhold {
        run: String,
        redaction: String,
        seq: u64,
        pointer: String,
        version: u32,
    },
    #[error(
        "withholding {redaction}: no value of run {run} is there (content positions: docs/events.md#content-stored-once)"
    )]
    NothingThere { run: String, redaction: String },
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
    /// A decimal string (export version 4): nanoseconds since 1970 are beyond 2^53, which a
    /// reader of numbers as doubles would read otherwise.
    recorded_at_ns: String,
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

/// A value an encoding-3 event commits to, disclosed: RFC 9901's disclosure, base64url.
#[derive(Serialize)]
struct DisclosureLine {
    #[serde(rename = "type")]
    line: &'static str,
    digest: String,
    disclosure: String,
}

/// A value an encoding-3 event commits to, not in the export: `redacted` or `shredded`.
#[derive(Serialize)]
struct WithheldLine {
    #[serde(rename = "type")]
    line: &'static str,
    digest: String,
    why: &'static str,
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
    let withheld = withheld(export)?;
    let mut owed_given: BTreeSet<[u8; 32]> = BTreeSet::new();
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
                recorded_at_ns: event.recorded_at.0.to_string(),
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
        // The values it commits to that no earlier line gave, disclosed or withheld.
        if event.kind_version == COMMITTED_PAYLOAD
            && let Ok(parsed) = CommittedPayload::parse(&event.kind, bytes)
        {
            for slot in parsed.slots() {
                for digest in &slot.digests {
                    if !owed_given.insert(*digest) {
                        continue;
                    }
                    let text = digest_text(digest);
                    match export.disclosures.get(digest) {
                        Some(StoredDisclosure::Present(bytes)) if !withheld.contains(digest) => {
                            line(
                                out,
                                &DisclosureLine {
                                    line: "disclosure",
                                    digest: text,
                                    disclosure: URL_SAFE_NO_PAD.encode(bytes),
                                },
                            )?;
                        }
                        Some(stored) => {
                            let why = match stored {
                                StoredDisclosure::Shredded(_) => "shredded",
                                StoredDisclosure::Present(_) => "redacted",
                            };
                            line(
                                out,
                                &WithheldLine {
                                    line: "withheld",
                                    digest: text,
                                    why,
                                },
                            )?;
                        }
                        None => {
                            return Err(ExportError::MissingDisclosure {
                                run: run.to_owned(),
                                seq: event.seq,
                                pointer: slot.pointer.clone(),
                                digest: text,
                            });
                        }
                    }
                }
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

/// The digests of the values `export.redact` names, checked: every redaction names some
/// value, and none a value whose event's hash covers it (encodings 1 and 2).
fn withheld(export: &RunExport<'_>) -> Result<BTreeSet<[u8; 32]>, ExportError> {
    let run = export.run.as_str();
    let mut out = BTreeSet::new();
    if export.redact.is_empty() {
        return Ok(out);
    }
    let mut used = vec![false; export.redact.len()];
    for event in export.events {
        let bytes = match &event.payload {
            Payload::Inline(bytes) => Some(bytes.as_slice()),
            Payload::Blob(r) => export.blobs.get(&r.hash).map(Vec::as_slice),
        };
        let Some(bytes) = bytes else { continue };
        let applies = |r: &Redaction| r.seq.is_none_or(|s| s == event.seq);
        if event.kind_version == COMMITTED_PAYLOAD {
            let Ok(parsed) = CommittedPayload::parse(&event.kind, bytes) else {
                continue;
            };
            for slot in parsed.slots() {
                for name in &slot.clear {
                    let pointer = disclosed_pointer(&slot.pointer, Some(name));
                    if let Some(r) = export
                        .redact
                        .iter()
                        .find(|r| applies(r) && pointer_touches(&r.pointer, &pointer))
                    {
                        return Err(ExportError::CannotWithhold {
                            run: run.to_owned(),
                            redaction: r.to_string(),
                            seq: event.seq,
                            pointer,
                            version: event.kind_version,
                        });
                    }
                }
                for digest in &slot.digests {
                    let name = match export.disclosures.get(digest) {
                        Some(StoredDisclosure::Present(b)) => {
                            open_disclosure(b).ok().and_then(|d| d.name)
                        }
                        _ => None,
                    };
                    let pointer = disclosed_pointer(&slot.pointer, name.as_deref());
                    for (r, used) in export.redact.iter().zip(used.iter_mut()) {
                        if applies(r) && pointer_touches(&r.pointer, &pointer) {
                            *used = true;
                            out.insert(*digest);
                        }
                    }
                }
            }
        } else if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
            for pointer in content_pointers(&event.kind, &value) {
                if let Some(r) = export
                    .redact
                    .iter()
                    .find(|r| applies(r) && pointer_touches(&r.pointer, &pointer))
                {
                    return Err(ExportError::CannotWithhold {
                        run: run.to_owned(),
                        redaction: r.to_string(),
                        seq: event.seq,
                        pointer,
                        version: event.kind_version,
                    });
                }
            }
        }
    }
    if let Some((r, _)) = export.redact.iter().zip(&used).find(|(_, used)| !**used) {
        return Err(ExportError::NothingThere {
            run: run.to_owned(),
            redaction: r.to_string(),
        });
    }
    Ok(out)
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
