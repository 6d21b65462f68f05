//! The engine's crash test: `docket run` of the geo pipeline is killed with SIGKILL at
//! seeded random points (and so are the `docket resume`s that follow), then resumed until
//! it completes; the final output and every recorded handoff must equal those of an
//! uninterrupted run with the same (deterministic) agents, and no call may be answered twice.
//!
//! `DOCKET_ENGINE_CRASH_SEED` fixes the seed (it is printed on failure) and
//! `DOCKET_ENGINE_CRASH_KILLS` the number of kills (default 100).
#![allow(clippy::print_stdout)] // the seed and kill count, shown with --nocapture

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use docket_tests::{SeededRng, docket_bin, geo_agents_built, geo_workflow};
use serde_json::Value;

fn docket(data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(docket_bin());
    cmd.args(args)
        .arg("--data")
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// What must not change: each handoff (who, to whom, what, exactly what was delivered)
/// and how the run ended.
fn outcome(data: &Path, run: &str) -> (Vec<Value>, Value) {
    let out = Command::new(docket_bin())
        .args(["events", run, "--json", "--data"])
        .arg(data)
        .output()
        .expect("docket events");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut handoffs = Vec::new();
    let mut end = Value::Null;
    let mut answered: BTreeMap<String, u32> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let e: Value = serde_json::from_str(line).expect("JSON line");
        let p = &e["payload"];
        match e["kind"].as_str().unwrap_or_default() {
            "handoff.allowed" | "handoff.denied" => handoffs.push(serde_json::json!([
                e["kind"],
                p["from"],
                p["to"],
                p["output_type"],
                p["input"],
                p["delivered"]
            ])),
            "agent.responded" | "agent.call_failed" => {
                *answered
                    .entry(p["request_id"].as_str().unwrap_or_default().to_owned())
                    .or_default() += 1;
            }
            "run.completed" | "run.blocked" | "run.failed" => {
                end = serde_json::json!([e["kind"], p["output"]]);
            }
            _ => {}
        }
    }
    assert!(
        answered.values().all(|n| *n == 1),
        "a call was answered twice in {run}: {answered:?}"
    );
    (handoffs, end)
}

#[test]
fn killed_runs_resume_to_the_same_handoffs_and_outcome() {
    geo_agents_built();
    let seed = std::env::var("DOCKET_ENGINE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 | 1)
        });
    let target_kills: u32 = std::env::var("DOCKET_ENGINE_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let workflow = geo_workflow();
    let workflow = workflow.to_str().expect("utf-8 path");

    let started = Instant::now();
    let status = docket(data, &["run", workflow, "--run-id", "reference"])
        .status()
        .expect("reference run");
    let reference_ms = started.elapsed().as_millis() as u64;
    assert!(status.success(), "the uninterrupted run completes");
    let reference = outcome(data, "reference");
    assert_eq!(reference.1[0], "run.completed");

    let mut rng = SeededRng(seed);
    let mut kills = 0u32;
    let mut runs = 0u32;
    while kills < target_kills {
        runs += 1;
        let run = format!("crash-{runs}");
        // Kill this run's processes up to `planned` times at random points, then let one
        // resume finish undisturbed (so every run ends however slow the machine is).
        let planned = 2 + rng.below(7);
        let mut launches = 0;
        let mut started = false;
        loop {
            launches += 1;
            assert!(launches < 50, "seed {seed}: {run} never completed");
            // Resume once a start was attempted; start again (with the same id) when the
            // resume finds no run because the killed start died before recording it.
            let args: Vec<&str> = if started {
                vec!["resume", &run]
            } else {
                vec!["run", workflow, "--run-id", &run]
            };
            started = true;
            let mut child = docket(data, &args).spawn().expect("spawn docket");
            if launches <= planned {
                // Most kills land inside the run's work; some after it ended (no kill then).
                let delay = rng.below(reference_ms.max(20) / 2);
                std::thread::sleep(Duration::from_millis(delay));
                if child.try_wait().expect("try_wait").is_none() {
                    child.kill().expect("SIGKILL");
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
        let got = outcome(data, &run);
        assert_eq!(
            got, reference,
            "seed {seed}: {run} differs from the uninterrupted run"
        );
    }
    println!("seed {seed}: {kills} kills over {runs} runs, reference run {reference_ms} ms");
}
