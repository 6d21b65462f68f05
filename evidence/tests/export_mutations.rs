//! Seeded random single mutations of signed exports (bit flips, deleted, repeated and
//! swapped lines, truncations, lines spliced from another run's export), checked against
//! the key the auditor trusts: every one is caught, at the line where it was made. The
//! export is redacted: it discloses some values encoding-3 events commit to and
//! withholds one.

use std::collections::BTreeMap;

use docket_decider::RunEvent;
use docket_evidence::{
    Checkpoint, Redaction, RunExport, Seal, SignerKey, run_origin, verify_export, write_jsonl,
};
use docket_store::merkle::{TreeBuilder, event_leaf_hash};
use docket_store::{
    BlobRef, Disclosures, Event, Hash, Payload, StoredDisclosure, StreamId, WallTime, blob_hash,
    canonical_body, event_hash, genesis,
};
use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// A run of `n` events shaped like docket's: JSON payloads, one held as a blob, one
/// payload that is not JSON, a policy hash on most; from event 6 on, events in payload
/// encoding 2 referring to content (two contents from one event, content referred to
/// again later); events 10 and 12 in payload encoding 3, committing to values (one
/// committed to by both), salted with a key of the run's.
fn run(id: &str, n: u64) -> (StreamId, Vec<Event>, BTreeMap<Hash, Vec<u8>>, Disclosures) {
    let stream = StreamId::new(id).expect("valid id");
    let mut prev = genesis(&stream);
    let mut events = Vec::new();
    let mut blobs = BTreeMap::new();
    let mut content = |name: &str| -> String {
        let bytes =
            format!(r#"{{"from":"{id}","text":"{name} {}"}}"#, "x".repeat(150)).into_bytes();
        let reference = format!(
            r#"{{"blake3":"{}","len":{}}}"#,
            blob_hash(&bytes),
            bytes.len()
        );
        blobs.insert(blob_hash(&bytes), bytes);
        reference
    };
    let referring: BTreeMap<u64, (&str, String)> = [
        (6, ("handoff.allowed", format!(r#"{{"delivered":{},"kind":"handoff.allowed"}}"#, content("a")))),
        (
            7,
            (
                "agent.responded",
                format!(
                    r#"{{"kind":"agent.responded","response":{{"actions":[{{"payload":{}}},{{"payload":{}}},{{"payload":{}}}]}}}}"#,
                    content("b"),
                    content("c"),
                    content("a")
                ),
            ),
        ),
        (9, ("handoff.allowed", format!(r#"{{"delivered":{},"kind":"handoff.allowed"}}"#, content("c")))),
        (11, ("run.completed", format!(r#"{{"kind":"run.completed","output":{}}}"#, content("d")))),
    ]
    .into_iter()
    .collect();
    let mut disclosures = Disclosures::new();
    let salt_key = *blake3::hash(id.as_bytes()).as_bytes();
    let committed: BTreeMap<u64, serde_json::Value> = [
        (10, serde_json::json!({"claimant": {"name": "Ada", "run": id}, "amount": 12.5, "score": 2.0})),
        (12, serde_json::json!({"claimant": {"name": "Ada", "run": id}, "status": "done"})),
    ]
    .into_iter()
    .collect();
    for seq in 1..=n {
        if let Some(output) = committed.get(&seq) {
            let encoded = RunEvent::RunCompleted {
                output: output.clone(),
                conflicts: Vec::new(),
            }
            .encode_committed(&mut |m| {
                let mut salt = [0u8; 16];
                salt.copy_from_slice(&blake3::keyed_hash(&salt_key, m).as_bytes()[..16]);
                salt
            })
            .expect("committed");
            for d in encoded.disclosures {
                disclosures.insert(d.digest, StoredDisclosure::Present(d.bytes));
            }
            let mut event = Event {
                stream: stream.clone(),
                seq,
                kind: "run.completed".to_owned(),
                kind_version: docket_decider::COMMITTED_PAYLOAD,
                recorded_at: WallTime(1_795_000_000_000_000_000 + seq as i64 * 1_000_003),
                policy: Some(Hash([7; 32])),
                payload: Payload::Inline(encoded.payload),
                prev,
                hash: Hash([0; 32]),
            };
            event.hash = event_hash(&prev, &canonical_body(&event));
            prev = event.hash;
            events.push(event);
            continue;
        }
        let text = format!(
            r#"{{"run":"{id}","step":{seq},"note":"agent said \"ok\" <script>x</script>","score":1.5e{seq}}}"#
        );
        if let Some((kind, payload)) = referring.get(&seq) {
            let mut event = Event {
                stream: stream.clone(),
                seq,
                kind: (*kind).to_owned(),
                kind_version: docket_decider::REFERENCED_PAYLOAD,
                recorded_at: WallTime(1_795_000_000_000_000_000 + seq as i64 * 1_000_003),
                policy: Some(Hash([7; 32])),
                payload: Payload::Inline(payload.clone().into_bytes()),
                prev,
                hash: Hash([0; 32]),
            };
            event.hash = event_hash(&prev, &canonical_body(&event));
            prev = event.hash;
            events.push(event);
            continue;
        }
        let payload = match seq {
            3 => {
                let bytes = text.into_bytes();
                let hash = blob_hash(&bytes);
                let len = bytes.len() as u64;
                blobs.insert(hash, bytes);
                Payload::Blob(BlobRef { hash, len })
            }
            5 => Payload::Inline(vec![0xff, 0x00, b'\n', seq as u8]),
            _ => Payload::Inline(text.into_bytes()),
        };
        let mut event = Event {
            stream: stream.clone(),
            seq,
            kind: if seq == 1 {
                "run.requested"
            } else {
                "agent.responded"
            }
            .to_owned(),
            kind_version: 1,
            recorded_at: WallTime(1_795_000_000_000_000_000 + seq as i64 * 1_000_003),
            policy: (seq % 4 != 0).then_some(Hash([7; 32])),
            payload,
            prev,
            hash: Hash([0; 32]),
        };
        event.hash = event_hash(&prev, &canonical_body(&event));
        prev = event.hash;
        events.push(event);
    }
    (stream, events, blobs, disclosures)
}

/// The instance key that seals the test runs (a fixed seed: the same bytes every time).
fn signer() -> SignerKey {
    SignerKey::from_seed("audit.example/docket", [42; 32]).expect("valid key")
}

fn export_of(id: &str, n: u64) -> Vec<u8> {
    let (stream, events, blobs, disclosures) = run(id, n);
    let mut tree = TreeBuilder::new();
    for event in &events {
        tree.push(event_leaf_hash(event));
    }
    let key = signer();
    let note = Checkpoint::new(run_origin(key.name(), id), tree.size(), tree.root())
        .sign(&key)
        .expect("signs");
    let seal = Seal {
        note,
        verifier_key: key.verifier().to_string(),
    };
    let mut out = Vec::new();
    write_jsonl(
        &RunExport {
            run: &stream,
            events: &events,
            blobs: &blobs,
            disclosures: &disclosures,
            redact: &["10:/output/amount"
                .parse::<Redaction>()
                .expect("a redaction")],
            seal: Some(&seal),
        },
        &mut out,
    )
    .expect("export writes");
    out
}

/// A seeded, reproducible sequence (the seed is printed on failure).
struct Rng(TestRng);

impl Rng {
    fn seeded(seed: u64) -> Rng {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        Rng(TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
    }
    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }
}

fn lines_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// Applies one mutation; returns the mutated export, what was done, and the line the
/// verifier must name.
fn mutate(rng: &mut Rng, original: &[u8], other: &[u8]) -> (Vec<u8>, String, usize) {
    let lines = lines_of(original);
    let count = lines.len();
    match rng.below(6) {
        0 => {
            let at = rng.below(original.len());
            let bit = rng.below(8);
            let mut out = original.to_vec();
            out[at] ^= 1 << bit;
            let line = original[..at].iter().filter(|b| **b == b'\n').count() + 1;
            (out, format!("flip bit {bit} of byte {at}"), line)
        }
        1 => {
            let i = rng.below(count);
            let mut ls = lines.clone();
            ls.remove(i);
            (ls.concat(), format!("delete line {}", i + 1), i + 1)
        }
        2 => {
            let i = rng.below(count);
            let mut ls = lines.clone();
            ls.insert(i + 1, lines[i].clone());
            (ls.concat(), format!("repeat line {}", i + 1), i + 2)
        }
        3 => {
            let i = rng.below(count - 1);
            let j = i + 1 + rng.below(count - 1 - i);
            let mut ls = lines.clone();
            ls.swap(i, j);
            (
                ls.concat(),
                format!("swap lines {} and {}", i + 1, j + 1),
                i + 1,
            )
        }
        4 => {
            // Cut anywhere but after the last line's content (only its newline left out
            // is still the whole export).
            let cut = rng.below(original.len() - 1);
            let mut end = 0;
            let mut line = 1;
            for l in &lines {
                let content_end = end + l.len() - 1;
                if cut < content_end {
                    break;
                }
                end += l.len();
                line += 1;
            }
            (
                original[..cut].to_vec(),
                format!("truncate at byte {cut}"),
                line,
            )
        }
        _ => {
            // Another run's line in place of an event or the tree head line.
            let theirs = lines_of(other);
            let i = 1 + rng.below(count - 1);
            let mut ls = lines.clone();
            ls[i] = theirs[i].clone();
            (
                ls.concat(),
                format!("splice line {} of another run", i + 1),
                i + 1,
            )
        }
    }
}

#[test]
fn the_unmutated_export_is_sound() {
    let export = export_of("run-a", 12);
    let trusted = signer().verifier();
    let summary = verify_export(export.as_slice(), Some(&trusted)).expect("sound");
    assert_eq!(summary.events, 12);
    assert_eq!(summary.run, "run-a");
    let seal = summary.checkpoint.expect("signed");
    assert!(seal.key_trusted);
    assert_eq!(seal.origin, "audit.example/docket/run/run-a");
    // Signed by another key than the one trusted: refused at the checkpoint line.
    let other = SignerKey::from_seed("audit.example/docket", [7; 32]).unwrap();
    let bad = verify_export(export.as_slice(), Some(&other.verifier())).unwrap_err();
    // Four contents, each given once, after the event that first refers to it.
    let kinds: Vec<String> = lines_of(&export)
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_slice(l).expect("json");
            match v["type"].as_str() {
                Some("event") => format!("e{}", v["seq"]),
                other => other.unwrap_or_default().to_owned(),
            }
        })
        .collect();
    assert_eq!(
        kinds[6..13].join(" "),
        "e6 content e7 content content e8 e9",
        "{kinds:?}"
    );
    // Event 10 commits to two values (`score`, 2.0, stays in the clear: RFC 8785 would
    // read it back as 2), `amount` withheld; event 12 to two, one of them given already.
    assert_eq!(
        kinds[13..21].join(" "),
        "e10 withheld disclosure e11 content e12 disclosure tree",
        "{kinds:?}"
    );
    assert_eq!(bad.line, 22, "{bad}");
    assert_eq!((summary.disclosed, summary.withheld), (2, 1));
}

#[test]
fn ten_thousand_single_mutations_are_each_caught_where_they_were_made() {
    let seed: u64 = std::env::var("DOCKET_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_124);
    let count: usize = std::env::var("DOCKET_MUTATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let original = export_of("run-a", 12);
    let other = export_of("run-b", 12);
    let trusted = signer().verifier();
    let mut rng = Rng::seeded(seed);
    for i in 0..count {
        let (mutated, what, line) = mutate(&mut rng, &original, &other);
        match verify_export(mutated.as_slice(), Some(&trusted)) {
            Ok(_) => panic!(
                "mutation {i} (seed {seed}): {what} was not caught; line {line} now reads {}",
                String::from_utf8_lossy(&lines_of(&mutated)[line - 1])
            ),
            Err(bad) => assert_eq!(
                bad.line, line,
                "mutation {i} (seed {seed}): {what} was caught at line {} ({}), not at line {line}",
                bad.line, bad.fault
            ),
        }
    }
}

/// `recorded_at_ns` reads alike in every reader (export version 4): a decimal string, as
/// docket writes an integer; a number there, or a string with a leading zero, is refused
/// naming the line; an export of version 3 (the number) still reads.
#[test]
fn recorded_at_ns_is_a_decimal_string_from_version_4_and_a_number_before() {
    let export = String::from_utf8(export_of("run-t", 12)).expect("utf-8");
    let trusted = signer().verifier();
    assert!(export.starts_with(r#"{"type":"header","format":"docket.export.jsonl","version":4,"#));
    // Every event line carries it as a string; each string, unquoted, is the number.
    let at = |line: &str| -> Option<(usize, usize)> {
        let start = line.find(r#""recorded_at_ns":""#)? + r#""recorded_at_ns":""#.len();
        let end = start + line[start..].find('"')?;
        Some((start, end))
    };
    let lines: Vec<&str> = export.lines().collect();
    let second = lines
        .iter()
        .position(|l| l.contains(r#""type":"event","seq":2,"#))
        .expect("event 2");
    let (start, end) = at(lines[second]).expect("a string");
    let digits = &lines[second][start..end];
    assert!(
        digits.len() > 16 && digits.bytes().all(|b| b.is_ascii_digit()),
        "{digits}"
    );
    for changed in [
        // The number itself, as version 3 wrote it.
        format!(
            "{}{}{}",
            &lines[second][..start - 1],
            digits,
            &lines[second][end + 1..]
        ),
        // A leading zero: the same number to a parser, not as docket writes it.
        format!("{}0{}", &lines[second][..start], &lines[second][start..]),
    ] {
        let mut mutated: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        mutated[second] = changed;
        let text = mutated.join("\n") + "\n";
        let bad = verify_export(text.as_bytes(), Some(&trusted)).unwrap_err();
        assert_eq!(bad.line, second + 1, "{bad}");
        assert!(bad.to_string().contains("recorded_at_ns"), "{bad}");
    }
    // Version 3: the header says 3 and every event line has the number.
    let v3: Vec<String> = lines
        .iter()
        .map(|l| {
            let l = l.replacen(r#""version":4,"#, r#""version":3,"#, 1);
            match at(&l) {
                Some((start, end)) => {
                    format!("{}{}{}", &l[..start - 1], &l[start..end], &l[end + 1..])
                }
                None => l,
            }
        })
        .collect();
    let summary = verify_export((v3.join("\n") + "\n").as_bytes(), Some(&trusted))
        .expect("a version-3 export reads");
    assert_eq!(summary.events, 12);
}
