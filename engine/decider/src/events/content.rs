//! Payload encoding 2: content recorded once, referred to by hash.
//!
//! What an agent is handed, delivered or answers (and a run's bundle source, input,
//! results and output) appears in several events of a run: in a response, in each
//! handoff's `delivered`, in the next call's request. Encoding 2 writes each such value
//! once, as a content-addressed blob of its canonical JSON, and puts a reference in its
//! place: `{"blake3": "<64 hex>", "len": N}`, the blob's plain BLAKE3 hash and length.
//! Where values may be referred to is a fixed table of positions per event kind
//! ([`CONTENT_POSITIONS`]; docs/events.md#content-stored-once); no value anywhere else is
//! ever read as a reference. At a position, a value of at least [`REFERENCE_FROM_BYTES`]
//! bytes of canonical JSON is referred to (smaller ones cost more as a reference and a
//! blob than inline), and so is any value shaped like a reference (an object whose keys
//! are exactly `blake3` and `len`) whatever its size, so content an agent wrote never
//! passes for a reference. The table and the threshold are part of the format: a change
//! to either is a new encoding.
//!
//! This is an encoding concern only: the event types, what `decide` records and the
//! fold are unchanged; the runtime rebuilds the plain payload before anything reads it.
//! Pure (no I/O): the caller fetches each referenced blob and hands it in.

use crate::events::AgentResponded;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::sync::Arc;

use super::event::{DecodeError, RunEvent};

/// `kind_version` of an event whose payload is the plain canonical JSON of the event
/// (every event recorded before encoding 2, and the data directory's own streams).
pub const PLAIN_PAYLOAD: u32 = 1;

/// `kind_version` of an event in payload encoding 2: plain canonical JSON, except that
/// the values at the kind's [`CONTENT_POSITIONS`] are references to blobs.
pub const REFERENCED_PAYLOAD: u32 = 2;

/// Content at a position whose canonical JSON is at least this long is referred to; a
/// reference and its blob record take about 125 bytes, so smaller values stay inline.
pub const REFERENCE_FROM_BYTES: usize = 128;

/// Where content sits in each kind's payload, as JSON pointers in which `*` stands for
/// every element of an array. A kind not listed has none (its encoding-2 payload is its
/// plain one).
pub const CONTENT_POSITIONS: &[(&str, &[&str])] = &[
    ("run.requested", &["/bundle_source", "/input"]),
    (
        "agent.call_scheduled",
        &[
            "/request/context/handoff/original_request",
            "/request/decision_inputs/*/payload",
            "/request/context_inputs/*/payload",
        ],
    ),
    ("agent.responded", &["/response/actions/*/payload"]),
    ("handoff.allowed", &["/delivered"]),
    ("tool.returned", &["/result"]),
    ("domain.written", &["/content"]),
    ("human.wrote_domain", &["/content"]),
    ("episode.finished", &["/result"]),
    ("run.completed", &["/output"]),
];

/// The content positions of `kind` (empty for a kind without content).
#[must_use]
pub fn content_positions(kind: &str) -> &'static [&'static str] {
    CONTENT_POSITIONS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(&[], |(_, positions)| positions)
}

/// The pointers of the values present at `kind`'s content positions in a payload (`*`
/// expanded): where a value may stand apart from its event.
#[must_use]
pub fn content_pointers(kind: &str, payload: &Value) -> Vec<String> {
    let mut value = payload.clone();
    let mut out = Vec::new();
    for position in content_positions(kind) {
        let steps: Vec<&str> = position.split('/').skip(1).collect();
        walk(&mut value, &steps, String::new(), &mut |pointer, _| {
            out.push(pointer)
        });
    }
    out
}

/// A reference found in an encoding-2 payload: where it stands and what it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentRef {
    /// The JSON pointer (RFC 6901) of the value in the plain payload.
    pub pointer: String,
    /// Plain BLAKE3 of the blob's bytes (the store's blob address).
    pub hash: [u8; 32],
    /// The blob's length in bytes.
    pub len: u64,
}

impl ContentRef {
    /// The hash in lower-case hex, as references and exports write it.
    #[must_use]
    pub fn hash_hex(&self) -> String {
        blake3::Hash::from_bytes(self.hash).to_hex().to_string()
    }
}

/// An event in encoding 2: its payload and the blobs it refers to (each once, in the
/// order first referred to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferencedEvent {
    /// The payload the log records (and its hash covers).
    pub payload: Vec<u8>,
    /// The canonical JSON of each referenced value: the blobs to store with the event
    /// (from [`RunEvent::encode_referenced_after`], those no earlier event of the append
    /// carries).
    pub blobs: Vec<Vec<u8>>,
}

/// `response` with each handoff's payload replaced by its reference where `refs` has one,
/// built field by field: copying the response whole would copy the payloads it replaces.
fn with_referred_payloads(
    response: &crate::AgentResponse,
    refs: Vec<Option<Value>>,
) -> crate::AgentResponse {
    let crate::AgentResponse {
        request_id,
        status,
        confidence_level,
        warnings,
        error_code,
        error_message,
        usage,
        tool_calls,
        actions,
        metadata,
        intent,
    } = response;
    crate::AgentResponse {
        request_id: request_id.clone(),
        status: *status,
        confidence_level: *confidence_level,
        warnings: warnings.clone(),
        error_code: error_code.clone(),
        error_message: error_message.clone(),
        usage: *usage,
        tool_calls: tool_calls.clone(),
        actions: actions
            .iter()
            .zip(refs)
            .map(|(action, r)| match (action, r) {
                (
                    crate::Action::Handoff {
                        to,
                        output_type,
                        task,
                        ..
                    },
                    Some(r),
                ) => crate::Action::Handoff {
                    to: to.clone(),
                    output_type: output_type.clone(),
                    payload: r,
                    task: task.clone(),
                },
                (action, _) => action.clone(),
            })
            .collect(),
        metadata: metadata.clone(),
        intent: intent.clone(),
    }
}

/// What the events of one append have referred to so far, so that content two of them
/// share (a handoff's delivered payload is the next call's decision input: the same
/// value) is written out and hashed once and stored once. Values are told apart by
/// identity: the events are borrowed for the memo's life, so an address names one value.
#[derive(Default)]
pub struct ReferencedContent<'a> {
    referred: Vec<(&'a Value, Option<Value>)>,
    stored: Vec<blake3::Hash>,
}

impl<'a> ReferencedContent<'a> {
    /// The reference for `value` (`None`: it stays inline), its blob added to `blobs`
    /// unless an earlier event of the append carries the same bytes.
    fn refer(&mut self, blobs: &mut Blobs, value: &'a Value) -> Option<Value> {
        if let Some((_, reference)) = self.referred.iter().find(|(v, _)| std::ptr::eq(*v, value)) {
            return reference.clone();
        }
        let reference = blobs.refer_unless(value, &self.stored);
        self.referred.push((value, reference.clone()));
        reference
    }
}

impl RunEvent {
    /// This event in payload encoding 2 ([`REFERENCED_PAYLOAD`]), after the events of the
    /// same append noted in `earlier`: a blob an earlier one carries is not carried again
    /// (the append stores the blobs of all its events).
    #[must_use]
    pub fn encode_referenced_after<'a>(
        &'a self,
        earlier: &mut ReferencedContent<'a>,
    ) -> ReferencedEvent {
        if content_positions(self.kind()).is_empty() {
            return ReferencedEvent {
                payload: self.encode(),
                blobs: Vec::new(),
            };
        }
        match self.encode_referenced_in_place(earlier) {
            Some(encoded) => encoded,
            None => self.encode_referenced_as_tree_after(&mut earlier.stored),
        }
    }

    /// This event in payload encoding 2 ([`REFERENCED_PAYLOAD`]).
    #[must_use]
    pub fn encode_referenced(&self) -> ReferencedEvent {
        if content_positions(self.kind()).is_empty() {
            return ReferencedEvent {
                payload: self.encode(),
                blobs: Vec::new(),
            };
        }
        self.encode_referenced_in_place(&mut ReferencedContent::default())
            .unwrap_or_else(|| self.encode_referenced_as_tree())
    }

    /// The kinds most of a run's events are (handoffs, calls, the output): the content
    /// values replaced in a copy of the event, which is then written directly, without
    /// the JSON tree [`RunEvent::encode_referenced_as_tree`] builds. The same bytes
    /// (checked by the round-trip property below); `None` for the other kinds.
    fn encode_referenced_in_place<'a>(
        &'a self,
        earlier: &mut ReferencedContent<'a>,
    ) -> Option<ReferencedEvent> {
        let mut blobs = Blobs::default();
        // The references are taken from `self` (whose values the memo may name), then put
        // in a copy of the event; its payloads are shared, so the copy is shallow.
        let mut event = self.clone();
        match (self, &mut event) {
            (
                RunEvent::HandoffAllowed { delivered, .. },
                RunEvent::HandoffAllowed {
                    delivered: slot, ..
                },
            ) => {
                if let Some(r) = earlier.refer(&mut blobs, delivered) {
                    *slot = std::sync::Arc::new(r);
                }
            }
            (
                RunEvent::RunCompleted { output, .. },
                RunEvent::RunCompleted { output: slot, .. },
            ) => {
                if let Some(r) = earlier.refer(&mut blobs, output) {
                    *slot = r;
                }
            }
            (
                RunEvent::AgentResponded(AgentResponded { response, .. }),
                RunEvent::AgentResponded(AgentResponded { response: slot, .. }),
            ) => {
                // `/response/actions/*/payload`: of the actions, only a handoff has a
                // `payload`.
                let refs: Vec<Option<Value>> = response
                    .actions
                    .iter()
                    .map(|action| match action {
                        crate::Action::Handoff { payload, .. } => {
                            earlier.refer(&mut blobs, payload)
                        }
                        _ => None,
                    })
                    .collect();
                if refs.iter().any(Option::is_some) {
                    *slot = Arc::new(with_referred_payloads(response, refs));
                }
            }
            (
                RunEvent::AgentCallScheduled { request, .. },
                RunEvent::AgentCallScheduled { request: slot, .. },
            ) => {
                // Table order: the original request, then decision, then context inputs.
                let original = request
                    .context
                    .get("handoff")
                    .and_then(|h| h.get("original_request"))
                    .and_then(|v| earlier.refer(&mut blobs, v));
                let decision: Vec<Option<Value>> = request
                    .decision_inputs
                    .iter()
                    .map(|i| earlier.refer(&mut blobs, &i.payload))
                    .collect();
                let context: Vec<Option<Value>> = request
                    .context_inputs
                    .iter()
                    .map(|i| earlier.refer(&mut blobs, &i.payload))
                    .collect();
                let referred =
                    original.is_some() || decision.iter().chain(&context).any(Option::is_some);
                if referred {
                    let request = std::sync::Arc::make_mut(slot);
                    if let Some(r) = original
                        && let Some(slot) = request
                            .context
                            .get_mut("handoff")
                            .and_then(|h| h.get_mut("original_request"))
                    {
                        *slot = r;
                    }
                    for (input, r) in request.decision_inputs.iter_mut().zip(decision) {
                        if let Some(r) = r {
                            input.payload = Arc::new(r);
                        }
                    }
                    for (input, r) in request.context_inputs.iter_mut().zip(context) {
                        if let Some(r) = r {
                            input.payload = Arc::new(r);
                        }
                    }
                }
            }
            _ => return None,
        }
        earlier.stored.extend(blobs.seen.iter().copied());
        Some(ReferencedEvent {
            payload: docket_policies::canonical_json_bytes(&event),
            blobs: blobs.bytes,
        })
    }

    /// Any kind: the event as a JSON tree, the values at its content positions replaced.
    /// The reference [`RunEvent::encode_referenced`] is checked against (the same bytes).
    #[doc(hidden)]
    #[must_use]
    pub fn encode_referenced_as_tree(&self) -> ReferencedEvent {
        self.encode_referenced_as_tree_after(&mut Vec::new())
    }

    /// [`Self::encode_referenced_as_tree`], leaving out the blobs whose hashes `stored`
    /// holds (an earlier event of the append carries them) and adding its own.
    fn encode_referenced_as_tree_after(&self, stored: &mut Vec<blake3::Hash>) -> ReferencedEvent {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        let mut blobs = Blobs::default();
        for position in content_positions(self.kind()) {
            let steps: Vec<&str> = position.split('/').skip(1).collect();
            for_each_at(&mut value, &steps, &mut |slot| {
                if let Some(r) = blobs.refer_unless(slot, stored) {
                    *slot = r;
                }
            });
        }
        stored.extend(blobs.seen.iter().copied());
        ReferencedEvent {
            payload: docket_policies::canonical_json_bytes(&value),
            blobs: blobs.bytes,
        }
    }
}

/// The blobs of one event, each once, in the order first referred to.
#[derive(Default)]
struct Blobs {
    bytes: Vec<Vec<u8>>,
    seen: Vec<blake3::Hash>,
}

impl Blobs {
    /// The reference that replaces `value` at a content position, its content noted
    /// unless `stored` (an earlier event's of the append) holds it; `None` when the value
    /// stays inline (small, and not shaped like a reference).
    fn refer_unless(&mut self, value: &Value, stored: &[blake3::Hash]) -> Option<Value> {
        let bytes = docket_policies::canonical_json_bytes(value);
        if bytes.len() < REFERENCE_FROM_BYTES && !looks_like_a_reference(value) {
            return None;
        }
        let hash = blake3::hash(&bytes);
        let reference = reference(hash.as_bytes(), bytes.len() as u64);
        if !self.seen.contains(&hash) && !stored.contains(&hash) {
            self.seen.push(hash);
            self.bytes.push(bytes);
        }
        Some(reference)
    }
}

/// An encoding-2 payload, parsed: its references, and the plain event once their
/// content is supplied.
#[derive(Debug, Clone)]
pub struct ReferencedPayload {
    kind: String,
    value: Value,
    refs: Vec<ContentRef>,
}

impl ReferencedPayload {
    /// Parses `bytes` as an encoding-2 payload of `kind`: a value at one of the kind's
    /// content positions shaped like a reference must be a well-formed one.
    ///
    /// # Errors
    /// [`DecodeError`] naming the position of a value that is not a reference.
    pub fn parse(kind: &str, bytes: &[u8]) -> Result<Self, DecodeError> {
        let err = |message: String| DecodeError {
            kind: kind.to_owned(),
            message,
        };
        let mut value: Value =
            serde_json::from_slice(bytes).map_err(|e| err(format!("payload: {e}")))?;
        let mut refs = Vec::new();
        let mut bad: Option<String> = None;
        for position in content_positions(kind) {
            let steps: Vec<&str> = position.split('/').skip(1).collect();
            walk(&mut value, &steps, String::new(), &mut |pointer, slot| {
                if !looks_like_a_reference(slot) {
                    return;
                }
                match parse_reference(slot) {
                    Some((hash, len)) => refs.push(ContentRef { pointer, hash, len }),
                    None if bad.is_none() => {
                        bad = Some(format!(
                            "the reference at {pointer} (docs/events.md#content-stored-once) \
                                 is not {{\"blake3\": 64 lower-case hex digits, \"len\": N}}"
                        ));
                    }
                    None => {}
                }
            });
        }
        if let Some(message) = bad {
            return Err(err(message));
        }
        Ok(Self {
            kind: kind.to_owned(),
            value,
            refs,
        })
    }

    /// The references, in table order, then document order.
    #[must_use]
    pub fn refs(&self) -> &[ContentRef] {
        &self.refs
    }

    /// The plain payload (what encoding 1 records), each reference replaced by the JSON
    /// of its content; `content` gives a blob's bytes (`None`: the store lacks it).
    ///
    /// # Errors
    /// [`DecodeError`] when a blob is missing, has another length than its reference
    /// says, or is not JSON.
    pub fn resolve(
        &self,
        mut content: impl FnMut(&ContentRef) -> Option<Vec<u8>>,
    ) -> Result<Value, DecodeError> {
        let err = |message: String| DecodeError {
            kind: self.kind.clone(),
            message,
        };
        let mut value = self.value.clone();
        for r in &self.refs {
            let Some(bytes) = content(r) else {
                return Err(err(format!(
                    "the content at {} (blob {}) is not in the store",
                    r.pointer,
                    r.hash_hex()
                )));
            };
            if bytes.len() as u64 != r.len {
                return Err(err(format!(
                    "the content at {} (blob {}) is {} bytes, its reference says {}",
                    r.pointer,
                    r.hash_hex(),
                    bytes.len(),
                    r.len
                )));
            }
            let inner: Value = serde_json::from_slice(&bytes).map_err(|e| {
                err(format!(
                    "the content at {} (blob {}) is not JSON: {e}",
                    r.pointer,
                    r.hash_hex()
                ))
            })?;
            if let Some(slot) = value.pointer_mut(&r.pointer) {
                *slot = inner;
            }
        }
        Ok(value)
    }

    /// The plain event ([`ReferencedPayload::resolve`], then decoded as
    /// [`RunEvent::decode`] would the plain bytes).
    ///
    /// # Errors
    /// [`DecodeError`].
    pub fn decode(
        &self,
        content: impl FnMut(&ContentRef) -> Option<Vec<u8>>,
    ) -> Result<RunEvent, DecodeError> {
        let value = self.resolve(content)?;
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

fn reference(hash: &[u8; 32], len: u64) -> Value {
    let mut map = Map::new();
    map.insert(
        "blake3".into(),
        // blake3's own hex: a `format!` per byte costs more than the hash itself.
        Value::String(blake3::Hash::from_bytes(*hash).to_hex().to_string()),
    );
    map.insert("len".into(), Value::from(len));
    Value::Object(map)
}

/// An object whose keys are exactly `blake3` and `len`: at a content position, always a
/// reference (the encoder refers to content of this shape whatever its size).
fn looks_like_a_reference(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| m.len() == 2 && m.contains_key("blake3") && m.contains_key("len"))
}

/// `{"blake3": 64 lower-case hex digits, "len": u64}` and nothing else.
fn parse_reference(value: &Value) -> Option<([u8; 32], u64)> {
    let map = value.as_object()?;
    if map.len() != 2 {
        return None;
    }
    let hex = map.get("blake3")?.as_str()?;
    let len = map.get("len")?.as_u64()?;
    if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut hash = [0u8; 32];
    for (i, out) in hash.iter_mut().enumerate() {
        *out = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some((hash, len))
}

/// Calls `f` on every value present at `steps` (`*`: each element of an array).
fn for_each_at(value: &mut Value, steps: &[&str], f: &mut impl FnMut(&mut Value)) {
    walk(value, steps, String::new(), &mut |_, slot| f(slot));
}

pub(crate) fn walk(
    value: &mut Value,
    steps: &[&str],
    pointer: String,
    f: &mut impl FnMut(String, &mut Value),
) {
    let Some((step, rest)) = steps.split_first() else {
        f(pointer, value);
        return;
    };
    if *step == "*" {
        if let Value::Array(items) = value {
            for (i, item) in items.iter_mut().enumerate() {
                walk(item, rest, format!("{pointer}/{i}"), f);
            }
        }
    } else if let Value::Object(map) = value
        && let Some(inner) = map.get_mut(*step)
    {
        // Position steps are plain keys (no `~` or `/`), so they are their own escape.
        walk(inner, rest, format!("{pointer}/{step}"), f);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::testing::{act, gate_run, gate_source, record};

    #[test]
    fn every_kind_in_the_table_is_a_kind() {
        for (kind, positions) in CONTENT_POSITIONS {
            assert!(RunEvent::KINDS.contains(kind), "{kind}");
            for p in *positions {
                assert!(p.starts_with('/') && !p.contains('~'), "{p}");
            }
        }
    }

    fn store_of(blobs: &[Vec<u8>]) -> BTreeMap<[u8; 32], Vec<u8>> {
        blobs
            .iter()
            .map(|b| (*blake3::hash(b).as_bytes(), b.clone()))
            .collect()
    }

    #[test]
    fn content_that_looks_like_a_reference_stays_content() {
        // Small content shaped like a reference is referred to all the same.
        for output in [
            json!({"blake3": "00".repeat(32), "len": 3}),
            json!({"blake3": "not hex", "len": -1}),
        ] {
            let event = RunEvent::RunCompleted {
                output,
                conflicts: Vec::new(),
            };
            let encoded = event.encode_referenced();
            let parsed =
                ReferencedPayload::parse("run.completed", &encoded.payload).expect("parses");
            assert_eq!(parsed.refs().len(), 1);
            assert_eq!(parsed.refs()[0].pointer, "/output");
            let blobs = store_of(&encoded.blobs);
            let back = parsed
                .decode(|r| blobs.get(&r.hash).cloned())
                .expect("decodes");
            assert_eq!(back, event);
        }
        // Read as encoding 2, a plain payload holding a malformed reference is refused,
        // naming where.
        let forged = RunEvent::RunCompleted {
            output: json!({"blake3": "not hex", "len": -1}),
            conflicts: Vec::new(),
        };
        let refused = ReferencedPayload::parse("run.completed", &forged.encode());
        assert!(refused.is_err_and(|e| e.message.contains("/output")));
        // Small content stays inline; large content is referred to; elsewhere nothing is.
        let small = RunEvent::RunCompleted {
            output: json!({"$ref": "x"}),
            conflicts: Vec::new(),
        };
        assert_eq!(small.encode_referenced().payload, small.encode());
        let large = RunEvent::RunCompleted {
            output: json!({"text": "x".repeat(200)}),
            conflicts: Vec::new(),
        };
        let encoded = large.encode_referenced();
        assert_eq!(encoded.blobs.len(), 1);
        assert!(encoded.payload.len() < 150);
        let failed = RunEvent::RunFailed {
            reason: "x".repeat(300),
        };
        assert_eq!(failed.encode_referenced().payload, failed.encode());
    }

    #[test]
    fn a_missing_or_wrong_blob_is_an_error_naming_the_position() {
        let event = RunEvent::RunCompleted {
            output: json!({"answer": "4".repeat(200)}),
            conflicts: Vec::new(),
        };
        let encoded = event.encode_referenced();
        let parsed = ReferencedPayload::parse("run.completed", &encoded.payload).expect("parses");
        let missing = parsed.decode(|_| None).expect_err("no blob");
        assert!(
            missing.message.contains("/output") && missing.message.contains("not in the store")
        );
        let short = parsed
            .decode(|_| Some(b"{}".to_vec()))
            .expect_err("wrong length");
        assert!(short.message.contains("bytes"), "{short}");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

        /// Whatever the agents do, every event in encoding 2 decodes to itself, its
        /// payload resolved is its plain encoding byte for byte, and each value is
        /// stored once, by the event and by the append of all of them.
        #[test]
        fn every_event_round_trips_through_encoding_2(
            edges in prop::collection::vec((0..3usize, 0..3usize), 0..6),
            mode in 0..3usize,
            script in prop::collection::vec(act(), 1..25),
            approvals in prop::collection::vec(any::<bool>(), 25),
        ) {
            let (bundle, run) = gate_run(&gate_source(&edges, mode)).expect("the bundle compiles");
            let recorded = record(&bundle, run, &script, &approvals);
            for event in &recorded.log {
                let encoded = event.encode_referenced();
                prop_assert_eq!(&encoded, &event.encode_referenced_as_tree(), "{}", event.kind());
                let blobs = store_of(&encoded.blobs);
                prop_assert_eq!(blobs.len(), encoded.blobs.len(), "a blob twice");
                let parsed = ReferencedPayload::parse(event.kind(), &encoded.payload).expect("parses");
                let plain = parsed.resolve(|r| blobs.get(&r.hash).cloned()).expect("resolves");
                prop_assert_eq!(docket_policies::canonical_json_bytes(&plain), event.encode());
                let back = parsed.decode(|r| blobs.get(&r.hash).cloned()).expect("decodes");
                prop_assert_eq!(&back, event);
            }
            // Encoded as one append (the runtime's batches), every event's payload is the
            // one it has alone, and the append carries each blob its events need, once.
            let mut earlier = ReferencedContent::default();
            let mut carried = Vec::new();
            let mut needed = BTreeMap::new();
            for event in &recorded.log {
                let alone = event.encode_referenced();
                let in_append = event.encode_referenced_after(&mut earlier);
                prop_assert_eq!(&in_append.payload, &alone.payload, "{}", event.kind());
                carried.extend(in_append.blobs);
                needed.extend(store_of(&alone.blobs));
            }
            let carried_once = store_of(&carried);
            prop_assert_eq!(carried_once.len(), carried.len(), "a blob twice in one append");
            prop_assert_eq!(carried_once, needed);
        }
    }
}
