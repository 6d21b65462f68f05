//! `docket demo` through the binary: every example's runs end as their examples say, the
//! human steps are answered and recorded as the demo reviewer, the summary says what was
//! allowed and denied and why, and the reports it points to exist and verify. A data
//! directory that is not a previous demo's is refused; a previous demo's is replaced.

use std::path::Path;
use std::sync::OnceLock;

use docket_tests::{
    docket_on, events_of_kind, example_agents_built, exit_code, run_events, stdout_text,
    workspace_root,
};

/// Builds the agents of every example that has some (examples/*/agents).
fn all_agents_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let examples = workspace_root().join("examples");
        let mut names: Vec<String> = std::fs::read_dir(&examples)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.path().join("agents/Cargo.toml").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            example_agents_built(&format!("docket-example-{name}"));
        }
    });
}

fn demo(data: &Path) -> std::process::Output {
    all_agents_built();
    let examples = workspace_root().join("examples");
    docket_on(data, &["demo", "--examples", examples.to_str().unwrap()])
}

/// The block of the summary about `run`, from its header to the next.
fn block<'a>(text: &'a str, run: &str) -> &'a str {
    let start = text
        .find(&format!("run {run} ("))
        .unwrap_or_else(|| panic!("no run {run} in\n{text}"));
    let rest = &text[start..];
    let end = rest.find("\n== ").unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn the_demo_runs_every_example_and_leaves_verified_reports() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let out = demo(&data);
    let text = stdout_text(&out);
    assert_eq!(
        exit_code(&out),
        0,
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Every run ended as expected, and the summary says so.
    let tally = text
        .lines()
        .find(|l| l.ends_with("runs ended as expected"))
        .unwrap_or_else(|| panic!("no tally in\n{text}"));
    let numbers: Vec<&str> = tally.split_whitespace().collect();
    assert_eq!(numbers[0], numbers[2], "{tally}");
    assert!(!text.contains("UNEXPECTED"), "{text}");

    // The geo runs: the analysis, and each guardrail with the rule that decided.
    let analysis = block(&text, "geo-analysis");
    assert!(
        analysis.contains("(workflow.toml on input.json): completed"),
        "{analysis}"
    );
    assert!(
        analysis.contains("allowed: 7 handoff(s): external → governance, governance → observation"),
        "{analysis}"
    );
    assert!(analysis.contains("denied: nothing"), "{analysis}");
    assert!(
        analysis.contains("3 recommendations (validated): rec-1 [HIGH] help desk software"),
        "{analysis}"
    );
    for (run, rule) in [
        ("geo-no-competitors", "escalation.stop_on_errors"),
        ("geo-question-feedback", "guardrail-3"),
        ("geo-questions-in-recommendations", "guardrail-1"),
        ("claims-leak", "deny_by_default"),
        (
            "consulting-percent-rate",
            "agents.ANL.capabilities.ANL_NPV.input_schema",
        ),
        ("software-team-flaky", "block"),
    ] {
        let b = block(&text, run);
        assert!(b.contains(": blocked by policy"), "{b}");
        assert!(b.contains(&format!("result: blocked by {rule}: ")), "{b}");
        assert!(
            b.contains(&format!("as expected (blocked by {rule})")),
            "{b}"
        );
    }
    let g3 = block(&text, "geo-question-feedback");
    assert!(
        g3.contains("capability deny: strategy may not obtain `question_generation`: Guardrail 3")
            && g3.contains("[guardrail-3]"),
        "{g3}"
    );
    let g1 = block(&text, "geo-questions-in-recommendations");
    assert!(
        g1.contains("failed: governance RECOMMENDATION_REJECTED ×3"),
        "{g1}"
    );
    // A tool refused before it runs, a circuit open: denials with their rules.
    assert!(
        block(&text, "software-team-signup").contains("tool_call deny: `Bash(rm -rf")
            && block(&text, "software-team-signup").contains("[deny-rm-rf]"),
        "{text}"
    );
    assert!(
        block(&text, "consulting-circuit-open").contains("PRF's circuit is open"),
        "{text}"
    );

    // Social: the DM approved and sent, then refused by the kill switch; each stop
    // condition ends its run; the outbox, in the demo's directory, holds each key once.
    let campaign = block(&text, "social-campaign");
    assert!(campaign.contains(": completed"), "{campaign}");
    assert!(
        campaign.contains("key dm:evt-102: settled receipt"),
        "{campaign}"
    );
    let drill = block(&text, "social-kill-switch");
    assert!(
        drill.contains(
            "dm in lane api by engagement (ep-6), key dm:evt-102: refused [kill_switch.api]"
        ),
        "{drill}"
    );
    for condition in [
        "budget_exhausted",
        "depth_exceeded",
        "no_new_information",
        "failure_repeats",
        "policy_blocks",
    ] {
        let b = block(&text, &format!("social-{}", condition.replace('_', "-")));
        assert!(
            b.contains(&format!("stopped ({condition})"))
                && b.contains(&format!("as expected (failed for {condition})")),
            "{b}"
        );
    }
    let outbox = std::fs::read_to_string(data.join("social-outbox.jsonl")).unwrap();
    let keys: Vec<String> = outbox
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["idempotency_key"].to_string()
        })
        .collect();
    let mut unique = keys.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), keys.len(), "one message per key: {keys:?}");
    assert!(
        keys.iter().any(|k| k.contains("dm:evt-102")),
        "the approved DM went out: {keys:?}"
    );

    // Human steps: answered by the demo reviewer, in the summary and in the log.
    let unclear = block(&text, "consulting-unclear");
    assert!(
        unclear.contains("→ approved by demo-reviewer, choice 1"),
        "{unclear}"
    );
    for run in [
        "consulting-unclear",
        "software-team-signup",
        "software-team-flaky",
        "social-campaign",
    ] {
        let events = run_events(&data, run);
        let decided = events_of_kind(&events, "human.decided");
        assert!(!decided.is_empty(), "{run}: no human step");
        for d in decided {
            assert_eq!(d["payload"]["by"], "demo-reviewer", "{run}: {d}");
        }
    }

    // The evidence: every run replayed and verified, and its reports written.
    assert!(text.contains("reproduced every decision"), "{text}");
    assert!(text.contains("every chain, tree and seal sound"), "{text}");
    let reports = data.join("reports");
    assert!(
        text.contains(&format!("HTML reports: {}", reports.display())),
        "{text}"
    );
    for run in [
        "geo-analysis",
        "geo-questions-in-recommendations",
        "claims-leak",
        "consulting-unclear",
        "software-team-flaky",
    ] {
        let html = std::fs::read_to_string(reports.join(format!("{run}.html"))).unwrap();
        assert!(html.contains(run), "{run}.html names its run");
        let jsonl = reports.join(format!("{run}.jsonl"));
        let check = docket_on(&data, &["verify-export", jsonl.to_str().unwrap()]);
        assert_eq!(exit_code(&check), 0, "{}", stdout_text(&check));
        assert!(
            stdout_text(&check).contains("sound"),
            "{}",
            stdout_text(&check)
        );
    }
    let html = std::fs::read_to_string(reports.join("consulting-unclear.html")).unwrap();
    assert!(
        html.contains("demo-reviewer"),
        "the report shows who answered"
    );

    // The directory is the demo's: a second demo replaces it and ends the same.
    let again = demo(&data);
    assert_eq!(exit_code(&again), 0, "{}", stdout_text(&again));
    assert!(
        stdout_text(&again).contains("(the previous demo's, replaced)"),
        "{}",
        stdout_text(&again)
    );
}

#[test]
fn a_directory_that_is_not_a_previous_demos_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("mine");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("notes.txt"), "keep me").unwrap();
    let out = demo(&data);
    assert_eq!(exit_code(&out), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not empty and not a previous demo's") && err.contains("--data DIR"),
        "{err}"
    );
    // Nothing was touched.
    assert_eq!(
        std::fs::read_to_string(data.join("notes.txt")).unwrap(),
        "keep me"
    );
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 1);
}
