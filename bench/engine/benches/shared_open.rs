//! What a read-only view costs against a writer's open (issue 17 point 1): the commands
//! that read (`docket runs`, `status`, ...) open the data directory read-only, which reads
//! and checks the whole log into an index in memory instead of opening the sled index (a
//! writer's open takes the lock and re-indexes only what the index does not cover). For a
//! log of N events (`DOCKET_BENCH_EVENTS`, default 10,000 and 100,000; 20 events of about
//! 600 bytes per stream, as a short run), prints the best of 5 of: a writer's open and
//! listing of its streams (the baseline), a view's open and listing, and the ratio.
//!
//! Run with `cargo bench -p docket-bench-engine --bench shared_open`.
#![allow(clippy::print_stdout)]

use std::path::Path;

use docket_bench_engine::{best_of, ms, sizes};
use docket_store::{
    Durability, EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime,
};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PER_STREAM: usize = 20;

fn event(i: usize) -> NewEvent {
    NewEvent {
        kind: "agent.responded".into(),
        kind_version: 1,
        recorded_at: WallTime(1_700_000_000_000_000_000 + i as i64),
        policy: Some(docket_store::Hash([7; 32])),
        payload: vec![b'x'; 600],
    }
}

async fn fill(dir: &Path, events: usize) {
    let config = StoreConfig {
        durability: Durability::UnsafeNoSync,
        ..StoreConfig::default()
    };
    let store = EmbeddedStore::open(dir, config).await.expect("store opens");
    for s in 0..events.div_ceil(PER_STREAM) {
        let stream = StreamId::new(format!("run-{s:07}")).expect("stream id");
        let batch = (0..PER_STREAM).map(|i| event(s * PER_STREAM + i)).collect();
        store.append(&stream, 0, batch).await.expect("append");
    }
    store.close().await;
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("events\twriter open+list\tview open+list\tview / writer");
    for n in sizes(&[10_000, 100_000]) {
        let dir = tempfile::tempdir().expect("tempdir");
        rt.block_on(fill(dir.path(), n));
        let writer = best_of(5, || {
            rt.block_on(async {
                let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
                    .await
                    .expect("writer opens");
                assert_eq!(
                    store.streams().await.expect("streams").len(),
                    n.div_ceil(PER_STREAM)
                );
                store.close().await;
            });
        });
        let view = best_of(5, || {
            rt.block_on(async {
                let store = EmbeddedStore::open_read_only(dir.path())
                    .await
                    .expect("view opens");
                assert_eq!(
                    store.streams().await.expect("streams").len(),
                    n.div_ceil(PER_STREAM)
                );
                store.close().await;
            });
        });
        println!(
            "{n}\t{}\t{}\t{:.1}x",
            ms(writer),
            ms(view),
            view.as_secs_f64() / writer.as_secs_f64()
        );
    }
}
