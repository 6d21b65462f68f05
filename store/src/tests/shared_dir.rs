//! A data directory shared by processes: read-only views beside one writer, the writer
//! lock, and damage contained to the stream it is in (FORMAT.md §10).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Duration;

use super::*;

use crate::{ChainBreak, Damage, LockHolder, StoreError};

/// Every file under `dir` and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn view_err(dir: &Path) -> StoreError {
    match EmbeddedStore::open_read_only_blocking(dir) {
        Ok(_) => panic!("a read-only view opened {}", dir.display()),
        Err(e) => e,
    }
}

#[tokio::test]
async fn a_view_reads_beside_the_writer_refuses_appends_and_reads_on_after_a_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let writer = open(dir.path(), relaxed()).await;
    writer
        .append(&sid("a"), 0, vec![ev("e", b"1"), ev("e", b"2")])
        .await
        .unwrap();
    let view = EmbeddedStore::open_read_only(dir.path()).await.unwrap();
    assert!(view.is_read_only());
    assert_eq!(read_all(&view, &sid("a")).await.len(), 2);
    assert!(matches!(
        view.append(&sid("a"), 2, vec![ev("e", b"x")]).await,
        Err(StoreError::ReadOnly { .. })
    ));
    assert!(matches!(
        view.put_blob(vec![1; 10]).await,
        Err(StoreError::ReadOnly { .. })
    ));
    writer
        .append(&sid("a"), 2, vec![ev("e", b"3")])
        .await
        .unwrap();
    writer
        .append(&sid("b"), 0, vec![ev("e", b"1")])
        .await
        .unwrap();
    // What the view opened on, until it refreshes.
    assert_eq!(view.streams().await.unwrap().len(), 1);
    view.refresh().await.unwrap();
    let heads: Vec<(String, u64)> = view
        .streams()
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.stream.to_string(), h.seq))
        .collect();
    assert_eq!(heads, vec![("a".to_owned(), 3), ("b".to_owned(), 1)]);
    let events = read_all(&view, &sid("a")).await;
    assert_eq!(events, read_all(&writer, &sid("a")).await);
    // Proofs come from the tree the view built from the log.
    assert_eq!(
        view.tree_head(&sid("a"), None).await.unwrap(),
        writer.tree_head(&sid("a"), None).await.unwrap()
    );
    assert!(view.verify(&sid("a")).await.unwrap().is_sound());
    writer.close().await;
}

#[tokio::test]
async fn a_view_changes_no_byte_of_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), StoreConfig::default()).await;
    store
        .append(&sid("a"), 0, vec![ev("e", &[7; 100_000])])
        .await
        .unwrap();
    store.close().await;
    let before = snapshot(dir.path());
    let view = EmbeddedStore::open_read_only(dir.path()).await.unwrap();
    let events = read_all(&view, &sid("a")).await;
    assert_eq!(events.len(), 1);
    view.put_snapshot(&sid("a"), 1, b"state".to_vec())
        .await
        .unwrap();
    assert!(view.latest_snapshot(&sid("a"), 1).await.unwrap().is_some());
    view.refresh().await.unwrap();
    view.close().await;
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_missing_or_foreign_directory_is_named_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo");
    let err = view_err(&missing);
    assert!(matches!(&err, StoreError::NoDataDirectory { path } if *path == missing));
    assert_eq!(
        err.to_string(),
        format!("no docket data directory at {}", missing.display())
    );
    assert!(!missing.exists());
    fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    assert!(matches!(
        view_err(dir.path()),
        StoreError::NotADataDirectory { .. }
    ));
    // An empty directory (or one a writer is creating) is a store with nothing in it yet.
    let empty = tempfile::tempdir().unwrap();
    let view = EmbeddedStore::open_read_only_blocking(empty.path()).unwrap();
    assert_eq!(view.view_report().unwrap(), crate::ViewReport::default());
    assert_eq!(fs::read_dir(empty.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn a_damaged_stream_is_named_and_the_others_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), relaxed()).await;
    for i in 0..4u8 {
        store
            .append(&sid("a"), u64::from(i), vec![ev("e", &[i; 20])])
            .await
            .unwrap();
        store
            .append(&sid("b"), u64::from(i), vec![ev("e", &[i; 20])])
            .await
            .unwrap();
    }
    store.close().await;
    // Cut a's third event (the fifth batch) out: every frame left is intact.
    let path = seg(dir.path(), 1);
    let bytes = fs::read(&path).unwrap();
    let mut frames = Vec::new();
    let mut at = 32;
    while at + 12 <= bytes.len() && bytes[at] != 0 {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        frames.push((at, 12 + len));
        at += 12 + len;
    }
    let mut spliced = bytes[..frames[4].0].to_vec();
    spliced.extend_from_slice(&bytes[frames[5].0..]);
    fs::write(&path, &spliced).unwrap();

    let view = EmbeddedStore::open_read_only(dir.path()).await.unwrap();
    let listed: Vec<String> = view
        .streams()
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.stream.to_string())
        .collect();
    assert_eq!(listed, vec!["b"]);
    assert_eq!(read_all(&view, &sid("b")).await.len(), 4);
    let report = view.view_report().unwrap();
    assert_eq!(report.damaged_streams.len(), 1);
    let d = &report.damaged_streams[0];
    assert_eq!((d.stream.as_str(), d.seq), ("a", 3));
    assert!(matches!(
        &d.damage,
        Damage::Chain {
            break_: ChainBreak::Missing {
                expected: 3,
                found: 4
            },
            ..
        }
    ));
    let err = view.head(&sid("a")).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("stream a is damaged from event 3 on: in "),
        "{err}"
    );
    // Its sound events still read, and the read ends with the damage.
    let read: Vec<_> = futures::StreamExt::collect(view.read(&sid("a"), 1..=u64::MAX)).await;
    assert_eq!(read.len(), 3);
    assert!(read[..2].iter().all(Result::is_ok));
    assert!(matches!(
        read[2],
        Err(StoreError::StreamDamaged { seq: 3, .. })
    ));
    let verified = view.verify(&sid("a")).await.unwrap();
    assert_eq!(verified.verified, 2);
    assert!(!verified.is_sound());
    // A writer re-indexing the log still refuses it as a whole, naming the same place.
    fs::remove_dir_all(dir.path().join("index")).unwrap();
    assert!(matches!(
        EmbeddedStore::open(dir.path(), relaxed()).await,
        Err(StoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn a_second_writer_is_told_who_holds_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(LockHolder::of(dir.path()), None);
    let store = open(dir.path(), relaxed()).await;
    store
        .append(&sid("run-1"), 0, vec![ev("e", b"1")])
        .await
        .unwrap();
    let holder = LockHolder::of(dir.path()).expect("the writer holds the lock");
    assert_eq!(holder.pid, std::process::id());
    assert!(holder.drives(&sid("run-1")));
    assert!(!holder.drives(&sid("run-2")));
    let config = StoreConfig {
        lock_wait: Duration::from_millis(60),
        ..relaxed()
    };
    match EmbeddedStore::open(dir.path(), config.clone()).await {
        Err(StoreError::Held {
            holder: Some(h),
            waited,
            ..
        }) => {
            assert_eq!(h.pid, std::process::id());
            assert!(waited >= Duration::from_millis(60));
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a second writer opened the directory"),
    }
    store.close().await;
    // Released with the store: nobody holds it, and the next writer gets it.
    assert_eq!(LockHolder::of(dir.path()), None);
    let again = EmbeddedStore::open(dir.path(), config).await.unwrap();
    assert_eq!(read_all(&again, &sid("run-1")).await.len(), 1);
    again.close().await;
}

#[tokio::test]
async fn a_directory_holding_only_the_lock_files_becomes_a_store() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("writer.lock"), b"").unwrap();
    fs::write(dir.path().join("writer.holder"), b"pid 1\n").unwrap();
    let store = open(dir.path(), relaxed()).await;
    store
        .append(&sid("a"), 0, vec![ev("e", b"1")])
        .await
        .unwrap();
    store.close().await;
}
