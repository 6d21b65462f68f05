//! Turning a JSON pointer into a line and column of the source text, for TOML (through
//! `toml`'s spanned document) and for JSON (through a small position-tracking scan).

use std::fmt;

use toml::de::{DeTable, DeValue};

/// One step of a path into the bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A path into the bundle document, printed as a JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pointer(pub Vec<Seg>);

impl Pointer {
    pub fn root() -> Self {
        Self(Vec::new())
    }
    pub fn key(&self, k: &str) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Key(k.to_owned()));
        Self(v)
    }
    pub fn index(&self, i: usize) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Index(i));
        Self(v)
    }
}

/// Builds a pointer from `/`-free literal segments: `ptr!["agents", 3, "id"]`.
macro_rules! ptr {
    ($($seg:expr),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut p = $crate::locate::Pointer::root();
        $( p = $crate::locate::IntoSeg::push_onto($seg, p); )*
        p
    }};
}
pub(crate) use ptr;

/// Anything that can be one pointer segment.
pub trait IntoSeg {
    fn push_onto(self, p: Pointer) -> Pointer;
}
impl IntoSeg for &str {
    fn push_onto(self, p: Pointer) -> Pointer {
        p.key(self)
    }
}
impl IntoSeg for usize {
    fn push_onto(self, p: Pointer) -> Pointer {
        p.index(self)
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.0 {
            match s {
                Seg::Key(k) => write!(f, "/{}", k.replace('~', "~0").replace('/', "~1"))?,
                Seg::Index(i) => write!(f, "/{i}")?,
            }
        }
        Ok(())
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = src.get(..offset).unwrap_or(src);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

/// Where each line of a text starts, to turn byte offsets into lines and columns without
/// reading the text again for each.
pub(crate) struct Lines<'a> {
    src: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { src, starts }
    }

    /// As [`line_col`].
    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.src.len());
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self
            .starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        let column = self.src.get(start..offset).map_or(0, |s| s.chars().count()) + 1;
        (line, column)
    }
}

/// Byte offset of the deepest part of `pointer` that exists in a TOML document.
#[cfg(test)]
pub fn toml_offset(src: &str, pointer: &Pointer) -> usize {
    match DeTable::parse(src) {
        Ok(doc) => toml_offset_in(&doc, pointer),
        Err(_) => 0,
    }
}

/// As [`toml_offset`], in a document already parsed.
pub(crate) fn toml_offset_in(doc: &toml::Spanned<DeTable<'_>>, pointer: &Pointer) -> usize {
    let mut best = doc.span().start;
    let mut table: Option<&DeTable<'_>> = Some(doc.get_ref());
    let mut array: Option<&[toml::Spanned<DeValue<'_>>]> = None;
    for seg in &pointer.0 {
        let next = match (seg, table, array) {
            (Seg::Key(k), Some(t), _) => t
                .iter()
                .find(|(key, _)| key.get_ref().as_ref() == k.as_str())
                .map(|(key, v)| {
                    // Point at the value, except for tables and arrays of tables, where the
                    // key is more helpful than the first character of the body.
                    let at = match v.get_ref() {
                        DeValue::Table(_) | DeValue::Array(_) => key.span().start,
                        _ => v.span().start,
                    };
                    (at, v)
                }),
            (Seg::Index(i), _, Some(a)) => a.get(*i).map(|v| (v.span().start, v)),
            _ => None,
        };
        let Some((at, v)) = next else { break };
        best = at;
        table = None;
        array = None;
        match v.get_ref() {
            DeValue::Table(t) => table = Some(t),
            DeValue::Array(a) => array = Some(a.as_ref()),
            _ => {}
        }
    }
    best
}

/// Byte offset of the deepest part of `pointer` that exists in a JSON document.
pub fn json_offset(src: &str, pointer: &Pointer) -> usize {
    let mut scan = Scan {
        b: src.as_bytes(),
        i: 0,
    };
    scan.find(&pointer.0)
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.i += 1;
        }
    }
    /// Position of the value at `path` starting here, or of the deepest value found.
    fn find(&mut self, path: &[Seg]) -> usize {
        self.ws();
        let start = self.i;
        let Some((seg, rest)) = path.split_first() else {
            return start;
        };
        match (self.peek(), seg) {
            (Some(b'{'), Seg::Key(want)) => {
                self.i += 1;
                loop {
                    self.ws();
                    if self.peek() != Some(b'"') {
                        return start;
                    }
                    let ks = self.i;
                    self.skip_string();
                    let key: String =
                        std::str::from_utf8(self.b.get(ks..self.i).unwrap_or_default())
                            .ok()
                            .and_then(|raw| serde_json::from_str(raw).ok())
                            .unwrap_or_default();
                    self.ws();
                    if self.peek() == Some(b':') {
                        self.i += 1;
                    }
                    if &key == want {
                        return self.find(rest);
                    }
                    self.skip_value();
                    self.ws();
                    if self.peek() == Some(b',') {
                        self.i += 1;
                    } else {
                        return start;
                    }
                }
            }
            (Some(b'['), Seg::Index(want)) => {
                self.i += 1;
                let mut n = 0;
                loop {
                    self.ws();
                    if self.peek() == Some(b']') || self.peek().is_none() {
                        return start;
                    }
                    if n == *want {
                        return self.find(rest);
                    }
                    self.skip_value();
                    self.ws();
                    if self.peek() == Some(b',') {
                        self.i += 1;
                        n += 1;
                    } else {
                        return start;
                    }
                }
            }
            _ => start,
        }
    }
    fn skip_string(&mut self) {
        self.i += 1;
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'\\' => self.i += 1,
                b'"' => return,
                _ => {}
            }
        }
    }
    fn skip_value(&mut self) {
        self.ws();
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    self.skip_string();
                    if depth == 0 {
                        return;
                    }
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                    if depth == 0 {
                        self.i += 1;
                        return;
                    }
                }
                b',' if depth == 0 => return,
                _ => {}
            }
            self.i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_pointer_resolves_to_the_value() {
        let src = "{\n  \"a\": [1, {\"b\": \"x\"}],\n  \"c\": 2\n}";
        let p = ptr!["a", 1, "b"];
        assert_eq!(line_col(src, json_offset(src, &p)), (2, 18));
        assert_eq!(line_col(src, json_offset(src, &ptr!["c"])), (3, 8));
        // Missing leaf: falls back to the deepest existing part.
        assert_eq!(line_col(src, json_offset(src, &ptr!["a", 5])), (2, 8));
    }

    #[test]
    fn toml_pointer_resolves_to_the_value() {
        let src = "[bundle]\nid = \"x\"\n\n[[agents]]\nid = \"a\"\n\n[[agents]]\nid = \"b\"\nrole = \"r\"\n";
        assert_eq!(
            line_col(src, toml_offset(src, &ptr!["agents", 1, "role"])),
            (9, 8)
        );
        assert_eq!(
            line_col(src, toml_offset(src, &ptr!["bundle", "id"])),
            (2, 6)
        );
    }
}
