//! What-if over every kind of decision (docs/replay.md#what-if): on golden logs and on
//! canned runs recorded here by the decider, a bundle that changes one rule reports the
//! decision it changes (classed, with the rule before and after, and where), the
//! decision where the run would part, and what would not have happened after it, in
//! the run's causal order; the recorded bundle reports nothing.

use crate::canned::{Recorder, WORKER_BUNDLE, golden, golden_events, worker_run};
use docket_decider::{Action, DECIDER_VERSION, RunEvent};
use docket_policies::PolicyBundle;
use docket_replay::{ChangeKind, DecisionArea, Outcome, WhatIf, what_if};
use docket_tests::{docket_on, exit_code, stdout_text, workspace_root};
use serde_json::json;

fn recorded_source(log: &[RunEvent]) -> String {
    let Some(RunEvent::RunRequested(run)) = log.first() else {
        panic!("a run's log");
    };
    run.bundle_source.clone()
}

/// What-if of `log` under its recorded bundle's text with `from` replaced by `to`.
fn under(log: &[RunEvent], from: &str, to: &str) -> WhatIf {
    let source = recorded_source(log);
    let changed = source.replace(from, to);
    assert_ne!(changed, source, "the bundle has {from:?}");
    let bundle = PolicyBundle::from_toml_str(&changed, "new.toml").expect("compiles");
    what_if(log, &bundle, &changed, "new.toml").expect("re-decides")
}

fn seq_of(log: &[RunEvent], kind: &str) -> u64 {
    log.iter().position(|e| e.kind() == kind).expect(kind) as u64 + 1
}

fn kinds_not_happening(report: &WhatIf) -> Vec<&'static str> {
    report.would_not_happen.iter().map(|c| c.kind).collect()
}

#[tokio::test]
async fn the_recorded_bundle_changes_nothing_in_any_golden_log() {
    for version in docket_decider::OLDEST_DECIDER_VERSION..=DECIDER_VERSION {
        let root = workspace_root()
            .join("tests/golden")
            .join(format!("v{version}"));
        for shape in std::fs::read_dir(&root).expect("fixtures") {
            let shape = shape.expect("entry").file_name();
            let shape = shape.to_str().expect("utf-8");
            let log = golden_events(version, shape).await;
            let source = recorded_source(&log);
            let bundle = PolicyBundle::from_toml_str(&source, "same.toml").expect("compiles");
            let report = what_if(&log, &bundle, &source, "same.toml").expect("re-decides");
            assert!(report.unchanged(), "v{version}/{shape}: {report:?}");
        }
    }
}

#[tokio::test]
async fn an_effect_that_newly_needs_approval_is_reported_with_what_would_wait() {
    let log = golden_events(DECIDER_VERSION, "effect").await;
    let report = under(
        &log,
        "retry_cap = 1",
        "retry_cap = 1\nhuman_approval_required = true",
    );
    // The execution gate's decision: allowed, now waiting for a human.
    let gate = seq_of(&log, "effect.started") - 1;
    let first = &report.changes[0];
    assert_eq!(
        (first.seq, first.kind, first.area, first.before, first.after),
        (
            gate,
            ChangeKind::Stricter,
            DecisionArea::Effect,
            Some(Outcome::Allowed),
            Some(Outcome::NeedsApproval)
        ),
        "{report:#?}"
    );
    assert_eq!(first.rule_before, "publish-api");
    assert_eq!(first.rule_after, "publish-api");
    // The path parts where the effect would have started: it waits for a human instead.
    let parts = report.changes.last().expect("the parting decision");
    assert!(parts.parts_path);
    assert_eq!(parts.seq, seq_of(&log, "effect.started"));
    assert_eq!(parts.area, DecisionArea::Effect);
    assert!(parts.what.contains("waits for a human"), "{parts:?}");
    assert_eq!(report.changes.len(), 2, "{report:#?}");
    // Not executed, so not applied; the agent not called again with its result; no
    // completion.
    let not = kinds_not_happening(&report);
    for kind in [
        "effect.started",
        "effect.applied",
        "agent.call_scheduled",
        "handoff.allowed",
        "run.completed",
    ] {
        assert!(not.contains(&kind), "{kind} missing from {not:?}");
    }
    // In the log's order, each after the parting point.
    let seqs: Vec<u64> = report.would_not_happen.iter().map(|c| c.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]) && seqs[0] == parts.seq);
}

#[tokio::test]
async fn an_effect_refused_or_without_its_dry_run_is_classed() {
    let log = golden_events(DECIDER_VERSION, "effect").await;
    // The publisher may no longer publish: refused at admission.
    let report = under(&log, "side_effects = [\"publish\"]", "");
    let first = &report.changes[0];
    assert_eq!(first.seq, seq_of(&log, "effect.admitted") - 1);
    assert_eq!(
        (first.kind, first.area, first.after),
        (
            ChangeKind::Stricter,
            DecisionArea::Effect,
            Some(Outcome::Denied)
        )
    );
    assert_eq!(first.rule_before, "publish-api");
    let parts = report.changes.last().expect("parts");
    assert!(
        parts.parts_path && parts.what.contains("refused"),
        "{parts:?}"
    );
    assert!(kinds_not_happening(&report).contains(&"effect.applied"));

    // No dry run required: admitted straight to execution, looser; the recorded dry run
    // would not have come.
    let report = under(&log, "dry_run_required = true", "dry_run_required = false");
    let first = &report.changes[0];
    assert_eq!(
        (first.seq, first.kind, first.before, first.after),
        (
            seq_of(&log, "effect.admitted"),
            ChangeKind::Looser,
            Some(Outcome::DryRunFirst),
            Some(Outcome::Allowed)
        ),
        "{report:#?}"
    );
    let path = report.path_change.as_ref().expect("the path changes");
    assert_eq!(path.seq, seq_of(&log, "effect.dry_run"));
    assert!(path.why.contains("would not have come"), "{path:?}");
}

#[tokio::test]
async fn a_forbidden_spawn_and_a_capability_no_longer_offered_are_classed() {
    let log = golden_events(DECIDER_VERSION, "episode").await;
    let report = under(
        &log,
        "allowed_child_types = [\"retrieve\"]",
        "allowed_child_types = [\"verify\"]",
    );
    let parts = report.changes.last().expect("parts");
    assert_eq!(
        (parts.seq, parts.kind, parts.area, parts.parts_path),
        (
            seq_of(&log, "episode.started"),
            ChangeKind::Stricter,
            DecisionArea::Spawn,
            true
        ),
        "{report:#?}"
    );
    assert_eq!(parts.rule_before, "recursion.default");
    assert_eq!(parts.rule_after, "recursion.default");
    // The child never runs, and the run ends there: its completion would not happen.
    let not = kinds_not_happening(&report);
    assert!(
        not.contains(&"run.completed") && not.contains(&"agent.call_scheduled"),
        "{not:?}"
    );

    // A recursion limit lowered: no episode besides the root.
    let report = under(
        &log,
        "allowed_child_types = [\"retrieve\"]",
        "allowed_child_types = [\"retrieve\"]\nmax_total_episodes = 1",
    );
    let parts = report.changes.last().expect("parts");
    assert_eq!(
        (parts.seq, parts.kind, parts.area),
        (
            seq_of(&log, "episode.started"),
            ChangeKind::Stricter,
            DecisionArea::Limit
        ),
        "{report:#?}"
    );
    assert!(parts.what.contains("spawn"), "{parts:?}");

    let log = golden_events(DECIDER_VERSION, "fallback").await;
    let report = under(&log, "[[agents.capabilities]]\ncode = \"ANL_NPV\"\n", "");
    let first = &report.changes[0];
    assert_eq!(
        (first.seq, first.kind, first.area, first.after),
        (
            seq_of(&log, "policy.decided"),
            ChangeKind::Stricter,
            DecisionArea::Capability,
            Some(Outcome::Denied)
        ),
        "{report:#?}"
    );
    assert_eq!(first.rule_before, "agents.anl.capabilities.ANL_NPV");
    let path = report.path_change.as_ref().expect("parts");
    assert!(path.decided_kinds.contains(&"run.blocked"), "{path:?}");
}

#[tokio::test]
async fn a_shorter_retry_ladder_is_a_limit_newly_hit() {
    let log = golden_events(DECIDER_VERSION, "fallback").await;
    // The recorded ladder is the default one (retry, escalate, block); a bundle that
    // escalates at the first failure.
    let source = recorded_source(&log);
    let changed = format!(
        "{source}\n[escalation]\nladder = [{{ id = \"escalate-now\", after_failures = 1, action = \"escalate\" }}, {{ id = \"block\", after_failures = 2, action = \"block\" }}]\n"
    );
    let bundle = PolicyBundle::from_toml_str(&changed, "new.toml").expect("compiles");
    let report = what_if(&log, &bundle, &changed, "new.toml").expect("re-decides");
    let first = &report.changes[0];
    let failure = log
        .iter()
        .position(|e| {
            matches!(e, RunEvent::PolicyDecided { decision, .. } if decision.rule_id.as_ref() == "retry")
        })
        .expect("the retry") as u64
        + 1;
    assert_eq!(
        (first.seq, first.kind, first.area),
        (failure, ChangeKind::Stricter, DecisionArea::Limit),
        "{report:#?}"
    );
    assert_eq!(
        (first.rule_before.as_str(), first.rule_after.as_str()),
        ("retry", "escalate-now")
    );
    // The retried call would not have been made.
    assert!(
        report
            .would_not_happen
            .iter()
            .any(|c| c.kind == "agent.call_scheduled" && c.seq == failure + 1),
        "{report:#?}"
    );
}

// Canned runs of one worker asking for a tool (canned/mod.rs).

fn compile(source: &str) -> PolicyBundle {
    PolicyBundle::from_toml_str(source, "new.toml").expect("compiles")
}

#[test]
fn a_denied_tool_call_is_classed_and_its_result_would_not_have_come() {
    let log = worker_run(WORKER_BUNDLE, 10);
    let source = format!(
        "deny_patterns = [{{ id = \"no-probe\", pattern = \"probe\", reason = \"probing is over\" }}]\n{WORKER_BUNDLE}"
    );
    let report = what_if(&log, &compile(&source), &source, "new.toml").expect("re-decides");
    let first = &report.changes[0];
    assert_eq!(
        (first.kind, first.area, first.before, first.after),
        (
            ChangeKind::Stricter,
            DecisionArea::ToolCall,
            Some(Outcome::Allowed),
            Some(Outcome::Denied)
        ),
        "{report:#?}"
    );
    assert_eq!(first.rule_after, "no-probe");
    assert_eq!(first.seq, seq_of(&log, "tool.call_scheduled") - 1);
    let parts = report.changes.last().expect("parts");
    assert!(parts.parts_path && parts.seq == seq_of(&log, "tool.call_scheduled"));
    // The tool's result never comes back: what the worker did with it, and the
    // completion, would not have happened as recorded.
    let not = kinds_not_happening(&report);
    assert!(
        not.contains(&"tool.call_scheduled") && not.contains(&"run.completed"),
        "{not:?}"
    );
    // The same bundle: nothing.
    let same =
        what_if(&log, &compile(WORKER_BUNDLE), WORKER_BUNDLE, "same.toml").expect("re-decides");
    assert!(same.unchanged(), "{same:?}");
}

#[test]
fn a_lowered_budget_threshold_reports_the_limit_hit_and_where() {
    // 300 of the root's 1000 tokens used before the tool call: under the default 70%
    // threshold, past a 20% one.
    let log = worker_run(WORKER_BUNDLE, 300);
    let source =
        format!("{WORKER_BUNDLE}[recursion.budget]\nfinalize_or_escalate_at_percent = 20\n");
    let report = what_if(&log, &compile(&source), &source, "new.toml").expect("re-decides");
    let first = &report.changes[0];
    assert_eq!(
        (first.seq, first.kind, first.area, first.after),
        (
            seq_of(&log, "tool.call_scheduled") - 1,
            ChangeKind::Stricter,
            DecisionArea::Limit,
            Some(Outcome::Denied)
        ),
        "{report:#?}"
    );
    assert_eq!(
        first.rule_after,
        "recursion.budget.finalize_or_escalate_at_percent"
    );
    assert!(
        first.what.contains("ep-1") && first.what.contains("300"),
        "{first:?}"
    );
}

#[test]
fn a_budget_stop_newly_listed_ends_the_run_where_it_is_crossed() {
    // Recorded without the budget_exhausted stop condition: past 1000 tokens, the worker's
    // tool call was refused by the budget gate and the run went on to complete.
    let without = WORKER_BUNDLE.replace(
        "[multi_agent_handoffs]",
        "[recursion.default]\nstop_conditions = [\"depth_exceeded\", \"no_new_information\", \"failure_repeats\", \"policy_blocks\", \"success_achieved\"]\n[multi_agent_handoffs]",
    );
    let log = worker_run(&without, 1200);
    let report =
        what_if(&log, &compile(WORKER_BUNDLE), WORKER_BUNDLE, "new.toml").expect("re-decides");
    let parts = report.changes.last().expect("parts");
    let answer = log
        .iter()
        .position(|e| e.kind() == "agent.responded")
        .expect("the answer") as u64
        + 1;
    assert_eq!(
        (parts.seq, parts.kind, parts.area, parts.parts_path),
        (answer + 1, ChangeKind::Stricter, DecisionArea::Limit, true),
        "{report:#?}"
    );
    assert_eq!(parts.rule_after, "stop_conditions.budget_exhausted");
    assert!(
        parts.what.contains("budget_exhausted") && parts.what.contains("1200"),
        "{parts:?}"
    );
    // Everything after it: the run ends there.
    let last = report.would_not_happen.last().expect("the end");
    assert_eq!(last.kind, "run.completed");
    assert_eq!(last.seq, log.len() as u64);
}

#[test]
fn docket_replay_all_summarises_what_if_per_kind_of_decision_and_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    golden(dir.path(), DECIDER_VERSION, "effect");
    let bundle = dir.path().join("approval.toml");
    let log = docket_on(dir.path(), &["events", "golden-effect", "--json"]);
    let first: serde_json::Value =
        serde_json::from_str(stdout_text(&log).lines().next().expect("run.requested"))
            .expect("JSON");
    let source = first["payload"]["bundle_source"].as_str().expect("text");
    std::fs::write(
        &bundle,
        source.replace(
            "retry_cap = 1",
            "retry_cap = 1\nhuman_approval_required = true",
        ),
    )
    .expect("write bundle");
    let bundle = bundle.to_str().expect("utf-8");
    let out = docket_on(
        dir.path(),
        &["replay", "golden-effect", "--policies", bundle],
    );
    let text = stdout_text(&out);
    assert_eq!(exit_code(&out), 0, "{text}");
    assert!(
        text.contains("stricter  effect golden-effect/effect-1: allowed → needs approval"),
        "{text}"
    );
    assert!(
        text.contains("instead: effect golden-effect/effect-1 waits for a human"),
        "{text}"
    );
    // Each area said once, before what it decided (`effect effect ...` before).
    assert_eq!(crate::event_words::said_twice(&text), None, "{text}");
    assert!(text.contains("    event 21  run completed"), "{text}");
    assert!(text.contains("run completed"), "{text}");
    let out = docket_on(dir.path(), &["replay", "--all", "--policies", bundle]);
    let text = stdout_text(&out);
    assert!(
        text.contains("1 runs re-decided under") && text.contains("1 would change"),
        "{text}"
    );
    assert!(
        text.contains("  effect: 2 stricter, 0 looser, 0 changed in 1 runs"),
        "{text}"
    );
    let out = docket_on(
        dir.path(),
        &["replay", "--all", "--policies", bundle, "--json"],
    );
    let lines: Vec<serde_json::Value> = stdout_text(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(lines.len(), 2, "one report and the summary");
    assert_eq!(lines[0]["changes"][0]["area"], "effect");
    assert_eq!(lines[0]["changes"][0]["after"], "needs_approval");
    assert_eq!(lines[1]["summary"]["would_change"], 1);
    assert_eq!(lines[1]["summary"]["per_area"]["effect"]["stricter"], 2);
}

const FAN_WORKFLOW: &str = "name = \"fan\"\npolicy = \"b.toml\"\nentry = \"hub\"\n\
    [agents.hub]\nin_process = true\n[agents.left]\nin_process = true\n\
    [agents.right]\nin_process = true\n[agents.sink]\nin_process = true\n\
    [tools.probe]\nin_process = true\nread_only = true\n";

const FAN_BUNDLE: &str = "bundle = { id = \"fan\" }\n\
    agents = [{ id = \"external\" }, { id = \"hub\" }, { id = \"left\", allowed_tools = [\"probe\"] }, { id = \"right\" }, { id = \"sink\" }]\n\
    [interactions]\nallowed = [\n\
      { from = \"external\", to = \"hub\" }, { from = \"hub\", to = \"left\" }, { from = \"hub\", to = \"right\" },\n\
      { from = \"left\", to = \"sink\" }, { from = \"right\", to = \"sink\" }, { from = \"sink\", to = \"external\" },\n\
    ]\n[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\n";

#[test]
fn what_would_not_happen_follows_the_causal_order_not_the_log_order() {
    // The hub fans out to left and right; right hands its part to sink at once; left
    // asks for `probe` first, then hands its part on; sink finishes.
    let handoff = |to: &str, part: &str| Action::Handoff {
        to: to.into(),
        output_type: part.into(),
        payload: json!({"part": part}),
        task: None,
    };
    let mut run = Recorder::start(FAN_WORKFLOW, FAN_BUNDLE);
    run.respond_as("hub", vec![handoff("left", "job"), handoff("right", "job")]);
    run.respond_as("right", vec![handoff("sink", "right_part")]);
    let right_batch = (run
        .log
        .iter()
        .rposition(RunEvent::is_input)
        .expect("right's answer")..run.log.len())
        .map(|i| i as u64 + 1)
        .collect::<Vec<_>>();
    run.respond_as(
        "left",
        vec![Action::CallTool {
            name: "probe".into(),
            arguments: json!("x"),
        }],
    );
    run.tool_returns();
    run.respond_as("left", vec![handoff("sink", "left_part")]);
    run.respond_as(
        "sink",
        vec![Action::Finish {
            output: json!({"done": true}),
        }],
    );
    assert_eq!(run.state.status().as_str(), "completed", "{:#?}", run.log);
    let log = run.log;

    // Under a bundle that denies `probe`, left's tool call parts the run: its result,
    // what left did with it, sink's call and the completion would not have happened;
    // right's branch, recorded after the fan-out and independent of the tool, would have.
    let source = format!(
        "deny_patterns = [{{ id = \"no-probe\", pattern = \"probe\", reason = \"no\" }}]\n{FAN_BUNDLE}"
    );
    let report = what_if(&log, &compile(&source), &source, "new.toml").expect("re-decides");
    let parts = report.changes.last().expect("parts");
    assert_eq!(
        parts.seq,
        seq_of(&log, "tool.call_scheduled"),
        "{report:#?}"
    );
    let not: Vec<u64> = report.would_not_happen.iter().map(|c| c.seq).collect();
    assert!(
        right_batch.iter().all(|seq| !not.contains(seq)),
        "right's branch {right_batch:?} listed in {not:?}"
    );
    let parts_to_sink: Vec<&str> = report
        .would_not_happen
        .iter()
        .filter(|c| c.what.contains("_part)"))
        .map(|c| c.what.as_str())
        .collect();
    assert_eq!(
        parts_to_sink,
        ["handoff left → sink (left_part)"],
        "{report:#?}"
    );
    assert_eq!(
        report.would_not_happen.last().map(|c| c.kind),
        Some("run.completed")
    );
    assert!(
        report
            .would_not_happen
            .iter()
            .any(|c| c.what.starts_with("call to sink")),
        "{report:#?}"
    );
}

/// docs/replay.md#what-if, outside events: the worker waits for a `comment` that an
/// ingestion service sends; under a bundle that no longer lets that sender deliver it, the
/// event's decision is classed stricter and its delivery, the worker's call that followed
/// and the completion would not have happened.
#[test]
fn an_outside_event_a_bundle_refuses_would_not_have_reached_the_waiting_agent() {
    let signals =
        "[[signals]]\nname = \"comment\"\nsenders = [\"ingestion\"]\nagents = [\"worker\"]\n";
    let source = format!("{WORKER_BUNDLE}{signals}");
    let mut run = Recorder::worker(&source);
    run.respond(
        vec![Action::Wait {
            until: None,
            duration: None,
            event: Some("comment".into()),
            reason: "answer the first comment".into(),
        }],
        10,
    );
    run.record(docket_decider::Command::ReceiveSignal(
        docket_decider::SignalReceived {
            name: "comment".into(),
            payload: json!({"text": "love it"}),
            by: "ingestion".into(),
            idempotency_key: None,
            at_ms: 50,
        },
    ));
    run.respond(
        vec![Action::Finish {
            output: json!({"replied": true}),
        }],
        10,
    );
    let log = run.log.clone();
    assert_eq!(log.last().map(RunEvent::kind), Some("run.completed"));
    let report = under(
        &log,
        "senders = [\"ingestion\"]",
        "senders = [\"moderator\"]",
    );
    let first = &report.changes[0];
    assert_eq!(
        (first.kind, first.area, first.before, first.after),
        (
            ChangeKind::Stricter,
            DecisionArea::Signal,
            Some(Outcome::Allowed),
            Some(Outcome::Denied)
        ),
        "{report:#?}"
    );
    assert_eq!(first.seq, seq_of(&log, "signal.received") + 1);
    let not = kinds_not_happening(&report);
    for kind in ["signal.delivered", "agent.call_scheduled", "run.completed"] {
        assert!(
            not.contains(&kind),
            "{kind} would not have happened: {not:?}"
        );
    }
}
