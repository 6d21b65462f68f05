//! Workflow files: the examples' workflows mutated field by field and byte by byte,
//! through the decider's `WorkflowSpec::parse`, the runtime's checks against the
//! example's bundle and the machine (`check_workflow`), and `Workflow::load` of the text
//! written beside a copy of the example's bundle (paths resolved, the bundle read).
//!
//! An input is `EXAMPLE FILE` on its first line (the example directory and the workflow
//! file it came from), the workflow's text after.

use std::path::PathBuf;

use docket_decider::WorkflowSpec;
use docket_policies::PolicyBundle;
use docket_runtime::{Workflow, check_workflow};
use proptest::prelude::*;

use super::{Document, TextCase, render_text, split_header, text_cases, with_header};
use crate::mutate::Dictionary;
use crate::{Bound, Target};

struct Example {
    name: String,
    file: String,
    doc: Document,
    bundle: std::sync::Arc<PolicyBundle>,
    /// A directory holding a copy of the example's bundle and input files, where the
    /// mutated workflow is written to be loaded.
    dir: PathBuf,
}

pub struct Workflows {
    examples: Vec<Example>,
    dict: Dictionary,
    _tmp: tempfile::TempDir,
    /// Inputs that parsed, that passed the checks, and that loaded.
    parsed: u64,
    runnable: u64,
    loaded: u64,
}

impl Workflows {
    /// The examples' workflow files as seeds.
    ///
    /// # Errors
    /// An example that cannot be read or copied.
    pub fn new() -> Result<Self, crate::SetupError> {
        let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut examples = Vec::new();
        for dir in super::examples_with("workflow.toml") {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let copy = tmp.path().join(&name);
            std::fs::create_dir_all(&copy).map_err(|e| e.to_string())?;
            let entries = std::fs::read_dir(&dir).map_err(|e| e.to_string())?;
            let mut workflows = Vec::new();
            for entry in entries.flatten() {
                let p = entry.path();
                if p.is_file() {
                    std::fs::copy(&p, copy.join(entry.file_name())).map_err(|e| e.to_string())?;
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    if p.extension().is_some_and(|e| e == "toml") && text.contains("[agents.") {
                        workflows.push((entry.file_name().to_string_lossy().into_owned(), text));
                    }
                }
            }
            let policy =
                std::fs::read_to_string(dir.join("policy.toml")).map_err(|e| e.to_string())?;
            let bundle = std::sync::Arc::new(
                PolicyBundle::from_toml_str(&policy, "policy.toml").map_err(|e| e.to_string())?,
            );
            workflows.sort();
            for (file, text) in workflows {
                examples.push(Example {
                    name: name.clone(),
                    file: file.clone(),
                    doc: Document::toml(&file, text),
                    bundle: bundle.clone(),
                    dir: copy.clone(),
                });
            }
        }
        if examples.is_empty() {
            return Err("no examples/*/workflow.toml".into());
        }
        let trees: Vec<&serde_json::Value> = examples
            .iter()
            .filter_map(|e| e.doc.tree.as_ref())
            .collect();
        let mut dict = Dictionary::of(&trees);
        dict.extend([
            "in_process",
            "http",
            "command",
            "cwd",
            "classifiers",
            "timeout_ms",
            "http://127.0.0.1:9/x",
        ]);
        Ok(Self {
            examples,
            dict,
            _tmp: tmp,
            parsed: 0,
            runnable: 0,
            loaded: 0,
        })
    }
}

impl Target for Workflows {
    type Case = TextCase;

    fn name(&self) -> &'static str {
        "workflows"
    }

    fn strategy(&self) -> BoxedStrategy<TextCase> {
        text_cases(self.examples.len())
    }

    fn render(&self, case: &TextCase) -> Vec<u8> {
        let e = &self.examples[case.seed % self.examples.len()];
        let (text, _) = render_text(&e.doc, case, true, &self.dict);
        with_header(&format!("{} {}", e.name, e.file), &text)
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        self.examples
            .iter()
            .map(|e| with_header(&format!("{} {}", e.name, e.file), e.doc.text.as_bytes()))
            .collect()
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        let (header, body) = split_header(input);
        let name = header.split(' ').next().unwrap_or("");
        let Some(e) = self
            .examples
            .iter()
            .find(|e| e.name == name)
            .or(self.examples.first())
        else {
            return Ok(());
        };
        let Ok(text) = std::str::from_utf8(body) else {
            return Ok(());
        };
        let path = e.dir.join("fuzzed.toml");
        match WorkflowSpec::parse(text, &path) {
            Ok(spec) => {
                self.parsed += 1;
                let problems = check_workflow(&spec, &e.bundle);
                let _ = problems.iter().map(ToString::to_string).count();
                if problems.is_empty() {
                    self.runnable += 1;
                }
                std::fs::write(&path, body)
                    .map_err(|err| format!("writing {}: {err}", path.display()))?;
                match Workflow::load(&path) {
                    Ok(w) => {
                        self.loaded += 1;
                        let _ = w.emptied_content();
                    }
                    Err(err) => {
                        let _ = err.to_string();
                    }
                }
            }
            Err(err) => {
                let _ = err.to_string();
            }
        }
        Ok(())
    }

    fn bound(&self) -> Bound {
        Bound {
            per_byte: 512,
            constant: 32 << 20,
        }
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "{} inputs parsed, {} passed the checks (commands of the examples are bare names looked up on PATH), {} loaded with their bundle",
            self.parsed, self.runnable, self.loaded
        )]
    }
}
