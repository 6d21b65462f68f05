//! The consulting example (examples/consulting, seed 003's inter-agent contract) run
//! through the binary: intent routing, a capability request validated against its schema
//! (and one refused), the handoff context carried, a parallel fan-out whose conflicting
//! market figures are settled by confidence, a branch that times out with a partial
//! result, a clarifying question answered by a person, and a routing below the intent
//! threshold refused. Every run replays and exports.

use std::path::Path;
use std::sync::OnceLock;

use docket_tests::{
    docket_on, events_of_kind, example_agents_built, exit_code, replays_and_exports, run_events,
    stdout_text, workspace_root,
};
use serde_json::Value;

fn consulting_agents_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| example_agents_built("docket-example-consulting"));
}

fn run_consulting(data: &Path, input: &str, id: &str) -> i32 {
    run_workflow(data, "workflow.toml", input, id)
}

fn run_workflow(data: &Path, workflow: &str, input: &str, id: &str) -> i32 {
    consulting_agents_built();
    let example = workspace_root().join("examples/consulting");
    let out = docket_on(
        data,
        &[
            "run",
            example.join(workflow).to_str().unwrap(),
            "--input",
            example.join(input).to_str().unwrap(),
            "--run-id",
            id,
        ],
    );
    exit_code(&out)
}

fn output(events: &[Value]) -> &Value {
    let completed = events_of_kind(events, "run.completed");
    assert_eq!(completed.len(), 1, "the run completed");
    &completed[0]["payload"]["output"]
}

/// The business case's output, as the README's "What a run must output" states it.
fn assert_the_business_case(out: &Value) {
    assert_the_case_itself(out);
    assert_eq!(
        out["proofreading"],
        serde_json::json!({ "checked": true, "issues": 0 }),
        "{out}"
    );
}

/// The business case's answer, document and limitations, proofread or not.
fn assert_the_case_itself(out: &Value) {
    assert_eq!(
        out["answer"],
        "Your business case \"Market Entry Analysis: Germany\" is ready. The investment returns an NPV of 17206.82 at 0.12; the German market is 4200000000 a year (AUD's review of destatis-2025-market-report); channels assessed: 2.",
        "{out}"
    );
    let document = &out["document"];
    assert_eq!(document["npv"], 17206.82, "{out}");
    assert_eq!(document["discount_rate"], 0.12, "{out}");
    assert_eq!(document["market_size"], 4.2e9, "{out}");
    assert_eq!(
        document["market_source"], "AUD's review of destatis-2025-market-report",
        "{out}"
    );
    assert_eq!(
        document["channels"],
        serde_json::json!([
            { "channel": "direct online", "share_of_budget": 0.5 },
            { "channel": "trade fairs", "share_of_budget": 0.2 },
        ]),
        "{out}"
    );
    assert_eq!(
        out["limitations"],
        serde_json::json!([
            "Partner-reseller data did not arrive in time: that channel is not assessed"
        ]),
        "{out}"
    );
}

/// Whether `out` was answered without proofreading, for the reason starting `why`.
fn assert_not_proofread(out: &Value, why: &str) {
    assert_the_case_itself(out);
    assert_eq!(out["proofreading"]["checked"], false, "{out}");
    assert!(
        out["proofreading"]["why"]
            .as_str()
            .is_some_and(|w| w.starts_with(why)),
        "{out}"
    );
}

#[test]
fn a_business_case_is_routed_computed_fanned_out_and_assembled() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert_eq!(run_consulting(&data, "input.json", "case"), 0);
    let events = run_events(&data, "case");

    // The capability request CST -> ANL crossed with its declared inputs only, and ANL's
    // NPV is right: period 0 undiscounted (the seed's 24,156.72 is wrong).
    let capability = events_of_kind(&events, "handoff.allowed")
        .into_iter()
        .map(|e| &e["payload"])
        .find(|p| p["from"] == "CST" && p["to"] == "ANL")
        .expect("the capability request crossed");
    assert_eq!(capability["output_type"], "ANL_NPV");
    assert_eq!(capability["delivered"]["discount_rate"], 0.12);
    let out = output(&events);
    assert_the_business_case(out);

    // The handoff context: CST's request carries the user's original request and who
    // worked before it.
    let cst_request = events_of_kind(&events, "agent.call_scheduled")
        .into_iter()
        .map(|e| &e["payload"]["request"])
        .find(|r| r["target_agent"] == "CST")
        .expect("CST was called");
    let handoff = &cst_request["context"]["handoff"];
    assert_eq!(
        handoff["original_request"]["user_message"],
        "Help me build a business case for market entry into Germany"
    );
    assert_eq!(handoff["prior_agents"], serde_json::json!(["ORC"]));

    // The fan-out: ANL (MEDIUM) and AUD (HIGH) both estimate the market; the higher
    // confidence wins and the other is archived, not lost.
    let conflict = events_of_kind(&events, "output.conflict_detected");
    assert_eq!(conflict.len(), 1, "{conflict:?}");
    let archived = events_of_kind(&events, "output.archived");
    assert_eq!(archived.len(), 1);
    assert_eq!(archived[0]["payload"]["delivery"]["from"], "ANL");

    // CHA ran out of time and answered TIMEOUT with a partial result, which went on.
    let timeout = events_of_kind(&events, "agent.responded")
        .into_iter()
        .find(|e| e["payload"]["response"]["status"] == "TIMEOUT")
        .expect("CHA answered TIMEOUT");
    assert_eq!(
        timeout["payload"]["response"]["error_code"],
        "CHANNEL_SOURCE_TIMEOUT"
    );
    replays_and_exports(&data, "case");
}

#[test]
fn an_unclear_request_is_clarified_by_a_person() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert_eq!(run_consulting(&data, "unclear.json", "unclear"), 3, "waits");
    let out = docket_on(
        &data,
        &[
            "answer", "unclear", "ticket-1", "--by", "dana", "--choice", "1",
        ],
    );
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
    let events = run_events(&data, "unclear");
    let answer = events_of_kind(&events, "handoff.allowed")
        .into_iter()
        .map(|e| &e["payload"])
        .find(|p| p["from"] == "human" && p["output_type"] == "human_answer")
        .expect("the answer crossed the gate");
    assert_eq!(answer["delivered"]["choice"], "business case", "{answer}");
    assert_the_business_case(output(&events));
    replays_and_exports(&data, "unclear");
}

/// The intent decisions of a run, in the order recorded: (subject, verdict, rule, reason).
fn intent_decisions(events: &[Value]) -> Vec<(String, String, String, String)> {
    events_of_kind(events, "policy.decided")
        .into_iter()
        .map(|e| &e["payload"])
        .filter(|p| p["decision"]["kind"] == "intent_classification")
        .map(|p| {
            let d = &p["decision"];
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&p["subject"]),
                text(&d["verdict"]),
                text(&d["rule_id"]),
                text(&d["reason"]),
            )
        })
        .collect()
}

/// docs/governance.md#intent-classification: ORC (told to route when unsure) routes the
/// unclear request at confidence 0.4; docket refuses the routing, naming the rule and the
/// threshold, and retries ORC with the refusal, which asks the user instead; once the
/// user answers, ORC routes to CST and the business case goes on.
#[test]
fn a_routing_below_the_intent_threshold_is_refused_and_orc_asks_instead() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert_eq!(
        run_workflow(&data, "hasty.toml", "unclear.json", "hasty"),
        3,
        "waits for the user's answer"
    );
    let events = run_events(&data, "hasty");
    let decisions = intent_decisions(&events);
    let refused = "ORC routes to CST at confidence 0.4, below the threshold 0.7: below it, it must ask a clarifying question instead";
    assert_eq!(
        decisions,
        [
            (
                "hasty/call-1".to_owned(),
                "deny".to_owned(),
                "intent_classification.confidence_threshold".to_owned(),
                refused.to_owned()
            ),
            (
                "hasty/call-2".to_owned(),
                "allow".to_owned(),
                "intent_classification.confidence_threshold".to_owned(),
                "ORC's confidence 0.4 is below the threshold 0.7: it asks a clarifying question"
                    .to_owned()
            ),
        ]
    );
    // Nothing reached CST; ORC's retry was told why, and the contract it is held to.
    assert!(
        events_of_kind(&events, "handoff.allowed")
            .iter()
            .all(|e| e["payload"]["to"] != "CST")
    );
    let retry = events_of_kind(&events, "agent.call_scheduled")
        .into_iter()
        .map(|e| &e["payload"]["request"])
        .find(|r| r["request_id"] == "hasty/call-2")
        .expect("ORC was called again");
    assert_eq!(
        retry["context"]["previous_attempt"]["error_code"],
        "INTENT_POLICY_VIOLATION"
    );
    assert_eq!(
        retry["context"]["previous_attempt"]["error_message"],
        format!("{refused} (rule intent_classification.confidence_threshold)")
    );
    assert_eq!(
        retry["context"]["intent_classification"],
        serde_json::json!({"confidence_threshold": 0.7, "secondary_targets_required": true})
    );
    let asked = events_of_kind(&events, "human.escalated");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["payload"]["subject"]["agent"], "ORC");

    let out = docket_on(
        &data,
        &[
            "answer", "hasty", "ticket-1", "--by", "dana", "--choice", "1",
        ],
    );
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
    let events = run_events(&data, "hasty");
    let routed = intent_decisions(&events);
    assert_eq!(routed.len(), 3, "{routed:?}");
    assert_eq!(
        (
            routed[2].1.as_str(),
            routed[2].2.as_str(),
            routed[2].3.as_str()
        ),
        (
            "allow",
            "intent_classification.routing",
            "ORC routes `business_case` (confidence 1, threshold 0.7) to CST"
        )
    );
    assert_the_business_case(output(&events));
    replays_and_exports(&data, "hasty");

    // What-if: under a bundle whose threshold is 0.9, the business case's routing at 0.85
    // would have been refused.
    assert_eq!(run_consulting(&data, "input.json", "case"), 0);
    let policy = std::fs::read_to_string(workspace_root().join("examples/consulting/policy.toml"))
        .unwrap()
        .replace("confidence_threshold = 0.7", "confidence_threshold = 0.9");
    let strict = dir.path().join("strict.toml");
    std::fs::write(&strict, policy).unwrap();
    let out = docket_on(
        &data,
        &["replay", "case", "--policies", strict.to_str().unwrap()],
    );
    let text = stdout_text(&out);
    assert!(
        text.contains("stricter  intent classification of case/call-1: allowed → denied"),
        "{text}"
    );
}

#[test]
fn a_capability_request_that_breaks_its_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert_eq!(
        run_consulting(&data, "percent-rate.json", "rate"),
        4,
        "blocked"
    );
    let events = run_events(&data, "rate");
    let refused = events_of_kind(&events, "policy.decided")
        .into_iter()
        .map(|e| &e["payload"]["decision"])
        .find(|d| d["kind"] == "capability")
        .expect("the capability was decided");
    assert_eq!(
        refused["rule_id"],
        "agents.ANL.capabilities.ANL_NPV.input_schema"
    );
    assert_eq!(
        refused["reason"],
        "INPUT_VALIDATION_FAILED: /discount_rate: 12 is greater than the maximum of 1"
    );
    assert!(events_of_kind(&events, "run.completed").is_empty());
    // ANL was never called.
    assert!(
        events_of_kind(&events, "agent.call_scheduled")
            .iter()
            .all(|e| e["payload"]["request"]["target_agent"] != "ANL")
    );
    replays_and_exports(&data, "rate");
}

/// PRF's state as `docket circuits --json` reports it.
fn prf_breaker(data: &Path) -> Value {
    let out = docket_on(data, &["circuits", "--json"]);
    assert_eq!(exit_code(&out), 0);
    let all: Vec<Value> = serde_json::from_str(&stdout_text(&out)).unwrap();
    all.into_iter()
        .find(|b| b["agent"] == "PRF")
        .expect("PRF has a breaker")
}

#[test]
fn a_failing_specialist_opens_its_circuit_across_runs_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Three runs of the outage drill: each asks PRF once, which fails twice (the call
    // and its retry); ORC falls back each time and the runs complete.
    // The first two runs are told PRF's own error; the third's retry meets the circuit
    // its first failure opened.
    let down = "PROOFREADING_SERVICE_DOWN: the proofreading service is down (outage drill)";
    for (run, why) in [
        ("drill-1", down),
        ("drill-2", down),
        ("drill-3", "CIRCUIT_OPEN: "),
    ] {
        assert_eq!(run_workflow(&data, "outage.toml", "input.json", run), 0);
        let events = run_events(&data, run);
        assert_not_proofread(output(&events), why);
    }
    let breaker = prf_breaker(&data);
    assert_eq!(breaker["state"], "open", "{breaker}");
    assert_eq!(breaker["consecutive_failures"], 5, "{breaker}");

    // The next run, with PRF healthy again but inside the 60 s cool-down: PRF is not
    // called at all; ORC gets CIRCUIT_OPEN at once and degrades gracefully.
    assert_eq!(run_consulting(&data, "input.json", "during"), 0);
    let events = run_events(&data, "during");
    let degraded = events_of_kind(&events, "agent.call_degraded");
    assert_eq!(degraded.len(), 1);
    let call = &degraded[0]["payload"]["request_id"];
    assert_not_proofread(output(&events), "CIRCUIT_OPEN: ");
    assert!(
        events_of_kind(&events, "agent.responded")
            .iter()
            .all(|e| e["payload"]["request_id"] != *call),
        "the degraded call {call} was never answered: PRF was not called"
    );

    // Recovery: an operator closes the breaker (recorded: who, why); the next run
    // reaches PRF, and its success keeps the circuit closed.
    let out = docket_on(
        &data,
        &[
            "circuits",
            "reset",
            "PRF",
            "--by",
            "ops",
            "--reason",
            "service restored",
        ],
    );
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
    assert_eq!(run_consulting(&data, "input.json", "after"), 0);
    let events = run_events(&data, "after");
    assert_the_business_case(output(&events));
    let breaker = prf_breaker(&data);
    assert_eq!(breaker["state"], "closed", "{breaker}");
    assert_eq!(breaker["last_reset"]["by"], "ops");
    replays_and_exports(&data, "during");
}

/// A follow-up in the same session (README, "A follow-up"): `docket send` starts turn 2,
/// whose ORC is told turn 1's request, answer and the person's decision
/// (`context.handoff.session`), asks nothing again and builds on turn 1's NPV; a second
/// message to turn 1 is refused naming turn 2. Both turns replay and export.
#[test]
fn a_follow_up_builds_on_the_earlier_answer_without_asking_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert_eq!(run_consulting(&data, "unclear.json", "talk"), 3, "waits");
    let out = docket_on(
        &data,
        &["send", "talk", "--message", "too early", "--by", "ana"],
    );
    assert_eq!(exit_code(&out), 1, "a waiting run takes no message");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("it is waiting for a human"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = docket_on(
        &data,
        &[
            "answer", "talk", "ticket-1", "--by", "dana", "--choice", "1",
        ],
    );
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
    let first = output(&run_events(&data, "talk")).clone();

    let follow_up = "How does that NPV compare with my budget?";
    let out = docket_on(
        &data,
        &["send", "talk", "--message", follow_up, "--by", "ana"],
    );
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
    assert!(
        stdout_text(&out).starts_with("run talk.2 (consulting): completed\nturn 2 of session talk (after run talk), message from ana"),
        "{}",
        stdout_text(&out)
    );
    let events = run_events(&data, "talk.2");
    let requested = &events[0]["payload"];
    assert_eq!(requested["session"]["id"], "talk");
    assert_eq!(requested["session"]["turn"], 2);
    assert_eq!(requested["input"]["message"], follow_up);
    // ORC was told the first turn, through the gate, and asked nothing.
    let calls = events_of_kind(&events, "agent.call_scheduled");
    assert_eq!(calls.len(), 1, "ORC answers at once");
    let session = &calls[0]["payload"]["request"]["context"]["handoff"]["session"];
    assert_eq!(
        session["told_us"][0]["request"]["user_message"], "I need some help with Germany",
        "{session}"
    );
    assert_eq!(
        session["we_told"][0]["output"]["answer"], first["answer"],
        "{session}"
    );
    assert_eq!(session["decisions"][0]["by"], "dana", "{session}");
    assert_eq!(session["decisions"][0]["choice"], 1, "{session}");
    assert!(
        events_of_kind(&events, "human.escalated").is_empty(),
        "ORC did not ask again"
    );
    let crossed: Vec<String> = events_of_kind(&events, "handoff.allowed")
        .into_iter()
        .filter(|e| e["payload"]["decision"]["rule_id"] == "context.session")
        .map(|e| {
            e["payload"]["output_type"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        crossed,
        [
            "session.told_us.turn-1",
            "session.we_told.turn-1",
            "session.decisions"
        ]
    );
    let answer = output(&events);
    assert_eq!(
        answer["answer"],
        "Building on your business case \"Market Entry Analysis: Germany\" from turn 1 (you answered option 1 when asked, so I do not ask again), answering \"I need some help with Germany\": its NPV of 17206.82 is 0.34% of the upper end of your budget (5000000). You asked: \"How does that NPV compare with my budget?\".",
        "{answer}"
    );
    assert_eq!(answer["builds_on"]["turn"], 1, "{answer}");

    let out = docket_on(&data, &["send", "talk", "--message", "again"]);
    assert_eq!(exit_code(&out), 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("whose latest turn is run talk.2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = docket_on(&data, &["runs"]);
    assert!(
        stdout_text(&out).contains("talk.2\tconsulting (session talk, turn 2)\tcompleted"),
        "{}",
        stdout_text(&out)
    );
    replays_and_exports(&data, "talk");
    replays_and_exports(&data, "talk.2");
}
