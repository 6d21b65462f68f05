//! Damaged, foreign and future directories: a typed error that says what and where, never a panic.

use std::fs;
use std::path::Path;

use super::*;
use futures::StreamExt;

use crate::{ChainBreak, Damage, StoreError};

/// (offset, length) of each batch frame in a segment file.
fn frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 32;
    while at + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        out.push((at, 12 + len));
        at += 12 + len;
    }
    out
}

fn drop_index(dir: &Path) {
    fs::remove_dir_all(dir.join("index")).unwrap();
}

async fn open_err(dir: &Path) -> StoreError {
    match EmbeddedStore::open(dir, relaxed()).await {
        Ok(_) => panic!("store opened despite damage"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn foreign_and_future_directories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let err = open_err(dir.path()).await;
    assert!(matches!(err, StoreError::ForeignDirectory { .. }), "{err}");

    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("DOCKET-STORE"), "docket-store format 4\n").unwrap();
    let err = open_err(dir.path()).await;
    assert!(
        matches!(
            err,
            StoreError::UnsupportedFormat {
                found: 4,
                supported: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("DOCKET-STORE"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("DOCKET-STORE"), [0xff, 0x00, 0x13]).unwrap();
    let err = open_err(dir.path()).await;
    assert!(matches!(err, StoreError::ForeignDirectory { .. }), "{err}");
}

#[tokio::test]
async fn future_segment_version_names_the_segment() {
    let dir = tempfile::tempdir().unwrap();
    one_event_per_batch(dir.path(), relaxed(), 2, 20).await;
    drop_index(dir.path());
    let path = seg(dir.path(), 1);
    let mut bytes = fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
    let crc = crc32fast::hash(&bytes[..24]);
    bytes[24..28].copy_from_slice(&crc.to_le_bytes());
    fs::write(&path, &bytes).unwrap();
    let err = open_err(dir.path()).await;
    match &err {
        StoreError::UnsupportedFormat {
            path: p, found: 7, ..
        } => assert_eq!(p, &path),
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn torn_tail_is_cut_when_unindexed_and_refused_when_indexed() {
    let dir = tempfile::tempdir().unwrap();
    one_event_per_batch(dir.path(), relaxed(), 4, 20).await;
    let path = seg(dir.path(), 1);
    let len = fs::metadata(&path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 5)
        .unwrap();

    // The index says event 4 was acknowledged: its loss is an error, not a repair.
    let err = open_err(dir.path()).await;
    assert!(
        matches!(&err, StoreError::LogShorterThanIndex { segment, .. } if segment == &path),
        "{err}"
    );

    // Without that knowledge, a cut last batch is a torn, unacknowledged tail.
    drop_index(dir.path());
    let store = open(dir.path(), relaxed()).await;
    assert!(store.recovery_report().truncated_bytes > 0);
    assert_eq!(store.recovery_report().reindexed_events, 3);
    assert_eq!(read_all(&store, &sid("a")).await.len(), 3);
    let next = store
        .append(&sid("a"), 3, vec![ev("e", b"again")])
        .await
        .unwrap();
    assert_eq!(next.first_seq, 4);
    assert!(store.verify(&sid("a")).await.unwrap().is_sound());
}

#[tokio::test]
async fn flipped_byte_before_the_tail_is_corruption_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    one_event_per_batch(dir.path(), relaxed(), 4, 20).await;
    drop_index(dir.path());
    let path = seg(dir.path(), 1);
    let mut bytes = fs::read(&path).unwrap();
    let f = frames(&bytes);
    assert_eq!(f.len(), 4);
    let (second, second_len) = f[1];
    bytes[second + second_len - 3] ^= 0x01;
    fs::write(&path, &bytes).unwrap();
    let err = open_err(dir.path()).await;
    match &err {
        StoreError::Corrupt {
            segment,
            offset,
            damage,
        } => {
            assert_eq!(segment, &path);
            assert_eq!(*offset, second as u64);
            assert!(
                matches!(**damage, Damage::BadFrameChecksum { .. }),
                "{damage}"
            );
        }
        other => panic!("{other}"),
    }
    assert!(
        err.to_string().contains(&format!("offset {second}")),
        "{err}"
    );
}

#[tokio::test]
async fn missing_event_is_named_by_stream_and_sequence() {
    let dir = tempfile::tempdir().unwrap();
    one_event_per_batch(dir.path(), relaxed(), 4, 20).await;
    drop_index(dir.path());
    let path = seg(dir.path(), 1);
    let bytes = fs::read(&path).unwrap();
    let f = frames(&bytes);
    // Cut out the whole third batch (event 3): every frame left is intact.
    let mut spliced = bytes[..f[2].0].to_vec();
    spliced.extend_from_slice(&bytes[f[3].0..]);
    fs::write(&path, &spliced).unwrap();
    let err = open_err(dir.path()).await;
    match &err {
        StoreError::Corrupt { damage, offset, .. } => {
            assert!(*offset > f[2].0 as u64);
            assert!(
                matches!(
                    &**damage,
                    Damage::Chain { stream, break_: ChainBreak::Missing { expected: 3, found: 4 } }
                        if stream.as_str() == "a"
                ),
                "{damage}"
            );
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn event_spliced_from_another_stream_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), relaxed()).await;
    for (s, i) in [("a", 0u8), ("b", 0), ("a", 1), ("b", 1)] {
        store
            .append(&sid(s), u64::from(i), vec![ev("e", &[i; 16])])
            .await
            .unwrap();
    }
    // Overwrite a's second event with b's second event (same length), behind the store's back.
    let path = seg(dir.path(), 1);
    let mut bytes = fs::read(&path).unwrap();
    let f = frames(&bytes);
    let (a2, b2) = (f[2], f[3]);
    let b2_bytes = bytes[b2.0..b2.0 + b2.1].to_vec();
    bytes[a2.0..a2.0 + a2.1].copy_from_slice(&b2_bytes);
    fs::write(&path, &bytes).unwrap();
    let report = store.verify(&sid("a")).await.unwrap();
    assert_eq!(report.verified, 1);
    assert!(
        matches!(&report.first_break, Some(ChainBreak::ForeignStream { seq: 2, found }) if found.as_str() == "b"),
        "{report:?}"
    );
    assert!(store.verify(&sid("b")).await.unwrap().is_sound());
    store.close().await;
    // Re-indexing from scratch finds it too, as a second event 2 of stream b.
    drop_index(dir.path());
    let err = open_err(dir.path()).await;
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
}

#[tokio::test]
async fn missing_or_foreign_segment_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        segment_max_bytes: 200,
        ..relaxed()
    };
    let store = open(dir.path(), config.clone()).await;
    for i in 0..6u8 {
        store
            .append(&sid("a"), u64::from(i), vec![ev("e", &[i; 60])])
            .await
            .unwrap();
    }
    store.close().await;
    assert!(seg(dir.path(), 3).exists());
    let store = open(dir.path(), config.clone()).await;
    assert_eq!(read_all(&store, &sid("a")).await.len(), 6);
    store.close().await;

    let stray = dir.path().join("log").join("stray.tmp");
    fs::write(&stray, b"x").unwrap();
    let err = open_err(dir.path()).await;
    assert!(
        matches!(&err, StoreError::Corrupt { segment, .. } if segment == &stray),
        "{err}"
    );
    fs::remove_file(&stray).unwrap();

    fs::remove_file(seg(dir.path(), 2)).unwrap();
    let err = open_err(dir.path()).await;
    assert!(
        matches!(&err, StoreError::Corrupt { damage, .. } if **damage == Damage::MissingSegment(2)),
        "{err}"
    );
}

#[tokio::test]
async fn random_damage_never_panics() {
    // Flip each byte of a small log in turn (index dropped): open either succeeds with a sound
    // prefix (torn tail) or reports a typed error.
    let dir = tempfile::tempdir().unwrap();
    one_event_per_batch(dir.path(), relaxed(), 3, 20).await;
    drop_index(dir.path());
    let path = seg(dir.path(), 1);
    let original = fs::read(&path).unwrap();
    for i in (0..original.len()).step_by(3) {
        let case = tempfile::tempdir().unwrap();
        fs::create_dir(case.path().join("log")).unwrap();
        fs::copy(
            dir.path().join("DOCKET-STORE"),
            case.path().join("DOCKET-STORE"),
        )
        .unwrap();
        let mut bytes = original.clone();
        bytes[i] ^= 0x5a;
        fs::write(seg(case.path(), 1), &bytes).unwrap();
        if let Ok(store) = EmbeddedStore::open(case.path(), relaxed()).await {
            let head = store.head(&sid("a")).await.unwrap().map_or(0, |h| h.seq);
            assert!(head < 3, "a flipped byte at {i} went unnoticed");
            assert!(store.verify(&sid("a")).await.unwrap().is_sound());
            store.close().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_reads_check_every_chunk_read_ahead_and_stop_at_damage() {
    // Reads check chunks of a long range ahead, on other threads, and stitch them on: every
    // event must come back once, in order, and damage in a later chunk must end the read at
    // the damaged event, after every sound one before it.
    let dir = tempfile::tempdir().unwrap();
    let n = 13_000u64;
    let store = open(dir.path(), relaxed()).await;
    let s = sid("long");
    let mut seq = 0;
    while seq < n {
        let events = (seq..(seq + 700).min(n))
            .map(|i| ev("e", format!("payload {i:08}").as_bytes()))
            .collect::<Vec<_>>();
        let k = events.len() as u64;
        store.append(&s, seq, events).await.unwrap();
        seq += k;
    }
    for (from, to) in [(1, n), (4095, 8193), (4097, n), (12_999, 20_000)] {
        let got: Vec<Event> = store.read(&s, from..=to).try_collect().await.unwrap();
        let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (from..=to.min(n)).collect::<Vec<_>>());
        for w in got.windows(2) {
            assert_eq!(w[1].prev, w[0].hash);
        }
    }
    store.close().await;

    // Damage event 9,000's payload (a later chunk): the read yields 1..=8,999, then the break.
    let path = seg(dir.path(), 1);
    let mut bytes = fs::read(&path).unwrap();
    let needle = b"payload 00008999";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    bytes[at + 8] ^= 0x01;
    fs::write(&path, &bytes).unwrap();
    let store = open(dir.path(), relaxed()).await;
    let mut read = Box::pin(store.read(&s, 1..=n));
    let mut next = 1;
    loop {
        match read.next().await {
            Some(Ok(e)) => {
                assert_eq!(e.seq, next);
                next += 1;
            }
            Some(Err(StoreError::Corrupt { damage, .. })) => {
                assert!(
                    matches!(
                        &*damage,
                        Damage::Chain {
                            break_: ChainBreak::WrongHash { seq: 9_000, .. },
                            ..
                        }
                    ),
                    "{damage}"
                );
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(next, 9_000);
    assert!(read.next().await.is_none());
}

#[tokio::test]
async fn a_damaged_index_is_moved_aside_and_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    one_event_per_batch(dir.path(), relaxed(), 4, 20).await;
    // A crash can leave sled's own configuration torn: sled then refuses to open at all.
    let conf = dir.path().join("index").join("conf");
    let bytes = fs::read(&conf).unwrap();
    fs::write(&conf, &bytes[..bytes.len() / 2]).unwrap();

    let store = open(dir.path(), relaxed()).await;
    let report = store.recovery_report();
    assert!(report.index_rebuilt, "{report:?}");
    assert_eq!(report.reindexed_events, 4);
    assert!(dir.path().join("index.damaged").join("conf").exists());
    assert_eq!(read_all(&store, &sid("a")).await.len(), 4);
    let next = store
        .append(&sid("a"), 4, vec![ev("e", b"after the rebuild")])
        .await
        .unwrap();
    assert_eq!(next.first_seq, 5);
    assert!(store.verify(&sid("a")).await.unwrap().is_sound());
    store.close().await;

    // The rebuilt index is an ordinary one: the next open needs no rebuild.
    let store = open(dir.path(), relaxed()).await;
    assert!(!store.recovery_report().index_rebuilt);
    assert_eq!(read_all(&store, &sid("a")).await.len(), 5);
}
