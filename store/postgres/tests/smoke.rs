use docket_store::{EventStore, NewEvent, StreamId, WallTime};
use docket_store_postgres::{PostgresConfig, PostgresStore, TestCluster};
use futures::TryStreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_read_back() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let store = PostgresStore::open(PostgresConfig::new(&db.url))
        .await
        .unwrap();
    let s = StreamId::new("run-1").unwrap();
    let ev = |p: &[u8]| NewEvent {
        kind: "k".into(),
        kind_version: 1,
        recorded_at: WallTime(1),
        policy: None,
        payload: p.to_vec(),
    };
    let a = store.append(&s, 0, vec![ev(b"a"), ev(b"b")]).await.unwrap();
    assert_eq!(a.first_seq, 1);
    let err = store.append(&s, 1, vec![ev(b"c")]).await.unwrap_err();
    assert!(err.to_string().contains("expected"), "{err}");
    store.append(&s, 2, vec![ev(b"c")]).await.unwrap();
    let events: Vec<_> = store.read(&s, 1..=u64::MAX).try_collect().await.unwrap();
    assert_eq!(events.len(), 3);
    let report = store.verify(&s).await.unwrap();
    assert!(report.is_sound(), "{report:?}");
    let head = store.tree_head(&s, None).await.unwrap();
    assert_eq!(head.size, 3);
}
