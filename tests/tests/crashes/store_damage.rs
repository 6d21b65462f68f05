//! Damage is never mistaken for a crash (store/FORMAT.md §6, §15), through the `docket`
//! binary: a writer refuses to append after damage, damage to an acknowledged batch fails
//! `docket verify` and is named by `status`, each naming the file, the offset and the runs
//! recorded after it; a garbage marker and a stray file in `log/` are named as what they
//! are; a closed stdout or stderr ends a command quietly, never with a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use docket_store::{Scanned, scan_log};
use docket_tests::{docket_bin, docket_on as docket, exit_code as code, stdout_text as stdout};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A data directory (`<dir>/data`) holding one completed quick run per id, in order, and
/// the workflow that made them. Unsigned (`DOCKET_SIGNING_KEY=none`): the log holds the
/// runs' batches only, no seals between them.
fn runs(dir: &Path, ids: &[&str]) -> (PathBuf, PathBuf) {
    let data = dir.join("data");
    let wf = docket_tests::one_agent_workflow(dir, "damage", "quick", TEST_AGENT, &["finish"]);
    for id in ids {
        let out = Command::new(docket_bin())
            .args(["run", wf.to_str().expect("utf-8"), "--run-id", id, "--data"])
            .arg(&data)
            .env("DOCKET_SIGNING_KEY", "none")
            .output()
            .expect("docket runs");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    (data, wf)
}

fn segment(data: &Path) -> PathBuf {
    data.join("log").join("00000000000000000001.seg")
}

/// (offset, length) of every batch frame of the log, with the streams of its events.
fn frames(data: &Path) -> Vec<(u64, u64, Vec<String>)> {
    let mut streams: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    scan_log(data, |record| match record {
        Scanned::Event { event, at, .. } => {
            assert_eq!(at.segment, 1, "the test's runs fit one segment");
            streams
                .entry(at.frame)
                .or_default()
                .push(event.stream.as_str().to_owned());
        }
        Scanned::Blob { at, .. } => {
            streams.entry(at.frame).or_default();
        }
    })
    .expect("the log scans");
    let bytes = std::fs::read(segment(data)).expect("segment");
    streams
        .into_iter()
        .map(|(at, names)| {
            let i = at as usize;
            let len = u32::from_le_bytes(bytes[i + 4..i + 8].try_into().expect("4 bytes"));
            (at, 12 + u64::from(len), names)
        })
        .collect()
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offset as usize] ^= 0x01;
    std::fs::write(path, &bytes).expect("write");
}

#[test]
fn a_writer_refuses_to_append_after_damage_in_the_middle_of_a_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, wf) = runs(dir.path(), &["first", "second", "third"]);
    // A bit flipped in the first batch of run `second`: runs second and third follow it.
    let (at, len, _) = frames(&data)
        .into_iter()
        .find(|(_, _, streams)| streams.iter().any(|s| s == "second"))
        .expect("a batch of run second");
    flip(&segment(&data), at + len / 2);
    let log_before = docket_tests::files_under(&data.join("log"));

    let out = docket(
        &data,
        &["run", wf.to_str().expect("utf-8"), "--run-id", "new"],
    );
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("00000000000000000001.seg"), "{err}");
    assert!(err.contains(&format!("at byte offset {at}")), "{err}");
    assert!(err.contains("not a torn write"), "{err}");
    assert!(err.contains("second, third"), "{err}");
    assert!(!err.contains("completed"), "{err}");
    assert_eq!(
        docket_tests::files_under(&data.join("log")),
        log_before,
        "nothing was appended past the damage"
    );

    // Readers say where the damage is and which runs it hides.
    let out = docket(&data, &["status", "third"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains(&format!("at byte offset {at}")) && err.contains("recorded after damage"),
        "{err}"
    );
    let out = docket(&data, &["status", "first"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("second, third"), "{}", stderr(&out));
    let out = docket(&data, &["verify", "--all"]);
    let report = stdout(&out);
    assert_eq!(code(&out), 1, "{report}");
    assert!(report.contains(&format!("at byte {at}")), "{report}");
    assert!(report.contains("FAIL  second"), "{report}");
    assert!(report.contains("FAIL  third"), "{report}");
}

#[test]
fn damage_to_the_last_acknowledged_batch_fails_verify_instead_of_passing_as_torn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, wf) = runs(dir.path(), &["first", "last"]);
    let all = frames(&data);
    let (at, len, streams) = all.last().cloned().expect("frames");
    assert!(streams.iter().any(|s| s == "last"), "{streams:?}");
    let out = docket(&data, &["verify", "--all"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    // The last byte of the log's last batch: that batch was acknowledged.
    flip(&segment(&data), at + len - 1);

    let out = docket(&data, &["verify", "--all"]);
    let report = stdout(&out);
    assert_eq!(code(&out), 1, "{report}");
    assert!(report.contains(&format!("at byte {at}")), "{report}");
    assert!(report.contains("acknowledged"), "{report}");
    assert!(report.contains("FAIL  last"), "{report}");
    assert!(report.contains("ok    first"), "{report}");

    let out = docket(&data, &["status", "last"]);
    assert!(
        stderr(&out).contains(&format!("at byte offset {at}")),
        "{}",
        stderr(&out)
    );
    let out = docket(
        &data,
        &["run", wf.to_str().expect("utf-8"), "--run-id", "new"],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a torn write"),
        "{}",
        stderr(&out)
    );
}

/// `docket ARGS --data DATA` with stdout and stderr a pipe nobody reads any more (as in
/// `docket status RUN 2>&1 | head -1` once head is done): every write fails with EPIPE.
fn with_closed_output(data: &Path, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let err = writer.try_clone().expect("pipe");
    Command::new(docket_bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(err)
        .output()
        .expect("docket runs")
}

#[test]
fn a_closed_stdout_and_stderr_end_a_command_quietly_not_with_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, _) = runs(dir.path(), &["first", "second"]);
    let (at, len, _) = frames(&data)
        .into_iter()
        .find(|(_, _, streams)| streams.iter().any(|s| s == "second"))
        .expect("a batch of run second");
    flip(&segment(&data), at + len / 2);
    for args in [
        &["status", "first"][..],
        &["status", "second"],
        &["runs"],
        &["events", "first"],
        &["verify"],
        &["status", "no-such-run"],
    ] {
        let open = docket(&data, args);
        let closed = with_closed_output(&data, args);
        assert_ne!(
            closed.status.code(),
            Some(101),
            "docket {args:?} panicked on a closed pipe"
        );
        assert_eq!(
            closed.status.code(),
            open.status.code(),
            "docket {args:?}: {}",
            stderr(&open)
        );
    }
}

#[test]
fn a_garbage_marker_is_named_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, wf) = runs(dir.path(), &["first"]);
    let marker = data.join("DOCKET-STORE");
    std::fs::write(&marker, b"\x00\x13garbage").expect("write");
    for args in [
        &["status", "first"][..],
        &["runs"],
        &["verify"],
        &["run", wf.to_str().expect("utf-8")],
    ] {
        let out = docket(&data, args);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "docket {args:?}: {err}");
        assert!(
            err.contains(&format!(
                "{} is not a docket store marker",
                marker.display()
            )),
            "docket {args:?}: {err}"
        );
        assert!(
            !err.contains("nothing was ever recorded"),
            "docket {args:?}: {err}"
        );
    }
}

#[test]
fn a_stray_file_in_the_log_directory_is_named_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, wf) = runs(dir.path(), &["first"]);
    // A file not named as a segment is no part of the log.
    std::fs::write(data.join("log").join("notes.txt"), b"mine").expect("write");
    let out = docket(
        &data,
        &["run", wf.to_str().expect("utf-8"), "--run-id", "second"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = docket(&data, &["runs"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("second"), "{}", stdout(&out));
    let out = docket(&data, &["verify"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));

    // One named as a segment far past the last is named, not a segment missing before it.
    let stray = data.join("log").join("00000000000000000007.seg");
    std::fs::write(&stray, b"not mine").expect("write");
    let out = docket(
        &data,
        &["run", wf.to_str().expect("utf-8"), "--run-id", "third"],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&stray.display().to_string())
            && stderr(&out).contains("segments 2 to 6 are missing"),
        "{}",
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("00000000000000000002.seg"),
        "{}",
        stderr(&out)
    );
    // Readers still read the log up to it, and name it.
    let out = docket(&data, &["status", "second"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&stray.display().to_string()),
        "{}",
        stderr(&out)
    );
    let out = docket(&data, &["verify"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("segments 2 to 6 are missing"),
        "{}",
        stdout(&out)
    );
}
