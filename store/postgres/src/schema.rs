//! The schema's versions and how a database is brought to the newest (docs/postgres.md,
//! "Migrations"). Each migration runs once, in a transaction, under an advisory lock so
//! that processes starting together do not race; its version is recorded with it.

use tokio_postgres::Client;

use crate::error::PgError;

/// Every migration, in order: version, what it adds, its SQL. A database runs every
/// version above the highest it holds.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "streams, events, blobs, snapshots, digests, disclosures",
        include_str!("../migrations/0001_store.sql"),
    ),
    (
        2,
        "claims that keep a drive asked for while a run is held",
        include_str!("../migrations/0002_claims.sql"),
    ),
    (
        3,
        "kill switches and their history, verifier keys, heads checkpoints",
        include_str!("../migrations/0003_governance.sql"),
    ),
    (
        4,
        "API tokens, sessions and request log",
        include_str!("../migrations/0004_api.sql"),
    ),
    (
        5,
        "runs waiting on timers, claimable when due",
        include_str!("../migrations/0005_timers.sql"),
    ),
    (
        6,
        "schedules and their firings",
        include_str!("../migrations/0006_schedules.sql"),
    ),
    (
        7,
        "runs claimed by priority",
        include_str!("../migrations/0007_priority.sql"),
    ),
];

/// The schema version this docket reads and writes.
pub const SCHEMA_VERSION: i32 = 7;

/// The advisory lock key migrations hold ("docket" in ASCII).
const MIGRATION_LOCK: i64 = 0x646f_636b_6574;

/// Where a database's schema stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaState {
    /// No docket tables.
    Empty,
    /// Migrated up to this version.
    At(i32),
}

/// The schema version the database holds.
pub(crate) async fn state(client: &Client, database: &str) -> Result<SchemaState, PgError> {
    let exists = client
        .query_one("SELECT to_regclass('docket_schema') IS NOT NULL", &[])
        .await
        .map_err(db(database, "reading the schema version"))?;
    if !exists.get::<_, bool>(0) {
        return Ok(SchemaState::Empty);
    }
    let row = client
        .query_one("SELECT coalesce(max(version), 0) FROM docket_schema", &[])
        .await
        .map_err(db(database, "reading the schema version"))?;
    Ok(SchemaState::At(row.get(0)))
}

/// Applies the migrations the database lacks; the versions applied.
pub(crate) async fn migrate(client: &mut Client, database: &str) -> Result<Vec<i32>, PgError> {
    let doing = "migrating the schema";
    let tx = client.transaction().await.map_err(db(database, doing))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(db(database, doing))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS docket_schema (
             version    integer     PRIMARY KEY,
             about      text        NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(db(database, doing))?;
    let row = tx
        .query_one("SELECT coalesce(max(version), 0) FROM docket_schema", &[])
        .await
        .map_err(db(database, doing))?;
    let found: i32 = row.get(0);
    if found > SCHEMA_VERSION {
        return Err(PgError::SchemaNewer {
            database: database.to_owned(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    let mut applied = Vec::new();
    for (version, about, sql) in MIGRATIONS.iter().filter(|(v, _, _)| *v > found) {
        let doing = format!("applying schema migration {version} ({about})");
        tx.batch_execute(sql).await.map_err(db(database, &doing))?;
        tx.execute(
            "INSERT INTO docket_schema (version, about) VALUES ($1, $2)",
            &[version, about],
        )
        .await
        .map_err(db(database, &doing))?;
        applied.push(*version);
    }
    tx.commit().await.map_err(db(database, doing))?;
    Ok(applied)
}

/// Maps a driver error to one naming the database and what was being done
/// ([`crate::error::classify`]).
pub(crate) fn db<'a>(
    database: &'a str,
    doing: &'a str,
) -> impl FnOnce(tokio_postgres::Error) -> PgError + 'a {
    move |source| crate::error::classify(database, doing, source)
}
