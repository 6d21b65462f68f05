//! docket's event log on PostgreSQL (docs/postgres.md): the [`EventStore`] that many
//! docket processes on many machines share.
//!
//! Every record, chain hash and Merkle leaf is computed by docket ([`docket_store::seal_events`])
//! exactly as the embedded log computes them, so a run's hashes, trees and exports do not
//! depend on its backend; the database keeps them, orders appends and makes them durable.
//! Appends from all the process's runs are committed together, one transaction per group
//! (as the embedded writer shares one `fdatasync`), each checked against its stream's
//! version under that stream's row lock. Tails are woken by `LISTEN/NOTIFY` and poll as
//! well, so a lost notification delays an event by at most the poll interval.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod api;
mod append;
#[cfg(feature = "test-cluster")]
mod cluster;
mod error;
mod governance;
mod leases;
mod listen;
mod read;
mod schedules;
mod schema;
mod store;
mod tls;

use std::time::Duration;

pub use api::{ApiRequestRow, ApiTokenRow};
#[cfg(feature = "test-cluster")]
pub use cluster::{TestCluster, TestDatabase};
pub use docket_store::EventStore;
pub use error::PgError;
pub use governance::{EngagedSwitch, HeadsCheckpointRow, KeyRow, SwitchFlip};
pub use leases::{DEFAULT_PRIORITY_AGING, Holder, Lease, LeaseRow, RunPriority, WorkerRow};
pub use schedules::ScheduleRow;
pub use schema::{SCHEMA_VERSION, SchemaState};
pub use store::PostgresStore;
pub use tls::DEFAULT_STATEMENT_TIMEOUT;

/// How a PostgreSQL store is reached.
#[derive(Clone, Debug)]
pub struct PostgresConfig {
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?options]`, or the key=value form
    /// libpq accepts; a `host=/path` names a unix socket directory.
    pub url: String,
    /// Connections kept for appends, reads and the rest (one more listens for appends).
    pub connections: usize,
    /// How often the heads of the streams this process tails are read, in one statement,
    /// in case a notification was lost; and how long a worker waits for a wake-up before
    /// it looks for runnable runs anyway.
    pub poll_interval: Duration,
    /// Opened only to read: an empty database is refused ([`PgError::NoSchema`]) rather
    /// than given docket's tables, every transaction is read-only on the server's side
    /// (`default_transaction_read_only`), and the caches a read would otherwise refresh
    /// (snapshots, the run list's digests) are left as they are.
    pub read_only: bool,
}

impl PostgresConfig {
    pub fn new(url: impl Into<String>) -> PostgresConfig {
        PostgresConfig {
            url: url.into(),
            connections: 8,
            poll_interval: Duration::from_millis(500),
            read_only: false,
        }
    }
}

/// Whether `store` names a PostgreSQL database rather than a data directory.
#[must_use]
pub fn is_postgres_url(store: &str) -> bool {
    store.starts_with("postgres://") || store.starts_with("postgresql://")
}
