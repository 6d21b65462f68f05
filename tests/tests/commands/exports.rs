//! `docket export --format jsonl` and `docket verify-export` through the binary, and the
//! reference verifier in Python (examples/verifier/) on the same files: both accept a
//! sound export and name the same first bad line of a damaged one.

use std::path::Path;
use std::process::Command;

use docket_tests::{
    docket_bin, docket_on, exit_code, export_jsonl, geo_agents_built, geo_workflow, stdout_text,
    workspace_root,
};

/// Whether Python with the verifier's libraries is here; on CI it must be (`.ci/run`
/// installs them), elsewhere a test without it says so and checks the rest.
#[allow(clippy::print_stderr)] // a skipped check says so
fn python_verifier() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import blake3, cryptography"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have python3 with blake3 and cryptography (.ci/run installs them)"
        );
        eprintln!(
            "skipped the Python verifier: python3 with blake3 and cryptography is not installed"
        );
    }
    ok
}

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

fn geo_export(dir: &Path) -> std::path::PathBuf {
    geo_export_in(&dir.join("data"), dir)
}

/// Runs the geo example in `data` as run `geo-export` and exports it to `dir`.
fn geo_export_in(data: &Path, dir: &Path) -> std::path::PathBuf {
    geo_agents_built();
    let workflow = geo_workflow();
    let run = docket_on(
        data,
        &["run", workflow.to_str().unwrap(), "--run-id", "geo-export"],
    );
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

    if python_verifier() {
        let run = |key: &str| {
            Command::new("python3")
                .arg(workspace_root().join("examples/verifier/verify_export.py"))
                .arg(&file)
                .args(["--key", key])
                .output()
                .unwrap()
        };
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
