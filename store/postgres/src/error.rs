//! What can go wrong with the database, in words that name the database (never its
//! password) and what docket was doing.

use docket_store::{ChainBreak, StoreError, StreamId};

/// A failure of the PostgreSQL backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The URL given to `--store` (or `DOCKET_STORE`) does not parse.
    #[error(
        "the store URL is not a PostgreSQL connection string ({why}); expected postgres://USER@HOST[:PORT]/DATABASE"
    )]
    BadUrl { why: String },

    /// A statement or connection failed.
    #[error("PostgreSQL at {database}, while {doing}: {}", describe(source))]
    Database {
        database: String,
        doing: String,
        #[source]
        source: tokio_postgres::Error,
    },

    /// No connection could be had from the pool.
    #[error("PostgreSQL at {database}: no connection while {doing}: {why}")]
    NoConnection {
        database: String,
        doing: String,
        why: String,
    },

    /// The database was migrated by a newer docket than this one.
    #[error(
        "PostgreSQL at {database} holds docket schema version {found}; this docket knows versions up to {known}: upgrade docket"
    )]
    SchemaNewer {
        database: String,
        found: i32,
        known: i32,
    },

    /// The database holds an older schema than this docket needs.
    #[error(
        "PostgreSQL at {database} holds docket schema version {found}; this docket needs version {needed}: run `docket store migrate --store URL`"
    )]
    SchemaOlder {
        database: String,
        found: i32,
        needed: i32,
    },

    /// The URL's CA file (`sslrootcert`) cannot be used.
    #[error("PostgreSQL at {database}: {source}")]
    Tls {
        database: String,
        #[source]
        source: docket_tls::TlsSetupError,
    },

    /// The URL carries a password for a server across a network, without TLS.
    #[error(
        "PostgreSQL at {database}: the URL carries a password, and the connection would not be encrypted: add sslmode=require to the URL (with sslrootcert=CA.pem for a private CA), or sslmode=disable to send it unencrypted knowingly"
    )]
    PlainPassword { database: String },

    /// An event read back fails its checks (a row was changed outside docket).
    #[error("PostgreSQL at {database}: stream {stream}: {break_}")]
    Damaged {
        database: String,
        stream: StreamId,
        break_: ChainBreak,
    },

    /// A row holds something that is not what docket wrote there.
    #[error("PostgreSQL at {database}: {what}")]
    BadRow { database: String, what: String },
}

impl From<PgError> for StoreError {
    fn from(e: PgError) -> StoreError {
        StoreError::Backend {
            source: Box::new(e),
        }
    }
}

/// The database's own words (its message, detail and hint, with the SQLSTATE), or the
/// driver's when the server said nothing (a lost connection).
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(tls) = docket_tls::handshake_failure(e) {
        return docket_tls::HandshakeError(tls.clone()).to_string();
    }
    match e.as_db_error() {
        Some(db) => {
            let mut out = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                out.push_str("; ");
                out.push_str(detail);
            }
            if let Some(hint) = db.hint() {
                out.push_str("; hint: ");
                out.push_str(hint);
            }
            out
        }
        None => {
            let mut out = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                out.push_str(": ");
                out.push_str(&c.to_string());
                cause = c.source();
            }
            out
        }
    }
}
