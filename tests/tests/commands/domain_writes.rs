//! A person writes a domain through the binary (docs/governance.md#a-person-writes-a-domain):
//! `docket write` records `human.wrote_domain` and the domain's next version, redacted as
//! the domain says; a write the bundle refuses (not a person's role, content over its size)
//! records nothing; the agent reading the domain gets the version as kept on its next
//! call, and the log replays.

use docket_tests::{docket_on as docket, exit_code, stdout_text};

const AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

const BUNDLE: &str = r#"
bundle = { id = "summaries" }
[[agents]]
id = "external"
[[agents]]
id = "operator"
authority = "human"
write_scopes = ["summaries"]
[[agents]]
id = "worker"
read_scopes = ["summaries"]
[[domains]]
id = "summaries"
redact = ["threads.raw_ref"]
max_bytes = 200
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

fn events(data: &std::path::Path, run: &str) -> Vec<serde_json::Value> {
    stdout_text(&docket(data, &["events", run, "--json"]))
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn write(
    data: &std::path::Path,
    dir: &std::path::Path,
    role: &str,
    content: &serde_json::Value,
) -> std::process::Output {
    let file = dir.join("content.json");
    std::fs::write(&file, content.to_string()).expect("content");
    docket(
        data,
        &[
            "write",
            "d-1",
            "summaries",
            "--by",
            "ana",
            "--role",
            role,
            "--reason",
            "summarised the call",
            "--content",
            file.to_str().expect("utf-8"),
        ],
    )
}

#[test]
fn a_person_writes_a_domain_the_agent_reads_it_redacted_and_refusals_record_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    std::fs::write(dir.join("policy.toml"), BUNDLE).expect("bundle");
    std::fs::write(dir.join("input.json"), r#"{"task": "x"}"#).expect("input");
    let workflow = dir.join("wf.toml");
    std::fs::write(
        &workflow,
        format!(
            "name = \"summaries\"\npolicy = \"policy.toml\"\nentry = \"worker\"\ninput = \"input.json\"\n\
             [agents.worker]\ncommand = {AGENT:?}\nargs = [\"ask\"]\n"
        ),
    )
    .expect("workflow");
    let data = dir.join("data");
    let out = docket(
        &data,
        &["run", workflow.to_str().expect("utf-8"), "--run-id", "d-1"],
    );
    assert_eq!(exit_code(&out), 3, "waits for a person: {out:?}");

    // Refused: not a person's role, then content over the domain's size. Nothing recorded.
    let before = events(&data, "d-1").len();
    let out = write(&data, dir, "worker", &serde_json::json!({"threads": []}));
    assert_eq!(exit_code(&out), 1, "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`worker` is not a person's role") && err.contains("roles that may: operator"),
        "{err}"
    );
    let out = write(
        &data,
        dir,
        "operator",
        &serde_json::json!({"text": "x".repeat(300)}),
    );
    assert_eq!(exit_code(&out), 1, "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("more than the 200 allowed"), "{err}");
    assert_eq!(events(&data, "d-1").len(), before, "nothing recorded");

    // Allowed: recorded as the person's act, the raw pointer redacted.
    let written = serde_json::json!({"threads": [{"summary": "wants a refund", "raw_ref": "s3://raw/t-1.json"}]});
    let out = write(&data, dir, "operator", &written);
    assert_eq!(exit_code(&out), 0, "{out:?}");
    assert!(
        stdout_text(&out)
            .contains("run d-1: domain summaries version 1 written by ana as operator"),
        "{}",
        stdout_text(&out)
    );
    let log = events(&data, "d-1");
    let kinds: Vec<&str> = log[before..]
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds, ["human.wrote_domain", "domain.written"]);
    let input = &log[before]["payload"];
    assert_eq!(
        (&input["by"], &input["role"]),
        (&serde_json::json!("ana"), &serde_json::json!("operator"))
    );
    let kept = &log[before + 1]["payload"];
    assert_eq!(kept["by"], "ana");
    assert_eq!(kept["agent"], "operator");
    assert_eq!(kept["content"]["threads"][0]["raw_ref"], "[redacted]");

    // The agent's next call reads the version as kept.
    let out = docket(
        &data,
        &[
            "answer", "d-1", "ticket-1", "--by", "ana", "--choice", "fast",
        ],
    );
    assert_eq!(exit_code(&out), 0, "{out:?}");
    let log = events(&data, "d-1");
    let calls: Vec<&serde_json::Value> = log
        .iter()
        .filter(|e| e["kind"] == "agent.call_scheduled")
        .collect();
    let read = calls
        .last()
        .map(|c| c["payload"]["request"]["context_inputs"].to_string())
        .unwrap_or_default();
    assert!(
        read.contains("wants a refund") && read.contains("[redacted]") && !read.contains("s3://"),
        "{read}"
    );
    let shown = stdout_text(&docket(&data, &["events", "d-1"]));
    assert!(shown.contains("ana (operator) writes summaries"), "{shown}");
    let replay = docket(&data, &["replay", "d-1"]);
    assert_eq!(exit_code(&replay), 0, "{replay:?}");
}
