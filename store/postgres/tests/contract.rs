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
