//! The Python snippets of the pages an auditor follows (docs/export-format.md, docs/proofs.md,
//! docs/checkpoints.md, docs/events.md, store/FORMAT.md) run exactly as written against a
//! real signed export made by docket, and fail on each changed input they claim to catch.
//!
//! The pages mark each ```python block with an HTML comment just before it:
//! `<!-- snippet: ARGS; refuses: CHANGES -->`. ARGS are the program's arguments, in order,
//! from [`ARGS`]; CHANGES are the inputs changed one at a time on which the snippet must
//! exit non-zero, from [`CHANGES`]. A block without the comment, or naming anything else,
//! fails this test.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use docket_tests::{
    docket_ok, exit_code, geo_agents_built, python_verifier, redactable_geo_workflow, stdout_text,
    workspace_root,
};

/// The pages whose snippets are checked.
const PAGES: [&str; 5] = [
    "docs/export-format.md",
    "docs/proofs.md",
    "docs/checkpoints.md",
    "docs/events.md",
    "store/FORMAT.md",
];

/// What a snippet may be given.
const ARGS: [(&str, &str); 5] = [
    (
        "EXPORT",
        "a signed export (JSON lines) of a run recorded redactable",
    ),
    ("SEQ", "the sequence of that run's run.completed"),
    (
        "DISCLOSURE",
        "a disclosure of a value event SEQ commits to (docket disclose)",
    ),
    (
        "PROOF",
        "a file holding `docket prove RUN --seq SEQ --json`",
    ),
    ("KEY", "the instance's verifier key (docket keys show)"),
];

/// What a snippet may claim to catch: the change and the argument it changes.
const CHANGES: [(&str, &str, &str); 6] = [
    (
        "record",
        "EXPORT",
        "one byte of event SEQ's canonical body changed in its record",
    ),
    (
        "signature",
        "EXPORT",
        "one byte of the checkpoint's signature changed",
    ),
    (
        "origin",
        "EXPORT",
        "the checkpoint re-signed by the instance's key for another origin",
    ),
    (
        "key",
        "KEY",
        "another instance's verifier key of the same name",
    ),
    (
        "disclosure",
        "DISCLOSURE",
        "the disclosure of another value under the same salt and name",
    ),
    (
        "proof",
        "PROOF",
        "one byte of the proof's first path hash changed",
    ),
];

/// One marked ```python block of a page.
struct Snippet {
    page: &'static str,
    line: usize,
    code: String,
    args: Vec<String>,
    refuses: Vec<String>,
}

/// Every ```python block of `page`, with its marker read (panicking, naming the page and
/// line, on a block without one or a marker naming an unknown argument or change).
fn snippets(page: &'static str) -> Vec<Snippet> {
    let text = std::fs::read_to_string(workspace_root().join(page)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end() != "```python" {
            i += 1;
            continue;
        }
        let line = i + 1;
        let marker = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().strip_prefix("<!-- snippet:"))
            .and_then(|l| l.strip_suffix("-->"))
            .unwrap_or_else(|| {
                panic!("{page}:{line}: a python block without `<!-- snippet: ARGS; refuses: CHANGES -->` before it")
            });
        let (args, refuses) = marker.split_once("; refuses:").unwrap_or((marker, ""));
        let args: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
        let refuses: Vec<String> = refuses
            .split_whitespace()
            .map(|w| w.trim_end_matches(',').to_owned())
            .collect();
        for arg in &args {
            assert!(
                ARGS.iter().any(|(a, _)| a == arg),
                "{page}:{line}: unknown snippet argument {arg} (known: {ARGS:?})"
            );
        }
        for change in &refuses {
            let (_, arg, _) = CHANGES
                .iter()
                .find(|(c, _, _)| c == change)
                .unwrap_or_else(|| {
                    panic!("{page}:{line}: unknown change {change} (known: {CHANGES:?})")
                });
            assert!(
                args.iter().any(|a| a == arg),
                "{page}:{line}: change {change} needs argument {arg}, which the snippet does not take"
            );
        }
        let end = (i + 1..lines.len())
            .find(|&j| lines[j].trim_end() == "```")
            .unwrap_or_else(|| panic!("{page}:{line}: the python block does not end"));
        found.push(Snippet {
            page,
            line,
            code: lines[i + 1..end].join("\n") + "\n",
            args,
            refuses,
        });
        i = end + 1;
    }
    found
}

/// The inputs of [`ARGS`] from a real run, and each of [`CHANGES`] made to them.
struct Inputs {
    dir: tempfile::TempDir,
    args: BTreeMap<&'static str, String>,
    changed: BTreeMap<&'static str, String>,
}

impl Inputs {
    fn made() -> Inputs {
        geo_agents_built();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        docket_ok(
            &data,
            &["keys", "generate", "--name", "audit.example/docket"],
        );
        let key = docket_ok(&data, &["keys", "show"]).trim().to_owned();
        let workflow = redactable_geo_workflow(dir.path());
        let run = "doc-snippets";
        docket_ok(&data, &["run", workflow.to_str().unwrap(), "--run-id", run]);
        let export = dir.path().join("export.jsonl");
        docket_ok(
            &data,
            &[
                "export",
                run,
                "--format",
                "jsonl",
                "--out",
                export.to_str().unwrap(),
            ],
        );
        let text = std::fs::read_to_string(&export).unwrap();
        let seq = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|l| l["kind"] == "run.completed")
            .and_then(|l| l["seq"].as_u64())
            .expect("the run completed");
        let disclosed = docket_ok(
            &data,
            &[
                "disclose",
                run,
                "--seq",
                &seq.to_string(),
                "--pointer",
                "/output/recommendations",
                "--json",
            ],
        );
        let disclosed: serde_json::Value =
            serde_json::from_str(disclosed.lines().next().unwrap()).unwrap();
        let disclosure = disclosed["disclosure"].as_str().unwrap().to_owned();
        let proof = docket_ok(&data, &["prove", run, "--seq", &seq.to_string(), "--json"]);
        let proof_file = dir.path().join("proof.json");
        std::fs::write(&proof_file, &proof).unwrap();

        let write = |name: &str, text: String| -> String {
            let path: PathBuf = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_owned()
        };
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let mut changed = BTreeMap::new();

        // record: the last byte of event SEQ's canonical body (before prev and hash).
        let at = lines
            .iter()
            .position(|l| {
                l.starts_with(r#"{"type":"event""#) && l.contains(&format!("\"seq\":{seq},"))
            })
            .unwrap();
        let event: serde_json::Value = serde_json::from_str(&lines[at]).unwrap();
        let record_text = event["record"].as_str().unwrap();
        let mut record = STANDARD.decode(record_text).unwrap();
        let body_end = record.len() - 64;
        record[body_end - 1] ^= 1;
        let mut tampered = lines.clone();
        tampered[at] = lines[at].replace(record_text, &STANDARD.encode(&record));
        changed.insert("record", write("record.jsonl", tampered.join("\n") + "\n"));

        // signature: the last byte of the checkpoint's signature.
        let mut checkpoint: serde_json::Value =
            serde_json::from_str(lines.last().unwrap()).unwrap();
        assert_eq!(checkpoint["type"], "checkpoint", "the run is sealed");
        let note = checkpoint["note"].as_str().unwrap().to_owned();
        let (text_part, signature_line) = note.trim_end().rsplit_once('\n').unwrap();
        let (prefix, b64) = signature_line.rsplit_once(' ').unwrap();
        let mut sig = STANDARD.decode(b64).unwrap();
        *sig.last_mut().unwrap() ^= 1;
        checkpoint["note"] = format!("{text_part}\n{prefix} {}\n", STANDARD.encode(&sig)).into();
        let mut tampered = lines.clone();
        *tampered.last_mut().unwrap() = checkpoint.to_string();
        changed.insert(
            "signature",
            write("signature.jsonl", tampered.join("\n") + "\n"),
        );

        // origin: the same tree head, signed by the same key for another prefix.
        let signed = docket_evidence::SignedCheckpoint::parse(&note).unwrap();
        let mut other = signed.checkpoint;
        other.origin = format!("elsewhere.example/run/{run}");
        let signer = docket_evidence::signer(&data).unwrap().unwrap();
        checkpoint["note"] = other.sign(&signer).unwrap().into();
        let mut tampered = lines.clone();
        *tampered.last_mut().unwrap() = checkpoint.to_string();
        changed.insert("origin", write("origin.jsonl", tampered.join("\n") + "\n"));

        // key: another instance's key of the same name.
        let elsewhere = dir.path().join("elsewhere");
        docket_ok(
            &elsewhere,
            &["keys", "generate", "--name", "audit.example/docket"],
        );
        changed.insert(
            "key",
            docket_ok(&elsewhere, &["keys", "show"]).trim().to_owned(),
        );

        // disclosure: another value under the same salt and name.
        let opened: Vec<serde_json::Value> =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&disclosure).unwrap()).unwrap();
        let mut forged = opened.clone();
        *forged.last_mut().unwrap() = serde_json::json!([{"action": "forged"}]);
        changed.insert(
            "disclosure",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap()),
        );

        // proof: one byte of the first path hash.
        let mut proof_value: serde_json::Value = serde_json::from_str(proof.trim()).unwrap();
        let mut first = STANDARD
            .decode(proof_value["path"][0].as_str().unwrap())
            .unwrap();
        first[0] ^= 1;
        proof_value["path"][0] = STANDARD.encode(&first).into();
        changed.insert(
            "proof",
            write("proof-changed.json", proof_value.to_string()),
        );

        let args = BTreeMap::from([
            ("EXPORT", export.to_str().unwrap().to_owned()),
            ("SEQ", seq.to_string()),
            ("DISCLOSURE", disclosure),
            ("PROOF", proof_file.to_str().unwrap().to_owned()),
            ("KEY", key),
        ]);
        Inputs { dir, args, changed }
    }

    /// Runs `snippet` with its arguments, `change` (if any) made to the one it changes:
    /// the exit code and what it printed.
    fn run(&self, snippet: &Snippet, n: usize, change: Option<&str>) -> (i32, String) {
        let file = self.dir.path().join(format!("snippet-{n}.py"));
        std::fs::write(&file, &snippet.code).unwrap();
        let changed_arg = change.map(|c| {
            CHANGES
                .iter()
                .find(|(name, _, _)| *name == c)
                .map(|(_, arg, _)| *arg)
                .unwrap()
        });
        let args: Vec<&str> = snippet
            .args
            .iter()
            .map(|a| {
                if Some(a.as_str()) == changed_arg {
                    self.changed[change.unwrap()].as_str()
                } else {
                    self.args[a.as_str()].as_str()
                }
            })
            .collect();
        let out = Command::new("python3")
            .arg(&file)
            .args(&args)
            .output()
            .expect("python3 runs");
        (
            exit_code(&out),
            format!(
                "{}{}",
                stdout_text(&out),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }
}

#[test]
fn every_python_snippet_of_the_format_pages_checks_a_real_export_and_refuses_what_it_claims() {
    let all: Vec<Snippet> = PAGES.into_iter().flat_map(snippets).collect();
    // The pages an auditor writes a verifier from each carry their checks as code.
    for page in [
        "docs/export-format.md",
        "docs/proofs.md",
        "docs/checkpoints.md",
        "store/FORMAT.md",
    ] {
        assert!(
            all.iter().any(|s| s.page == page),
            "{page} has no python snippet"
        );
    }
    if !python_verifier() {
        return;
    }
    let inputs = Inputs::made();
    for (n, snippet) in all.iter().enumerate() {
        let at = format!("{}:{}", snippet.page, snippet.line);
        let (code, said) = inputs.run(snippet, n, None);
        assert_eq!(code, 0, "{at} fails on a sound export: {said}");
        for change in &snippet.refuses {
            let (code, said) = inputs.run(snippet, n, Some(change));
            assert_ne!(
                code, 0,
                "{at} accepts a changed input ({change}) it claims to refuse: {said}"
            );
        }
    }
}
