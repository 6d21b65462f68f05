//! Crash safety, proved by killing a writer with SIGKILL at random moments.
//!
//! `store-crash-writer` appends from many concurrent tasks and prints each event as it is
//! acknowledged. After every kill the store is reopened here and must hold every acknowledged
//! event, verify, show nothing half-written, and take the next append at the right sequence.
//! Seed: `DOCKET_CRASH_SEED` (default fixed); kills: `DOCKET_CRASH_KILLS` (default 200).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use docket_store::{EmbeddedStore, EventStore, Hash, NewEvent, StoreConfig, StreamId, WallTime};
use futures::TryStreamExt;

/// splitmix64: a tiny, seedable generator for kill moments.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every acknowledged event: stream -> seq -> hash.
type Acked = BTreeMap<String, BTreeMap<u64, Hash>>;

/// When to kill the writer.
#[derive(Clone, Copy, Debug)]
enum KillAt {
    /// This long after spawning it (often while it is still opening and recovering).
    AfterSpawn(Duration),
    /// This long after it reports the store open (while it appends).
    AfterReady(Duration),
}

/// Runs the child, kills it, and returns the acknowledgements it printed in full.
fn run_and_kill(dir: &Path, at: KillAt) -> Result<Vec<(String, u64, Hash)>, String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_store-crash-writer"))
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawn store-crash-writer: {e}"))?;
    let stdout = child.stdout.take().ok_or("no child stdout")?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        loop {
            let mut line = String::new();
            match stdout.read_line(&mut line) {
                // A line cut short by the kill was never fully reported: ignore it.
                Ok(0) | Err(_) => break,
                Ok(_) if line.ends_with('\n') => {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
                Ok(_) => break,
            }
        }
    });
    let mut lines = Vec::new();
    match at {
        KillAt::AfterSpawn(delay) => std::thread::sleep(delay),
        KillAt::AfterReady(delay) => {
            loop {
                let line = rx
                    .recv_timeout(Duration::from_secs(30))
                    .map_err(|_| "the writer did not report ready within 30 s".to_owned())?;
                if line == "ready\n" {
                    break;
                }
                lines.push(line);
            }
            std::thread::sleep(delay);
        }
    }
    child.kill().map_err(|e| format!("SIGKILL: {e}"))?;
    let status = child.wait().map_err(|e| format!("reap: {e}"))?;
    if status.success() {
        return Err(format!("the writer exited on its own: {status}"));
    }
    let _ = reader.join();
    lines.extend(rx.try_iter());
    let mut acks = Vec::new();
    for line in lines {
        let parts: Vec<&str> = line.trim_end().split(' ').collect();
        if parts == ["ready"] {
            continue;
        }
        let parsed = match parts.as_slice() {
            ["ack", stream, seq, hash] => seq
                .parse()
                .ok()
                .zip(Hash::from_hex(hash))
                .map(|(seq, hash)| ((*stream).to_owned(), seq, hash)),
            _ => None,
        };
        acks.push(parsed.ok_or_else(|| format!("unexpected line {line:?}"))?);
    }
    Ok(acks)
}

async fn check_after_kill(
    dir: &Path,
    acked: &mut Acked,
    checked_to: &mut BTreeMap<String, u64>,
    full: bool,
) -> Result<(), String> {
    let store = EmbeddedStore::open(dir, StoreConfig::default())
        .await
        .map_err(|e| format!("reopen failed: {e}"))?;
    let heads = store.streams().await.map_err(|e| e.to_string())?;
    for (stream, seqs) in acked.iter() {
        let max = seqs.keys().next_back().copied().unwrap_or(0);
        let head = heads
            .iter()
            .find(|h| h.stream.as_str() == stream)
            .map_or(0, |h| h.seq);
        if head < max {
            return Err(format!(
                "stream {stream}: head {head} but seq {max} was acknowledged"
            ));
        }
    }
    for h in &heads {
        let stream = h.stream.as_str().to_owned();
        // Read (and so chain-check) what this round added; everything, on full rounds.
        let from = if full {
            1
        } else {
            checked_to.get(&stream).copied().unwrap_or(1)
        };
        let events: Vec<_> = store
            .read(&h.stream, from..=h.seq)
            .try_collect()
            .await
            .map_err(|e| format!("stream {stream}: read failed: {e}"))?;
        if events.len() as u64 != h.seq - from + 1 {
            return Err(format!(
                "stream {stream}: read {} events from {from} to head {}",
                events.len(),
                h.seq
            ));
        }
        if events.last().map(|e| e.hash) != Some(h.hash) {
            return Err(format!(
                "stream {stream}: head hash differs from the last event read"
            ));
        }
        let want = acked.get(&stream);
        for e in &events {
            if let Some(hash) = want.and_then(|w| w.get(&e.seq))
                && *hash != e.hash
            {
                return Err(format!(
                    "stream {stream} seq {}: acknowledged {hash}, found {}",
                    e.seq, e.hash
                ));
            }
        }
        if full {
            let report = store.verify(&h.stream).await.map_err(|e| e.to_string())?;
            if !report.is_sound() || report.verified != h.seq {
                return Err(format!("stream {stream}: {report:?}"));
            }
        }
        checked_to.insert(stream, h.seq);
    }
    // Appending continues at the right sequence.
    let stream = StreamId::new("task-00").map_err(|e| e.to_string())?;
    let head = store
        .head(&stream)
        .await
        .map_err(|e| e.to_string())?
        .map_or(0, |h| h.seq);
    let event = NewEvent {
        kind: "after-crash".into(),
        kind_version: 1,
        recorded_at: WallTime(0),
        policy: None,
        payload: b"continued".to_vec(),
    };
    let a = store
        .append(&stream, head, vec![event])
        .await
        .map_err(|e| format!("append after reopen failed: {e}"))?;
    if a.first_seq != head + 1 {
        return Err(format!(
            "append after reopen got seq {}, head was {head}",
            a.first_seq
        ));
    }
    acked
        .entry("task-00".into())
        .or_default()
        .insert(a.first_seq, a.hashes[0]);
    store.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_sigkill() {
    let seed = env_u64("DOCKET_CRASH_SEED", 0x00d0_c4e7);
    let kills = env_u64("DOCKET_CRASH_KILLS", 200);
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("store");
    let mut acked = Acked::new();
    let mut checked_to = BTreeMap::new();
    let mut total_acks = 0usize;
    let mut runs_with_acks = 0u64;
    for kill in 0..kills {
        // One kill in five lands while the writer is still starting (opening, recovering).
        let at = if rng.next().is_multiple_of(5) {
            KillAt::AfterSpawn(Duration::from_millis(rng.next() % 80))
        } else {
            KillAt::AfterReady(Duration::from_millis(rng.next() % 40))
        };
        let dir_for_child = store_dir.clone();
        let acks = tokio::task::spawn_blocking(move || run_and_kill(&dir_for_child, at))
            .await
            .expect("child run")
            .unwrap_or_else(|why| panic!("DOCKET_CRASH_SEED={seed:#x}, kill {kill}: {why}"));
        total_acks += acks.len();
        runs_with_acks += u64::from(!acks.is_empty());
        for (stream, seq, hash) in acks {
            if let Some(old) = acked.entry(stream.clone()).or_default().insert(seq, hash)
                && old != hash
            {
                panic!(
                    "DOCKET_CRASH_SEED={seed:#x}, kill {kill}: {stream} seq {seq} acknowledged twice with different hashes"
                );
            }
        }
        let full = kill % 50 == 49 || kill + 1 == kills;
        if let Err(why) = check_after_kill(&store_dir, &mut acked, &mut checked_to, full).await {
            panic!("DOCKET_CRASH_SEED={seed:#x}, kill {kill} ({at:?}): {why}");
        }
    }
    // Most kills land while appends are in flight: make sure the runs really appended.
    assert!(
        runs_with_acks * 4 > kills,
        "DOCKET_CRASH_SEED={seed:#x}: only {runs_with_acks} of {kills} runs acknowledged anything ({total_acks} events)"
    );
}
