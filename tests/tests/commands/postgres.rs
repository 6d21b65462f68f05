//! The commands over a PostgreSQL store (`--store postgres://...`, docs/postgres.md), each
//! test on its own database of the test binary's private cluster (skipped, said once,
//! when PostgreSQL is not installed and CI is unset): the quick start's run recorded in
//! the database and listed, shown, verified and exported from it; a run waiting for a
//! human resumed and approved from a terminal, which queue it for a worker that drives it
//! to its end, and another cancelled; `docket store migrate` twice; a schema
//! newer than docket refused; a server that is not there and a malformed URL said in
//! words naming the database, never its password.

use std::path::Path;
use std::process::{Command, Output};

use docket_store_postgres::{TestCluster, TestDatabase};
use docket_tests::{
    docket_bin, exit_code, geo_agents_built, geo_workflow, one_agent_workflow, stdout_text,
    summary_run_id,
};

const AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

/// `docket ARGS --store URL --data DATA`, with neither DOCKET_STORE nor DOCKET_DATA from
/// the environment.
fn docket(url: &str, data: &Path, args: &[&str]) -> Output {
    Command::new(docket_bin())
        .args(args)
        .arg("--store")
        .arg(url)
        .arg("--data")
        .arg(data)
        .env_remove("DOCKET_STORE")
        .env_remove("DOCKET_DATA")
        .output()
        .expect("docket runs")
}

fn stderr_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// [`docket`], requiring exit code `code`; what it printed on stdout.
fn docket_exits(url: &str, data: &Path, args: &[&str], code: i32) -> String {
    let out = docket(url, data, args);
    assert_eq!(
        exit_code(&out),
        code,
        "docket {args:?}: {}{}",
        stdout_text(&out),
        stderr_text(&out)
    );
    stdout_text(&out)
}

fn database() -> Option<TestDatabase> {
    TestCluster::shared().map(TestCluster::database)
}

#[test]
fn the_quick_start_run_is_recorded_listed_verified_and_exported_from_postgres() {
    let Some(db) = database() else { return };
    geo_agents_built();
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let url = db.url.as_str();

    let out = docket(
        url,
        &data,
        &["run", geo_workflow().to_str().expect("UTF-8")],
    );
    assert_eq!(
        exit_code(&out),
        0,
        "{}{}",
        stdout_text(&out),
        stderr_text(&out)
    );
    let run = summary_run_id(&out);
    assert!(
        stdout_text(&out).starts_with(&format!("run {run} (geo): completed")),
        "{}",
        stdout_text(&out)
    );

    let runs = docket_exits(url, &data, &["runs"], 0);
    let line = runs
        .lines()
        .find(|l| l.starts_with(&format!("{run}\t")))
        .unwrap_or_else(|| panic!("{run} listed: {runs}"));
    assert!(line.contains("\tgeo\tcompleted\t"), "{runs}");
    // The same listing with the database named by DOCKET_STORE.
    let by_env = Command::new(docket_bin())
        .args(["runs", "--data"])
        .arg(&data)
        .env("DOCKET_STORE", url)
        .env_remove("DOCKET_DATA")
        .output()
        .expect("docket runs");
    assert_eq!(exit_code(&by_env), 0, "{}", stderr_text(&by_env));
    assert_eq!(stdout_text(&by_env), runs);
    // Nothing of the run went to the data directory: it lists no run there.
    let local = Command::new(docket_bin())
        .args(["runs", "--data"])
        .arg(&data)
        .env_remove("DOCKET_STORE")
        .env_remove("DOCKET_DATA")
        .output()
        .expect("docket runs");
    assert!(
        !stdout_text(&local).contains(&run),
        "{}",
        stdout_text(&local)
    );

    let status = docket_exits(url, &data, &["status", &run], 0);
    assert!(status.contains("completed"), "{status}");
    assert!(!status.contains("interrupted"), "{status}");
    let events = docket_exits(url, &data, &["events", &run], 0);
    assert!(events.lines().count() > 10, "{events}");
    assert!(events.contains("run.completed"), "{events}");

    let verify = docket_exits(url, &data, &["verify"], 0);
    assert!(
        verify.contains(&format!("ok    {run}  ")),
        "the run verified: {verify}"
    );
    // The store's first command made its key: the run is sealed from the first.
    assert!(
        verify.contains("sealed by") && verify.contains("0 failed; database key "),
        "{verify}"
    );
    assert!(!verify.contains("FAIL"), "{verify}");
    let one = docket_exits(url, &data, &["verify", &run], 0);
    assert!(one.contains(&format!("ok    {run}  ")), "{one}");

    let file = tmp.path().join("run.jsonl");
    docket_exits(
        url,
        &data,
        &[
            "export",
            &run,
            "--format",
            "jsonl",
            "--out",
            file.to_str().expect("UTF-8"),
        ],
        0,
    );
    let checked = docket_exits(
        url,
        &data,
        &["verify-export", file.to_str().expect("UTF-8")],
        0,
    );
    assert!(!checked.is_empty());

    // The forensics commands read the database too.
    docket_exits(url, &data, &["replay", &run], 0);
    docket_exits(url, &data, &["inspect", &run, "--at", "3"], 0);
    docket_exits(url, &data, &["prove", &run, "--seq", "2"], 0);
    docket_exits(url, &data, &["diff", &run, &run], 0);
}

#[test]
fn a_person_decides_from_a_terminal_and_a_worker_drives_the_run_on() {
    let Some(db) = database() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let url = db.url.as_str();
    // It asks a person to choose, and is called again with the answer.
    let asks = one_agent_workflow(tmp.path(), "asks", "asks", AGENT, &["ask"]);
    let waits = one_agent_workflow(
        tmp.path(),
        "waits",
        "waits",
        AGENT,
        &["escalate_then_finish"],
    );
    docket_exits(
        url,
        &data,
        &["run", asks.to_str().expect("UTF-8"), "--run-id", "run-a"],
        3,
    );
    docket_exits(
        url,
        &data,
        &["run", waits.to_str().expect("UTF-8"), "--run-id", "run-b"],
        3,
    );
    let waiting = docket_exits(url, &data, &["runs", "--waiting"], 0);
    assert_eq!(waiting.lines().count(), 2, "{waiting}");

    // Workers drive the runs of a shared store: a resume or a decision from a terminal
    // is recorded and the run queued for them, never driven in the terminal's process.
    let resumed = docket_exits(url, &data, &["resume", "run-a"], 0);
    assert_eq!(
        resumed,
        "run run-a: waiting for a human; queued for workers, follow it with: docket status run-a\n"
    );
    let approved = docket_exits(
        url,
        &data,
        &[
            "approve", "run-a", "ticket-1", "--choose", "1", "--by", "ana", "--reason", "fine",
        ],
        0,
    );
    assert_eq!(
        approved,
        "run run-a: running; queued for workers, follow it with: docket status run-a\n"
    );
    let runs = docket_exits(url, &data, &["runs"], 0);
    assert!(runs.contains("run-a\tasks\trunning\t"), "{runs}");
    docket_exits(
        url,
        &data,
        &["cancel", "run-b", "--by", "ana", "--reason", "not needed"],
        0,
    );

    // A worker takes the decided run and drives it to its end.
    let mut worker = Command::new(docket_bin())
        .args([
            "worker",
            "--store",
            url,
            "--name",
            "terminal-test",
            "--data",
        ])
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("docket worker");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let runs = loop {
        let runs = docket_exits(url, &data, &["runs"], 0);
        if runs.contains("run-a\tasks\tcompleted\t") {
            break runs;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run-a not completed by the worker within 60 s: {runs}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let _ = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    let stopped = worker.wait().expect("the worker stops");
    assert!(stopped.success(), "{stopped:?}");
    assert!(runs.contains("run-b\twaits\tcancelled\t"), "{runs}");
    assert!(!runs.contains("waiting"), "{runs}");
    docket_exits(url, &data, &["verify"], 0);
}

/// docs/postgres.md, "Workers": a run whose agent waits on a timer is given back by the
/// worker, not held while it waits, with the time its timer is due; a worker claims it
/// when it falls due (not at its next renewal, 5 s apart), fires the timer once and drives
/// the run to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_gives_back_a_run_waiting_on_a_timer_and_a_worker_fires_it_when_due() {
    let Some(db) = database() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let url = db.url.as_str();
    let waits = one_agent_workflow(
        tmp.path(),
        "waits",
        "waits",
        AGENT,
        &["wait", "--for", "6s"],
    );
    let wf = waits.to_str().expect("UTF-8");
    docket_exits(url, &data, &["run", wf, "--run-id", "run-t", "--queue"], 0);
    let mut worker = Command::new(docket_bin())
        .args(["worker", "--store", url, "--name", "timers-test", "--data"])
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("docket worker");
    let store =
        docket_store_postgres::PostgresStore::open(docket_store_postgres::PostgresConfig::new(url))
            .await
            .expect("the database");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    // Waiting: no worker holds the run, and it is due within the 4 s it waits.
    let mut seen_waiting = None;
    loop {
        let leases = store.leases().await.expect("leases");
        let lease = leases.iter().find(|l| l.stream.as_str() == "run-t");
        if let Some(l) = lease.filter(|l| l.holder.is_none() && l.due_in_ms.is_some()) {
            seen_waiting = Some((l.runnable, l.due_in_ms));
        }
        let runs = docket_exits(url, &data, &["runs"], 0);
        if runs.contains("run-t\twaits\tcompleted\t") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run-t not completed within 60 s: {runs}; {leases:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    assert!(worker.wait().expect("the worker stops").success());
    let (queued, due_in_ms) =
        seen_waiting.expect("the run was seen given back, waiting on its timer");
    assert!(!queued, "a run waiting on a timer is not queued");
    assert!(due_in_ms.is_some_and(|ms| ms <= 6_000), "{due_in_ms:?}");
    let events = docket_exits(url, &data, &["events", "run-t"], 0);
    assert_eq!(events.matches("timer.fired").count(), 1, "{events}");
    // Fired when due: a worker looking only at its renewals (every 5 s) would fire it
    // about 4 s late.
    let logged: Vec<serde_json::Value> =
        docket_exits(url, &data, &["events", "run-t", "--json"], 0)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
    let at = |kind: &str, field: &str| {
        logged
            .iter()
            .find(|e| e["kind"] == kind)
            .and_then(|e| e["payload"][field].as_i64())
    };
    let late = at("timer.fired", "at_ms")
        .zip(at("timer.set", "due_at_ms"))
        .map(|(f, d)| f - d);
    assert!(
        late.is_some_and(|ms| (0..2_000).contains(&ms)),
        "fired {late:?} ms after due"
    );
    docket_exits(url, &data, &["verify"], 0);
}

/// docs/postgres.md#claim-order: a run queued for workers carries its bundle's
/// `[defaults] priority`; a worker with room for one run drives the HIGH one first, then
/// the NORMAL one, then the LOW one, though they were queued the other way round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_room_for_one_drives_queued_runs_high_then_normal_then_low() {
    let Some(db) = database() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let url = db.url.as_str();
    let runs = [
        ("run-low", "LOW"),
        ("run-normal", "NORMAL"),
        ("run-high", "HIGH"),
    ];
    for (run, priority) in runs {
        let dir = tmp.path().join(run);
        std::fs::create_dir(&dir).expect("mkdir");
        let wf = one_agent_workflow(&dir, run, run, AGENT, &["finish"]);
        let bundle = dir.join("policy.toml");
        let mut text = std::fs::read_to_string(&bundle).expect("bundle");
        text.push_str(&format!("[defaults]\npriority = {priority:?}\n"));
        std::fs::write(&bundle, text).expect("bundle");
        let wf = wf.to_str().expect("UTF-8");
        docket_exits(url, &data, &["run", wf, "--run-id", run, "--queue"], 0);
    }
    let store =
        docket_store_postgres::PostgresStore::open(docket_store_postgres::PostgresConfig::new(url))
            .await
            .expect("the database");
    let queued: Vec<(String, &str)> = store
        .leases()
        .await
        .expect("leases")
        .iter()
        .map(|l| (l.stream.as_str().to_owned(), l.priority.as_str()))
        .collect();
    assert_eq!(
        queued,
        [
            ("run-high".to_owned(), "HIGH"),
            ("run-low".to_owned(), "LOW"),
            ("run-normal".to_owned(), "NORMAL")
        ]
    );
    let mut worker = Command::new(docket_bin())
        .args(["worker", "--store", url, "--name", "one-at-a-time"])
        .args(["--concurrency", "1", "--data"])
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("docket worker");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let listed = docket_exits(url, &data, &["runs"], 0);
        if listed.matches("\tcompleted\t").count() == runs.len() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the runs did not complete within 60 s: {listed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    assert!(worker.wait().expect("the worker stops").success());
    // One at a time: each run was driven to its end before the next was claimed, so the
    // order they completed in is the order they were claimed in.
    let completed_at = |run: &str| -> i64 {
        docket_exits(url, &data, &["events", run, "--json"], 0)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["kind"] == "run.completed")
            .and_then(|e| e["recorded_at_ns"].as_i64())
            .expect("run.completed")
    };
    let mut order: Vec<(i64, &str)> = runs.iter().map(|(r, _)| (completed_at(r), *r)).collect();
    order.sort_unstable();
    let order: Vec<&str> = order.into_iter().map(|(_, r)| r).collect();
    assert_eq!(order, ["run-high", "run-normal", "run-low"]);
}

#[test]
fn store_migrate_twice_applies_nothing_the_second_time() {
    let Some(db) = database() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // A command that reads creates nothing in an empty database: it says what it found,
    // and the migration below still finds no schema.
    let out = docket(&db.url, &data, &["runs"]);
    assert_eq!(exit_code(&out), 1, "{}", stdout_text(&out));
    assert!(
        stderr_text(&out).contains("holds no docket tables: it is not a docket store yet"),
        "{}",
        stderr_text(&out)
    );
    let first = docket_exits(&db.url, &data, &["store", "migrate"], 0);
    assert_eq!(
        first.trim(),
        "no docket schema found; applied versions 1, 2, 3, 4, 5, 6, 7; schema now at version 7"
    );
    let second = docket_exits(&db.url, &data, &["store", "migrate"], 0);
    assert_eq!(second.trim(), "schema at version 7; nothing to apply");
    let init = docket_exits(&db.url, &data, &["store", "init"], 0);
    assert_eq!(init.trim(), "schema at version 7; nothing to apply");

    // Without a PostgreSQL store: what these commands are for.
    let out = Command::new(docket_bin())
        .args(["store", "migrate", "--data"])
        .arg(&data)
        .env_remove("DOCKET_STORE")
        .output()
        .expect("docket runs");
    assert_eq!(exit_code(&out), 1);
    assert!(
        stderr_text(&out).contains("is for PostgreSQL stores"),
        "{}",
        stderr_text(&out)
    );
}

/// The database as messages name it: `postgres://USER@SOCKET_DIR:PORT/NAME`.
fn named(db: &TestDatabase) -> String {
    let host = db.url.split('@').nth(1).and_then(|h| h.split(':').next());
    format!(
        "postgres://docket@{}:5432/{}",
        host.expect("a socket directory").replace("%2F", "/"),
        db.name
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_on_an_empty_database_creates_nothing_and_says_to_init() {
    let Some(db) = database() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    for (args, doing) in [
        (&["runs"][..], "to read runs"),
        (&["status", "run-1"][..], "to read runs"),
        (&["events", "run-1"][..], "to read runs"),
        (&["verify"][..], "to verify it"),
        (&["kill-switch", "status"][..], "to read the kill switches"),
    ] {
        let out = docket(&db.url, &data, args);
        assert_eq!(
            (exit_code(&out), stderr_text(&out)),
            (
                1,
                format!(
                    "error: cannot open the PostgreSQL store {doing}: PostgreSQL at {} holds no docket tables: it is not a docket store yet (nothing was created, since this only reads): create docket's tables first with `docket store init --store URL` (a command that records runs creates them too)\n",
                    named(&db)
                )
            ),
            "{args:?}"
        );
    }
    let (client, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test database");
    let connection = tokio::spawn(connection);
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'docket%'",
            &[],
        )
        .await
        .expect("count tables")
        .get(0);
    assert_eq!(tables, 0, "the reads created nothing");
    drop(client);
    let _ = connection.await;
    // Once created, the same reads read.
    docket_exits(&db.url, &data, &["store", "init"], 0);
    assert_eq!(docket_exits(&db.url, &data, &["runs"], 0), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_newer_than_docket_is_refused_naming_its_version() {
    let Some(db) = database() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    docket_exits(&db.url, &data, &["store", "init"], 0);
    let (client, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test database");
    let connection = tokio::spawn(connection);
    client
        .execute(
            "INSERT INTO docket_schema (version, about) VALUES (99, 'from the future')",
            &[],
        )
        .await
        .expect("insert version 99");
    drop(client);
    let _ = connection.await;

    for args in [&["store", "migrate"][..], &["runs"][..]] {
        let out = docket(&db.url, &data, args);
        assert_eq!(exit_code(&out), 1, "{args:?}: {}", stderr_text(&out));
        let err = stderr_text(&out);
        assert!(err.contains("version 99"), "{args:?}: {err}");
        assert!(err.contains(&db.name), "{args:?} names the database: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_database_that_is_not_running_is_named_without_its_password() {
    if TestCluster::shared().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // A socket directory with no server in it.
    let socket = tmp.path().join("no-server");
    std::fs::create_dir(&socket).expect("socket directory");
    let host: String = socket
        .to_str()
        .expect("UTF-8")
        .replace('%', "%25")
        .replace('/', "%2F");
    let url = format!("postgres://ana:hunter2@{host}:5432/ledger");
    for args in [
        &["runs"][..],
        &["store", "migrate"][..],
        &["status", "run-1"][..],
    ] {
        let out = docket(&url, &data, args);
        let err = stderr_text(&out);
        assert_eq!(exit_code(&out), 1, "{args:?}: {err}");
        assert!(!err.contains("hunter2"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            err.contains(&format!("ana@{}:5432/ledger", socket.display())),
            "{args:?} names the database: {err}"
        );
        assert!(
            err.contains("connecting"),
            "{args:?} says what it did: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
    }
}

#[test]
fn a_malformed_url_is_said_as_such() {
    if TestCluster::shared().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    for url in ["postgres://x:y:z@", "postgres://ana:hunter2@db:port/ledger"] {
        let out = docket(url, &data, &["runs"]);
        let err = stderr_text(&out);
        assert_eq!(exit_code(&out), 1, "{url}: {err}");
        assert!(
            err.contains("the store URL is not a PostgreSQL connection string"),
            "{url}: {err}"
        );
        assert!(!err.contains("hunter2"), "{url}: {err}");
        assert!(!err.contains("panicked"), "{url}: {err}");
    }
}

/// Runs finished over PostgreSQL are sealed with the key of the driving process's data
/// directory; the database keeps the key's public half and the heads checkpoint, so
/// `docket verify --store` checks every seal from a machine that never had the key, and
/// a seal made with another key, or a heads checkpoint rewritten, fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seals_made_over_postgres_verify_where_the_key_never_was() {
    let Some(db) = database() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (data, elsewhere) = (tmp.path().join("data"), tmp.path().join("elsewhere"));
    let url = db.url.as_str();
    docket_exits(
        url,
        &data,
        &["keys", "generate", "--name", "ledger.example"],
        0,
    );
    let workflow = one_agent_workflow(tmp.path(), "sealed", "done", AGENT, &["finish"]);
    let out = docket(url, &data, &["run", workflow.to_str().expect("UTF-8")]);
    assert_eq!(exit_code(&out), 0, "{}", stderr_text(&out));
    let run = summary_run_id(&out);

    // From a data directory with no key: the database's key checks the seal.
    let verify = docket_exits(url, &elsewhere, &["verify", "--require-signed"], 0);
    let key = docket_exits(url, &data, &["keys", "show"], 0);
    // name+keyid: the key's base64 may hold a '+' of its own.
    let label = key
        .trim()
        .splitn(3, '+')
        .take(2)
        .collect::<Vec<_>>()
        .join("+");
    assert!(
        verify.contains(&format!("ok    {run}  "))
            && verify.contains(&format!("sealed by {label}")),
        "{verify}"
    );
    assert!(
        verify.contains(&format!(
            "ok    run heads  1 seals, checkpoint at 1 signed by {label}"
        )),
        "{verify}"
    );
    assert!(
        verify.ends_with(&format!(
            "1 run(s): 1 sound, 0 failed; database key {label}; verified\n"
        )),
        "{verify}"
    );

    // The run's signed checkpoint, kept by an auditor, is extended by the log now.
    let report: serde_json::Value = serde_json::from_str(&docket_exits(
        url,
        &elsewhere,
        &["verify", &run, "--json"],
        0,
    ))
    .expect("JSON");
    let note = report["runs"][0]["seals"][0]["checkpoint"]
        .as_str()
        .expect("a seal");
    let kept = tmp.path().join("kept.note");
    std::fs::write(&kept, note).expect("keep the checkpoint");
    let checked = docket_exits(
        url,
        &elsewhere,
        &[
            "verify",
            &run,
            "--checkpoint",
            kept.to_str().expect("UTF-8"),
        ],
        0,
    );
    assert!(checked.contains("ok    checkpoint "), "{checked}");

    // Another key given: the seal vouches for nothing.
    docket_exits(
        url,
        &elsewhere,
        &["keys", "generate", "--name", "other.example"],
        0,
    );
    let other = docket_exits(url, &elsewhere, &["keys", "show"], 0);
    let refused = docket_exits(
        url,
        &elsewhere,
        &["verify", "--require-signed", "--key", other.trim()],
        1,
    );
    assert!(refused.contains(&format!("FAIL  {run}  ")), "{refused}");
    assert!(refused.contains("VERIFICATION FAILED"), "{refused}");

    // The heads checkpoint rewritten in the database to cover what it never signed.
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test database");
    let connection = tokio::spawn(connection);
    client
        .execute(
            "UPDATE docket_heads_checkpoints SET note = replace(note, E'\n1\n', E'\n2\n')",
            &[],
        )
        .await
        .expect("rewrite the checkpoint");
    drop(client);
    let _ = connection.await;
    let rewritten = docket_exits(url, &elsewhere, &["verify"], 1);
    assert!(
        rewritten.contains("FAIL  run heads  heads checkpoint: "),
        "{rewritten}"
    );
}

/// Without any key, `--require-signed` fails over PostgreSQL as over a data directory.
#[test]
fn a_new_store_makes_its_key_and_without_one_require_signed_fails() {
    let Some(db) = database() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let out = docket(&db.url, &data, &["store", "init"]);
    assert_eq!(exit_code(&out), 0, "{}", stderr_text(&out));
    let said = stderr_text(&out);
    assert!(
        said.contains("signing key made for PostgreSQL at"),
        "{said}"
    );
    let shown = docket_exits(&db.url, &data, &["keys", "show"], 0);
    // The public half is in the database at once: verify trusts it from anywhere.
    let elsewhere = tmp.path().join("elsewhere");
    let out = docket_exits(&db.url, &elsewhere, &["verify", "--require-signed"], 0);
    assert!(
        out.contains(&format!(
            "database key {}",
            shown
                .trim()
                .split('+')
                .take(2)
                .collect::<Vec<_>>()
                .join("+")
        )),
        "{out}"
    );

    // A store made with signing turned off has no key to check seals with.
    let unsigned = TestCluster::shared()
        .map(TestCluster::database)
        .expect("database");
    let out = Command::new(docket_bin())
        .args(["store", "init", "--store", &unsigned.url, "--data"])
        .arg(&elsewhere)
        .env_remove("DOCKET_STORE")
        .env("DOCKET_SIGNING_KEY", "none")
        .output()
        .expect("docket runs");
    assert_eq!(exit_code(&out), 0, "{}", stderr_text(&out));
    assert!(
        !stderr_text(&out).contains("signing key made"),
        "{}",
        stderr_text(&out)
    );
    let out = docket_exits(
        &unsigned.url,
        &elsewhere,
        &["verify", "--require-signed"],
        1,
    );
    assert!(out.contains("no key to check seals with"), "{out}");
}

/// `--store` naming a directory is `--data`; two different ones are refused.
#[test]
fn a_store_and_a_data_directory_naming_two_directories_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = Command::new(docket_bin())
        .args(["runs", "--store"])
        .arg(tmp.path().join("one"))
        .arg("--data")
        .arg(tmp.path().join("two"))
        .output()
        .expect("docket runs");
    assert_eq!(exit_code(&out), 2, "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("two different data directories"),
        "{}",
        stderr_text(&out)
    );
}

/// `docket ARGS` with no store of the environment.
fn docket_plain(args: &[&str]) -> Output {
    Command::new(docket_bin())
        .args(args)
        .env_remove("DOCKET_STORE")
        .env_remove("DOCKET_DATA")
        .output()
        .expect("docket runs")
}

#[test]
fn a_data_directory_copied_into_postgres_and_back_exports_the_same_bytes() {
    let Some(db) = database() else { return };
    geo_agents_built();
    let tmp = tempfile::tempdir().expect("tempdir");
    let (data, back) = (tmp.path().join("data"), tmp.path().join("back"));
    let url = db.url.as_str();
    let out = docket_plain(&[
        "run",
        geo_workflow().to_str().expect("UTF-8"),
        "--data",
        data.to_str().expect("UTF-8"),
    ]);
    assert_eq!(exit_code(&out), 0, "{}", stderr_text(&out));
    let run = summary_run_id(&out);
    let copy = |from: &str, to: &str| {
        let out = docket_plain(&["store", "copy", "--from", from, "--to", to]);
        assert_eq!(
            exit_code(&out),
            0,
            "{}{}",
            stdout_text(&out),
            stderr_text(&out)
        );
        stdout_text(&out)
    };
    let said = copy(data.to_str().expect("UTF-8"), url);
    assert!(
        said.contains("streams copied") && !said.starts_with("0 streams"),
        "{said}"
    );
    // Again: everything is there already.
    let again = copy(data.to_str().expect("UTF-8"), url);
    assert!(again.starts_with("0 streams copied"), "{again}");
    copy(url, back.to_str().expect("UTF-8"));
    // Each export written to a file of its own, and the files compared byte for byte.
    let export = |name: &str, args: &[&str]| {
        let file = tmp.path().join(name);
        let mut all = vec![
            "export",
            run.as_str(),
            "--format",
            "jsonl",
            "--out",
            file.to_str().expect("UTF-8"),
        ];
        all.extend_from_slice(args);
        let out = docket_plain(&all);
        assert_eq!(exit_code(&out), 0, "{}", stderr_text(&out));
        let bytes = std::fs::read(&file).expect("the export");
        assert!(
            bytes.starts_with(b"{") && bytes.len() > 1000,
            "{name}: {}",
            String::from_utf8_lossy(&bytes)
        );
        bytes
    };
    let original = export("original.jsonl", &["--data", data.to_str().expect("UTF-8")]);
    let in_postgres = export(
        "in-postgres.jsonl",
        &["--store", url, "--data", data.to_str().expect("UTF-8")],
    );
    let returned = export("returned.jsonl", &["--data", back.to_str().expect("UTF-8")]);
    assert_eq!(
        original, in_postgres,
        "the export from PostgreSQL differs from the data directory's"
    );
    assert_eq!(
        original, returned,
        "the export after the round trip differs"
    );
    let verified = docket_plain(&["verify", "--store", url]);
    assert_eq!(exit_code(&verified), 0, "{}", stderr_text(&verified));
    let verified = docket_plain(&["verify", "--data", back.to_str().expect("UTF-8")]);
    assert_eq!(exit_code(&verified), 0, "{}", stderr_text(&verified));
}

#[test]
fn tokens_made_with_a_postgres_store_are_kept_in_the_database_not_the_data_directory() {
    let Some(db) = database() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let url = db.url.as_str();
    let token = docket_exits(
        url,
        &a,
        &["token", "create", "--name", "alice", "--role", "approver"],
        0,
    );
    let token = token.trim();
    assert!(
        token.starts_with("dkt_") && token.len() == 4 + 64,
        "a token's text: {token}"
    );
    assert!(
        !a.join("api").join("tokens.json").exists(),
        "no token file in the data directory"
    );
    // Another process with another data directory sees it, by name and role only.
    let listed = docket_exits(url, &b, &["token", "list"], 0);
    let fields: Vec<&str> = listed.trim().split('\t').collect();
    assert_eq!(fields[..2], ["alice", "approver"], "{listed}");
    assert!(!listed.contains(token), "the list never shows a token");
    let again = docket(
        url,
        &b,
        &["token", "create", "--name", "alice", "--role", "viewer"],
    );
    assert_eq!(exit_code(&again), 1, "{}", stderr_text(&again));
    assert!(
        stderr_text(&again).contains(
            "a token named `alice` exists already (revoke it first: docket token revoke alice)"
        ),
        "{}",
        stderr_text(&again)
    );
    assert_eq!(
        docket_exits(url, &b, &["token", "revoke", "alice"], 0).trim(),
        "token `alice` (approver) revoked"
    );
    assert_eq!(docket_exits(url, &a, &["token", "list"], 0), "");
    let gone = docket(url, &a, &["token", "revoke", "alice"]);
    assert_eq!(exit_code(&gone), 1);
    assert!(
        stderr_text(&gone).contains("no token named `alice` in PostgreSQL at "),
        "{}",
        stderr_text(&gone)
    );
}

/// Schedules over PostgreSQL (docs/schedules.md#over-postgresql): two workers fire the
/// schedules of one database, and each instant due is fired once: one firing recorded per
/// instant, one run per firing started, no instant left out.
#[test]
fn two_workers_fire_each_instant_of_a_schedule_once() {
    let Some(db) = database() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let url = db.url.as_str();
    let quick = one_agent_workflow(tmp.path(), "sched", "quick", AGENT, &["finish"]);
    let wf = quick.to_str().expect("UTF-8");
    let names = ["tick-a", "tick-b", "tick-c", "tick-d"];
    for name in names {
        docket_exits(
            url,
            &data,
            &[
                "schedule",
                "add",
                name,
                "--workflow",
                wf,
                "--every",
                "1s",
                "--catch-up",
                "all",
                "--by",
                "ops",
            ],
            0,
        );
    }
    let workers: Vec<_> = ["one", "two"]
        .iter()
        .map(|name| {
            Command::new(docket_bin())
                .args(["worker", "--store", url, "--name", name, "--data"])
                .arg(&data)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("docket worker")
        })
        .collect();
    let show = |name: &str| -> serde_json::Value {
        serde_json::from_str(&docket_exits(
            url,
            &data,
            &["schedule", "show", name, "--limit", "10000", "--json"],
            0,
        ))
        .expect("json")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let fewest = names
            .iter()
            .map(|n| show(n)["firings"].as_array().map_or(0, Vec::len))
            .min()
            .unwrap_or(0);
        if fewest >= 6 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the schedules did not fire 6 times each within 90 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    for worker in &workers {
        let _ = Command::new("kill")
            .args(["-TERM", &worker.id().to_string()])
            .status();
    }
    for mut worker in workers {
        assert!(worker.wait().expect("the worker stops").success());
    }
    let runs = docket_exits(url, &data, &["runs"], 0);
    let mut fired_by = std::collections::BTreeSet::new();
    for name in names {
        let s = show(name);
        let made = s["made_at_ms"].as_i64().expect("made");
        let firings = s["firings"].as_array().expect("firings");
        let mut dues: Vec<i64> = firings
            .iter()
            .map(|f| f["due_at_ms"].as_i64().expect("due"))
            .collect();
        dues.sort_unstable();
        let expected: Vec<i64> = (1..=i64::try_from(dues.len()).expect("few"))
            .map(|k| made + k * 1_000)
            .collect();
        assert_eq!(
            dues, expected,
            "{name}: each instant once, none left out: {s}"
        );
        let mut started = 0;
        for f in firings {
            fired_by.insert(f["fired_by"].as_str().unwrap_or_default().to_owned());
            match f["outcome"].as_str() {
                Some("started") => {
                    started += 1;
                    let run = f["run_id"].as_str().expect("a run");
                    assert_eq!(
                        runs.lines()
                            .filter(|l| l.starts_with(&format!("{run}\t")))
                            .count(),
                        1,
                        "{run}: {runs}"
                    );
                }
                Some("skipped") => assert!(f["previous_run"].is_string(), "{f}"),
                other => panic!("{name}: {other:?} in {s}"),
            }
        }
        let prefix = format!("{name}-");
        assert_eq!(
            runs.lines().filter(|l| l.starts_with(&prefix)).count(),
            started,
            "{name}: a run for each firing started, none other: {runs}"
        );
        assert!(started >= 1, "{name}: {s}");
    }
    assert!(
        fired_by
            .iter()
            .all(|w| w.starts_with("one") || w.starts_with("two")),
        "{fired_by:?}"
    );
    docket_exits(url, &data, &["verify"], 0);
}
