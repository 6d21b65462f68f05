//! The `docket policy` commands, driven as a user would drive them.

use std::process::{Command, Output};

use docket_tests::{docket_bin, example};
use serde_json::Value;

fn docket(args: &[&str]) -> Output {
    Command::new(docket_bin())
        .args(args)
        .output()
        .expect("run docket")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn path(name: &str) -> String {
    example(name).display().to_string()
}

#[test]
fn check_prints_the_bundle_hash_for_every_example() {
    for name in ["geo", "claims", "software-team", "consulting", "social"] {
        let o = docket(&["policy", "check", &path(name)]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let hash_line = stdout(&o)
            .lines()
            .find(|l| l.starts_with("hash "))
            .map(str::to_owned)
            .expect("hash line");
        assert_eq!(hash_line.len(), "hash ".len() + 64);
        // Every example gives the content that crosses no edge of its matrix a rule.
        assert!(!stderr(&o).contains("warning"), "{name}: {}", stderr(&o));
        let j = docket(&["policy", "check", &path(name), "--json"]);
        let v: Value = serde_json::from_slice(&j.stdout).expect("json");
        assert_eq!(v["valid"], true);
        assert_eq!(v["warnings"], serde_json::json!([]), "{name}");
        assert_eq!(
            format!("hash {}", v["hash"].as_str().expect("hash")),
            hash_line
        );
    }
}

#[test]
fn invalid_bundle_exits_non_zero_with_file_line_column() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[bundle]\nid = \"t\"\n\n[[agents]]\nid = \"a\"\n\n[interactions]\nallowed = [{ from = \"a\", to = \"nobody\" }]\n").expect("write");
    let o = docket(&["policy", "check", bad.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{}:8:31: unknown reference: unknown agent `nobody`",
            bad.display()
        )),
        "{err}"
    );
    let j = docket(&[
        "policy",
        "check",
        bad.to_str().expect("utf-8 path"),
        "--json",
    ]);
    assert_eq!(j.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&j.stdout).expect("json");
    assert_eq!(v["valid"], false);
    assert_eq!(v["diagnostics"][0]["line"], 8);
    assert_eq!(v["diagnostics"][0]["code"], "unknown_reference");

    let syntax = dir.join("syntax.json");
    std::fs::write(
        &syntax,
        "{\n  \"bundle\": {\"id\": \"t\"},\n  \"agents\": [\n}",
    )
    .expect("write");
    let o = docket(&["policy", "check", syntax.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("syntax.json:4:1: syntax error"),
        "{}",
        stderr(&o)
    );

    let o = docket(&["policy", "check", "/nonexistent/policy.toml"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn explain_shows_verdict_chain_and_scoped_context() {
    let o = docket(&[
        "policy",
        "explain",
        &path("geo"),
        "--from",
        "strategy",
        "--to",
        "observation",
    ]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(
        out.contains("DENY")
            && out.contains("Reverse flow not allowed")
            && out.contains("forbid:strategy->observation"),
        "{out}"
    );

    let payload = r#"{"fraud_score":0.9,"fraud_indicators":["x"],"risk_level":"high","internal_notes":"secret"}"#;
    let o = docket(&[
        "policy",
        "explain",
        &path("claims"),
        "--from",
        "fraud_agent",
        "--to",
        "recommendation_agent",
        "--payload",
        payload,
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["handoff"]["decision"]["verdict"], "allow");
    let audit = &v["scoped"]["audit"];
    assert_eq!(
        audit["governance_rule_id"],
        "fraud_to_recommendation_scoped"
    );
    assert_eq!(
        audit["context_after_scoping"]["fields_excluded"],
        serde_json::json!(["internal_notes"])
    );
    assert!(!v["scoped"]["context"].to_string().contains("secret"));

    let o = docket(&[
        "policy",
        "explain",
        &path("claims"),
        "--from",
        "fraud_agent",
        "--to",
        "recommendation_agent",
        "--payload",
        "{not json",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn diff_lists_changed_pairs_and_rules() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let src = std::fs::read_to_string(example("geo")).expect("read");
    let changed = dir.join("geo.toml");
    std::fs::write(
        &changed,
        src.replace(
            "to = \"strategy\"\nreason = \"Must go through Reasoning\"",
            "to = \"strategy\"\nreason = \"Reasoning first\"",
        ),
    )
    .expect("write");
    let o = docket(&[
        "policy",
        "diff",
        &path("geo"),
        changed.to_str().expect("utf-8 path"),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    let pairs = v["pairs"].as_array().expect("pairs");
    assert!(
        pairs.iter().any(|p| p["from"] == "intelligence"
            && p["to"] == "strategy"
            && p["new"]["reason"] == "Reasoning first"),
        "{v}"
    );
    assert!(
        v["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .any(|r| r["id"] == "forbid:intelligence->strategy" && r["change"] == "changed")
    );
    let same = docket(&["policy", "diff", &path("geo"), &path("geo")]);
    assert!(stdout(&same).starts_with("no changes"));
}

#[test]
fn schema_command_prints_the_checked_in_schema() {
    let o = docket(&["policy", "schema"]);
    assert!(o.status.success());
    let checked_in =
        std::fs::read_to_string(docket_tests::workspace_root().join("policies/bundle.schema.json"))
            .expect("read");
    // As JSON values: key order follows serde_json's `preserve_order`.
    let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
    assert!(parse(&checked_in).is_some());
    assert_eq!(parse(&stdout(&o)), parse(&checked_in));
}

#[test]
fn explain_decides_a_handoff_at_a_position_of_a_sequential_flow() {
    let explain = |after: &str, to: &str, json: bool| {
        let mut args = vec![
            "policy",
            "explain",
            "--from",
            "governance",
            "--to",
            to,
            "--after",
            after,
        ];
        let geo = path("geo");
        args.insert(2, &geo);
        if json {
            args.push("--json");
        }
        docket(&args)
    };
    // Governance at entry: the matrix allows governance → external, the position does not.
    let o = explain("external", "external", false);
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.contains("DENY")
            && out.contains("flow_order.position")
            && out.contains("only next agent is observation")
            && out.contains("matrix ALLOW by allow:governance->external"),
        "{out}"
    );
    // Governance at exit: external is the next step; observation is not.
    let exit = "external,governance,observation,intelligence,reasoning,strategy";
    let o = explain(exit, "external", true);
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["flow"]["step"], "next", "{v}");
    assert_eq!(v["flow"]["moves_to"], 7, "{v}");
    let o = explain(exit, "observation", true);
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["flow"]["step"], "denied", "{v}");
    assert_eq!(
        v["flow"]["decision"]["rule_id"], "flow_order.position",
        "{v}"
    );
    // A path that is not the flow's is a usage error naming the position.
    let o = explain("external,observation", "external", false);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("governance at position 2"),
        "{}",
        stderr(&o)
    );
}

/// `docket policy check` refuses context parts that name an unknown agent or contradict
/// themselves, naming the key.
#[test]
fn check_names_the_key_of_bad_context_parts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bundle = dir.path().join("parts.toml");
    std::fs::write(
        &bundle,
        r#"bundle = { id = "parts" }
agents = [{ id = "external" }, { id = "a" }, { id = "b" }]
[interactions]
allowed = [{ from = "external", to = "a" }, { from = "a", to = "b" }, { from = "b", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
context_parts = { agent_identity = "hide", prior_outputs = "all" }
[[multi_agent_handoffs.agent_handoff_rules]]
id = "a-to-b"
from_agent_id = "a"
to_agent_id = "b"
context_parts = { prior_outputs = ["a", "ghost"] }
"#,
    )
    .expect("bundle");
    let o = docket(&["policy", "check", bundle.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let err = stderr(&o) + &stdout(&o);
    assert!(
        err.contains("/multi_agent_handoffs/agent_handoff_rules/0/context_parts/prior_outputs/1")
            && err.contains("unknown agent `ghost`"),
        "{err}"
    );
    assert!(
        err.contains("/multi_agent_handoffs/context_parts/agent_identity"),
        "{err}"
    );
}

/// Content crossing a pair that is no edge of the matrix, scoped to nothing, is named with
/// the rule to add: the consulting bundle without its rule for ANL's answers to CST, and
/// without the one for a person's answers.
#[test]
fn check_warns_of_content_off_the_matrix_that_would_arrive_empty() {
    let text = std::fs::read_to_string(path("consulting")).expect("the consulting bundle");
    let mut cut = text.clone();
    for id in ["anl-answers-cst", "person-answers-full"] {
        let start = cut
            .find(&format!(
                "[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"{id}\""
            ))
            .unwrap_or_else(|| panic!("rule {id} in the consulting bundle"));
        let end = cut[start + 1..]
            .find("\n[[")
            .map_or(cut.len(), |i| start + 1 + i);
        cut.replace_range(start..end, "");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let bundle = dir.path().join("policy.toml");
    std::fs::write(&bundle, cut).expect("bundle");
    let file = bundle.to_str().expect("utf-8");
    let o = docket(&["policy", "check", file]);
    assert!(
        o.status.success(),
        "a warning, not a refusal: {}",
        stderr(&o)
    );
    let err = stderr(&o);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 2, "{err}");
    let answers = warnings
        .iter()
        .find(|w| w.contains("ANL → CST"))
        .unwrap_or_else(|| panic!("{err}"));
    let opening = format!("warning: {file}: ANL → CST: answers to capability requests (`ANL_");
    for words in [
        opening.as_str(),
        "would arrive empty",
        "no edge of the interaction matrix",
        "from_agent_id = \"ANL\", to_agent_id = \"CST\"",
    ] {
        assert!(answers.contains(words), "{answers}");
    }
    let person = warnings
        .iter()
        .find(|w| w.contains("human → ANL"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(person.contains("a person's answers"), "{person}");
    assert!(
        person.contains("from_agent_id = \"human\", to_agent_id = \"*\""),
        "{person}"
    );
    let j = docket(&["policy", "check", file, "--json"]);
    let v: Value = serde_json::from_slice(&j.stdout).expect("json");
    assert_eq!(v["valid"], true);
    assert_eq!(v["warnings"].as_array().map(Vec::len), Some(2), "{v}");
    // The untouched bundle has none.
    assert!(!stderr(&docket(&["policy", "check", &path("consulting")])).contains("warning"));
}

/// `docket run` says the same warnings before the run starts, and runs.
#[test]
fn run_warns_of_content_off_the_matrix_that_would_arrive_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("policy.toml"),
        r#"
bundle = { id = "scoped" }
agents = [{ id = "external" }, { id = "worker", allowed_tools = ["Read"] }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "scoped"
[[multi_agent_handoffs.agent_handoff_rules]]
id = "in"
from_agent_id = "external"
to_agent_id = "worker"
allowed_context_fields = ["task"]
[[multi_agent_handoffs.agent_handoff_rules]]
id = "out"
from_agent_id = "worker"
to_agent_id = "external"
allowed_context_fields = ["task"]
"#,
    )
    .expect("bundle");
    std::fs::write(dir.path().join("input.json"), r#"{"task": "x"}"#).expect("input");
    let workflow = dir.path().join("workflow.toml");
    std::fs::write(
        &workflow,
        format!(
            "name = \"scoped\"\npolicy = \"policy.toml\"\nentry = \"worker\"\ninput = \"input.json\"\n\
             [agents.worker]\ncommand = {:?}\nargs = [\"finish\"]\n",
            env!("CARGO_BIN_EXE_test-agent")
        ),
    )
    .expect("workflow");
    let data = dir.path().join("data");
    let o = Command::new(docket_bin())
        .args(["run", workflow.to_str().expect("utf-8"), "--data"])
        .arg(&data)
        .output()
        .expect("run docket");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "the run goes on: {err}");
    let warned = |pair: &str, what: &str| {
        err.lines().any(|l| {
            l.starts_with("warning: ")
                && l.contains(&format!("policy.toml: {pair}: {what}"))
                && l.contains("would arrive empty")
        })
    };
    assert!(warned("human → worker", "a person's answers"), "{err}");
    assert!(warned("tools → worker", "the results of tools"), "{err}");
}

/// docs/governance.md#domain-content: a domain's content rules are checked with the
/// bundle, each problem named by file, line and column; a bundle with sound ones passes.
#[test]
fn domain_content_rules_are_checked_with_the_bundle() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let head = "bundle = { id = \"t\" }\n\
                agents = [{ id = \"planner\", write_scopes = [\"plan\"] }]\n\
                output_types = [{ id = \"plan_graph\", schema = { type = \"object\" } }]\n";
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        format!(
            "{head}[[domains]]\nid = \"plan\"\ncontent_type = \"plan_grph\"\n\
             required_refs = [\"nodes..pointers\"]\nmax_bytes = 0\n"
        ),
    )
    .expect("write");
    let o = docket(&["policy", "check", bad.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let at = |line: u32, col: u32, what: &str| format!("{}:{line}:{col}: {what}", bad.display());
    for expected in [
        at(
            6,
            16,
            "unknown reference: unknown output type `plan_grph`: declare it under [[output_types]]",
        ),
        at(
            7,
            18,
            "invalid value: field path `nodes..pointers` has an empty segment",
        ),
        at(
            8,
            13,
            "invalid value: max_bytes must be positive: no content fits in 0 bytes",
        ),
    ] {
        assert!(err.contains(&expected), "{expected}\nnot in:\n{err}");
    }
    let good = tmp.path().join("good.toml");
    std::fs::write(
        &good,
        format!(
            "{head}[[domains]]\nid = \"plan\"\ncontent_type = \"plan_graph\"\n\
             required_refs = [\"nodes.metadata.pointers\"]\nmax_bytes = 65536\n"
        ),
    )
    .expect("write");
    let o = docket(&["policy", "check", good.to_str().expect("utf-8 path")]);
    assert!(o.status.success(), "{}", stderr(&o));
}
