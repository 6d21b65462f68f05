//! Store-level tests: behaviour through the public API, plus damage done to the files.

mod basic;
mod compression;
mod contract;
mod corruption;
mod faults;
mod format_example;
mod model;
mod runway;
mod shared_dir;
mod tree;

use std::path::{Path, PathBuf};

use futures::TryStreamExt;

use crate::{
    Durability, EmbeddedStore, Event, EventStore, NewEvent, StoreConfig, StreamId, WallTime,
};

pub(crate) fn sid(s: &str) -> StreamId {
    StreamId::new(s).expect("valid stream id")
}

pub(crate) fn ev(kind: &str, payload: &[u8]) -> NewEvent {
    NewEvent {
        kind: kind.to_owned(),
        kind_version: 1,
        recorded_at: WallTime(1_700_000_000_000_000_000),
        policy: None,
        payload: payload.to_vec(),
    }
}

pub(crate) fn relaxed() -> StoreConfig {
    StoreConfig {
        durability: Durability::UnsafeNoSync,
        ..StoreConfig::default()
    }
}

pub(crate) async fn open(dir: &Path, config: StoreConfig) -> EmbeddedStore {
    EmbeddedStore::open(dir, config).await.expect("store opens")
}

pub(crate) async fn read_all(store: &EmbeddedStore, stream: &StreamId) -> Vec<Event> {
    store
        .read(stream, 1..=u64::MAX)
        .try_collect()
        .await
        .expect("stream reads back")
}

/// The path of segment `no` of the store in `dir`.
pub(crate) fn seg(dir: &Path, no: u64) -> PathBuf {
    dir.join("log").join(format!("{no:020}.seg"))
}

/// Appends `n` batches of one event each to stream "a" (event `i`'s payload: `len` bytes of
/// value `i`), then closes the store.
pub(crate) async fn one_event_per_batch(dir: &Path, config: StoreConfig, n: u8, len: usize) {
    let store = open(dir, config).await;
    for i in 0..n {
        store
            .append(&sid("a"), u64::from(i), vec![ev("e", &vec![i; len])])
            .await
            .unwrap();
    }
    store.close().await;
}
