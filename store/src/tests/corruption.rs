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

    // A garbage marker is named as such, for writers and readers alike.
    for garbage in [
        &b"\xff\x00\x13"[..],
        &b"docket-store format three\n"[..],
        &b"hello\n"[..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("DOCKET-STORE");
        fs::write(&marker, garbage).unwrap();
        let err = open_err(dir.path()).await;
        assert!(
            matches!(&err, StoreError::BadMarker { path, .. } if path == &marker),
            "{err}"
        );
        assert!(
            err.to_string().contains("is not a docket store marker"),
            "{err}"
        );
        let err = match EmbeddedStore::open_read_only(dir.path()).await {
            Ok(_) => panic!("a view opened a directory with a garbage marker"),
            Err(e) => e,
        };
        assert!(matches!(&err, StoreError::BadMarker { .. }), "{err}");
        let err = crate::scan_log(dir.path(), |_| {}).unwrap_err();
        assert!(
            matches!(&err, crate::ScanError::Store(StoreError::BadMarker { .. })),
            "{err}"
        );
    }
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
async fn torn_tail_is_cut_when_unacknowledged_and_refused_when_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    one_event_per_batch(dir.path(), relaxed(), 4, 20).await;
    let path = seg(dir.path(), 1);
    let len = fs::metadata(&path).unwrap().len();
    let fourth = frames(&fs::read(&path).unwrap())[3].0 as u64;
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 5)
        .unwrap();

    // The index, and without it the acknowledged end beside the log, say event 4 was
    // acknowledged: its loss is damage, not a repair.
    for witness in ["index", "acknowledged end"] {
        let err = open_err(dir.path()).await;
        match &err {
            StoreError::Corrupt {
                segment,
                offset,
                damage,
                streams_after,
            } => {
                assert_eq!(segment, &path, "{witness}");
                assert_eq!(*offset, fourth, "{witness}");
                assert!(
                    matches!(&**damage, Damage::AcknowledgedBatch { damage, .. }
                        if matches!(**damage, Damage::TruncatedFrame { .. })),
                    "{witness}: {damage}"
                );
                assert_eq!(streams_after, &vec![sid("a")], "{witness}");
            }
            other => panic!("{witness}: {other}"),
        }
        assert!(err.to_string().contains("not a torn write"), "{err}");
        drop_index(dir.path());
    }

    // Without that knowledge, a cut last batch is a torn, unacknowledged tail.
    fs::remove_file(dir.path().join("acknowledged")).unwrap();
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

/// Flips one bit at `offset` of `path`.
fn flip(path: &Path, offset: usize) {
    let mut bytes = fs::read(path).unwrap();
    bytes[offset] ^= 0x01;
    fs::write(path, &bytes).unwrap();
}

#[tokio::test]
async fn a_writer_refuses_to_append_after_damage_the_index_covers() {
    // Two streams, interleaved; a bit flipped in a's second batch, which the index covers.
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), StoreConfig::default()).await;
    for (s, i) in [("a", 0u8), ("b", 0), ("a", 1), ("b", 1), ("c", 0)] {
        store
            .append(&sid(s), u64::from(i), vec![ev("e", &[i; 40])])
            .await
            .unwrap();
    }
    store.close().await;
    let path = seg(dir.path(), 1);
    let f = frames(&fs::read(&path).unwrap());
    let (third, third_len) = f[2];
    flip(&path, third + third_len / 2);

    let err = match EmbeddedStore::open(dir.path(), StoreConfig::default()).await {
        Ok(_) => panic!("the writer opened a log with damage in the middle"),
        Err(e) => e,
    };
    // Everything a reader stopping there would not show: a's damaged batch, then b and c
    // after it.
    assert_eq!(
        acknowledged_batch_damaged(&err, &path, third),
        &vec![sid("a"), sid("b"), sid("c")]
    );
    let text = err.to_string();
    assert!(text.contains(&format!("at byte offset {third}")), "{text}");
    assert!(text.contains("streams a, b, c"), "{text}");

    // Readers stop at the same place and name the same streams.
    let view = EmbeddedStore::open_read_only(dir.path()).await.unwrap();
    let report = view.view_report().unwrap();
    let damage = report.log_damage.expect("the view reports the damage");
    assert_eq!(
        (damage.segment, damage.offset),
        (path.clone(), third as u64)
    );
    assert_eq!(damage.streams_after, vec![sid("a"), sid("b"), sid("c")]);
    let summary = crate::scan_log(dir.path(), |_| {}).unwrap();
    assert!(
        matches!(&summary.end, crate::LogEnd::Damaged { offset, streams_after, .. }
            if *offset == third as u64 && streams_after.len() == 3),
        "{summary:?}"
    );
}

#[tokio::test]
async fn damage_to_the_last_acknowledged_batch_is_never_cut_as_torn() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), StoreConfig::default()).await;
    store
        .append(&sid("a"), 0, vec![ev("e", b"first")])
        .await
        .unwrap();
    store
        .append(
            &sid("a"),
            1,
            (0..5).map(|i| ev("e", &[i; 30])).collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    store.close().await;
    let path = seg(dir.path(), 1);
    let f = frames_to_runway(&fs::read(&path).unwrap());
    let (last, last_len) = *f.last().unwrap();
    flip(&path, last + last_len - 1);
    let damaged = fs::read(&path).unwrap();

    // The writer: from its index, then from the acknowledged end beside the log.
    for witness in ["index", "acknowledged end"] {
        match open_err(dir.path()).await {
            StoreError::Corrupt { offset, damage, .. } => {
                assert_eq!(offset, last as u64, "{witness}");
                assert!(
                    matches!(&*damage, Damage::AcknowledgedBatch { .. }),
                    "{witness}: {damage}"
                );
            }
            other => panic!("{witness}: {other}"),
        }
        drop_index(dir.path());
    }
    // Readers, which never open the index.
    let view = EmbeddedStore::open_read_only(dir.path()).await.unwrap();
    let report = view.view_report().unwrap();
    assert_eq!(report.unfinished_at, None);
    let damage = report.log_damage.expect("reported as damage");
    assert_eq!(damage.offset, last as u64);
    assert_eq!(damage.streams_after, vec![sid("a")]);
    let summary = crate::scan_log(dir.path(), |_| {}).unwrap();
    assert!(
        matches!(&summary.end, crate::LogEnd::Damaged { offset, damage: Damage::AcknowledgedBatch { .. }, .. }
            if *offset == last as u64),
        "{summary:?}"
    );
    assert_eq!(fs::read(&path).unwrap(), damaged, "nothing was cut");
}

#[tokio::test]
async fn a_log_cut_before_its_acknowledged_end_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    one_event_per_batch(dir.path(), StoreConfig::default(), 3, 20).await;
    let path = seg(dir.path(), 1);
    let bytes = fs::read(&path).unwrap();
    let f = frames_to_runway(&bytes);
    // The last batch is gone altogether, runway and all: every frame left is sound.
    fs::write(&path, &bytes[..f[2].0]).unwrap();
    drop_index(dir.path());
    match open_err(dir.path()).await {
        StoreError::Corrupt { offset, damage, .. } => {
            assert_eq!(offset, f[2].0 as u64);
            assert!(
                matches!(*damage, Damage::AcknowledgedMissing { segment: 1, .. }),
                "{damage}"
            );
        }
        other => panic!("{other}"),
    }
    let view = EmbeddedStore::open_read_only(dir.path()).await.unwrap();
    let damage = view.view_report().unwrap().log_damage.expect("reported");
    assert!(
        matches!(damage.damage, Damage::AcknowledgedMissing { .. }),
        "{damage:?}"
    );
    let summary = crate::scan_log(dir.path(), |_| {}).unwrap();
    assert!(
        matches!(
            &summary.end,
            crate::LogEnd::Damaged {
                damage: Damage::AcknowledgedMissing { .. },
                ..
            }
        ),
        "{summary:?}"
    );
}

/// (offset, length) of each batch frame of a durable segment, up to its runway.
fn frames_to_runway(bytes: &[u8]) -> Vec<(usize, usize)> {
    frames(bytes)
        .into_iter()
        .take_while(|&(at, _)| bytes[at] != 0)
        .collect()
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
    acknowledged_batch_damaged(&err, &path, second);
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

    // A file not named as a segment is not part of the log: left alone.
    let stray = dir.path().join("log").join("stray.tmp");
    fs::write(&stray, b"x").unwrap();
    let store = open(dir.path(), config.clone()).await;
    assert_eq!(read_all(&store, &sid("a")).await.len(), 6);
    store.close().await;
    let view = EmbeddedStore::open_read_only(dir.path()).await.unwrap();
    assert_eq!(view.view_report().unwrap(), crate::ViewReport::default());
    let summary = crate::scan_log(dir.path(), |_| {}).unwrap();
    assert_eq!(summary.ignored, vec![stray.clone()]);
    assert_eq!(summary.end, crate::LogEnd::Clean);
    assert!(stray.exists());

    // A file named as a segment past a gap is named itself, not the segments missing.
    let last = (1..)
        .take_while(|&n| seg(dir.path(), n).exists())
        .last()
        .unwrap();
    let far = seg(dir.path(), last + 5);
    fs::write(&far, b"not a segment").unwrap();
    let err = open_err(dir.path()).await;
    assert!(
        matches!(&err, StoreError::Corrupt { segment, damage, .. }
            if segment == &far && **damage == Damage::StraySegment { found: last + 5, after: last }),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!(
            "segments {} to {} are missing, or this file is not part of this log",
            last + 1,
            last + 4
        )),
        "{err}"
    );
    // Readers read the log up to the gap, and say where it is.
    let view = EmbeddedStore::open_read_only(dir.path()).await.unwrap();
    assert_eq!(read_all(&view, &sid("a")).await.len(), 6);
    let damage = view
        .view_report()
        .unwrap()
        .log_damage
        .expect("the gap is reported");
    assert_eq!(damage.segment, far);
    let mut events = 0;
    let summary = crate::scan_log(dir.path(), |r| {
        if matches!(r, crate::Scanned::Event { .. }) {
            events += 1;
        }
    })
    .unwrap();
    assert_eq!(events, 6);
    assert!(
        matches!(&summary.end, crate::LogEnd::Damaged { segment, .. } if segment == &far),
        "{summary:?}"
    );
    fs::remove_file(&far).unwrap();

    fs::remove_file(seg(dir.path(), 2)).unwrap();
    let err = open_err(dir.path()).await;
    assert!(
        matches!(&err, StoreError::Corrupt { damage, .. } if **damage == Damage::StraySegment { found: 3, after: 1 }),
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
    // The batch's checksum is sealed again: the frame is intact, the event's hash is wrong.
    let path = seg(dir.path(), 1);
    let mut bytes = fs::read(&path).unwrap();
    let needle = b"payload 00008999";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    bytes[at + 8] ^= 0x01;
    let (frame, len) = frames(&bytes)
        .into_iter()
        .find(|&(f, l)| f < at && at < f + l)
        .unwrap();
    let crc = crc32fast::hash(&bytes[frame + 12..frame + len]);
    bytes[frame + 8..frame + 12].copy_from_slice(&crc.to_le_bytes());
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

/// Asserts that `err` reports the batch at `offset` of `segment`, acknowledged, as damaged
/// by a bad frame checksum; the streams it names after the damage.
fn acknowledged_batch_damaged<'e>(
    err: &'e StoreError,
    segment: &Path,
    offset: usize,
) -> &'e Vec<StreamId> {
    match err {
        StoreError::Corrupt {
            segment: at,
            offset: found,
            damage,
            streams_after,
        } => {
            assert_eq!(at, segment);
            assert_eq!(*found, offset as u64);
            assert!(
                matches!(&**damage, Damage::AcknowledgedBatch { damage, .. }
                    if matches!(**damage, Damage::BadFrameChecksum { .. })),
                "{damage}"
            );
            streams_after
        }
        other => panic!("{other}"),
    }
}
