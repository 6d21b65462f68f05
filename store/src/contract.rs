//! What every [`EventStore`] backend must do, as checks any backend's tests run
//! ([`crate::event_store_contract!`]): the embedded log's own tests and the PostgreSQL
//! backend's run the same ones, so a run behaves the same, and hashes the same, on either.
//! Each check takes a fresh, empty store and panics, saying what was expected, when the
//! store does otherwise.

// Test code, run by backends' tests: a failed expectation is a panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};

use crate::merkle::{TreeBuilder, event_leaf_hash};
use crate::{
    BLOB_THRESHOLD, Event, EventStore, Hash, NewEvent, OutsideTree, Payload, StoreError,
    StoredDisclosure, StreamDigest, StreamId, WallTime, blob_hash, canonical_body, event_hash,
    genesis,
};

/// Runs every check of the contract as its own test, each with a fresh store from `open`:
/// an `async fn() -> Option<(S, G)>` whose `G` (a temporary directory, a database) is kept
/// until the test ends; `None` skips the check (a backend whose server is not installed
/// here, having said so).
#[macro_export]
macro_rules! event_store_contract {
    ($open:path) => {
        $crate::event_store_contract!(@each $open;
            appends_chain_and_read_back,
            refused_appends_name_the_versions_and_write_nothing,
            racing_appenders_keep_a_stream_dense,
            large_payloads_become_blobs_the_chain_covers,
            blobs_carried_by_an_append_are_kept,
            snapshots_are_found_at_or_before,
            ranged_reads_see_what_exists_when_they_start,
            tails_follow_appends,
            heads_and_streams_list_in_id_order,
            verify_counts_a_sound_stream,
            digests_keep_the_latest_per_stream,
            disclosures_are_kept_once_and_erased_to_tombstones,
            proofs_agree_with_a_tree_built_from_the_events,
            requests_outside_the_tree_are_named,
            mixed_operations_match_a_model,
        );
    };
    (@each $open:path; $($check:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let Some((store, _guard)) = $open().await else {
                    return;
                };
                $crate::contract::$check(&store).await;
            }
        )+
    };
}

fn sid(s: &str) -> StreamId {
    StreamId::new(s).expect("valid stream id")
}

fn ev(kind: &str, payload: &[u8]) -> NewEvent {
    NewEvent {
        kind: kind.to_owned(),
        kind_version: 1,
        recorded_at: WallTime(1_700_000_000_000_000_000),
        policy: None,
        payload: payload.to_vec(),
    }
}

async fn all<S: EventStore>(store: &S, stream: &StreamId) -> Vec<Event> {
    store
        .read(stream, 1..=u64::MAX)
        .try_collect()
        .await
        .expect("the stream reads back")
}

/// The next item of a tail, within a generous bound.
async fn next<T: Stream<Item = Result<Event, StoreError>> + Unpin>(tail: &mut T) -> Event {
    tokio::time::timeout(Duration::from_secs(20), tail.next())
        .await
        .expect("a tail yields the next event within 20 s")
        .expect("a tail does not end while the store is open")
        .expect("a tail yields events, not errors")
}

/// Events chain from the stream's genesis, each hash over its canonical body, and read
/// back with every field as appended.
pub async fn appends_chain_and_read_back<S: EventStore>(store: &S) {
    let s = sid("run-1");
    let mut first = ev("started", b"a");
    first.policy = Some(Hash([7; 32]));
    first.kind_version = 3;
    let a = store
        .append(&s, 0, vec![first.clone(), ev("handoff", b"b")])
        .await
        .unwrap();
    assert_eq!((a.first_seq, a.last_seq()), (1, 2));
    let b = store
        .append(&s, 2, vec![ev("finished", b"c")])
        .await
        .unwrap();
    assert_eq!(b.first_seq, 3);
    let events = all(store, &s).await;
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    let mut prev = genesis(&s);
    for e in &events {
        assert_eq!(e.prev, prev, "event {} links to the one before", e.seq);
        assert_eq!(
            e.hash,
            event_hash(&e.prev, &canonical_body(e)),
            "event {} hashes its canonical body",
            e.seq
        );
        prev = e.hash;
    }
    assert_eq!(a.hashes, [events[0].hash, events[1].hash]);
    assert_eq!(b.hashes, [events[2].hash]);
    let e = &events[0];
    assert_eq!(
        (
            &e.stream,
            e.kind.as_str(),
            e.kind_version,
            e.recorded_at,
            e.policy
        ),
        (&s, "started", 3, first.recorded_at, first.policy)
    );
    assert_eq!(e.payload, Payload::Inline(b"a".to_vec()));
}

/// A wrong expected version is a conflict naming both versions; an empty append is
/// refused; neither writes anything.
pub async fn refused_appends_name_the_versions_and_write_nothing<S: EventStore>(store: &S) {
    let s = sid("run");
    store.append(&s, 0, vec![ev("a", b"")]).await.unwrap();
    for expected in [0, 2, 7] {
        match store.append(&s, expected, vec![ev("b", b"")]).await {
            Err(StoreError::Conflict {
                expected: e,
                actual: 1,
                ..
            }) => assert_eq!(e, expected),
            other => panic!("an append at version {expected} of a 1-event stream: {other:?}"),
        }
    }
    let said = store
        .append(&s, 0, vec![ev("b", b"")])
        .await
        .unwrap_err()
        .to_string();
    assert!(said.contains("expected version 0, actual 1"), "{said}");
    assert!(matches!(
        store.append(&s, 1, Vec::new()).await,
        Err(StoreError::EmptyAppend { .. })
    ));
    assert!(matches!(
        store.append(&s, 1, vec![ev("", b"")]).await,
        Err(StoreError::InvalidName {
            what: "event kind",
            ..
        })
    ));
    let carried = b"a blob only a refused append carried".to_vec();
    assert!(matches!(
        store
            .append_with_blobs(&s, 0, vec![ev("c", b"")], vec![carried.clone()])
            .await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(all(store, &s).await.len(), 1, "nothing refused was written");
    assert_eq!(
        store.get_blob(&blob_hash(&carried)).await.unwrap(),
        None,
        "a refused append keeps none of its blobs"
    );
    assert!(matches!(
        store.append(&sid("fresh"), 3, vec![ev("a", b"")]).await,
        Err(StoreError::Conflict {
            expected: 3,
            actual: 0,
            ..
        })
    ));
    assert_eq!(store.head(&sid("fresh")).await.unwrap(), None);
}

/// Appenders racing on one stream: each acknowledged event is there once, in a dense,
/// sound chain.
pub async fn racing_appenders_keep_a_stream_dense<S: EventStore>(store: &S) {
    let s = sid("raced");
    let acknowledged = futures::future::join_all((0..8u8).map(|who| {
        let s = s.clone();
        async move {
            let mut mine = Vec::new();
            while mine.len() < 5 {
                let at = store.head(&s).await.unwrap().map_or(0, |h| h.seq);
                let payload = [who, mine.len() as u8];
                match store.append(&s, at, vec![ev("e", &payload)]).await {
                    Ok(a) => mine.push((a.first_seq, payload)),
                    Err(StoreError::Conflict { .. }) => tokio::task::yield_now().await,
                    Err(e) => panic!("a racing append failed: {e}"),
                }
            }
            mine
        }
    }))
    .await;
    let events = all(store, &s).await;
    assert_eq!(events.len(), 40);
    for (seq, payload) in acknowledged.into_iter().flatten() {
        let e = &events[usize::try_from(seq - 1).unwrap()];
        assert_eq!(e.payload, Payload::Inline(payload.to_vec()), "event {seq}");
    }
    let report = store.verify(&s).await.unwrap();
    assert!(report.is_sound() && report.verified == 40, "{report:?}");
}

/// A payload over [`BLOB_THRESHOLD`] is kept once as a blob the event refers to: the
/// reference is what the hash covers, and the bytes read back by their hash.
pub async fn large_payloads_become_blobs_the_chain_covers<S: EventStore>(store: &S) {
    let s = sid("big");
    let big = vec![9u8; BLOB_THRESHOLD + 1];
    let at_threshold = vec![8u8; BLOB_THRESHOLD];
    store
        .append(&s, 0, vec![ev("big", &big), ev("edge", &at_threshold)])
        .await
        .unwrap();
    let events = all(store, &s).await;
    match &events[0].payload {
        Payload::Blob(r) => {
            assert_eq!((r.hash, r.len), (blob_hash(&big), big.len() as u64));
            assert_eq!(store.get_blob(&r.hash).await.unwrap(), Some(big.clone()));
        }
        other => panic!("a {}-byte payload is a blob, not {other:?}", big.len()),
    }
    assert_eq!(events[1].payload, Payload::Inline(at_threshold));
    assert_eq!(
        events[0].hash,
        event_hash(&events[0].prev, &canonical_body(&events[0]))
    );
    assert!(store.verify(&s).await.unwrap().is_sound());
}

/// Blobs an append carries are kept, once however often given; an unknown hash has none.
pub async fn blobs_carried_by_an_append_are_kept<S: EventStore>(store: &S) {
    let s = sid("with-blobs");
    let (one, two) = (b"content one".to_vec(), b"content two".to_vec());
    store
        .append_with_blobs(
            &s,
            0,
            vec![ev("a", b"")],
            vec![one.clone(), two.clone(), one.clone()],
        )
        .await
        .unwrap();
    store
        .append_with_blobs(&s, 1, vec![ev("b", b"")], vec![one.clone()])
        .await
        .unwrap();
    assert_eq!(store.get_blob(&blob_hash(&one)).await.unwrap(), Some(one));
    assert_eq!(store.get_blob(&blob_hash(&two)).await.unwrap(), Some(two));
    assert_eq!(store.get_blob(&Hash([3; 32])).await.unwrap(), None);
    let put = b"put alone".to_vec();
    assert_eq!(store.put_blob(put.clone()).await.unwrap(), blob_hash(&put));
    assert_eq!(store.put_blob(put.clone()).await.unwrap(), blob_hash(&put));
    assert_eq!(store.get_blob(&blob_hash(&put)).await.unwrap(), Some(put));
}

/// The latest snapshot at or before a sequence, tied to that event's hash; none beyond
/// the head; removed all at once.
pub async fn snapshots_are_found_at_or_before<S: EventStore>(store: &S) {
    let s = sid("snap");
    let a = store
        .append(&s, 0, (0..6).map(|_| ev("e", b"")).collect())
        .await
        .unwrap();
    store.put_snapshot(&s, 2, b"at 2".to_vec()).await.unwrap();
    store.put_snapshot(&s, 5, b"at 5".to_vec()).await.unwrap();
    assert_eq!(store.latest_snapshot(&s, 1).await.unwrap(), None);
    let at4 = store
        .latest_snapshot(&s, 4)
        .await
        .unwrap()
        .expect("the one at 2");
    assert_eq!((at4.seq, at4.state.as_slice()), (2, &b"at 2"[..]));
    assert_eq!(at4.event_hash, a.hashes[1]);
    let latest = store.latest_snapshot(&s, u64::MAX).await.unwrap().unwrap();
    assert_eq!((latest.seq, latest.event_hash), (5, a.hashes[4]));
    for seq in [0, 7] {
        assert!(matches!(
            store.put_snapshot(&s, seq, b"x".to_vec()).await,
            Err(StoreError::SnapshotBeyondHead { head: 6, .. })
        ));
    }
    assert_eq!(store.remove_snapshots(&s).await.unwrap(), 2);
    assert_eq!(store.latest_snapshot(&s, u64::MAX).await.unwrap(), None);
}

/// Reads of any range, across more than one chunk of the largest backends read at once,
/// past the head and of streams that do not exist.
pub async fn ranged_reads_see_what_exists_when_they_start<S: EventStore>(store: &S) {
    let s = sid("long");
    let mut at = 0;
    while at < 5000 {
        let batch: Vec<NewEvent> = (0..500)
            .map(|i| ev("e", &u32::to_le_bytes(at + i)))
            .collect();
        store.append(&s, u64::from(at), batch).await.unwrap();
        at += 500;
    }
    let seqs = |events: Vec<Event>| events.iter().map(|e| e.seq).collect::<Vec<_>>();
    let middle: Vec<Event> = store.read(&s, 4090..=4100).try_collect().await.unwrap();
    assert_eq!(seqs(middle), (4090..=4100).collect::<Vec<_>>());
    let whole = all(store, &s).await;
    assert_eq!(whole.len(), 5000);
    assert_eq!(
        whole[4999].payload,
        Payload::Inline(4999u32.to_le_bytes().to_vec())
    );
    let beyond: Vec<Event> = store.read(&s, 4999..=9000).try_collect().await.unwrap();
    assert_eq!(seqs(beyond), [4999, 5000]);
    let none: Vec<Event> = store.read(&s, 6000..=7000).try_collect().await.unwrap();
    assert!(none.is_empty());
    let unknown: Vec<Event> = store
        .read(&sid("nobody"), 1..=10)
        .try_collect()
        .await
        .unwrap();
    assert!(unknown.is_empty());
}

/// A tail yields what the stream holds, then each event as it is acknowledged, and starts
/// on a stream that does not exist yet once it does.
pub async fn tails_follow_appends<S: EventStore>(store: &S) {
    let s = sid("followed");
    store.append(&s, 0, vec![ev("a", b"1")]).await.unwrap();
    let mut tail = Box::pin(store.tail(&s, 1));
    assert_eq!(next(&mut tail).await.seq, 1);
    let mut later = Box::pin(store.tail(&sid("later"), 1));
    for v in 1..5 {
        store.append(&s, v, vec![ev("b", b"2")]).await.unwrap();
    }
    for expected in 2..=5 {
        assert_eq!(next(&mut tail).await.seq, expected);
    }
    store
        .append(&sid("later"), 0, vec![ev("x", b"")])
        .await
        .unwrap();
    assert_eq!(next(&mut later).await.stream, sid("later"));
    let mut from_three = Box::pin(store.tail(&s, 3));
    assert_eq!(next(&mut from_three).await.seq, 3);
}

/// Heads name the last event; streams are listed in id order (byte order).
pub async fn heads_and_streams_list_in_id_order<S: EventStore>(store: &S) {
    assert_eq!(store.head(&sid("none")).await.unwrap(), None);
    assert!(store.streams().await.unwrap().is_empty());
    let mut hashes = Vec::new();
    for (name, n) in [("b", 2), ("a", 1), ("B", 3), ("a-1", 1)] {
        let a = store
            .append(
                &sid(name),
                0,
                (0..n).map(|_| ev("e", name.as_bytes())).collect(),
            )
            .await
            .unwrap();
        hashes.push((name, n, *a.hashes.last().unwrap()));
    }
    let listed = store.streams().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|h| h.stream.as_str()).collect();
    assert_eq!(names, ["B", "a", "a-1", "b"]);
    for (name, n, hash) in hashes {
        let head = store.head(&sid(name)).await.unwrap().unwrap();
        assert_eq!((head.seq, head.hash), (n, hash), "head of {name}");
        assert!(listed.contains(&head));
    }
}

/// `verify` of a sound stream counts its events; of an unknown one, none.
pub async fn verify_counts_a_sound_stream<S: EventStore>(store: &S) {
    let s = sid("checked");
    store
        .append(&s, 0, (0..7).map(|i| ev("e", &[i])).collect())
        .await
        .unwrap();
    let report = store.verify(&s).await.unwrap();
    assert!(report.is_sound(), "{report:?}");
    assert_eq!((report.verified, &report.stream), (7, &s));
    let none = store.verify(&sid("nobody")).await.unwrap();
    assert!(none.is_sound() && none.verified == 0, "{none:?}");
}

/// Digests: the latest of each stream, in id order; none beyond a stream's head.
pub async fn digests_keep_the_latest_per_stream<S: EventStore>(store: &S) {
    store.put_digests(Vec::new()).await.unwrap();
    let (a, b) = (sid("a"), sid("b"));
    let ha = store
        .append(&a, 0, vec![ev("e", b""), ev("e", b"")])
        .await
        .unwrap();
    let hb = store.append(&b, 0, vec![ev("e", b"")]).await.unwrap();
    let digest = |stream: &StreamId, seq: u64, hash: Hash, bytes: &[u8]| StreamDigest {
        stream: stream.clone(),
        seq,
        event_hash: hash,
        bytes: bytes.to_vec(),
    };
    store
        .put_digests(vec![
            digest(&b, 1, hb.hashes[0], b"b1"),
            digest(&a, 1, ha.hashes[0], b"a1"),
        ])
        .await
        .unwrap();
    store
        .put_digests(vec![digest(&a, 2, ha.hashes[1], b"a2")])
        .await
        .unwrap();
    let kept = store.digests().await.unwrap();
    assert_eq!(
        kept,
        vec![
            digest(&a, 2, ha.hashes[1], b"a2"),
            digest(&b, 1, hb.hashes[0], b"b1")
        ]
    );
    assert!(matches!(
        store
            .put_digests(vec![digest(&b, 2, hb.hashes[0], b"x")])
            .await,
        Err(StoreError::DigestBeyondHead {
            seq: 2,
            head: 1,
            ..
        })
    ));
}

/// Disclosures are kept once per digest; erasing one leaves its tombstone and removes the
/// stream's snapshots; the others stay.
pub async fn disclosures_are_kept_once_and_erased_to_tombstones<S: EventStore>(store: &S) {
    let s = sid("disclosed");
    let (one, two) = ([1u8; 32], [2u8; 32]);
    assert!(store.disclosures(&s).await.unwrap().is_empty());
    store
        .put_disclosures(
            &s,
            vec![(one, b"first".to_vec()), (two, b"second".to_vec())],
        )
        .await
        .unwrap();
    store
        .put_disclosures(&s, vec![(one, b"other bytes".to_vec())])
        .await
        .unwrap();
    store.append(&s, 0, vec![ev("e", b"")]).await.unwrap();
    store.put_snapshot(&s, 1, b"state".to_vec()).await.unwrap();
    let kept = store.disclosures(&s).await.unwrap();
    assert_eq!(
        kept.get(&one),
        Some(&StoredDisclosure::Present(b"first".to_vec()))
    );
    let after = store
        .shred_disclosures(&s, vec![two], b"who, when, why".to_vec())
        .await
        .unwrap();
    assert_eq!(
        after.get(&two),
        Some(&StoredDisclosure::Shredded(b"who, when, why".to_vec()))
    );
    assert_eq!(
        after.get(&one),
        Some(&StoredDisclosure::Present(b"first".to_vec()))
    );
    assert_eq!(store.disclosures(&s).await.unwrap(), after);
    assert_eq!(store.latest_snapshot(&s, u64::MAX).await.unwrap(), None);
    assert!(store.verify(&s).await.unwrap().is_sound());
}

/// Tree heads and both kinds of proof, for streams of several lengths and every size,
/// agree with an RFC 9162 tree built from the events read back, and check.
pub async fn proofs_agree_with_a_tree_built_from_the_events<S: EventStore>(store: &S) {
    for len in [1u64, 2, 3, 7, 8, 9, 33] {
        let s = sid(&format!("tree-{len}"));
        store
            .append(&s, 0, (0..len).map(|i| ev("e", &i.to_le_bytes())).collect())
            .await
            .unwrap();
        let events = all(store, &s).await;
        let mut roots = Vec::new();
        let mut builder = TreeBuilder::new();
        for e in &events {
            builder.push(event_leaf_hash(e));
            roots.push(builder.root());
        }
        assert_eq!(
            store.tree_head(&s, None).await.unwrap().root,
            roots[len as usize - 1]
        );
        for size in 1..=len {
            let head = store.tree_head(&s, Some(size)).await.unwrap();
            assert_eq!((head.size, head.root), (size, roots[size as usize - 1]));
            for seq in [1, size.div_ceil(2), size] {
                let proof = store.inclusion_proof(&s, seq, Some(size)).await.unwrap();
                proof
                    .check()
                    .unwrap_or_else(|e| panic!("{len}: event {seq} in {size}: {e}"));
                assert_eq!(proof.leaf, event_leaf_hash(&events[seq as usize - 1]));
                assert_eq!(proof.event_hash, events[seq as usize - 1].hash);
            }
            for old in [0, 1, size / 2, size] {
                let proof = store.consistency_proof(&s, old, Some(size)).await.unwrap();
                proof
                    .check()
                    .unwrap_or_else(|e| panic!("{len}: {old} to {size}: {e}"));
            }
        }
    }
    let empty = store.tree_head(&sid("nobody"), None).await.unwrap();
    assert_eq!(empty.size, 0);
}

/// A proof asked for events or sizes the stream does not have names what was wrong.
pub async fn requests_outside_the_tree_are_named<S: EventStore>(store: &S) {
    let s = sid("short");
    store
        .append(&s, 0, (0..3).map(|_| ev("e", b"")).collect())
        .await
        .unwrap();
    let outside = |r: Result<_, StoreError>| match r {
        Err(StoreError::OutsideTree { problem, .. }) => problem,
        Err(other) => panic!("expected OutsideTree, got {other}"),
        Ok(_) => panic!("expected OutsideTree, got a proof"),
    };
    assert_eq!(
        outside(store.inclusion_proof(&s, 0, None).await.map(|_| ())),
        OutsideTree::EventZero
    );
    assert_eq!(
        outside(store.inclusion_proof(&s, 3, Some(2)).await.map(|_| ())),
        OutsideTree::EventBeyondTree { seq: 3, size: 2 }
    );
    assert_eq!(
        outside(store.tree_head(&s, Some(4)).await.map(|_| ())),
        OutsideTree::TreeBeyondStream { size: 4, head: 3 }
    );
    assert_eq!(
        outside(store.consistency_proof(&s, 3, Some(2)).await.map(|_| ())),
        OutsideTree::Shrinking { old: 3, new: 2 }
    );
    assert_eq!(
        outside(store.consistency_proof(&s, 4, None).await.map(|_| ())),
        OutsideTree::TreeBeyondStream { size: 4, head: 3 }
    );
}

/// A fixed mix of appends (some refused), blobs, snapshots and reads over several streams,
/// against a model of what each stream holds.
pub async fn mixed_operations_match_a_model<S: EventStore>(store: &S) {
    let mut model: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut step = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for i in 0..200u64 {
        let r = step();
        let which = (r % 3) as usize;
        let s = sid(&format!("m{which}"));
        let held = model[which].len() as u64;
        match (r >> 8) % 4 {
            0 | 1 => {
                let n = 1 + (r >> 16) % 3;
                let big = (r >> 20) % 17 == 0;
                let batch: Vec<Vec<u8>> = (0..n)
                    .map(|k| {
                        if big && k == 0 {
                            vec![(i % 251) as u8; BLOB_THRESHOLD + 5]
                        } else {
                            format!("{i}-{k}").into_bytes()
                        }
                    })
                    .collect();
                // One append in eight comes from a stale version.
                let stale = (r >> 24) % 8 == 0 && held > 0;
                let at = if stale { held - 1 } else { held };
                let events = batch.iter().map(|p| ev("m", p)).collect();
                match store.append(&s, at, events).await {
                    Ok(a) => {
                        assert!(!stale, "a stale append was accepted");
                        assert_eq!(a.first_seq, held + 1);
                        model[which].extend(batch);
                    }
                    Err(StoreError::Conflict { actual, .. }) => {
                        assert!(stale);
                        assert_eq!(actual, held);
                    }
                    Err(e) => panic!("append failed: {e}"),
                }
            }
            2 if held > 0 => {
                let seq = 1 + (r >> 16) % held;
                store
                    .put_snapshot(&s, seq, seq.to_le_bytes().to_vec())
                    .await
                    .unwrap();
                // Snapshots are a cache, pruned as they are written: the one found is at
                // or before `seq` and holds what was put for its sequence.
                if let Some(found) = store.latest_snapshot(&s, seq).await.unwrap() {
                    assert!(found.seq <= seq, "{} > {seq}", found.seq);
                    assert_eq!(found.state, found.seq.to_le_bytes());
                }
            }
            _ => {
                let events = all(store, &s).await;
                assert_eq!(events.len() as u64, held);
                for (e, want) in events.iter().zip(&model[which]) {
                    let got = match &e.payload {
                        Payload::Inline(b) => b.clone(),
                        Payload::Blob(r) => store.get_blob(&r.hash).await.unwrap().unwrap(),
                    };
                    assert_eq!(&got, want, "event {} of m{which}", e.seq);
                }
            }
        }
    }
    for (which, events) in model.iter().enumerate() {
        let s = sid(&format!("m{which}"));
        let report = store.verify(&s).await.unwrap();
        assert!(
            report.is_sound() && report.verified == events.len() as u64,
            "{report:?}"
        );
    }
}
