//! Redaction that still verifies (docs/export-format.md#redacted-exports), through the
//! binary: a run recorded in payload encoding 3 exports with values withheld, the export
//! verifies in docket and in the Python reference verifier, a value disclosed afterwards
//! checks against its commitment and a forged one does not, and `docket verify` checks
//! every disclosure of the data directory.

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use docket_tests::{
    docket_ok, docket_on, exit_code, geo_agents_built, geo_workflow, python_verifier,
    redactable_geo_workflow, stdout_text, workspace_root,
};

fn python(args: &[&str]) -> (i32, String) {
    let out = Command::new("python3")
        .arg(workspace_root().join("examples/verifier/verify_export.py"))
        .args(args)
        .output()
        .expect("python3 runs");
    (exit_code(&out), stdout_text(&out))
}

/// The sequence of the run's `run.completed`.
fn completed_seq(data: &Path, run: &str) -> u64 {
    docket_ok(data, &["events", run, "--json"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .find(|e| e["kind"] == "run.completed")
        .and_then(|e| e["seq"].as_u64())
        .expect("the run completed")
}

#[test]
fn a_redacted_export_verifies_and_a_disclosed_value_checks_against_its_commitment() {
    geo_agents_built();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let workflow = redactable_geo_workflow(dir.path());
    docket_ok(
        &data,
        &["run", workflow.to_str().unwrap(), "--run-id", "geo-redact"],
    );
    let seq = completed_seq(&data, "geo-redact");

    // The value to withhold, as `docket disclose` reveals it.
    let disclosed = docket_ok(
        &data,
        &[
            "disclose",
            "geo-redact",
            "--seq",
            &seq.to_string(),
            "--pointer",
            "/output/recommendations/0/action",
            "--json",
        ],
    );
    let disclosed: serde_json::Value =
        serde_json::from_str(disclosed.lines().next().unwrap()).expect("one JSON line");
    assert_eq!(disclosed["pointer"], "/output/recommendations");
    let action = disclosed["value"][0]["action"]
        .as_str()
        .expect("an action")
        .to_owned();
    let disclosure = disclosed["disclosure"].as_str().unwrap().to_owned();

    // Withheld everywhere the run recorded it (the output, and the handoff delivering it).
    let full = dir.path().join("full.jsonl");
    let redacted = dir.path().join("redacted.jsonl");
    docket_ok(
        &data,
        &[
            "export",
            "geo-redact",
            "--format",
            "jsonl",
            "--out",
            full.to_str().unwrap(),
        ],
    );
    docket_ok(
        &data,
        &[
            "export",
            "geo-redact",
            "--format",
            "jsonl",
            "--out",
            redacted.to_str().unwrap(),
            "--redact",
            "/output/recommendations/0/action",
        ],
    );
    let full_text = std::fs::read_to_string(&full).unwrap();
    let redacted_text = std::fs::read_to_string(&redacted).unwrap();
    assert!(
        full_text.contains(&disclosure),
        "the full export discloses it"
    );
    assert!(
        !redacted_text.contains(&disclosure),
        "the redacted one does not"
    );
    // Neither in the clear: the agent's answer, the handoff and the output all commit to
    // it apart. (An episode summary quoting it as text is another value, not withheld.)
    assert!(
        !redacted_text.contains(&action),
        "the action is in the clear"
    );
    assert!(redacted_text.contains(r#""type":"withheld""#));

    let verdict = docket_ok(
        Path::new("."),
        &["verify-export", "--json", redacted.to_str().unwrap()],
    );
    let verdict: serde_json::Value = serde_json::from_str(verdict.trim()).unwrap();
    assert_eq!(verdict["sound"], true, "{verdict}");
    assert!(verdict["values_withheld"].as_u64() >= Some(1), "{verdict}");
    assert!(verdict["values_disclosed"].as_u64() > Some(1), "{verdict}");
    // The same tree head as the full export: chain, tree and seal cover the digests.
    let full_verdict = docket_ok(
        Path::new("."),
        &["verify-export", "--json", full.to_str().unwrap()],
    );
    let full_verdict: serde_json::Value = serde_json::from_str(full_verdict.trim()).unwrap();
    assert_eq!(verdict["root"], full_verdict["root"]);

    // A redacted export whose withheld line is turned into a forged disclosure fails.
    let forged = URL_SAFE_NO_PAD.encode(
        serde_json::to_vec(&serde_json::json!([
            disclosed["salt"],
            "recommendations",
            [{"action": "forged"}]
        ]))
        .unwrap(),
    );
    let digest = disclosed["digest"].as_str().unwrap();
    let tampered = dir.path().join("tampered.jsonl");
    std::fs::write(
        &tampered,
        redacted_text.replace(
            &format!(r#"{{"type":"withheld","digest":"{digest}","why":"redacted"}}"#),
            &format!(r#"{{"type":"disclosure","digest":"{digest}","disclosure":"{forged}"}}"#),
        ),
    )
    .unwrap();
    let out = docket_on(
        Path::new("."),
        &["verify-export", tampered.to_str().unwrap()],
    );
    assert_eq!(exit_code(&out), 1, "{}", stdout_text(&out));
    assert!(
        stdout_text(&out).contains("does not hash to its digest"),
        "{}",
        stdout_text(&out)
    );

    if python_verifier() {
        let (code, line) = python(&[redacted.to_str().unwrap()]);
        assert_eq!(code, 0, "{line}");
        assert!(line.contains("withheld"), "{line}");
        let (code, line) = python(&[tampered.to_str().unwrap()]);
        assert_eq!(code, 1, "{line}");
        // The disclosure checks against the commitment in the redacted export...
        let (code, line) = python(&[
            "disclose",
            redacted.to_str().unwrap(),
            &seq.to_string(),
            &disclosure,
        ]);
        assert_eq!(code, 0, "{line}");
        assert!(line.contains("/output/recommendations"), "{line}");
        // ... a forged one, and the right one against another event, do not.
        let (code, line) = python(&[
            "disclose",
            redacted.to_str().unwrap(),
            &seq.to_string(),
            &forged,
        ]);
        assert_eq!(code, 1, "{line}");
        let (code, line) = python(&["disclose", redacted.to_str().unwrap(), "1", &disclosure]);
        assert_eq!(code, 1, "{line}");
    }
}

#[test]
fn verify_checks_every_disclosure_and_redaction_refuses_what_it_cannot_withhold() {
    geo_agents_built();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let workflow = redactable_geo_workflow(dir.path());
    docket_ok(
        &data,
        &["run", workflow.to_str().unwrap(), "--run-id", "geo-v3"],
    );
    let said = docket_ok(&data, &["verify"]);
    assert!(said.contains("ok    geo-v3"), "{said}");
    docket_ok(&data, &["replay", "geo-v3"]);

    // A pointer that names nothing is refused, naming it, rather than exporting in full.
    let out = docket_on(
        &data,
        &[
            "export",
            "geo-v3",
            "--format",
            "jsonl",
            "--out",
            "-",
            "--redact",
            "/output/no_such_key",
        ],
    );
    assert_eq!(exit_code(&out), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("/output/no_such_key"));

    // Shredding: the value is gone from every file of the data directory, the log still
    // verifies, counting it as shredded, and reading the run says what was erased.
    let seq = completed_seq(&data, "geo-v3");
    let disclosed = docket_ok(
        &data,
        &[
            "disclose",
            "geo-v3",
            "--seq",
            &seq.to_string(),
            "--pointer",
            "/output/recommendations",
            "--json",
        ],
    );
    let disclosed: serde_json::Value =
        serde_json::from_str(disclosed.lines().next().unwrap()).expect("one JSON line");
    let bytes = URL_SAFE_NO_PAD
        .decode(disclosed["disclosure"].as_str().unwrap())
        .unwrap();
    let files_holding = |needle: &[u8]| -> Vec<std::path::PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![data.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if std::fs::read(&path)
                    .unwrap()
                    .windows(needle.len())
                    .any(|w| w == needle)
                {
                    found.push(path);
                }
            }
        }
        found
    };
    assert_eq!(
        files_holding(&bytes).len(),
        1,
        "the disclosure is in one file before"
    );
    let said = docket_ok(
        &data,
        &[
            "shred",
            "geo-v3",
            "--pointer",
            "/output/recommendations",
            "--by",
            "dpo@example",
            "--reason",
            "erasure request 17",
        ],
    );
    assert!(said.contains("shredded event"), "{said}");
    assert_eq!(files_holding(&bytes), Vec::<std::path::PathBuf>::new());
    // Not only the disclosure: the value's own text is in no file either (no snapshot, no
    // blob, no index entry holds it: a run recorded redactable writes no snapshots).
    let mut leaves = Vec::new();
    let mut stack = vec![disclosed["value"].clone()];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::String(text) => leaves.push(text),
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
    let longest = leaves
        .into_iter()
        .max_by_key(String::len)
        .expect("a text value");
    assert!(longest.len() >= 12, "{longest}");
    assert_eq!(
        files_holding(longest.as_bytes()),
        Vec::<std::path::PathBuf>::new(),
        "{longest}"
    );
    let said = docket_ok(&data, &["verify"]);
    assert!(
        said.contains("ok    geo-v3") && said.contains("1 value shredded"),
        "{said}"
    );
    // Reading the run shows the marker where the value stood, with who, when and why.
    let events: Vec<serde_json::Value> = docket_ok(&data, &["events", "geo-v3", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let completed = events
        .iter()
        .find(|e| e["kind"] == "run.completed")
        .expect("completed");
    let marker = &completed["payload"]["output"]["recommendations"]["_shredded"];
    assert_eq!(marker["by"], "dpo@example", "{completed}");
    assert_eq!(marker["reason"], "erasure request 17", "{completed}");
    assert!(marker["at_ms"].as_u64().is_some() && marker["digest"].is_string());
    let marked: Vec<u64> = events
        .iter()
        .filter(|e| e.to_string().contains(r#""_shredded""#))
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(marked.contains(&seq), "{marked:?}");
    assert!(docket_ok(&data, &["events", "geo-v3"]).contains("_shredded"));
    let inspected = docket_ok(
        &data,
        &["inspect", "geo-v3", "--at", &seq.to_string(), "--json"],
    );
    assert!(inspected.contains("_shredded"), "{inspected}");
    docket_ok(&data, &["status", "geo-v3"]);
    // Replay takes the batches holding the erased value as recorded and counts them; the
    // others are decided again and reproduced. Never a divergence.
    let said = docket_ok(&data, &["replay", "geo-v3"]);
    assert!(
        said.contains("depend on shredded values (not re-derivable"),
        "{said}"
    );
    assert!(!said.contains("DIVERGED"), "{said}");
    let report: serde_json::Value =
        serde_json::from_str(docket_ok(&data, &["replay", "geo-v3", "--json"]).trim())
            .expect("json");
    let (decisions, reproduced, not_rederivable) = (
        report["decisions"].as_u64().unwrap(),
        report["reproduced_decisions"].as_u64().unwrap(),
        report["not_rederivable"].as_u64().unwrap(),
    );
    assert!(report["divergence"].is_null(), "{report}");
    assert_eq!(report["events"], events.len(), "{report}");
    assert_eq!(reproduced + not_rederivable, decisions, "{report}");
    // Exactly the decisions of the batches holding a marker: count them from the log.
    let mut expected = 0;
    let mut batch: Vec<&serde_json::Value> = Vec::new();
    let is_input = |e: &serde_json::Value| {
        matches!(
            e["kind"].as_str().unwrap(),
            "run.requested" | "agent.responded" | "agent.call_failed" | "human.decided"
        )
    };
    for event in events
        .iter()
        .chain(std::iter::once(&serde_json::Value::Null))
    {
        if event.is_null() || is_input(event) {
            if batch
                .iter()
                .any(|e| marked.contains(&e["seq"].as_u64().unwrap()))
            {
                expected += batch.len() as u64 - 1;
            }
            batch.clear();
        }
        batch.push(event);
    }
    assert!(expected > 0);
    assert_eq!(not_rederivable, expected, "{report}");
    assert!(reproduced > 0, "{report}");
    assert!(
        said.contains(&format!(
            "{} events, {decisions} decisions, {reproduced} reproduced, {not_rederivable} depend on shredded values",
            events.len()
        )),
        "{said}"
    );
    assert!(
        docket_ok(&data, &["replay", "--all"]).contains("depend on shredded values"),
        "replay --all"
    );
    // A redacted export still writes and verifies: the erased value is `withheld`.
    let file = dir.path().join("after.jsonl");
    docket_ok(
        &data,
        &[
            "export",
            "geo-v3",
            "--format",
            "jsonl",
            "--out",
            file.to_str().unwrap(),
        ],
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(r#""why":"shredded""#));
    docket_ok(Path::new("."), &["verify-export", file.to_str().unwrap()]);
    if python_verifier() {
        let (code, said) = python(&[file.to_str().unwrap()]);
        assert_eq!(code, 0, "{said}");
    }

    // A disclosure changed on disk is damage `docket verify` names, with the event.
    let file = std::fs::read_dir(data.join("disclosures"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    std::fs::write(&file, bytes).unwrap();
    let out = docket_on(&data, &["verify"]);
    assert_eq!(exit_code(&out), 1, "{}", stdout_text(&out));
    assert!(
        stdout_text(&out).contains("FAIL  geo-v3  event "),
        "{}",
        stdout_text(&out)
    );
}

#[test]
fn a_run_not_recorded_redactable_refuses_redact_and_shred_naming_the_workflow_field() {
    geo_agents_built();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let workflow = geo_workflow();
    docket_ok(
        &data,
        &["run", workflow.to_str().unwrap(), "--run-id", "geo-plain"],
    );
    for args in [
        vec![
            "export",
            "geo-plain",
            "--format",
            "jsonl",
            "--out",
            "-",
            "--redact",
            "/output/recommendations",
        ],
        vec![
            "shred",
            "geo-plain",
            "--pointer",
            "/output/recommendations",
            "--by",
            "dpo@example",
            "--reason",
            "erasure request 18",
        ],
    ] {
        let out = docket_on(&data, &args);
        assert_eq!(exit_code(&out), 1, "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("not recorded redactable") && err.contains("[evidence] redactable = true"),
            "{args:?}: {err}"
        );
    }
    // Nothing was erased: the run still replays and verifies.
    docket_ok(&data, &["replay", "geo-plain"]);
    assert!(docket_ok(&data, &["verify"]).contains("ok    geo-plain"));
}

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

#[test]
fn an_unfinished_run_with_a_shredded_value_reads_and_replays_refuses_to_go_on_and_cancels() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let workflow = docket_tests::one_agent_workflow(
        dir.path(),
        "shred",
        "asks",
        TEST_AGENT,
        &["escalate_then_finish"],
    );
    let mut text = std::fs::read_to_string(&workflow).unwrap();
    text.push_str("[evidence]\nredactable = true\n");
    std::fs::write(&workflow, text).unwrap();
    let out = docket_on(
        &data,
        &["run", workflow.to_str().unwrap(), "--run-id", "asks-1"],
    );
    assert!(
        stdout_text(&out).contains("waiting for a human"),
        "{}",
        stdout_text(&out)
    );
    docket_ok(
        &data,
        &[
            "shred",
            "asks-1",
            "--pointer",
            "/input/task",
            "--by",
            "dpo",
            "--reason",
            "request 9",
        ],
    );
    // The policy text replay decides with is not a value anyone gave: never erased.
    let out = docket_on(
        &data,
        &[
            "shred",
            "asks-1",
            "--pointer",
            "/bundle_source",
            "--by",
            "dpo",
            "--reason",
            "r",
        ],
    );
    assert_eq!(exit_code(&out), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("/bundle_source"));

    let events = docket_ok(&data, &["events", "asks-1", "--json"]);
    let first: serde_json::Value =
        serde_json::from_str(events.lines().next().unwrap()).expect("json");
    assert_eq!(first["payload"]["input"]["task"]["_shredded"]["by"], "dpo");
    let report: serde_json::Value =
        serde_json::from_str(docket_ok(&data, &["replay", "asks-1", "--json"]).trim())
            .expect("json");
    assert!(report["divergence"].is_null(), "{report}");
    assert!(report["not_rederivable"].as_u64().unwrap() > 0, "{report}");

    // Going on would decide from a state with markers where values were: refused, saying
    // why and what to do, recording nothing.
    let before = events.lines().count();
    for args in [
        vec!["resume", "asks-1"],
        vec![
            "approve", "asks-1", "ticket-1", "--by", "ops", "--reason", "go",
        ],
    ] {
        let out = docket_on(&data, &args);
        assert_ne!(exit_code(&out), 0, "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("were erased") && err.contains("docket cancel asks-1"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        docket_ok(&data, &["events", "asks-1", "--json"])
            .lines()
            .count(),
        before
    );
    // Cancelling needs no value: the run ends, and still replays and verifies.
    docket_ok(
        &data,
        &[
            "cancel",
            "asks-1",
            "--by",
            "ops",
            "--reason",
            "erased input",
        ],
    );
    let said = docket_ok(&data, &["replay", "asks-1"]);
    assert!(said.contains("depend on shredded values"), "{said}");
    assert!(docket_ok(&data, &["status", "asks-1"]).contains("cancelled"));
    let said = docket_ok(&data, &["verify"]);
    assert!(said.contains("1 value shredded"), "{said}");
}
