//! Schedules through the binary (docs/schedules.md; issue 32 points 3 and 7): schedules
//! made with `docket schedule add` while no server runs fall due while docket is down;
//! `docket serve`, started afterwards, follows each one's catch-up rule (`latest` starts
//! the last instant and records the others as missed, `all` starts each), every run says
//! which schedule started it, and while a schedule's last run is still going its firings
//! follow its overlap rule (`skip`: nothing started; `cancel-previous`: that run cancelled
//! by the schedule, then a run started; `queue-one`: one firing queued, started once that
//! run ended). Nothing sleeps blindly: the test waits for the clock to
//! pass the instants it needs and polls the firings recorded.

use std::path::Path;
use std::time::{Duration, Instant};

use docket_tests::{
    docket_ok as ok, docket_on, exit_code, now_ms, one_agent_workflow, stdout_text,
};
use serde_json::Value;

fn show(data: &Path, name: &str) -> Value {
    serde_json::from_str(&ok(
        data,
        &["schedule", "show", name, "--limit", "1000", "--json"],
    ))
    .expect("json")
}

fn firings<'a>(schedule: &'a Value, outcome: &str) -> Vec<&'a Value> {
    schedule["firings"]
        .as_array()
        .expect("firings")
        .iter()
        .filter(|f| f["outcome"] == outcome)
        .collect()
}

/// The firings of the first round `docket serve` fired: those fired when the first was.
fn first_round(schedule: &Value) -> Vec<&Value> {
    let all = schedule["firings"].as_array().expect("firings");
    let first = all.iter().filter_map(|f| f["fired_at_ms"].as_i64()).min();
    all.iter()
        .filter(|f| f["fired_at_ms"].as_i64() == first)
        .collect()
}

fn ms(v: &Value) -> i64 {
    v.as_i64().expect("a number")
}

#[test]
fn schedules_due_while_docket_was_down_follow_their_catch_up_rule() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let agent = env!("CARGO_BIN_EXE_test-agent");
    let quick_dir = tmp.path().join("quick");
    let slow_dir = tmp.path().join("slow");
    std::fs::create_dir_all(&quick_dir).expect("dir");
    std::fs::create_dir_all(&slow_dir).expect("dir");
    let quick = one_agent_workflow(&quick_dir, "sched", "quick", agent, &["finish"]);
    let slow = one_agent_workflow(&slow_dir, "sched", "slow", agent, &["wait", "--for", "4s"]);
    let quick = quick.to_str().expect("utf-8");
    let slow = slow.to_str().expect("utf-8");
    for (name, workflow, rules) in [
        (
            "latest",
            quick,
            ["--catch-up", "latest", "--overlap", "queue-one"],
        ),
        (
            "all",
            quick,
            ["--catch-up", "all", "--overlap", "queue-one"],
        ),
        ("busy", slow, ["--catch-up", "latest", "--overlap", "skip"]),
        (
            "cancels",
            slow,
            ["--catch-up", "latest", "--overlap", "cancel-previous"],
        ),
        (
            "queues",
            slow,
            ["--catch-up", "latest", "--overlap", "queue-one"],
        ),
        ("pre", quick, ["--catch-up", "all", "--overlap", "skip"]),
    ] {
        let mut args = vec![
            "schedule",
            "add",
            name,
            "--workflow",
            workflow,
            "--every",
            "1s",
        ];
        args.extend(rules);
        args.extend(["--by", "ann"]);
        ok(&data, &args);
    }
    // A cron expression or time zone that is not one, a name taken: refused, nothing kept.
    for (args, says) in [
        (vec!["--cron", "0 25 * * *"], "--cron"),
        (
            vec!["--cron", "0 8 * * *", "--time-zone", "Atlantis/Capital"],
            "unknown time zone",
        ),
        (vec!["--every", "soon"], "--every"),
    ] {
        let mut full = vec!["schedule", "add", "bad", "--workflow", quick, "--by", "ann"];
        full.extend(args.iter().copied());
        let out = docket_on(&data, &full);
        assert_eq!(exit_code(&out), 1, "{full:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{full:?}: {err}");
    }
    let taken = docket_on(
        &data,
        &[
            "schedule",
            "add",
            "all",
            "--workflow",
            quick,
            "--every",
            "1h",
            "--by",
            "bob",
        ],
    );
    assert_eq!(exit_code(&taken), 1);
    assert!(String::from_utf8_lossy(&taken.stderr).contains("exists already"));
    let listed = ok(&data, &["schedule", "list"]);
    assert_eq!(listed.lines().count(), 6, "{listed}");
    // The run of `pre`'s second instant is recorded already, as by a firing cut short
    // before it moved the schedule on: firing it again must start no second run.
    let mut pre = show(&data, "pre");
    let pre_made = ms(&pre["made_at_ms"]);
    for extra in ["state", "firings"] {
        pre.as_object_mut().expect("an object").remove(extra);
    }
    let pre: docket_app::Schedule = serde_json::from_value(pre).expect("a schedule");
    let taken = pre.run_id(pre_made + 2_000);
    ok(&data, &["run", quick, "--run-id", &taken]);

    // docket is down while at least three instants of each fall due.
    let made = ms(&show(&data, "all")["made_at_ms"]).max(pre_made);
    let deadline = Instant::now() + Duration::from_secs(30);
    while now_ms() < made + 3_500 {
        assert!(Instant::now() < deadline, "the clock does not move");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        first_round(&show(&data, "all")).is_empty(),
        "nothing fired while docket was down"
    );

    let started_serve = now_ms();
    let (mut server, _addr) = docket_tests::start_serve(&data, Some(tmp.path()));
    let deadline = Instant::now() + Duration::from_secs(60);
    // A firing of `queues` queued, then started once the run before it ended.
    let queued_then_started = |s: &Value| {
        firings(s, "queued").iter().any(|q| {
            firings(s, "started")
                .iter()
                .any(|f| f["due_at_ms"] == q["due_at_ms"])
        })
    };
    let (latest, all, busy, cancels, queues) = loop {
        let (latest, all, busy) = (
            show(&data, "latest"),
            show(&data, "all"),
            show(&data, "busy"),
        );
        let (cancels, queues) = (show(&data, "cancels"), show(&data, "queues"));
        if !firings(&latest, "started").is_empty()
            && firings(&all, "started").len() >= 3
            && !firings(&busy, "skipped").is_empty()
            && !firings(&cancels, "started_after_cancelling").is_empty()
            && queued_then_started(&queues)
        {
            break (latest, all, busy, cancels, queues);
        }
        assert!(
            Instant::now() < deadline,
            "not fired under serve: {latest} {all} {busy} {cancels} {queues}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };

    // latest: one run, for the last instant due when serve started; the earlier instants
    // recorded as missed, late.
    let round = first_round(&latest);
    let started: Vec<_> = round.iter().filter(|f| f["outcome"] == "started").collect();
    let missed: Vec<_> = round.iter().filter(|f| f["outcome"] == "missed").collect();
    assert_eq!(started.len(), 1, "{latest}");
    assert!(missed.len() >= 2, "{latest}");
    let last_due = ms(&started[0]["due_at_ms"]);
    assert!(
        missed.iter().all(|f| ms(&f["due_at_ms"]) < last_due),
        "{latest}"
    );
    assert!(
        last_due <= now_ms() && last_due > started_serve - 1_000,
        "{latest}"
    );
    let made_latest = ms(&latest["made_at_ms"]);
    let mut dues: Vec<i64> = round.iter().map(|f| ms(&f["due_at_ms"])).collect();
    dues.sort_unstable();
    let expected: Vec<i64> = (1..=i64::try_from(dues.len()).expect("few"))
        .map(|k| made_latest + k * 1_000)
        .collect();
    assert_eq!(
        dues, expected,
        "every instant since it was made, once: {latest}"
    );
    assert!(
        missed.iter().all(|f| ms(&f["late_ms"]) >= 1_000),
        "{latest}"
    );

    // all: a run for every instant due while docket was down, in order, each once.
    let round = first_round(&all);
    assert!(round.iter().all(|f| f["outcome"] == "started"), "{all}");
    assert!(round.len() >= 3, "{all}");
    let made_all = ms(&all["made_at_ms"]);
    let mut runs = Vec::new();
    for (k, f) in round.iter().enumerate() {
        assert_eq!(
            ms(&f["due_at_ms"]),
            made_all + 1_000 * (i64::try_from(k).expect("few") + 1),
            "{all}"
        );
        runs.push(f["run_id"].as_str().expect("a run").to_owned());
    }
    let mut unique = runs.clone();
    unique.dedup();
    assert_eq!(unique, runs, "one run per instant");
    // Each run says which schedule started it, who made it and the instant.
    let events = ok(&data, &["events", &runs[0], "--json"]);
    let requested: Value =
        serde_json::from_str(events.lines().next().expect("run.requested")).expect("json");
    let scheduled = &requested["payload"]["scheduled"];
    assert_eq!(scheduled["schedule"], "all", "{requested}");
    assert_eq!(scheduled["made_by"], "ann");
    assert_eq!(ms(&scheduled["due_at_ms"]), made_all + 1_000);
    let status = docket_on(&data, &["status", &runs[0]]);
    assert!(
        stdout_text(&status).contains("started by schedule all (made by ann)"),
        "{}",
        stdout_text(&status)
    );
    let lines = ok(&data, &["events", &runs[0]]);
    assert!(
        lines
            .lines()
            .next()
            .is_some_and(|l| l.contains("started by schedule all (made by ann), due ")),
        "{lines}"
    );

    // busy: its run waits 4 s, and the firings meanwhile are skipped, naming that run;
    // none starts a run.
    let first = firings(&busy, "started")[0]["run_id"]
        .as_str()
        .expect("run")
        .to_owned();
    for f in firings(&busy, "skipped") {
        assert_eq!(f["previous_run"], first.as_str(), "{busy}");
        assert!(f.get("run_id").is_none(), "{busy}");
    }
    // cancels: the run going is cancelled by the schedule, then the firing's run starts.
    let after = firings(&cancels, "started_after_cancelling")[0];
    let cancelled = after["previous_run"].as_str().expect("the run cancelled");
    assert!(cancelled.starts_with("cancels-"), "{cancels}");
    let events = ok(&data, &["events", cancelled, "--json"]);
    let cancel: Value = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["kind"] == "run.cancelled")
        .unwrap_or_else(|| panic!("{cancelled} not cancelled: {events}"));
    assert_eq!(cancel["payload"]["by"], "schedule cancels", "{cancel}");
    assert!(after["run_id"].is_string(), "{after}");
    // queues: each queued firing names the run it waited behind.
    let queued = firings(&queues, "queued");
    assert!(
        queued.iter().all(|f| f["previous_run"].is_string()),
        "{queues}"
    );

    // pre: its second instant counted as started with the run recorded before, which is
    // the only run of that id, and not one a schedule started.
    let pre = show(&data, "pre");
    let second = first_round(&pre)
        .into_iter()
        .find(|f| ms(&f["due_at_ms"]) == pre_made + 2_000)
        .cloned()
        .unwrap_or_else(|| panic!("no firing of the second instant: {pre}"));
    assert_eq!(second["outcome"], "started", "{second}");
    assert_eq!(second["run_id"], taken.as_str(), "{second}");
    let events = ok(&data, &["events", &taken, "--json"]);
    let requested: Value =
        serde_json::from_str(events.lines().next().expect("run.requested")).expect("json");
    assert!(
        requested["payload"].get("scheduled").is_none(),
        "{requested}"
    );

    // Stopped, so that nothing fires between the two reads.
    let _ = server.kill();
    let _ = server.wait();
    let runs_listed = ok(&data, &["runs"]);
    let busy_runs = runs_listed
        .lines()
        .filter(|l| l.starts_with("busy-"))
        .count();
    assert_eq!(
        runs_listed
            .lines()
            .filter(|l| l.starts_with(&format!("{taken}\t")))
            .count(),
        1,
        "{runs_listed}"
    );
    assert_eq!(
        busy_runs,
        firings(&show(&data, "busy"), "started").len(),
        "a run for each firing started, none for those skipped: {runs_listed}"
    );
}
