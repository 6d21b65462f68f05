//! Policy bundles, TOML and JSON: the example bundles mutated field by field and byte by
//! byte, through `docket_policies::parse` and what `docket policy check` asks of a bundle
//! that parses (admission problems, content scoped to nothing, the hash), and further
//! `docket policy explain` (handoff decisions between its first agents) and `docket
//! policy diff` (against the example it came from).
//!
//! An input is `toml EXAMPLE` or `json EXAMPLE` on its first line, the bundle's text after.

use docket_policies::{Format, InputKind, PolicyBundle, parse};
use proptest::prelude::*;

use super::{Document, TextCase, render_text, split_header, text_cases, with_header};
use crate::mutate::Dictionary;
use crate::{Bound, Target};

/// Agents of a bundle between whom handoffs are decided (every ordered pair).
const EXPLAINED_AGENTS: usize = 6;

pub struct Bundles {
    examples: Vec<(String, Document, PolicyBundle)>,
    dict: Dictionary,
    /// Inputs that compiled, and that were refused with diagnostics.
    compiled: u64,
    refused: u64,
}

impl Bundles {
    /// The example bundles (`examples/*/policy.toml`) as seeds.
    ///
    /// # Errors
    /// An example that cannot be read or does not parse.
    pub fn new() -> Result<Self, crate::SetupError> {
        let mut examples = Vec::new();
        for dir in super::examples_with("policy.toml") {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let path = dir.join("policy.toml");
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let bundle = parse(&text, "policy.toml", Format::Toml)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            examples.push((name.clone(), Document::toml(&name, text), bundle));
        }
        if examples.is_empty() {
            return Err("no examples/*/policy.toml".into());
        }
        let trees: Vec<&serde_json::Value> = examples
            .iter()
            .filter_map(|(_, d, _)| d.tree.as_ref())
            .collect();
        let dict = Dictionary::of(&trees);
        Ok(Self {
            examples,
            dict,
            compiled: 0,
            refused: 0,
        })
    }
}

/// What `docket policy check`, `explain` and `diff` ask of a bundle's text; whether it
/// compiled.
///
/// # Errors
/// A diagnostic located outside the text.
pub fn check_bundle(
    text: &str,
    format: Format,
    base: Option<&PolicyBundle>,
) -> Result<bool, String> {
    let name = if format == Format::Json {
        "fuzz.json"
    } else {
        "fuzz.toml"
    };
    match parse(text, name, format) {
        Ok(b) => {
            let _ = b
                .admission_problems()
                .iter()
                .map(ToString::to_string)
                .count();
            let _ = b.emptied_content().iter().map(ToString::to_string).count();
            let _ = b.hash().to_hex();
            let _ = b.canonical_bytes();
            let agents: Vec<String> = b
                .agent_ids()
                .take(EXPLAINED_AGENTS)
                .map(str::to_owned)
                .collect();
            for from in &agents {
                for to in &agents {
                    let _ = b.decide_handoff(from, to, InputKind::Decision);
                    let _ = b.decide_handoff(from, to, InputKind::Context);
                }
            }
            if let Some(base) = base {
                let _ = docket_policies::diff(base, &b);
            }
            Ok(true)
        }
        Err(e) => {
            let _ = e.to_string();
            let lines = text.lines().count() + 1;
            for d in e.diagnostics() {
                if d.line > lines {
                    return Err(format!(
                        "a diagnostic names line {} of a {}-line text: {d}",
                        d.line,
                        lines - 1
                    ));
                }
            }
            Ok(false)
        }
    }
}

impl Target for Bundles {
    type Case = TextCase;

    fn name(&self) -> &'static str {
        "bundles"
    }

    fn strategy(&self) -> BoxedStrategy<TextCase> {
        text_cases(self.examples.len())
    }

    fn render(&self, case: &TextCase) -> Vec<u8> {
        let (name, doc, _) = &self.examples[case.seed % self.examples.len()];
        let (text, json) = render_text(doc, case, true, &self.dict);
        with_header(
            &format!("{} {name}", if json { "json" } else { "toml" }),
            &text,
        )
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds = Vec::new();
        for (name, doc, _) in &self.examples {
            seeds.push(with_header(&format!("toml {name}"), doc.text.as_bytes()));
            if let Some(tree) = &doc.tree {
                let json = serde_json::to_vec_pretty(tree).unwrap_or_default();
                seeds.push(with_header(&format!("json {name}"), &json));
            }
        }
        seeds
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        let (header, body) = split_header(input);
        let mut words = header.split(' ');
        let format = if words.next() == Some("json") {
            Format::Json
        } else {
            Format::Toml
        };
        let base = words
            .next()
            .and_then(|n| self.examples.iter().find(|(name, _, _)| name == n))
            .map(|(_, _, b)| b);
        // A bundle is text: bytes that are not UTF-8 are refused before parsing, as
        // `load_file` does.
        let Ok(text) = std::str::from_utf8(body) else {
            return Ok(());
        };
        let compiled = check_bundle(text, format, base)?;
        if compiled {
            self.compiled += 1;
        } else {
            self.refused += 1;
        }
        Ok(())
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "{} inputs compiled, {} refused with diagnostics (the rest not UTF-8)",
            self.compiled, self.refused
        )]
    }

    fn bound(&self) -> Bound {
        // The tokenizer and validator tables are built once, before measuring; a case
        // then holds its tree, the compiled bundle and its indexes.
        Bound {
            per_byte: 512,
            constant: 32 << 20,
        }
    }
}
