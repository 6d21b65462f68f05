//! Canonical JSON written straight from any `Serialize` value: the same bytes as
//! `serde_json::to_value` followed by a key-sorted compact rendering, without building
//! the `Value` tree (every event and every scoped context is encoded this way, so the
//! tree's allocations and string copies were a large share of a handoff's CPU).
//!
//! Objects (structs, maps, struct variants) come out in byte order of their keys; a key
//! given twice keeps its last value, as a `Value` map would. Scalars are rendered by `serde_json` itself, so numbers and string escapes are
//! exactly its own.

use std::borrow::Cow;
use std::ops::Range;

use serde::ser::{self, Impossible, Serialize};

/// The error of a value `serde_json::to_value` would refuse too (a map key that is not a
/// string, a number or a unit variant), or a custom serialisation error.
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// Appends the canonical JSON of `value` to `out`.
///
/// # Errors
/// When `value` cannot be represented as JSON (see [`Error`]); `out` may then hold a
/// partial rendering.
pub fn write<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), Error> {
    value.serialize(Canonical { out })
}

/// Renders a scalar exactly as `serde_json` does.
fn scalar<T: Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) -> Result<(), Error> {
    serde_json::to_writer(out, v).map_err(|e| Error(e.to_string()))
}

struct Canonical<'a> {
    out: &'a mut Vec<u8>,
}

/// An object being written. Entries go straight to `out` in the order they come; most
/// arrive sorted already (a `Value` map iterates in key order), and then nothing more is
/// done. Otherwise `finish` rewrites the object's bytes once, in key order.
struct Object<'a> {
    out: &'a mut Vec<u8>,
    /// For a struct or tuple variant: the outer `{"variant":` already written, to close.
    wrapped: bool,
    /// Where the object's `{` is in `out`.
    start: usize,
    /// Each entry's key and the range of its `"key":value` bytes in `out`.
    entries: Vec<(Cow<'static, str>, Range<usize>)>,
    /// Entries came in strictly increasing key order so far.
    in_order: bool,
    pending_key: Option<String>,
}

impl Object<'_> {
    fn entry<T: Serialize + ?Sized>(
        &mut self,
        key: Cow<'static, str>,
        value: &T,
    ) -> Result<(), Error> {
        if let Some((last, _)) = self.entries.last() {
            self.in_order &= *last < key;
            self.out.push(b',');
        }
        let from = self.out.len();
        scalar(key.as_ref(), self.out)?;
        self.out.push(b':');
        write(value, self.out)?;
        self.entries.push((key, from..self.out.len()));
        Ok(())
    }

    fn finish(mut self) -> Result<(), Error> {
        if !self.in_order {
            let written = self.out.split_off(self.start);
            // Stable: among equal keys the last written stays last; keep only it.
            self.entries.sort_by(|a, b| a.0.cmp(&b.0));
            self.out.push(b'{');
            let mut first = true;
            for (i, (key, range)) in self.entries.iter().enumerate() {
                if self.entries.get(i + 1).is_some_and(|next| next.0 == *key) {
                    continue;
                }
                if !first {
                    self.out.push(b',');
                }
                first = false;
                let range = range.start - self.start..range.end - self.start;
                self.out.extend_from_slice(&written[range]);
            }
        }
        self.out.push(b'}');
        if self.wrapped {
            self.out.push(b'}');
        }
        Ok(())
    }
}

/// An array being written, element by element.
struct Array<'a> {
    out: &'a mut Vec<u8>,
    wrapped: bool,
    first: bool,
}

impl Array<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write(value, self.out)
    }

    fn finish(self) -> Result<(), Error> {
        self.out.push(b']');
        if self.wrapped {
            self.out.push(b'}');
        }
        Ok(())
    }
}

impl<'a> Canonical<'a> {
    fn object(self, wrapped: bool, len: Option<usize>) -> Object<'a> {
        let start = self.out.len();
        self.out.push(b'{');
        Object {
            out: self.out,
            wrapped,
            start,
            entries: Vec::with_capacity(len.unwrap_or(0)),
            in_order: true,
            pending_key: None,
        }
    }

    fn array(self, wrapped: bool) -> Array<'a> {
        self.out.push(b'[');
        Array {
            out: self.out,
            wrapped,
            first: true,
        }
    }

    /// Writes `{"variant":` for the variant forms, which `to_value` renders as a
    /// one-entry object.
    fn open_variant(&mut self, variant: &str) -> Result<(), Error> {
        self.out.push(b'{');
        scalar(variant, self.out)?;
        self.out.push(b':');
        Ok(())
    }
}

macro_rules! scalars {
    ($($method:ident: $ty:ty),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<(), Error> {
            scalar(&v, self.out)
        })*
    };
}

impl<'a> ser::Serializer for Canonical<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Array<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    scalars!(
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_f64: f64, serialize_char: char,
    );

    // As `to_value` does: an f32 becomes the f64 of the same value, and a 128-bit
    // integer must fit 64 bits.
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        scalar(&f64::from(v), self.out)
    }

    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        let v = i64::try_from(v).map_err(|_| Error("number out of range".to_owned()))?;
        scalar(&v, self.out)
    }

    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        let v = u64::try_from(v).map_err(|_| Error("number out of range".to_owned()))?;
        scalar(&v, self.out)
    }

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        scalar(v, self.out)
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        // `to_value` renders bytes as an array of numbers.
        let mut array = self.array(false);
        for b in v {
            array.element(b)?;
        }
        array.finish()
    }

    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        scalar(variant, self.out)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.open_variant(variant)?;
        write(value, self.out)?;
        self.out.push(b'}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Array<'a>, Error> {
        Ok(self.array(false))
    }

    fn serialize_tuple(self, _len: usize) -> Result<Array<'a>, Error> {
        Ok(self.array(false))
    }

    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Array<'a>, Error> {
        Ok(self.array(false))
    }

    fn serialize_tuple_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Array<'a>, Error> {
        self.open_variant(variant)?;
        Ok(self.array(true))
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Object<'a>, Error> {
        Ok(self.object(false, len))
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Object<'a>, Error> {
        Ok(self.object(false, Some(len)))
    }

    fn serialize_struct_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Object<'a>, Error> {
        self.open_variant(variant)?;
        Ok(self.object(true, Some(len)))
    }
}

/// The serde traits of a compound are all "one more element" and "end".
macro_rules! compound {
    ($ty:ident: $($trait:ident :: $method:ident),* $(,)?) => {
        $(impl ser::$trait for $ty<'_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.finish()
            }
        })*
    };
}

compound!(
    Array: SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.pending_key = Some(key.serialize(MapKey)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = self
            .pending_key
            .take()
            .ok_or_else(|| Error("a map value came without its key".to_owned()))?;
        self.entry(Cow::Owned(key), value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

/// Struct fields have `'static` names: kept borrowed.
macro_rules! fields {
    ($($trait:ident),*) => {
        $(impl ser::$trait for Object<'_> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                self.entry(Cow::Borrowed(key), value)
            }
            fn end(self) -> Result<(), Error> {
                self.finish()
            }
        })*
    };
}

fields!(SerializeStruct, SerializeStructVariant);

/// Map keys as `serde_json` accepts them: strings, numbers and chars as their text, unit
/// variants as their name; anything else is refused as `to_value` refuses it.
struct MapKey;

macro_rules! number_keys {
    ($($method:ident: $ty:ty),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<String, Error> {
            Ok(v.to_string())
        })*
    };
}

fn key_must_be_a_string() -> Error {
    Error("key must be a string".to_owned())
}

impl ser::Serializer for MapKey {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = Impossible<String, Error>;
    type SerializeTuple = Impossible<String, Error>;
    type SerializeTupleStruct = Impossible<String, Error>;
    type SerializeTupleVariant = Impossible<String, Error>;
    type SerializeMap = Impossible<String, Error>;
    type SerializeStruct = Impossible<String, Error>;
    type SerializeStructVariant = Impossible<String, Error>;

    number_keys!(
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_char: char,
    );

    fn serialize_f32(self, _v: f32) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_f64(self, _v: f64) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_str(self, v: &str) -> Result<String, Error> {
        Ok(v.to_owned())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit(self) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String, Error> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<String, Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::{Value, json};

    use super::write;
    use crate::canonical::json_text_of_tree;

    /// The reference: build the `Value` tree, then render it key-sorted.
    fn reference<T: Serialize>(v: &T) -> String {
        json_text_of_tree(&serde_json::to_value(v).expect("to_value"))
    }

    fn direct<T: Serialize>(v: &T) -> String {
        let mut out = Vec::new();
        write(v, &mut out).expect("write");
        String::from_utf8(out).expect("utf-8")
    }

    #[derive(Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        Zeta {
            b: u32,
            a: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            c: Option<u8>,
        },
        Alpha(Inner),
    }

    #[derive(Serialize)]
    struct Inner {
        z: Vec<f64>,
        m: BTreeMap<u32, &'static str>,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
        unit: (),
        bytes: &'static [u8],
    }

    #[derive(Serialize)]
    enum External {
        Unit,
        New(i64),
        Tuple(u8, char),
        Struct { y: bool, x: bool },
    }

    #[test]
    fn equals_the_value_tree_for_every_serde_shape() {
        let zetas = [
            Tagged::Zeta {
                b: 1,
                a: None,
                c: None,
            },
            Tagged::Zeta {
                b: 1,
                a: Some("é\"\n".into()),
                c: Some(3),
            },
        ];
        for z in &zetas {
            assert_eq!(direct(z), reference(z));
        }
        let inner = || Inner {
            z: vec![0.1, -2.5e300, f64::NAN, 3.0],
            m: BTreeMap::from([(10, "ten"), (9, "nine")]),
            extra: BTreeMap::from([("a".to_owned(), json!({"y": [1, {"b": 2, "a": 1}]}))]),
            unit: (),
            bytes: b"ab",
        };
        assert_eq!(
            direct(&Tagged::Alpha(inner())),
            reference(&Tagged::Alpha(inner()))
        );
        for e in [
            External::Unit,
            External::New(-7),
            External::Tuple(1, 'x'),
            External::Struct { y: true, x: false },
        ] {
            assert_eq!(direct(&e), reference(&e));
        }
        assert_eq!(
            direct(&json!({"b": 1, "a": {"d": [true, null], "c": "x"}})),
            r#"{"a":{"c":"x","d":[true,null]},"b":1}"#
        );
    }

    #[test]
    fn a_key_given_twice_keeps_its_last_value_as_a_value_map_does() {
        #[derive(Serialize)]
        struct Twice {
            a: u8,
            #[serde(flatten)]
            rest: BTreeMap<String, u8>,
        }
        let v = Twice {
            a: 1,
            rest: BTreeMap::from([("a".to_owned(), 2), ("b".to_owned(), 3)]),
        };
        assert_eq!(direct(&v), reference(&v));
    }

    /// Objects sorted inside objects sorted, beside arrays of them: each keeps its own
    /// keys apart from its parent's and its siblings'.
    #[test]
    fn unsorted_objects_nested_in_unsorted_objects() {
        #[derive(Serialize)]
        struct Inner {
            y: u8,
            b: &'static str,
            #[serde(flatten)]
            rest: BTreeMap<u8, Value>,
        }
        #[derive(Serialize)]
        struct Outer {
            z: Inner,
            m: Vec<Inner>,
            a: u8,
            #[serde(flatten)]
            rest: BTreeMap<String, Inner>,
        }
        let inner = |n: u8| Inner {
            y: n,
            b: "b",
            rest: BTreeMap::from([(10, json!({"q": n, "p": [n]})), (2, json!(null))]),
        };
        let v = Outer {
            z: inner(1),
            m: vec![inner(2), inner(3)],
            a: 4,
            rest: BTreeMap::from([("c".to_owned(), inner(5)), ("a".to_owned(), inner(6))]),
        };
        assert_eq!(direct(&v), reference(&v));
    }

    #[test]
    fn wide_and_narrow_numbers_as_the_value_tree_has_them() {
        assert_eq!(direct(&0.1f32), reference(&0.1f32));
        assert_eq!(direct(&7u128), reference(&7u128));
        assert!(write(&u128::MAX, &mut Vec::new()).is_err());
        assert!(serde_json::to_value(u128::MAX).is_err());
    }

    #[test]
    fn refuses_what_to_value_refuses() {
        let v: BTreeMap<Vec<u8>, u8> = BTreeMap::from([(vec![1], 1)]);
        assert!(serde_json::to_value(&v).is_err());
        assert!(write(&v, &mut Vec::new()).is_err());
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|f| json!(f)),
            ".*".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(".*", inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn equals_the_value_tree_on_random_json(v in any_json()) {
            prop_assert_eq!(direct(&v), reference(&v));
        }
    }
}
