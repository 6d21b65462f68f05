//! Checking an export offline (`docket verify-export FILE`): every line against the
//! bytes it carries, the chain, the Merkle tree head and the signed checkpoint. It reads
//! only the file: nothing here trusts the data directory the export came from.

use std::collections::BTreeMap;
use std::io::BufRead;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use docket_decider::{
    COMMITTED_PAYLOAD, CommittedPayload, DisclosureDigest, REFERENCED_PAYLOAD, ReferencedPayload,
    digest_text, open_disclosure, parse_digest,
};
use docket_store::merkle::{TreeBuilder, TreeHash, leaf_hash};
use docket_store::{Event, Hash, Payload, StreamId, event_hash, genesis};
use serde_json::Value;
use serde_json::value::RawValue;

use super::jsonl::{EXPORT_FORMAT, EXPORT_VERSION, header_value};
use crate::checkpoint::{SignedCheckpoint, run_origin};
use crate::note::VerifierKey;

/// The first thing wrong with an export: its line (from 1) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {fault}")]
pub struct BadLine {
    pub line: usize,
    pub fault: LineFault,
}

/// What is wrong with a line, in the words of docs/export-format.md.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineFault {
    #[error("the file is empty: an export starts with its header line")]
    Empty,
    #[error("not a JSON object: {0}")]
    NotJson(String),
    #[error(
        "key `{0}` appears twice in one object: JSON readers differ on which copy they keep, so each key of an export appears once"
    )]
    DuplicateKey(String),
    #[error("could not read the file: {0}")]
    Unreadable(String),
    #[error("expected a {expected} line, found {found}")]
    UnexpectedLine {
        expected: &'static str,
        found: String,
    },
    #[error("field `{0}` is missing or has the wrong type")]
    Field(&'static str),
    #[error("field `{0}` is not part of the export format")]
    UnknownField(String),
    #[error("this is a {found} export; this build reads {EXPORT_FORMAT} version {EXPORT_VERSION}")]
    UnsupportedFormat { found: String },
    #[error("`record` is not base64: {0}")]
    NotBase64(&'static str),
    #[error("`record` does not decode as an event record: {0}")]
    BadRecord(String),
    #[error(
        "`{field}` says {in_line}, but the record (the bytes the hashes cover) says {in_record}"
    )]
    Differs {
        field: &'static str,
        in_line: String,
        in_record: String,
    },
    #[error("event of run {found} in the export of run {expected}")]
    ForeignRun { expected: String, found: String },
    #[error(
        "expected event {expected} here, found event {found}: events are missing, repeated or out of order"
    )]
    OutOfSequence { expected: u64, found: u64 },
    #[error(
        "`prev` is {found}, but the previous event hashes to {expected}: the chain is broken here"
    )]
    BrokenLink { expected: Hash, found: Hash },
    #[error(
        "the event's hash is recorded as {recorded} but its record hashes to {computed}: it was changed after it was written"
    )]
    WrongHash { recorded: Hash, computed: Hash },
    #[error("the blob's content hashes to {computed}, not to {recorded}, or its length differs")]
    WrongBlob { recorded: Hash, computed: Hash },
    #[error("the header promises {promised} events, the export holds {found}")]
    WrongCount { promised: u64, found: u64 },
    #[error(
        "the tree head says {found_size} leaves with root {found_root}; the events give {size} leaves with root {root}"
    )]
    WrongTree {
        found_size: u64,
        found_root: String,
        size: u64,
        root: String,
    },
    #[error("the export ends before its tree head line: it was cut short")]
    Truncated,
    #[error("nothing may follow the {0} line")]
    Trailing(&'static str),
    #[error("the checkpoint does not check: {0}")]
    BadCheckpoint(String),
    #[error("the export ends without the signed checkpoint the key you gave should have signed")]
    Unsigned,
    #[error(
        "the content at {pointer} (blob {hash}) of the event before has no `content` line: each follows the event that first refers to it"
    )]
    MissingContent { pointer: String, hash: Hash },
    #[error("content {found} is not the content expected here ({expected})")]
    UnexpectedContent { found: Hash, expected: String },
    #[error("the event's payload does not read as encoding 2: {0}")]
    BadReferences(String),
    #[error("the event's payload does not read as encoding 3: {0}")]
    BadCommitments(String),
    #[error(
        "the value at {pointer} (digest {digest}) of the event before has no `disclosure` or `withheld` line: each follows the event that first commits to it"
    )]
    MissingDisclosure { pointer: String, digest: String },
    #[error("digest {found} is not the one expected here ({expected})")]
    UnexpectedDisclosure { found: String, expected: String },
    #[error(
        "the disclosure does not hash to its digest {digest}: it is not the value committed to"
    )]
    WrongDisclosure { digest: String },
    #[error("the disclosure of the value at {pointer} is not one: {why}")]
    MalformedDisclosure { pointer: String, why: String },
}

/// What a sound export holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportSummary {
    pub run: String,
    pub events: u64,
    pub root: TreeHash,
    /// The signed checkpoint, when the export carries one (checked).
    pub checkpoint: Option<SealSummary>,
    /// Values the export discloses, and withholds (redacted or shredded).
    pub disclosed: u64,
    pub withheld: u64,
}

/// What a checked checkpoint line says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealSummary {
    /// The checkpoint's origin (`<instance>/run/<run id>`).
    pub origin: String,
    /// The key that signed it, `name+keyid`.
    pub key: String,
    /// Whether that key is the one the caller trusted, rather than the one the export
    /// carries.
    pub key_trusted: bool,
    /// The signed note, as an auditor keeps it.
    pub note: String,
}

fn fault(line: usize, fault: LineFault) -> BadLine {
    BadLine { line, fault }
}

/// Checks an export line by line and stops at the first bad line. With `trusted`, the
/// checkpoint must be signed by that key (one the auditor obtained out of band); without
/// it, the key the export carries is used, which proves only that the file is
/// consistent with itself.
pub fn verify_export(
    input: impl BufRead,
    trusted: Option<&VerifierKey>,
) -> Result<ExportSummary, BadLine> {
    let mut lines = Lines {
        inner: input.lines(),
        last: 0,
    };
    let (n, header, _) = lines
        .next_object()?
        .ok_or_else(|| fault(1, LineFault::Empty))?;
    let header_line = n;
    expect_type(n, &header, "header")?;
    let format = str_field(n, &header, "format")?;
    let version = u64_field(n, &header, "version")?;
    // Version 1 (before `content` lines) is read too: its events are all in encoding 1.
    if format != EXPORT_FORMAT || !(1..=u64::from(EXPORT_VERSION)).contains(&version) {
        return Err(fault(
            n,
            LineFault::UnsupportedFormat {
                found: format!("{format} version {version}"),
            },
        ));
    }
    let run_text = str_field(n, &header, "run")?;
    let run = StreamId::new(run_text).map_err(|_| fault(n, LineFault::Field("run")))?;
    let promised = u64_field(n, &header, "events")?;
    let mut expected = header_value(&run, promised);
    expected["version"] = Value::from(version);
    if let Some((key, found)) = first_difference(&header, &expected) {
        return Err(fault(
            n,
            LineFault::Differs {
                field: "header",
                in_line: format!("{key}: {found}"),
                in_record: format!(
                    "{key}: {}",
                    expected
                        .get(&key)
                        .map(Value::to_string)
                        .unwrap_or_else(|| "absent".into())
                ),
            },
        ));
    }

    let mut tree = TreeBuilder::new();
    let mut prev = genesis(&run);
    let mut content = ContentLines::default();
    let mut values = DisclosureLines::default();
    loop {
        let Some((n, line, text)) = lines.next_object()? else {
            return Err(fault(lines.last + 1, LineFault::Truncated));
        };
        let kind = str_field(n, &line, "type")?;
        if kind != "content" {
            content.none_pending(n)?;
        }
        if kind != "disclosure" && kind != "withheld" {
            values.none_pending(n)?;
        }
        match kind {
            "content" if version >= 2 => content.given(n, &line)?,
            "disclosure" | "withheld" if version >= 3 => values.given(n, &line)?,
            "event" => {
                let (event, payload) =
                    check_event(n, &line, &text, &run, (tree.size() + 1, version), prev)?;
                if event.kind_version == REFERENCED_PAYLOAD {
                    content.referred(n, &event, &payload)?;
                }
                if event.kind_version == COMMITTED_PAYLOAD && version >= 3 {
                    values.committed(n, &event, &payload)?;
                }
                prev = event.hash;
                tree.push(leaf_hash(&docket_store::event_record(&event)));
            }
            "tree" => {
                let size = u64_field(n, &line, "size")?;
                let root = str_field(n, &line, "root")?;
                let computed = tree.root();
                if size != tree.size() || root != STANDARD.encode(computed.0) {
                    return Err(fault(
                        n,
                        LineFault::WrongTree {
                            found_size: size,
                            found_root: root.to_owned(),
                            size: tree.size(),
                            root: STANDARD.encode(computed.0),
                        },
                    ));
                }
                if promised != tree.size() {
                    return Err(fault(
                        header_line,
                        LineFault::WrongCount {
                            promised,
                            found: tree.size(),
                        },
                    ));
                }
                let checkpoint = match lines.next_object()? {
                    // An auditor who names the key they trust expects its signature.
                    None if trusted.is_some() => {
                        return Err(fault(lines.last + 1, LineFault::Unsigned));
                    }
                    None => None,
                    Some((n, line, _)) => {
                        let seal =
                            check_checkpoint(n, &line, &run, tree.size(), &computed, trusted)?;
                        if let Some((n, _, _)) = lines.next_object()? {
                            return Err(fault(n, LineFault::Trailing("checkpoint")));
                        }
                        Some(seal)
                    }
                };
                return Ok(ExportSummary {
                    run: run_text.to_owned(),
                    events: tree.size(),
                    root: computed,
                    checkpoint,
                    disclosed: values.disclosed,
                    withheld: values.withheld,
                });
            }
            other => {
                return Err(fault(
                    n,
                    LineFault::UnexpectedLine {
                        expected: "content, disclosure, withheld, event or tree",
                        found: format!("a `{other}` line"),
                    },
                ));
            }
        }
    }
}

/// The export's lines, numbered from 1, blank lines skipped.
struct Lines<R> {
    inner: std::io::Lines<R>,
    /// The number of the last line read.
    last: usize,
}

impl<R: BufRead> Lines<R> {
    /// The next line's number, its object and its text.
    fn next_object(&mut self) -> Result<Option<(usize, Object, String)>, BadLine> {
        for text in self.inner.by_ref() {
            self.last += 1;
            let n = self.last;
            let text = text.map_err(|e| fault(n, LineFault::Unreadable(e.to_string())))?;
            if text.trim().is_empty() {
                continue;
            }
            return match serde_json::from_str::<OneReading>(&text) {
                Ok(OneReading(Value::Object(map))) => Ok(Some((n, map, text))),
                Ok(_) => Err(fault(
                    n,
                    LineFault::NotJson("a JSON value that is not an object".into()),
                )),
                Err(e) => Err(fault(
                    n,
                    match e.to_string().strip_prefix(DUPLICATE_KEY) {
                        Some(rest) => LineFault::DuplicateKey(
                            rest.split(DUPLICATE_KEY_END)
                                .next()
                                .unwrap_or(rest)
                                .to_owned(),
                        ),
                        None => LineFault::NotJson(e.to_string()),
                    },
                )),
            };
        }
        Ok(None)
    }
}

type Object = serde_json::Map<String, Value>;

/// What a duplicated key's parse error starts with, before the key.
const DUPLICATE_KEY: &str = "duplicate key `";
const DUPLICATE_KEY_END: &str = "` ";

/// A JSON value read as every conforming reader reads it: an object that names a key twice
/// (which readers resolve differently, RFC 8259 §4, RFC 7493 §2.3) is refused, at any depth.
struct OneReading(Value);

impl<'de> serde::Deserialize<'de> for OneReading {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OneReadingVisitor).map(OneReading)
    }
}

struct OneReadingVisitor;

impl<'de> serde::de::Visitor<'de> for OneReadingVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(OneReading(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Object::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "{DUPLICATE_KEY}{key}{DUPLICATE_KEY_END}"
                )));
            }
            let OneReading(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

fn expect_type(n: usize, line: &Object, expected: &'static str) -> Result<(), BadLine> {
    let found = str_field(n, line, "type")?;
    if found != expected {
        return Err(fault(
            n,
            LineFault::UnexpectedLine {
                expected,
                found: format!("a `{found}` line"),
            },
        ));
    }
    Ok(())
}

fn str_field<'a>(n: usize, line: &'a Object, name: &'static str) -> Result<&'a str, BadLine> {
    line.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| fault(n, LineFault::Field(name)))
}

fn u64_field(n: usize, line: &Object, name: &'static str) -> Result<u64, BadLine> {
    line.get(name)
        .and_then(Value::as_u64)
        .ok_or_else(|| fault(n, LineFault::Field(name)))
}

fn differs(
    n: usize,
    field: &'static str,
    in_line: impl ToString,
    in_record: impl ToString,
) -> BadLine {
    fault(
        n,
        LineFault::Differs {
            field,
            in_line: in_line.to_string(),
            in_record: in_record.to_string(),
        },
    )
}

/// Every field an event line may have (docs/export-format.md).
const EVENT_FIELDS: [&str; 13] = [
    "type",
    "seq",
    "leaf_index",
    "kind",
    "kind_version",
    "recorded_at_ns",
    "policy",
    "payload",
    "payload_bytes",
    "payload_blob",
    "prev",
    "hash",
    "record",
];

/// Checks one event line: its record decodes, says what the line says, links to `prev`
/// and hashes to what it records.
/// A decimal integer written as docket writes one (no sign but `-`, no leading zero, no
/// spaces), or `None`.
fn canonical_integer(text: &str) -> Option<i64> {
    let value: i64 = text.parse().ok()?;
    (value.to_string() == text).then_some(value)
}

fn check_event(
    n: usize,
    line: &Object,
    text: &str,
    run: &StreamId,
    (seq, version): (u64, u64),
    prev: Hash,
) -> Result<(Event, Vec<u8>), BadLine> {
    if let Some(key) = line.keys().find(|k| !EVENT_FIELDS.contains(&k.as_str())) {
        return Err(fault(n, LineFault::UnknownField(key.clone())));
    }
    let record = STANDARD
        .decode(str_field(n, line, "record")?)
        .map_err(|_| fault(n, LineFault::NotBase64("record")))?;
    let event = docket_store::decode_event_record(&record)
        .map_err(|e| fault(n, LineFault::BadRecord(e.to_string())))?;
    if &event.stream != run {
        return Err(fault(
            n,
            LineFault::ForeignRun {
                expected: run.to_string(),
                found: event.stream.to_string(),
            },
        ));
    }
    if event.seq != seq {
        return Err(fault(
            n,
            LineFault::OutOfSequence {
                expected: seq,
                found: event.seq,
            },
        ));
    }
    let line_seq = u64_field(n, line, "seq")?;
    if line_seq != event.seq {
        return Err(differs(n, "seq", line_seq, event.seq));
    }
    let leaf_index = u64_field(n, line, "leaf_index")?;
    if leaf_index != event.seq - 1 {
        return Err(differs(n, "leaf_index", leaf_index, event.seq - 1));
    }
    let kind = str_field(n, line, "kind")?;
    if kind != event.kind {
        return Err(differs(n, "kind", kind, &event.kind));
    }
    let kind_version = u64_field(n, line, "kind_version")?;
    if kind_version != u64::from(event.kind_version) {
        return Err(differs(n, "kind_version", kind_version, event.kind_version));
    }
    // A decimal string from export version 4 (one reading for readers of numbers as
    // doubles), an integer before.
    let recorded_at = match line.get("recorded_at_ns") {
        Some(Value::String(text)) if version >= 4 => canonical_integer(text),
        Some(value) if version < 4 => value.as_i64(),
        _ => None,
    }
    .ok_or_else(|| fault(n, LineFault::Field("recorded_at_ns")))?;
    if recorded_at != event.recorded_at.0 {
        return Err(differs(
            n,
            "recorded_at_ns",
            recorded_at,
            event.recorded_at.0,
        ));
    }
    let policy = match line.get("policy") {
        Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.as_str()),
        _ => return Err(fault(n, LineFault::Field("policy"))),
    };
    let recorded_policy = event.policy.map(|h| h.to_hex());
    if policy != recorded_policy.as_deref() {
        return Err(differs(
            n,
            "policy",
            policy.unwrap_or("null"),
            recorded_policy.as_deref().unwrap_or("null"),
        ));
    }
    let payload = check_payload(n, line, text, &event)?;
    let line_prev = str_field(n, line, "prev")?;
    if line_prev != event.prev.to_hex() {
        return Err(differs(n, "prev", line_prev, event.prev));
    }
    if event.prev != prev {
        return Err(fault(
            n,
            LineFault::BrokenLink {
                expected: prev,
                found: event.prev,
            },
        ));
    }
    let line_hash = str_field(n, line, "hash")?;
    if line_hash != event.hash.to_hex() {
        return Err(differs(n, "hash", line_hash, event.hash));
    }
    let computed = event_hash(&event.prev, &record[..record.len() - 64]);
    if computed != event.hash {
        return Err(fault(
            n,
            LineFault::WrongHash {
                recorded: event.hash,
                computed,
            },
        ));
    }
    Ok((event, payload))
}

/// A `content` line: exactly `type`, `hash`, `len`, `content`; the content's plain
/// BLAKE3 and length are the ones named.
fn check_content(n: usize, line: &Object) -> Result<(Hash, u64), BadLine> {
    if let Some(key) = line
        .keys()
        .find(|k| !["type", "hash", "len", "content"].contains(&k.as_str()))
    {
        return Err(fault(n, LineFault::UnknownField(key.clone())));
    }
    let text = str_field(n, line, "hash")?;
    // One spelling only: lower-case hex, as written.
    let hash = Hash::from_hex(text)
        .filter(|h| h.to_hex() == text)
        .ok_or_else(|| fault(n, LineFault::Field("hash")))?;
    let len = u64_field(n, line, "len")?;
    let content = STANDARD
        .decode(str_field(n, line, "content")?)
        .map_err(|_| fault(n, LineFault::NotBase64("content")))?;
    let computed = docket_store::blob_hash(&content);
    if computed != hash || content.len() as u64 != len {
        return Err(fault(
            n,
            LineFault::WrongBlob {
                recorded: hash,
                computed,
            },
        ));
    }
    Ok((hash, len))
}

/// The content lines (docs/export-format.md): each blob an encoding-2 event refers to
/// is given once, right after the event that first refers to it, in the order it
/// refers to them; so every content line is checked where it stands.
#[derive(Default)]
struct ContentLines {
    /// Content given so far, with its length.
    given: BTreeMap<Hash, u64>,
    /// What the last event referred to for the first time, still to be given.
    pending: std::collections::VecDeque<(String, Hash, u64)>,
}

impl ContentLines {
    /// Notes the references of an encoding-2 payload: content given before must have
    /// the length referred to; content not given yet must follow.
    fn referred(&mut self, n: usize, event: &Event, payload: &[u8]) -> Result<(), BadLine> {
        let parsed = ReferencedPayload::parse(&event.kind, payload)
            .map_err(|e| fault(n, LineFault::BadReferences(e.message)))?;
        for r in parsed.refs() {
            let hash = Hash(r.hash);
            match self.given.get(&hash) {
                Some(len) if *len == r.len => {}
                Some(len) => {
                    return Err(differs(n, "a reference's len", r.len, len));
                }
                None if self.pending.iter().any(|p| p.1 == hash) => {}
                None => self.pending.push_back((r.pointer.clone(), hash, r.len)),
            }
        }
        Ok(())
    }

    /// A content line: the next content expected, whole.
    fn given(&mut self, n: usize, line: &Object) -> Result<(), BadLine> {
        let (hash, len) = check_content(n, line)?;
        match self.pending.front() {
            Some((_, want, want_len)) if *want == hash && *want_len == len => {
                self.pending.pop_front();
                self.given.insert(hash, len);
                Ok(())
            }
            expected => Err(fault(
                n,
                LineFault::UnexpectedContent {
                    found: hash,
                    expected: expected.map_or_else(
                        || "none: the event before refers to no content not given yet".to_owned(),
                        |(p, h, _)| format!("the content at {p} of the event before, blob {h}"),
                    ),
                },
            )),
        }
    }

    /// Before any other line: the last event's content was all given.
    fn none_pending(&self, n: usize) -> Result<(), BadLine> {
        match self.pending.front() {
            None => Ok(()),
            Some((pointer, hash, _)) => Err(fault(
                n,
                LineFault::MissingContent {
                    pointer: pointer.clone(),
                    hash: *hash,
                },
            )),
        }
    }
}

/// The disclosure and withheld lines (docs/export-format.md): each value an encoding-3
/// event commits to is given once, disclosed or withheld, right after the event that
/// first commits to it, in the order its payload lists the digests.
#[derive(Default)]
struct DisclosureLines {
    /// Digests given so far.
    given: std::collections::BTreeSet<DisclosureDigest>,
    /// What the last event committed to for the first time: pointer, digest, whether
    /// its disclosure carries a name (a value under an object's key).
    pending: std::collections::VecDeque<(String, DisclosureDigest, bool)>,
    disclosed: u64,
    withheld: u64,
}

impl DisclosureLines {
    fn committed(&mut self, n: usize, event: &Event, payload: &[u8]) -> Result<(), BadLine> {
        let parsed = CommittedPayload::parse(&event.kind, payload)
            .map_err(|e| fault(n, LineFault::BadCommitments(e.message)))?;
        for slot in parsed.slots() {
            for digest in &slot.digests {
                if !self.given.contains(digest) && !self.pending.iter().any(|p| p.1 == *digest) {
                    self.pending
                        .push_back((slot.pointer.clone(), *digest, slot.object));
                }
            }
        }
        Ok(())
    }

    fn given(&mut self, n: usize, line: &Object) -> Result<(), BadLine> {
        let kind = str_field(n, line, "type")?;
        let fields: &[&str] = if kind == "disclosure" {
            &["type", "digest", "disclosure"]
        } else {
            &["type", "digest", "why"]
        };
        if let Some(key) = line.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(fault(n, LineFault::UnknownField(key.clone())));
        }
        let text = str_field(n, line, "digest")?;
        let digest = parse_digest(text).ok_or_else(|| fault(n, LineFault::Field("digest")))?;
        let Some((pointer, want, named)) = self.pending.front().cloned() else {
            return Err(fault(
                n,
                LineFault::UnexpectedDisclosure {
                    found: text.to_owned(),
                    expected: "none: the event before commits to no value not given yet".into(),
                },
            ));
        };
        if want != digest {
            return Err(fault(
                n,
                LineFault::UnexpectedDisclosure {
                    found: text.to_owned(),
                    expected: format!(
                        "the value at {pointer} of the event before, digest {}",
                        digest_text(&want)
                    ),
                },
            ));
        }
        if kind == "disclosure" {
            let disclosure = str_field(n, line, "disclosure")?;
            // RFC 9901: the digest is over the base64url text exactly as given.
            if disclosure_digest_of_text(disclosure) != digest {
                return Err(fault(
                    n,
                    LineFault::WrongDisclosure {
                        digest: text.to_owned(),
                    },
                ));
            }
            let bytes = URL_SAFE_NO_PAD
                .decode(disclosure)
                .map_err(|_| fault(n, LineFault::NotBase64("disclosure")))?;
            let opened = open_disclosure(&bytes).map_err(|why| {
                fault(
                    n,
                    LineFault::MalformedDisclosure {
                        pointer: pointer.clone(),
                        why,
                    },
                )
            })?;
            if opened.name.is_some() != named {
                let why = if named {
                    "the value under a key is disclosed as [salt, name, value]"
                } else {
                    "a whole value is disclosed as [salt, value]"
                };
                return Err(fault(
                    n,
                    LineFault::MalformedDisclosure {
                        pointer,
                        why: why.into(),
                    },
                ));
            }
            self.disclosed += 1;
        } else {
            let why = str_field(n, line, "why")?;
            if why != "redacted" && why != "shredded" {
                return Err(fault(n, LineFault::Field("why")));
            }
            self.withheld += 1;
        }
        self.pending.pop_front();
        self.given.insert(digest);
        Ok(())
    }

    fn none_pending(&self, n: usize) -> Result<(), BadLine> {
        match self.pending.front() {
            None => Ok(()),
            Some((pointer, digest, _)) => Err(fault(
                n,
                LineFault::MissingDisclosure {
                    pointer: pointer.clone(),
                    digest: digest_text(digest),
                },
            )),
        }
    }
}

/// SHA-256 of a disclosure's base64url text, as given (RFC 9901 §4.2.3).
fn disclosure_digest_of_text(text: &str) -> DisclosureDigest {
    use sha2::Digest as _;
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// The payload the line shows is the one the record covers (directly, or through its
/// blob's hash).
fn check_payload(n: usize, line: &Object, text: &str, event: &Event) -> Result<Vec<u8>, BadLine> {
    let bytes = match &event.payload {
        Payload::Inline(bytes) => {
            if line.contains_key("payload_blob") {
                return Err(differs(n, "payload_blob", "a blob", "an inline payload"));
            }
            bytes.clone()
        }
        Payload::Blob(r) => {
            let Some(Value::Object(blob)) = line.get("payload_blob") else {
                return Err(fault(n, LineFault::Field("payload_blob")));
            };
            let content = blob
                .get("content")
                .and_then(Value::as_str)
                .and_then(|c| STANDARD.decode(c).ok())
                .ok_or_else(|| fault(n, LineFault::Field("payload_blob.content")))?;
            let named = blob.get("hash").and_then(Value::as_str);
            if named != Some(r.hash.to_hex().as_str()) {
                return Err(differs(
                    n,
                    "payload_blob.hash",
                    named.unwrap_or("absent"),
                    r.hash,
                ));
            }
            let len = blob.get("len").and_then(Value::as_u64);
            if len != Some(r.len) {
                return Err(differs(
                    n,
                    "payload_blob.len",
                    len.map_or("absent".into(), |l| l.to_string()),
                    r.len,
                ));
            }
            if blob.len() != 3 {
                return Err(fault(n, LineFault::Field("payload_blob")));
            }
            let computed = docket_store::blob_hash(&content);
            if computed != r.hash || content.len() as u64 != r.len {
                return Err(fault(
                    n,
                    LineFault::WrongBlob {
                        recorded: r.hash,
                        computed,
                    },
                ));
            }
            content
        }
    };
    match (line.get("payload"), line.get("payload_bytes")) {
        (Some(_), None) => {
            // The text exactly, not the value: `1e5` and `1E5` are one value, two records.
            #[derive(serde::Deserialize)]
            struct Shown<'a> {
                #[serde(borrow)]
                payload: &'a RawValue,
            }
            let shown: Shown<'_> =
                serde_json::from_str(text).map_err(|_| fault(n, LineFault::Field("payload")))?;
            if shown.payload.get().as_bytes() != bytes.as_slice() {
                return Err(differs(
                    n,
                    "payload",
                    shown.payload.get(),
                    String::from_utf8_lossy(&bytes),
                ));
            }
        }
        (None, Some(Value::String(b64))) => {
            let shown = STANDARD
                .decode(b64)
                .map_err(|_| fault(n, LineFault::NotBase64("payload_bytes")))?;
            if shown != bytes {
                return Err(differs(n, "payload_bytes", b64, STANDARD.encode(&bytes)));
            }
        }
        _ => return Err(fault(n, LineFault::Field("payload"))),
    }
    Ok(bytes)
}

/// The first key (in order) whose value differs between two JSON objects, with the
/// value found.
fn first_difference(found: &Object, expected: &Value) -> Option<(String, String)> {
    let Value::Object(expected) = expected else {
        return Some(("header".into(), "not an object".into()));
    };
    let keys: std::collections::BTreeSet<&String> = found.keys().chain(expected.keys()).collect();
    keys.into_iter()
        .find(|k| found.get(*k) != expected.get(*k))
        .map(|k| {
            let value = found
                .get(k)
                .map(Value::to_string)
                .unwrap_or_else(|| "absent".into());
            (k.clone(), value)
        })
}

/// Checks the checkpoint line: a signed note of the run's tree head, signed by the
/// trusted key (or the key the line carries).
fn check_checkpoint(
    n: usize,
    line: &Object,
    run: &StreamId,
    size: u64,
    root: &TreeHash,
    trusted: Option<&VerifierKey>,
) -> Result<SealSummary, BadLine> {
    let bad = |why: String| fault(n, LineFault::BadCheckpoint(why));
    expect_type(n, line, "checkpoint")?;
    if let Some(key) = line
        .keys()
        .find(|k| !["type", "note", "verifier_key"].contains(&k.as_str()))
    {
        return Err(fault(n, LineFault::UnknownField(key.clone())));
    }
    let note = str_field(n, line, "note")?;
    let carried = VerifierKey::parse(str_field(n, line, "verifier_key")?)
        .map_err(|e| bad(format!("verifier_key: {e}")))?;
    // The key the file names must be the one the auditor trusts: a file naming a key that
    // never signed it is not sound, whoever else signed it.
    if let Some(trusted) = trusted
        && trusted != &carried
    {
        return Err(bad(format!(
            "the export names verifier key {}, not the key you gave ({})",
            carried.label(),
            trusted.label()
        )));
    }
    let key = trusted.unwrap_or(&carried);
    let signed = SignedCheckpoint::parse(note).map_err(|e| bad(e.to_string()))?;
    signed
        .signed_by(std::slice::from_ref(key))
        .map_err(|e| bad(e.to_string()))?;
    let checkpoint = &signed.checkpoint;
    if checkpoint.size != size || checkpoint.root != *root {
        return Err(bad(format!(
            "it signs {} events with root {}, the export holds {size} with root {}",
            checkpoint.size,
            STANDARD.encode(checkpoint.root.0),
            STANDARD.encode(root.0)
        )));
    }
    // One origin rule, as `docket verify` reads seals: the signing key's name, `/run/`,
    // the run id (docs/checkpoints.md#sealing).
    let expected = run_origin(key.name(), run.as_str());
    if checkpoint.origin != expected {
        return Err(bad(format!(
            "its origin {:?} is not {expected:?}: the name of the key that signed it ({}), /run/, the run id",
            checkpoint.origin,
            key.name()
        )));
    }
    Ok(SealSummary {
        origin: checkpoint.origin.clone(),
        key: key.label(),
        key_trusted: trusted.is_some(),
        note: note.to_owned(),
    })
}
