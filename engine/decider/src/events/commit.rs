//! Payload encoding 3: values committed apart, so that they can be withheld from an export
//! and erased, while the chain, the Merkle tree and the signatures still verify
//! (docs/events.md#values-committed-apart).
//!
//! At each content position of encoding 2 ([`crate::CONTENT_POSITIONS`]) the value is
//! replaced by salted commitments in the style of RFC 9901 (SD-JWT): an object by
//! `{"_sd": [digest, ...]}`, one digest per top-level key, each the commitment to a
//! disclosure `[salt, name, value]`; any other value (a string, an array, a number, null)
//! by `{"...": digest}`, the commitment to `[salt, value]`. A disclosure is the RFC 8785
//! (JCS) canonical JSON of that array; its digest is SHA-256 over the disclosure's
//! base64url text (no padding), written base64url: exactly RFC 9901's digest. Every value
//! at a position is committed, whatever its size or shape, so nothing there is ever read
//! as content. The table, the granularity and the digest are part of the format.
//!
//! The log records only the committed payload; the disclosures live outside the hashed
//! record (the store keeps them per run, erasable: store/FORMAT.md §13). Pure: salts come
//! from the caller (the runtime draws them from the operating system), and reading takes
//! each disclosure from the caller.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use super::content::{content_positions, walk};
use super::event::{DecodeError, RunEvent};

/// `kind_version` of an event in payload encoding 3: the values at the kind's content
/// positions replaced by salted commitments.
pub const COMMITTED_PAYLOAD: u32 = 3;

/// Bytes of salt per disclosure: 128 bits, as RFC 9901 §9.3 recommends.
pub const SALT_BYTES: usize = 16;

/// Where encoding 3 commits to values: encoding 2's content positions
/// ([`crate::CONTENT_POSITIONS`]), and in an answer every action's content, not only a
/// handoff's payload (a finish's output, a write's content, a spawn's or a capability
/// request's inputs), so that what an agent answered can be withheld wherever it went.
#[must_use]
pub fn committed_positions(kind: &str) -> &'static [&'static str] {
    const RESPONDED: &[&str] = &[
        "/response/actions/*/payload",
        "/response/actions/*/output",
        "/response/actions/*/content",
        "/response/actions/*/inputs",
    ];
    match kind {
        "agent.responded" => RESPONDED,
        other => content_positions(other),
    }
}

/// SHA-256 of a disclosure's base64url text: what a payload commits to.
pub type DisclosureDigest = [u8; 32];

/// One committed value: its digest and its disclosure (RFC 8785 JSON of `[salt, name,
/// value]` or `[salt, value]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disclosure {
    /// SHA-256 of the base64url text of `bytes`.
    pub digest: DisclosureDigest,
    /// The disclosure's canonical JSON.
    pub bytes: Vec<u8>,
}

/// An event in encoding 3: the payload the log records, and the disclosures of the values
/// it commits to (each once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedEvent {
    /// The payload the log records (and its hash covers).
    pub payload: Vec<u8>,
    /// What the payload commits to, in the order first committed.
    pub disclosures: Vec<Disclosure>,
}

/// The digest of a disclosure: SHA-256 over its base64url text (RFC 9901 §4.2.3).
#[must_use]
pub fn disclosure_digest(disclosure: &[u8]) -> DisclosureDigest {
    Sha256::digest(URL_SAFE_NO_PAD.encode(disclosure).as_bytes()).into()
}

/// A digest as payloads and exports write it: base64url without padding (43 characters).
#[must_use]
pub fn digest_text(digest: &DisclosureDigest) -> String {
    URL_SAFE_NO_PAD.encode(digest)
}

/// The digest a payload or an export writes, if it is one.
#[must_use]
pub fn parse_digest(text: &str) -> Option<DisclosureDigest> {
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    let digest: DisclosureDigest = bytes.try_into().ok()?;
    // One spelling only: base64url has no other for 32 bytes, but refuse trailing bits.
    (digest_text(&digest) == text).then_some(digest)
}

/// A disclosure read back: its salt, the key it stands for (`None` for a whole value)
/// and the value.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenedDisclosure {
    /// The salt, base64url.
    pub salt: String,
    /// The object key, for a value under a content position's top-level key.
    pub name: Option<String>,
    /// The committed value.
    pub value: Value,
}

/// Reads a disclosure: a JSON array `[salt, name, value]` or `[salt, value]`, salt and
/// name strings.
///
/// # Errors
/// What is wrong with it, in words.
pub fn open_disclosure(bytes: &[u8]) -> Result<OpenedDisclosure, String> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("the disclosure is not JSON: {e}"))?;
    let Value::Array(mut items) = value else {
        return Err("the disclosure is not a JSON array".into());
    };
    let (salt, name, value) = match items.len() {
        2 => {
            let value = items.pop().unwrap_or(Value::Null);
            (items.pop(), None, value)
        }
        3 => {
            let value = items.pop().unwrap_or(Value::Null);
            let name = match items.pop() {
                Some(Value::String(name)) => name,
                _ => return Err("the disclosure's name is not a string".into()),
            };
            (items.pop(), Some(name), value)
        }
        n => return Err(format!("the disclosure has {n} elements, not 2 or 3")),
    };
    let Some(Value::String(salt)) = salt else {
        return Err("the disclosure's salt is not a string".into());
    };
    Ok(OpenedDisclosure { salt, name, value })
}

impl RunEvent {
    /// This event in payload encoding 3 ([`COMMITTED_PAYLOAD`]). `salt` gives the salt of
    /// a value from what it commits to (a stable prefix, then the JCS text of the name and
    /// value), so a caller may give the same value the same salt within a run and store
    /// its disclosure once. `None` when a committed value holds a number RFC 8785 cannot
    /// carry exactly (a float with an integral value such as `1.0`, `-0.0`, or an integer
    /// beyond ±2^53): JCS would read it back as another number, so the caller records the
    /// event in encoding 2 instead.
    pub fn encode_committed(
        &self,
        salt: &mut dyn FnMut(&[u8]) -> [u8; SALT_BYTES],
    ) -> Option<CommittedEvent> {
        let positions = committed_positions(self.kind());
        if positions.is_empty() {
            return Some(CommittedEvent {
                payload: self.encode(),
                disclosures: Vec::new(),
            });
        }
        let mut value = serde_json::to_value(self).ok()?;
        let mut disclosures: Vec<Disclosure> = Vec::new();
        let mut exact = true;
        for position in positions {
            let steps: Vec<&str> = position.split('/').skip(1).collect();
            walk(&mut value, &steps, String::new(), &mut |_, slot| {
                if exact && !commit(slot, salt, &mut disclosures) {
                    exact = false;
                }
            });
        }
        exact.then(|| CommittedEvent {
            payload: docket_policies::canonical_json_bytes(&value),
            disclosures,
        })
    }
}

/// Replaces `slot` by its commitments, adding each new disclosure; false when a value is
/// not one JCS carries exactly.
fn commit(
    slot: &mut Value,
    salt: &mut dyn FnMut(&[u8]) -> [u8; SALT_BYTES],
    out: &mut Vec<Disclosure>,
) -> bool {
    let mut add = |name: Option<&str>, value: &Value| -> Option<String> {
        if !jcs_exact(value) {
            return None;
        }
        let value_text = serde_json_canonicalizer::to_vec(value).ok()?;
        let name_text = match name {
            Some(n) => Some(serde_json_canonicalizer::to_vec(&n).ok()?),
            None => None,
        };
        // What the salt is derived from: never the disclosure itself (it holds the salt).
        let mut material = Vec::with_capacity(value_text.len() + 64);
        material.extend_from_slice(b"docket disclosure v1\n");
        if let Some(n) = &name_text {
            material.extend_from_slice(n);
            material.push(b',');
        }
        material.extend_from_slice(&value_text);
        let salt_text = URL_SAFE_NO_PAD.encode(salt(&material));
        // JCS of an array: its elements' JCS, comma-separated, no whitespace.
        let mut bytes = Vec::with_capacity(material.len() + 30);
        bytes.extend_from_slice(b"[\"");
        bytes.extend_from_slice(salt_text.as_bytes());
        bytes.extend_from_slice(b"\",");
        if let Some(n) = &name_text {
            bytes.extend_from_slice(n);
            bytes.push(b',');
        }
        bytes.extend_from_slice(&value_text);
        bytes.push(b']');
        let digest = disclosure_digest(&bytes);
        if !out.iter().any(|d| d.digest == digest) {
            out.push(Disclosure { digest, bytes });
        }
        Some(digest_text(&digest))
    };
    let committed = match &*slot {
        Value::Object(map) => {
            let mut digests = Vec::with_capacity(map.len());
            let mut m = Map::new();
            for (name, value) in map.iter() {
                match add(Some(name), value) {
                    Some(d) => digests.push(Value::String(d)),
                    // A value JCS cannot carry exactly stays in the clear beside the
                    // digests, as an SD-JWT claim that is always disclosed; a key named
                    // `_sd` cannot, so such an event is not committed at all.
                    None if name == "_sd" => return false,
                    None => {
                        m.insert(name.clone(), value.clone());
                    }
                }
            }
            // Sorted, so the order tells nothing of the keys (RFC 9901 §4.2.4.1).
            digests.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            m.insert("_sd".into(), Value::Array(digests));
            Value::Object(m)
        }
        other => {
            let Some(d) = add(None, other) else {
                return false;
            };
            let mut m = Map::new();
            m.insert("...".into(), Value::String(d));
            Value::Object(m)
        }
    };
    *slot = committed;
    true
}

/// Whether RFC 8785's number form reads back as the same `serde_json` number: integers
/// within ±2^53, and floats that are not integral.
fn jcs_exact(value: &Value) -> bool {
    const LIMIT: u64 = 1 << 53;
    match value {
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u <= LIMIT
            } else if let Some(i) = n.as_i64() {
                i.unsigned_abs() <= LIMIT
            } else {
                n.as_f64()
                    .is_some_and(|f| f.is_finite() && f.fract() != 0.0)
            }
        }
        Value::Array(items) => items.iter().all(jcs_exact),
        Value::Object(map) => map.values().all(jcs_exact),
        _ => true,
    }
}

/// A content position of an encoding-3 payload: where it stands and the digests it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedSlot {
    /// The JSON pointer (RFC 6901) of the value in the plain payload.
    pub pointer: String,
    /// For an object, one digest per top-level key (`_sd`); else the one digest (`...`).
    pub digests: Vec<DisclosureDigest>,
    /// Whether the value was an object (its disclosures carry names).
    pub object: bool,
    /// For an object, the keys left in the clear beside `_sd` (values RFC 8785 cannot
    /// carry exactly): covered by the event's hash, never withheld.
    pub clear: Vec<String>,
}

/// What reading a committed value found in the data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DisclosureLookup {
    /// The disclosure's bytes.
    Present(Vec<u8>),
    /// The value was erased (`docket shred`): who, when and why, as recorded.
    Shredded(String),
    /// Nothing: the disclosure is missing.
    Missing,
}

/// The key of the marker that stands, in a plain payload, for a value `docket shred`
/// erased: `{"_shredded": {"by", "at_ms", "reason", "digest"}}`
/// (docs/events.md#values-committed-apart).
pub const SHREDDED: &str = "_shredded";

/// An encoding-3 payload opened: the plain payload, and where it holds shredded markers.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenedPayload {
    /// The plain payload, each erased value replaced by its marker.
    pub value: Value,
    /// JSON pointers (RFC 6901) into `value` of the markers, in slot order.
    pub shredded: Vec<String>,
}

/// The marker of an erased value, and the key it was the value of when the tombstone
/// names it (`docket shred` writes `names`: digest to key, for the keys it erased).
/// `note` is the tombstone's text: JSON with `by`, `reason`, `at_ms`, or anything else
/// (kept whole as `note`).
fn shredded_marker(digest: &DisclosureDigest, note: &str) -> (Option<String>, Value) {
    let text = digest_text(digest);
    let mut marker = Map::new();
    let mut name = None;
    match serde_json::from_str::<Value>(note) {
        Ok(Value::Object(fields)) => {
            for key in ["by", "at_ms", "reason"] {
                if let Some(v) = fields.get(key) {
                    marker.insert(key.to_owned(), v.clone());
                }
            }
            name = fields
                .get("names")
                .and_then(|n| n.get(&text))
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        _ => {
            marker.insert("note".to_owned(), Value::String(note.to_owned()));
        }
    }
    marker.insert("digest".to_owned(), Value::String(text));
    let mut outer = Map::new();
    outer.insert(SHREDDED.to_owned(), Value::Object(marker));
    (name, Value::Object(outer))
}

/// An encoding-3 payload, parsed: its committed positions, and the plain event once their
/// disclosures are supplied.
#[derive(Debug, Clone)]
pub struct CommittedPayload {
    kind: String,
    value: Value,
    slots: Vec<CommittedSlot>,
}

impl CommittedPayload {
    /// Parses `bytes` as an encoding-3 payload of `kind`: every value at a content
    /// position must be `{"_sd": [digest, ...]}` or `{"...": digest}`.
    ///
    /// # Errors
    /// [`DecodeError`] naming the first position that holds anything else.
    pub fn parse(kind: &str, bytes: &[u8]) -> Result<Self, DecodeError> {
        let err = |message: String| DecodeError {
            kind: kind.to_owned(),
            message,
        };
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| err(format!("payload: {e}")))?;
        let mut slots = Vec::new();
        let mut bad: Option<String> = None;
        let mut probe = value.clone();
        for position in committed_positions(kind) {
            let steps: Vec<&str> = position.split('/').skip(1).collect();
            walk(
                &mut probe,
                &steps,
                String::new(),
                &mut |pointer, slot| match parse_slot(slot) {
                    Some((digests, object, clear)) => slots.push(CommittedSlot {
                        pointer,
                        digests,
                        object,
                        clear,
                    }),
                    None if bad.is_none() => {
                        bad = Some(format!(
                            "the value at {pointer} is not a commitment \
                             (docs/events.md#values-committed-apart): {{\"_sd\": [digests], ...}} \
                             or {{\"...\": digest}}, each digest 43 base64url characters"
                        ));
                    }
                    None => {}
                },
            );
        }
        if let Some(message) = bad {
            return Err(err(message));
        }
        Ok(Self {
            kind: kind.to_owned(),
            value,
            slots,
        })
    }

    /// The committed positions, in table order, then document order.
    #[must_use]
    pub fn slots(&self) -> &[CommittedSlot] {
        &self.slots
    }

    /// The payload as recorded, parsed.
    #[must_use]
    pub fn committed(&self) -> &Value {
        &self.value
    }

    /// The plain payload (what encoding 1 records), each commitment replaced by what its
    /// disclosures say, a shredded value by its marker ([`CommittedPayload::open`]).
    ///
    /// # Errors
    /// As [`CommittedPayload::open`].
    pub fn resolve(
        &self,
        lookup: impl FnMut(&DisclosureDigest) -> DisclosureLookup,
    ) -> Result<Value, DecodeError> {
        Ok(self.open(lookup)?.value)
    }

    /// The plain payload (what encoding 1 records), each commitment replaced by what its
    /// disclosures say; `lookup` gives a disclosure by digest. A value `docket shred`
    /// erased reads as its marker, `{"_shredded": {"by", "at_ms", "reason", "digest"}}`
    /// ([`SHREDDED`]; docs/events.md#values-committed-apart), and its pointer is listed,
    /// so that a run with an erased value can still be read (and replay knows which
    /// decisions it cannot re-derive).
    ///
    /// # Errors
    /// [`DecodeError`] naming the position when a disclosure is missing, does not hash
    /// to its digest, or is not a disclosure of the right shape.
    pub fn open(
        &self,
        mut lookup: impl FnMut(&DisclosureDigest) -> DisclosureLookup,
    ) -> Result<OpenedPayload, DecodeError> {
        let err = |message: String| DecodeError {
            kind: self.kind.clone(),
            message,
        };
        let mut value = self.value.clone();
        let mut shredded = Vec::new();
        for slot in &self.slots {
            let mut object = Map::new();
            if slot.object
                && let Some(Value::Object(clear)) = self.value.pointer(&slot.pointer)
            {
                for (k, v) in clear {
                    if k != "_sd" {
                        object.insert(k.clone(), v.clone());
                    }
                }
            }
            let mut whole = Value::Null;
            let mut unnamed = Vec::new();
            for digest in &slot.digests {
                let at = format!(
                    "the value at {} (digest {})",
                    slot.pointer,
                    digest_text(digest)
                );
                let bytes = match lookup(digest) {
                    DisclosureLookup::Present(bytes) => bytes,
                    DisclosureLookup::Shredded(note) => {
                        let (name, marker) = shredded_marker(digest, &note);
                        match (slot.object, name) {
                            (true, Some(name)) => {
                                shredded.push(disclosed_pointer(&slot.pointer, Some(&name)));
                                object.insert(name, marker);
                            }
                            (true, None) => unnamed.push(marker),
                            (false, _) => {
                                shredded.push(slot.pointer.clone());
                                whole = marker;
                            }
                        }
                        continue;
                    }
                    DisclosureLookup::Missing => {
                        return Err(err(format!(
                            "{at}: its disclosure is not in the data directory"
                        )));
                    }
                };
                if disclosure_digest(&bytes) != *digest {
                    return Err(err(format!(
                        "{at}: its disclosure does not hash to the digest"
                    )));
                }
                let opened = open_disclosure(&bytes).map_err(|e| err(format!("{at}: {e}")))?;
                match (slot.object, opened.name) {
                    (true, Some(name)) => {
                        if object.insert(name.clone(), opened.value).is_some() {
                            return Err(err(format!("{at}: the key {name:?} is disclosed twice")));
                        }
                    }
                    (false, None) => whole = opened.value,
                    (true, None) => {
                        return Err(err(format!("{at}: the disclosure of a key has no name")));
                    }
                    (false, Some(_)) => {
                        return Err(err(format!(
                            "{at}: the disclosure of a whole value has a name"
                        )));
                    }
                }
            }
            if !unnamed.is_empty() {
                // Keys erased by a tombstone that does not name them (written before
                // tombstones did): their markers stand together under `_shredded`.
                shredded.push(disclosed_pointer(&slot.pointer, Some(SHREDDED)));
                object.insert(SHREDDED.to_owned(), Value::Array(unnamed));
            }
            if let Some(target) = value.pointer_mut(&slot.pointer) {
                *target = if slot.object {
                    Value::Object(object)
                } else {
                    whole
                };
            }
        }
        Ok(OpenedPayload { value, shredded })
    }

    /// The plain event ([`CommittedPayload::resolve`], then decoded as
    /// [`RunEvent::decode`] would the plain bytes).
    ///
    /// # Errors
    /// [`DecodeError`].
    pub fn decode(
        &self,
        lookup: impl FnMut(&DisclosureDigest) -> DisclosureLookup,
    ) -> Result<RunEvent, DecodeError> {
        let value = self.resolve(lookup)?;
        let event = RunEvent::deserialize(value).map_err(|e| DecodeError {
            kind: self.kind.clone(),
            message: e.to_string(),
        })?;
        if event.kind() != self.kind {
            return Err(DecodeError {
                kind: self.kind.clone(),
                message: format!("payload is a {} event", event.kind()),
            });
        }
        Ok(event)
    }
}

/// `{"_sd": [digest...], clear keys...}` (an object) or `{"...": digest}` (a whole
/// value), nothing else.
fn parse_slot(value: &Value) -> Option<(Vec<DisclosureDigest>, bool, Vec<String>)> {
    let map = value.as_object()?;
    if let Some(sd) = map.get("_sd") {
        let digests = sd
            .as_array()?
            .iter()
            .map(|d| d.as_str().and_then(parse_digest))
            .collect::<Option<Vec<_>>>()?;
        let clear = map.keys().filter(|k| *k != "_sd").cloned().collect();
        return Some((digests, true, clear));
    }
    if map.len() != 1 {
        return None;
    }
    let digest = parse_digest(map.get("...")?.as_str()?)?;
    Some((vec![digest], false, Vec::new()))
}

/// The pointer of a disclosed value: its slot's, then its name (RFC 6901 escaped).
#[must_use]
pub fn disclosed_pointer(slot: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("{slot}/{}", n.replace('~', "~0").replace('/', "~1")),
        None => slot.to_owned(),
    }
}

/// Whether a pointer a user names (`*` standing for any one step) reaches the value at
/// `pointer` or something inside it, or names something that holds it: a value is
/// withheld or disclosed whole, so naming any part of it names it.
#[must_use]
pub fn pointer_touches(pattern: &str, pointer: &str) -> bool {
    let a: Vec<&str> = pattern.split('/').skip(1).collect();
    let b: Vec<&str> = pointer.split('/').skip(1).collect();
    a.iter().zip(&b).all(|(x, y)| *x == "*" || x == y)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::testing::{act, gate_run, gate_source, record};

    fn counter_salt() -> impl FnMut(&[u8]) -> [u8; SALT_BYTES] {
        let mut n = 0u8;
        move |_| {
            n = n.wrapping_add(1);
            [n; SALT_BYTES]
        }
    }

    fn lookup_in(
        disclosures: &[Disclosure],
    ) -> impl FnMut(&DisclosureDigest) -> DisclosureLookup + '_ {
        let map: BTreeMap<_, _> = disclosures.iter().map(|d| (d.digest, d)).collect();
        move |digest| match map.get(digest) {
            Some(d) => DisclosureLookup::Present(d.bytes.clone()),
            None => DisclosureLookup::Missing,
        }
    }

    #[test]
    fn rfc_9901_digest_of_its_own_example_disclosure() {
        // RFC 9901 §5.1 (and its example 4.2.1): the disclosure of `given_name` "John".
        let disclosure = br#"["2GLC42sKQveCfGfryNRN9w", "given_name", "John"]"#;
        assert_eq!(
            URL_SAFE_NO_PAD.encode(disclosure),
            "WyIyR0xDNDJzS1F2ZUNmR2ZyeU5STjl3IiwgImdpdmVuX25hbWUiLCAiSm9obiJd"
        );
        assert_eq!(
            digest_text(&disclosure_digest(disclosure)),
            "jsu9yVulwQQlhFlM_3JlzMaSFzglhQG0DpfayQwLUK4"
        );
    }

    #[test]
    fn an_object_is_committed_key_by_key_and_anything_else_whole() {
        let event = RunEvent::RunCompleted {
            output: json!({"claimant": {"name": "Ada"}, "amount": 12.5, "ok": true}),
            conflicts: Vec::new(),
        };
        let encoded = event.encode_committed(&mut counter_salt()).expect("exact");
        assert_eq!(encoded.disclosures.len(), 3);
        let text = String::from_utf8(encoded.payload.clone()).expect("utf-8");
        assert!(!text.contains("Ada") && text.contains("\"_sd\""), "{text}");
        let parsed = CommittedPayload::parse("run.completed", &encoded.payload).expect("parses");
        assert_eq!(parsed.slots()[0].pointer, "/output");
        let back = parsed
            .decode(lookup_in(&encoded.disclosures))
            .expect("decodes");
        assert_eq!(back, event);
        // Each disclosure is RFC 8785 JSON of [salt, name, value].
        for d in &encoded.disclosures {
            let opened = open_disclosure(&d.bytes).expect("opens");
            let again =
                serde_json_canonicalizer::to_vec(&json!([opened.salt, opened.name, opened.value]))
                    .expect("jcs");
            assert_eq!(again, d.bytes);
        }
        // A string is committed whole.
        let event = RunEvent::RunCompleted {
            output: json!("plain text"),
            conflicts: Vec::new(),
        };
        let encoded = event.encode_committed(&mut counter_salt()).expect("exact");
        let parsed = CommittedPayload::parse("run.completed", &encoded.payload).expect("parses");
        assert!(!parsed.slots()[0].object);
        assert_eq!(
            parsed
                .decode(lookup_in(&encoded.disclosures))
                .expect("decodes"),
            event
        );
        // A number JCS would change stays in the clear beside the digests; as a whole
        // value it is refused, so the caller falls back to encoding 2.
        let event = RunEvent::RunCompleted {
            output: json!({"score": 1.0, "name": "Ada"}),
            conflicts: Vec::new(),
        };
        let encoded = event
            .encode_committed(&mut counter_salt())
            .expect("committed");
        let parsed = CommittedPayload::parse("run.completed", &encoded.payload).expect("parses");
        assert_eq!(parsed.slots()[0].clear, vec!["score".to_owned()]);
        assert_eq!(encoded.disclosures.len(), 1);
        let back = parsed
            .decode(lookup_in(&encoded.disclosures))
            .expect("decodes");
        assert_eq!(back.encode(), event.encode());
        let event = RunEvent::RunCompleted {
            output: json!([1.0]),
            conflicts: Vec::new(),
        };
        assert!(event.encode_committed(&mut counter_salt()).is_none());
    }

    #[test]
    fn a_wrong_or_missing_disclosure_is_an_error_naming_the_position() {
        let event = RunEvent::RunCompleted {
            output: json!({"name": "Ada", "age": 36}),
            conflicts: Vec::new(),
        };
        let encoded = event.encode_committed(&mut counter_salt()).expect("exact");
        let parsed = CommittedPayload::parse("run.completed", &encoded.payload).expect("parses");
        let missing = parsed
            .decode(|_| DisclosureLookup::Missing)
            .expect_err("missing");
        assert!(missing.message.contains("/output"), "{missing}");
        let forged = parsed
            .decode(|_| DisclosureLookup::Present(br#"["AAAA","name","Eve"]"#.to_vec()))
            .expect_err("wrong");
        assert!(forged.message.contains("does not hash"), "{forged}");
        // A shredded value reads as its marker, each erased key under its name when the
        // tombstone names it, and its pointer is listed.
        let name_digest = encoded
            .disclosures
            .iter()
            .find(|d| open_disclosure(&d.bytes).is_ok_and(|o| o.name.as_deref() == Some("name")))
            .expect("the name's disclosure")
            .digest;
        let note = json!({"by": "dpo", "reason": "erasure request 17", "at_ms": 5,
            "names": {digest_text(&name_digest): "name"}})
        .to_string();
        let opened = parsed
            .open(|d| {
                if *d == name_digest {
                    DisclosureLookup::Shredded(note.clone())
                } else {
                    lookup_in(&encoded.disclosures)(d)
                }
            })
            .expect("a shredded value reads as its marker");
        assert_eq!(opened.shredded, vec!["/output/name".to_owned()]);
        assert_eq!(
            opened.value,
            json!({"kind": "run.completed", "output": {"age": 36, "name": {"_shredded": {"by": "dpo", "at_ms": 5,
                "reason": "erasure request 17", "digest": digest_text(&name_digest)}}}})
        );
        // A tombstone that does not name the key: the marker stands under `_shredded`.
        let opened = parsed
            .open(|_| DisclosureLookup::Shredded("by dpo".into()))
            .expect("reads");
        assert_eq!(opened.shredded, vec!["/output/_shredded".to_owned()]);
        assert_eq!(
            opened.value["output"]["_shredded"][0]["_shredded"]["note"],
            "by dpo"
        );
        // A plain payload read as encoding 3 is refused, naming the position.
        let refused = CommittedPayload::parse("run.completed", &event.encode());
        assert!(refused.is_err_and(|e| e.message.contains("/output")));
    }

    #[test]
    fn pointers_touch_what_holds_them_and_what_they_hold() {
        assert!(pointer_touches("/output/claimant/name", "/output/claimant"));
        assert!(pointer_touches("/output", "/output/claimant"));
        assert!(pointer_touches(
            "/request/decision_inputs/*/payload/x",
            "/request/decision_inputs/3/payload/x"
        ));
        assert!(!pointer_touches("/output/amount", "/output/claimant"));
        assert_eq!(
            disclosed_pointer("/output", Some("a/b~c")),
            "/output/a~1b~0c"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 60, ..ProptestConfig::default() })]

        /// Whatever the agents do, every event in encoding 3 (or its encoding-2 fallback)
        /// decodes to itself, and its payload resolved is its plain encoding byte for byte.
        #[test]
        fn every_event_round_trips_through_encoding_3(
            edges in prop::collection::vec((0..3usize, 0..3usize), 0..6),
            mode in 0..3usize,
            script in prop::collection::vec(act(), 1..25),
            approvals in prop::collection::vec(any::<bool>(), 25),
        ) {
            let (bundle, run) = gate_run(&gate_source(&edges, mode)).expect("the bundle compiles");
            let recorded = record(&bundle, run, &script, &approvals);
            for event in &recorded.log {
                let Some(encoded) = event.encode_committed(&mut counter_salt()) else { continue };
                let parsed = CommittedPayload::parse(event.kind(), &encoded.payload).expect("parses");
                let plain = parsed.resolve(lookup_in(&encoded.disclosures)).expect("resolves");
                prop_assert_eq!(docket_policies::canonical_json_bytes(&plain), event.encode());
                let back = parsed.decode(lookup_in(&encoded.disclosures)).expect("decodes");
                prop_assert_eq!(&back, event);
            }
        }
    }
}
