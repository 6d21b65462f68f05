//! The targets, one per kind of input, and what they share: text documents (TOML or
//! JSON) mutated through their tree and their bytes.

pub mod api;
pub mod bundles;
pub mod responses;
pub mod segments;
pub mod workflows;

use proptest::prelude::*;
use serde_json::Value;

use crate::mutate::{self, ByteOp, Dictionary, TreeOp};

/// A seed document: its text, and its tree when the text parses.
#[derive(Debug, Clone)]
pub struct Document {
    /// What the document is (its file), for reproducers' first line.
    pub label: String,
    pub text: String,
    pub tree: Option<Value>,
}

impl Document {
    /// A TOML document.
    #[must_use]
    pub fn toml(label: &str, text: String) -> Self {
        let tree = mutate::toml_tree(&text);
        Self {
            label: label.to_owned(),
            text,
            tree,
        }
    }

    /// A JSON document.
    #[must_use]
    pub fn json(label: &str, text: String) -> Self {
        let tree = serde_json::from_str(&text).ok();
        Self {
            label: label.to_owned(),
            text,
            tree,
        }
    }
}

/// A generated text case: which seed, written how, with which mutations.
#[derive(Debug, Clone)]
pub struct TextCase {
    pub seed: usize,
    /// Written as JSON (else in the seed's own syntax, TOML where the tree is written).
    pub json: bool,
    pub tree: Vec<TreeOp>,
    pub bytes: Vec<ByteOp>,
}

/// Text cases over `seeds` seeds: up to 6 tree mutations and 3 byte mutations.
pub fn text_cases(seeds: usize) -> BoxedStrategy<TextCase> {
    (
        0..seeds.max(1),
        any::<bool>(),
        mutate::tree_ops(6),
        prop_oneof![3 => Just(Vec::new()), 2 => mutate::byte_ops(3)],
    )
        .prop_map(|(seed, json, tree, bytes)| TextCase {
            seed,
            json,
            tree,
            bytes,
        })
        .boxed()
}

/// The text of a case: the seed's tree mutated and written back (as TOML when `toml`
/// and TOML can hold it, else JSON; the seed's own text when there is no tree change),
/// then its bytes mutated. Also whether the text is JSON.
#[must_use]
pub fn render_text(
    doc: &Document,
    case: &TextCase,
    toml: bool,
    dict: &Dictionary,
) -> (Vec<u8>, bool) {
    let (mut bytes, json) = match (&doc.tree, case.tree.is_empty() && !case.json) {
        (Some(tree), false) => {
            let mut tree = tree.clone();
            mutate::apply_tree(&mut tree, &case.tree, dict);
            match (toml && !case.json)
                .then(|| mutate::to_toml(&tree))
                .flatten()
            {
                Some(t) => (t.into_bytes(), false),
                None => (serde_json::to_vec_pretty(&tree).unwrap_or_default(), true),
            }
        }
        _ => (doc.text.clone().into_bytes(), !toml),
    };
    mutate::apply_bytes(&mut bytes, &case.bytes, dict);
    (bytes, json)
}

/// Splits a reproducer into its first line (what the rest is) and the rest.
#[must_use]
pub fn split_header(input: &[u8]) -> (&str, &[u8]) {
    match input.iter().position(|b| *b == b'\n') {
        Some(i) => (
            std::str::from_utf8(&input[..i]).unwrap_or(""),
            &input[i + 1..],
        ),
        None => ("", input),
    }
}

/// `header\n` followed by `body`.
#[must_use]
pub fn with_header(header: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(header.len() + 1 + body.len());
    out.extend_from_slice(header.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

/// The example directories holding `file`, in name order.
#[must_use]
pub fn examples_with(file: &str) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(crate::repository().join("examples"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.join(file).is_file())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}
