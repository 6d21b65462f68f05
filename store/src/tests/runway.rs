//! A durable log keeps zeros written ahead of its end (the runway): reopening reads them as
//! the end of the log, torn batches in them are still cut, and only the last segment has one.

use std::fs;
use std::path::PathBuf;

use super::*;
use crate::writer::RUNWAY;
use crate::{RecoveryReport, StoreError};

/// Where the log's frames end in a segment file (the first offset not starting a frame).
fn logical_end(bytes: &[u8]) -> usize {
    let mut at = 32;
    while at + 12 <= bytes.len() && &bytes[at..at + 4] == b"DKTB" {
        at += 12 + u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
    }
    at
}

/// A durable store with three one-event batches, closed: its directory, its segment's path,
/// the segment's bytes and where its frames end.
async fn three_durable_batches() -> (tempfile::TempDir, PathBuf, Vec<u8>, usize) {
    let dir = tempfile::tempdir().unwrap();
    one_event_per_batch(dir.path(), StoreConfig::default(), 3, 40).await;
    let path = seg(dir.path(), 1);
    let bytes = fs::read(&path).unwrap();
    let end = logical_end(&bytes);
    (dir, path, bytes, end)
}

/// A fourth event appends after the three, and the stream reads and verifies whole.
async fn the_log_goes_on(store: &EmbeddedStore) {
    store
        .append(&sid("a"), 3, vec![ev("e", b"fourth")])
        .await
        .unwrap();
    assert_eq!(read_all(store, &sid("a")).await.len(), 4);
    assert!(store.verify(&sid("a")).await.unwrap().is_sound());
}

#[tokio::test]
async fn the_runway_is_zeros_after_the_log_and_appends_overwrite_it_in_place() {
    let (dir, path, bytes, end) = three_durable_batches().await;
    assert!(
        bytes.len() as u64 > RUNWAY && bytes.len() > end,
        "{} bytes",
        bytes.len()
    );
    assert!(bytes[end..].iter().all(|&b| b == 0));

    let store = open(dir.path(), StoreConfig::default()).await;
    assert_eq!(store.recovery_report(), &RecoveryReport::default());
    the_log_goes_on(&store).await;
    store.close().await;
    let after = fs::read(&path).unwrap();
    assert_eq!(
        after.len(),
        bytes.len(),
        "the fourth batch was written into the runway"
    );
    assert!(logical_end(&after) > end);
    assert_eq!(after[..end], bytes[..end]);
}

#[tokio::test]
async fn a_torn_batch_in_the_runway_is_cut_and_the_log_goes_on() {
    let (dir, path, mut bytes, end) = three_durable_batches().await;
    // The first bytes of a fourth batch frame, the rest never written.
    bytes[end..end + 10].copy_from_slice(b"DKTB\x40\0\0\0\x01\x02");
    fs::write(&path, &bytes).unwrap();
    fs::remove_dir_all(dir.path().join("index")).unwrap();

    let store = open(dir.path(), StoreConfig::default()).await;
    assert_eq!(store.recovery_report().reindexed_events, 3);
    assert!(store.recovery_report().truncated_bytes >= 10);
    the_log_goes_on(&store).await;
}

#[tokio::test]
async fn a_frame_after_zeros_is_damage_not_runway() {
    let (dir, path, mut bytes, end) = three_durable_batches().await;
    // Zero the second batch: acknowledged events gone, with the third still after them.
    let second = {
        let first_len = u32::from_le_bytes(bytes[36..40].try_into().unwrap()) as usize;
        32 + 12 + first_len
    };
    let second_len = 12 + u32::from_le_bytes(bytes[second + 4..second + 8].try_into().unwrap());
    bytes[second..second + second_len as usize].fill(0);
    assert!(end > second + second_len as usize);
    fs::write(&path, &bytes).unwrap();
    fs::remove_dir_all(dir.path().join("index")).unwrap();

    match EmbeddedStore::open(dir.path(), StoreConfig::default()).await {
        Ok(_) => panic!("a zeroed batch before a sound one was taken for the end of the log"),
        Err(StoreError::Corrupt { offset, .. }) => assert_eq!(offset, second as u64),
        Err(other) => panic!("{other}"),
    }
}

#[tokio::test]
async fn only_the_last_segment_keeps_a_runway() {
    let dir = tempfile::tempdir().unwrap();
    let config = || StoreConfig {
        segment_max_bytes: 4096,
        // Uncompressed, so that the 300-byte events fill three segments.
        compress: false,
        ..StoreConfig::default()
    };
    one_event_per_batch(dir.path(), config(), 40, 300).await;
    let segments = fs::read_dir(dir.path().join("log")).unwrap().count() as u64;
    assert!(segments >= 3, "{segments} segments");
    for no in 1..segments {
        let bytes = fs::read(seg(dir.path(), no)).unwrap();
        assert_eq!(
            logical_end(&bytes),
            bytes.len(),
            "segment {no} ends with its last batch"
        );
    }
    // The runway of the last segment stops at the segment size limit.
    let last = fs::read(seg(dir.path(), segments)).unwrap();
    assert!(last.len() as u64 <= 4096 && logical_end(&last) < last.len());

    fs::remove_dir_all(dir.path().join("index")).unwrap();
    let store = open(dir.path(), config()).await;
    assert_eq!(store.recovery_report().truncated_bytes, 0);
    assert_eq!(read_all(&store, &sid("a")).await.len(), 40);
    assert!(store.verify(&sid("a")).await.unwrap().is_sound());
}
