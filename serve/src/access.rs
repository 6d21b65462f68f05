//! Who may call the API, and what they did: the one place that chooses where the API's
//! tokens, browser sessions and request log live (docs/api.md#over-postgresql).
//!
//! * Over a data directory: the token file `<data>/api/tokens.json` ([`tokens`]), the
//!   sessions in this server's memory ([`session::Sessions`]) and the request log
//!   `<data>/api/requests.jsonl` ([`requests::RequestLog`]), as ever.
//! * Over a PostgreSQL store: the tables `docket_api_tokens`, `docket_api_sessions` and
//!   `docket_api_requests`, so that every server over the database accepts the same tokens
//!   and sessions and writes one request log: a server keeps nothing of its own, and a
//!   load balancer may send each request to any of them. A session's expiry and the
//!   sessions' limit are kept by the database's clock; revoking a token ends its sessions
//!   on every server.
//!
//! The database is only ever awaited: nothing here blocks the API's runtime. A token store
//! that cannot be read refuses the request ([`AccessError::answer`]); it never lets one
//! through.

use std::path::{Path, PathBuf};

use docket_app::Store;
use docket_store_postgres::{ApiRequestRow, PgError, PostgresStore};
use serde_json::{Value, json};

use crate::ServeError;
use crate::error::ApiError;
use crate::requests::RequestLog;
use crate::session::{self, SESSION_TTL};
use crate::tokens::{self, Principal, TokenError, TokenStore};

/// Why the API's tokens, sessions or request log cannot be used. The messages name what
/// was being done and where (a file's path, the database without its password).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AccessError {
    /// The tokens cannot be read.
    #[error("cannot check the API's tokens in {place}: {source}")]
    Tokens {
        /// The token file, or the database.
        place: String,
        /// Why.
        #[source]
        source: TokenError,
    },
    /// The database's sessions or request log cannot be read or written.
    #[error("cannot {doing}: {source}")]
    Database {
        /// What was being done.
        doing: &'static str,
        /// The database's error (naming the database, never its password).
        #[source]
        source: PgError,
    },
    /// The request log's file cannot be read.
    #[error("cannot read the API's request log {path}: {source}")]
    RequestLog {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The operating system gave no random bytes for a session id.
    #[error("cannot make a session: no randomness from the operating system ({0})")]
    Random(String),
}

impl AccessError {
    /// The answer to a request that met this error: 503 (try again) when the database
    /// cannot be reached or is overloaded, 500 otherwise. Never a way through.
    pub(crate) fn answer(&self) -> ApiError {
        let pg = match self {
            Self::Tokens {
                source: TokenError::Database(e),
                ..
            }
            | Self::Database { source: e, .. } => Some(e),
            _ => None,
        };
        match pg {
            Some(
                PgError::NoConnection { .. }
                | PgError::Database { .. }
                | PgError::StatementTimeout { .. }
                | PgError::Resources { .. },
            ) => ApiError::unavailable(self.to_string()).retry_after(1),
            _ => ApiError::internal(self.to_string()),
        }
    }
}

/// What a session cookie stands for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SessionCheck {
    /// A live session, of this token.
    Live(Principal),
    /// No such session, or it has lapsed (over a database, also one whose token was
    /// revoked: its sessions went with it).
    Unknown,
    /// The session is live but its token was revoked.
    Revoked,
}

/// Where the API's tokens, sessions and request log are.
pub(crate) struct Access {
    tokens: TokenStore,
    keep: Keep,
}

enum Keep {
    /// A data directory's server: sessions in memory, the request log a file.
    Files {
        sessions: session::Sessions,
        log: RequestLog,
    },
    /// A PostgreSQL store's server: both in the database.
    Database(PostgresStore),
}

impl Access {
    /// The API's tokens, sessions and request log for a server over `store`, whose data
    /// directory is `data`: the database's tables when the store is PostgreSQL (nothing is
    /// created in `data`), else `data`'s files (the request log is opened here).
    ///
    /// # Errors
    /// [`ServeError::RequestLog`]: the request log's file cannot be opened.
    pub(crate) fn open(store: &Store, data: &Path) -> Result<Self, ServeError> {
        Ok(match store.postgres() {
            Some(pg) => Self {
                tokens: TokenStore::Database(pg.clone()),
                keep: Keep::Database(pg.clone()),
            },
            None => Self {
                tokens: TokenStore::File(data.to_owned()),
                keep: Keep::Files {
                    sessions: session::Sessions::default(),
                    log: RequestLog::open(data)?,
                },
            },
        })
    }

    /// Who a bearer token stands for, if it is kept (not revoked).
    ///
    /// # Errors
    /// [`AccessError::Tokens`].
    pub(crate) async fn authenticate(&self, token: &str) -> Result<Option<Principal>, AccessError> {
        self.by_hash(&tokens::token_hash(token)).await
    }

    async fn by_hash(&self, hash: &str) -> Result<Option<Principal>, AccessError> {
        self.tokens
            .authenticate_hash(hash)
            .await
            .map_err(|source| AccessError::Tokens {
                place: self.tokens.place(),
                source,
            })
    }

    /// Opens a session for `token` (already authenticated) for [`SESSION_TTL`]: its id,
    /// the cookie's value, or `None` when the token was revoked meanwhile.
    ///
    /// # Errors
    /// [`AccessError`]: no randomness, the database unusable.
    pub(crate) async fn open_session(&self, token: &str) -> Result<Option<String>, AccessError> {
        let id = session::new_id().map_err(AccessError::Random)?;
        let token_sha256 = tokens::token_hash(token);
        match &self.keep {
            Keep::Files { sessions, .. } => {
                sessions.open(id.clone(), token_sha256);
                Ok(Some(id))
            }
            Keep::Database(pg) => {
                let opened = pg
                    .api_session_open(
                        &tokens::token_hash(&id),
                        &token_sha256,
                        SESSION_TTL,
                        session::MAX_SESSIONS,
                    )
                    .await
                    .map_err(|source| AccessError::Database {
                        doing: "open a browser session",
                        source,
                    })?;
                Ok(opened.then_some(id))
            }
        }
    }

    /// What the session `id` stands for.
    ///
    /// # Errors
    /// [`AccessError`]: the tokens or the database unreadable.
    pub(crate) async fn session(&self, id: &str) -> Result<SessionCheck, AccessError> {
        match &self.keep {
            Keep::Files { sessions, .. } => {
                let Some(hash) = sessions.token_of(id) else {
                    return Ok(SessionCheck::Unknown);
                };
                Ok(match self.by_hash(&hash).await? {
                    Some(p) => SessionCheck::Live(p),
                    None => SessionCheck::Revoked,
                })
            }
            Keep::Database(pg) => {
                let row = pg
                    .api_session_token(&tokens::token_hash(id))
                    .await
                    .map_err(|source| AccessError::Database {
                        doing: "check a browser session",
                        source,
                    })?;
                match row {
                    Some(row) => tokens::principal_of(pg, row)
                        .map(SessionCheck::Live)
                        .map_err(|source| AccessError::Tokens {
                            place: self.tokens.place(),
                            source,
                        }),
                    None => Ok(SessionCheck::Unknown),
                }
            }
        }
    }

    /// Ends the session `id` (signing out), on every server over a database.
    ///
    /// # Errors
    /// [`AccessError::Database`].
    pub(crate) async fn close_session(&self, id: &str) -> Result<(), AccessError> {
        match &self.keep {
            Keep::Files { sessions, .. } => {
                sessions.close(id);
                Ok(())
            }
            Keep::Database(pg) => {
                pg.api_session_close(&tokens::token_hash(id))
                    .await
                    .map_err(|source| AccessError::Database {
                        doing: "close a browser session",
                        source,
                    })
            }
        }
    }

    /// Records an answered request in the request log; a failure is said in the server's
    /// trace (the request was answered already).
    pub(crate) async fn record(&self, who: &Principal, method: &str, path: &str, status: u16) {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        match &self.keep {
            Keep::Files { log, .. } => log.record(who, at_ms, method, path, status),
            Keep::Database(pg) => {
                let row = ApiRequestRow {
                    at_ms,
                    by: who.name.clone(),
                    role: who.role.as_str().to_owned(),
                    method: method.to_owned(),
                    path: path.to_owned(),
                    status,
                };
                if let Err(e) = pg.api_request_record(&row).await {
                    tracing::error!(
                        "cannot record a request ({method} {path} by {}): {e}",
                        who.name
                    );
                }
            }
        }
    }

    /// The request log, oldest first: one JSON object per request (`at_ms`, `by`, `role`,
    /// `method`, `path`, `status`).
    ///
    /// # Errors
    /// [`AccessError`]: the file or the database unreadable.
    pub(crate) async fn requests(&self) -> Result<Vec<Value>, AccessError> {
        match &self.keep {
            Keep::Files { log, .. } => {
                let path = log.path().to_owned();
                let text = tokio::fs::read_to_string(&path)
                    .await
                    .map_err(|source| AccessError::RequestLog { path, source })?;
                Ok(text
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect())
            }
            Keep::Database(pg) => Ok(pg
                .api_requests()
                .await
                .map_err(|source| AccessError::Database {
                    doing: "read the API's request log",
                    source,
                })?
                .into_iter()
                .map(|r| {
                    json!({
                        "at_ms": r.at_ms, "by": r.by, "role": r.role,
                        "method": r.method, "path": r.path, "status": r.status,
                    })
                })
                .collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    /// A data directory's tokens, sessions and request log: the file, the memory, the file.
    fn files(data: &Path) -> Access {
        Access {
            tokens: TokenStore::File(data.to_owned()),
            keep: Keep::Files {
                sessions: session::Sessions::default(),
                log: RequestLog::open(data).expect("the request log"),
            },
        }
    }

    #[tokio::test]
    async fn over_a_data_directory_a_revoked_token_ends_its_sessions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let access = files(dir.path());
        let token = tokens::create(dir.path(), "ana", Role::Approver, 1).expect("token");
        let ana = Principal {
            name: "ana".into(),
            role: Role::Approver,
        };
        assert_eq!(
            access.authenticate(&token).await.expect("read"),
            Some(ana.clone())
        );
        assert_eq!(access.authenticate("dkt_0").await.expect("read"), None);
        let id = access
            .open_session(&token)
            .await
            .expect("opened")
            .expect("a live token");
        assert_eq!(
            access.session(&id).await.expect("read"),
            SessionCheck::Live(ana.clone())
        );
        tokens::revoke(dir.path(), "ana").expect("revoke");
        assert_eq!(access.authenticate(&token).await.expect("read"), None);
        assert_eq!(
            access.session(&id).await.expect("read"),
            SessionCheck::Revoked
        );
        access.close_session(&id).await.expect("closed");
        assert_eq!(
            access.session(&id).await.expect("read"),
            SessionCheck::Unknown
        );

        access.record(&ana, "POST", "/api/runs", 202).await;
        let logged = access.requests().await.expect("the log");
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert_eq!(
            (&logged[0]["by"], &logged[0]["path"], &logged[0]["status"]),
            (&json!("ana"), &json!("/api/runs"), &json!(202))
        );
    }

    #[tokio::test]
    async fn an_unreadable_token_file_refuses_the_request() {
        let dir = tempfile::tempdir().expect("tempdir");
        let access = files(dir.path());
        std::fs::write(tokens::tokens_path(dir.path()), "not json").expect("write");
        let e = access.authenticate("dkt_0").await.expect_err("unreadable");
        let answer = e.answer();
        assert_eq!(answer.status.as_u16(), 500);
        assert!(
            answer
                .message
                .starts_with("cannot check the API's tokens in ")
                && answer.message.contains("tokens.json"),
            "{}",
            answer.message
        );
    }
}
