//! `docket export --format jsonl` and `docket verify-export` through the binary, and the
//! reference verifier in Python (examples/verifier/) on the same files: both accept a
//! sound export and name the same first bad line of a damaged one.

use std::path::Path;
use std::process::Command;

use docket_tests::{
    docket_bin, docket_on, exit_code, export_jsonl, geo_agents_built, geo_workflow,
    python_verifier, stdout_text, workspace_root,
};

/// The Python verifier's verdict: exit code and its one line.
fn python_verdict(file: &Path) -> (i32, String) {
    let out = Command::new("python3")
        .arg(workspace_root().join("examples/verifier/verify_export.py"))
        .arg(file)
        .output()
        .expect("python3 runs");
    (exit_code(&out), stdout_text(&out))
}

fn docket_verdict(file: &Path) -> (i32, serde_json::Value) {
    let out = Command::new(docket_bin())
        .args(["verify-export", "--json"])
        .arg(file)
        .output()
        .expect("docket runs");
    let verdict = serde_json::from_str(stdout_text(&out).trim()).expect("one JSON line");
    (exit_code(&out), verdict)
}

/// Runs the geo example in a new data directory in `dir` as run `geo-export`, unsigned, and
/// exports it to `dir`.
fn geo_export(dir: &Path) -> std::path::PathBuf {
    run_geo_export(&dir.join("data"), dir, Some("none"))
}

/// Runs the geo example in `data` as run `geo-export` and exports it to `dir`, sealed
/// with `data`'s key.
fn geo_export_in(data: &Path, dir: &Path) -> std::path::PathBuf {
    run_geo_export(data, dir, None)
}

/// Runs the geo example in `data` as run `geo-export`, with `DOCKET_SIGNING_KEY` set to
/// `signing` when given (`none`: an unsigned run), and exports it to `dir`.
fn run_geo_export(data: &Path, dir: &Path, signing: Option<&str>) -> std::path::PathBuf {
    geo_agents_built();
    let workflow = geo_workflow();
    let mut command = Command::new(docket_bin());
    command
        .args([
            "run",
            workflow.to_str().unwrap(),
            "--run-id",
            "geo-export",
            "--data",
        ])
        .arg(data);
    if let Some(signing) = signing {
        command.env("DOCKET_SIGNING_KEY", signing);
    }
    let run = command.output().expect("docket runs");
    assert_eq!(
        exit_code(&run),
        0,
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let file = dir.join("geo-export.jsonl");
    let said = export_jsonl(data, "geo-export", &file);
    assert!(said.contains("wrote"), "{said}");
    file
}

#[test]
fn an_export_of_the_geo_run_verifies_in_docket_and_in_python() {
    let dir = tempfile::tempdir().unwrap();
    let file = geo_export(dir.path());
    let (code, verdict) = docket_verdict(&file);
    assert_eq!(code, 0, "{verdict}");
    assert_eq!(verdict["sound"], true);
    assert_eq!(verdict["run"], "geo-export");
    let events = verdict["events"].as_u64().unwrap();
    assert!(events > 10, "{verdict}");
    // Every line but the header, the tree head and the values the events commit to (each
    // once, docs/export-format.md) is an event.
    let text = std::fs::read_to_string(&file).unwrap();
    let values = text
        .lines()
        .filter(|l| {
            l.starts_with(r#"{"type":"content""#) || l.starts_with(r#"{"type":"disclosure""#)
        })
        .count() as u64;
    assert!(values > 0, "the geo run commits to values apart");
    assert_eq!(text.lines().count() as u64, events + 2 + values);
    if python_verifier() {
        let (code, line) = python_verdict(&file);
        assert_eq!(code, 0, "{line}");
        assert!(line.contains("sound: run geo-export"), "{line}");
        assert!(
            line.contains(verdict["root"].as_str().unwrap()),
            "{line} vs {verdict}"
        );
    }
}

#[test]
fn both_verifiers_name_the_same_first_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = geo_export(dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let python = python_verifier();
    // The first event line from the fifth line on (values follow some events).
    let at = (4..lines.len())
        .find(|&i| lines[i].starts_with(r#"{"type":"event""#))
        .unwrap();
    // An event line whose payload holds a `true`.
    let typed = (at..lines.len())
        .find(|&i| {
            lines[i].starts_with(r#"{"type":"event""#)
                && lines[i]
                    .split_once("\"payload\":")
                    .is_some_and(|(_, p)| p.contains(":true"))
        })
        .expect("an event whose payload holds true");
    let damaged: Vec<(&str, String, u64)> = vec![
        (
            "a payload value changed",
            {
                let mut ls = lines.clone();
                let changed = ls[at].replacen("\"payload\":{", "\"payload\":{\"injected\":1,", 1);
                ls[at] = &changed;
                ls.join("\n") + "\n"
            },
            at as u64 + 1,
        ),
        (
            // A forged kind before the genuine one: a reader keeping the first copy of a
            // key would see another event.
            "a key given twice, the forged copy first",
            {
                let mut ls = lines.clone();
                let changed = ls[at].replacen(
                    "{\"type\":\"event\"",
                    "{\"kind\":\"run.failed\",\"type\":\"event\"",
                    1,
                );
                ls[at] = &changed;
                ls.join("\n") + "\n"
            },
            at as u64 + 1,
        ),
        (
            "a key given twice, the forged copy last",
            {
                let mut ls = lines.clone();
                let changed = format!("{},\"kind\":\"run.failed\"}}", &ls[at][..ls[at].len() - 1]);
                ls[at] = &changed;
                ls.join("\n") + "\n"
            },
            at as u64 + 1,
        ),
        (
            // Python's == takes true for 1: the payload's types must match too.
            "a payload's true written as 1",
            {
                let mut ls = lines.clone();
                let changed = ls[typed].replacen(":true", ":1", 1);
                ls[typed] = &changed;
                ls.join("\n") + "\n"
            },
            typed as u64 + 1,
        ),
        (
            "an event deleted",
            {
                let mut ls = lines.clone();
                ls.remove(6);
                ls.join("\n") + "\n"
            },
            7,
        ),
        (
            "two events swapped",
            {
                let mut ls = lines.clone();
                ls.swap(2, 3);
                ls.join("\n") + "\n"
            },
            3,
        ),
        (
            "cut short in an event",
            text[..text.len() - lines.last().unwrap().len() - 40].to_owned(),
            lines.len() as u64 - 1,
        ),
        (
            "the tree head left out",
            lines[..lines.len() - 1].join("\n") + "\n",
            lines.len() as u64,
        ),
    ];
    for (what, content, line) in damaged {
        let bad = dir.path().join("bad.jsonl");
        std::fs::write(&bad, content).unwrap();
        let (code, verdict) = docket_verdict(&bad);
        assert_eq!(code, 1, "{what}: {verdict}");
        assert_eq!(verdict["line"], line, "{what}: {verdict}");
        if python {
            let (code, said) = python_verdict(&bad);
            assert_eq!(code, 1, "{what}: {said}");
            assert!(
                said.contains(&format!("line {line}:")),
                "{what}: python says {said}"
            );
        }
    }
}

#[test]
fn export_and_verify_export_errors_say_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = docket_on(&data, &["export", "no-such-run", "--format", "jsonl"]);
    assert_eq!(exit_code(&out), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no run no-such-run"), "{err}");
    let out = Command::new(docket_bin())
        .args(["verify-export", "/nonexistent/export.jsonl"])
        .output()
        .unwrap();
    assert_eq!(exit_code(&out), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot open the export /nonexistent/export.jsonl"),
        "{err}"
    );
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let (code, verdict) = docket_verdict(&empty);
    assert_eq!(code, 1);
    assert_eq!(verdict["line"], 1, "{verdict}");
}

/// Makes `data`'s signing key named `name` (`docket keys generate`) and returns its public
/// half (`docket keys show`).
fn generate_key(data: &Path, name: &str) -> String {
    let made = docket_on(data, &["keys", "generate", "--name", name]);
    assert_eq!(
        exit_code(&made),
        0,
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    stdout_text(&docket_on(data, &["keys", "show"]))
        .trim()
        .to_owned()
}

#[test]
fn a_sealed_run_exports_its_signed_checkpoint_and_both_verifiers_check_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let key = generate_key(&data, "audit.example/docket");
    let file = geo_export_in(&data, dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "checkpoint");
    assert_eq!(last["verifier_key"], key.as_str());
    assert!(
        last["note"]
            .as_str()
            .unwrap()
            .starts_with("audit.example/docket/run/geo-export\n")
    );

    // docket's verifier, against the key the auditor got out of band.
    let out = Command::new(docket_bin())
        .args(["verify-export", "--json", "--key", &key])
        .arg(&file)
        .output()
        .unwrap();
    let verdict: serde_json::Value = serde_json::from_str(stdout_text(&out).trim()).unwrap();
    assert_eq!(exit_code(&out), 0, "{verdict}");
    assert_eq!(verdict["key_trusted"], true);
    // `name+keyid`: the key's first two fields (its base64 may itself hold a `+`).
    let label: Vec<&str> = key.splitn(3, '+').take(2).collect();
    assert_eq!(verdict["signed_by"], label.join("+"));

    // Another instance's key: refused at the checkpoint line.
    let elsewhere = dir.path().join("elsewhere");
    let other = generate_key(&elsewhere, "audit.example/docket");
    let out = Command::new(docket_bin())
        .args(["verify-export", "--json", "--key", &other])
        .arg(&file)
        .output()
        .unwrap();
    let verdict: serde_json::Value = serde_json::from_str(stdout_text(&out).trim()).unwrap();
    assert_eq!(exit_code(&out), 1, "{verdict}");
    assert_eq!(verdict["line"], text.lines().count(), "{verdict}");

    // The file naming another key than the one that signed it: refused, even with the
    // signer's key given (the file would name a key that never signed it).
    let renamed = dir.path().join("renamed.jsonl");
    std::fs::write(&renamed, text.replace(&key, &other)).unwrap();
    let out = Command::new(docket_bin())
        .args(["verify-export", "--json", "--key", &key])
        .arg(&renamed)
        .output()
        .unwrap();
    let verdict: serde_json::Value = serde_json::from_str(stdout_text(&out).trim()).unwrap();
    assert_eq!(exit_code(&out), 1, "{verdict}");
    assert_eq!(verdict["line"], text.lines().count(), "{verdict}");
    assert!(
        verdict["error"]
            .as_str()
            .is_some_and(|e| e.contains("not the key you gave")),
        "{verdict}"
    );

    if python_verifier() {
        let run_on = |file: &Path, key: &str| {
            Command::new("python3")
                .arg(workspace_root().join("examples/verifier/verify_export.py"))
                .arg(file)
                .args(["--key", key])
                .output()
                .unwrap()
        };
        let run = |key: &str| run_on(&file, key);
        let out = run_on(&renamed, &key);
        assert_eq!(exit_code(&out), 1, "{}", stdout_text(&out));
        assert!(
            stdout_text(&out).contains("not the key you gave"),
            "{}",
            stdout_text(&out)
        );
        let out = run(&key);
        assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
        assert!(stdout_text(&out).contains("signed by audit.example/docket"));
        let out = run(&other);
        assert_eq!(exit_code(&out), 1, "{}", stdout_text(&out));
        assert!(
            stdout_text(&out).contains("checkpoint"),
            "{}",
            stdout_text(&out)
        );
    }
}

/// The export of `file` with its checkpoint replaced by one the instance's own key signs
/// for `origin` (the same size and root).
fn resigned_for(data: &Path, file: &Path, origin: &str) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let (rest, last) = text.trim_end().rsplit_once('\n').unwrap();
    let mut line: serde_json::Value = serde_json::from_str(last).unwrap();
    let signed = docket_evidence::SignedCheckpoint::parse(line["note"].as_str().unwrap()).unwrap();
    let mut checkpoint = signed.checkpoint;
    checkpoint.origin = origin.to_owned();
    let key = docket_evidence::signer(data)
        .unwrap()
        .expect("the data directory's key");
    line["note"] = checkpoint.sign(&key).unwrap().into();
    format!("{rest}\n{line}\n")
}

#[test]
fn a_checkpoint_signed_by_the_right_key_for_another_origin_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let key = generate_key(&data, "audit.example/docket");
    let file = geo_export_in(&data, dir.path());
    // The one origin rule: the key's name, `/run/`, the run id. A prefix that merely ends
    // in `/run/geo-export`, or another key's name, is some other log's checkpoint.
    for origin in [
        "elsewhere.example/docket/run/geo-export",
        "audit.example/docket/x/run/geo-export",
        "audit.example/docket/run/geo-export/run/geo-export",
    ] {
        let forged = dir.path().join("forged.jsonl");
        std::fs::write(&forged, resigned_for(&data, &file, origin)).unwrap();
        let lines = std::fs::read_to_string(&forged).unwrap().lines().count();
        for with_key in [false, true] {
            let mut cmd = Command::new(docket_bin());
            cmd.args(["verify-export", "--json"]);
            if with_key {
                cmd.args(["--key", &key]);
            }
            let out = cmd.arg(&forged).output().unwrap();
            let verdict: serde_json::Value =
                serde_json::from_str(stdout_text(&out).trim()).unwrap();
            assert_eq!(exit_code(&out), 1, "{origin}: {verdict}");
            assert_eq!(verdict["line"], lines, "{verdict}");
            assert!(
                verdict["error"]
                    .as_str()
                    .is_some_and(|e| e.contains(&format!(
                        "its origin \"{origin}\" is not \"audit.example/docket/run/geo-export\""
                    ))),
                "{verdict}"
            );
        }
        if python_verifier() {
            let (code, line) = python_verdict(&forged);
            assert_eq!(code, 1, "{origin}: {line}");
            assert!(line.contains("its origin"), "{line}");
        }
    }
    // The same re-signing with the right origin is sound: only the origin was refused.
    let same = dir.path().join("same.jsonl");
    std::fs::write(
        &same,
        resigned_for(&data, &file, "audit.example/docket/run/geo-export"),
    )
    .unwrap();
    assert_eq!(docket_verdict(&same).0, 0);
}

#[test]
fn a_run_whose_seal_no_key_here_checks_is_exported_unsigned_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate_key(&data, "lost.example/docket");
    let sealed = geo_export_in(&data, dir.path());
    let sealed = std::fs::read_to_string(&sealed).unwrap();
    assert!(sealed.lines().last().unwrap().contains("\"checkpoint\""));

    // The key is lost (the directory copied without it) and a new one made: the run's
    // checkpoint was signed by neither the new key nor a retired one.
    std::fs::remove_dir_all(data.join("keys")).unwrap();
    generate_key(&data, "new.example/docket");

    let file = dir.path().join("unsigned.jsonl");
    let out = docket_on(
        &data,
        &[
            "export",
            "geo-export",
            "--format",
            "jsonl",
            "--out",
            file.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(exit_code(&out), 0, "{stderr}");
    assert!(
        stderr.contains("exported unsigned") && stderr.contains("does not check"),
        "{stderr}"
    );
    assert!(
        stdout_text(&out).contains("not signed"),
        "{}",
        stdout_text(&out)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    // The same events, without the checkpoint line.
    assert_eq!(text.lines().count() + 1, sealed.lines().count());
    assert!(!text.lines().last().unwrap().contains("\"checkpoint\""));
    let (code, verdict) = docket_verdict(&file);
    assert_eq!(code, 0, "{verdict}");

    // The report shows the checkpoint that does not check, not a pass.
    let page = dir.path().join("report.html");
    let out = docket_on(
        &data,
        &[
            "export",
            "geo-export",
            "--format",
            "html",
            "--out",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("does not check with this data directory"),
        "report lacks the seal's failure"
    );
}

/// One seeded change of meaning to one line of an export.
mod mutation {
    use docket_tests::SeededRng;
    use serde_json::Value;

    /// What was done, for the failure message.
    pub(super) struct Mutated {
        pub(super) what: String,
        pub(super) line: String,
    }

    /// A path to a node of a line: keys and indexes from the line's object down.
    type Path = Vec<Step>;
    #[derive(Clone)]
    enum Step {
        Key(String),
        Index(usize),
    }

    fn walk(v: &Value, at: &mut Path, objects: &mut Vec<Path>, leaves: &mut Vec<Path>) {
        match v {
            Value::Object(map) => {
                objects.push(at.clone());
                for (k, child) in map {
                    at.push(Step::Key(k.clone()));
                    walk(child, at, objects, leaves);
                    at.pop();
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    at.push(Step::Index(i));
                    walk(child, at, objects, leaves);
                    at.pop();
                }
            }
            _ => leaves.push(at.clone()),
        }
    }

    fn node<'v>(v: &'v mut Value, path: &[Step]) -> &'v mut Value {
        path.iter().fold(v, |v, step| match step {
            Step::Key(k) => &mut v[k.as_str()],
            Step::Index(i) => &mut v[*i],
        })
    }

    fn shown(path: &[Step]) -> String {
        path.iter()
            .map(|s| match s {
                Step::Key(k) => format!("/{k}"),
                Step::Index(i) => format!("/{i}"),
            })
            .collect()
    }

    /// A value another JSON reader may take as equal to `v` (Python's `true == 1 == 1.0`,
    /// a number in a string), or `None`.
    fn of_another_type(v: &Value, rng: &mut SeededRng) -> Option<Value> {
        Some(match v {
            Value::Bool(b) => Value::from(u64::from(*b)),
            Value::Number(n) if n.is_u64() || n.is_i64() => {
                let as_float = n.as_f64()?;
                match rng.below(3) {
                    0 => Value::from(as_float),
                    1 => Value::String(n.to_string()),
                    _ if n.as_u64() == Some(0) || n.as_u64() == Some(1) => {
                        Value::Bool(n.as_u64() == Some(1))
                    }
                    _ => Value::from(as_float),
                }
            }
            Value::Number(n) => {
                let f = n.as_f64()?;
                if f.fract() == 0.0 && f.abs() < 1e15 {
                    #[allow(clippy::cast_possible_truncation)]
                    Value::from(f as i64)
                } else {
                    Value::String(n.to_string())
                }
            }
            Value::String(s) => {
                if let Ok(n) = s.parse::<i64>() {
                    Value::from(n)
                } else if s.is_empty() {
                    Value::Null
                } else {
                    return None;
                }
            }
            Value::Null => Value::String(String::new()),
            _ => return None,
        })
    }

    /// `v` with its meaning changed.
    fn changed(v: &Value) -> Value {
        match v {
            Value::Bool(b) => Value::Bool(!b),
            Value::Number(n) => match n.as_u64() {
                Some(u) => Value::from(u.wrapping_add(1)),
                None => Value::from(n.as_f64().unwrap_or(0.0) + 1.0),
            },
            Value::String(s) => Value::String(format!("{s}x")),
            Value::Null => Value::from(0),
            Value::Array(items) => {
                let mut items = items.clone();
                items.push(Value::Null);
                Value::Array(items)
            }
            Value::Object(map) => {
                let mut map = map.clone();
                map.insert("added".into(), Value::Null);
                Value::Object(map)
            }
        }
    }

    /// JSON text of `v`, with `extra` (a key and the text of its value) written into the
    /// object at `at`, before its own keys or after them.
    fn write(
        v: &Value,
        here: &[Step],
        at: &[Step],
        extra: &(String, String, bool),
        out: &mut String,
    ) {
        match v {
            Value::Object(map) => {
                let mut entries: Vec<String> = map
                    .iter()
                    .map(|(k, child)| {
                        let mut text = serde_json::to_string(k).expect("a key");
                        text.push(':');
                        let mut deeper = here.to_vec();
                        deeper.push(Step::Key(k.clone()));
                        write(child, &deeper, at, extra, &mut text);
                        text
                    })
                    .collect();
                if shown(here) == shown(at) {
                    let entry = format!(
                        "{}:{}",
                        serde_json::to_string(&extra.0).expect("a key"),
                        extra.1
                    );
                    if extra.2 {
                        entries.insert(0, entry);
                    } else {
                        entries.push(entry);
                    }
                }
                out.push('{');
                out.push_str(&entries.join(","));
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, child) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let mut deeper = here.to_vec();
                    deeper.push(Step::Index(i));
                    write(child, &deeper, at, extra, out);
                }
                out.push(']');
            }
            leaf => out.push_str(&serde_json::to_string(leaf).expect("a leaf")),
        }
    }

    /// One change of meaning to `line`, or `None` when the kind drawn has nothing to change.
    pub(super) fn mutate(line: &Value, rng: &mut SeededRng) -> Option<Mutated> {
        let (mut objects, mut leaves) = (Vec::new(), Vec::new());
        walk(line, &mut Vec::new(), &mut objects, &mut leaves);
        let mut v = line.clone();
        match rng.below(5) {
            kind @ (0 | 1) => {
                // A key given twice: another copy, first or last, with another value.
                let at = objects[rng.below(objects.len() as u64) as usize].clone();
                let Value::Object(map) = node(&mut v, &at) else {
                    return None;
                };
                let keys: Vec<&String> = map.keys().collect();
                let key = (*keys.get(rng.below(keys.len() as u64) as usize)?).clone();
                let other = serde_json::to_string(&changed(&map[&key])).expect("a value");
                let first = kind == 0;
                let mut text = String::new();
                write(line, &[], &at, &(key.clone(), other, first), &mut text);
                let which = if first { "first" } else { "last" };
                Some(Mutated {
                    what: format!("{}/{key} given twice, the other copy {which}", shown(&at)),
                    line: text,
                })
            }
            2 => {
                // Two keys' values swapped.
                let at = objects[rng.below(objects.len() as u64) as usize].clone();
                let Value::Object(map) = node(&mut v, &at) else {
                    return None;
                };
                let keys: Vec<String> = map.keys().cloned().collect();
                if keys.len() < 2 {
                    return None;
                }
                let a = &keys[rng.below(keys.len() as u64) as usize];
                let b = &keys[rng.below(keys.len() as u64) as usize];
                if map[a] == map[b] {
                    return None;
                }
                let (va, vb) = (map[a].clone(), map[b].clone());
                map.insert(a.clone(), vb);
                map.insert(b.clone(), va);
                Some(Mutated {
                    what: format!("{}: {a} and {b} swapped", shown(&at)),
                    line: serde_json::to_string(&v).expect("a line"),
                })
            }
            kind => {
                // A leaf of another type some reader takes as equal, or changed.
                let at = leaves.get(rng.below(leaves.len() as u64) as usize)?.clone();
                let leaf = node(&mut v, &at);
                let new = if kind == 3 {
                    of_another_type(leaf, rng)?
                } else {
                    changed(leaf)
                };
                let what = format!("{}: {leaf} became {new}", shown(&at));
                *leaf = new;
                Some(Mutated {
                    what,
                    line: serde_json::to_string(&v).expect("a line"),
                })
            }
        }
    }
}

/// One reading of every export: 10,000 seeded changes of meaning to the lines of a signed
/// geo export (a key given twice, the other copy first or last, at any depth; two keys'
/// values swapped; a value replaced by one of another type that some reader takes as
/// equal: `true`/`1`, `1`/`1.0`, `"1"`/`1`; a value changed) are each refused by docket's
/// verifier and by the Python one written from the docs (`examples/verifier`), which agree
/// on all 10,000. The same lines written out unchanged verify in both.
#[test]
fn ten_thousand_changes_of_meaning_to_an_export_are_each_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let key = generate_key(&data, "audit.example/docket");
    let file = geo_export_in(&data, dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let trusted = docket_evidence::VerifierKey::parse(&key).expect("the key");
    let verify = |text: &str| docket_evidence::verify_export(text.as_bytes(), Some(&trusted));
    // The lines written out again as this test writes them: still sound, so that a refusal
    // below is the mutation's.
    let rewritten: Vec<String> = lines
        .iter()
        .map(|l| serde_json::to_string(l).expect("a line"))
        .collect();
    verify(&(rewritten.join("\n") + "\n")).expect("the rewritten export verifies");

    let python = python_verifier();
    let mut rng = docket_tests::SeededRng(0x0e8f_2026_1128);
    let mut cases = 0;
    // Every case for the Python verifier: one JSON line each, the line changed and its text.
    let mut for_python = String::new();
    let mut said_of: Vec<String> = Vec::new();
    while cases < 10_000 {
        let at = rng.below(lines.len() as u64) as usize;
        let Some(mutation::Mutated { what, line }) = mutation::mutate(&lines[at], &mut rng) else {
            continue;
        };
        cases += 1;
        let mut all = rewritten.clone();
        all[at] = line;
        let mutated = all.join("\n") + "\n";
        assert!(
            verify(&mutated).is_err(),
            "line {}: {what}: docket's verifier accepted it",
            at + 1
        );
        if python {
            let case = serde_json::json!({ "at": at, "line": all[at] });
            for_python.push_str(&case.to_string());
            for_python.push('\n');
            said_of.push(format!("line {}: {what}", at + 1));
        }
    }
    if python {
        // The Python verifier over every case in one process, each written over one scratch
        // file: the unchanged export must verify, and each case be refused.
        let base = dir.path().join("base.jsonl");
        std::fs::write(&base, rewritten.join("\n") + "\n").unwrap();
        let cases_file = dir.path().join("cases.jsonl");
        std::fs::write(&cases_file, &for_python).unwrap();
        let scratch = dir.path().join("case.jsonl");
        let script = format!(
            "import sys, json; sys.path.insert(0, {verifier:?}); import verify_export as v\n\
             v.verify({base:?}, {key:?})\n\
             lines = open({base:?}, encoding='utf-8').read().split('\\n')\n\
             accepted = []\n\
             cases = 0\n\
             for n, text in enumerate(open({cases:?}, encoding='utf-8')):\n\
             \x20   case = json.loads(text)\n\
             \x20   changed = list(lines)\n\
             \x20   changed[case['at']] = case['line']\n\
             \x20   open({scratch:?}, 'w', encoding='utf-8').write('\\n'.join(changed))\n\
             \x20   cases += 1\n\
             \x20   try:\n\
             \x20       v.verify({scratch:?}, {key:?})\n\
             \x20       accepted.append(n)\n\
             \x20   except v.Bad:\n\
             \x20       pass\n\
             print(cases, accepted)\n",
            verifier = workspace_root()
                .join("examples/verifier")
                .display()
                .to_string(),
            base = base.display().to_string(),
            cases = cases_file.display().to_string(),
            scratch = scratch.display().to_string(),
        );
        let out = Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert_eq!(
            exit_code(&out),
            0,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = stdout_text(&out);
        let (count, accepted) = said.trim().split_once(' ').expect("count and accepted");
        let accepted: Vec<&String> = serde_json::from_str::<Vec<usize>>(accepted)
            .expect("a list of case numbers")
            .into_iter()
            .map(|n| &said_of[n])
            .collect();
        assert!(
            count == "10000" && accepted.is_empty(),
            "the Python verifier accepted {accepted:?} ({count} cases)"
        );
    }
}
