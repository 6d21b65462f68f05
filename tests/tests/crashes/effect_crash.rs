//! The side-effect crash test (issue 5): `docket run` of a workflow whose agents ask for
//! side effects, served by the `effect-ledger` command executor, is killed with SIGKILL at
//! seeded random points (and so are the `docket resume`s that follow) together with the
//! agent and executor processes it started, as in a machine crash; then resumed until it
//! completes. Then, by the executor's OWN ledger (written by `effect-ledger`, never by
//! docket), every idempotency key was applied exactly once, and by its call log docket
//! never asked to execute a key already applied; the run's output (the root episode's
//! EpisodeResult), its handoffs and its episodes' results and stops equal those of an
//! uninterrupted run; every log replays.
//!
//! `DOCKET_EFFECT_CRASH_SEED` fixes the seed (it is printed on failure) and
//! `DOCKET_EFFECT_CRASH_KILLS` the number of kills (default 100).
#![allow(clippy::print_stdout)] // the seed and counts, shown with --nocapture

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use docket_decider::{RunEvent, recorded_bundle, replay_check};
use docket_runtime::Runtime;
use docket_store::{EmbeddedStore, StoreConfig};
use docket_tests::{SeededRng, docket_bin};
use serde_json::{Value, json};

const AGENT: &str = env!("CARGO_BIN_EXE_effect-agent");
const LEDGER: &str = env!("CARGO_BIN_EXE_effect-ledger");

/// Every key the workflow applies: the writer's three publishes on the `api` lane (dry
/// run required), then the announcer's two on `feed`.
pub(crate) const KEYS: [&str; 5] = ["a-1", "a-2", "w-1", "w-2", "w-3"];

const BUNDLE: &str = r#"
bundle = { id = "effect-crash" }
[[agents]]
id = "external"
[[agents]]
id = "writer"
side_effects = ["publish"]
[[agents]]
id = "announcer"
side_effects = ["publish"]

[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = true

[[side_effects]]
id = "publish-feed"
kind = "publish"
lane = "feed"
dry_run_required = false

[interactions]
allowed = [
  { from = "external", to = "writer" },
  { from = "writer", to = "announcer" },
  { from = "announcer", to = "external" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// One run's files: its workflow, and the ledger its executor keeps.
pub(crate) struct RunFiles {
    pub(crate) workflow: PathBuf,
    pub(crate) ledger: PathBuf,
    pub(crate) calls: PathBuf,
}

pub(crate) fn run_files(root: &Path, run: &str) -> RunFiles {
    let dir = root.join(run);
    std::fs::create_dir_all(&dir).expect("run dir");
    let bundle = root.join("bundle.toml");
    if !bundle.exists() {
        std::fs::write(&bundle, BUNDLE).expect("write bundle");
        std::fs::write(root.join("input.json"), r#"{"campaign": "launch"}"#).expect("input");
    }
    let files = RunFiles {
        workflow: dir.join("workflow.toml"),
        ledger: dir.join("ledger.tsv"),
        calls: dir.join("calls.tsv"),
    };
    let text = format!(
        "name = \"effect-crash\"\npolicy = {bundle:?}\nentry = \"writer\"\ninput = {:?}\n\
         [agents.writer]\ncommand = {AGENT:?}\n\
         args = [\"--prefix\", \"w\", \"--count\", \"3\", \"--lane\", \"api\", \"--to\", \"announcer\"]\n\
         [agents.announcer]\ncommand = {AGENT:?}\n\
         args = [\"--prefix\", \"a\", \"--count\", \"2\", \"--lane\", \"feed\", \"--episode-result\"]\n\
         [effects.publish]\ncommand = {LEDGER:?}\nargs = [\"--ledger\", {:?}, \"--calls\", {:?}]\n\
         timeout_ms = 10000\n",
        root.join("input.json"),
        files.ledger,
        files.calls,
    );
    std::fs::write(&files.workflow, text).expect("write workflow");
    files
}

fn docket(data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(docket_bin());
    cmd.args(args)
        .arg("--data")
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own process group: the agents and the effect executor docket starts share
        // it, so a kill takes them all down at once, as a machine crash would.
        .process_group(0);
    cmd
}

/// SIGKILL to docket and every process it started (its process group), so no executor
/// outlives it to finish an execution the next docket cannot know about. False when
/// docket had already exited (nothing to kill).
pub(crate) fn kill_group(child: &mut std::process::Child) -> bool {
    let killed = Command::new("sh")
        .args(["-c", &format!("kill -KILL -{}", child.id())])
        .stderr(Stdio::null())
        .status()
        .expect("sh runs kill")
        .success();
    if !killed {
        assert!(
            child.try_wait().expect("try_wait").is_some(),
            "cannot kill process group {}",
            child.id()
        );
    }
    killed
}

/// What must not change: each handoff, each episode's result and stop, and how the run
/// ended (with its output).
pub(crate) fn outcome(data: &Path, run: &str) -> (Vec<Value>, Value) {
    outcome_in(data, None, run)
}

/// [`outcome`] of a run recorded in the PostgreSQL store `store` when one is given.
pub(crate) fn outcome_in(data: &Path, store: Option<&str>, run: &str) -> (Vec<Value>, Value) {
    let mut command = Command::new(docket_bin());
    command.args(["events", run, "--json", "--data"]).arg(data);
    if let Some(url) = store {
        command.args(["--store", url]);
    }
    let out = command.output().expect("docket events");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut handoffs = Vec::new();
    let mut end = Value::Null;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let e: Value = serde_json::from_str(line).expect("JSON line");
        let p = &e["payload"];
        match e["kind"].as_str().unwrap_or_default() {
            "handoff.allowed" | "handoff.denied" => handoffs.push(json!([
                e["kind"],
                p["from"],
                p["to"],
                p["output_type"],
                p["delivered"]
            ])),
            // The EpisodeResults and how each episode stopped (not its usage: wall time
            // is recorded time, which a kill and resume stretch).
            "episode.finished" => handoffs.push(json!([e["kind"], p["episode_id"], p["result"]])),
            "episode.stopped" => handoffs.push(json!([
                e["kind"],
                p["episode_id"],
                p["condition"],
                p["rule_id"]
            ])),
            "run.completed" | "run.blocked" | "run.failed" => {
                end = json!([e["kind"], p["output"]]);
            }
            _ => {}
        }
    }
    (handoffs, end)
}

/// Applications per key, by the executor's own ledger file.
pub(crate) fn ledger_counts(ledger: &Path) -> BTreeMap<String, u32> {
    let mut counts = BTreeMap::new();
    for line in std::fs::read_to_string(ledger).unwrap_or_default().lines() {
        if let Some((key, _)) = line.split_once('\t') {
            *counts.entry(key.to_owned()).or_default() += 1;
        }
    }
    counts
}

/// How many `execute` calls found their key already applied (docket asked again after a
/// kill left it unsure; the executor's once-per-key duty absorbed it).
pub(crate) fn duplicate_executes(calls: &Path) -> usize {
    std::fs::read_to_string(calls)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("execute\t") && l.ends_with("\tduplicate"))
        .count()
}

#[test]
fn killed_runs_apply_every_effect_exactly_once_and_end_as_the_uninterrupted_run() {
    let seed = std::env::var("DOCKET_EFFECT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 | 1)
        });
    let target_kills: u32 = std::env::var("DOCKET_EFFECT_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let data = root.join("data");
    let expected: BTreeMap<String, u32> = KEYS.iter().map(|k| ((*k).to_owned(), 1)).collect();

    let reference_files = run_files(root, "reference");
    let workflow = reference_files.workflow.to_str().expect("utf-8 path");
    docket_bin(); // built (or found up to date) before the reference run is timed
    let started = Instant::now();
    let out = docket(&data, &["run", workflow, "--run-id", "reference"])
        .output()
        .expect("reference run");
    let reference_ms = started.elapsed().as_millis() as u64;
    assert!(
        out.status.success(),
        "the uninterrupted run completes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference = outcome(&data, "reference");
    assert_eq!(reference.1[0], "run.completed");
    assert!(
        reference
            .0
            .iter()
            .any(|s| s[0] == "episode.stopped" && s[1] == "ep-1" && s[2] == "success_achieved"),
        "the root episode ends with success_achieved: {:?}",
        reference.0
    );
    // The run's output is the root episode's EpisodeResult, naming the announcer's two
    // publishes (the writer's three are in its decisions).
    assert_eq!(reference.1[1]["status"], "ok", "{}", reference.1);
    assert_eq!(
        reference.1[1]["artifacts_created"],
        json!(["post-a-1", "post-a-2"]),
        "the announcer's two publishes: {}",
        reference.1
    );
    assert_eq!(ledger_counts(&reference_files.ledger), expected);

    let mut rng = SeededRng(seed);
    let (mut kills, mut runs, mut duplicates) = (0u32, 0u32, 0usize);
    let mut run_ids = vec!["reference".to_owned()];
    while kills < target_kills {
        runs += 1;
        let run = format!("crash-{runs}");
        let files = run_files(root, &run);
        let workflow = files.workflow.to_str().expect("utf-8 path");
        // Kill this run's processes up to `planned` times at random points, then let one
        // resume finish undisturbed (so every run ends however slow the machine is).
        let planned = 3 + rng.below(8);
        let mut launches = 0;
        let mut started = false;
        loop {
            launches += 1;
            assert!(launches < 50, "seed {seed}: {run} never completed");
            let args: Vec<&str> = if started {
                vec!["resume", &run]
            } else {
                vec!["run", workflow, "--run-id", &run]
            };
            started = true;
            let mut child = docket(&data, &args).spawn().expect("spawn docket");
            if launches <= planned {
                // Effects run all along the run: kill anywhere in its first three quarters.
                let delay = rng.below((reference_ms * 3 / 4).max(20));
                std::thread::sleep(Duration::from_millis(delay));
                if child.try_wait().expect("try_wait").is_none() && kill_group(&mut child) {
                    let _ = child.wait();
                    kills += 1;
                    continue;
                }
            }
            let out = child.wait_with_output().expect("wait");
            if String::from_utf8_lossy(&out.stderr).contains(&format!("no run {run}")) {
                started = false;
                continue;
            }
            assert!(
                out.status.success(),
                "seed {seed}: {run} ended with {:?}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            break;
        }
        assert_eq!(
            ledger_counts(&files.ledger),
            expected,
            "seed {seed}: {run}: every key applied exactly once, by the executor's ledger"
        );
        // The executor's ledger absorbs a second execute of an applied key, so the ledger
        // alone cannot show docket asking twice; its call log can. With nothing outliving
        // a kill, docket executes again only after `verify` said the key was not applied.
        let duplicated = duplicate_executes(&files.calls);
        assert_eq!(
            duplicated, 0,
            "seed {seed}: {run}: docket executed an already applied key {duplicated} times"
        );
        duplicates += duplicated;
        let got = outcome(&data, &run);
        assert_eq!(
            got, reference,
            "seed {seed}: {run} differs from the uninterrupted run"
        );
        run_ids.push(run);
    }
    replay_all(&data, &run_ids, seed);
    println!(
        "seed {seed}: {kills} kills over {runs} runs, reference run {reference_ms} ms, \
         {duplicates} executes of an applied key absorbed by the executor"
    );
}

/// Every run's log replays: each batch is what the decider makes of its input.
fn replay_all(data: &Path, runs: &[String], seed: u64) {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let store = EmbeddedStore::open(data, StoreConfig::default())
            .await
            .expect("store opens");
        let runtime = Runtime::new(store);
        for run in runs {
            let events: Vec<RunEvent> = runtime
                .events(&run.into())
                .await
                .expect("events")
                .into_iter()
                .map(|e| e.event)
                .collect();
            let Some(RunEvent::RunRequested(requested)) = events.first() else {
                panic!("seed {seed}: {run} does not start with run.requested");
            };
            let bundle = recorded_bundle(requested).expect("recorded bundle compiles");
            if let Err(e) = replay_check(&events, &bundle) {
                panic!("seed {seed}: {run} does not replay: {e:?}");
            }
        }
    });
}
