//! Recomputes the worked example of FORMAT.md, so the document cannot drift from the code.

use crate::codec::{TAG_EVENT, push_record};
use crate::segment::{BATCH_HEADER_LEN, seal_batch, segment_header};
use crate::{Event, Hash, Payload, StreamId, WallTime, canonical_body, event_hash, genesis};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The two events of the example, hashed by the code under test.
fn example() -> (Vec<u8>, Vec<u8>, Event, Event) {
    let stream = StreamId::new("run-42").unwrap();
    let mut first = Event {
        stream: stream.clone(),
        seq: 1,
        kind: "handoff".into(),
        kind_version: 1,
        recorded_at: WallTime(1_700_000_000_123_456_789),
        policy: Some(Hash(*blake3::hash(b"example policy bundle").as_bytes())),
        payload: Payload::Inline(br#"{"to":"writer"}"#.to_vec()),
        prev: genesis(&stream),
        hash: Hash([0; 32]),
    };
    let body1 = canonical_body(&first);
    first.hash = event_hash(&first.prev, &body1);
    let mut second = Event {
        stream: stream.clone(),
        seq: 2,
        kind: "finished".into(),
        kind_version: 3,
        recorded_at: WallTime(-5),
        policy: None,
        payload: Payload::Blob(crate::BlobRef {
            hash: Hash(*blake3::hash(b"a large payload").as_bytes()),
            len: 15,
        }),
        prev: first.hash,
        hash: Hash([0; 32]),
    };
    let body2 = canonical_body(&second);
    second.hash = event_hash(&second.prev, &body2);
    (body1, body2, first, second)
}

#[test]
fn format_md_worked_example() {
    let (body1, body2, first, second) = example();
    if std::env::var_os("DOCKET_PRINT_FORMAT_EXAMPLE").is_some() {
        let mut frame = vec![0u8; BATCH_HEADER_LEN];
        push_record(
            &mut frame,
            TAG_EVENT,
            &[&body1, &first.prev.0, &first.hash.0],
        );
        seal_batch(&mut frame);
        let text = format!(
            "genesis {}\npolicy {}\nbody1 {}\nhash1 {}\nblob {}\nbody2 {}\nhash2 {}\nsegment_header {}\nframe {}\n",
            first.prev,
            first.policy.map(|h| h.to_hex()).unwrap_or_default(),
            hex(&body1),
            first.hash,
            match second.payload {
                Payload::Blob(r) => r.hash.to_hex(),
                Payload::Inline(_) => String::new(),
            },
            hex(&body2),
            second.hash,
            hex(&segment_header(1)),
            hex(&frame),
        );
        std::fs::write(std::env::temp_dir().join("docket-format-example.txt"), text).unwrap();
    }
    assert_eq!(hex(&body1), BODY1);
    assert_eq!(first.prev.to_hex(), GENESIS);
    assert_eq!(first.hash.to_hex(), HASH1);
    assert_eq!(hex(&body2), BODY2);
    assert_eq!(second.hash.to_hex(), HASH2);
    assert_eq!(hex(&segment_header(1)), SEGMENT_HEADER);
    let mut frame = vec![0u8; BATCH_HEADER_LEN];
    push_record(
        &mut frame,
        TAG_EVENT,
        &[&body1, &first.prev.0, &first.hash.0],
    );
    seal_batch(&mut frame);
    assert_eq!(hex(&frame), FRAME);
}

/// The Merkle tree of the example's two events (FORMAT.md §5, "Merkle tree"): each leaf
/// hash from the record body as the log holds it, and the root of the 2-event tree; the
/// document must show these very values.
#[test]
fn format_md_merkle_example() {
    use crate::merkle::{TreeBuilder, event_leaf_hash, leaf_hash, node_hash};
    let (body1, body2, first, second) = example();
    let leaf1 = event_leaf_hash(&first);
    let leaf2 = event_leaf_hash(&second);
    // The leaf data spelled out: canonical body ‖ prev ‖ hash.
    assert_eq!(
        leaf1,
        leaf_hash(&[&body1[..], &first.prev.0, &first.hash.0].concat())
    );
    assert_eq!(
        leaf2,
        leaf_hash(&[&body2[..], &second.prev.0, &second.hash.0].concat())
    );
    let mut tree = TreeBuilder::new();
    tree.push(leaf1);
    tree.push(leaf2);
    assert_eq!(tree.root(), node_hash(&leaf1, &leaf2));
    assert_eq!(leaf1.to_hex(), LEAF1);
    assert_eq!(leaf2.to_hex(), LEAF2);
    assert_eq!(tree.root().to_hex(), ROOT2);
    let doc = include_str!("../../FORMAT.md");
    for value in [LEAF1, LEAF2, ROOT2, ROOT2_BASE64] {
        assert!(doc.contains(value), "FORMAT.md lacks {value}");
    }
    use base64::Engine as _;
    assert_eq!(
        base64::engine::general_purpose::STANDARD.encode(tree.root().0),
        ROOT2_BASE64
    );
}

const LEAF1: &str = "b442bb1b3895132a1437f6680069cf777864bf6b4c62bed0348aec9128d715a1";
const LEAF2: &str = "e6b0731dd08cc2d43304ad6838031ea40157a8142699172245ca24e225e93614";
const ROOT2: &str = "2fd052a1b1c3af445114ea2604fa69d321fbdcfde5d0db9d393738700a52c12a";
const ROOT2_BASE64: &str = "L9BSobHDr0RRFOomBPpp0yH73P3l0NudOTc4cApSwSo=";

const GENESIS: &str = "77a8d25759d0b2488561401df75f74fc18a1e9f7213853f94da69057672f470a";
const BODY1: &str = "0672756e2d3432010768616e646f666601aab4aed8c7bfce972f01c4cc66ca2c5312a7ef1f20746b01e279460bd5bff05a35a740bd90bd9b069c7b000f7b22746f223a22777269746572227d";
const HASH1: &str = "d155834f6e784bd1525c74ce1769af9042cc336e635451c80a2acc94c956acd3";
const BODY2: &str = "0672756e2d3432020866696e697368656403090001f3c7e7b75a2748331e0b528bdf7a7807ea15af52a048112921956e046534b1020f";
const HASH2: &str = "a2a54684a9860ca50675a13740f08deabb4f49cd11b06e1d5082765666559efb";
const SEGMENT_HEADER: &str = "444f434b45544c4703000000000000000100000000000000e12a785100000000";
const FRAME: &str = "444b5442910000007491de6a8d000000010672756e2d3432010768616e646f666601aab4aed8c7bfce972f01c4cc66ca2c5312a7ef1f20746b01e279460bd5bff05a35a740bd90bd9b069c7b000f7b22746f223a22777269746572227d77a8d25759d0b2488561401df75f74fc18a1e9f7213853f94da69057672f470ad155834f6e784bd1525c74ce1769af9042cc336e635451c80a2acc94c956acd3";
