//! An I/O error at any write, sync, truncation or file creation fails the append it belongs to,
//! acknowledges nothing it cannot prove durable, leaves a log that reopens consistent, and
//! does not stop the appends after it: the writer cuts the failed batch off and goes on.

use std::collections::BTreeMap;

use super::*;
use crate::{FaultPlan, StoreError, blob_hash};

/// Appends of a small script: three streams, blobs, and segments small enough to rotate.
fn script() -> Vec<(&'static str, Vec<NewEvent>)> {
    let mut out = Vec::new();
    for i in 0..12u8 {
        let stream = ["a", "b", "c"][usize::from(i % 3)];
        let big = vec![i; 300];
        let events = if i % 4 == 3 {
            vec![ev("big", &big), ev("small", &[i])]
        } else {
            vec![ev("small", &[i; 10])]
        };
        out.push((stream, events));
    }
    out
}

fn config(plan: Option<std::sync::Arc<FaultPlan>>) -> StoreConfig {
    StoreConfig {
        blob_threshold: 100,
        segment_max_bytes: 700,
        faults: plan,
        ..StoreConfig::default()
    }
}

#[tokio::test]
async fn a_fault_at_any_file_operation_leaves_a_reopenable_log() {
    let mut op = 0u64;
    loop {
        let dir = tempfile::tempdir().unwrap();
        let plan = FaultPlan::fail_op(op);
        let mut acked: BTreeMap<&str, Vec<crate::Hash>> = BTreeMap::new();
        let mut failed_once = false;
        match EmbeddedStore::open(dir.path(), config(Some(plan.clone()))).await {
            Err(e) => {
                assert!(matches!(e, StoreError::Io { .. }), "op {op}: {e}");
                failed_once = true;
            }
            Ok(store) => {
                for (stream, events) in script() {
                    let s = sid(stream);
                    let expected = acked.get(stream).map_or(0, |v| v.len() as u64);
                    match store.append(&s, expected, events).await {
                        Ok(a) => {
                            acked.entry(stream).or_default().extend(a.hashes);
                        }
                        Err(e) => {
                            assert!(matches!(e, StoreError::Io { .. }), "op {op}: {e}");
                            failed_once = true;
                        }
                    }
                }
                store.close().await;
            }
        }
        if !failed_once {
            // The script completed without reaching operation `op`: every operation was tried.
            assert!(
                op > 20,
                "the script performs too few file operations ({op})"
            );
            break;
        }
        // Reopen without faults: exactly what was acknowledged is there, and it verifies.
        let store = open(dir.path(), config(None)).await;
        for stream in ["a", "b", "c"] {
            let s = sid(stream);
            let want = acked.get(stream).cloned().unwrap_or_default();
            let got: Vec<_> = read_all(&store, &s).await.iter().map(|e| e.hash).collect();
            assert_eq!(got, want, "op {op}: stream {stream}");
            let report = store.verify(&s).await.unwrap();
            assert!(report.is_sound(), "op {op}: {report:?}");
            let next = store
                .append(&s, want.len() as u64, vec![ev("after", b"x")])
                .await
                .unwrap();
            assert_eq!(next.first_seq, want.len() as u64 + 1, "op {op}");
        }
        // Every blob an acknowledged event refers to was made durable with it.
        for stream in ["a", "b", "c"] {
            for e in read_all(&store, &sid(stream)).await {
                if let crate::Payload::Blob(r) = e.payload {
                    let bytes = store.get_blob(&r.hash).await.unwrap();
                    assert_eq!(bytes.map(|b| blob_hash(&b)), Some(r.hash), "op {op}");
                }
            }
        }
        store.close().await;
        op += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_index_stops_appends_until_it_heals_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new();
    let s = sid("run");
    let mut acked = Vec::new();
    {
        let store = open(dir.path(), config(Some(plan.clone()))).await;
        acked.extend(
            store
                .append(&s, 0, vec![ev("a", b"1")])
                .await
                .unwrap()
                .hashes,
        );
        plan.fail_index_writes();
        // Appends are acknowledged once durable; the index failure then stops the writer.
        let mut poisoned = false;
        for _ in 0..5000 {
            match store
                .append(&s, acked.len() as u64, vec![ev("b", b"2")])
                .await
            {
                Ok(a) => acked.extend(a.hashes),
                Err(StoreError::Poisoned { cause }) => {
                    assert!(cause.contains("injected index write failure"), "{cause}");
                    poisoned = true;
                    break;
                }
                Err(e) => panic!("{e}"),
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert!(
            poisoned,
            "the writer kept taking appends after the index failed"
        );
        // What was acknowledged is still readable, from memory.
        let got: Vec<_> = read_all(&store, &s).await.iter().map(|e| e.hash).collect();
        assert_eq!(got, acked);
        // Once sled takes writes again, so does the writer (the indexer retries on its own).
        plan.heal_index_writes();
        let mut taken = false;
        for _ in 0..400 {
            match store
                .append(&s, acked.len() as u64, vec![ev("b", b"healed")])
                .await
            {
                Ok(a) => {
                    acked.extend(a.hashes);
                    taken = true;
                    break;
                }
                Err(StoreError::Poisoned { .. }) => {
                    tokio::time::sleep(std::time::Duration::from_millis(25)).await;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(
            taken,
            "the writer never took appends again after the index healed"
        );
        store.close().await;
    }
    // Everything acknowledged is there and sound.
    let store = open(dir.path(), config(None)).await;
    let got: Vec<_> = read_all(&store, &s).await.iter().map(|e| e.hash).collect();
    assert_eq!(got, acked);
    assert!(store.verify(&s).await.unwrap().is_sound());
    let next = store
        .append(&s, acked.len() as u64, vec![ev("c", b"3")])
        .await
        .unwrap();
    assert_eq!(next.first_seq, acked.len() as u64 + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_the_appends_meanwhile_and_the_writer_goes_on_once_space_is_freed() {
    let dir = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new();
    let config = || StoreConfig {
        segment_max_bytes: 4096,
        faults: Some(plan.clone()),
        ..StoreConfig::default()
    };
    let s = sid("run");
    let mut acked = Vec::new();
    let store = open(dir.path(), config()).await;
    for i in 0..3u8 {
        let a = store
            .append(&s, acked.len() as u64, vec![ev("before", &[i; 200])])
            .await
            .unwrap();
        acked.extend(a.hashes);
    }
    plan.fill_disk();
    // Enough to need a new segment and more runway: every write, sync and cut fails.
    for i in 0..4u8 {
        match store
            .append(&s, acked.len() as u64, vec![ev("full", &[i; 1500])])
            .await
        {
            Err(StoreError::Io { source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(28), "{source}");
            }
            other => panic!("an append on a full disk: {other:?}"),
        }
    }
    plan.free_space();
    for i in 0..4u8 {
        let a = store
            .append(&s, acked.len() as u64, vec![ev("after", &[i; 1500])])
            .await
            .expect("the writer takes appends again once space is freed");
        assert_eq!(a.first_seq, acked.len() as u64 + 1);
        acked.extend(a.hashes);
    }
    let got: Vec<_> = read_all(&store, &s).await.iter().map(|e| e.hash).collect();
    assert_eq!(got, acked);
    store.close().await;

    // Exactly what was acknowledged, nothing of the failed batches, and no damage.
    let store = open(dir.path(), config()).await;
    assert_eq!(store.recovery_report().truncated_bytes, 0);
    let got: Vec<_> = read_all(&store, &s).await.iter().map(|e| e.hash).collect();
    assert_eq!(got, acked);
    assert!(store.verify(&s).await.unwrap().is_sound());
    store.close().await;
    let view = EmbeddedStore::open_read_only(dir.path()).await.unwrap();
    assert_eq!(view.view_report().unwrap(), crate::ViewReport::default());
}
