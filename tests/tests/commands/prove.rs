//! `docket prove` through the binary (docs/proofs.md): every inclusion and consistency proof
//! it prints for a recorded run checks, with an RFC 9162 verifier, against a tree rebuilt
//! here from the events' leaf data (`canonical body ‖ prev ‖ hash`); the same proofs come
//! back after the index is deleted; requests outside the run are named.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use docket_store::merkle::{
    TreeBuilder, TreeHash, leaf_hash, verify_consistency, verify_inclusion,
};
use docket_store::{EmbeddedStore, EventStore, StoreConfig, StreamId, canonical_body};
use docket_tests::{docket_on, exit_code, run_events, stdout_text, workspace_root};
use futures::TryStreamExt;
use serde_json::Value;

const RUN: &str = "golden-geo";

/// A copy of a geo golden log in store format 1 (29 events): the store's own files.
fn geo_data() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let golden = workspace_root().join("tests/golden/formats/store-1-encoding-1/geo");
    std::fs::copy(golden.join("DOCKET-STORE"), dir.path().join("DOCKET-STORE")).unwrap();
    std::fs::create_dir(dir.path().join("log")).unwrap();
    for entry in std::fs::read_dir(golden.join("log")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join("log").join(entry.file_name())).unwrap();
    }
    dir
}

/// Each event's leaf hash, computed here from its leaf data as docs/proofs.md says.
fn leaves(data: &Path) -> Vec<TreeHash> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = EmbeddedStore::open(data, StoreConfig::default())
            .await
            .unwrap();
        let events: Vec<_> = store
            .read(&StreamId::new(RUN).unwrap(), 1..=u64::MAX)
            .try_collect()
            .await
            .unwrap();
        store.close().await;
        events
            .iter()
            .map(|e| {
                let mut data = canonical_body(e);
                data.extend_from_slice(&e.prev.0);
                data.extend_from_slice(&e.hash.0);
                leaf_hash(&data)
            })
            .collect()
    })
}

fn roots(leaves: &[TreeHash]) -> Vec<TreeHash> {
    let mut tree = TreeBuilder::new();
    let mut roots = vec![tree.root()];
    for leaf in leaves {
        tree.push(*leaf);
        roots.push(tree.root());
    }
    roots
}

fn hash(v: &Value) -> TreeHash {
    let bytes = STANDARD
        .decode(v.as_str().expect("a base64 string"))
        .unwrap();
    TreeHash(bytes.try_into().expect("32 bytes"))
}

fn path(v: &Value) -> Vec<TreeHash> {
    v.as_array().expect("a path").iter().map(hash).collect()
}

fn prove_json(data: &Path, args: &[&str]) -> Value {
    let mut all = vec!["prove", RUN, "--json"];
    all.extend_from_slice(args);
    let out = docket_on(data, &all);
    assert_eq!(
        exit_code(&out),
        0,
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout_text(&out).trim()).expect("one JSON object")
}

#[test]
fn every_proof_prove_prints_checks_against_the_events() {
    let data = geo_data();
    let events = run_events(data.path(), RUN);
    let leaves = leaves(data.path());
    let roots = roots(&leaves);
    let n = leaves.len() as u64;
    assert_eq!(n, 29);

    let mut printed = Vec::new();
    // Leaves at the edges of subtrees of every level, in the tree of their own size and the
    // run's (each is one run of the binary).
    for seq in [1, 2, 3, 7, 8, 9, 16, 17, 28, 29] {
        let sizes = if seq == n { vec![n] } else { vec![seq, n] };
        for size in sizes {
            let doc = prove_json(
                data.path(),
                &["--seq", &seq.to_string(), "--size", &size.to_string()],
            );
            assert_eq!(doc["proof"], "inclusion");
            assert_eq!(
                (doc["seq"].as_u64(), doc["leaf_index"].as_u64()),
                (Some(seq), Some(seq - 1))
            );
            assert_eq!(doc["tree_size"].as_u64(), Some(size));
            assert_eq!(doc["event_hash"], events[seq as usize - 1]["hash"]);
            assert_eq!(hash(&doc["leaf_hash"]), leaves[seq as usize - 1]);
            assert_eq!(hash(&doc["root"]), roots[size as usize]);
            verify_inclusion(
                &leaves[seq as usize - 1],
                seq - 1,
                size,
                &path(&doc["path"]),
                &roots[size as usize],
            )
            .unwrap_or_else(|e| panic!("event {seq} in {size}: {e}"));
            if size == n {
                printed.push(doc);
            }
        }
    }
    for (old, new) in [
        (0, 29),
        (1, 2),
        (3, 29),
        (7, 8),
        (8, 29),
        (13, 27),
        (29, 29),
    ] {
        let doc = prove_json(
            data.path(),
            &[
                "--from-size",
                &old.to_string(),
                "--to-size",
                &new.to_string(),
            ],
        );
        assert_eq!(doc["proof"], "consistency");
        assert_eq!(
            (doc["old_size"].as_u64(), doc["new_size"].as_u64()),
            (Some(old), Some(new))
        );
        assert_eq!(hash(&doc["old_root"]), roots[old as usize]);
        assert_eq!(hash(&doc["new_root"]), roots[new as usize]);
        verify_consistency(
            old,
            new,
            &roots[old as usize],
            &roots[new as usize],
            &path(&doc["path"]),
        )
        .unwrap_or_else(|e| panic!("{old} to {new}: {e}"));
    }
    // The default sizes are the run's.
    let doc = prove_json(data.path(), &["--from-size", "5"]);
    assert_eq!(doc["new_size"].as_u64(), Some(n));

    // The index is a cache: without it the same proofs come back.
    std::fs::remove_dir_all(data.path().join("index")).unwrap();
    for doc in printed.iter().step_by(3) {
        let seq = doc["seq"].as_u64().unwrap().to_string();
        assert_eq!(&prove_json(data.path(), &["--seq", &seq]), doc);
    }
}

#[test]
fn prove_prints_a_checked_proof_for_people() {
    let data = geo_data();
    let out = docket_on(data.path(), &["prove", RUN, "--seq", "7", "--size", "9"]);
    assert_eq!(exit_code(&out), 0);
    let text = stdout_text(&out);
    assert!(
        text.starts_with("run golden-geo: event 7 is leaf 6 of the tree of 9 events\n"),
        "{text}"
    );
    assert!(
        text.contains("  path        4 hashes, nearest sibling first:\n"),
        "{text}"
    );
    assert!(
        text.contains("\nchecked: the path leads from the leaf hash to the root"),
        "{text}"
    );
    let out = docket_on(
        data.path(),
        &["prove", RUN, "--from-size", "10", "--to-size", "20"],
    );
    assert_eq!(exit_code(&out), 0);
    let text = stdout_text(&out);
    assert!(
        text.starts_with(
            "run golden-geo: the tree of 10 events is a prefix of the tree of 20 events\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("\nchecked: the proof leads to both roots"),
        "{text}"
    );
}

#[test]
fn prove_names_what_is_outside_the_run() {
    let data = geo_data();
    let error = |args: &[&str]| {
        let out = docket_on(data.path(), args);
        assert_eq!(exit_code(&out), 1, "{args:?}");
        assert!(out.stdout.is_empty());
        String::from_utf8_lossy(&out.stderr).trim().to_owned()
    };
    assert_eq!(
        error(&["prove", RUN, "--seq", "0"]),
        "error: run golden-geo: there is no event 0: events are numbered from 1"
    );
    assert_eq!(
        error(&["prove", RUN, "--seq", "30"]),
        "error: run golden-geo: event 30 is not in the tree of size 29, which holds events 1 to 29"
    );
    assert_eq!(
        error(&["prove", RUN, "--seq", "12", "--size", "10"]),
        "error: run golden-geo: event 12 is not in the tree of size 10, which holds events 1 to 10"
    );
    assert_eq!(
        error(&["prove", RUN, "--seq", "3", "--size", "40"]),
        "error: run golden-geo: a tree of size 40 was asked for, but there are only events 1 to 29"
    );
    assert_eq!(
        error(&["prove", RUN, "--from-size", "12", "--to-size", "5"]),
        "error: run golden-geo: a consistency proof goes from an older tree to a newer, larger \
         one; asked from size 12 to size 5"
    );
    assert_eq!(
        error(&["prove", RUN, "--from-size", "31"]),
        "error: run golden-geo: a tree of size 31 was asked for, but there are only events 1 to 29"
    );
    let missing = error(&["prove", "no-such-run", "--seq", "1"]);
    assert_eq!(
        missing,
        format!(
            "error: no run no-such-run in the data directory {}",
            data.path().display()
        )
    );
    // A data directory that does not exist is not created by asking.
    let absent = data.path().join("elsewhere");
    let out = docket_on(&absent, &["prove", RUN, "--seq", "1"]);
    assert_eq!(exit_code(&out), 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no run golden-geo in the data directory")
    );
    assert!(!absent.exists());
    // Usage: one of --seq and --from-size, not both.
    assert_eq!(exit_code(&docket_on(data.path(), &["prove", RUN])), 2);
    assert_eq!(
        exit_code(&docket_on(
            data.path(),
            &["prove", RUN, "--seq", "1", "--from-size", "1"]
        )),
        2
    );
}
