//! The contract every backend keeps, run on PostgreSQL (a database per check, in the test
//! binary's private cluster).

use docket_store_postgres::{PostgresConfig, PostgresStore, TestCluster, TestDatabase};

async fn open() -> Option<(PostgresStore, TestDatabase)> {
    let cluster = TestCluster::shared()?;
    let db = cluster.database();
    let store = PostgresStore::open(PostgresConfig::new(&db.url))
        .await
        .expect("the database opens");
    Some((store, db))
}

docket_store::event_store_contract!(open);

/// Tails on PostgreSQL wake on notifications; one lost while the listening connection was
/// down (every listener cut off, the append made at once) still reaches the tail: it is
/// woken when its connection listens again, or by the sweep of watched heads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_gets_an_event_whose_notification_may_have_been_lost() {
    use std::time::Duration;

    use docket_store::{EventStore, NewEvent, Payload, StreamId, WallTime};
    use futures::StreamExt;

    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let ev = |payload: &[u8]| NewEvent {
        kind: "k".into(),
        kind_version: 1,
        recorded_at: WallTime(1),
        policy: None,
        payload: payload.to_vec(),
    };
    let reader = PostgresStore::open(PostgresConfig {
        poll_interval: Duration::from_millis(200),
        ..PostgresConfig::new(&db.url)
    })
    .await
    .expect("the database opens");
    let writer = PostgresStore::open(PostgresConfig::new(&db.url))
        .await
        .expect("the database opens");
    let (admin, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    // A listener of its own, which reads every notification at once: a connection that
    // listens anew starts after what it read (without one, PostgreSQL would hand a new
    // listener the notifications still queued, and none would be lost).
    admin
        .batch_execute("LISTEN docket_events")
        .await
        .expect("LISTEN");
    let stream = StreamId::new("lost-1").expect("id");
    writer
        .append(&stream, 0, vec![ev(b"one")])
        .await
        .expect("append");
    // The tail is read in a task of its own, so that it waits for a wake-up while the
    // listeners are cut off and the next event is appended.
    let (tx, mut tailed) = tokio::sync::mpsc::unbounded_channel();
    let mut tail = Box::pin(reader.tail(&stream, 1));
    tokio::spawn(async move {
        while let Some(event) = tail.next().await {
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    let first = tailed.recv().await.expect("an event").expect("read");
    assert_eq!(
        (first.seq, first.payload),
        (1, Payload::Inline(b"one".to_vec()))
    );
    for n in 2..=4u64 {
        // Both stores listen (each connects its listener in the background, and again
        // after each cut); then every listener is cut off.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let listening = admin
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE datname = current_database() AND query LIKE 'LISTEN%'",
                    &[],
                )
                .await
                .expect("pg_stat_activity")
                .get::<_, i64>(0);
            if listening >= 2 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{listening} listening connections after 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let cut: Vec<i32> = admin
            .query(
                "SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity \
                 WHERE datname = current_database() AND query LIKE 'LISTEN%'",
                &[],
            )
            .await
            .expect("listeners cut off")
            .iter()
            .map(|row| row.get::<_, i32>(1))
            .collect();
        // Appended once the listeners cut off are gone, usually before the stores listen
        // again (100 ms at least): then no listener hears of it and only the poll finds it.
        // (Told by their pids: a listener connected again under a busy machine is another.)
        while admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)",
                &[&cut],
            )
            .await
            .expect("pg_stat_activity")
            .get::<_, i64>(0)
            > 0
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the listeners were not cut off"
            );
            tokio::task::yield_now().await;
        }
        let payload = format!("event {n}");
        writer
            .append(&stream, n - 1, vec![ev(payload.as_bytes())])
            .await
            .expect("append");
        let got = tokio::time::timeout(Duration::from_secs(10), tailed.recv())
            .await
            .unwrap_or_else(|_| panic!("event {n} did not reach the tail within 10 s"))
            .expect("an event")
            .expect("read");
        assert_eq!(
            (got.seq, got.payload),
            (n, Payload::Inline(payload.into_bytes()))
        );
    }
}
