//! Seeded random single mutations of a sealed data directory's log: bit flips anywhere in
//! the segment, and the insider's edits with every length and checksum made right again
//! (an event deleted, repeated, swapped with the next, replaced by another run's event, a
//! payload rewritten with the whole rest of its run re-chained, the log cut at a batch
//! boundary; a blob record an encoding-2 payload refers to deleted, or its content
//! rewritten). `docket verify`'s library call catches each one, at the run (and event)
//! where it was made.

use std::path::Path;

use docket_evidence::{SignerKey, VerifyOptions, keys_dir, seal_finished, verify};
use docket_store::{
    EmbeddedStore, Event, EventStore, NewEvent, Payload, StoreConfig, StreamId, WallTime,
    canonical_body, decode_event_record, event_hash, event_record,
};
use proptest::prelude::RngExt as _;
use proptest::test_runner::{RngAlgorithm, TestRng};

const RUNS: [&str; 3] = ["run-a", "run-b", "run-c"];
const EVENTS: u64 = 6;
const SEGMENT_HEADER: usize = 32;
const TAG_EVENT: u8 = 1;
const TAG_BLOB: u8 = 2;
/// The event of each run whose payload (encoding 2) refers to content of its own.
const REFERRING: u64 = 3;

/// Event `REFERRING` of `run`, in payload encoding 2, and the content it refers to.
fn referring_event(run: &str) -> (NewEvent, Vec<u8>) {
    let content = format!(r#"{{"run":"{run}","text":"{}"}}"#, "y".repeat(140)).into_bytes();
    let payload = format!(
        r#"{{"delivered":{{"blake3":"{}","len":{}}},"kind":"handoff.allowed"}}"#,
        blake3::hash(&content).to_hex(),
        content.len()
    );
    let event = NewEvent {
        kind: "handoff.allowed".to_owned(),
        kind_version: docket_decider::REFERENCED_PAYLOAD,
        recorded_at: WallTime(1_795_000_000_000_000_000 + REFERRING as i64),
        policy: None,
        payload: payload.into_bytes(),
    };
    (event, content)
}

fn new_event(kind: &str, run: &str, step: u64) -> NewEvent {
    NewEvent {
        kind: kind.to_owned(),
        kind_version: 1,
        recorded_at: WallTime(1_795_000_000_000_000_000 + step as i64),
        policy: None,
        payload: format!(r#"{{"run":"{run}","step":{step},"note":"value {step}"}}"#).into_bytes(),
    }
}

/// A data directory with three finished runs, sealed, and the segment's bytes.
async fn sealed_directory(data: &Path) -> Vec<u8> {
    // Plain records (store format 2 may keep them compressed), so that each mutation is
    // made to the very bytes the hashes cover; damage inside a compressed record is checked
    // by the store's own tests and the golden logs' one-byte check.
    let config = StoreConfig {
        compress: false,
        ..StoreConfig::default()
    };
    let store = EmbeddedStore::open(data, config).await.expect("opens");
    for run in RUNS {
        let stream = StreamId::new(run).expect("id");
        for step in 1..=EVENTS {
            let kind = match step {
                1 => "run.requested",
                EVENTS => "run.completed",
                _ => "agent.responded",
            };
            if step == REFERRING {
                let (event, content) = referring_event(run);
                store
                    .append_with_blobs(&stream, step - 1, vec![event], vec![content])
                    .await
                    .expect("appends");
                continue;
            }
            store
                .append(&stream, step - 1, vec![new_event(kind, run, step)])
                .await
                .expect("appends");
        }
    }
    let key = SignerKey::from_seed("audit.example/docket", [9; 32]).expect("key");
    std::fs::create_dir_all(keys_dir(data)).expect("keys dir");
    std::fs::write(
        keys_dir(data).join("verifier.key"),
        format!("{}\n", key.verifier()),
    )
    .expect("verifier key");
    seal_finished(&store, data, &key, WallTime(7))
        .await
        .expect("seals");
    drop(store);
    std::fs::read(segment(data)).expect("segment")
}

fn segment(data: &Path) -> std::path::PathBuf {
    data.join("log").join(format!("{:020}.seg", 1))
}

/// A batch frame's records, as `(tag, body)`.
type Frame = Vec<(u8, Vec<u8>)>;

/// The segment as frames of records (store/FORMAT.md §2), ignoring the runway of zeros.
fn parse(bytes: &[u8]) -> (Vec<u8>, Vec<Frame>, Vec<usize>) {
    let header = bytes[..SEGMENT_HEADER].to_vec();
    let mut frames = Vec::new();
    let mut offsets = Vec::new();
    let mut at = SEGMENT_HEADER;
    while at + 12 <= bytes.len() && &bytes[at..at + 4] == b"DKTB" {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4")) as usize;
        let payload = &bytes[at + 12..at + 12 + len];
        let mut records = Vec::new();
        let mut r = 0;
        while r < payload.len() {
            let n = u32::from_le_bytes(payload[r..r + 4].try_into().expect("4")) as usize;
            records.push((payload[r + 4], payload[r + 5..r + 4 + n].to_vec()));
            r += 4 + n;
        }
        offsets.push(at);
        frames.push(records);
        at += 12 + len;
    }
    (header, frames, offsets)
}

/// Writes frames back with their lengths and checksums right: what an insider does.
fn write(header: &[u8], frames: &[Frame]) -> Vec<u8> {
    let mut out = header.to_vec();
    for frame in frames {
        let mut payload = Vec::new();
        for (tag, body) in frame {
            payload.extend_from_slice(&(1 + body.len() as u32).to_le_bytes());
            payload.push(*tag);
            payload.extend_from_slice(body);
        }
        out.extend_from_slice(b"DKTB");
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
    }
    out
}

/// Where each event sits: `(stream, seq) -> (frame, record)`.
fn positions(frames: &[Frame]) -> Vec<(String, u64, usize, usize)> {
    let mut out = Vec::new();
    for (f, frame) in frames.iter().enumerate() {
        for (r, (tag, body)) in frame.iter().enumerate() {
            if *tag == TAG_EVENT {
                let event = decode_event_record(body).expect("decodes");
                out.push((event.stream.to_string(), event.seq, f, r));
            }
        }
    }
    out
}

/// What a mutation must be caught as.
#[derive(Debug)]
enum Expect {
    /// A problem with this stream (a run, or `_heads`), at this event when known.
    Stream(String, Option<u64>),
    /// Anything: the log itself is damaged, or the heads log no longer matches its signed
    /// checkpoint.
    Damage,
}

fn decode(body: &[u8]) -> Event {
    decode_event_record(body).expect("decodes")
}

/// Re-chains a stream from event `from` on (its hashes recomputed), as an insider who
/// rewrote an event must.
fn rechain(frames: &mut [Frame], stream: &str, from: u64) {
    let places = positions(frames);
    let mut prev = None;
    for (s, seq, f, r) in places {
        if s != stream {
            continue;
        }
        let mut event = decode(&frames[f][r].1);
        if seq >= from {
            if let Some(p) = prev {
                event.prev = p;
            }
            event.hash = event_hash(&event.prev, &canonical_body(&event));
            frames[f][r].1 = event_record(&event);
        }
        prev = Some(event.hash);
    }
}

fn mutate(rng: &mut TestRng, original: &[u8]) -> (Vec<u8>, String, Expect) {
    let (header, frames, offsets) = parse(original);
    let places = positions(&frames);
    let end = offsets.last().copied().unwrap_or(SEGMENT_HEADER)
        + 12
        + frames
            .last()
            .map_or(0, |f| f.iter().map(|(_, b)| 5 + b.len()).sum());
    let pick = &places[rng.random_range(0..places.len())];
    let (stream, seq, f, r) = (pick.0.clone(), pick.1, pick.2, pick.3);
    let last_of_stream = places.iter().filter(|p| p.0 == stream).count() as u64;
    let mut frames = frames;
    let blobs: Vec<(usize, usize)> = frames
        .iter()
        .enumerate()
        .flat_map(|(f, frame)| {
            frame
                .iter()
                .enumerate()
                .filter(|(_, (tag, _))| *tag == TAG_BLOB)
                .map(move |(r, _)| (f, r))
        })
        .collect();
    match rng.random_range(0..9u8) {
        7 | 8 => {
            // A blob record that a run's encoding-2 payload refers to.
            let (f, r) = blobs[rng.random_range(0..blobs.len())];
            let body = frames[f][r].1.clone();
            let owner = RUNS
                .iter()
                .find(|run| {
                    let needle = format!(r#""run":"{run}""#);
                    body.windows(needle.len()).any(|w| w == needle.as_bytes())
                })
                .expect("the content names its run");
            let what = if rng.random_range(0..2u8) == 0 {
                frames[f].remove(r);
                format!("delete the blob {owner}'s event {REFERRING} refers to")
            } else {
                // Its address kept, its content changed (lengths and checksums made right).
                let at = 32 + rng.random_range(0..body.len() - 32);
                frames[f][r].1[at] = if body[at] == b'y' { b'z' } else { b'y' };
                format!("rewrite byte {at} of the blob {owner}'s event {REFERRING} refers to")
            };
            (
                write(&header, &frames),
                what,
                Expect::Stream((*owner).to_owned(), Some(REFERRING)),
            )
        }
        0 => {
            let at = rng.random_range(0..end);
            let bit = rng.random_range(0..8u8);
            let mut out = original.to_vec();
            out[at] ^= 1 << bit;
            (out, format!("flip bit {bit} of byte {at}"), Expect::Damage)
        }
        1 => {
            frames[f].remove(r);
            let expect = if seq < last_of_stream {
                Expect::Stream(stream.clone(), Some(seq))
            } else {
                Expect::Stream(stream.clone(), None)
            };
            (
                write(&header, &frames),
                format!("delete {stream} event {seq}"),
                expect,
            )
        }
        2 => {
            let copy = frames[f][r].clone();
            frames[f].insert(r + 1, copy);
            (
                write(&header, &frames),
                format!("repeat {stream} event {seq}"),
                Expect::Stream(stream.clone(), Some(seq + 1)),
            )
        }
        3 if seq < last_of_stream => {
            let next = places
                .iter()
                .find(|p| p.0 == stream && p.1 == seq + 1)
                .expect("next event");
            let (a, b) = (frames[f][r].clone(), frames[next.2][next.3].clone());
            frames[f][r] = b;
            frames[next.2][next.3] = a;
            (
                write(&header, &frames),
                format!("swap {stream} events {seq} and {}", seq + 1),
                Expect::Stream(stream.clone(), Some(seq)),
            )
        }
        4 if stream != "_heads" => {
            let other = RUNS.iter().find(|o| **o != stream).expect("another run");
            let theirs = places
                .iter()
                .find(|p| p.0 == *other && p.1 == seq)
                .expect("same event of another run");
            frames[f][r] = frames[theirs.2][theirs.3].clone();
            (
                write(&header, &frames),
                format!("{other}'s event {seq} in place of {stream}'s"),
                Expect::Stream(stream.clone(), Some(seq)),
            )
        }
        5 => {
            // Rewrite one payload byte and re-chain the rest of the run: the chain is
            // sound again, only the signed seal (or heads checkpoint) can tell.
            let mut event = decode(&frames[f][r].1);
            if let Payload::Inline(bytes) = &mut event.payload
                && let Some(i) = bytes.iter().position(|b| b.is_ascii_digit())
            {
                bytes[i] = if bytes[i] == b'9' { b'0' } else { bytes[i] + 1 };
            }
            event.hash = event_hash(&event.prev, &canonical_body(&event));
            frames[f][r].1 = event_record(&event);
            rechain(&mut frames, &stream, seq + 1);
            (
                write(&header, &frames),
                format!("rewrite {stream} event {seq} and re-chain the rest"),
                Expect::Stream(stream.clone(), None),
            )
        }
        _ => {
            // Cut the log at a batch boundary: the last batches (the seals) go.
            let keep = rng.random_range(1..frames.len());
            frames.truncate(keep);
            (
                write(&header, &frames),
                format!("cut the log after {keep} batches"),
                Expect::Damage,
            )
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_single_mutations_of_a_sealed_log_are_each_caught_where_they_were_made() {
    let seed: u64 = std::env::var("DOCKET_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_124);
    let count: usize = std::env::var("DOCKET_STORE_MUTATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let original = sealed_directory(data).await;
    let sound = verify(data, &VerifyOptions::default()).expect("verifies");
    assert!(sound.is_sound(), "{sound:?}");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let path = segment(data);
    for i in 0..count {
        let (mutated, what, expect) = mutate(&mut rng, &original);
        if mutated == original {
            continue;
        }
        std::fs::write(&path, &mutated).expect("write");
        let found = verify(data, &VerifyOptions::default());
        let context = format!("mutation {i} (seed {seed}): {what}");
        let report = match found {
            // The segment header itself no longer reads: refused as a whole.
            Err(_) => continue,
            Ok(report) => report,
        };
        assert!(!report.is_sound(), "{context} was not caught: {report:?}");
        if let Expect::Stream(stream, seq) = expect {
            let problem = if stream == "_heads" {
                report.heads.problem.clone()
            } else {
                report
                    .runs
                    .iter()
                    .find(|r| r.run_id == stream)
                    .and_then(|r| r.problem.clone())
            };
            let problem = problem
                .unwrap_or_else(|| panic!("{context}: caught, but not at {stream}: {report:?}"));
            if let Some(seq) = seq {
                assert_eq!(problem.seq, Some(seq), "{context}: {problem:?}");
            }
        }
    }
    std::fs::write(&path, &original).expect("restore");
    assert!(
        verify(data, &VerifyOptions::default())
            .expect("verifies")
            .is_sound()
    );
}
