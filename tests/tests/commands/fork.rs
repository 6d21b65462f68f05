//! Fork and diff through the `docket` binary (docs/replay.md#fork, #diff): a publisher
//! asks for one publish (carried out by `effect-ledger`, which keeps its own ledger and
//! logs every call it gets) and hands the results to a writer, which finishes with them.
//! Both agents and the executor append every call they get to a file, so the tests count
//! what a fork really called: nothing for the reused part, exactly the live calls after.

use docket_decider::AgentResponded;
use std::path::{Path, PathBuf};

use docket_tests::{docket_on, exit_code, run_events, stdout_text, summary_run_id};
use serde_json::{Value, json};

const PUBLISHER: &str = env!("CARGO_BIN_EXE_effect-agent");
const WRITER: &str = env!("CARGO_BIN_EXE_test-agent");
const LEDGER: &str = env!("CARGO_BIN_EXE_effect-ledger");

fn bundle(blocked: &str) -> String {
    format!(
        r#"
bundle = {{ id = "publish" }}
[[agents]]
id = "external"
[[agents]]
id = "publisher"
side_effects = ["publish"]
[[agents]]
id = "writer"
[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = true
[interactions]
allowed = [{{ from = "external", to = "publisher" }}, {{ from = "publisher", to = "writer" }}, {{ from = "writer", to = "external" }}]
[multi_agent_handoffs]
default_handoff_mode = "full"
{blocked}
"#
    )
}

struct Setup {
    root: PathBuf,
    data: PathBuf,
}

impl Setup {
    fn new(dir: &Path) -> Self {
        let root = dir.to_path_buf();
        std::fs::write(root.join("bundle.toml"), bundle("")).expect("bundle");
        std::fs::write(
            root.join("strict.toml"),
            bundle("blocked_context_fields = [\"input\"]"),
        )
        .expect("bundle");
        std::fs::write(root.join("input.json"), r#"{"topic": "launch"}"#).expect("input");
        let file = |name: &str| root.join(name).display().to_string();
        std::fs::write(
            root.join("workflow.toml"),
            format!(
                "name = \"publish\"\npolicy = \"bundle.toml\"\nentry = \"publisher\"\ninput = \"input.json\"\n\
                 [agents.publisher]\ncommand = {PUBLISHER:?}\nargs = [\"--prefix\", \"launch\", \"--count\", \"1\", \"--to\", \"writer\", \"--record\", {:?}]\n\
                 [agents.writer]\ncommand = {WRITER:?}\nargs = [\"finish\", \"--record\", {:?}]\n\
                 [effects.publish]\ncommand = {LEDGER:?}\nargs = [\"--ledger\", {:?}, \"--calls\", {:?}]\n",
                file("publisher.calls"),
                file("writer.calls"),
                file("ledger.tsv"),
                file("ledger.calls"),
            ),
        )
        .expect("workflow");
        Self {
            data: root.join("data"),
            root,
        }
    }

    fn docket(&self, args: &[&str]) -> std::process::Output {
        docket_on(&self.data, args)
    }

    /// Runs the workflow to completion; its run id.
    fn run(&self) -> String {
        let wf = self.root.join("workflow.toml").display().to_string();
        let out = self.docket(&["run", &wf]);
        assert_eq!(
            exit_code(&out),
            0,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        summary_run_id(&out)
    }

    /// Lines in one of the call logs (`publisher`, `writer`, `ledger`).
    fn calls(&self, who: &str) -> Vec<String> {
        std::fs::read_to_string(self.root.join(format!("{who}.calls")))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn counts(&self) -> (usize, usize, usize) {
        (
            self.calls("publisher").len(),
            self.calls("writer").len(),
            self.calls("ledger").len(),
        )
    }

    /// `docket fork ARGS`, expected to complete; the fork's run id and its output text.
    fn fork(&self, args: &[&str]) -> (String, String) {
        let out = self.docket(&[&["fork"], args].concat());
        assert_eq!(
            exit_code(&out),
            0,
            "{}{}",
            stdout_text(&out),
            String::from_utf8_lossy(&out.stderr)
        );
        (summary_run_id(&out), stdout_text(&out))
    }
}

/// 1-based sequence of the first event of `kind` after `after` for which `pick` holds.
fn seq_of(events: &[Value], kind: &str, pick: impl Fn(&Value) -> bool) -> usize {
    events
        .iter()
        .position(|e| e["kind"] == kind && pick(&e["payload"]))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn output(events: &[Value]) -> Value {
    events
        .iter()
        .find(|e| e["kind"] == "run.completed")
        .map(|e| e["payload"]["output"].clone())
        .expect("the run completed")
}

/// The writer's call: its request id in the parent.
fn writer_call(events: &[Value]) -> String {
    let at = seq_of(events, "agent.call_scheduled", |p| {
        p["request"]["target_agent"] == "writer"
    });
    events[at - 1]["payload"]["request"]["request_id"]
        .as_str()
        .expect("an id")
        .to_owned()
}

#[test]
fn a_fork_reuses_answers_and_receipts_and_calls_only_what_is_live() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Setup::new(dir.path());
    let parent = s.run();
    // The parent: two publisher calls (the ask, then the handoff with the result), one
    // writer call; the executor dry-ran, executed and verified the publish.
    assert_eq!(s.counts(), (2, 1, 3), "{:?}", s.calls("ledger"));
    let events = run_events(&s.data, &parent);
    let writer = writer_call(&events);
    let answered = seq_of(&events, "agent.responded", |p| p["request_id"] == writer);

    // From the writer's answer: everything before it is reused, the writer is called
    // again, live, once; nobody else is called and the executor is not touched.
    let (fork, text) = s.fork(&[&parent, "--from", &answered.to_string()]);
    assert_eq!(s.counts(), (2, 2, 3), "{text}");
    assert!(
        text.contains(&format!("forked from {parent} at event {answered}")),
        "{text}"
    );
    assert!(text.contains("2 agent.responded"), "{text}");
    assert!(text.contains("1 effect.applied"), "{text}");
    let forked = run_events(&s.data, &fork);
    let receipt = |events: &[Value]| {
        events
            .iter()
            .find(|e| e["kind"] == "effect.applied")
            .map(|e| e["payload"]["receipt"].clone())
            .expect("a receipt")
    };
    assert_eq!(
        receipt(&forked),
        receipt(&events),
        "the parent's receipt is reused"
    );
    assert_eq!(output(&forked), output(&events));
    let from = &forked[0]["payload"]["forked_from"];
    assert_eq!(from["run_id"], parent.as_str());
    assert_eq!(from["seq"], answered);
    assert_eq!(from["hash"], events[answered - 1]["hash"]);
    // What the fork records replays, and `status` says where it came from.
    assert_eq!(exit_code(&s.docket(&["replay", &fork])), 0);
    let status = stdout_text(&s.docket(&["status", &fork]));
    assert!(
        status.contains(&format!("forked from {parent}")),
        "{status}"
    );

    // From the first effect event (decided from the publisher's first answer): that
    // answer is reused; the effect's path is live: dry run, kill switches, start, but the
    // key the parent applied is not executed again: the parent's receipt is recorded
    // (`reused_from`), and the executor verifies it. Then the publisher's second call and
    // the writer's, live.
    let (fork2, text) = s.fork(&[&parent, "--from", "first-effect"]);
    assert_eq!(s.counts(), (3, 3, 5), "{text}");
    let ledger = s.calls("ledger");
    let ops: Vec<&str> = ledger[3..]
        .iter()
        .map(|l| l.split('\t').next().unwrap_or_default())
        .collect();
    assert_eq!(ops, ["dry_run", "verify"], "{ledger:?}");
    let keys = std::fs::read_to_string(s.root.join("ledger.tsv")).expect("ledger");
    assert_eq!(keys.lines().count(), 1, "applied once in the world: {keys}");
    let f2 = run_events(&s.data, &fork2);
    assert_eq!(receipt(&f2), receipt(&events));
    let applied = |events: &[Value]| {
        events
            .iter()
            .find(|e| e["kind"] == "effect.applied")
            .map(|e| e["payload"].clone())
            .expect("applied")
    };
    assert_eq!(applied(&f2)["reused_from"], applied(&events)["effect_id"]);
    assert!(
        applied(&forked).get("reused_from").is_none(),
        "a reused input is the parent's own"
    );
    assert_eq!(output(&f2)["input"], json!({"topic": "launch"}));

    // A fork of a fork: from its last event everything is reused, nobody is called.
    let (fork3, text) = s.fork(&[&fork2, "--from", "last"]);
    assert_eq!(s.counts(), (3, 3, 5), "{text}");
    let f3 = run_events(&s.data, &fork3);
    assert_eq!(f3[0]["payload"]["forked_from"]["run_id"], fork2.as_str());
    assert_eq!(output(&f3), output(&run_events(&s.data, &fork2)));
}

#[test]
fn an_overridden_answer_changes_what_follows_and_diff_shows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Setup::new(dir.path());
    let parent = s.run();
    let events = run_events(&s.data, &parent);

    // The publisher's second answer (its handoff to the writer), with other content.
    let handoff = seq_of(&events, "agent.responded", |p| {
        p["response"]["actions"][0]["type"] == "handoff"
    });
    let mut answer = events[handoff - 1]["payload"]["response"].clone();
    answer["actions"][0]["payload"] = json!({"results": [], "note": "held back"});
    let call = answer["request_id"].as_str().expect("an id").to_owned();
    let short = call.rsplit('/').next().expect("call-N").to_owned();
    let file = s.root.join("answer.json");
    std::fs::write(&file, answer.to_string()).expect("answer");
    let before = s.counts();
    let (fork, text) = s.fork(&[
        &parent,
        "--from",
        "last",
        "--override-output",
        &format!("{short}={}", file.display()),
    ]);
    // The writer's request now differs from the parent's: it is called live; the
    // publisher and the executor are not.
    assert_eq!(s.counts(), (before.0, before.1 + 1, before.2), "{text}");
    assert!(text.contains("parted from"), "{text}");
    let forked = run_events(&s.data, &fork);
    assert_eq!(output(&forked), json!({"results": [], "note": "held back"}));
    assert_eq!(
        forked[0]["payload"]["forked_from"]["overrides"][0]["call"],
        call.as_str()
    );

    // diff names the overridden call and its consequences, nothing else.
    let out = s.docket(&["diff", &parent, &fork, "--json"]);
    assert_eq!(exit_code(&out), 0);
    let d: Value = serde_json::from_str(&stdout_text(&out)).expect("JSON");
    let differing: Vec<&str> = d["differing"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| s["id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        differing,
        [
            "run #1",
            "call publisher #2",
            "handoff publisher → writer (posts) #1",
            "call writer #1",
            "handoff writer → external (output) #1"
        ],
        "{d}"
    );
    assert!(d["only_a"].as_array().expect("a list").is_empty(), "{d}");
    assert!(d["only_b"].as_array().expect("a list").is_empty(), "{d}");
    let text = stdout_text(&s.docket(&["diff", &parent, &fork]));
    assert!(text.contains("call publisher #2"), "{text}");
    assert!(text.contains("/actions/0/payload/note"), "{text}");

    // The same run twice, and a fork that changed nothing: no difference.
    let same = stdout_text(&s.docket(&["diff", &parent, &parent]));
    assert!(same.starts_with("no difference"), "{same}");
    let (copy, _) = s.fork(&[&parent, "--from", "last"]);
    let same = stdout_text(&s.docket(&["diff", &parent, &copy]));
    assert!(same.starts_with("no difference"), "{same}");
}

#[test]
fn a_fork_under_a_bundle_that_blocks_a_field_goes_live_where_the_field_crossed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Setup::new(dir.path());
    let parent = s.run();
    let strict = s.root.join("strict.toml").display().to_string();
    let before = s.counts();
    let (fork, text) = s.fork(&[&parent, "--from", "last", "--policies", &strict]);
    // Up to the handoff that carried `input`, the fork asks what the parent asked and
    // reuses its answers; the writer's request lacks the field, so it is called live.
    assert_eq!(s.counts(), (before.0, before.1 + 1, before.2), "{text}");
    assert!(text.contains("parted from"), "{text}");
    assert!(text.contains("/decision_inputs/0/payload/input"), "{text}");
    let forked = run_events(&s.data, &fork);
    assert!(
        output(&forked).get("input").is_none(),
        "{}",
        output(&forked)
    );
    assert!(output(&run_events(&s.data, &parent)).get("input").is_some());
    assert_eq!(forked[0]["payload"]["bundle_source_name"], strict.as_str());
    let diff = stdout_text(&s.docket(&["diff", &parent, &fork]));
    assert!(
        diff.contains("handoff publisher → writer (posts) #1"),
        "{diff}"
    );
}

#[test]
fn fork_errors_name_the_run_the_point_and_the_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Setup::new(dir.path());
    let parent = s.run();
    let before = s.counts();
    let err = |args: &[&str]| {
        let out = s.docket(&[&["fork"], args].concat());
        assert_eq!(exit_code(&out), 1, "{}", stdout_text(&out));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(err(&["nope", "--from", "1"]).contains("no run nope"));
    assert!(err(&[&parent, "--from", "999"]).contains("--from 999"));
    assert!(err(&[&parent, "--from", "first-denial"]).contains("no denial"));
    let valid = s.root.join("valid.json");
    let events = run_events(&s.data, &parent);
    let answer = &events[seq_of(&events, "agent.responded", |_| true) - 1]["payload"]["response"];
    std::fs::write(&valid, answer.to_string()).expect("file");
    let missing = err(&[
        &parent,
        "--from",
        "last",
        "--override-output",
        &format!("call-99={}", valid.display()),
    ]);
    assert!(missing.contains("has no call"), "{missing}");
    assert!(missing.contains("call-1, call-2, call-3"), "{missing}");
    let other = err(&[
        &parent,
        "--from",
        "last",
        "--override-output",
        &format!("call-2={}", valid.display()),
    ]);
    assert!(other.contains("not the call it replaces"), "{other}");
    let file = s.root.join("answer.json");
    std::fs::write(&file, r#"{"request_id": "x", "status": "SUCCESS"}"#).expect("file");
    let invalid = err(&[
        &parent,
        "--from",
        "last",
        "--override-output",
        &format!("call-1={}", file.display()),
    ]);
    assert!(invalid.contains("answer.json"), "{invalid}");
    assert!(invalid.contains("confidence_level"), "{invalid}");
    assert_eq!(s.counts(), before, "nothing was called");
    let runs = stdout_text(&s.docket(&["runs"]));
    assert_eq!(runs.lines().count(), 1, "nothing was recorded: {runs}");
}

/// The golden log of one shape and decider version, read through the public API.
async fn golden(version: &str, shape: &str) -> Vec<docket_decider::RunEvent> {
    let dir = tempfile::tempdir().expect("tempdir");
    docket_tests::golden_log_copy(version, shape, dir.path());
    let store = docket_store::EmbeddedStore::open(dir.path(), docket_store::StoreConfig::default())
        .await
        .expect("the store opens");
    docket_runtime::Runtime::new(store)
        .events(&format!("golden-{shape}").as_str().into())
        .await
        .expect("the run reads")
        .into_iter()
        .map(|e| e.event)
        .collect()
}

/// The geo golden log of the current decider version.
async fn golden_geo() -> Vec<docket_decider::RunEvent> {
    golden(&format!("v{}", docket_decider::DECIDER_VERSION), "geo").await
}

/// Under its parent's own bundle a fork asks exactly what its parent asked: forked from
/// any event of any golden log (every shape, every decider version this build decides
/// as), it reuses every recorded input before that event and never parts.
#[tokio::test]
async fn a_fork_from_any_event_of_any_golden_log_reuses_every_input_before_it() {
    let root = docket_tests::workspace_root().join("tests/golden");
    let mut forks = 0;
    // (the version's directory, shape) of every decider version this build decides as.
    let mut fixtures = Vec::new();
    for version in docket_decider::OLDEST_DECIDER_VERSION..=docket_decider::DECIDER_VERSION {
        let group = format!("v{version}");
        for entry in std::fs::read_dir(root.join(&group))
            .expect("golden")
            .flatten()
        {
            if entry.path().join("golden.toml").is_file() {
                fixtures.push((
                    group.clone(),
                    entry.file_name().to_string_lossy().into_owned(),
                ));
            }
        }
    }
    fixtures.sort();
    assert!(
        !fixtures.is_empty(),
        "no golden logs under {}",
        root.display()
    );
    for (v, name) in &fixtures {
        let log = golden(v, name).await;
        for from in 1..=log.len() {
            let plan = docket_replay::plan_fork(&log, spec(from as u64))
                .unwrap_or_else(|e| panic!("{v}/{name} from {from}: {e}"));
            assert!(
                plan.parting.is_none(),
                "{v}/{name} from {from}: {:?}",
                plan.parting
            );
            let inputs = log[..from - 1]
                .iter()
                .skip(1)
                .filter(|e| e.is_input())
                .count();
            assert_eq!(plan.inputs.len(), inputs, "{v}/{name} from {from}");
            forks += 1;
        }
    }
    // Every shape of run, forked from each of its events.
    assert!(fixtures.len() >= 8, "{fixtures:?}");
    assert!(forks >= 100, "{forks} forks planned");
}

fn spec(from: u64) -> docket_replay::ForkSpec<'static> {
    docket_replay::ForkSpec {
        run_id: "fork-1".into(),
        from,
        parent_hash: "h".into(),
        policies: None,
        output_override: None,
        now_ms: 1_000_000,
    }
}

/// The plan is pure: every recorded answer before the point is reused while the fork
/// asks what the parent asked; a bundle that changes what one agent receives parts the
/// fork at that agent's answer, with the field that differs.
#[tokio::test]
async fn a_fork_plan_reuses_while_the_fork_asks_what_the_parent_asked() {
    use docket_decider::RunEvent;
    use docket_replay::{ForkError, plan_fork};
    let log = golden_geo().await;
    let answers = log.iter().filter(|e| e.kind() == "agent.responded").count();
    let last = log.len() as u64;

    let plan = plan_fork(&log, spec(last)).expect("plans");
    assert!(plan.parting.is_none(), "{:?}", plan.parting);
    assert_eq!(plan.reused.get("agent.responded"), Some(&answers));
    assert_eq!(plan.inputs.len(), answers);
    assert_eq!(plan.live_from, last);
    // The last reused answer is timed now; the parent's intervals are kept before it.
    let times: Vec<i64> = plan
        .inputs
        .iter()
        .filter_map(|c| match c {
            docket_decider::Command::RecordResponse(AgentResponded { at_ms, .. }) => Some(*at_ms),
            _ => None,
        })
        .collect();
    assert_eq!(times.last(), Some(&1_000_000));
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let from = plan.request.forked_from.as_ref().expect("recorded");
    assert_eq!((from.run_id.as_str(), from.seq), ("golden-geo", last));

    // From the first event nothing is reused.
    assert!(plan_fork(&log, spec(1)).expect("plans").inputs.is_empty());

    // Block `focus_brand`: the first agent whose request carried it (at the top of a
    // decision input) gets it no more, so its recorded answer is not reused and the fork
    // goes live there.
    let Some(RunEvent::RunRequested(run)) = log.first() else {
        panic!("a run's log")
    };
    let source = run.bundle_source.replace(
        "[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"",
        "[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\nblocked_context_fields = [\"focus_brand\"]",
    );
    let bundle =
        docket_policies::PolicyBundle::from_toml_str(&source, "new.toml").expect("compiles");
    let plan = plan_fork(
        &log,
        docket_replay::ForkSpec {
            policies: Some((&bundle, &source, "new.toml")),
            ..spec(last)
        },
    )
    .expect("plans");
    let parting = plan.parting.expect("the fork parts");
    let first_carrier = log
        .iter()
        .position(|e| {
            matches!(e, RunEvent::AgentCallScheduled { request, .. }
                if request.decision_inputs.iter().any(|i| i.payload.get("focus_brand").is_some()))
        })
        .expect("a request carried it");
    let answer = log[first_carrier..]
        .iter()
        .position(|e| e.kind() == "agent.responded")
        .map(|p| (first_carrier + p + 1) as u64)
        .expect("its answer");
    assert_eq!(parting.seq, answer, "{parting:?}");
    assert_eq!(plan.live_from, answer);
    assert!(
        parting
            .differences
            .iter()
            .any(|d| d.path.ends_with("focus_brand")),
        "{parting:?}"
    );
    assert_eq!(plan.request.bundle_hash, bundle.hash().to_hex());

    // What cannot be forked is an error, before anything is recorded.
    assert!(matches!(
        plan_fork(&log, spec(last + 1)),
        Err(ForkError::OutOfRange { .. })
    ));
    let response = docket_decider::AgentResponse::success(
        docket_decider::CallId::from("golden-geo/call-99"),
        docket_decider::Confidence::High,
        vec![],
    );
    let unknown = plan_fork(
        &log,
        docket_replay::ForkSpec {
            output_override: Some(("call-99".into(), "a.json".into(), response)),
            ..spec(last)
        },
    );
    assert!(
        matches!(unknown, Err(ForkError::UnknownCall { .. })),
        "{unknown:?}"
    );
}
