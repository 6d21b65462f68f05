//! What a data directory keeps beside its log, kept in the database (kill switches, keys,
//! heads checkpoints), and the database's bad moments said in words: a read that finds
//! no schema, a statement past its timeout, a server out of connections, a server down.

use docket_store_postgres::{
    HeadsCheckpointRow, KeyRow, PgError, PostgresConfig, PostgresStore, SwitchFlip, TestCluster,
    TestDatabase,
};
use tokio_postgres::NoTls;

/// The database as messages name it: `postgres://USER@SOCKET_DIR:PORT/NAME`.
fn named(db: &TestDatabase, user: &str) -> String {
    let host = db.url.split('@').nth(1).unwrap().split(':').next().unwrap();
    format!(
        "postgres://{user}@{}:5432/{}",
        host.replace("%2F", "/"),
        db.name
    )
}

async fn raw(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

async fn open(url: &str) -> PostgresStore {
    PostgresStore::open(PostgresConfig::new(url)).await.unwrap()
}

/// A flip as the test expects it, its time (the database's) set aside.
fn flip(switch: &str, on: bool, by: &str, reason: &str, changed: bool) -> SwitchFlip {
    SwitchFlip {
        switch: switch.into(),
        on,
        by: by.into(),
        at_ms: 0,
        reason: reason.into(),
        changed,
    }
}

fn timeless(mut flips: Vec<SwitchFlip>) -> Vec<SwitchFlip> {
    let mut last = 0;
    for f in &mut flips {
        assert!(
            f.at_ms >= last,
            "flips go back in time: {flips:?}",
            flips = f
        );
        last = f.at_ms;
        f.at_ms = 0;
    }
    flips
}

#[tokio::test]
async fn kill_switches_and_their_history_live_in_the_database() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let (a, b) = (open(&db.url).await, open(&db.url).await);
    assert_eq!(a.kill_switches().await.unwrap(), vec![]);
    let on = a
        .flip_kill_switch("api", true, "ops", "bad posts")
        .await
        .unwrap();
    assert_eq!(
        timeless(vec![on]),
        vec![flip("api", true, "ops", "bad posts", true)]
    );
    b.flip_kill_switch("global", true, "ana", "").await.unwrap();
    b.flip_kill_switch("api", true, "bob", "again")
        .await
        .unwrap();
    // Another process sees them at once, with who engaged them first.
    let engaged: Vec<(String, String, String)> = b
        .kill_switches()
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.switch, s.by, s.reason))
        .collect();
    assert_eq!(
        engaged,
        [
            ("api".into(), "ops".into(), "bad posts".into()),
            ("global".into(), "ana".into(), String::new())
        ]
    );
    a.flip_kill_switch("api", false, "ops", "fixed")
        .await
        .unwrap();
    a.flip_kill_switch("api", false, "ops", "").await.unwrap();
    assert_eq!(
        timeless(b.kill_switch_history().await.unwrap()),
        [
            flip("api", true, "ops", "bad posts", true),
            flip("global", true, "ana", "", true),
            flip("api", true, "bob", "again", false),
            flip("api", false, "ops", "fixed", true),
            flip("api", false, "ops", "", false),
        ]
    );
    assert_eq!(
        a.kill_switches()
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.switch)
            .collect::<Vec<_>>(),
        ["global"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_flips_are_all_recorded_and_each_sees_the_one_before() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let (a, b) = (open(&db.url).await, open(&db.url).await);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..40 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.spawn(async move {
            // Half engage `api`, half flip a lane of their own on.
            let switch = if i % 4 < 2 {
                "api".to_owned()
            } else {
                format!("lane-{i}")
            };
            store
                .flip_kill_switch(&switch, true, &format!("p{i}"), "")
                .await
                .unwrap()
        });
    }
    let mut flips = Vec::new();
    while let Some(done) = tasks.join_next().await {
        flips.push(done.unwrap());
    }
    let history = a.kill_switch_history().await.unwrap();
    assert_eq!(history.len(), 40, "every flip is in the history");
    let api: Vec<&SwitchFlip> = history.iter().filter(|f| f.switch == "api").collect();
    assert_eq!(api.len(), 20);
    assert!(
        api[0].changed && api[1..].iter().all(|f| !f.changed),
        "{api:?}"
    );
    let engaged = a.kill_switches().await.unwrap();
    assert_eq!(engaged.len(), 21);
    assert_eq!(
        engaged
            .iter()
            .find(|s| s.switch == "api")
            .map(|s| s.by.clone()),
        Some(api[0].by.clone()),
        "the switch names the flip that engaged it"
    );
}

#[tokio::test]
async fn verifier_keys_and_heads_checkpoints_are_kept() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let store = open(&db.url).await;
    assert_eq!(store.keys().await.unwrap(), vec![]);
    store
        .record_keys(Some("old+00000001+AAA"), &[])
        .await
        .unwrap();
    store
        .record_keys(Some("new+00000002+BBB"), &["old+00000001+AAA".to_owned()])
        .await
        .unwrap();
    store
        .record_keys(Some("other+00000003+CCC"), &[])
        .await
        .unwrap();
    assert_eq!(
        store.keys().await.unwrap(),
        [
            KeyRow {
                verifier: "new+00000002+BBB".into(),
                retired: false
            },
            KeyRow {
                verifier: "other+00000003+CCC".into(),
                retired: false
            },
            KeyRow {
                verifier: "old+00000001+AAA".into(),
                retired: true
            },
        ]
    );
    assert_eq!(store.latest_heads_checkpoint().await.unwrap(), None);
    assert!(store.put_heads_checkpoint(1, "note one\n").await.unwrap());
    assert!(store.put_heads_checkpoint(3, "note three\n").await.unwrap());
    assert!(!store.put_heads_checkpoint(3, "another\n").await.unwrap());
    assert_eq!(
        store.latest_heads_checkpoint().await.unwrap(),
        Some(HeadsCheckpointRow {
            size: 3,
            note: "note three\n".into()
        })
    );
}

#[tokio::test]
async fn a_read_never_creates_the_schema_nor_writes() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    let reading = PostgresConfig {
        read_only: true,
        ..PostgresConfig::new(&db.url)
    };
    let err = match PostgresStore::open(reading.clone()).await {
        Ok(_) => panic!("an empty database opened to read"),
        Err(e) => e,
    };
    assert_eq!(
        err.to_string(),
        format!(
            "PostgreSQL at {} holds no docket tables: it is not a docket store yet (nothing was created, since this only reads)",
            named(&db, "docket")
        )
    );
    let tables = raw(&db.url)
        .await
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'docket%'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(tables, 0, "nothing created");
    // Once created, a reader reads, and the server refuses its writes.
    open(&db.url).await;
    let reader = PostgresStore::open(reading).await.unwrap();
    assert_eq!(reader.kill_switches().await.unwrap(), vec![]);
    let refused = reader
        .flip_kill_switch("api", true, "ops", "")
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("read-only transaction (SQLSTATE 25006)"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_past_the_timeout_is_named_as_such() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    open(&db.url).await;
    // Another session holds the kill switches' table.
    let mut holder = raw(&db.url).await;
    let tx = holder.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE docket_kill_switches IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let store = open(&format!("{}?statement_timeout=200ms", db.url)).await;
    let err = store.kill_switches().await.unwrap_err();
    assert!(matches!(err, PgError::StatementTimeout { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "PostgreSQL at {}, while reading the kill switches: the statement ran longer than the statement timeout and the server cancelled it, so nothing of it was committed (the store URL's statement_timeout, default 60 s: a lock held by another session or an overloaded server; raise it with ?statement_timeout=120s)",
            named(&db, "docket")
        )
    );
    // And a flip cancelled so left nothing behind.
    let err = store
        .flip_kill_switch("api", true, "ops", "")
        .await
        .unwrap_err();
    assert!(matches!(err, PgError::StatementTimeout { .. }), "{err:?}");
    tx.rollback().await.unwrap();
    assert_eq!(store.kill_switch_history().await.unwrap(), vec![]);
    assert_eq!(store.kill_switches().await.unwrap(), vec![]);
}

#[tokio::test]
async fn a_server_out_of_connections_is_said_so() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let db = cluster.database();
    open(&db.url).await;
    raw(&db.url)
        .await
        .batch_execute("CREATE ROLE limited LOGIN CONNECTION LIMIT 1")
        .await
        .ok(); // the role is the cluster's: another test may have made it
    let url = db.url.replacen("docket@", "limited@", 1);
    let _only = raw(&url).await;
    let err = match PostgresStore::open(PostgresConfig::new(&url)).await {
        Ok(_) => panic!("a second connection beyond the role's limit"),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        err,
        format!(
            "PostgreSQL at {}, while connecting: the database server has no connection left for docket (too many connections) (SQLSTATE 53300: too many connections for role \"limited\"); nothing of it was committed",
            named(&db, "limited")
        )
    );
}

#[tokio::test]
async fn a_server_down_is_named_without_the_password() {
    // Port 1 on the loopback: nothing listens there.
    let err = match PostgresStore::open(PostgresConfig::new(
        "postgres://ana:hunter2@127.0.0.1:1/ledger",
    ))
    .await
    {
        Ok(_) => panic!("a store opened on a closed port"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.starts_with("PostgreSQL at postgres://ana@127.0.0.1:1/ledger, while connecting: error connecting to server"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}
