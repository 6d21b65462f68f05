//! Compressed records (FORMAT.md §2, format 2): the same events, hashes, leaves and tree
//! with or without compression; fewer bytes; damage inside a compressed record named; an
//! older store upgraded by a writer and left alone by a reader.

use std::fs;

use super::*;
use crate::{ChainBreak, EventStore, StoreError, TreeHead};

/// JSON-like bytes that compress well, as docket's payloads do.
fn payload(i: usize) -> Vec<u8> {
    let mut out = String::from("{\"items\":[");
    for k in 0..40 {
        out.push_str(&format!(
            "{{\"id\":\"item-{i}-{k}\",\"kind\":\"observation\",\"score\":{k}}},"
        ));
    }
    out.push_str("{}]}");
    out.into_bytes()
}

/// Writes the same three batches (events, an event carrying a blob) under `config`; returns
/// the events read back, the tree head, the blob read back and the log's size in bytes.
async fn write_same(
    dir: &Path,
    config: StoreConfig,
) -> (Vec<Event>, TreeHead, Option<Vec<u8>>, u64) {
    let store = open(dir, config).await;
    let s = sid("run-1");
    for i in 0..3u64 {
        store
            .append(
                &s,
                i * 2,
                vec![ev("a", &payload(i as usize)), ev("b", b"short")],
            )
            .await
            .unwrap();
    }
    let blob = payload(99);
    let hash = store.put_blob(blob).await.unwrap();
    let events = read_all(&store, &s).await;
    let head = store.tree_head(&s, None).await.unwrap();
    let got = store.get_blob(&hash).await.unwrap();
    store.close().await;
    let bytes = fs::metadata(seg(dir, 1)).unwrap().len();
    (events, head, got, bytes)
}

#[tokio::test]
async fn compression_changes_bytes_on_disk_and_nothing_else() {
    let plain_dir = tempfile::tempdir().unwrap();
    let packed_dir = tempfile::tempdir().unwrap();
    let plain_cfg = StoreConfig {
        compress: false,
        ..relaxed()
    };
    let (plain, plain_head, plain_blob, _) = write_same(plain_dir.path(), plain_cfg).await;
    let (packed, packed_head, packed_blob, _) = write_same(packed_dir.path(), relaxed()).await;
    assert_eq!(plain, packed, "the same events, hashes included");
    assert_eq!(plain_head, packed_head, "the same Merkle tree");
    assert_eq!(plain_blob, packed_blob);
    assert_eq!(packed_blob, Some(payload(99)));
    // Less on disk (the runway aside: count the log's frames, not the file).
    let used = |dir: &Path| {
        let mut total = 0u64;
        crate::scan_log(dir, |_| {})
            .map(|s| total = s.frames)
            .unwrap();
        let bytes = fs::read(seg(dir, 1)).unwrap();
        let end = bytes.iter().rposition(|&b| b != 0).unwrap_or(0);
        (total, end)
    };
    let (plain_frames, plain_end) = used(plain_dir.path());
    let (packed_frames, packed_end) = used(packed_dir.path());
    assert_eq!(plain_frames, packed_frames);
    assert!(
        packed_end * 2 < plain_end,
        "compressed log ends at {packed_end}, uncompressed at {plain_end}"
    );
    // Reopened (and re-indexed from the log alone), the compressed store verifies.
    fs::remove_dir_all(packed_dir.path().join("index")).unwrap();
    let store = open(packed_dir.path(), relaxed()).await;
    let report = store.verify(&sid("run-1")).await.unwrap();
    assert!(report.is_sound(), "{report:?}");
    assert_eq!(report.verified, 6);
    assert_eq!(
        store.tree_head(&sid("run-1"), None).await.unwrap(),
        plain_head
    );
    store.close().await;
}

#[tokio::test]
async fn damage_inside_a_compressed_record_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), relaxed()).await;
    store
        .append(&sid("run-1"), 0, vec![ev("a", &payload(1))])
        .await
        .unwrap();
    store.close().await;
    // The record starts after the segment header (32) and the frame header (12); its tag
    // says compressed. Flip a byte inside the zstd frame, and fix the frame's CRC so that
    // only the record is wrong.
    let path = seg(dir.path(), 1);
    let mut bytes = fs::read(&path).unwrap();
    let record = 32 + 12;
    assert_eq!(bytes[record + 4], crate::codec::TAG_EVENT_COMPRESSED);
    let len = u32::from_le_bytes(bytes[32 + 4..32 + 8].try_into().unwrap()) as usize;
    bytes[record + 5 + 20] ^= 0x5a;
    let crc = crc32fast::hash(&bytes[32 + 12..32 + 12 + len]);
    bytes[32 + 8..32 + 12].copy_from_slice(&crc.to_le_bytes());
    fs::write(&path, &bytes).unwrap();
    let store = open(dir.path(), relaxed()).await;
    let report = store.verify(&sid("run-1")).await.unwrap();
    let broken = report.first_break.as_ref().map(ChainBreak::seq);
    assert_eq!(broken, Some(1), "damage named at event 1: {report:?}");
    store.close().await;
}

#[tokio::test]
async fn a_format_1_store_is_upgraded_by_a_writer_and_left_alone_by_a_reader() {
    let dir = tempfile::tempdir().unwrap();
    let old = StoreConfig {
        compress: false,
        ..relaxed()
    };
    let store = open(dir.path(), old).await;
    store
        .append(&sid("run-1"), 0, vec![ev("a", &payload(1))])
        .await
        .unwrap();
    store.close().await;
    let marker = dir.path().join("DOCKET-STORE");
    fs::write(&marker, "docket-store format 1\n").unwrap();

    let view = EmbeddedStore::open_read_only(dir.path()).await.unwrap();
    assert_eq!(read_all(&view, &sid("run-1")).await.len(), 1);
    drop(view);
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        "docket-store format 1\n",
        "a reader changes nothing"
    );

    let store = open(dir.path(), relaxed()).await;
    store
        .append(&sid("run-1"), 1, vec![ev("b", &payload(2))])
        .await
        .unwrap();
    assert_eq!(read_all(&store, &sid("run-1")).await.len(), 2);
    store.close().await;
    assert_eq!(
        fs::read_to_string(&marker).unwrap(),
        "docket-store format 3\n"
    );
}

#[tokio::test]
async fn a_future_format_names_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("DOCKET-STORE"), "docket-store format 9\n").unwrap();
    let err = match EmbeddedStore::open(dir.path(), relaxed()).await {
        Ok(_) => panic!("a future format opened"),
        Err(e) => e,
    };
    assert!(
        matches!(err, StoreError::UnsupportedFormat { found: 9, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("reads versions 1 to 3"), "{err}");
}
