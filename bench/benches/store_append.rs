//! Durable append throughput of docket's event log, against sled, SQLite and a raw group-commit
//! ceiling measured in the same run, plus single-append latency against one raw fdatasync and
//! read-back speed.
//!
//! Run: `cargo bench -p docket-bench --bench store_append` (optional argument: `quick`).
//! `... --bench store_append -- profile APPENDERS EVENTS_EACH` runs docket's appends alone (for
//! `valgrind --tool=callgrind`, which counts instructions repeatably on a shared machine);
//! `... -- profile-read EVENTS` appends and reads back one stream three times (for `perf`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use docket_store::{
    Durability, EmbeddedStore, EventStore, NewEvent, StoreConfig, StreamId, WallTime,
};
use futures::StreamExt;

const PAYLOAD: usize = 200;

/// The `docket` binary's allocator, so figures are the product's (the baselines run in the
/// same process with it too).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    docket_append_with(dir, appenders, per_appender, Durability::Sync).await
}

async fn docket_append_with(
    dir: &Path,
    appenders: u64,
    per_appender: u64,
    durability: Durability,
) -> (f64, Duration, u64) {
    let config = StoreConfig {
        durability,
        ..StoreConfig::default()
    };
    let store = EmbeddedStore::open(dir, config).await.expect("open");
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
    if std::env::var_os("DOCKET_BENCH_THREAD_CPU").is_some() {
        print_thread_cpu(appenders * per_appender);
    }
    // The rate counts until the index has caught up too (close waits for it): sled's work
    // trails the acknowledgements but is part of what appending costs.
    store.close().await;
    let until_indexed = start.elapsed();
    let n = appenders * per_appender;
    (rate(n, until_indexed), took / (per_appender as u32), syncs)
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

/// The ceiling: `total` events' worth of pre-encoded 260-byte records, `batch` per write, each
/// write followed by one `fdatasync`, no framing, hashing, index or callers to wait for.
fn raw_group_commit(dir: &Path, batch: u64, total: u64) -> f64 {
    std::fs::create_dir_all(dir).expect("dir");
    let mut f = std::fs::File::create_new(dir.join("raw-batches")).expect("raw file");
    let buf = vec![7u8; 260 * batch as usize];
    let start = Instant::now();
    let mut i = 0;
    while i < total {
        f.write_all(&buf).expect("write");
        f.sync_data().expect("fdatasync");
        i += batch;
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

/// [`raw_fdatasync`] into a file already written with zeros and synced, as docket's log keeps
/// ahead of its end: no sync has to commit a new file size.
fn raw_fdatasync_in_place(dir: &Path, n: u32) -> Duration {
    use std::os::unix::fs::FileExt;
    std::fs::create_dir_all(dir).expect("dir");
    let f = std::fs::File::create_new(dir.join("raw-in-place")).expect("raw file");
    f.write_all_at(&vec![0u8; 250 * n as usize + 4096], 0)
        .expect("zeros");
    f.sync_all().expect("fsync");
    let buf = [7u8; 250];
    let start = Instant::now();
    for i in 0..u64::from(n) {
        f.write_all_at(&buf, i * 250).expect("write");
        f.sync_data().expect("fdatasync");
    }
    start.elapsed() / n
}

/// Mean latency of one single-event append with `Durability::UnsafeNoSync` (no `fdatasync`):
/// what the hand-offs between the appending task and the log writer cost on their own.
async fn docket_nosync_latency(dir: &Path, n: u64) -> Duration {
    docket_append_with(dir, 1, n, Durability::UnsafeNoSync)
        .await
        .1
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

/// User + system CPU seconds of this process so far, its ended threads included (Linux
/// `/proc/self/stat`, clock ticks of 10 ms).
fn process_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let ticks: f64 = after
        .split(' ')
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<f64>().ok())
        .sum();
    ticks / 100.0
}

/// CPU time (user + system) each kind of thread of this process has used so far, per event:
/// the store's writer and indexer, the runtime's workers (the appenders), sled's own threads.
fn print_thread_cpu(events: u64) {
    let tick = 100.0; // USER_HZ on Linux
    let mut by_name: std::collections::BTreeMap<String, (f64, f64)> =
        std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for task in tasks.flatten() {
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(task.path().join("comm")),
            std::fs::read_to_string(task.path().join("stat")),
        ) else {
            continue;
        };
        // Fields after the ")" that closes the name: state is field 3, utime 14, stime 15.
        let Some(rest) = stat.rsplit_once(')').map(|r| r.1) else {
            continue;
        };
        let fields: Vec<f64> = rest
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|x| x.parse().ok())
            .collect();
        let [user, system] = fields[..] else { continue };
        let name = comm
            .trim()
            .trim_end_matches(|c: char| c.is_ascii_digit() || c == '-')
            .to_owned();
        let entry = by_name.entry(name).or_default();
        entry.0 += user / tick;
        entry.1 += system / tick;
    }
    for (name, (user, system)) in by_name {
        let per = |secs: f64| secs * 1e6 / events as f64;
        println!(
            "  thread {name:<16} {:>6.2} us user + {:>6.2} us system CPU per event",
            per(user),
            per(system)
        );
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `median [min-max]` of a series.
fn spread(xs: &[f64], digits: usize) -> String {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{:.digits$} [{lo:.digits$}-{hi:.digits$}]", median(xs))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = |name: &str| tmp.path().join(name);

    if let Some(at) = args.iter().position(|a| a == "profile") {
        let num = |k: usize, default: u64| {
            args.get(at + k)
                .and_then(|a| a.parse().ok())
                .unwrap_or(default)
        };
        let (appenders, per) = (num(1, 256), num(2, 20));
        let cpu = process_cpu();
        let (rate, _, syncs) = runtime.block_on(docket_append(&dir("profile"), appenders, per));
        let cpu = process_cpu() - cpu;
        println!(
            "profile: {appenders} appenders x {per} events: {rate:.0} ev/s, {:.1} events per sync, {:.2} us CPU per event",
            (appenders * per) as f64 / syncs as f64,
            cpu * 1e6 / (appenders * per) as f64
        );
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "latency") {
        let rounds = args.get(at + 1).and_then(|a| a.parse().ok()).unwrap_or(7);
        let (mut durable, mut raw, mut zeroed, mut nosync) = (vec![], vec![], vec![], vec![]);
        for round in 0..rounds {
            raw.push(raw_fdatasync(&dir(&format!("lraw-{round}")), 200).as_secs_f64() * 1e6);
            zeroed.push(
                raw_fdatasync_in_place(&dir(&format!("lrawz-{round}")), 200).as_secs_f64() * 1e6,
            );
            let (_, d, _) = runtime.block_on(docket_append(&dir(&format!("ld-{round}")), 1, 300));
            durable.push(d.as_secs_f64() * 1e6);
            let d = runtime.block_on(docket_nosync_latency(&dir(&format!("ln-{round}")), 3000));
            nosync.push(d.as_secs_f64() * 1e6);
        }
        let ratios: Vec<f64> = durable.iter().zip(&raw).map(|(l, r)| l / r).collect();
        let in_place: Vec<f64> = durable.iter().zip(&zeroed).map(|(l, r)| l / r).collect();
        println!(
            "latency: durable {} us, raw sync {} us, ratio {}; raw sync over zeros {} us, ratio {}; no-sync {} us",
            spread(&durable, 1),
            spread(&raw, 1),
            spread(&ratios, 2),
            spread(&zeroed, 1),
            spread(&in_place, 2),
            spread(&nosync, 1)
        );
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "profile-read") {
        let total = args
            .get(at + 1)
            .and_then(|a| a.parse().ok())
            .unwrap_or(1_000_000);
        for _ in 0..3 {
            let (read, verify) = runtime.block_on(read_back(&dir("profile-read"), total));
            std::fs::remove_dir_all(dir("profile-read")).expect("clean");
            println!("profile-read: {total} events: read {read:.0} ev/s, verify {verify:.0} ev/s");
        }
        return;
    }

    let quick = args.iter().any(|a| a == "quick");
    let scale = if quick { 4 } else { 1 };
    let rounds = if quick { 3 } else { 7 };

    println!("docket store_append bench: {PAYLOAD}-byte payloads, durable (fdatasync) appends");
    println!(
        "{rounds} rounds per row, systems interleaved within each round; median [min-max] of the rounds"
    );
    // The disk's sync latency drifts (other work shares it), so each configuration runs in several
    // rounds with the systems interleaved; ratios are taken within a round, then their median.
    let mut single_latency = Vec::new();
    let mut single_raw = Vec::new();
    let mut single_in_place = Vec::new();
    let mut single_nosync = Vec::new();
    for (appenders, per) in [(1u64, 600u64), (16, 300), (256, 200)] {
        let per = per / scale;
        let total = appenders * per;
        let (mut docket, mut sled, mut sqlite, mut raw) = (vec![], vec![], vec![], vec![]);
        let (mut x_sled, mut x_sqlite, mut x_raw, mut per_sync) = (vec![], vec![], vec![], vec![]);
        for round in 0..rounds {
            let tag = format!("{appenders}-{round}");
            if appenders == 1 {
                let d = raw_fdatasync(&dir(&format!("raw-{round}")), 200 / scale as u32);
                single_raw.push(d.as_secs_f64() * 1e6);
                let d = raw_fdatasync_in_place(&dir(&format!("rawz-{round}")), 200 / scale as u32);
                single_in_place.push(d.as_secs_f64() * 1e6);
            }
            let (rate, latency, syncs) = runtime.block_on(docket_append(
                &dir(&format!("docket-{tag}")),
                appenders,
                per,
            ));
            if appenders == 1 {
                single_latency.push(latency.as_secs_f64() * 1e6);
                let d = runtime.block_on(docket_nosync_latency(
                    &dir(&format!("nosync-{round}")),
                    2000 / scale,
                ));
                single_nosync.push(d.as_secs_f64() * 1e6);
            }
            let d = dir(&format!("sqlite-{tag}"));
            std::fs::create_dir_all(&d).expect("dir");
            let q = sqlite_baseline(&d, appenders, total);
            let s = sled_baseline(&dir(&format!("sled-{tag}")), appenders, total);
            let r = raw_group_commit(&dir(&format!("rawgc-{tag}")), appenders, total);
            docket.push(rate);
            sqlite.push(q);
            sled.push(s);
            raw.push(r);
            x_sled.push(rate / s);
            x_sqlite.push(rate / q);
            x_raw.push(rate / r);
            per_sync.push(total as f64 / syncs as f64);
        }
        println!("{appenders} appenders ({per} events each, {total} per round):");
        println!("  docket ev/s                 {}", spread(&docket, 0));
        println!("  sled insert+flush ev/s      {}", spread(&sled, 0));
        println!("  sqlite WAL FULL ev/s        {}", spread(&sqlite, 0));
        println!("  raw write+fdatasync ev/s    {}", spread(&raw, 0));
        println!("  docket / sled               {}", spread(&x_sled, 2));
        println!("  docket / sqlite             {}", spread(&x_sqlite, 2));
        println!("  docket / raw ceiling        {}", spread(&x_raw, 2));
        println!("  events per fdatasync        {}", spread(&per_sync, 1));
    }
    let ratios: Vec<f64> = single_latency
        .iter()
        .zip(&single_raw)
        .map(|(l, r)| l / r)
        .collect();
    let in_place: Vec<f64> = single_latency
        .iter()
        .zip(&single_in_place)
        .map(|(l, r)| l / r)
        .collect();
    println!(
        "single appender: {} us per durable append; raw 250-byte write+fdatasync {} us \
         (growing file), ratio {}; {} us (overwriting zeros), ratio {}",
        spread(&single_latency, 1),
        spread(&single_raw, 1),
        spread(&ratios, 2),
        spread(&single_in_place, 1),
        spread(&in_place, 2)
    );
    println!(
        "single appender, Durability::UnsafeNoSync (no fdatasync): {} us per append",
        spread(&single_nosync, 1)
    );
    let total = 1_000_000 / scale;
    let (read, verify) = runtime.block_on(read_back(&dir("read-back"), total));
    println!(
        "read back {total} events of one stream, chain-checked: {read:.0} ev/s; verify(): {verify:.0} ev/s"
    );
}
