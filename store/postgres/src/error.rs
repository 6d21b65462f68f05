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

    /// The database holds no docket schema, and the store was opened only to read: a read
    /// never creates tables.
    #[error(
        "PostgreSQL at {database} holds no docket tables: it is not a docket store yet (nothing was created, since this only reads)"
    )]
    NoSchema { database: String },

    /// A statement ran longer than the store's statement timeout and the server cancelled
    /// it; nothing it would have written was committed.
    #[error(
        "PostgreSQL at {database}, while {doing}: the statement ran longer than the statement timeout and the server cancelled it, so nothing of it was committed (the store URL's statement_timeout, default {default_s} s: a lock held by another session or an overloaded server; raise it with ?statement_timeout=120s)",
        default_s = crate::tls::DEFAULT_STATEMENT_TIMEOUT.as_secs()
    )]
    StatementTimeout { database: String, doing: String },

    /// The server lacks a resource (SQLSTATE class 53: disk, memory, connections, a
    /// configured limit); nothing of the failed statement was committed.
    #[error(
        "PostgreSQL at {database}, while {doing}: {} (SQLSTATE {code}: {message}); nothing of it was committed",
        resource_words(code)
    )]
    Resources {
        database: String,
        doing: String,
        code: String,
        message: String,
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

/// What a SQLSTATE of class 53 (insufficient resources) means, in an operator's words.
pub(crate) fn resource_words(code: &str) -> &'static str {
    match code {
        "53100" => "the database server's disk is full",
        "53200" => "the database server is out of memory",
        "53300" => "the database server has no connection left for docket (too many connections)",
        "53400" => "the statement went past a limit the database server is configured with",
        _ => "the database server lacks the resources to carry out the statement",
    }
}

/// A driver error as what it means to docket: a statement cancelled by the statement
/// timeout and a lack of resources are named as such; anything else is the server's (or
/// the driver's) own words.
pub(crate) fn classify(database: &str, doing: &str, source: tokio_postgres::Error) -> PgError {
    if let Some(db) = source.as_db_error() {
        let code = db.code().code();
        // 57014 is also a cancel asked for by a person (pg_cancel_backend); only the
        // timeout's is named as the timeout.
        if code == "57014" && db.message().contains("statement timeout") {
            return PgError::StatementTimeout {
                database: database.to_owned(),
                doing: doing.to_owned(),
            };
        }
        if code.starts_with("53") {
            return PgError::Resources {
                database: database.to_owned(),
                doing: doing.to_owned(),
                code: code.to_owned(),
                message: db.message().to_owned(),
            };
        }
    }
    PgError::Database {
        database: database.to_owned(),
        doing: doing.to_owned(),
        source,
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

#[cfg(test)]
mod tests {
    use super::PgError;

    #[test]
    fn a_lack_of_resources_is_named_with_the_database_and_what_was_lost() {
        let full = |code: &str, message: &str| {
            PgError::Resources {
                database: "postgres://docket@db.internal:5432/ledger".to_owned(),
                doing: "appending to stream run-1".to_owned(),
                code: code.to_owned(),
                message: message.to_owned(),
            }
            .to_string()
        };
        assert_eq!(
            full(
                "53100",
                "could not extend file \"base/16384/16390\": No space left on device"
            ),
            "PostgreSQL at postgres://docket@db.internal:5432/ledger, while appending to stream run-1: the database server's disk is full (SQLSTATE 53100: could not extend file \"base/16384/16390\": No space left on device); nothing of it was committed"
        );
        assert_eq!(
            full("53200", "out of memory"),
            "PostgreSQL at postgres://docket@db.internal:5432/ledger, while appending to stream run-1: the database server is out of memory (SQLSTATE 53200: out of memory); nothing of it was committed"
        );
        assert_eq!(
            full("53300", "sorry, too many clients already"),
            "PostgreSQL at postgres://docket@db.internal:5432/ledger, while appending to stream run-1: the database server has no connection left for docket (too many connections) (SQLSTATE 53300: sorry, too many clients already); nothing of it was committed"
        );
        assert_eq!(
            full("53400", "temporary file size exceeds temp_file_limit (1kB)"),
            "PostgreSQL at postgres://docket@db.internal:5432/ledger, while appending to stream run-1: the statement went past a limit the database server is configured with (SQLSTATE 53400: temporary file size exceeds temp_file_limit (1kB)); nothing of it was committed"
        );
        assert_eq!(
            full("53000", "insufficient resources"),
            "PostgreSQL at postgres://docket@db.internal:5432/ledger, while appending to stream run-1: the database server lacks the resources to carry out the statement (SQLSTATE 53000: insufficient resources); nothing of it was committed"
        );
    }
}
