//! The claims example (examples/claims, seed 001's multi-agent context controls) run
//! through the binary: each of the document's five test scenarios (full, scoped and
//! minimal handoffs, conversation translation, governance enforcement) is checked in the
//! handoff audit records of the runs, and every run replays and exports soundly.

use std::path::Path;
use std::sync::OnceLock;

use docket_tests::{
    docket_on, events_of_kind, example_agents_built, exit_code, replays_and_exports, run_events,
    stdout_text, workspace_root,
};
use serde_json::{Value, json};

fn claims_agents_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| example_agents_built("docket-example-claims"));
}

/// Runs the claims workflow on `input` (a file of examples/claims) as run `id`; returns
/// its exit code and its events.
fn run_claims(data: &Path, input: &str, id: &str) -> (i32, Vec<Value>) {
    claims_agents_built();
    let example = workspace_root().join("examples/claims");
    let out = docket_on(
        data,
        &[
            "run",
            example.join("workflow.toml").to_str().unwrap(),
            "--input",
            example.join(input).to_str().unwrap(),
            "--run-id",
            id,
        ],
    );
    let code = exit_code(&out);
    assert!(
        code == 0 || code == 4,
        "{}{}",
        stdout_text(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    (code, run_events(data, id))
}

/// The run's output (`run.completed`), as the README's "What a run must output" states it.
fn output(events: &[Value]) -> Value {
    let completed = events_of_kind(events, "run.completed");
    assert_eq!(completed.len(), 1, "the run completed");
    completed[0]["payload"]["output"].clone()
}

/// The decision handoff `from → to` (not a read-only context input).
fn handoff<'a>(events: &'a [Value], from: &str, to: &str) -> &'a Value {
    events_of_kind(events, "handoff.allowed")
        .into_iter()
        .map(|e| &e["payload"])
        .find(|p| p["from"] == from && p["to"] == to && p["kind"] != "context")
        .unwrap_or_else(|| panic!("no handoff {from} → {to}"))
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn a_collision_claim_crosses_full_scoped_and_translated_handoffs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (code, events) = run_claims(&data, "input.json", "collision");
    assert_eq!(code, 0);

    // Scenario 11, full mode: intake's record reaches coverage whole (rule intake → *).
    let full = handoff(&events, "intake_agent", "coverage_agent");
    assert_eq!(full["audit"]["handoff_mode"], "full");
    assert_eq!(full["audit"]["governance_rule_id"], "intake_to_any_full");
    assert_eq!(full["delivered"]["claimant"]["ssn_last4"], "6789");
    assert!(full["delivered"]["claimant"].get("ssn").is_none());

    // Scenario 12, scoped mode: fraud gets the claim and the coverage, not the claimant.
    let scoped = handoff(&events, "coverage_agent", "fraud_agent");
    assert_eq!(scoped["audit"]["handoff_mode"], "scoped");
    assert!(scoped["delivered"].get("claimant").is_none(), "{scoped}");
    let excluded = strings(&scoped["audit"]["context_after_scoping"]["fields_excluded"]);
    assert!(
        excluded.iter().any(|f| f.starts_with("claimant.")),
        "{excluded:?}"
    );

    // fraud → recommendation: only the score, the indicators and the risk level; the
    // investigators' notes are removed.
    let fraud = handoff(&events, "fraud_agent", "recommendation_agent");
    assert_eq!(
        fraud["audit"]["governance_rule_id"],
        "fraud_to_recommendation_scoped"
    );
    assert_eq!(
        strings(&fraud["audit"]["context_after_scoping"]["fields_included"]),
        ["fraud_indicators", "fraud_score", "risk_level"]
    );
    assert_eq!(
        strings(&fraud["audit"]["context_after_scoping"]["fields_excluded"]),
        ["internal_notes", "investigator_comments", "model_version"]
    );
    // Scenario 14, translation: summarised as `path: value` lines (the rule asks for a
    // summary) and recast as a system message, the whole within the 500-token budget; the
    // audit counts what was delivered.
    assert_eq!(
        fraud["delivered"],
        json!({
            "role": "system",
            "source_agent_id": "fraud_agent",
            "content": {
                "summary": "fraud_indicators: []\nfraud_score: 0.05\nrisk_level: low",
                "fields_omitted": 0,
            },
        })
    );
    assert_eq!(
        fraud["audit"],
        json!({
            "from_agent_id": "fraud_agent",
            "to_agent_id": "recommendation_agent",
            "handoff_mode": "scoped",
            "governance_rule_id": "fraud_to_recommendation_scoped",
            "audit_enabled": true,
            "conversation_translation_applied": true,
            "context_before_scoping": {"prior_outputs_count": 0, "total_tokens": 78},
            "context_after_scoping": {
                "prior_outputs_count": 0,
                "total_tokens": 45,
                "fields_included": ["fraud_indicators", "fraud_score", "risk_level"],
                "fields_excluded": ["internal_notes", "investigator_comments", "model_version"],
            },
            "summary": {"max_tokens": 500, "lines_kept": 3, "lines_omitted": 0},
        })
    );
    assert_eq!(
        docket_policies::count_value_tokens(&fraud["delivered"]),
        45,
        "the audit's count is the delivered context's"
    );

    // The prior outputs recommendation_agent requires cross one by one, each counted.
    let prior: Vec<&Value> = events_of_kind(&events, "handoff.allowed")
        .into_iter()
        .map(|e| &e["payload"])
        .filter(|p| {
            p["to"] == "recommendation_agent"
                && p["output_type"].as_str().unwrap().starts_with("prior:")
        })
        .collect();
    assert_eq!(
        prior
            .iter()
            .map(|p| p["output_type"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["prior:coverage_assessment", "prior:claim_record"]
    );
    for p in &prior {
        assert_eq!(
            p["audit"]["context_before_scoping"]["prior_outputs_count"],
            1
        );
        assert_eq!(
            p["audit"]["context_after_scoping"]["prior_outputs_count"],
            1
        );
    }
    assert_eq!(
        strings(&prior[1]["audit"]["context_after_scoping"]["fields_included"]),
        [
            "claim.amount",
            "claim.description",
            "claim.id",
            "claim.incident_date",
            "claim.reported_date",
            "claim.type"
        ]
    );

    assert_eq!(
        output(&events),
        serde_json::json!({
            "claim_id": "CLM-2026-0142",
            "recommendation": "approve",
            "payable": 7900,
            "reasons": ["covered: true", "fraud risk low (score 0.05)"],
        })
    );
    replays_and_exports(&data, "collision");
}

#[test]
fn an_injury_claim_reaches_the_third_party_in_minimal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (code, events) = run_claims(&data, "injury.json", "injury");
    assert_eq!(code, 0);

    // Scenario 13, minimal mode: the reviewer gets the trigger and the metadata only.
    let minimal = handoff(&events, "sensitive_agent", "external_agent");
    assert_eq!(minimal["audit"]["handoff_mode"], "minimal");
    assert_eq!(
        minimal["audit"]["governance_rule_id"],
        "sensitive_to_external_minimal"
    );
    let keys: Vec<&String> = minimal["delivered"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["metadata", "trigger"]);
    let excluded = strings(&minimal["audit"]["context_after_scoping"]["fields_excluded"]);
    assert!(excluded.contains(&"medical_history"), "{excluded:?}");
    assert!(!minimal["delivered"].to_string().contains("Lumbar"));
    // And nothing about the claimant reached the reviewer by any other path.
    for e in events_of_kind(&events, "handoff.allowed") {
        if e["payload"]["to"] == "external_agent" {
            assert!(
                !e["payload"]["delivered"].to_string().contains("Lumbar"),
                "{e}"
            );
            assert!(
                !e["payload"]["delivered"].to_string().contains("Okafor"),
                "{e}"
            );
        }
    }
    assert_eq!(
        output(&events),
        serde_json::json!({
            "claim_id": "CLM-2026-0187",
            "recommendation": "approve",
            "payable": 20000,
            "reasons": ["third-party medical review: consistent_with_claim"],
        })
    );
    replays_and_exports(&data, "injury");
}

#[test]
fn sharing_the_investigation_with_the_third_party_is_denied() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (code, events) = run_claims(&data, "leak.json", "leak");
    // Scenario 15, governance enforcement: no edge fraud_agent → external_agent.
    assert_eq!(code, 4, "blocked by policy");
    let denied = events_of_kind(&events, "handoff.denied");
    assert_eq!(denied.len(), 1, "{denied:?}");
    let payload = &denied[0]["payload"];
    assert_eq!(payload["from"], "fraud_agent");
    assert_eq!(payload["to"], "external_agent");
    assert_eq!(
        payload["decision"]["rule_id"], "deny_by_default",
        "{payload}"
    );
    assert_eq!(payload["output_type"], "fraud_assessment", "{payload}");
    for e in events_of_kind(&events, "handoff.allowed") {
        assert_ne!(e["payload"]["to"], "external_agent", "{e}");
    }
    assert!(events_of_kind(&events, "run.completed").is_empty());
    replays_and_exports(&data, "leak");
}
