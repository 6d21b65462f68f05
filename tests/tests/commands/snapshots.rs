//! Snapshots beside the log (store/FORMAT.md §12) checked by `docket verify` (issue 15
//! point 1) and distrusted by resume when damaged (docs/replay.md#snapshots): a snapshot
//! that equals the fold of its events verifies; one whose bytes were altered is reported
//! naming the run and sequence and is passed over by resume, which folds from an older
//! snapshot or the log; one forged with a recomputed checksum is reported by verify too.

use std::path::{Path, PathBuf};

use docket_decider::{RunEvent, RunState};
use docket_runtime::Runtime;
use docket_store::{EmbeddedStore, EventStore, StoreConfig, StreamId, snapshot_files};
use docket_tests::{docket_on, exit_code, one_agent_workflow, stdout_text, summary_run_id};

const AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

fn verify(data: &Path) -> (i32, String) {
    let out = docket_on(data, &["verify"]);
    (
        exit_code(&out),
        format!(
            "{}{}",
            stdout_text(&out),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A finished run's id and events, recorded through the binary.
fn recorded_run(root: &Path, data: &Path) -> (String, Vec<RunEvent>) {
    let workflow = one_agent_workflow(root, "snap", "snap", AGENT, &["finish"]);
    let out = docket_on(data, &["run", workflow.to_str().expect("utf-8")]);
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = summary_run_id(&out);
    let events = block_on(async {
        let store = EmbeddedStore::open_read_only(data).await.expect("view");
        let events = Runtime::new(store)
            .events(&run.as_str().into())
            .await
            .expect("events");
        events.into_iter().map(|e| e.event).collect()
    });
    (run, events)
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio")
        .block_on(f)
}

/// Stores the fold of `events` as the run's snapshot at `events.len()`.
fn put_snapshot(data: &Path, run: &str, state: &RunState) {
    block_on(async {
        let store = EmbeddedStore::open(data, StoreConfig::default())
            .await
            .expect("store");
        store
            .put_snapshot(
                &StreamId::new(run).expect("stream"),
                state.version(),
                state.encode_snapshot().expect("encodes"),
            )
            .await
            .expect("stored");
    });
}

fn file_at(data: &Path, seq: u64) -> PathBuf {
    snapshot_files(data)
        .expect("listed")
        .into_iter()
        .find(|f| f.seq == seq)
        .expect("the snapshot file")
        .path
}

#[test]
fn verify_checks_each_snapshot_against_its_events_and_resume_passes_over_a_damaged_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let (run, events) = recorded_run(tmp.path(), &data);
    let last = events.len() as u64;
    assert!(last >= 4, "{events:?}");
    let early = RunState::fold(&events[..2]);
    let folded = RunState::fold(&events);
    put_snapshot(&data, &run, &early);
    put_snapshot(&data, &run, &folded);

    let (code, text) = verify(&data);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("its 2 snapshots match the log"), "{text}");

    // Altered bytes in the state of the latest snapshot: verify names the run and the
    // sequence; resume refuses the file and starts from the one before it.
    let path = file_at(&data, last);
    let good = std::fs::read(&path).expect("read");
    let mut bad = good.clone();
    let at = bad.len() - 40;
    bad[at] ^= 0x01;
    std::fs::write(&path, &bad).expect("write");
    let (code, text) = verify(&data);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!("FAIL  {run}"))
            && text.contains(&format!("snapshot at event {last} of {run}"))
            && text.contains("torn or altered"),
        "{text}"
    );
    let resumed = block_on(async {
        let store = EmbeddedStore::open(&data, StoreConfig::default())
            .await
            .expect("store");
        Runtime::new(store)
            .state(&run.as_str().into())
            .await
            .expect("state")
    });
    assert_eq!(
        resumed, folded,
        "the state is the log's, not the damaged file's"
    );

    // A forgery with a valid checksum (the state of another history, written through
    // the store): verify finds it is not the fold of the log's events.
    std::fs::write(&path, &good).expect("restore");
    let forged = RunState::fold([&events[0], &events[0]]);
    assert_ne!(forged, early);
    put_snapshot(&data, &run, &forged);
    let (code, text) = verify(&data);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "snapshot at event 2 of {run} does not equal the state folded from events 1 to 2"
        )),
        "{text}"
    );
    assert!(verify(&data).1.contains("VERIFICATION FAILED"));
}

#[test]
fn snapshots_are_removed_for_a_run_and_verify_changes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let (run, events) = recorded_run(tmp.path(), &data);
    put_snapshot(&data, &run, &RunState::fold(&events));
    let before = docket_tests::files_under(&data.join("snapshots"));
    assert_eq!(before.len(), 1);
    assert_eq!(verify(&data).0, 0);
    assert_eq!(
        docket_tests::files_under(&data.join("snapshots")),
        before,
        "verify writes nothing"
    );
    let removed = block_on(async {
        let store = EmbeddedStore::open(&data, StoreConfig::default())
            .await
            .expect("store");
        store
            .remove_snapshots(&StreamId::new(run.as_str()).expect("stream"))
            .await
            .expect("removed")
    });
    assert_eq!(removed, 1);
    assert!(snapshot_files(&data).expect("listed").is_empty());
    let (code, text) = verify(&data);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("snapshot"), "{text}");
}
