//! The `docket` binary speaks the user's words: enum values as the bundle format and
//! docs/events.md name them (never Rust's `Debug` names), times as RFC 3339 dates, errors
//! that say what and where once and without parser jargon, no colour codes when the
//! output is not a terminal, and a description for every option of every command.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use docket_decider::{ReadyBecause, RiskVerdict, SettledBy, SettledStatus};
use docket_policies::HandoffMode;
use docket_policies::RuleChangeKind;
use docket_policies::{DecisionKind, InputKind, StepOutcome, Verdict};
use docket_tests::{docket_bin, example, geo_agents_built, geo_workflow};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");
const EFFECT_AGENT: &str = env!("CARGO_BIN_EXE_effect-agent");
const LEDGER_BIN: &str = env!("CARGO_BIN_EXE_effect-ledger");

/// `docket ARGS --data DATA`, with a trace on stderr (`RUST_LOG=info`), so that colour
/// codes in the trace would show, and without `NO_COLOR`, so that only the output not
/// being a terminal keeps them away.
fn docket(data: &Path, args: &[&str]) -> Output {
    Command::new(docket_bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("run docket")
}

/// `docket ARGS` with no trace and no `--data`: for help texts and error messages.
fn docket_plain(args: &[&str]) -> Output {
    Command::new(docket_bin())
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("run docket")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// No ANSI escape sequence in either stream.
fn assert_no_ansi(what: &str, o: &Output) {
    for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        assert!(
            !bytes.windows(2).any(|w| w == b"\x1b["),
            "{what}: ANSI escape codes on {stream} (not a terminal):\n{}",
            String::from_utf8_lossy(bytes)
        );
    }
}

/// The `Debug` names of the enums the CLI prints: `docket` must print their serialised
/// words (`applied`, `needs_approval`...) instead.
fn debug_names() -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    names.extend(
        [
            StepOutcome::Applied,
            StepOutcome::NotApplicable,
            StepOutcome::Overridden,
        ]
        .iter()
        .map(|v| format!("{v:?}")),
    );
    names.extend(
        [HandoffMode::Full, HandoffMode::Scoped, HandoffMode::Minimal]
            .iter()
            .map(|v| format!("{v:?}")),
    );
    names.extend(
        [InputKind::Decision, InputKind::Context]
            .iter()
            .map(|v| format!("{v:?}")),
    );
    names.extend(
        [Verdict::Allow, Verdict::Deny, Verdict::NeedsApproval]
            .iter()
            .map(|v| format!("{v:?}")),
    );
    names.extend(
        [
            DecisionKind::Handoff,
            DecisionKind::Spawn,
            DecisionKind::Budget,
            DecisionKind::Capability,
            DecisionKind::Escalation,
            DecisionKind::CircuitBreaker,
            DecisionKind::ToolCall,
            DecisionKind::SideEffect,
        ]
        .iter()
        .map(|v| format!("{v:?}")),
    );
    names.extend(
        [
            ReadyBecause::DryRunPassed,
            ReadyBecause::Approved,
            ReadyBecause::DryRunWaived,
            ReadyBecause::NotAppliedOnResume,
        ]
        .iter()
        .map(|v| format!("{v:?}")),
    );
    names.extend(
        [SettledStatus::Verified, SettledStatus::Unverified]
            .iter()
            .map(|v| format!("{v:?}")),
    );
    names.extend(
        [SettledBy::Executor, SettledBy::Verifier, SettledBy::Human]
            .iter()
            .map(|v| format!("{v:?}")),
    );
    names.extend(
        [
            RiskVerdict::Safe,
            RiskVerdict::ReviewRequired,
            RiskVerdict::Dangerous,
        ]
        .iter()
        .map(|v| format!("{v:?}")),
    );
    names.extend(
        [
            RuleChangeKind::Added,
            RuleChangeKind::Removed,
            RuleChangeKind::Changed,
        ]
        .iter()
        .map(|v| format!("{v:?}")),
    );
    names
}

/// A word with a lower-case letter followed by an upper-case one (`NotApplicable`,
/// `DryRunPassed`): how Rust names multi-word variants, never how docket words them.
fn camel_case_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            !w.contains('_')
                && w.as_bytes()
                    .windows(2)
                    .any(|p| p[0].is_ascii_lowercase() && p[1].is_ascii_uppercase())
        })
        .map(str::to_owned)
        .collect()
}

/// `text` (what `docket` printed for `what`) holds no Rust `Debug` name of an enum value.
fn assert_user_words(what: &str, text: &str) {
    let camel = camel_case_words(text);
    assert!(camel.is_empty(), "{what}: Rust names {camel:?} in\n{text}");
    for name in debug_names() {
        for form in [
            format!("[{name}]"),
            format!("({name})"),
            format!("{name} mode"),
            format!(": {name} "),
            format!(" {name} by "),
            format!(" by {name}:"),
        ] {
            assert!(
                !text.contains(&form),
                "{what}: the Rust name {form:?} in\n{text}"
            );
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` with plausible fields.
fn is_rfc3339_ms(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    let number = |r: std::ops::Range<usize>| s[r].parse::<u32>().unwrap_or(u32::MAX);
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
        && (2020..2200).contains(&number(0..4))
        && (1..=12).contains(&number(5..7))
        && (1..=31).contains(&number(8..10))
        && number(11..13) < 24
        && number(14..16) < 60
        && number(17..19) < 61
}

/// The run id from a summary's first line (`run ID (name): status`).
fn run_id(o: &Output) -> String {
    stdout(o)
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned()
}

/// `docket status` and `docket events` of a run: in user words, every event line dated,
/// no colour codes. Returns the events text.
fn check_run_output(what: &str, data: &Path, run: &str) -> String {
    let status = docket(data, &["status", run]);
    assert_eq!(status.status.code(), Some(0), "{what}: {}", stderr(&status));
    assert_no_ansi(&format!("{what}: status"), &status);
    assert_user_words(&format!("{what}: status"), &stdout(&status));

    let events = docket(data, &["events", run]);
    assert_eq!(events.status.code(), Some(0), "{what}: {}", stderr(&events));
    assert_no_ansi(&format!("{what}: events"), &events);
    let text = stdout(&events);
    assert_user_words(&format!("{what}: events"), &text);
    assert!(!text.is_empty(), "{what}: no events");
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let seq = fields.next().unwrap_or_default();
        let date = fields.next().unwrap_or_default();
        assert!(
            seq.parse::<u64>().is_ok() && is_rfc3339_ms(date),
            "{what}: not `SEQ DATE KIND ...`: {line:?}"
        );
    }
    text
}

#[test]
fn the_geo_run_status_events_and_explanations_are_in_user_words() {
    geo_agents_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let out = docket(&data, &["run", geo_workflow().to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_ansi("run", &out);
    // The trace was on: the test really looked at coloured-or-not text.
    assert!(stderr(&out).contains("handoff allowed"), "{}", stderr(&out));
    assert_user_words("run", &stdout(&out));
    let run = run_id(&out);
    let events = check_run_output("geo", &data, &run);
    assert!(events.contains(" run.requested "), "{events}");

    // Every pair of the bundle's agents, both input kinds; one with a payload to scope.
    let bundle = example("geo");
    let bundle = bundle.to_str().expect("utf-8");
    let agents = [
        "external",
        "governance",
        "observation",
        "intelligence",
        "reasoning",
        "strategy",
    ];
    for from in agents {
        for to in agents {
            for context in [false, true] {
                let mut args = vec!["policy", "explain", bundle, "--from", from, "--to", to];
                if context {
                    args.push("--context");
                }
                let o = docket(&data, &args);
                let what = format!("explain {from} → {to} context={context}");
                assert_eq!(o.status.code(), Some(0), "{what}: {}", stderr(&o));
                assert_no_ansi(&what, &o);
                assert_user_words(&what, &stdout(&o));
            }
        }
    }
    let o = docket(
        &data,
        &[
            "policy",
            "explain",
            bundle,
            "--from",
            "reasoning",
            "--to",
            "strategy",
            "--payload",
            r#"{"gaps": [], "secret": 1}"#,
        ],
    );
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_user_words("explain with a payload", &text);
    assert!(
        text.contains("(decision input): ALLOW")
            && text.contains("[not_applicable]")
            && text.contains("[applied]")
            && text.contains("scoping: scoped mode by"),
        "{text}"
    );

    // policy diff: input kinds and rule changes in words.
    let src = std::fs::read_to_string(example("geo")).expect("read");
    let changed = dir.path().join("geo.toml");
    std::fs::write(
        &changed,
        src.replace(
            "to = \"strategy\"\nreason = \"Must go through Reasoning\"",
            "to = \"strategy\"\nreason = \"Reasoning first\"",
        ),
    )
    .expect("write");
    let o = docket(
        &data,
        &["policy", "diff", bundle, changed.to_str().expect("utf-8")],
    );
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_user_words("diff", &text);
    assert!(
        text.contains("(decision input)") && text.contains("rule changed "),
        "{text}"
    );
}

fn small_workflow(dir: &Path, worker: &str, extra: &str) -> PathBuf {
    std::fs::write(
        dir.join("policy.toml"),
        r#"
bundle = { id = "small" }
agents = [{ id = "external" }, { id = "worker" }, { id = "risk" }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#,
    )
    .expect("write bundle");
    std::fs::write(dir.join("input.json"), r#"{"task": "x"}"#).expect("write input");
    let path = dir.join("workflow.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"small\"\npolicy = \"policy.toml\"\nentry = \"worker\"\ninput = \"input.json\"\n\
             [agents.worker]\ncommand = {TEST_AGENT:?}\nargs = [\"{worker}\"]\n{extra}"
        ),
    )
    .expect("write workflow");
    path
}

/// The escalation ladder (`policy.decided` with a kind and a verdict), a risk classifier's
/// verdict and a side effect's path (`effect.ready` because..., `effect.settled` by...)
/// in `docket events` and `docket status`.
#[test]
fn decisions_verdicts_and_effect_steps_are_in_user_words() {
    // A crashing agent: retried, then escalated to a human.
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let wf = small_workflow(dir.path(), "crash", "");
    let out = docket(&data, &["run", wf.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    assert_no_ansi("escalation run", &out);
    let events = check_run_output("escalation", &data, &run_id(&out));
    assert!(
        events.contains(" policy.decided ") && events.contains("needs_approval"),
        "{events}"
    );

    // A risk classifier asking for review.
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let wf = small_workflow(
        dir.path(),
        "finish",
        &format!(
            "classifiers = [\"risk\"]\n[agents.risk]\ncommand = {TEST_AGENT:?}\nargs = [\"finish\", \"--payload\", {:?}]\n",
            r#"{"verdict": "REVIEW_REQUIRED", "reason": "checked"}"#
        ),
    );
    let out = docket(&data, &["run", wf.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    let events = check_run_output("risk", &data, &run_id(&out));
    assert!(events.contains("REVIEW_REQUIRED by risk"), "{events}");

    // A publish: dry run, execution, verification.
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::write(
        dir.path().join("bundle.toml"),
        r#"
bundle = { id = "publish" }
[[agents]]
id = "external"
[[agents]]
id = "publisher"
side_effects = ["publish"]
[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = true
[interactions]
allowed = [{ from = "external", to = "publisher" }, { from = "publisher", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#,
    )
    .expect("bundle");
    std::fs::write(dir.path().join("input.json"), "{}").expect("input");
    let wf = dir.path().join("workflow.toml");
    std::fs::write(
        &wf,
        format!(
            "name = \"publish\"\npolicy = \"bundle.toml\"\nentry = \"publisher\"\ninput = \"input.json\"\n\
             [agents.publisher]\ncommand = {EFFECT_AGENT:?}\nargs = [\"--prefix\", \"launch\", \"--count\", \"1\", \"--lane\", \"api\"]\n\
             [effects.publish]\ncommand = {LEDGER_BIN:?}\nargs = [\"--ledger\", {:?}]\ntimeout_ms = 45000\n",
            dir.path().join("ledger.tsv")
        ),
    )
    .expect("workflow");
    let out = docket(
        &data,
        &["run", wf.to_str().expect("utf-8"), "--run-id", "pub-1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = check_run_output("effect", &data, "pub-1");
    assert!(
        events.contains("ready to execute (dry_run_passed)")
            && events.contains("verified by executor"),
        "{events}"
    );
}

#[test]
fn kill_switch_history_shows_dates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let on = docket(
        &data,
        &[
            "kill-switch",
            "on",
            "--lane",
            "api",
            "--by",
            "ops",
            "--reason",
            "bad posts",
        ],
    );
    assert_eq!(on.status.code(), Some(0), "{}", stderr(&on));
    let o = docket(&data, &["kill-switch", "status", "--history"]);
    let text = stdout(&o);
    assert_no_ansi("kill-switch status", &o);
    let engaged = text
        .lines()
        .find(|l| l.starts_with("api engaged by ops at "))
        .unwrap_or_else(|| panic!("no engaged line in\n{text}"));
    let date = engaged
        .trim_start_matches("api engaged by ops at ")
        .trim_end_matches(": bad posts");
    assert!(is_rfc3339_ms(date), "{engaged}");
    let flip = text
        .lines()
        .find(|l| l.ends_with(" api on by ops: bad posts"))
        .unwrap_or_else(|| panic!("no flip line in\n{text}"));
    assert!(
        is_rfc3339_ms(flip.split(' ').next().unwrap_or_default()),
        "{flip}"
    );
}

#[test]
fn explaining_a_handoff_with_an_agent_the_bundle_does_not_declare_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bundle = example("geo");
    let bundle = bundle.to_str().expect("utf-8");
    for (from, to, unknown) in [
        ("strategy", "nobody", "nobody"),
        ("ghost", "strategy", "ghost"),
    ] {
        for json in [false, true] {
            let mut args = vec!["policy", "explain", bundle, "--from", from, "--to", to];
            if json {
                args.push("--json");
            }
            let o = docket(dir.path(), &args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{from} → {to}: {err}");
            assert!(stdout(&o).is_empty(), "{}", stdout(&o));
            assert!(
                err.contains(&format!("`{unknown}`"))
                    && err.contains(bundle)
                    && err.contains(
                        "external, governance, intelligence, observation, operator, reasoning, reviewer, strategy"
                    ),
                "{err}"
            );
        }
    }
}

/// Whether some `: `-separated part of a message (of a useful length) comes twice, as
/// in `cannot read X: No such file: No such file`.
fn repeated_part(message: &str) -> Option<String> {
    let parts: Vec<&str> = message.split(": ").map(str::trim).collect();
    parts
        .iter()
        .enumerate()
        .find(|(i, p)| p.len() > 6 && parts[i + 1..].contains(p))
        .map(|(_, p)| (*p).to_owned())
}

/// A failed command's message: on stderr, one `error:` line or block, saying where, in
/// the formats' words.
fn assert_plain_error(what: &str, o: &Output, code: i32, must_contain: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{what}: {err}");
    assert_no_ansi(what, o);
    assert!(err.starts_with("error: "), "{what}: {err}");
    for jargon in [
        "untagged enum",
        "invalid type:",
        "invalid value:",
        "expected u8",
        "expected u32",
        "expected u64",
        "expected i32",
        "expected i64",
        "expected usize",
        "a sequence",
        "EOF while parsing",
        "(os error",
        "TOML parse error",
        "did not match any variant",
    ] {
        assert!(!err.contains(jargon), "{what}: {jargon:?} in {err}");
    }
    assert_eq!(repeated_part(&err), None, "{what}: said twice in {err}");
    for part in must_contain {
        assert!(err.contains(part), "{what}: no {part:?} in {err}");
    }
}

#[test]
fn errors_say_what_and_where_once_in_user_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let good = small_workflow(dir.path(), "finish", "");
    let good_text = std::fs::read_to_string(&good).expect("read");
    let variant = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path.to_str().expect("utf-8").to_owned()
    };
    let data = data.to_str().expect("utf-8");
    let run = |wf: &str| docket_plain(&["run", wf, "--data", data]);

    // An agent section no executor form matches.
    let wf = variant(
        "bad-agent.toml",
        good_text.replace(&format!("command = {TEST_AGENT:?}"), "command = 5"),
    );
    assert_plain_error(
        "bad agent section",
        &run(&wf),
        1,
        &["bad-agent.toml:6:11", "[agents.worker]", "`command`"],
    );
    // A number where a string is expected, a string where a number is.
    let wf = variant(
        "number.toml",
        good_text.replace("name = \"small\"", "name = 5"),
    );
    assert_plain_error(
        "number for a string",
        &run(&wf),
        1,
        &["number.toml:1:8", "`name`", "a string", "5"],
    );
    let wf = variant(
        "timeout.toml",
        format!("{good_text}timeout_ms = \"soon\"\n"),
    );
    assert_plain_error(
        "string for a number",
        &run(&wf),
        1,
        &[
            "timeout.toml:8:14",
            "`timeout_ms`",
            "whole number",
            "\"soon\"",
        ],
    );
    // A missing key, a missing bundle, a missing workflow.
    let wf = variant(
        "no-entry.toml",
        good_text.replace("entry = \"worker\"\n", ""),
    );
    assert_plain_error("missing key", &run(&wf), 1, &["no-entry.toml", "`entry`"]);
    let wf = variant(
        "no-bundle.toml",
        good_text.replace("policy.toml", "absent.toml"),
    );
    assert_plain_error("missing bundle", &run(&wf), 1, &["absent.toml"]);
    assert_plain_error(
        "missing workflow",
        &run(dir.path().join("absent-wf.toml").to_str().expect("utf-8")),
        1,
        &["absent-wf.toml"],
    );
    // Malformed input JSON.
    let input = dir.path().join("bad-input.json");
    std::fs::write(&input, "{\"task\": \n").expect("write");
    let o = docket_plain(&[
        "run",
        good.to_str().expect("utf-8"),
        "--input",
        input.to_str().expect("utf-8"),
        "--data",
        data,
    ]);
    assert_plain_error("bad input", &o, 1, &["bad-input.json", "line 2"]);
    // A run id that could not name a run in a path or a call id.
    for bad in ["a b", "x/y", ""] {
        let o = docket_plain(&[
            "run",
            good.to_str().expect("utf-8"),
            "--run-id",
            bad,
            "--data",
            data,
        ]);
        assert_plain_error(
            "bad run id",
            &o,
            2,
            &["--run-id", "letters, digits", &format!("{bad:?}")],
        );
    }
    // A --data that is a file, and one that cannot be created.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").expect("write");
    let o = docket_plain(&["runs", "--data", file.to_str().expect("utf-8")]);
    assert_plain_error("data is a file", &o, 1, &["a-file", "not a directory"]);
    let below = file.join("below");
    let o = docket_plain(&["runs", "--data", below.to_str().expect("utf-8")]);
    assert_plain_error("data below a file", &o, 1, &["a-file"]);
    // Bundles: unreadable, and of the wrong shape.
    let o = docket_plain(&[
        "policy",
        "check",
        dir.path().join("absent.toml").to_str().expect("utf-8"),
    ]);
    assert_plain_error("missing bundle file", &o, 1, &["absent.toml"]);
    let bundle = variant(
        "shape.toml",
        "[bundle]\nid = \"t\"\n[recursion.default]\nmax_depth = -1\n".to_owned(),
    );
    let o = docket_plain(&["policy", "check", &bundle]);
    assert_plain_error("bundle shape", &o, 1, &["shape.toml:4:13", "whole number"]);
    // A payload that is not JSON.
    let o = docket_plain(&[
        "policy",
        "explain",
        example("geo").to_str().expect("utf-8"),
        "--from",
        "reasoning",
        "--to",
        "strategy",
        "--payload",
        "{\"gaps\": ",
    ]);
    assert_plain_error("bad payload", &o, 2, &["--payload", "line 1"]);
    // Bad usage, as clap reports it.
    let o = docket_plain(&["approve", "run-x", "--data", data]);
    assert_eq!(o.status.code(), Some(2));
    assert_no_ansi("usage error", &o);
}

/// The subcommands listed under `Commands:` in a help text (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// Each entry of the `Arguments:` and `Options:` sections of a help text, with its
/// description (on the entry's line, or on the indented lines below it).
fn entries(help: &str) -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut in_section = false;
    for line in help.lines() {
        if line == "Arguments:" || line == "Options:" {
            in_section = true;
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            in_section = false;
            continue;
        }
        if !in_section {
            continue;
        }
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let is_entry = indent <= 6
            && (trimmed.starts_with('-') || trimmed.starts_with('<') || trimmed.starts_with('['));
        if is_entry {
            // `--name <VALUE>  Description`: two spaces end the entry's name.
            let (name, description) = trimmed.split_once("  ").unwrap_or((trimmed, ""));
            entries.push((name.trim().to_owned(), description.trim().to_owned()));
        } else if let Some(last) = entries.last_mut() {
            last.1.push(' ');
            last.1.push_str(trimmed);
        }
    }
    entries
}

#[test]
fn every_option_and_argument_of_every_command_is_described() {
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(path) = queue.pop() {
        for flag in ["--help", "-h"] {
            let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
            args.push(flag);
            let o = docket_plain(&args);
            let what = format!("docket {}", args.join(" "));
            assert_eq!(o.status.code(), Some(0), "{what}: {}", stderr(&o));
            assert_no_ansi(&what, &o);
            let help = stdout(&o);
            let mut lines = help.lines();
            assert!(
                lines
                    .next()
                    .is_some_and(|l| !l.trim().is_empty() && !l.starts_with("Usage")),
                "{what}: no description of the command:\n{help}"
            );
            let found = entries(&help);
            for (name, description) in &found {
                assert!(
                    !description.is_empty(),
                    "{what}: {name} has no description:\n{help}"
                );
            }
            if flag == "--help" {
                assert!(
                    found.iter().any(|(n, _)| n.contains("--help")),
                    "{what}:\n{help}"
                );
                // Each command in one short line, as cargo and git list theirs; the
                // details are in the command's own help.
                for line in help
                    .lines()
                    .skip_while(|l| !l.starts_with("Commands:"))
                    .skip(1)
                    .take_while(|l| l.starts_with("  "))
                {
                    assert!(
                        line.chars().count() <= 100,
                        "{what}: a command's line is longer than 100 characters:\n{line}"
                    );
                }
                for sub in subcommands(&help) {
                    let mut next = path.clone();
                    next.push(sub);
                    queue.push(next);
                }
            }
        }
        seen += 1;
    }
    // docket; policy and its 4; 7 run commands; kill-switch and its 3.
    assert!(seen >= 17, "only {seen} commands found");
}

/// `--threads` and `DOCKET_THREADS` (docs/commands.md#threads): a count out of range is
/// refused naming the setting, before anything runs; a valid one runs the command.
#[test]
fn a_thread_count_out_of_range_is_refused_naming_the_setting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let out = docket(&data, &["--threads", "0", "runs"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("`0` is not a number of threads from 1 to"),
        "{said}"
    );
    let out = Command::new(docket_bin())
        .args(["runs", "--data"])
        .arg(&data)
        .env("DOCKET_THREADS", "many")
        .output()
        .expect("run docket");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("DOCKET_THREADS=many"), "{said}");
    assert!(!data.exists(), "nothing was created");
    let out = docket(
        &data,
        &[
            "--threads",
            "3",
            "policy",
            "check",
            example("geo").to_str().expect("utf-8"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
