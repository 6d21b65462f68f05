use std::time::Duration;

use futures::StreamExt;

use super::*;
use crate::{ChainBreak, Payload, StoreError, blob_hash, genesis};

#[tokio::test]
async fn appends_chain_and_read_back_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let s = sid("run-1");
    {
        let store = open(dir.path(), StoreConfig::default()).await;
        let a = store
            .append(&s, 0, vec![ev("started", b"a"), ev("handoff", b"b")])
            .await
            .unwrap();
        assert_eq!((a.first_seq, a.last_seq()), (1, 2));
        let b = store
            .append(&s, 2, vec![ev("finished", b"c")])
            .await
            .unwrap();
        assert_eq!(b.first_seq, 3);
        let events = read_all(&store, &s).await;
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].prev, genesis(&s));
        assert_eq!(events[1].prev, events[0].hash);
        assert_eq!(events[2].hash, b.hashes[0]);
        store.close().await;
    }
    let store = open(dir.path(), StoreConfig::default()).await;
    assert_eq!(store.recovery_report().truncated_bytes, 0);
    let events = read_all(&store, &s).await;
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(events[2].kind, "finished");
    assert_eq!(events[2].payload, Payload::Inline(b"c".to_vec()));
    let head = store.head(&s).await.unwrap().unwrap();
    assert_eq!((head.seq, head.hash), (3, events[2].hash));
    let report = store.verify(&s).await.unwrap();
    assert!(report.is_sound(), "{report:?}");
    assert_eq!(report.verified, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appenders_share_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let plan = crate::FaultPlan::new();
    let config = StoreConfig {
        faults: Some(plan.clone()),
        ..StoreConfig::default()
    };
    let store = open(dir.path(), config).await;
    // Hold the writer so that all 1000 appends are queued before it takes a batch.
    plan.hold_writer();
    let mut tasks = Vec::new();
    for i in 0..1000 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .append(&sid(&format!("run-{i}")), 0, vec![ev("e", b"x")])
                .await
        }));
    }
    let mut waited = 0;
    while store.stats().queued < 1000 {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        waited += 1;
        assert!(waited < 60_000, "appends never queued");
    }
    plan.release();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let stats = store.stats();
    assert_eq!(stats.events, 1000);
    // The writer had one queued request in hand when held; it may commit that alone.
    assert!(stats.syncs <= 2, "{stats:?}");
    assert_eq!(store.streams().await.unwrap().len(), 1000);
}

#[tokio::test]
async fn large_payloads_become_blobs_covered_by_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        blob_threshold: 16,
        ..relaxed()
    };
    let s = sid("run");
    let big = vec![7u8; 1000];
    let hash = blob_hash(&big);
    {
        let store = open(dir.path(), config.clone()).await;
        store
            .append(&s, 0, vec![ev("big", &big), ev("big-again", &big)])
            .await
            .unwrap();
        let events = read_all(&store, &s).await;
        let Payload::Blob(r) = events[0].payload else {
            panic!("expected a blob ref");
        };
        assert_eq!((r.hash, r.len), (hash, 1000));
        assert_eq!(store.get_blob(&hash).await.unwrap(), Some(big.clone()));
        assert_eq!(store.put_blob(big.clone()).await.unwrap(), hash);
        let other = store.put_blob(b"standalone".to_vec()).await.unwrap();
        assert_eq!(
            store.get_blob(&other).await.unwrap(),
            Some(b"standalone".to_vec())
        );
        store.close().await;
    }
    let store = open(dir.path(), config).await;
    assert_eq!(store.get_blob(&hash).await.unwrap(), Some(big));
    assert_eq!(store.get_blob(&blob_hash(b"nope")).await.unwrap(), None);
    assert!(store.verify(&s).await.unwrap().is_sound());
}

/// Blobs carried by an append (content its payloads refer to) are written with it, each
/// once: twice in one append, in one batch, or already in the store, one record.
#[tokio::test]
async fn blobs_carried_by_an_append_are_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (sid("run-a"), sid("run-b"));
    let content = b"{\"answer\":\"the same content\"}".to_vec();
    let hash = blob_hash(&content);
    {
        let store = open(dir.path(), relaxed()).await;
        let twice = vec![content.clone(), content.clone()];
        store
            .append_with_blobs(&a, 0, vec![ev("x", b"{}")], twice)
            .await
            .unwrap();
        let (one, other) = futures::join!(
            store.append_with_blobs(&a, 1, vec![ev("y", b"{}")], vec![content.clone()]),
            store.append_with_blobs(&b, 0, vec![ev("z", b"{}")], vec![content.clone()])
        );
        one.unwrap();
        other.unwrap();
        assert_eq!(store.get_blob(&hash).await.unwrap(), Some(content.clone()));
        store.close().await;
    }
    let bytes = std::fs::read(seg(dir.path(), 1)).unwrap();
    let records = bytes
        .windows(32)
        .filter(|w| *w == hash.0.as_slice())
        .count();
    assert_eq!(records, 1, "the blob's address appears once in the log");
    let store = open(dir.path(), relaxed()).await;
    assert_eq!(store.get_blob(&hash).await.unwrap(), Some(content));
    assert_eq!(read_all(&store, &a).await.len(), 2);
}

#[tokio::test]
async fn verify_reports_the_first_broken_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), relaxed()).await;
    let s = sid("run");
    store
        .append(&s, 0, (0..5).map(|i| ev("e", &[i; 8])).collect())
        .await
        .unwrap();
    // Flip one payload byte of event 3 in place, behind the store's back.
    let seg = dir.path().join("log").join("00000000000000000001.seg");
    let mut bytes = std::fs::read(&seg).unwrap();
    let needle = [2u8; 8];
    let at = bytes.windows(8).position(|w| w == needle).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();
    let report = store.verify(&s).await.unwrap();
    assert_eq!(report.verified, 2);
    let b = report.first_break.unwrap();
    assert_eq!(b.seq(), 3);
    assert!(matches!(b, ChainBreak::WrongHash { seq: 3, .. }), "{b}");
    let read: Vec<_> = store.read(&s, 1..=5).collect().await;
    assert!(read[0].is_ok() && read[1].is_ok());
    let err = read[2].as_ref().unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(
        err.to_string().contains("00000000000000000001.seg"),
        "{err}"
    );
    assert_eq!(read.len(), 3, "a read stops at the first damaged event");
}

#[tokio::test]
async fn index_is_rebuilt_from_the_log_alone() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        blob_threshold: 100,
        segment_max_bytes: 64 * 1024,
        ..relaxed()
    };
    let (a, b) = (sid("a"), sid("b"));
    let mut want = Vec::new();
    {
        let store = open(dir.path(), config.clone()).await;
        let mut heads = (0, 0);
        for round in 0..20u32 {
            let n = 1 + (round as usize * 37) % 700;
            let events: Vec<_> = (0..n)
                .map(|i| {
                    ev(
                        "e",
                        &vec![(i % 251) as u8; if i % 50 == 0 { 300 } else { 20 }],
                    )
                })
                .collect();
            heads.0 = store.append(&a, heads.0, events).await.unwrap().last_seq();
            heads.1 = store
                .append(&b, heads.1, vec![ev("e", b"b")])
                .await
                .unwrap()
                .last_seq();
        }
        want.push(read_all(&store, &a).await);
        want.push(read_all(&store, &b).await);
        store.close().await;
    }
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let store = open(dir.path(), config).await;
    let total = (want[0].len() + want[1].len()) as u64;
    assert_eq!(store.recovery_report().reindexed_events, total);
    assert_eq!(read_all(&store, &a).await, want[0]);
    assert_eq!(read_all(&store, &b).await, want[1]);
    let mid: Vec<_> = futures::TryStreamExt::try_collect::<Vec<_>>(store.read(&a, 300..=1700))
        .await
        .unwrap();
    assert_eq!(mid.as_slice(), &want[0][299..1700]);
    assert!(store.verify(&a).await.unwrap().is_sound());
    assert!(store.verify(&b).await.unwrap().is_sound());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_are_readable_before_sled_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let plan = crate::FaultPlan::new();
    let config = StoreConfig {
        blob_threshold: 16,
        faults: Some(plan.clone()),
        ..relaxed()
    };
    let s = sid("run");
    let big = vec![9u8; 100];
    let mut tail = {
        let store = open(dir.path(), config.clone()).await;
        store
            .append(&s, 0, vec![ev("a", b"1"), ev("b", b"2")])
            .await
            .unwrap();
        plan.hold_indexer();
        let mut tail = Box::pin(store.tail(&s, 3));
        let a = store
            .append(&s, 2, vec![ev("c", b"3"), ev("big", &big)])
            .await
            .unwrap();
        assert_eq!(a.last_seq(), 4);
        // Served from the in-memory tail and sled together.
        let events = read_all(&store, &s).await;
        assert_eq!(
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        assert_eq!(
            store.get_blob(&crate::blob_hash(&big)).await.unwrap(),
            Some(big.clone())
        );
        assert!(store.verify(&s).await.unwrap().is_sound());
        assert_eq!(tail.next().await.unwrap().unwrap().seq, 3);
        store.put_snapshot(&s, 4, b"four".to_vec()).await.unwrap();
        plan.release_indexer();
        assert_eq!(tail.next().await.unwrap().unwrap().seq, 4);
        store.close().await;
        tail
    };
    // The tail ends once the store is closed.
    assert!(tail.next().await.is_none());
    let store = open(dir.path(), config).await;
    assert_eq!(read_all(&store, &s).await.len(), 4);
    assert_eq!(
        store.latest_snapshot(&s, 9).await.unwrap().map(|x| x.seq),
        Some(4)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_streams_do_not_keep_a_closed_store_open() {
    let dir = tempfile::tempdir().unwrap();
    let s = sid("run");
    let store = open(dir.path(), relaxed()).await;
    store
        .append(&s, 0, vec![ev("a", b"1"), ev("b", b"2")])
        .await
        .unwrap();
    let mut read = Box::pin(store.read(&s, 1..=2));
    let mut tail = Box::pin(store.tail(&s, 3));
    store.close().await;
    // The directory can be reopened at once, with both streams still alive.
    let again = open(dir.path(), relaxed()).await;
    assert!(matches!(read.next().await, Some(Err(StoreError::Closed))));
    assert!(read.next().await.is_none());
    assert!(tail.next().await.is_none());
    assert_eq!(read_all(&again, &s).await.len(), 2);
}

#[tokio::test]
async fn interleaved_streams_read_back_from_any_sequence_after_reopen() {
    // Two streams appended alternately: every run is one event long, so the indexer packs
    // many runs per sled entry; reads must find every event from memory and, after reopening,
    // from sled.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (sid("inter-a"), sid("inter-b"));
    let n = 150u64;
    let check = |events: Vec<Event>, from: u64, to: u64| {
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (from..=to).collect::<Vec<_>>(), "range {from}..={to}");
    };
    {
        let store = open(dir.path(), relaxed()).await;
        for i in 0..n {
            store.append(&a, i, vec![ev("a", b"x")]).await.unwrap();
            store.append(&b, i, vec![ev("b", b"y")]).await.unwrap();
        }
        check(read_all(&store, &a).await, 1, n);
        store.close().await;
    }
    let store = open(dir.path(), relaxed()).await;
    for (from, to) in [(1, n), (2, 70), (64, 66), (65, n), (129, 140), (n, n)] {
        for s in [&a, &b] {
            let events: Vec<Event> = store.read(s, from..=to).try_collect().await.unwrap();
            check(events, from, to);
        }
    }
    assert!(store.verify(&a).await.unwrap().is_sound());
    assert_eq!(store.head(&b).await.unwrap().unwrap().seq, n);
    store.append(&a, n, vec![ev("a", b"z")]).await.unwrap();
    check(read_all(&store, &a).await, 1, n + 1);
}
