//! Policy bundles through the public API: the governance rules of docs/governance.md, decided.

use std::collections::BTreeMap;

use docket_policies::EscalationAction;
use docket_policies::{
    BundleError, CapabilityRequest, DiagnosticCode, FlowStep, InputKind, Meter, PolicyBundle,
    SideEffectRequest, SpawnRequest, Verdict, load_file,
};
use docket_tests::example;
use serde_json::{Value, json};

fn bundle(name: &str) -> PolicyBundle {
    load_file(&example(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_example_bundle_validates() {
    for name in ["geo", "claims", "software-team", "consulting", "social"] {
        let b = bundle(name);
        assert!(b.agent_ids().count() >= 5, "{name}");
    }
}

// ---- the interaction matrix (docs/governance.md#interaction-matrix) ----

#[test]
fn every_forbidden_row_of_seed_000_is_denied_with_its_reason() {
    let b = bundle("geo");
    let rows = [
        ("observation", "reasoning", "Must go through Intelligence"),
        (
            "observation",
            "strategy",
            "Must go through Intelligence + Reasoning",
        ),
        ("intelligence", "strategy", "Must go through Reasoning"),
        (
            "intelligence",
            "governance",
            "Must go through Reasoning + Strategy",
        ),
        ("reasoning", "governance", "Must go through Strategy"),
        ("reasoning", "observation", "Circular dependency"),
        ("strategy", "intelligence", "Reverse flow not allowed"),
        ("strategy", "observation", "Reverse flow not allowed"),
    ];
    for (from, to, reason) in rows {
        let d = b.decide_handoff(from, to, InputKind::Decision).decision;
        assert_eq!(d.verdict, Verdict::Deny, "{from} → {to}");
        assert_eq!(&*d.reason, reason, "{from} → {to}");
        assert_eq!(&*d.rule_id, format!("forbid:{from}->{to}"));
        assert_eq!(d.bundle_hash, b.hash());
    }
    // "Any Agent → Any Agent (skip)": derived from the flow order, not listed row by row.
    for (from, to, via) in [
        ("governance", "intelligence", "observation"),
        (
            "governance",
            "strategy",
            "observation + intelligence + reasoning",
        ),
    ] {
        let d = b.decide_handoff(from, to, InputKind::Decision).decision;
        assert_eq!(d.verdict, Verdict::Deny);
        assert_eq!(&*d.rule_id, "flow_order.skip");
        assert!(
            d.reason.contains("No agent skipping allowed") && d.reason.contains(via),
            "{}",
            d.reason
        );
    }
    // Reverse flow that no row lists: Reasoning back to Intelligence.
    let d = b
        .decide_handoff("reasoning", "intelligence", InputKind::Decision)
        .decision;
    assert_eq!(
        (d.verdict, &*d.rule_id),
        (Verdict::Deny, "flow_order.circular")
    );
    // Deny by default for a pair the order says nothing about.
    let d = b
        .decide_handoff("external", "strategy", InputKind::Decision)
        .decision;
    assert_eq!(d.verdict, Verdict::Deny);
}

#[test]
fn the_seven_allowed_rows_of_seed_000_are_allowed() {
    let b = bundle("geo");
    for (from, to, output) in [
        ("external", "governance", "analysis_request"),
        ("governance", "observation", "validated_scope"),
        ("observation", "intelligence", "ai_answer_snapshots"),
        ("intelligence", "reasoning", "geo_scores"),
        ("reasoning", "strategy", "gaps_and_opportunities"),
        ("strategy", "governance", "recommendations"),
        ("governance", "external", "validated_recommendations"),
    ] {
        let h = b.decide_handoff(from, to, InputKind::Decision);
        assert_eq!(
            h.decision.verdict,
            Verdict::Allow,
            "{from} → {to}: {}",
            h.decision.reason
        );
        assert_eq!(h.output_type.as_deref(), Some(output));
    }
}

#[test]
fn in_the_geo_flow_every_pair_but_the_next_step_is_denied_at_every_position() {
    // Seed 000's rules 1-4 as a sequential flow: at each position the run may hand off
    // only to the next agent of the order; every skip, reverse and circular pair, and
    // every pair of agents not at that position, is denied, by the matrix or the flow.
    let b = bundle("geo");
    let order = b.spec().interactions.flow_order.clone();
    let agents: Vec<String> = b.agent_ids().map(str::to_owned).collect();
    for position in 0..order.len() {
        for from in &agents {
            for to in &agents {
                let matrix = b.decide_handoff(from, to, InputKind::Decision);
                let flow = b.decide_flow_step(from, to, position as u32);
                let allowed = matrix.decision.is_allowed() && matches!(flow, FlowStep::Next(_));
                let next = order[position] == *from && order.get(position + 1) == Some(to);
                assert_eq!(
                    allowed, next,
                    "position {position} ({}): {from} → {to}: matrix {:?}, flow {flow:?}",
                    order[position], matrix.decision.rule_id
                );
                if let FlowStep::Next(p) = flow {
                    assert_eq!(p as usize, position + 1);
                }
            }
        }
    }
    // Governance at entry and at exit: one way out each.
    let entry = b
        .flow_position_after(&["external"])
        .expect("a prefix of the flow");
    assert!(matches!(
        b.decide_flow_step("governance", "external", entry),
        FlowStep::Denied(_)
    ));
    let exit = b
        .flow_position_after(&[
            "external",
            "governance",
            "observation",
            "intelligence",
            "reasoning",
            "strategy",
        ])
        .expect("a prefix of the flow");
    assert!(matches!(
        b.decide_flow_step("governance", "observation", exit),
        FlowStep::Denied(_)
    ));
    assert_eq!(
        b.decide_flow_step("governance", "external", exit),
        FlowStep::Next(exit + 1)
    );
    assert!(b.flow_position_after(&["external", "observation"]).is_err());
}

#[test]
fn a_sequential_flow_with_a_position_that_has_no_way_out_is_invalid() {
    let src = r#"bundle = { id = "t" }
[[agents]]
id = "external"
[[agents]]
id = "a"
[[agents]]
id = "b"
[interactions]
flow_order = ["external", "a", "b", "external"]
sequential_flow = true
allowed = [{ from = "external", to = "a" }, { from = "b", to = "external" }]
"#;
    let err = PolicyBundle::from_toml_str(src, "t.toml").expect_err("a has no way out");
    let text = err.to_string();
    assert!(
        text.contains("position 2 (a) has no way out") && text.contains("t.toml:9:"),
        "{text}"
    );
    let not_external = src.replace(
        r#"flow_order = ["external", "a", "b", "external"]"#,
        r#"flow_order = ["a", "b"]"#,
    );
    let err = PolicyBundle::from_toml_str(&not_external, "t.toml").expect_err("starts at a");
    assert!(
        err.to_string().contains("must begin with `external`"),
        "{err}"
    );
}

#[test]
fn intelligence_reaches_strategy_only_as_read_only_context() {
    let b = bundle("geo");
    let decisive = b
        .decide_handoff("intelligence", "strategy", InputKind::Decision)
        .decision;
    assert_eq!(decisive.verdict, Verdict::Deny);
    let context = b.decide_handoff("intelligence", "strategy", InputKind::Context);
    assert_eq!(context.decision.verdict, Verdict::Allow);
    assert_eq!(&*context.decision.rule_id, "guardrail-2");
    assert!(context.decision.reason.contains("non-decisive"));
    // And only the overall scores cross, never the per-topic or per-assistant aggregations
    // (the field names are the geo agents' `geo_scores` payload).
    let s = b.scope_context(
        "intelligence",
        "strategy",
        InputKind::Context,
        &json!({"focus_brand": "Acme", "answers": 15, "brands": {"Acme": {"geo_score": 35.4}},
                "by_topic": {"crm": {}}, "by_engine": {"x": {}}}),
    );
    assert_eq!(
        s.context,
        json!({"focus_brand": "Acme", "answers": 15, "brands": {"Acme": {"geo_score": 35.4}}})
    );
}

#[test]
fn strategy_cannot_obtain_question_generation() {
    let b = bundle("geo");
    let req = |source: &str, inputs: Value| CapabilityRequest {
        source_agent: source.to_owned(),
        target_agent: "observation".to_owned(),
        capability_code: "question_generation".to_owned(),
        inputs_json: inputs,
        priority: None,
        timeout_ms: None,
    };
    let d = b.decide_capability(&req("strategy", json!({"topics": ["crm"]})));
    assert_eq!(d.decision.verdict, Verdict::Deny);
    assert_eq!(&*d.decision.rule_id, "guardrail-3");
    assert!(d.decision.reason.contains("Guardrail 3"));
    // Any agent not named as a requester is refused too (Reasoning is upstream of Strategy
    // but not a permitted requester).
    assert_eq!(
        b.decide_capability(&req("reasoning", json!({"topics": []})))
            .decision
            .verdict,
        Verdict::Deny
    );
    // Governance (a new Analysis Request) may, with valid inputs, and gets the request defaults.
    let ok = b.decide_capability(&req("governance", json!({"topics": ["crm"]})));
    assert_eq!(
        ok.decision.verdict,
        Verdict::Allow,
        "{}",
        ok.decision.reason
    );
    assert_eq!(ok.timeout_ms, 30_000);
    assert_eq!(ok.priority, docket_policies::Priority::Normal);
    // The input schema is enforced.
    let bad = b.decide_capability(&req("governance", json!({"topics": "crm"})));
    assert_eq!(bad.decision.verdict, Verdict::Deny);
    assert!(
        bad.decision.reason.starts_with("INPUT_VALIDATION_FAILED"),
        "{}",
        bad.decision.reason
    );
}

#[test]
fn guardrail_1_retry_then_hard_stop() {
    let b = bundle("geo");
    assert_eq!(b.decide_escalation(0, None).action, None);
    assert_eq!(
        b.decide_escalation(1, None).action,
        Some(EscalationAction::Retry)
    );
    assert_eq!(
        b.decide_escalation(2, None).action,
        Some(EscalationAction::Retry)
    );
    let stop = b.decide_escalation(3, None);
    assert_eq!(
        (stop.action, stop.decision.verdict),
        (Some(EscalationAction::Block), Verdict::Deny)
    );
    assert_eq!(&*stop.decision.rule_id, "guardrail-1");
    // Seed 000: a validation error stops the flow at its checkpoint, at once.
    let invalid = b.error_class("INPUT_VALIDATION_FAILED");
    assert_eq!(invalid.class, "validation_error");
    let stop = b.decide_escalation(1, Some(&invalid));
    assert_eq!(stop.action, Some(EscalationAction::Block));
    assert_eq!(&*stop.decision.rule_id, "escalation.stop_on_errors");
}

// ---- context scoping (docs/governance.md#handoff-modes) ----

fn fraud_output() -> Value {
    json!({
        "fraud_score": 0.91,
        "fraud_indicators": ["late report", "prior claims"],
        "risk_level": "high",
        "internal_notes": "claimant sounded nervous",
        "investigator_comments": "check bank records",
        "model_version": "v3"
    })
}

#[test]
fn scoped_fraud_to_recommendation_passes_only_the_three_fields() {
    let b = bundle("claims");
    let s = b.scope_context(
        "fraud_agent",
        "recommendation_agent",
        InputKind::Decision,
        &fraud_output(),
    );
    assert_eq!(s.decision.verdict, Verdict::Allow);
    // Summarised (the rule asks for it) and recast as a system message: one line a field.
    assert_eq!(
        s.context,
        json!({
            "role": "system",
            "source_agent_id": "fraud_agent",
            "content": {
                "summary": "fraud_indicators: [\"late report\",\"prior claims\"]\nfraud_score: 0.91\nrisk_level: high",
                "fields_omitted": 0,
            },
        })
    );
    let a = &s.audit;
    assert_eq!(
        a.summary,
        Some(docket_policies::SummaryAudit {
            max_tokens: 500,
            lines_kept: 3,
            lines_omitted: 0,
            empty: false,
        })
    );
    assert_eq!(&*a.governance_rule_id, "fraud_to_recommendation_scoped");
    assert_eq!(
        a.context_after_scoping.fields_included,
        ["fraud_indicators", "fraud_score", "risk_level"]
    );
    assert_eq!(
        a.context_after_scoping.fields_excluded,
        ["internal_notes", "investigator_comments", "model_version"]
    );
    // The count is of what was delivered, summary and message included.
    assert_eq!(
        a.context_after_scoping.total_tokens,
        docket_policies::count_value_tokens(&s.context)
    );
    assert!(a.conversation_translation_applied);
}

#[test]
fn minimal_mode_passes_no_prior_outputs() {
    let b = bundle("claims");
    let payload = json!({
        "trigger": {"event": "claim_ready"},
        "metadata": {"claim_id": "c-1"},
        "original_input": {"statement": "..."},
        "prior_outputs": {"intake_agent": {"name": "A"}, "fraud_agent": {"fraud_score": 0.2}},
    });
    let s = b.scope_context(
        "sensitive_agent",
        "external_agent",
        InputKind::Decision,
        &payload,
    );
    assert_eq!(s.audit.handoff_mode, docket_policies::HandoffMode::Minimal);
    assert_eq!(
        s.context,
        json!({"trigger": {"event": "claim_ready"}, "metadata": {"claim_id": "c-1"}})
    );
    // A payload key named `prior_outputs` is the sender's content, not prior outputs
    // docket delivers (those cross as `prior:TYPE`, each counted as it crosses).
    assert_eq!(s.audit.context_before_scoping.prior_outputs_count, 0);
    assert_eq!(s.audit.context_after_scoping.prior_outputs_count, 0);
    assert_eq!(
        s.audit.context_after_scoping.fields_included,
        ["metadata.claim_id", "trigger.event"]
    );
}

#[test]
fn seed_001_precedence_pair_over_wildcard_over_agent_over_system() {
    let b = bundle("claims");
    let p = json!({"claim": {"amount": 10}, "internal_notes": "n", "fraud_score": 0.1, "coverage": {"ok": true}});
    // Wildcard `intake_agent → *` (full) beats the receiver's default (scoped)...
    let s = b.scope_context(
        "intake_agent",
        "recommendation_agent",
        InputKind::Decision,
        &p,
    );
    assert_eq!(&*s.audit.governance_rule_id, "intake_to_any_full");
    assert_eq!(s.audit.handoff_mode, docket_policies::HandoffMode::Full);
    // ...but the receiver's blocked field is never passed, whatever allows it.
    let content = s.context.get("content").expect("recast as a message");
    assert!(content.get("internal_notes").is_none());
    assert!(content.get("claim").is_some() && content.get("coverage").is_some());
    // A specific pair beats the wildcard and the receiver's default.
    let s = b.scope_context(
        "fraud_agent",
        "coverage_agent",
        InputKind::Decision,
        &fraud_output(),
    );
    assert_eq!(&*s.audit.governance_rule_id, "fraud_to_coverage_full");
    assert_eq!(s.context, fraud_output());
    // No rule: the receiving agent's default.
    let s = b.scope_context(
        "coverage_agent",
        "fraud_agent",
        InputKind::Decision,
        &json!({"coverage": {"limit": 5}, "claimant": {"ssn": "1", "name": "A"}, "x": 1}),
    );
    assert_eq!(
        &*s.audit.governance_rule_id,
        "agents.fraud_agent.context_requirements"
    );
    assert_eq!(s.context, json!({"coverage": {"limit": 5}}));
}

#[test]
fn system_default_applies_when_nothing_else_does_and_denied_handoffs_pass_nothing() {
    let src = r#"
        bundle = { id = "t" }
        agents = [{ id = "a" }, { id = "b" }]
        interactions.allowed = [{ from = "a", to = "b" }]
        [multi_agent_handoffs]
        default_handoff_mode = "full"
        blocked_context_fields = ["secret"]
    "#;
    let b = PolicyBundle::from_toml_str(src, "inline.toml").expect("valid");
    let s = b.scope_context("a", "b", InputKind::Decision, &json!({"x": 1, "secret": 2}));
    assert_eq!(
        &*s.audit.governance_rule_id,
        "multi_agent_handoffs.default_handoff_mode"
    );
    assert_eq!(s.context, json!({"x": 1}));
    let denied = b.scope_context("b", "a", InputKind::Decision, &json!({"x": 1}));
    assert_eq!(denied.decision.verdict, Verdict::Deny);
    assert_eq!(denied.context, Value::Null);
    assert_eq!(denied.audit.context_after_scoping.fields_excluded, ["x"]);
}

#[test]
fn summarize_respects_the_token_budget() {
    let b = bundle("claims");
    let long: Vec<String> = (0..400)
        .map(|i| format!("indicator number {i} of a long list"))
        .collect();
    let mut p = fraud_output();
    p["fraud_indicators"] = json!(long);
    let s = b.scope_context(
        "fraud_agent",
        "recommendation_agent",
        InputKind::Decision,
        &p,
    );
    assert!(
        s.audit.context_after_scoping.total_tokens <= 500,
        "{}",
        s.audit.context_after_scoping.total_tokens
    );
    assert!(s.audit.context_before_scoping.total_tokens > 2000);
    // Deterministic: the same input summarises the same way.
    assert_eq!(
        s,
        b.scope_context(
            "fraud_agent",
            "recommendation_agent",
            InputKind::Decision,
            &p
        )
    );
}

// ---- precedence (docs/governance.md#authority-and-precedence) ----

#[test]
fn seed_002_deny_patterns_override_allowed_tools_and_must_not_overrides_allowed() {
    let b = bundle("software-team");
    let d = b.decide_tool_call("backend", "Bash(rm -rf build/)", &[]);
    assert_eq!((d.verdict, &*d.rule_id), (Verdict::Deny, "deny-rm-rf"));
    assert!(
        d.chain
            .iter()
            .any(|s| s.outcome == docket_policies::StepOutcome::Overridden),
        "allowed tool shown as overridden"
    );
    assert_eq!(
        b.decide_tool_call("backend", "Bash(rm build.log)", &[])
            .verdict,
        Verdict::Allow
    );
    let d = b.decide_tool_call("backend", "Bash(git push origin main)", &[]);
    assert_eq!(
        (d.verdict, &*d.rule_id),
        (Verdict::Deny, "agents.backend.must_not_tools")
    );
    // Deny pattern beats MUST NOT too (both match a force push).
    assert_eq!(
        &*b.decide_tool_call("backend", "Bash(git push --force origin)", &[])
            .rule_id,
        "deny-force-push"
    );
    assert_eq!(
        b.decide_tool_call("backend", "Bash(git status)", &[])
            .verdict,
        Verdict::Allow
    );
    // A task can restrict but never grant.
    assert_eq!(
        b.decide_tool_call("backend", "Bash(git status)", &["Bash(git *)".to_owned()])
            .verdict,
        Verdict::Deny
    );
    assert_eq!(
        b.decide_tool_call("design-reviewer", "Write", &[]).verdict,
        Verdict::Deny
    );
    // REVIEW_REQUIRED pauses for a human.
    assert_eq!(
        b.decide_tool_call("database", "Bash(psql -f m.sql)", &[])
            .verdict,
        Verdict::NeedsApproval
    );
}

#[test]
fn seed_002_agents_never_talk_directly_and_failures_escalate() {
    let b = bundle("software-team");
    let d = b
        .decide_handoff("backend", "frontend", InputKind::Decision)
        .decision;
    assert_eq!(d.verdict, Verdict::Deny);
    assert!(d.reason.contains("Direct communication prohibited"));
    assert_eq!(
        b.decide_handoff("docs", "qa", InputKind::Decision)
            .decision
            .verdict,
        Verdict::Deny
    );
    assert_eq!(
        b.decide_handoff("backend", "orchestrator", InputKind::Decision)
            .decision
            .verdict,
        Verdict::Allow
    );
    // qa → orchestrator: the specific rule beats the `* → orchestrator` wildcard.
    let s = b.scope_context(
        "qa",
        "orchestrator",
        InputKind::Decision,
        &json!({"task_id": 1, "failures": ["t1"], "files_changed": ["a"], "secrets": "k"}),
    );
    assert_eq!(&*s.audit.governance_rule_id, "qa-reports-with-failures");
    assert_eq!(s.context, json!({"task_id": 1, "failures": ["t1"]}));
    let steps: Vec<_> = [1, 2, 3]
        .iter()
        .map(|n| b.decide_escalation(*n, None).decision.verdict)
        .collect();
    assert_eq!(
        steps,
        [Verdict::Allow, Verdict::NeedsApproval, Verdict::Deny]
    );
}

// ---- recursion, domains, side effects (docs/governance.md#episodes) ----

fn spawn(parent: &str, child: &str, depth: u32) -> SpawnRequest {
    SpawnRequest {
        parent_agent: parent.to_owned(),
        child_type: child.to_owned(),
        parent_depth: depth,
        children_spawned: 0,
        total_episodes: 1,
        parent_budget: BTreeMap::from([(
            "tokens".to_owned(),
            Meter {
                limit: 10_000,
                used: 2_000,
            },
        )]),
        child_budget: BTreeMap::from([("tokens".to_owned(), 4_000)]),
        consecutive_no_delta: 0,
        same_error_repeats: 0,
        human_authorized: false,
    }
}

#[test]
fn recursion_policy_limits_and_budget_rules() {
    let b = bundle("social");
    assert_eq!(
        b.decide_spawn(&spawn("planner", "retrieve", 0))
            .decision
            .verdict,
        Verdict::Allow
    );
    assert_eq!(
        b.decide_spawn(&spawn("planner", "retrieve", 2))
            .decision
            .verdict,
        Verdict::Deny,
        "depth 3 > default 2"
    );
    assert_eq!(
        b.decide_spawn(&spawn("planner", "publish", 0))
            .decision
            .verdict,
        Verdict::Deny
    );
    assert_eq!(
        b.decide_spawn(&spawn("planner", "dance", 0))
            .decision
            .verdict,
        Verdict::Deny,
        "deny by default"
    );
    let mut r = spawn("planner", "publish", 0);
    r.human_authorized = true;
    assert_eq!(b.decide_spawn(&r).decision.verdict, Verdict::Allow);
    // 50% of the remaining 8000 tokens is 4000.
    let mut r = spawn("planner", "verify", 0);
    r.child_budget.insert("tokens".to_owned(), 4_001);
    let d = b.decide_spawn(&r);
    assert_eq!(
        (d.decision.verdict, &*d.decision.rule_id),
        (Verdict::Deny, "recursion.budget.child_max_share_percent")
    );
    assert_eq!(d.max_child_budget.get("tokens"), Some(&4_000));
    // Past 70%: finalize or escalate, not recurse.
    let mut r = spawn("planner", "verify", 0);
    r.parent_budget.insert(
        "tokens".to_owned(),
        Meter {
            limit: 10_000,
            used: 7_000,
        },
    );
    r.child_budget.clear();
    assert_eq!(
        &*b.decide_spawn(&r).decision.rule_id,
        "recursion.budget.finalize_or_escalate_at_percent"
    );
    let usage = BTreeMap::from([("tool_calls".to_owned(), Meter { limit: 10, used: 7 })]);
    assert_eq!(b.decide_budget(&usage).verdict, Verdict::NeedsApproval);
    let mut r = spawn("planner", "verify", 0);
    r.children_spawned = 6;
    assert_eq!(b.decide_spawn(&r).decision.verdict, Verdict::Deny);
    let mut r = spawn("planner", "verify", 0);
    r.consecutive_no_delta = 2;
    assert!(
        b.decide_spawn(&r)
            .decision
            .reason
            .contains("no new information")
    );
    // Named policy: publishing is never recursive (a publisher, itself a child of the
    // orchestrator at depth 1, may spawn only its verify child, at depth 2), the verifier
    // may go deeper.
    assert_eq!(
        b.decide_spawn(&spawn("publisher", "verify", 1))
            .decision
            .verdict,
        Verdict::Allow
    );
    assert_eq!(
        b.decide_spawn(&spawn("publisher", "verify", 2))
            .decision
            .verdict,
        Verdict::Deny
    );
    assert_eq!(
        b.decide_spawn(&spawn("publisher", "publish", 1))
            .decision
            .verdict,
        Verdict::Deny
    );
    assert_eq!(
        b.decide_spawn(&spawn("verifier", "verify", 2))
            .decision
            .verdict,
        Verdict::Allow
    );
}

#[test]
fn hard_max_depth_of_4_cannot_be_configured_away() {
    for depth in [5, 40] {
        let src = format!(
            "bundle = {{ id = \"t\" }}\nagents = [{{ id = \"a\" }}]\n\n[recursion.default]\nmax_depth = {depth}\n"
        );
        let err = PolicyBundle::from_toml_str(&src, "deep.toml").expect_err("must be rejected");
        let d = &err.diagnostics()[0];
        assert_eq!(
            (d.code, d.line, d.column),
            (DiagnosticCode::HardMaximumExceeded, 5, 13),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("deep.toml:5:13: hard maximum exceeded"),
            "{err}"
        );
    }
    // Not in a named policy either, and not in JSON.
    let json_src = r#"{"bundle": {"id": "t"}, "agents": [{"id": "a"}],
  "recursion": {"policies": [{"id": "p", "agents": ["a"], "max_depth": 7}]}}"#;
    let err = PolicyBundle::from_json_str(json_src, "deep.json").expect_err("must be rejected");
    let d = &err.diagnostics()[0];
    assert_eq!(
        (d.code, d.line, d.column),
        (DiagnosticCode::HardMaximumExceeded, 2, 72),
        "{err}"
    );
    // The bundle cannot name a hard maximum of its own: there is no such field.
    let src = "bundle = { id = \"t\" }\n[recursion.default]\nhard_max_depth = 10\n";
    assert!(matches!(
        PolicyBundle::from_toml_str(src, "x.toml"),
        Err(BundleError::Parse(_))
    ));
    // At the maximum, depth 4 is reachable and depth 5 is not.
    let src = "bundle = { id = \"t\" }\nagents = [{ id = \"a\" }]\n[recursion.default]\nmax_depth = 4\nallowed_child_types = [\"verify\"]\n";
    let b = PolicyBundle::from_toml_str(src, "x.toml").expect("valid");
    let mut r = spawn("a", "verify", 3);
    r.child_budget.clear();
    assert_eq!(b.decide_spawn(&r).decision.verdict, Verdict::Allow);
    r.parent_depth = 4;
    assert_eq!(b.decide_spawn(&r).decision.verdict, Verdict::Deny);
}

#[test]
fn domains_have_a_single_writer() {
    let b = bundle("social");
    assert_eq!(
        b.decide_domain_write("planner", "plan_graph", None).verdict,
        Verdict::Allow
    );
    assert_eq!(
        b.decide_domain_write("creator", "plan_graph", None).verdict,
        Verdict::Deny
    );
    assert_eq!(
        b.decide_domain_write("engagement", "conversation_summaries", None)
            .verdict,
        Verdict::Allow
    );
    let d = b.decide_domain_write("verifier", "conversation_summaries", Some("engagement"));
    assert_eq!(
        (d.verdict, &*d.rule_id),
        (Verdict::Deny, "single_owner_write")
    );
    assert_eq!(
        b.decide_domain_write("planner", "engagement_events", None)
            .verdict,
        Verdict::Deny
    );
    assert_eq!(
        b.decide_domain_read("planner", "engagement_events").verdict,
        Verdict::Allow
    );
    assert_eq!(
        b.decide_domain_read("creator", "engagement_events").verdict,
        Verdict::Deny
    );
}

#[test]
fn side_effects_need_policy_key_dry_run_approval_and_no_kill_switch() {
    let b = bundle("social");
    let base = SideEffectRequest {
        agent: "publisher".to_owned(),
        kind: "publish".to_owned(),
        lane: "api".to_owned(),
        idempotency_key: Some("post-1".to_owned()),
        dry_run_passed: true,
        human_approved: false,
        sandbox_passed: false,
        critiqued: false,
        attempt: 1,
        engaged_kill_switches: Vec::new(),
    };
    assert_eq!(b.decide_side_effect(&base).verdict, Verdict::Allow);
    let with = |f: &dyn Fn(&mut SideEffectRequest)| {
        let mut r = base.clone();
        f(&mut r);
        b.decide_side_effect(&r)
    };
    assert_eq!(
        &*with(&|r| r.engaged_kill_switches = vec!["api".into()]).rule_id,
        "kill_switch.api"
    );
    assert_eq!(
        &*with(&|r| r.engaged_kill_switches = vec!["global".into()]).rule_id,
        "kill_switch.global"
    );
    assert_eq!(
        with(&|r| r.engaged_kill_switches = vec!["browser".into()]).verdict,
        Verdict::Allow
    );
    assert_eq!(with(&|r| r.idempotency_key = None).verdict, Verdict::Deny);
    assert_eq!(with(&|r| r.dry_run_passed = false).verdict, Verdict::Deny);
    assert_eq!(
        with(&|r| r.attempt = 2).verdict,
        Verdict::NeedsApproval,
        "one send per key unless a human overrides"
    );
    assert_eq!(
        with(&|r| r.lane = "browser".into()).verdict,
        Verdict::NeedsApproval
    );
    assert_eq!(
        with(&|r| r.agent = "orchestrator".into()).verdict,
        Verdict::Deny,
        "orchestrator cannot publish"
    );
    assert_eq!(
        &*with(&|r| r.kind = "follow".into()).rule_id,
        "deny_by_default"
    );
}

// ---- loading and errors ----

#[test]
fn semantic_errors_name_file_line_column_and_problem() {
    let src = r#"{
  "bundle": {"id": "t"},
  "agents": [{"id": "a"}, {"id": "a"}],
  "interactions": {
    "flow_order": ["a"],
    "allowed": [{"from": "a", "to": "ghost"}]
  }
}"#;
    let err = PolicyBundle::from_json_str(src, "b.json").expect_err("invalid");
    let ds = err.diagnostics();
    let got: Vec<_> = ds.iter().map(|d| (d.line, d.column, d.code)).collect();
    assert_eq!(
        got,
        [
            (3, 34, DiagnosticCode::Duplicate),
            (6, 37, DiagnosticCode::UnknownReference)
        ],
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("b.json:6:37: unknown reference: unknown agent `ghost`"),
        "{err}"
    );
}

#[test]
fn allowed_edge_that_the_flow_order_forbids_is_rejected() {
    let src = "bundle = { id = \"t\" }\nagents = [{ id = \"a\" }, { id = \"b\" }, { id = \"c\" }]\n[interactions]\nflow_order = [\"a\", \"b\", \"c\"]\nallowed = [{ from = \"a\", to = \"c\" }]\n";
    let err = PolicyBundle::from_toml_str(src, "f.toml").expect_err("skip");
    assert_eq!(err.diagnostics()[0].code, DiagnosticCode::FlowForbidsEdge);
    assert_eq!(err.diagnostics()[0].line, 5);
    let src = src.replace("allowed = [{ from = \"a\", to = \"c\" }]", "allowed = [{ from = \"a\", to = \"b\" }]\nforbidden = [{ from = \"*\", to = \"b\", reason = \"no\" }]");
    assert_eq!(
        PolicyBundle::from_toml_str(&src, "f.toml")
            .expect_err("contradiction")
            .diagnostics()[0]
            .code,
        DiagnosticCode::Contradiction
    );
}

#[test]
fn toml_and_json_spellings_of_a_bundle_share_one_hash() {
    let src = std::fs::read_to_string(example("claims")).expect("read");
    let toml_bundle = PolicyBundle::from_toml_str(&src, "claims.toml").expect("valid");
    let value: Value = toml::from_str(&src).expect("toml");
    let json_bundle = PolicyBundle::from_json_str(
        &serde_json::to_string_pretty(&value).expect("json"),
        "claims.json",
    )
    .expect("valid");
    assert_eq!(toml_bundle.hash(), json_bundle.hash());
    // A semantic change changes the hash.
    let changed = src.replace("max_tokens = 500", "max_tokens = 501");
    assert_ne!(
        PolicyBundle::from_toml_str(&changed, "c.toml")
            .expect("valid")
            .hash(),
        toml_bundle.hash()
    );
}

#[test]
fn diff_reports_pairs_and_rules() {
    let old = bundle("geo");
    let src = std::fs::read_to_string(example("geo")).expect("read");
    let new_src = src.replace("[[interactions.forbidden]]\nfrom = \"strategy\"\nto = \"observation\"\nreason = \"Reverse flow not allowed\"\n", "");
    let new = PolicyBundle::from_toml_str(&new_src, "new.toml").expect("valid");
    let d = docket_policies::diff(&old, &new);
    assert!(
        d.rules.iter().any(
            |r| r.section == "interactions.forbidden" && r.id == "forbid:strategy->observation"
        ),
        "{:?}",
        d.rules
    );
    let pair = d
        .pairs
        .iter()
        .find(|p| p.from == "strategy" && p.to == "observation" && p.input == InputKind::Decision)
        .expect("pair changed");
    // Still denied, now by the derived reverse-flow rule.
    assert_eq!(
        (pair.old.verdict, pair.new.verdict),
        (Verdict::Deny, Verdict::Deny)
    );
    assert_eq!(pair.new.rule_id, "flow_order.reverse");
    assert!(docket_policies::diff(&old, &old).is_empty());
}

// ---- properties ----

mod properties {
    use docket_policies::select_fields as select;
    use docket_policies::{InputKind, PolicyBundle};
    use docket_tests::example;
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    const KEYS: [&str; 5] = ["a", "b", "c", "d", "e"];

    fn payload() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<i64>().prop_map(Value::from),
            "[a-z ]{0,12}".prop_map(Value::from),
            Just(Value::Null)
        ];
        leaf.prop_recursive(3, 40, 5, |inner| {
            prop_oneof![
                prop::collection::btree_map(
                    prop::sample::select(KEYS.to_vec()),
                    inner.clone(),
                    0..5
                )
                .prop_map(|m| Value::Object(
                    m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                )),
                prop::collection::vec(inner, 0..3).prop_map(Value::Array),
            ]
        })
    }

    fn path() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![4 => prop::sample::select(KEYS.to_vec()), 1 => Just("*")],
            1..4,
        )
        .prop_map(|s| s.join("."))
    }

    fn paths() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec(path(), 0..4)
    }

    fn mode() -> impl Strategy<Value = Option<&'static str>> {
        prop::option::of(prop::sample::select(vec!["full", "scoped", "minimal"]))
    }

    /// A rule body (mode, allow-list, block-list, translation) that validation accepts.
    fn rule_body() -> impl Strategy<Value = Map<String, Value>> {
        (
            mode(),
            prop::option::of(paths()),
            paths(),
            prop::option::of((any::<bool>(), paths())),
        )
            .prop_map(|(mode, allowed, blocked, tr)| {
                let mut m = Map::new();
                if let Some(mode) = mode {
                    m.insert("handoff_mode".into(), json!(mode));
                }
                if let Some(allowed) = allowed.filter(|_| mode.is_none() || mode == Some("scoped"))
                {
                    let allowed: Vec<&String> =
                        allowed.iter().filter(|p| !blocked.contains(p)).collect();
                    m.insert("allowed_context_fields".into(), json!(allowed));
                }
                m.insert("blocked_context_fields".into(), json!(blocked));
                if let Some((recast, extract)) = tr {
                    m.insert(
                        "conversation_translation".into(),
                        json!({"recast_agent_outputs": recast, "extract_fields": extract}),
                    );
                }
                m
            })
    }

    fn sample_bundle() -> impl Strategy<Value = Value> {
        let rules = prop::collection::vec(
            (
                prop::sample::select(vec![("x", "y"), ("x", "*"), ("*", "y"), ("*", "*")]),
                rule_body(),
            ),
            0..4,
        );
        (rules, rule_body(), mode(), paths()).prop_map(
            |(rules, receiver, default_mode, system_blocked)| {
                let mut seen = std::collections::BTreeSet::new();
                let rules: Vec<Value> = rules
                    .into_iter()
                    .filter(|(pair, _)| seen.insert(*pair))
                    .enumerate()
                    .map(|(i, ((from, to), mut body))| {
                        body.insert("id".into(), json!(format!("r{i}")));
                        body.insert("from_agent_id".into(), json!(from));
                        body.insert("to_agent_id".into(), json!(to));
                        Value::Object(body)
                    })
                    .collect();
                json!({
                    "bundle": {"id": "prop"},
                    "agents": [{"id": "x"}, {"id": "y", "context_requirements": receiver}],
                    "interactions": {"allowed": [{"from": "x", "to": "y"}]},
                    "multi_agent_handoffs": {
                        "default_handoff_mode": default_mode.unwrap_or("scoped"),
                        "blocked_context_fields": system_blocked,
                        "agent_handoff_rules": rules,
                    }
                })
            },
        )
    }

    /// Every blocked path that applies to x → y, as docs/governance.md#flow-order-skip-reverse-circular defines them.
    fn applicable_blocked(b: &Value) -> Vec<String> {
        let strings = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut out = strings(b.pointer("/multi_agent_handoffs/blocked_context_fields"));
        out.extend(strings(
            b.pointer("/agents/1/context_requirements/blocked_context_fields"),
        ));
        for r in b
            .pointer("/multi_agent_handoffs/agent_handoff_rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.extend(strings(r.get("blocked_context_fields")));
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn a_blocked_field_never_appears_in_a_scoped_context(spec in sample_bundle(), p in payload()) {
            let b = PolicyBundle::from_json_str(&spec.to_string(), "prop.json").map_err(|e| TestCaseError::fail(e.to_string()))?;
            let s = b.scope_context("x", "y", InputKind::Decision, &p);
            let ctx = if s.context.get("role").is_some() { s.context.get("content").cloned().unwrap_or(Value::Null) } else { s.context.clone() };
            for blocked in applicable_blocked(&spec) {
                prop_assert_eq!(select(&ctx, &[blocked.as_str()]), json!({}), "blocked `{}` leaked: {}", blocked, ctx);
                if !blocked.contains('*') {
                    let leaked = s.audit.context_after_scoping.fields_included.iter().any(|f| *f == blocked || f.starts_with(&format!("{blocked}.")));
                    prop_assert!(!leaked, "audit lists blocked `{}` as included", blocked);
                }
            }
        }
    }

    // -- same bundle, any spelling --

    /// Lists whose order the seeds give no meaning to (paths by key, indices skipped).
    const ORDER_FREE: &[&str] = &[
        "agents",
        "output_types",
        "domains",
        "deny_patterns",
        "review_patterns",
        "responsibility_locks",
        "side_effects",
        "interactions.allowed",
        "interactions.context",
        "interactions.forbidden",
        "interactions.context.permitted_uses",
        "multi_agent_handoffs.agent_handoff_rules",
        "multi_agent_handoffs.blocked_context_fields",
        "multi_agent_handoffs.minimal_context_fields",
        "multi_agent_handoffs.agent_handoff_rules.allowed_context_fields",
        "multi_agent_handoffs.agent_handoff_rules.blocked_context_fields",
        "multi_agent_handoffs.agent_handoff_rules.conversation_translation.extract_fields",
        "agents.capabilities",
        "agents.allowed_tools",
        "agents.must_not_tools",
        "agents.write_scopes",
        "agents.read_scopes",
        "agents.side_effects",
        "agents.context_requirements.allowed_context_fields",
        "agents.context_requirements.blocked_context_fields",
        "agents.context_requirements.requires_prior_outputs",
        "recursion.policies",
        "recursion.policies.agents",
        "recursion.policies.allowed_child_types",
        "recursion.policies.forbidden_child_types",
        "recursion.default.allowed_child_types",
        "recursion.default.forbidden_child_types",
        "escalation.ladder",
        "escalation.non_retryable_errors",
        "escalation.stop_on_errors",
        "responsibility_locks.requesters",
        "responsibility_locks.forbidden_requesters",
    ];

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn shuffle_lists(v: &mut Value, path: &str, rng: &mut Rng) {
        match v {
            Value::Array(items) => {
                if ORDER_FREE.contains(&path) {
                    for i in (1..items.len()).rev() {
                        items.swap(i, rng.below(i + 1));
                    }
                }
                for item in items {
                    shuffle_lists(item, path, rng);
                }
            }
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    if k == "schema" || k == "input_schema" {
                        continue;
                    }
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    shuffle_lists(child, &p, rng);
                }
            }
            _ => {}
        }
    }

    /// JSON text with object keys in a random order and random whitespace.
    fn emit(v: &Value, rng: &mut Rng, out: &mut String) {
        let ws = |rng: &mut Rng| [" ", "", "\n  ", "\t"][rng.below(4)];
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                for i in (1..keys.len()).rev() {
                    keys.swap(i, rng.below(i + 1));
                }
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(ws(rng));
                    out.push_str(&Value::from(k.as_str()).to_string());
                    out.push(':');
                    out.push_str(ws(rng));
                    emit(&m[*k], rng, out);
                }
                out.push_str(ws(rng));
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(ws(rng));
                    emit(item, rng, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }

    const EXAMPLES: [&str; 5] = ["geo", "claims", "software-team", "consulting", "social"];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn one_hash_and_the_same_decisions_whatever_the_spelling_or_order(which in 0..EXAMPLES.len(), seed in 1..u64::MAX) {
            let name = EXAMPLES[which];
            let src = std::fs::read_to_string(example(name)).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let original = PolicyBundle::from_toml_str(&src, name).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mut value: Value = toml::from_str(&src).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mut rng = Rng(seed);
            shuffle_lists(&mut value, "", &mut rng);
            let mut text = String::new();
            emit(&value, &mut rng, &mut text);
            let from_json = PolicyBundle::from_json_str(&text, "shuffled.json").map_err(|e| TestCaseError::fail(e.to_string()))?;
            let toml_text = toml::to_string(&value).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let from_toml = PolicyBundle::from_toml_str(&toml_text, "shuffled.toml").map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(original.hash(), from_json.hash());
            prop_assert_eq!(original.hash(), from_toml.hash());
            // Decisions do not depend on the order rules were declared in.
            let agents: Vec<String> = original.agent_ids().map(str::to_owned).collect();
            let payload = json!({"fraud_score": 1, "risk_level": "low", "internal_notes": "x", "scores": {"a": 1}, "task_id": 3, "summary": "s", "trigger": "t"});
            for from in &agents {
                for to in &agents {
                    for input in [InputKind::Decision, InputKind::Context] {
                        prop_assert_eq!(original.decide_handoff(from, to, input), from_json.decide_handoff(from, to, input));
                    }
                    prop_assert_eq!(
                        original.scope_context(from, to, InputKind::Decision, &payload),
                        from_json.scope_context(from, to, InputKind::Decision, &payload)
                    );
                }
            }
        }
    }
}

#[test]
fn payloads_are_checked_against_the_edge_output_type() {
    let b = bundle("geo");
    let ok = b.check_output(
        "strategy",
        "governance",
        InputKind::Decision,
        &json!({"recommendations": []}),
    );
    assert_eq!(
        (ok.verdict, &*ok.rule_id),
        (Verdict::Allow, "output_types.recommendations@1")
    );
    let bad = b.check_output(
        "strategy",
        "governance",
        InputKind::Decision,
        &json!({"recommendations": [], "new_questions": ["q"]}),
    );
    assert_eq!(bad.verdict, Verdict::Deny);
    assert!(bad.reason.contains("schema mismatch"), "{}", bad.reason);
    assert_eq!(
        b.check_output("strategy", "observation", InputKind::Decision, &json!({}))
            .verdict,
        Verdict::Deny
    );
}

#[test]
fn circuit_breaker_opens_after_the_threshold_and_probes_later() {
    let b = bundle("consulting");
    assert_eq!(b.decide_circuit("ANL", 4, 0).verdict, Verdict::Allow);
    assert_eq!(b.decide_circuit("ANL", 5, 1_000).verdict, Verdict::Deny);
    assert_eq!(b.decide_circuit("ANL", 5, 60_000).verdict, Verdict::Allow);
}

mod robustness {
    use docket_policies::PolicyBundle;
    use docket_tests::example;
    use proptest::prelude::*;
    use serde_json::Value;

    const EXAMPLES: [&str; 5] = ["geo", "claims", "software-team", "consulting", "social"];

    /// `text` with `len` bytes from `start` replaced by `junk` (kept on char boundaries).
    fn splice(text: &str, start: usize, len: usize, junk: &str) -> String {
        let mut start = start.min(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (start + len).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}{junk}{}", &text[..start], &text[end..])
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

        /// Damaged bundles get located errors, never a panic.
        #[test]
        fn damaged_bundles_get_located_errors_not_panics(which in 0..EXAMPLES.len(), cut in any::<prop::sample::Index>(), len in 1usize..40, junk in "[\\[\\]{}=\"a-z0-9 \n]{0,8}") {
            let src = std::fs::read_to_string(example(EXAMPLES[which])).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let damaged = splice(&src, cut.index(src.len()), len, &junk);
            let as_json = serde_json::to_string(&toml::from_str::<Value>(&src).map_err(|e| TestCaseError::fail(e.to_string()))?)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let damaged_json = splice(&as_json, cut.index(as_json.len()), len, &junk);
            for (text, result) in [
                (&damaged, PolicyBundle::from_toml_str(&damaged, "d.toml")),
                (&damaged_json, PolicyBundle::from_json_str(&damaged_json, "d.json")),
            ] {
                if let Err(e) = result {
                    let max_line = text.lines().count() + 1;
                    for d in e.diagnostics() {
                        prop_assert!(d.line >= 1 && d.line <= max_line, "{} (of {} lines)", d, max_line);
                        prop_assert!(d.column >= 1);
                    }
                }
            }
        }
    }
}
