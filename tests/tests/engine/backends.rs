//! Moving between backends (docs/postgres.md, "Moving between backends"): every golden
//! log copied from its data directory into PostgreSQL and from there into a new data
//! directory holds the same events, hashes, Merkle roots, blobs and disclosures, and
//! verifies, on each side; a copy run again finds everything there and changes nothing.

use docket_app::copy_store;
use docket_store::{EmbeddedStore, EventStore, StoreConfig, StreamId};
use docket_store_postgres::{PostgresConfig, PostgresStore, TestCluster};
use docket_tests::workspace_root;
use futures::TryStreamExt;

/// Every stream of `a` is in `b` with the same events, tree, blobs and disclosures.
async fn same<A: EventStore, B: EventStore>(a: &A, b: &B, what: &str) -> u64 {
    let heads = a.streams().await.expect("streams");
    assert_eq!(
        heads,
        b.streams().await.expect("streams"),
        "{what}: the stream heads"
    );
    let mut events = 0;
    for head in heads {
        let s: &StreamId = &head.stream;
        let ours: Vec<_> = a.read(s, 1..=u64::MAX).try_collect().await.expect("reads");
        let theirs: Vec<_> = b.read(s, 1..=u64::MAX).try_collect().await.expect("reads");
        assert_eq!(ours, theirs, "{what}: the events of {s}");
        for e in &ours {
            if let docket_store::Payload::Blob(r) = &e.payload {
                assert_eq!(
                    a.get_blob(&r.hash).await.expect("blob"),
                    b.get_blob(&r.hash).await.expect("blob"),
                    "{what}: blob {} of {s}",
                    r.hash
                );
            }
        }
        assert_eq!(
            a.tree_head(s, None).await.expect("tree"),
            b.tree_head(s, None).await.expect("tree"),
            "{what}: the Merkle root of {s}"
        );
        assert_eq!(
            a.disclosures(s).await.expect("disclosures"),
            b.disclosures(s).await.expect("disclosures"),
            "{what}: the disclosures of {s}"
        );
        let report = b.verify(s).await.expect("verifies");
        assert!(report.is_sound(), "{what}: {s}: {report:?}");
        events += ours.len() as u64;
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_logs_copied_into_postgres_and_back_keep_every_hash() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let golden = workspace_root().join("tests/golden/v12");
    let mut dirs: Vec<_> = std::fs::read_dir(&golden)
        .expect("golden logs")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("log").is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 5, "{dirs:?}");
    let mut blobs = 0;
    for dir in dirs {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let source = EmbeddedStore::open_read_only(&dir)
            .await
            .expect("the golden log opens");
        let db = cluster.database();
        let pg = PostgresStore::open(PostgresConfig::new(&db.url))
            .await
            .expect("opens");
        let there = copy_store(&source, &pg, |_| {}).await.expect("copies");
        assert!(there.streams > 0 && there.events > 0, "{name}: {there:?}");
        blobs += there.blobs;
        let events = same(&source, &pg, &format!("{name} in PostgreSQL")).await;
        assert_eq!(events, there.events, "{name}");

        let again = copy_store(&source, &pg, |_| {})
            .await
            .expect("copies again");
        assert_eq!((again.streams, again.events), (0, 0), "{name}: {again:?}");
        assert_eq!(again.already, there.streams, "{name}");

        let back_dir = tempfile::tempdir().expect("tempdir");
        let back = EmbeddedStore::open(back_dir.path(), StoreConfig::default())
            .await
            .expect("a new data directory");
        let returned = copy_store(&pg, &back, |_| {}).await.expect("copies back");
        assert_eq!(returned.events, there.events, "{name}");
        same(&pg, &back, &format!("{name} back in a data directory")).await;
        back.close().await;
    }
    // The content payloads name by hash went with the runs.
    assert!(blobs > 0, "no golden log refers to a blob");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disclosures_go_with_their_run_and_erased_ones_stay_erased() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let source = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("opens");
    let run = StreamId::new("run-d").expect("id");
    let (kept, erased) = ([1u8; 32], [2u8; 32]);
    source
        .put_disclosures(
            &run,
            vec![(kept, b"kept".to_vec()), (erased, b"secret".to_vec())],
        )
        .await
        .expect("disclosed");
    let event = docket_store::NewEvent {
        kind: "e".into(),
        kind_version: 1,
        recorded_at: docket_store::WallTime(1),
        policy: None,
        payload: b"{}".to_vec(),
    };
    source.append(&run, 0, vec![event]).await.expect("appended");
    source
        .shred_disclosures(&run, vec![erased], b"by dpo: request 7".to_vec())
        .await
        .expect("erased");
    let db = cluster.database();
    let pg = PostgresStore::open(PostgresConfig::new(&db.url))
        .await
        .expect("opens");
    let copied = copy_store(&source, &pg, |_| {}).await.expect("copies");
    assert_eq!(copied.disclosures, 2);
    same(&source, &pg, "disclosures").await;
    let there = pg.disclosures(&run).await.expect("disclosures");
    assert_eq!(
        there.get(&erased),
        Some(&docket_store::StoredDisclosure::Shredded(
            b"by dpo: request 7".to_vec()
        ))
    );
    source.close().await;
}
