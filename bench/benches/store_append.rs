//! Durable append throughput of docket's event log, against sled and SQLite baselines measured
//! in the same run, plus single-append latency against one raw fdatasync and read-back speed.
//!
//! Run: `cargo bench -p docket-bench --bench store_append` (optional argument: `quick`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use docket_store::{EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime};
use futures::StreamExt;

const PAYLOAD: usize = 200;

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

fn rate(events: u64, took: Duration) -> f64 {
    events as f64 / took.as_secs_f64()
}

/// `appenders` tasks, each appending one event at a time to its own stream.
async fn docket_append(dir: &Path, appenders: u64, per_appender: u64) -> (f64, Duration, u64) {
    let store = EmbeddedStore::open(dir, StoreConfig::default())
        .await
        .expect("open");
    let start = Instant::now();
    let tasks: Vec<_> = (0..appenders)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                let stream = StreamId::new(format!("run-{t}")).expect("id");
                for seq in 0..per_appender {
                    store
                        .append(&stream, seq, vec![event(seq)])
                        .await
                        .expect("append");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("appender");
    }
    let took = start.elapsed();
    let syncs = store.stats().syncs;
    store.close().await;
    let n = appenders * per_appender;
    (rate(n, took), took / (per_appender as u32), syncs)
}

/// The same events as plain sled inserts, `batch` per `flush()`.
fn sled_baseline(dir: &Path, batch: u64, total: u64) -> f64 {
    let db = sled::open(dir).expect("sled");
    let start = Instant::now();
    let mut i = 0u64;
    while i < total {
        for _ in 0..batch {
            let key = [(i % batch).to_be_bytes(), (i / batch).to_be_bytes()].concat();
            db.insert(key, event(i).payload).expect("insert");
            i += 1;
        }
        db.flush().expect("flush");
    }
    rate(total, start.elapsed())
}

/// The same events in a SQLite WAL table (synchronous=FULL), one transaction per `batch`.
fn sqlite_baseline(dir: &Path, batch: u64, total: u64) -> f64 {
    let mut db = rusqlite::Connection::open(dir.join("events.db")).expect("sqlite");
    db.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
         CREATE TABLE events (stream INTEGER, seq INTEGER, payload BLOB, PRIMARY KEY (stream, seq));",
    )
    .expect("schema");
    let start = Instant::now();
    let mut i = 0u64;
    while i < total {
        let tx = db.transaction().expect("tx");
        {
            let mut stmt = tx
                .prepare_cached("INSERT INTO events (stream, seq, payload) VALUES (?1, ?2, ?3)")
                .expect("prepare");
            for _ in 0..batch {
                stmt.execute(rusqlite::params![
                    (i % batch) as i64,
                    (i / batch) as i64,
                    event(i).payload
                ])
                .expect("insert");
                i += 1;
            }
        }
        tx.commit().expect("commit");
    }
    rate(total, start.elapsed())
}

/// Mean time of one 250-byte append plus `fdatasync` on a new plain file (what one durable
/// single-event append cannot beat).
fn raw_fdatasync(dir: &Path, n: u32) -> Duration {
    std::fs::create_dir_all(dir).expect("dir");
    let mut f = std::fs::File::create_new(dir.join("raw")).expect("raw file");
    let buf = [7u8; 250];
    let start = Instant::now();
    for _ in 0..n {
        f.write_all(&buf).expect("write");
        f.sync_data().expect("fdatasync");
    }
    start.elapsed() / n
}

async fn read_back(dir: &Path, total: u64) -> (f64, f64) {
    let store = EmbeddedStore::open(dir, StoreConfig::default())
        .await
        .expect("open");
    let stream = StreamId::new("long-run").expect("id");
    let mut seq = 0;
    while seq < total {
        let n = 2000.min(total - seq);
        store
            .append(&stream, seq, (seq..seq + n).map(event).collect())
            .await
            .expect("append");
        seq += n;
    }
    let start = Instant::now();
    let mut read = 0u64;
    let mut events = Box::pin(store.read(&stream, 1..=total));
    while let Some(e) = events.next().await {
        e.expect("sound event");
        read += 1;
    }
    let read_rate = rate(read, start.elapsed());
    assert_eq!(read, total);
    let start = Instant::now();
    let report = store.verify(&stream).await.expect("verify");
    assert!(report.is_sound() && report.verified == total);
    let verify_rate = rate(total, start.elapsed());
    store.close().await;
    (read_rate, verify_rate)
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let scale = if quick { 4 } else { 1 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = |name: &str| tmp.path().join(name);

    println!("docket store_append bench: {PAYLOAD}-byte payloads, durable (fdatasync) appends");
    println!(
        "{:>10} {:>14} {:>14} {:>14} {:>9} {:>9} {:>8}",
        "appenders", "docket ev/s", "sled ev/s", "sqlite ev/s", "x sled", "x sqlite", "ev/sync"
    );
    // The disk's sync latency drifts (other work shares it), so each configuration runs in two
    // rounds with the systems interleaved, and the mean of each is reported.
    let mut single = (Duration::ZERO, Duration::ZERO);
    for (appenders, per) in [(1u64, 1000u64), (16, 250), (256, 200)] {
        let per = per / scale;
        let total = appenders * per;
        let (mut docket, mut sled, mut sqlite, mut syncs) = (0.0, 0.0, 0.0, 0);
        for round in 0..2 {
            let tag = format!("{appenders}-{round}");
            if appenders == 1 {
                single.1 += raw_fdatasync(&dir(&format!("raw-{round}")), 200 / scale as u32) / 2;
            }
            let (rate, latency, s) = runtime.block_on(docket_append(
                &dir(&format!("docket-{tag}")),
                appenders,
                per,
            ));
            docket += rate / 2.0;
            syncs += s;
            if appenders == 1 {
                single.0 += latency / 2;
            }
            let d = dir(&format!("sqlite-{tag}"));
            std::fs::create_dir_all(&d).expect("dir");
            sqlite += sqlite_baseline(&d, appenders, total) / 2.0;
            sled += sled_baseline(&dir(&format!("sled-{tag}")), appenders, total) / 2.0;
        }
        println!(
            "{appenders:>10} {docket:>14.0} {sled:>14.0} {sqlite:>14.0} {:>9.2} {:>9.2} {:>8.1}",
            docket / sled,
            docket / sqlite,
            (2 * total) as f64 / syncs as f64
        );
    }
    println!(
        "single appender: {:.1} us per durable append, raw write+fdatasync {:.1} us, ratio {:.2}",
        single.0.as_secs_f64() * 1e6,
        single.1.as_secs_f64() * 1e6,
        single.0.as_secs_f64() / single.1.as_secs_f64()
    );
    let total = 1_000_000 / scale;
    let (read, verify) = runtime.block_on(read_back(&dir("read-back"), total));
    println!(
        "read back {total} events of one stream, chain-checked: {read:.0} ev/s; verify(): {verify:.0} ev/s"
    );
}
