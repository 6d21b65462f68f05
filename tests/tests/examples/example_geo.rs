//! The geo example (examples/geo, seed 000's agent interaction boundaries) run through the
//! binary on each input of examples/geo/input: the guardrails and checkpoints the document
//! names each stop the run they are meant to stop, by the rule of the bundle that says so,
//! and every run replays and exports soundly. (The default run is checked in
//! engine_run.rs; the agents' figures in geo_agents.rs.)

use std::path::Path;

use docket_tests::{
    docket_on, events_of_kind, exit_code, geo_agents_built, replays_and_exports, run_events,
    stdout_text, workspace_root,
};
use serde_json::Value;

/// Runs the geo workflow on `input` (a path under examples/geo, or any path) as run `id`;
/// returns its exit code, its summary and its events.
fn run_geo(data: &Path, input: &Path, id: &str) -> (i32, String, Vec<Value>) {
    geo_agents_built();
    let workflow = workspace_root().join("examples/geo/workflow.toml");
    let out = docket_on(
        data,
        &[
            "run",
            workflow.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--run-id",
            id,
        ],
    );
    let text = stdout_text(&out);
    assert!(
        matches!(exit_code(&out), 0 | 4),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (exit_code(&out), text, run_events(data, id))
}

fn geo_input(name: &str) -> std::path::PathBuf {
    workspace_root().join("examples/geo/input").join(name)
}

/// The agents called, in order.
fn called(events: &[Value]) -> Vec<&str> {
    events_of_kind(events, "agent.call_scheduled")
        .iter()
        .filter_map(|e| e["payload"]["request"]["target_agent"].as_str())
        .collect()
}

/// The rule ids of the `policy.decided` events of `kind`, in order.
fn decided_by<'a>(events: &'a [Value], kind: &str) -> Vec<(&'a str, &'a str)> {
    events_of_kind(events, "policy.decided")
        .iter()
        .map(|e| &e["payload"]["decision"])
        .filter(|d| d["kind"] == kind)
        .filter_map(|d| Some((d["rule_id"].as_str()?, d["verdict"].as_str()?)))
        .collect()
}

/// The rule the run was blocked by.
fn blocked_by(events: &[Value]) -> &str {
    let blocked = events_of_kind(events, "run.blocked");
    assert_eq!(blocked.len(), 1, "one run.blocked: {blocked:?}");
    assert!(events_of_kind(events, "run.completed").is_empty());
    blocked[0]["payload"]["error"]["details"]["ruleId"]
        .as_str()
        .unwrap_or_default()
}

fn decision_handoffs(events: &[Value]) -> Vec<(&str, &str)> {
    events_of_kind(events, "handoff.allowed")
        .iter()
        .map(|e| &e["payload"])
        .filter(|p| p["input"] != "context")
        .filter_map(|p| Some((p["from"].as_str()?, p["to"].as_str()?)))
        .collect()
}

#[test]
fn the_analysis_passes_both_checkpoints_and_every_guardrail() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let input = workspace_root().join("examples/geo/input.json");
    let (code, text, events) = run_geo(&data, &input, "analysis");
    assert_eq!(code, 0, "{text}");
    // Rule 1: the sequence, one position at a time, out through Checkpoint 2.
    assert_eq!(
        decision_handoffs(&events),
        [
            ("external", "governance"),
            ("governance", "observation"),
            ("observation", "intelligence"),
            ("intelligence", "reasoning"),
            ("reasoning", "strategy"),
            ("strategy", "governance"),
            ("governance", "external"),
        ]
    );
    assert!(events_of_kind(&events, "handoff.denied").is_empty());
    let allowed = events_of_kind(&events, "handoff.allowed");
    // Guardrail 2: Intelligence's scores reach Strategy as read-only context only, scoped
    // to the overall figures; and each recommendation's gap was checked at Checkpoint 2.
    let context = allowed
        .iter()
        .map(|e| &e["payload"])
        .find(|p| p["from"] == "intelligence" && p["to"] == "strategy")
        .expect("the context edge");
    assert_eq!(context["input"], "context");
    assert_eq!(context["decision"]["rule_id"], "guardrail-2");
    assert!(context["delivered"].get("by_topic").is_none(), "{context}");
    let checkpoint_2 = allowed
        .iter()
        .map(|e| &e["payload"])
        .find(|p| p["from"] == "strategy" && p["to"] == "governance")
        .expect("strategy → governance");
    assert_eq!(
        checkpoint_2["provenance"][0]["rule_id"],
        "guardrail-2-provenance"
    );
    // No partial outputs, except the collection with an empty answer, on its one edge.
    let statuses: Vec<&str> = events_of_kind(&events, "agent.responded")
        .iter()
        .filter_map(|e| e["payload"]["response"]["status"].as_str())
        .collect();
    assert_eq!(
        statuses,
        [
            "SUCCESS", "PARTIAL", "SUCCESS", "SUCCESS", "SUCCESS", "SUCCESS"
        ]
    );
    // The output, as the README's "What a run must output" states it.
    let output = &events_of_kind(&events, "run.completed")[0]["payload"]["output"];
    assert_eq!(output["status"], "validated");
    let recommendations: Vec<[&str; 6]> = output["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            [
                "id",
                "priority",
                "topic",
                "gap_id",
                "rationale",
                "expected_impact",
            ]
            .map(|field| r[field].as_str().unwrap_or_default())
        })
        .collect();
    let impact = |topic: &str, points: u32| {
        format!(
            "Closing the gap would raise Acme's mention rate on \"{topic}\" by up to {points} points (overall GEO score today: 35.4, share of voice 24%)."
        )
    };
    let (help_desk, crm, email) = (
        impact("help desk software", 100),
        impact("crm for startups", 50),
        impact("email marketing", 20),
    );
    assert_eq!(
        recommendations,
        [
            [
                "rec-1",
                "HIGH",
                "help desk software",
                "gap-1",
                "AI assistants mention Acme in 0% of answers on \"help desk software\", Globex in 100%.",
                help_desk.as_str(),
            ],
            [
                "rec-2",
                "HIGH",
                "crm for startups",
                "gap-2",
                "AI assistants mention Acme in 50% of answers on \"crm for startups\", Globex in 100%.",
                crm.as_str(),
            ],
            [
                "rec-3",
                "LOW",
                "email marketing",
                "gap-3",
                "AI assistants mention Acme in 60% of answers on \"email marketing\", Initech in 80%.",
                email.as_str(),
            ],
        ]
    );
    replays_and_exports(&data, "analysis");
}

#[test]
fn a_strategy_asking_for_new_questions_is_refused_by_the_question_generation_lock() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (code, text, events) = run_geo(&data, &geo_input("question-feedback.json"), "g3");
    // Guardrail 3: the capability request is refused before Observation is called again,
    // and the run stops, blocked.
    assert_eq!(code, 4, "{text}");
    assert!(text.contains("(geo): blocked by policy"), "{text}");
    assert!(text.contains("Guardrail 3"), "{text}");
    assert_eq!(
        decided_by(&events, "capability"),
        [("guardrail-3", "deny")],
        "{events:?}"
    );
    assert_eq!(blocked_by(&events), "guardrail-3");
    assert_eq!(
        called(&events),
        [
            "governance",
            "observation",
            "intelligence",
            "reasoning",
            "strategy"
        ]
    );
    // Nothing left Strategy: no recommendations reached Governance.
    assert!(
        !decision_handoffs(&events).contains(&("strategy", "governance")),
        "{events:?}"
    );
    // Strategy was told the drill through the original request, which the bundle lets it
    // see in full (rule strategy-told-the-request).
    assert_eq!(
        decided_by(&events, "context_scope"),
        [("strategy-told-the-request", "allow")]
    );
    replays_and_exports(&data, "g3");
}

#[test]
fn an_invalid_request_stops_at_checkpoint_1() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (code, text, events) = run_geo(&data, &geo_input("no-competitors.json"), "c1");
    assert_eq!(code, 4, "{text}");
    // Governance validates the request and refuses it; a validation error stops the flow
    // at once (stop_on_errors), with nothing handed on.
    assert_eq!(called(&events), ["governance"]);
    let responded = events_of_kind(&events, "agent.responded");
    assert_eq!(
        responded[0]["payload"]["response"]["error_code"],
        "INPUT_VALIDATION_FAILED"
    );
    assert!(
        text.contains("brands must name the focus brand and at least one competitor"),
        "{text}"
    );
    assert_eq!(
        decided_by(&events, "escalation"),
        [("escalation.stop_on_errors", "deny")]
    );
    assert_eq!(blocked_by(&events), "escalation.stop_on_errors");
    assert_eq!(decision_handoffs(&events), [("external", "governance")]);
    replays_and_exports(&data, "c1");

    // A capture window that runs backwards is refused the same way (the contract takes
    // `timeRange` as Governance reads it: `{ from, to }`).
    let backwards = dir.path().join("backwards.json");
    std::fs::write(
        &backwards,
        r#"{"topics": ["email marketing"], "brands": ["Acme", "Globex"], "regions": ["EU"],
            "timeRange": {"from": "2026-02-01", "to": "2026-01-01"}}"#,
    )
    .unwrap();
    let (code, text, events) = run_geo(&data, &backwards, "c1-range");
    assert_eq!(code, 4, "{text}");
    assert!(
        text.contains("timeRange runs backwards: 2026-02-01 > 2026-01-01"),
        "{text}"
    );
    assert_eq!(blocked_by(&events), "escalation.stop_on_errors");
}

#[test]
fn a_window_in_range_passes_checkpoint_1_and_narrows_what_is_observed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let window = dir.path().join("window.json");
    // The US answers on CRMs were captured on 2026-01-12, those on email marketing a day
    // later: a one-day window keeps the first three only.
    std::fs::write(
        &window,
        r#"{"topics": ["crm for startups", "email marketing"], "brands": ["Acme", "Globex"],
            "regions": ["US"], "timeRange": {"from": "2026-01-12", "to": "2026-01-12"}}"#,
    )
    .unwrap();
    let (code, text, events) = run_geo(&data, &window, "window");
    assert_eq!(code, 0, "{text}");
    let observed = events_of_kind(&events, "handoff.allowed")
        .into_iter()
        .map(|e| &e["payload"])
        .find(|p| p["from"] == "observation" && p["to"] == "intelligence")
        .expect("observation → intelligence");
    let snapshots: Vec<(&str, &str)> = observed["delivered"]["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| Some((s["id"].as_str()?, s["captured_on"].as_str()?)))
        .collect();
    assert_eq!(
        snapshots,
        [
            ("s01", "2026-01-12"),
            ("s02", "2026-01-12"),
            ("s03", "2026-01-12")
        ]
    );
    assert!(decision_handoffs(&events).contains(&("governance", "external")));
}

#[test]
fn rejections_at_checkpoint_2_are_retried_up_to_the_hard_stop() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (code, text, events) =
        run_geo(&data, &geo_input("questions-in-recommendations.json"), "g1");
    assert_eq!(code, 4, "{text}");
    // Strategy's recommendations pass docket's gates into Governance (contract,
    // provenance), and Governance rejects them: three times, then Guardrail 1.
    assert!(
        decision_handoffs(&events).contains(&("strategy", "governance")),
        "{events:?}"
    );
    let rejections: Vec<&Value> = events_of_kind(&events, "agent.responded")
        .into_iter()
        .filter(|e| e["payload"]["response"]["error_code"] == "RECOMMENDATION_REJECTED")
        .collect();
    assert_eq!(rejections.len(), 3, "{events:?}");
    assert!(
        rejections[0]["payload"]["response"]["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("rec-1.questions_to_sample")),
        "{rejections:?}"
    );
    assert_eq!(
        decided_by(&events, "escalation"),
        [
            ("checkpoint-2-retry", "allow"),
            ("checkpoint-2-retry", "allow"),
            ("guardrail-1", "deny")
        ]
    );
    assert_eq!(
        called(&events),
        [
            "governance",
            "observation",
            "intelligence",
            "reasoning",
            "strategy",
            "governance",
            "governance",
            "governance"
        ]
    );
    assert_eq!(blocked_by(&events), "guardrail-1");
    let blocked = &events_of_kind(&events, "run.blocked")[0]["payload"]["error"];
    assert_eq!(blocked["errorType"], "retry_limit_exceeded");
    // Nothing reached the caller.
    assert!(!decision_handoffs(&events).contains(&("governance", "external")));
    // The summary says how to go on: only a person, by an override.
    assert!(text.contains("docket override g1"), "{text}");
    // The people of the registry: the operator (global_rules) is a peer of the ladder's
    // rule and is refused, nothing recorded; the analyst (`reviewer`, human) overrides.
    let before = run_events(&data, "g1").len();
    let refused = docket_on(
        &data,
        &[
            "override",
            "g1",
            "--by",
            "olu",
            "--role",
            "operator",
            "--reason",
            "try again",
        ],
    );
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_ne!(exit_code(&refused), 0, "{said}");
    assert!(said.contains("roles that outrank it: reviewer"), "{said}");
    assert_eq!(run_events(&data, "g1").len(), before, "nothing recorded");
    let overridden = docket_on(
        &data,
        &[
            "override",
            "g1",
            "--by",
            "ana",
            "--role",
            "reviewer",
            "--reason",
            "the recommendations are checked by hand",
        ],
    );
    let events = run_events(&data, "g1");
    let overrode = events_of_kind(&events, "human.overrode");
    assert_eq!(overrode.len(), 1, "{}", stdout_text(&overridden));
    assert_eq!(overrode[0]["payload"]["role"], "reviewer");
    assert_eq!(overrode[0]["payload"]["by"], "ana");
    replays_and_exports(&data, "g1");
}
