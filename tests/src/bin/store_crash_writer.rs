//! Child process of the SIGKILL crash test (`tests/tests/crashes/store_crash.rs`).
//!
//! Opens the store in the directory given as the first argument and appends from many
//! concurrent tasks until it is killed, printing `ack <stream> <seq> <hash>` for every event
//! as soon as its append is acknowledged (and never before).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;

use docket_store::{
    EmbeddedStore, EventStore, NewEvent, StoreConfig, StoreError, StreamId, WallTime,
};

const TASKS: u64 = 16;

/// Payload bytes derived from where they go, some large enough to become blobs.
fn payload(stream: &str, seq: u64, i: u64) -> Vec<u8> {
    let len = match (seq + i) % 7 {
        0 => 900,
        1 => 0,
        _ => 200,
    };
    let mut out = format!("{stream}/{seq}/{i}:").into_bytes();
    out.resize(len.max(out.len()), b'a' + (seq % 26) as u8);
    out
}

fn print_acks(stream: &StreamId, first_seq: u64, hashes: &[docket_store::Hash]) {
    let mut text = String::new();
    for (i, h) in hashes.iter().enumerate() {
        text.push_str(&format!("ack {} {} {}\n", stream, first_seq + i as u64, h));
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

async fn append_loop(store: EmbeddedStore, task: u64) -> Result<(), StoreError> {
    let own = StreamId::new(format!("task-{task:02}"))?;
    let shared = StreamId::new("shared")?;
    let mut round = 0u64;
    loop {
        round += 1;
        // Every fourth append goes to the contended stream, retried on conflict.
        let stream = if round.is_multiple_of(4) {
            &shared
        } else {
            &own
        };
        let head = store.head(stream).await?.map_or(0, |h| h.seq);
        let n = 1 + (task + round) % 3;
        let events = (0..n)
            .map(|i| NewEvent {
                kind: "crash-test".into(),
                kind_version: 1,
                recorded_at: WallTime(i64::try_from(round).unwrap_or(0)),
                policy: None,
                payload: payload(stream.as_str(), head + 1 + i, task),
            })
            .collect();
        match store.append(stream, head, events).await {
            Ok(a) => print_acks(stream, a.first_seq, &a.hashes),
            Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
}

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: store-crash-writer DIR");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("runtime: {e}");
            std::process::exit(1)
        });
    let result: Result<(), StoreError> = runtime.block_on(async {
        let config = StoreConfig {
            blob_threshold: 512,
            segment_max_bytes: 256 * 1024,
            ..StoreConfig::default()
        };
        let store = EmbeddedStore::open(&dir, config).await?;
        println!("ready");
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| tokio::spawn(append_loop(store.clone(), t)))
            .collect();
        for t in tasks {
            if let Ok(Err(e)) = t.await {
                return Err(e);
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        eprintln!("store-crash-writer: {e}");
        std::process::exit(1);
    }
}
