//! Bundle versions and handoff rules as data (docs/governance.md#bundle-versions,
//! docs/governance.md#handoff-rules-as-data; seed 001 Task 8), through the binary on the
//! geo example: the rules listed in the seed's shape, the rules deciding one pair with
//! their decision, a replacement that loosens and one that tightens (each registered as a
//! new version, with the diff and the recorded runs it would have affected, named
//! exactly), an invalid one refused naming its rule and field, and a run waiting for a
//! human keeping its bundle while a new run picks the new version.

use std::path::Path;

use docket_tests::{
    docket_ok, docket_on, events_of_kind, exit_code, geo_agents_built, geo_workflow,
    geo_workflow_with, run_events, stdout_text, workspace_root,
};
use serde_json::{Value, json};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

fn ok_json(data: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&docket_ok(data, args)).expect("JSON")
}

fn geo_policy() -> String {
    workspace_root()
        .join("examples/geo/policy.toml")
        .display()
        .to_string()
}

fn register_geo(data: &Path) -> Value {
    ok_json(
        data,
        &[
            "policy",
            "register",
            &geo_policy(),
            "--by",
            "alice",
            "--reason",
            "the geo rules as shipped",
            "--json",
        ],
    )
}

/// Runs the geo workflow as `id` on `input` (a file of examples/geo/input, or the default).
fn run_geo(data: &Path, id: &str, input: Option<&str>) -> i32 {
    let workflow = geo_workflow();
    let mut args = vec!["run", workflow.to_str().expect("utf-8"), "--run-id", id];
    let input = input.map(|i| {
        workspace_root()
            .join("examples/geo/input")
            .join(i)
            .display()
            .to_string()
    });
    if let Some(i) = &input {
        args.extend(["--input", i.as_str()]);
    }
    exit_code(&docket_on(data, &args))
}

/// `docket policy set-rules` of `rules` (written to a file); the output or the error.
fn set_rules(data: &Path, rules: &Value, by: &str, reason: &str) -> (i32, String, String) {
    let file = data.with_extension(format!("{by}.rules.json"));
    std::fs::write(&file, serde_json::to_string_pretty(rules).expect("JSON")).expect("write");
    let out = docket_on(
        data,
        &[
            "policy",
            "set-rules",
            file.to_str().expect("utf-8"),
            "--by",
            by,
            "--reason",
            reason,
            "--json",
        ],
    );
    (
        exit_code(&out),
        stdout_text(&out),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn affected_ids(answer: &Value) -> Vec<&str> {
    answer["affected"]["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["run_id"].as_str().expect("id"))
        .collect()
}

#[test]
fn the_rules_are_listed_in_the_seed_shape_and_a_pair_with_its_decision() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    // Nothing registered: said, with what to do.
    let out = docket_on(&data, &["policy", "rules"]);
    assert_eq!(exit_code(&out), 1);
    let v = register_geo(&data);
    assert_eq!(
        (v["bundle"].as_str(), v["version"].as_u64()),
        (Some("geo-pipeline"), Some(1))
    );

    let listed = ok_json(&data, &["policy", "rules", "--json"]);
    assert_eq!(listed["bundle"], "geo-pipeline");
    assert_eq!(listed["version"], 1);
    assert_eq!(listed["hash"], v["hash"]);
    let rule = &listed["rules"][0];
    assert_eq!(rule["id"], "intelligence-to-strategy-context");
    assert_eq!(rule["from_agent_id"], "intelligence");
    assert_eq!(rule["to_agent_id"], "strategy");
    assert_eq!(rule["handoff_mode"], "scoped");
    assert_eq!(
        rule["allowed_context_fields"],
        json!(["answers", "brands", "focus_brand"])
    );
    assert_eq!(rule["audit_enabled"], true);

    let pair = ok_json(
        &data,
        &[
            "policy",
            "rules",
            "--from",
            "intelligence",
            "--to",
            "strategy",
            "--json",
        ],
    );
    assert_eq!(pair["version"], 1);
    assert_eq!(pair["rules"][0]["precedence"], "pair");
    assert_eq!(
        pair["rules"][0]["rule"]["id"],
        "intelligence-to-strategy-context"
    );
    assert_eq!(
        pair["rules"][0]["decides"],
        json!(["handoff_mode", "allowed_context_fields"])
    );
    assert_eq!(pair["handoff_mode"], "scoped");
    assert_eq!(
        pair["governing_rule_id"],
        "intelligence-to-strategy-context"
    );
    // The decision `policy explain` gives: Guardrail 2 forbids handing it work.
    let explain = docket_on(
        &data,
        &[
            "policy",
            "explain",
            &geo_policy(),
            "--from",
            "intelligence",
            "--to",
            "strategy",
            "--json",
        ],
    );
    let explain: Value = serde_json::from_str(&stdout_text(&explain)).expect("JSON");
    assert_eq!(pair["handoff"], explain["handoff"]);
    assert_eq!(pair["handoff"]["decision"]["verdict"], "deny");

    let out = docket_on(
        &data,
        &["policy", "rules", "--from", "nobody", "--to", "strategy"],
    );
    assert_eq!(exit_code(&out), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no agent `nobody` (from)"), "{err}");
}

#[test]
fn a_loosening_and_a_tightening_are_versions_naming_the_runs_they_affect() {
    geo_agents_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    // g1 completes; g2 stops at Governance (no competitor), before Intelligence.
    assert_eq!(run_geo(&data, "g1", None), 0);
    assert_eq!(run_geo(&data, "g2", Some("no-competitors.json")), 4);
    let v1 = register_geo(&data);
    let listed = ok_json(&data, &["policy", "rules", "--json"]);
    let original = listed["rules"].clone();

    // Loosen: Strategy also sees Intelligence's per-engine figures. Only g1 reached that
    // handoff: more fields would have crossed in it.
    let mut loosened = listed.clone();
    loosened["rules"][0]["allowed_context_fields"] =
        json!(["answers", "brands", "by_engine", "focus_brand"]);
    let (code, out, err) = set_rules(&data, &loosened, "bob", "strategy sees engines");
    assert_eq!(code, 0, "{err}");
    let answer: Value = serde_json::from_str(&out).expect("JSON");
    let v2 = &answer["registered"];
    assert_eq!(
        (v2["version"].as_u64(), v2["replaces"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(
        (v2["by"].as_str(), v2["reason"].as_str()),
        (Some("bob"), Some("strategy sees engines"))
    );
    assert_eq!(answer["diff"]["old_hash"], v1["hash"]);
    assert_eq!(answer["diff"]["new_hash"], v2["hash"]);
    assert_eq!(
        answer["diff"]["rules"],
        json!([{"section": "multi_agent_handoffs.agent_handoff_rules", "id": "intelligence-to-strategy-context", "change": "changed"}])
    );
    assert_eq!(answer["affected"]["runs_compared"], 2);
    assert_eq!(affected_ids(&answer), ["g1"]);
    let g1 = &answer["affected"]["runs"][0];
    assert_eq!(
        (g1["looser"].as_u64(), g1["stricter"].as_u64()),
        (Some(1), Some(0))
    );
    let per_rule = answer["affected"]["per_rule"]
        .as_object()
        .expect("per rule");
    assert!(
        per_rule
            .keys()
            .any(|r| r.contains("intelligence-to-strategy-context")),
        "{per_rule:?}"
    );

    // Tighten (from the original rules): nothing of `regions` reaches Governance. Both
    // runs handed the request to Governance: both would have been decided otherwise.
    let mut tightened = original.as_array().expect("rules").clone();
    tightened.push(json!({
        "from_agent_id": "external",
        "to_agent_id": "governance",
        "blocked_context_fields": ["regions"]
    }));
    let (code, out, err) = set_rules(&data, &Value::Array(tightened), "carol", "no regions");
    assert_eq!(code, 0, "{err}");
    let answer: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(answer["registered"]["version"], 3);
    assert_eq!(answer["registered"]["replaces"], 2);
    assert!(
        answer["diff"]["rules"]
            .as_array()
            .expect("rules")
            .contains(&json!({"section": "multi_agent_handoffs.agent_handoff_rules", "id": "handoff:external->governance", "change": "added"})),
        "{}",
        answer["diff"]
    );
    assert_eq!(affected_ids(&answer), ["g1", "g2"]);
    for run in answer["affected"]["runs"].as_array().expect("runs") {
        assert_eq!(
            (run["stricter"].as_u64(), run["looser"].as_u64()),
            (Some(1), Some(0)),
            "{run}"
        );
    }
    let rule = answer["affected"]["per_rule"]
        .as_object()
        .expect("per rule")
        .values()
        .next()
        .expect("one rule");
    assert_eq!(rule["runs"], json!(["g1", "g2"]));
    assert_eq!(rule["decisions"], 2);

    // The registry: three versions, each kept as registered.
    let versions = ok_json(&data, &["policy", "versions", "--json"]);
    let numbers: Vec<u64> = versions
        .as_array()
        .expect("list")
        .iter()
        .map(|v| v["version"].as_u64().expect("n"))
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert_eq!(versions[0], v1);
    // The same rules again change nothing: refused, nothing recorded.
    let (code, _, err) = set_rules(
        &data,
        &ok_json(&data, &["policy", "rules", "--json"]),
        "dan",
        "again",
    );
    assert_eq!(code, 1);
    assert!(err.contains("nothing to register"), "{err}");
    let versions = ok_json(&data, &["policy", "versions", "--json"]);
    assert_eq!(versions.as_array().expect("list").len(), 3);
}

#[test]
fn invalid_rules_are_refused_naming_each_rule_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    register_geo(&data);
    let bad = json!([
        {"from_agent_id": "intelligence", "to_agent_id": "strategy", "handoff_mode": "partial"},
        {"id": "r2", "from_agent_id": "nobody", "to_agent_id": "strategy"},
        {"id": "r3", "from_agent_id": "reasoning", "to_agent_id": "strategy", "handoff_mode": "full", "allowed_context_fields": ["gaps"]},
        {"id": "r4", "from_agent_id": "observation", "to_agent_id": "*", "colour": "red"}
    ]);
    let (code, out, err) = set_rules(&data, &bad, "eve", "broken");
    assert_eq!(code, 1, "{out}");
    for expected in [
        "rule 1 (`handoff:intelligence->strategy`), field `handoff_mode`",
        "rule 2 (`r2`), field `from_agent_id`: unknown reference",
        "rule 3 (`r3`), field `allowed_context_fields`: contradictory rules",
        "rule 4 (`r4`)",
        "colour",
    ] {
        assert!(err.contains(expected), "{expected:?} in {err}");
    }
    // Not a list at all.
    let (code, _, err) = set_rules(&data, &json!("rules"), "eve", "broken");
    assert_eq!(code, 1);
    assert!(err.contains("must be a JSON list of rules"), "{err}");
    // Without who or why.
    let (code, _, err) = set_rules(&data, &json!([]), "eve", " ");
    assert_eq!(code, 1);
    assert!(err.contains("needs why"), "{err}");
    // Nothing was recorded.
    let versions = ok_json(&data, &["policy", "versions", "--json"]);
    assert_eq!(versions.as_array().expect("list").len(), 1);
}

#[test]
fn a_waiting_run_keeps_its_bundle_and_a_new_run_uses_the_latest_version() {
    geo_agents_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let v1 = register_geo(&data);
    // Strategy asks a person's sign-off: the run waits for a human.
    let workflow = geo_workflow_with(
        dir.path(),
        &[(
            "strategy",
            format!("command = {TEST_AGENT:?}\nargs = [\"escalate_then_finish\"]"),
        )],
        "",
    );
    let out = docket_on(
        &data,
        &[
            "run",
            workflow.to_str().expect("utf-8"),
            "--run-id",
            "waiting",
        ],
    );
    assert_eq!(exit_code(&out), 3, "{}", stdout_text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bundle geo-pipeline version 1")
            && err.contains("the same as the workflow's bundle file"),
        "{err}"
    );

    // A new version while it waits.
    let mut rules = ok_json(&data, &["policy", "rules", "--json"]);
    rules["rules"][0]["allowed_context_fields"] =
        json!(["answers", "brands", "by_engine", "focus_brand"]);
    let (code, out, err) = set_rules(&data, &rules, "bob", "strategy sees engines");
    assert_eq!(code, 0, "{err}");
    let v2: Value = serde_json::from_str(&out).expect("JSON");
    let v2 = &v2["registered"];
    assert_ne!(v2["hash"], v1["hash"]);

    // The waiting run goes on under the bundle it recorded.
    let out = docket_on(
        &data,
        &[
            "approve",
            "waiting",
            "ticket-1",
            "--by",
            "ana",
            "--reason",
            "signed off",
        ],
    );
    assert!(matches!(exit_code(&out), 3 | 4), "{}", stdout_text(&out));
    let events = run_events(&data, "waiting");
    let requested = &events[0]["payload"];
    assert_eq!(requested["bundle_hash"], v1["hash"]);
    let decided_after: Vec<&Value> = events
        .iter()
        .skip_while(|e| e["kind"] != "human.decided")
        .filter_map(|e| e["payload"].get("decision"))
        .filter(|d| d.get("bundle_hash").is_some())
        .collect();
    assert!(!decided_after.is_empty(), "decisions after the approval");
    for d in decided_after {
        assert_eq!(d["bundle_hash"], v1["hash"], "{d}");
    }

    // A new run of the same bundle's name runs under version 2, and says so.
    let out = docket_on(
        &data,
        &[
            "run",
            geo_workflow().to_str().expect("utf-8"),
            "--run-id",
            "new",
        ],
    );
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bundle geo-pipeline version 2") && err.contains("differs"),
        "{err}"
    );
    let events = run_events(&data, "new");
    assert_eq!(events[0]["payload"]["bundle_hash"], v2["hash"]);
    assert_eq!(
        events[0]["payload"]["bundle_source_name"],
        "geo-pipeline@2.json"
    );
    // Under it, Strategy is handed Intelligence's per-engine figures.
    let context = events_of_kind(&events, "handoff.allowed")
        .into_iter()
        .find(|e| e["payload"]["from"] == "intelligence" && e["payload"]["to"] == "strategy")
        .expect("the Guardrail 2 context handoff");
    let included = context["payload"]["audit"]["context_after_scoping"]["fields_included"]
        .as_array()
        .expect("fields");
    assert!(
        included
            .iter()
            .any(|f| f.as_str().is_some_and(|f| f.starts_with("by_engine."))),
        "{included:?}"
    );
}
