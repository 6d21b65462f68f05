//! Random appends, reads, snapshots and reopenings against a plain in-memory model.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::{Payload, StoreError};

#[derive(Clone, Debug)]
enum Op {
    Append { stream: u8, payloads: Vec<Vec<u8>> },
    StaleAppend { stream: u8 },
    Read { stream: u8, from: u64, len: u64 },
    Snapshot { stream: u8, seq: u64 },
    LatestSnapshot { stream: u8, at: u64 },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let payload = prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => proptest::collection::vec(any::<u8>(), 60..120),
    ];
    prop_oneof![
        6 => (0u8..3, proptest::collection::vec(payload, 1..4))
            .prop_map(|(stream, payloads)| Op::Append { stream, payloads }),
        1 => (0u8..3).prop_map(|stream| Op::StaleAppend { stream }),
        3 => (0u8..3, 0u64..12, 0u64..12).prop_map(|(stream, from, len)| Op::Read { stream, from, len }),
        1 => (0u8..3, 0u64..12).prop_map(|(stream, seq)| Op::Snapshot { stream, seq }),
        1 => (0u8..3, 0u64..12).prop_map(|(stream, at)| Op::LatestSnapshot { stream, at }),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Default)]
struct Model {
    streams: BTreeMap<u8, Vec<Vec<u8>>>,
    snapshots: BTreeMap<(u8, u64), Vec<u8>>,
}

fn name(stream: u8) -> StreamId {
    sid(&format!("stream-{stream}"))
}

async fn payload_bytes(store: &EmbeddedStore, p: &Payload) -> Vec<u8> {
    match p {
        Payload::Inline(b) => b.clone(),
        Payload::Blob(r) => store.get_blob(&r.hash).await.unwrap().unwrap(),
    }
}

async fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        blob_threshold: 50,
        segment_max_bytes: 2048,
        ..relaxed()
    };
    let mut store = open(dir.path(), config.clone()).await;
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Append { stream, payloads } => {
                let have = model.streams.entry(stream).or_default();
                let events = payloads.iter().map(|p| ev("e", p)).collect();
                let a = store
                    .append(&name(stream), have.len() as u64, events)
                    .await
                    .unwrap();
                assert_eq!(a.first_seq, have.len() as u64 + 1);
                have.extend(payloads);
            }
            Op::StaleAppend { stream } => {
                let len = model.streams.get(&stream).map_or(0, Vec::len) as u64;
                let err = store
                    .append(&name(stream), len + 1, vec![ev("e", b"")])
                    .await
                    .unwrap_err();
                assert!(
                    matches!(err, StoreError::Conflict { expected, actual, .. } if expected == len + 1 && actual == len)
                );
            }
            Op::Read { stream, from, len } => {
                let have = model.streams.get(&stream).cloned().unwrap_or_default();
                let to = from + len;
                let got: Vec<_> = futures::TryStreamExt::try_collect::<Vec<_>>(
                    store.read(&name(stream), from..=to),
                )
                .await
                .unwrap();
                let lo = from.max(1);
                let want: Vec<(u64, &Vec<u8>)> = (lo..=to.min(have.len() as u64))
                    .map(|s| (s, &have[(s - 1) as usize]))
                    .collect();
                assert_eq!(got.len(), want.len());
                for (e, (seq, p)) in got.iter().zip(want) {
                    assert_eq!(e.seq, seq);
                    assert_eq!(&payload_bytes(&store, &e.payload).await, p);
                }
            }
            Op::Snapshot { stream, seq } => {
                let len = model.streams.get(&stream).map_or(0, Vec::len) as u64;
                let state = format!("state {stream} {seq}").into_bytes();
                let r = store.put_snapshot(&name(stream), seq, state.clone()).await;
                if seq >= 1 && seq <= len {
                    r.unwrap();
                    model.snapshots.insert((stream, seq), state);
                    // The store prunes a stream's older snapshots (FORMAT.md §12).
                    let seqs: Vec<u64> = model
                        .snapshots
                        .range((stream, 0)..=(stream, u64::MAX))
                        .map(|((_, q), _)| *q)
                        .collect();
                    let kept = crate::snapshots::kept_snapshots(&seqs);
                    model
                        .snapshots
                        .retain(|(st, q), _| *st != stream || kept.contains(q));
                } else {
                    assert!(matches!(r, Err(StoreError::SnapshotBeyondHead { .. })));
                }
            }
            Op::LatestSnapshot { stream, at } => {
                let got = store.latest_snapshot(&name(stream), at).await.unwrap();
                let want = model
                    .snapshots
                    .range((stream, 0)..=(stream, at))
                    .next_back();
                assert_eq!(
                    got.map(|s| (s.seq, s.state)),
                    want.map(|((_, q), s)| (*q, s.clone()))
                );
            }
            Op::Reopen => {
                store.close().await;
                store = open(dir.path(), config.clone()).await;
            }
        }
    }
    let heads = store.streams().await.unwrap();
    assert_eq!(
        heads.len(),
        model.streams.values().filter(|v| !v.is_empty()).count()
    );
    for h in heads {
        assert!(store.verify(&h.stream).await.unwrap().is_sound());
    }
    store.close().await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn store_behaves_like_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(ops));
    }
}
