//! Workers over PostgreSQL killed and paused (docs/postgres.md, "Workers"): three `docket
//! worker` processes drive runs queued with `docket run --queue`, whose agents ask for side
//! effects served by the `effect-ledger` executor; a seeded random worker is killed with
//! SIGKILL (with the agents and executors it started) and started again, again and again;
//! once a worker is stopped with SIGSTOP past its lease and then continued, and once the
//! database is restarted under them all. Then every run completed; the executor's OWN
//! ledger and docket's log agree on every key: applied once with the result docket
//! recorded, under the fence of the claim that executed it, or given up by docket after
//! its execution went unanswered twice (the `execution_unanswered` refusal of
//! docs/events.md: a kill, or a lease lost under load, twice between `effect.started` and
//! the executor's answer) or refused before execution because the kill switches could not
//! be read while the database restarted, never applied twice and never executed again once
//! applied (a paused worker's late call is refused by its fence); a run whose effects all
//! applied ended exactly as a run driven without interruption; every chain verifies; and no run's log holds an event
//! appended under a claim older than one before it (the epochs the database keeps beside
//! each event never go back).
//!
//! `DOCKET_PG_CRASH_SEED` fixes the seed (printed on failure), `DOCKET_PG_CRASH_KILLS` the
//! number of kills (default 8) and `DOCKET_PG_CRASH_RUNS` the number of runs (default 12).
#![allow(clippy::print_stdout)] // the seed and counts, shown with --nocapture

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use docket_store_postgres::TestCluster;
use docket_tests::{SeededRng, docket_bin};
use serde_json::Value;

use super::effect_crash::{KEYS, duplicate_executes, kill_group, outcome_in, run_files};

const WORKERS: usize = 3;

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// `docket worker` in its own process group (so a kill takes its agents and executors),
/// its output kept in `log`.
fn worker(url: &str, data: &Path, name: &str, log: &Path) -> Child {
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(log)
        .expect("worker log");
    Command::new(docket_bin())
        .args([
            "worker",
            "--store",
            url,
            "--name",
            name,
            "--lease",
            "2",
            "--concurrency",
            "4",
            "--data",
        ])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("spawn docket worker")
}

fn signal(child: &Child, signal: &str) {
    let _ = Command::new("sh")
        .args(["-c", &format!("kill -{signal} -{}", child.id())])
        .stderr(Stdio::null())
        .status();
}

fn docket_ok(args: &[&str], data: &Path, url: &str) -> String {
    let out = Command::new(docket_bin())
        .args(args)
        .args(["--store", url, "--data"])
        .arg(data)
        .output()
        .expect("docket runs");
    assert!(
        out.status.success(),
        "docket {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn killed_and_paused_workers_lose_no_run_and_apply_no_effect_twice() {
    // A cluster of its own: the restart below must not reach the other tests' databases.
    let Some(cluster) = TestCluster::private() else {
        return;
    };
    let seed = setting("DOCKET_PG_CRASH_SEED", 0);
    let seed = if seed == 0 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 | 1)
    } else {
        seed
    };
    let kills = setting("DOCKET_PG_CRASH_KILLS", 8);
    let runs = setting("DOCKET_PG_CRASH_RUNS", 12);
    let db = cluster.database();
    let url = db.url.as_str();
    let dir = tempfile::tempdir().expect("tempdir");
    let (root, data) = (dir.path(), dir.path().join("data"));

    // The run as it ends without interruption, driven by the command that starts it.
    let reference = run_files(root, "reference");
    docket_ok(
        &[
            "run",
            reference.workflow.to_str().expect("utf-8"),
            "--run-id",
            "reference",
        ],
        &data,
        url,
    );
    let reference_outcome = outcome_in(&data, Some(url), "reference");
    assert_eq!(reference_outcome.1[0], "run.completed");

    let names: Vec<String> = (0..runs).map(|i| format!("shared-{i:03}")).collect();
    let mut files = Vec::new();
    for name in &names {
        let f = run_files(root, name);
        docket_ok(
            &[
                "run",
                f.workflow.to_str().expect("utf-8"),
                "--run-id",
                name,
                "--queue",
            ],
            &data,
            url,
        );
        files.push(f);
    }
    let log = root.join("workers.log");
    let mut workers: Vec<Child> = (0..WORKERS)
        .map(|i| worker(url, &data, &format!("w{i}"), &log))
        .collect();
    let mut rng = SeededRng(seed);
    let started = Instant::now();
    for k in 0..kills {
        std::thread::sleep(Duration::from_millis(100 + rng.below(500)));
        let i = usize::try_from(rng.below(WORKERS as u64)).unwrap_or(0);
        if k == kills / 4 {
            // The database restarted at once under every worker: each reconnects, and a
            // drive that failed with it is queued again.
            cluster.restart();
            continue;
        }
        if k == kills / 2 {
            // Paused past its lease: its runs are claimed by the others meanwhile, and
            // once continued its appends are refused and it stops driving them.
            signal(&workers[i], "STOP");
            std::thread::sleep(Duration::from_secs(3));
            signal(&workers[i], "CONT");
            continue;
        }
        kill_group(&mut workers[i]);
        let _ = workers[i].wait();
        workers[i] = worker(url, &data, &format!("w{i}"), &log);
    }
    // Every run settles: completed, under whichever worker holds it last.
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let listed = docket_ok(&["runs"], &data, url);
        let done = names
            .iter()
            .filter(|n| {
                listed
                    .lines()
                    .any(|l| l.contains(n.as_str()) && l.contains("completed"))
            })
            .count();
        if done == names.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: {done} of {} runs completed after 240 s; workers said:\n{}",
            names.len(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for w in &workers {
        signal(w, "TERM");
    }
    for w in &mut workers {
        let _ = w.wait();
    }
    let mut given_up = 0;
    for (name, f) in names.iter().zip(&files) {
        let applied = ledger_entries(&f.ledger);
        let recorded = recorded_effects(&data, url, name);
        // The executor's ledger and docket's log tell one story: a key applied once, with
        // the result docket recorded; a key absent, given up by docket after its execution
        // went unanswered twice (docs/effect-protocol.md) or refused unexecuted, never
        // applied behind its back.
        let told: BTreeMap<String, Option<Value>> = KEYS
            .iter()
            .map(|k| {
                let entries = applied.get(*k).cloned().unwrap_or_default();
                assert!(
                    entries.len() <= 1,
                    "seed {seed}: {name}: the executor applied {k} {} times",
                    entries.len()
                );
                ((*k).to_owned(), entries.into_iter().next())
            })
            .collect();
        if told != recorded {
            let events = docket_ok(&["events", name], &data, url);
            let effects: Vec<&str> = events.lines().filter(|l| l.contains("effect.")).collect();
            panic!(
                "seed {seed}: {name}: the executor's ledger says {told:?}, docket's log {recorded:?}; \
                 its effect events:\n{}\nworkers said:\n{}",
                effects.join("\n"),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert_eq!(
            duplicate_executes(&f.calls),
            0,
            "seed {seed}: {name}: docket executed a key already applied"
        );
        // Every key applied was executed under a fence (docs/effect-protocol.md, "Fences"):
        // the executor knows each claim's number, so a late call was refused, not applied.
        let fences = std::fs::read_to_string(f.ledger.with_extension("fences")).unwrap_or_default();
        for key in applied.keys() {
            assert!(
                fences
                    .lines()
                    .any(|l| l.split('\t').next() == Some(key.as_str())),
                "seed {seed}: {name}: {key} was executed without a fence"
            );
        }
        let outcome = outcome_in(&data, Some(url), name);
        if recorded.values().all(Option::is_some) {
            assert_eq!(
                outcome, reference_outcome,
                "seed {seed}: {name} ended otherwise than the uninterrupted run"
            );
        } else {
            // The agent was told the effect was refused, and finished all the same.
            given_up += 1;
            assert_eq!(
                outcome.1[0], "run.completed",
                "seed {seed}: {name}: {outcome:?}"
            );
        }
    }
    docket_ok(&["verify"], &data, url);
    // The claim each event was appended under never goes back within a run.
    let epochs = Command::new(cluster_psql())
        .args(["-d", url, "-At", "-c"])
        .arg("SELECT stream, string_agg(epoch::text, ',' ORDER BY seq) FROM docket_events WHERE epoch IS NOT NULL GROUP BY stream")
        .output()
        .expect("psql");
    assert!(
        epochs.status.success(),
        "{}",
        String::from_utf8_lossy(&epochs.stderr)
    );
    for line in String::from_utf8_lossy(&epochs.stdout).lines() {
        let (stream, list) = line.split_once('|').expect("stream|epochs");
        let list: Vec<u64> = list.split(',').map(|e| e.parse().expect("epoch")).collect();
        assert!(
            list.windows(2).all(|w| w[0] <= w[1]),
            "seed {seed}: {stream} holds events appended under an older claim after a newer one: {list:?}"
        );
    }
    println!(
        "seed {seed}: {kills} kills, one pause and one database restart over {runs} runs and {WORKERS} workers in {:?}; {given_up} runs had an effect given up unanswered",
        started.elapsed()
    );
}

/// The executor's own ledger: each key's results, in the order applied.
fn ledger_entries(ledger: &Path) -> BTreeMap<String, Vec<Value>> {
    let mut entries: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for line in std::fs::read_to_string(ledger).unwrap_or_default().lines() {
        let (key, result) = line.split_once('\t').expect("key<TAB>result");
        let result = serde_json::from_str(result).expect("a JSON result");
        entries.entry(key.to_owned()).or_default().push(result);
    }
    entries
}

/// What the run's log says became of each key: the result docket settled it with
/// (executed, or found applied when verified), or `None` when docket gave it up after
/// its execution went unanswered twice, or refused it because the kill switches could not
/// be read while the database restarted.
fn recorded_effects(data: &Path, url: &str, run: &str) -> BTreeMap<String, Option<Value>> {
    let mut keys = BTreeMap::new();
    let mut results: BTreeMap<String, Option<Value>> = BTreeMap::new();
    for line in docket_ok(&["events", run, "--json"], data, url).lines() {
        let e: Value = serde_json::from_str(line).expect("JSON line");
        let p = &e["payload"];
        let id = p["effect_id"].as_str().unwrap_or_default().to_owned();
        match e["kind"].as_str().unwrap_or_default() {
            "effect.requested" => {
                keys.insert(
                    id,
                    p["idempotency_key"].as_str().unwrap_or_default().to_owned(),
                );
            }
            "effect.applied" => {
                results.insert(id, Some(p["receipt"]["result"].clone()));
            }
            "effect.recovered" | "effect.verified" if p["verification"]["status"] == "applied" => {
                results.insert(id, Some(p["verification"]["result"].clone()));
            }
            "effect.refused" if p["rule_id"] == "execution_unanswered" => {
                results.insert(id, None);
            }
            // Refused before anything was executed: the kill switches could not be read
            // (the database restarting under the worker), which stops the effect as if
            // every switch were engaged (docs/governance.md#side-effects).
            "effect.refused"
                if p["rule_id"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("kill_switch.")) =>
            {
                results.insert(id, None);
            }
            _ => {}
        }
    }
    results
        .into_iter()
        .map(|(id, result)| (keys.get(&id).cloned().unwrap_or(id), result))
        .collect()
}

/// `psql` of the installed PostgreSQL.
fn cluster_psql() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("DOCKET_PG_BIN") {
        return Path::new(&dir).join("psql");
    }
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/psql"))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| "psql".into())
}
