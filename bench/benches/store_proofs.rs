//! Merkle proofs of one long stream (store/FORMAT.md §9): the time of an inclusion proof and
//! of a consistency proof for random events, next to reading one event by sequence (the
//! baseline: one index lookup and one chain-checked record), measured in the same run, at
//! growing stream sizes, so how proof time grows with the stream shows.
//!
//! Run: `cargo bench -p docket-bench --bench store_proofs` (optional arguments: the largest
//! size, default 1000000; `quick` for 100000). The stream is built with
//! `Durability::UnsafeNoSync` (what is measured is reading, not syncing), in appends of 1,000
//! events of 100 bytes: about 230 MB of log at 1,000,000 events, deleted at the end.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::{Duration, Instant};

use docket_store::{
    Durability, EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime,
};
use futures::TryStreamExt;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PAYLOAD: usize = 100;
const APPEND: u64 = 1000;
/// Random events proved per size.
const SAMPLES: usize = 300;

fn event(i: u64) -> NewEvent {
    let mut payload = vec![b'x'; PAYLOAD];
    payload[..8].copy_from_slice(&i.to_le_bytes());
    NewEvent {
        kind: "bench".into(),
        kind_version: 1,
        recorded_at: WallTime(i as i64),
        policy: None,
        payload,
    }
}

/// A fixed-seed generator (SplitMix64), so every run proves the same events.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `(median, 99th percentile, max)` in µs.
fn summary(xs: &mut [f64]) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), at(1.0))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "quick");
    let largest: u64 = args
        .iter()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(if quick { 100_000 } else { 1_000_000 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = StoreConfig {
        durability: Durability::UnsafeNoSync,
        ..StoreConfig::default()
    };
    let stream = StreamId::new("long-run").expect("id");
    let mut sizes = vec![10_000u64, 100_000, 1_000_000];
    sizes.retain(|s| *s < largest);
    sizes.push(largest);

    println!(
        "docket store_proofs bench: one stream, {PAYLOAD}-byte payloads, {SAMPLES} random events per size; \
         median / p99 / max in us"
    );
    let mut rng = Rng(0x5eed);
    let mut built = 0u64;
    for size in sizes {
        runtime.block_on(async {
            let store = EmbeddedStore::open(tmp.path(), config.clone())
                .await
                .expect("open");
            let start = Instant::now();
            while built < size {
                let n = APPEND.min(size - built);
                store
                    .append(&stream, built, (built..built + n).map(event).collect())
                    .await
                    .expect("append");
                built += n;
            }
            let appended = start.elapsed();
            // Closing waits for the index to catch up: proofs are measured on an indexed
            // stream, as they are after any pause in appending.
            store.close().await;
            println!(
                "{size} events: appended in {:.1} s (no fsync; the index catches up on close)",
                appended.as_secs_f64()
            );
        });
        runtime.block_on(async {
            let store = EmbeddedStore::open(tmp.path(), config.clone())
                .await
                .expect("reopen");
            let head = store.tree_head(&stream, None).await.expect("head");
            assert_eq!(head.size, size);
            let (mut read, mut inclusion, mut consistency, mut heads) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..SAMPLES {
                let seq = rng.below(size) + 1;
                let old = rng.below(size) + 1;
                // The baseline: one event by sequence, chain-checked.
                let t = Instant::now();
                let events: Vec<_> = store
                    .read(&stream, seq..=seq)
                    .try_collect()
                    .await
                    .expect("read");
                read.push(micros(t.elapsed()));
                assert_eq!(events.len(), 1);

                let t = Instant::now();
                let proof = store
                    .inclusion_proof(&stream, seq, None)
                    .await
                    .expect("inclusion");
                inclusion.push(micros(t.elapsed()));
                proof.check().expect("inclusion proof checks");
                assert_eq!(proof.event_hash, events[0].hash);

                let t = Instant::now();
                let proof = store
                    .consistency_proof(&stream, old, None)
                    .await
                    .expect("consistency");
                consistency.push(micros(t.elapsed()));
                proof.check().expect("consistency proof checks");

                let t = Instant::now();
                let at = store.tree_head(&stream, Some(old)).await.expect("head");
                heads.push(micros(t.elapsed()));
                assert_eq!(at.root, proof.old.root);
            }
            store.close().await;
            let (r, r99, rmax) = summary(&mut read);
            let (i, i99, imax) = summary(&mut inclusion);
            let (c, c99, cmax) = summary(&mut consistency);
            let (h, h99, hmax) = summary(&mut heads);
            println!("  read one event        {r:>8.0} {r99:>8.0} {rmax:>8.0}");
            println!(
                "  inclusion proof       {i:>8.0} {i99:>8.0} {imax:>8.0}   median {:.1}x read",
                i / r
            );
            println!(
                "  consistency proof     {c:>8.0} {c99:>8.0} {cmax:>8.0}   median {:.1}x read",
                c / r
            );
            println!(
                "  tree head (any size)  {h:>8.0} {h99:>8.0} {hmax:>8.0}   median {:.1}x read",
                h / r
            );
        });
    }
    let log_bytes: u64 = std::fs::read_dir(tmp.path().join("log"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    let index_bytes = dir_size(&tmp.path().join("index"));
    println!(
        "on disk: log {:.0} MB, index {:.0} MB",
        log_bytes as f64 / 1e6,
        index_bytes as f64 / 1e6
    );
}

fn dir_size(path: &std::path::Path) -> u64 {
    std::fs::read_dir(path).map_or(0, |d| {
        d.flatten()
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => dir_size(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    })
}
