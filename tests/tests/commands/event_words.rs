//! Every event says something (docs/events.md): `docket events`, `docket status` and the
//! web UI's timeline give each kind of event its words, with nothing empty after the kind,
//! no empty reason left dangling after a colon, and no word said twice in a row.

use std::collections::BTreeSet;
use std::path::Path;

use docket_tests::{docket_on, exit_code, golden_log_copy, stdout_text, workspace_root};

/// The first word said twice in a row in `text` (`handoff handoff`, `run run`), or an
/// empty phrase between two colons (`: : "timeRange"`); `None` when there is none. Words
/// are compared without case and without the punctuation around them; numbers and
/// symbols alone are not words.
pub(crate) fn said_twice(text: &str) -> Option<String> {
    if let Some(at) = text.find(": :") {
        return Some(text[at.saturating_sub(20)..(at + 23).min(text.len())].to_owned());
    }
    let words: Vec<(&str, String)> = text
        .split_whitespace()
        .map(|w| {
            let word = w.trim_matches(|c: char| !c.is_alphanumeric());
            (w, word.to_lowercase())
        })
        .collect();
    words
        .windows(2)
        .find(|pair| {
            // An option and its placeholder (`--role ROLE`) is not a word said twice.
            pair[0].1 == pair[1].1
                && pair[0].1.chars().any(char::is_alphabetic)
                && !pair[0].0.starts_with("--")
        })
        .map(|pair| format!("{} {}", pair[0].0, pair[1].0))
}

#[test]
fn said_twice_finds_doubled_words_and_empty_phrases_only() {
    assert_eq!(
        said_twice("handoff handoff geo → x").as_deref(),
        Some("handoff handoff")
    );
    assert_eq!(
        said_twice("the run Run blocked").as_deref(),
        Some("run Run")
    );
    assert!(said_twice(r#"field : : "timeRange""#).is_some());
    assert_eq!(said_twice("a → b: 2 2 events, call-1 call-2"), None);
    assert_eq!(said_twice("docket override RUN --role ROLE"), None);
}

/// The description `docket events` gives after `SEQ DATE KIND`.
fn description(line: &str) -> (&str, &str) {
    let mut rest = line.trim_start();
    let mut fields = Vec::new();
    for _ in 0..3 {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        fields.push(&rest[..end]);
        rest = rest[end..].trim_start();
    }
    (fields[2], rest)
}

/// The web UI's timeline (serve/ui/views.js `describe`) on the events of `docket events
/// --json`, which the API serves in the same form: each has its words, none said twice.
/// Run with node when it is installed (CI installs none: the UI's browser tests show the
/// timeline there).
#[allow(clippy::print_stderr)] // a skipped check says so
fn timeline_words(shape: &str, events_json: &str) {
    let script = format!(
        "import {{ describe }} from {:?};\n\
         import {{ readFileSync }} from 'node:fs';\n\
         for (const line of readFileSync(0, 'utf8').split('\\n').filter(Boolean)) {{\n\
           const e = JSON.parse(line);\n\
           console.log(`${{e.kind}}\\t${{describe(e).text}}`);\n\
         }}\n",
        format!(
            "file://{}",
            workspace_root().join("serve/ui/views.js").display()
        )
    );
    let child = std::process::Command::new("node")
        .args(["--input-type=module", "-e", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        eprintln!("skipped the web timeline's words: node is not installed");
        return;
    };
    use std::io::Write as _;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(events_json.as_bytes())
        .expect("events to node");
    let out = child.wait_with_output().expect("node runs");
    assert!(
        out.status.success(),
        "{shape}: views.js: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), events_json.lines().count(), "{text}");
    for line in text.lines() {
        let (kind, words) = line.split_once('\t').unwrap_or((line, ""));
        let words = words.trim();
        assert!(
            !words.is_empty() && !words.ends_with(':') && !words.contains("undefined"),
            "{shape}: the timeline says nothing of {kind}: {line:?}"
        );
        if let Some(twice) = said_twice(words) {
            panic!("{shape}: the timeline says {twice:?} for {kind}: {line:?}");
        }
    }
}

#[test]
fn every_event_kind_of_the_golden_logs_has_its_words() {
    let version = format!("v{}", docket_decider::DECIDER_VERSION);
    let root = workspace_root().join("tests/golden").join(&version);
    let mut shapes: Vec<String> = std::fs::read_dir(&root)
        .expect("the golden logs of this decider version")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    shapes.sort();
    assert!(shapes.len() >= 5, "{shapes:?}");
    let mut kinds = BTreeSet::new();
    for shape in &shapes {
        let dir = tempfile::tempdir().expect("tempdir");
        golden_log_copy(&version, shape, dir.path());
        let run = format!("golden-{shape}");
        let data: &Path = dir.path();

        let json = docket_on(data, &["events", &run, "--json"]);
        assert_eq!(exit_code(&json), 0, "{shape}: {}", stdout_text(&json));
        let recorded: Vec<String> = stdout_text(&json)
            .lines()
            .map(|l| {
                let e: serde_json::Value = serde_json::from_str(l).expect("one JSON event");
                e["kind"].as_str().expect("a kind").to_owned()
            })
            .collect();

        let text = docket_on(data, &["events", &run]);
        assert_eq!(exit_code(&text), 0, "{shape}: {}", stdout_text(&text));
        let text = stdout_text(&text);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), recorded.len(), "{shape}: one line per event");
        for (line, kind) in lines.iter().zip(&recorded) {
            let (shown, words) = description(line);
            assert_eq!(shown, kind, "{shape}: {line}");
            assert!(
                !words.is_empty(),
                "{shape}: {kind} says nothing after its kind: {line:?}"
            );
            assert!(
                !words.trim_end().ends_with(':')
                    && !words.contains(": [")
                    && !words.contains(":  "),
                "{shape}: {kind} leaves a reason empty: {line:?}"
            );
            if let Some(twice) = said_twice(words) {
                panic!("{shape}: {kind} says {twice:?}: {line:?}");
            }
            kinds.insert(kind.clone());
        }

        timeline_words(shape, &stdout_text(&json));

        let status = docket_on(data, &["status", &run]);
        let said = stdout_text(&status);
        if let Some(twice) = said_twice(&said) {
            panic!("{shape}: status says {twice:?}:\n{said}");
        }
        // (A heading ends with a colon; a value left empty after one leaves its space.)
        assert!(
            !said.lines().any(|l| l.ends_with(": ")),
            "{shape}: status leaves something empty:\n{said}"
        );
    }
    // The golden logs are the kinds a run of each shape records.
    for kind in [
        "run.requested",
        "agent.call_scheduled",
        "agent.responded",
        "handoff.allowed",
        "handoff.denied",
        "policy.decided",
        "human.escalated",
        "human.decided",
        "run.completed",
        "run.blocked",
        "effect.requested",
        "episode.finished",
    ] {
        assert!(
            kinds.contains(kind),
            "no golden log holds {kind}: {kinds:?}"
        );
    }
}
