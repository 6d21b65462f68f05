//! The harness's own parts: a panicking target is caught and its case shrunk, mutations
//! keep documents within their bound, and a reframed segment's checksums are right.

use proptest::prelude::*;
use serde_json::json;

use crate::mutate::{self, ByteOp, Dictionary, TreeOp};
use crate::{Bound, Settings, Target, run};

/// Panics on any input holding the byte `!`.
struct Fragile;

impl Target for Fragile {
    type Case = Vec<u8>;

    fn name(&self) -> &'static str {
        "fragile"
    }

    fn strategy(&self) -> BoxedStrategy<Vec<u8>> {
        prop::collection::vec(prop_oneof![Just(b'a'), Just(b'!')], 0..64).boxed()
    }

    fn render(&self, case: &Vec<u8>) -> Vec<u8> {
        case.clone()
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        vec![b"aaa".to_vec()]
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        assert!(!input.contains(&b'!'), "a bang");
        Ok(())
    }

    fn bound(&self) -> Bound {
        Bound {
            per_byte: 1,
            constant: 0,
        }
    }
}

#[test]
fn a_panicking_case_is_caught_shrunk_and_written_out() {
    let out = tempfile::tempdir().expect("tempdir");
    let settings = Settings {
        seconds: 0.5,
        seed: 1,
        out: out.path().to_owned(),
        regressions: out.path().join("none"),
    };
    let report = run(&mut Fragile, &settings);
    assert_eq!(report.fixed, 1, "the seed ran");
    assert!(report.generated > 0);
    let failure = report.failures.first().expect("a case with a bang fails");
    assert!(failure.starts_with("panic"), "{failure}");
    // Shrunk to the one byte that fails.
    let file = std::fs::read_dir(out.path())
        .expect("out")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("fragile-"))
        })
        .expect("a reproducer");
    assert_eq!(std::fs::read(file).expect("reproducer"), b"!");
}

#[test]
fn tree_mutations_keep_a_document_within_its_bound() {
    let mut doc = json!({ "agents": [{ "id": "a".repeat(1000) }] });
    let ops: Vec<TreeOp> = (0..20).map(|_| TreeOp::Duplicate(2, 11, 0)).collect();
    mutate::apply_tree(&mut doc, &ops, &Dictionary::default());
    let len = serde_json::to_vec(&doc).expect("json").len();
    assert!(len <= mutate::MAX_DOCUMENT, "{len} bytes");
    assert!(
        doc["agents"].as_array().expect("agents").len() > 1,
        "some copies were made"
    );
}

#[test]
fn byte_mutations_grow_a_document_by_at_most_the_bound() {
    let mut bytes = vec![b'x'; 100];
    let ops: Vec<ByteOp> = (0..50).map(|i| ByteOp::Repeat(i, 511, 7)).collect();
    mutate::apply_bytes(&mut bytes, &ops, &Dictionary::default());
    assert!(
        bytes.len() <= 100 + mutate::MAX_DOCUMENT,
        "{} bytes",
        bytes.len()
    );
}

#[test]
fn a_reframed_segment_scans_clean_where_the_damaged_one_does_not() {
    let fixture = crate::targets::segments::golden_fixtures()
        .into_iter()
        .find(|f| f.label.starts_with("v12/"))
        .expect("a golden log");
    let dir = tempfile::tempdir().expect("tempdir");
    crate::targets::segments::copy_dir(&fixture.dir, dir.path()).expect("copy");
    let segment = dir.path().join("log/00000000000000000001.seg");
    let mut bytes = std::fs::read(&segment).expect("segment");
    // The first frame's CRC (offsets 40..44: after the 32-byte header, magic and length).
    bytes[40] ^= 0xff;
    std::fs::write(&segment, &bytes).expect("write");
    let damaged = docket_store::scan_log(dir.path(), |_| {});
    assert!(
        !matches!(damaged, Ok(ref s) if matches!(s.end, docket_store::LogEnd::Clean)),
        "{damaged:?}"
    );
    crate::targets::segments::reframe(&mut bytes);
    std::fs::write(&segment, &bytes).expect("write");
    let summary = docket_store::scan_log(dir.path(), |_| {}).expect("scans");
    assert!(
        matches!(summary.end, docket_store::LogEnd::Clean),
        "{summary:?}"
    );
}
