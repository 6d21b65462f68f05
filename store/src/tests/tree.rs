//! The Merkle tree the store keeps: its heads and proofs agree with a tree built from the
//! events read back, for many stream lengths, before and after the index has caught up and
//! after the index is rebuilt; requests outside a stream are typed errors; `verify` finds a
//! damaged node.

use proptest::prelude::*;

use super::{ev, open, read_all, relaxed, sid};
use crate::index::Index;
use crate::merkle::{TreeBuilder, TreeHash, event_leaf_hash, verify_consistency, verify_inclusion};
use crate::{ChainBreak, EmbeddedStore, EventStore, StreamId};

/// Appends `len` events to `stream` in appends of up to `batch` events.
async fn fill(store: &EmbeddedStore, stream: &StreamId, len: u64, batch: u64) {
    let mut at = 0;
    while at < len {
        let n = batch.min(len - at);
        let events = (at..at + n)
            .map(|i| ev("e", format!("event {i} of {stream}").as_bytes()))
            .collect();
        store.append(stream, at, events).await.unwrap();
        at += n;
    }
}

/// The roots of every prefix of the stream, from its events read back.
async fn roots(store: &EmbeddedStore, stream: &StreamId) -> (Vec<TreeHash>, Vec<TreeHash>) {
    let leaves: Vec<TreeHash> = read_all(store, stream)
        .await
        .iter()
        .map(event_leaf_hash)
        .collect();
    let mut builder = TreeBuilder::new();
    let mut roots = vec![builder.root()];
    for leaf in &leaves {
        builder.push(*leaf);
        roots.push(builder.root());
    }
    (leaves, roots)
}

/// Checks the store's heads and proofs at `picks` (sizes and sequences drawn from them)
/// against the roots built from the events.
async fn check_against_builder(store: &EmbeddedStore, stream: &StreamId, picks: &[u64]) {
    let (leaves, roots) = roots(store, stream).await;
    let len = leaves.len() as u64;
    let head = store.tree_head(stream, None).await.unwrap();
    assert_eq!((head.size, head.root), (len, roots[len as usize]));
    for pair in picks.chunks(2) {
        let size = pair[0] % (len + 1);
        let other = pair.get(1).copied().unwrap_or(0) % (len + 1);
        let head = store.tree_head(stream, Some(size)).await.unwrap();
        assert_eq!(head.root, roots[size as usize], "root of size {size}");
        if size > 0 {
            let seq = other % size + 1;
            let proof = store
                .inclusion_proof(stream, seq, Some(size))
                .await
                .unwrap();
            assert_eq!(proof.leaf, leaves[seq as usize - 1]);
            assert_eq!(proof.leaf_index(), seq - 1);
            verify_inclusion(
                &proof.leaf,
                seq - 1,
                size,
                &proof.path,
                &roots[size as usize],
            )
            .unwrap_or_else(|e| panic!("inclusion of {seq} in {size}: {e}"));
        }
        let (old, new) = (size.min(other), size.max(other));
        let proof = store
            .consistency_proof(stream, old, Some(new))
            .await
            .unwrap();
        assert_eq!(
            (proof.old.root, proof.new.root),
            (roots[old as usize], roots[new as usize])
        );
        verify_consistency(
            old,
            new,
            &roots[old as usize],
            &roots[new as usize],
            &proof.path,
        )
        .unwrap_or_else(|e| panic!("consistency of {old} to {new}: {e}"));
        proof.check().unwrap();
    }
}

async fn stream_lengths(lengths: Vec<(u64, u64)>, picks: Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), relaxed()).await;
    let names: Vec<StreamId> = (0..lengths.len()).map(|i| sid(&format!("s{i}"))).collect();
    for ((len, batch), stream) in lengths.iter().zip(&names) {
        fill(&store, stream, *len, *batch).await;
    }
    // Straight after the appends: the index may trail them.
    for stream in &names {
        check_against_builder(&store, stream, &picks).await;
    }
    store.close().await;
    // Indexed, and then rebuilt from the log alone.
    let store = open(dir.path(), relaxed()).await;
    let mut before = Vec::new();
    for stream in &names {
        check_against_builder(&store, stream, &picks).await;
        let head = store.tree_head(stream, None).await.unwrap();
        let proof = store
            .inclusion_proof(stream, (head.size / 2).max(1), None)
            .await
            .unwrap();
        before.push((head, proof));
        assert!(store.verify(stream).await.unwrap().is_sound());
    }
    store.close().await;
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let store = open(dir.path(), relaxed()).await;
    for (stream, (head, proof)) in names.iter().zip(before) {
        assert_eq!(store.tree_head(stream, None).await.unwrap(), head);
        let again = store
            .inclusion_proof(stream, proof.seq, None)
            .await
            .unwrap();
        assert_eq!(again, proof);
        check_against_builder(&store, stream, &picks).await;
        assert!(store.verify(stream).await.unwrap().is_sound());
    }
    store.close().await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Lengths cross the 256-event blocks the index keeps nodes for, and appends of one
    /// event and of many.
    #[test]
    fn store_proofs_check_against_trees_built_from_the_events(
        lengths in proptest::collection::vec((1u64..1100, 1u64..300), 1..4),
        picks in proptest::collection::vec(any::<u64>(), 8..16),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(stream_lengths(lengths, picks));
    }
}

/// Stream "a" of 700 events (its stream number is 0), closed so the index holds its tree.
async fn indexed_stream(dir: &std::path::Path) {
    let store = open(dir, relaxed()).await;
    fill(&store, &sid("a"), 700, 50).await;
    store.close().await;
}

#[tokio::test]
async fn verify_names_a_damaged_tree_node_in_the_index() {
    let dir = tempfile::tempdir().unwrap();
    indexed_stream(dir.path()).await;
    let store = open(dir.path(), relaxed()).await;
    assert!(store.verify(&sid("a")).await.unwrap().is_sound());
    // Event 1's path in the tree of 512 climbs past the node of events 257 to 512.
    let good = store
        .inclusion_proof(&sid("a"), 1, Some(512))
        .await
        .unwrap();
    good.check().unwrap();
    store.close().await;

    let forged = TreeHash([7; 32]);
    {
        let index = Index::open(&dir.path().join("index")).unwrap();
        index.overwrite_tree_node(0, 8, 1, &forged);
        index.flush().unwrap();
    }
    let store = open(dir.path(), relaxed()).await;
    // The damaged node reaches the proofs served from the index, which then do not check...
    let bad = store
        .inclusion_proof(&sid("a"), 1, Some(512))
        .await
        .unwrap();
    assert_eq!(bad.path.last(), Some(&forged));
    assert!(bad.check().is_err());
    // ...and verify names it, and the events under it.
    let report = store.verify(&sid("a")).await.unwrap();
    let Some(ChainBreak::TreeNode {
        level: 8,
        index: 1,
        stored: Some(stored),
        ..
    }) = report.first_break.clone()
    else {
        panic!("expected the node at level 8, index 1, got {report:?}");
    };
    assert_eq!(stored, forged);
    assert_eq!(report.first_break.as_ref().map(ChainBreak::seq), Some(257));
    let text = report.first_break.unwrap().to_string();
    assert!(
        text.contains("level 8, index 1 (events 257 to 512)"),
        "{text}"
    );
    store.close().await;
}

#[tokio::test]
async fn verify_names_a_damaged_frontier_in_the_index() {
    let dir = tempfile::tempdir().unwrap();
    indexed_stream(dir.path()).await;
    let forged = TreeHash([7; 32]);
    {
        // The frontier holds the low subtrees the index goes on from, kept nowhere else.
        let index = Index::open(&dir.path().join("index")).unwrap();
        let kept = index.frontier(0).unwrap().expect("a frontier");
        let wrong = TreeBuilder::resume(
            kept.size(),
            kept.frontier()
                .iter()
                .map(|&(level, h)| (level, if level == 5 { forged } else { h }))
                .collect(),
        )
        .unwrap();
        index.overwrite_frontier(0, &wrong);
        index.flush().unwrap();
    }
    let store = open(dir.path(), relaxed()).await;
    let report = store.verify(&sid("a")).await.unwrap();
    // 700 = 512 + 128 + 32 + 16 + 8 + 4: the level-5 subtree holds events 641 to 672.
    assert!(
        matches!(
            report.first_break,
            Some(ChainBreak::TreeNode { level: 5, index: 20, stored: Some(s), .. }) if s == forged
        ),
        "{report:?}"
    );
    assert_eq!(report.verified, 700);
    store.close().await;
}

#[tokio::test]
async fn an_index_without_trees_is_rebuilt_with_them() {
    let dir = tempfile::tempdir().unwrap();
    indexed_stream(dir.path()).await;
    let store = open(dir.path(), relaxed()).await;
    let head = store.tree_head(&sid("a"), None).await.unwrap();
    store.close().await;
    {
        let index = Index::open(&dir.path().join("index")).unwrap();
        index.forget_trees();
        index.flush().unwrap();
    }
    let store = open(dir.path(), relaxed()).await;
    assert!(store.recovery_report().trees_built);
    assert_eq!(store.recovery_report().reindexed_events, 700);
    assert_eq!(store.tree_head(&sid("a"), None).await.unwrap(), head);
    // Appends go on growing the rebuilt tree.
    store
        .append(&sid("a"), 700, vec![ev("e", b"after")])
        .await
        .unwrap();
    store.close().await;
    let store = open(dir.path(), relaxed()).await;
    assert!(!store.recovery_report().trees_built);
    check_against_builder(&store, &sid("a"), &[701, 3, 700, 257, 1, 512]).await;
    assert!(store.verify(&sid("a")).await.unwrap().is_sound());
    store.close().await;
}

#[tokio::test]
async fn an_index_whose_tree_contradicts_its_head_is_rebuilt_on_open() {
    let dir = tempfile::tempdir().unwrap();
    indexed_stream(dir.path()).await;
    let store = open(dir.path(), relaxed()).await;
    let head = store.tree_head(&sid("a"), None).await.unwrap();
    store.close().await;
    {
        let index = Index::open(&dir.path().join("index")).unwrap();
        index.overwrite_frontier(0, &TreeBuilder::new());
        // The log beyond what the index covers is re-indexed on open: make it all of it.
        index.flush().unwrap();
    }
    // Appending with the short tree poisons the writer (the indexer refuses to grow it)...
    let store = open(dir.path(), relaxed()).await;
    store
        .append(&sid("a"), 700, vec![ev("e", b"after")])
        .await
        .unwrap();
    store.close().await;
    // ...and reopening re-indexes that batch, finds the tree short and rebuilds the index.
    let store = open(dir.path(), relaxed()).await;
    assert!(store.recovery_report().index_rebuilt);
    let after = store.tree_head(&sid("a"), Some(700)).await.unwrap();
    assert_eq!(after, head);
    check_against_builder(&store, &sid("a"), &[701, 3, 700, 257]).await;
    assert!(store.verify(&sid("a")).await.unwrap().is_sound());
    store.close().await;
}
