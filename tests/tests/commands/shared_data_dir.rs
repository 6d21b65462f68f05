//! One data directory, many `docket` processes (issue 17 point 1; store/FORMAT.md §10):
//! commands that read never lock, create or repair anything and work while a run is being
//! driven; a second process that records waits for the first and says whom it waits for;
//! a run whose driver died shows as interrupted; a damaged run is named while the others
//! stay readable.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};
use std::time::{Duration, Instant};

use docket_tests::{docket_bin, docket_on as docket, exit_code as code, stdout_text as stdout};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A one-agent workflow whose agent runs `test-agent ARGS`.
fn workflow(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    docket_tests::one_agent_workflow(dir, "shared", name, TEST_AGENT, args)
}

/// `docket ARGS --data DATA` started in the background (in its own process group, so a
/// kill takes its agents too), stderr piped.
fn spawn(data: &Path, args: &[&str]) -> Child {
    use std::os::unix::process::CommandExt as _;
    Command::new(docket_bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("docket starts")
}

/// Reads `child`'s stderr up to a line containing `what`; returns that line. Blocks on
/// the pipe: the line comes when the process says it, or the pipe closes (a failure).
fn line_with(err: &mut BufReader<ChildStderr>, what: &str) -> String {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = err.read_line(&mut line).expect("read stderr");
        assert!(
            n > 0,
            "stderr closed before a line with {what:?}; it said:\n{seen}"
        );
        if line.contains(what) {
            return line;
        }
        seen.push_str(&line);
    }
}

/// Waits until `path` exists (a gated agent creates it when a request reaches it).
fn wait_for_file(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn finish(child: Child) -> Output {
    child.wait_with_output().expect("docket ends")
}

/// The id a `run RUN recorded` line names.
fn recorded_id(line: &str) -> String {
    line.split_whitespace().nth(1).expect("run id").to_owned()
}

#[test]
fn reads_and_a_waiting_approval_go_on_while_a_run_is_driven() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    // A run waiting for a human, recorded first.
    let asks = workflow(dir.path(), "asks", &["escalate_then_finish"]);
    let out = docket(
        &data,
        &["run", asks.to_str().expect("utf-8"), "--run-id", "waits"],
    );
    assert_eq!(code(&out), 3, "{}", stdout(&out));

    // A run whose agent is held mid-call by the test.
    let gate = dir.path().join("gate");
    let held = workflow(
        dir.path(),
        "held",
        &["finish", "--gate", gate.to_str().expect("utf-8")],
    );
    let mut driver = spawn(&data, &["run", held.to_str().expect("utf-8")]);
    let mut driver_err = BufReader::new(driver.stderr.take().expect("stderr"));
    // The run id comes before the agent answers.
    let run = recorded_id(&line_with(&mut driver_err, " recorded; follow it with"));
    wait_for_file(&dir.path().join("gate.waiting"));

    let started = Instant::now();
    let out = docket(&data, &["runs"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let listing = stdout(&out);
    assert!(
        listing.contains(&format!("{run}\theld\trunning\t")),
        "{listing}"
    );
    assert!(
        listing.contains("waits\tasks\twaiting for a human\t"),
        "{listing}"
    );
    let out = docket(&data, &["status", &run]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).starts_with(&format!("run {run} (held): running")));
    assert!(!stdout(&out).contains("interrupted"), "{}", stdout(&out));
    let out = docket(&data, &["events", &run]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("run.requested"), "{}", stdout(&out));
    let out = docket(&data, &["runs", "--waiting"]);
    assert!(
        stdout(&out).contains("waits\tasks\twaiting for a human"),
        "{}",
        stdout(&out)
    );
    // Reading never waited for the writer (it used to stall 3 s and fail).
    assert!(started.elapsed() < Duration::from_secs(10));

    // A second recorder that will not wait is told who holds the directory.
    let out = docket(
        &data,
        &[
            "approve",
            "waits",
            "ticket-1",
            "--by",
            "ana",
            "--reason",
            "ok",
            "--lock-wait",
            "0.2",
        ],
    );
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let why = stderr(&out);
    assert!(
        why.contains(&format!("is being written by process {}", driver.id())),
        "{why}"
    );
    assert!(why.contains("docket run"), "{why}");
    assert!(why.contains("--lock-wait"), "{why}");

    // One that waits says so, and goes on once the driver lets go.
    let mut approve = spawn(
        &data,
        &[
            "approve", "waits", "ticket-1", "--by", "ana", "--reason", "ok",
        ],
    );
    let mut approve_err = BufReader::new(approve.stderr.take().expect("stderr"));
    let waiting = line_with(&mut approve_err, "waiting for process");
    assert!(waiting.contains(&driver.id().to_string()), "{waiting}");
    std::fs::write(&gate, b"").expect("open the gate");
    let out = finish(driver);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let out = finish(approve);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stdout(&out).starts_with("run waits (asks): completed"),
        "{}",
        stdout(&out)
    );

    let out = docket(&data, &["runs"]);
    let listing = stdout(&out);
    assert!(
        listing.contains(&format!("{run}\theld\tcompleted\t")),
        "{listing}"
    );
    assert!(listing.contains("waits\tasks\tcompleted\t"), "{listing}");
}

#[test]
fn a_run_whose_driver_died_is_interrupted_and_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let gate = dir.path().join("gate");
    let held = workflow(
        dir.path(),
        "held",
        &["finish", "--gate", gate.to_str().expect("utf-8")],
    );
    let mut driver = spawn(&data, &["run", held.to_str().expect("utf-8")]);
    let mut driver_err = BufReader::new(driver.stderr.take().expect("stderr"));
    let run = recorded_id(&line_with(&mut driver_err, " recorded; follow it with"));
    wait_for_file(&dir.path().join("gate.waiting"));
    // SIGKILL to docket and its agent: the kernel releases its lock.
    let killed = Command::new("sh")
        .args(["-c", &format!("kill -KILL -{}", driver.id())])
        .status()
        .expect("kill");
    assert!(killed.success());
    let _ = driver.wait();

    let out = docket(&data, &["runs"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!(
            "{run}\theld\tinterrupted (resume with: docket resume {run})\t"
        )),
        "{}",
        stdout(&out)
    );
    let out = docket(&data, &["status", &run]);
    assert!(
        stdout(&out).contains("interrupted: no process drives it"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains(&format!("docket resume {run}")));

    std::fs::write(&gate, b"").expect("open the gate");
    let out = docket(&data, &["resume", &run]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let out = docket(&data, &["runs"]);
    assert!(
        stdout(&out).contains(&format!("{run}\theld\tcompleted\t")),
        "{}",
        stdout(&out)
    );
}

#[test]
fn two_runs_started_at_once_on_a_fresh_directory_both_complete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("fresh");
    let wf = workflow(dir.path(), "quick", &["finish"]);
    let wf = wf.to_str().expect("utf-8");
    let a = spawn(&data, &["run", wf, "--run-id", "first"]);
    let b = spawn(&data, &["run", wf, "--run-id", "second"]);
    for (name, out) in [("first", finish(a)), ("second", finish(b))] {
        assert_eq!(code(&out), 0, "{name}: {}{}", stdout(&out), stderr(&out));
        assert!(!stderr(&out).contains("not a docket"), "{}", stderr(&out));
    }
    let listing = stdout(&docket(&data, &["runs"]));
    assert!(listing.contains("first\tquick\tcompleted"), "{listing}");
    assert!(listing.contains("second\tquick\tcompleted"), "{listing}");
}

#[test]
fn commands_that_read_say_when_there_is_no_data_directory_and_create_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("typo");
    let cases: &[&[&str]] = &[
        &["runs"],
        &["runs", "--waiting"],
        &["status", "r"],
        &["events", "r"],
        &["inspect", "r"],
        &["replay", "r"],
        &["replay", "--all"],
        &["diff", "r", "s"],
        &["export", "r", "--format", "jsonl"],
        &["prove", "r", "--seq", "1"],
    ];
    for args in cases {
        let out = docket(&missing, args);
        assert_eq!(code(&out), 1, "{args:?}: {}", stdout(&out));
        // Named as the directory, or as the run missing from it.
        let said = if args[0] == "runs" || args.contains(&"--all") {
            format!("no docket data directory at {}", missing.display())
        } else {
            format!(
                "in the data directory {}: it does not exist",
                missing.display()
            )
        };
        assert!(stderr(&out).contains(&said), "{args:?}: {}", stderr(&out));
        assert!(!missing.exists(), "{args:?} created {}", missing.display());
    }
}

#[test]
fn commands_that_read_leave_the_directory_byte_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let wf = workflow(dir.path(), "quick", &["finish"]);
    let out = docket(
        &data,
        &["run", wf.to_str().expect("utf-8"), "--run-id", "one"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let asks = workflow(dir.path(), "asks", &["escalate_then_finish"]);
    let out = docket(
        &data,
        &["run", asks.to_str().expect("utf-8"), "--run-id", "two"],
    );
    assert_eq!(code(&out), 3);
    let before = docket_tests::files_under(&data);
    let export = dir.path().join("one.jsonl");
    let cases: &[&[&str]] = &[
        &["runs"],
        &["runs", "--waiting"],
        &["status", "one"],
        &["status", "two", "--json"],
        &["events", "one", "--json"],
        &["inspect", "one", "--at", "first"],
        &["replay", "one"],
        &["replay", "--all"],
        &["diff", "one", "two"],
        &[
            "export",
            "one",
            "--format",
            "jsonl",
            "--out",
            export.to_str().expect("utf-8"),
        ],
        &["prove", "one", "--seq", "1"],
        &["verify"],
        &["circuits"],
    ];
    for args in cases {
        let out = docket(&data, args);
        assert!(
            code(&out) == 0 || (args[0] == "verify" && code(&out) == 1),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(
            docket_tests::files_under(&data) == before,
            "{args:?} changed the data directory"
        );
    }
}

/// Flips the last byte of event `seq`'s hash in run `run`'s record and re-seals its
/// batch's checksum: every frame stays intact, the run's chain breaks there.
fn damage_event(data: &Path, run: &str, seq: u64) {
    let path = data.join("log").join(format!("{:020}.seg", 1));
    let mut bytes = std::fs::read(&path).expect("segment");
    let mut at = 32;
    while at + 12 <= bytes.len() && &bytes[at..at + 4] == b"DKTB" {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4")) as usize;
        let payload = at + 12..at + 12 + len;
        let mut r = payload.start;
        while r < payload.end {
            let n = u32::from_le_bytes(bytes[r..r + 4].try_into().expect("4")) as usize;
            let body = r + 5..r + 4 + n;
            // The canonical body opens with the stream id and the sequence (store/FORMAT.md
            // §3), compressed or not; the two hashes after it stay plain.
            let canonical = match docket_store::open_record(&bytes[r..r + 4 + n]) {
                Ok((true, record)) => record[..record.len() - 64].to_vec(),
                _ => Vec::new(),
            };
            let stream_len = canonical.first().copied().unwrap_or(0) as usize;
            let stream = canonical.get(1..1 + stream_len).unwrap_or_default();
            if !canonical.is_empty()
                && stream == run.as_bytes()
                && canonical.get(1 + stream_len).map(|&b| u64::from(b)) == Some(seq)
            {
                bytes[body.end - 1] ^= 0xff;
                let crc = crc32fast::hash(&bytes[payload.clone()]);
                bytes[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
                std::fs::write(&path, &bytes).expect("write segment");
                return;
            }
            r += 4 + n;
        }
        at = payload.end;
    }
    panic!("no event {seq} of {run} in {}", path.display());
}

#[test]
fn a_damaged_run_is_named_and_the_others_stay_listed_and_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let wf = workflow(dir.path(), "quick", &["finish"]);
    for run in ["healthy-1", "broken", "healthy-2"] {
        let out = docket(
            &data,
            &["run", wf.to_str().expect("utf-8"), "--run-id", run],
        );
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    damage_event(&data, "broken", 2);

    let out = docket(&data, &["runs"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let listing = stdout(&out);
    assert!(listing.contains("healthy-1\tquick\tcompleted"), "{listing}");
    assert!(listing.contains("healthy-2\tquick\tcompleted"), "{listing}");
    assert!(
        listing.contains("broken\t?\tdamaged: event 2 fails its checks in "),
        "{listing}"
    );
    assert!(
        listing.contains("00000000000000000001.seg at byte offset"),
        "{listing}"
    );
    let out = docket(&data, &["status", "healthy-2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = docket(&data, &["events", "broken"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("stream broken is damaged from event 2 on"),
        "{}",
        stderr(&out)
    );
    // The auditor's check names it too.
    let out = docket(&data, &["verify"]);
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).contains("broken"), "{}", stdout(&out));
}
