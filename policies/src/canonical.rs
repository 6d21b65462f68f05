//! Canonical encoding and the bundle hash. See `policies/HASHING.md` for the contract.
//!
//! The hash must not depend on how a bundle was written: TOML or JSON, key order,
//! whitespace, the order of entries in lists whose order carries no meaning, or whether a
//! default was spelled out. So: (1) parse into the typed model, which fills defaults;
//! (2) normalise — fill derived edge ids, sort every order-free list by its id or value and
//! remove duplicates; keep `flow_order` as written (its order is the rule); (3) encode as
//! JSON with object keys sorted and no whitespace; (4) BLAKE3 over a domain-separation
//! prefix and those bytes. Step (2) for a rule's section is that rule's `normalize`, in its
//! file under `rules/`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::model::BundleSpec;
use crate::rules::{
    authority, capability, contract, domain, escalation, handoff, provenance, recursion, scope,
    side_effect, signals, tools,
};

pub mod writer;

/// Prefix hashed before the canonical bytes, so a bundle hash never equals another
/// kind of docket hash over the same bytes.
pub const HASH_DOMAIN: &[u8] = b"docket.policy-bundle.v1\0";

/// BLAKE3 hash of a bundle's canonical encoding; printed as 64 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BundleHash(pub [u8; 32]);

impl BundleHash {
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(64);
        for b in self.0 {
            out.push(char::from(DIGITS[usize::from(b >> 4)]));
            out.push(char::from(DIGITS[usize::from(b & 0xf)]));
        }
        out
    }
    /// Whether `hex` is this hash in lower-case hex, as [`Self::to_hex`] writes it
    /// (compared without allocating: replay checks it for every recorded input).
    pub fn is_hex(&self, hex: &str) -> bool {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        hex.len() == 64
            && self
                .0
                .iter()
                .zip(hex.as_bytes().chunks_exact(2))
                .all(|(b, pair)| {
                    pair[0] == DIGITS[usize::from(b >> 4)]
                        && pair[1] == DIGITS[usize::from(b & 0xf)]
                })
    }
    /// Parses 64 hex digits.
    pub fn from_hex(s: &str) -> Option<Self> {
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Self(out))
    }
}

impl fmt::Display for BundleHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}
impl fmt::Debug for BundleHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BundleHash({})", self.to_hex())
    }
}
impl Serialize for BundleHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}
impl<'de> Deserialize<'de> for BundleHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::from_hex(&s).ok_or_else(|| serde::de::Error::custom("expected 64 hex digits"))
    }
}

/// Sorts a list whose order carries no meaning and removes its duplicates.
pub(crate) fn sort_dedup(v: &mut Vec<String>) {
    v.sort();
    v.dedup();
}

/// The normal form of a bundle: same meaning, one spelling. Agents are sorted by id; each
/// rule normalises its own section and agent fields (one line per rule).
pub fn normalize(mut s: BundleSpec) -> BundleSpec {
    s.agents.sort_by(|a, b| a.id.cmp(&b.id));
    contract::normalize(&mut s);
    domain::normalize(&mut s);
    tools::normalize(&mut s);
    handoff::normalize(&mut s);
    capability::normalize(&mut s);
    scope::normalize(&mut s);
    recursion::normalize(&mut s);
    side_effect::normalize(&mut s);
    escalation::normalize(&mut s);
    provenance::normalize(&mut s);
    authority::normalize(&mut s);
    signals::normalize(&mut s);
    s
}

/// Canonical bytes of an already-normalised bundle: JSON, keys sorted, no whitespace.
pub fn encode(normal: &BundleSpec) -> Vec<u8> {
    // Our own types have string keys only, so this never falls back to `null`.
    to_json_bytes(normal)
}

/// The bundle hash of an already-normalised bundle.
pub fn hash(normal: &BundleSpec) -> BundleHash {
    let mut h = blake3::Hasher::new();
    h.update(HASH_DOMAIN);
    h.update(&encode(normal));
    BundleHash(*h.finalize().as_bytes())
}

/// Compact JSON text of `v` with object keys sorted at every depth.
pub fn json_text(v: &Value) -> String {
    String::from_utf8(to_json_bytes(v)).unwrap_or_default()
}

/// The canonical JSON bytes of any serialisable value: what `serde_json::to_value`
/// followed by [`json_text`] gives, written directly ([`writer`]); `null` for a value
/// `to_value` would refuse.
pub fn to_json_bytes<T: Serialize + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    if writer::write(v, &mut out).is_err() {
        out.clear();
        out.extend_from_slice(b"null");
    }
    out
}

/// The reference rendering the direct writer is checked against: walk a `Value` tree,
/// sorting each object's keys.
#[cfg(test)]
pub(crate) fn json_text_of_tree(v: &Value) -> String {
    fn write_value(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    if let Some(inner) = map.get(k) {
                        write_value(inner, out);
                    }
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_value(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write_value(v, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let value = json!({"b": 1, "a": {"d": [true, null], "c": "x"}});
        assert_eq!(json_text_of_tree(&value), json_text(&value));
        assert_eq!(
            json_text(&value),
            r#"{"a":{"c":"x","d":[true,null]},"b":1}"#
        );
    }

    #[test]
    fn hex_is_lower_case_two_digits_a_byte_and_checked_without_allocating() {
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37);
        }
        let h = BundleHash(bytes);
        let formatted: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(h.to_hex(), formatted);
        assert!(h.is_hex(&formatted));
        assert!(!h.is_hex(&formatted.to_uppercase()));
        assert!(!h.is_hex(&formatted[..62]));
        let mut other = formatted.clone().into_bytes();
        other[63] = if other[63] == b'0' { b'1' } else { b'0' };
        assert!(!h.is_hex(std::str::from_utf8(&other).unwrap()));
    }

    #[test]
    fn hash_round_trips_through_hex() {
        let h = BundleHash([7; 32]);
        assert_eq!(BundleHash::from_hex(&h.to_hex()), Some(h));
        assert_eq!(BundleHash::from_hex("zz"), None);
    }
}
