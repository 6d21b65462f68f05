//! What `docket serve` keeps outside the event log when its store is PostgreSQL
//! (docs/postgres.md, "Serving"): API tokens (their SHA-256 only), browser
//! sessions and the request log, in the tables of `migrations/0004_api.sql`. Keeping them
//! in the database lets several API servers over one database behind a load balancer
//! accept the same tokens and sessions and write one request log; the SQL stays here, the
//! serve crate calls these typed functions.

use std::time::Duration;

use crate::error::PgError;
use crate::store::PostgresStore;

/// The advisory lock session opens take in turn ("dkt-sess" in ASCII).
const SESSION_LOCK: i64 = 0x646b_742d_7365_7373;

/// A token as the database keeps it: never its text, only the text's SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiTokenRow {
    /// Its name: who acted, in the runs' events and the request log.
    pub name: String,
    /// Its role, as `docket token create --role` names it.
    pub role: String,
    /// SHA-256 of the token's text, hex.
    pub sha256: String,
    /// When it was made, seconds since the Unix epoch.
    pub created_s: u64,
}

/// One answered request, as the request log keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiRequestRow {
    /// When it was answered, milliseconds since the Unix epoch (the server's clock).
    pub at_ms: u64,
    /// The token's name.
    pub by: String,
    /// The token's role.
    pub role: String,
    pub method: String,
    pub path: String,
    pub status: u16,
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl PostgresStore {
    /// Records a new token; `false` if a token of that name exists already (the caller
    /// says so in its own words).
    pub async fn api_token_create(&self, token: &ApiTokenRow) -> Result<bool, PgError> {
        let doing = format!("creating API token {}", token.name);
        let client = self.client(&doing).await?;
        let n = client
            .execute(
                "INSERT INTO docket_api_tokens (name, role, sha256, created_s)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
                &[
                    &token.name,
                    &token.role,
                    &token.sha256,
                    &to_i64(token.created_s),
                ],
            )
            .await
            .map_err(self.db(&doing))?;
        Ok(n == 1)
    }

    /// Every token, by name.
    pub async fn api_tokens(&self) -> Result<Vec<ApiTokenRow>, PgError> {
        let doing = "listing API tokens";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                "SELECT name, role, sha256, created_s FROM docket_api_tokens ORDER BY name",
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(rows
            .iter()
            .map(|r| ApiTokenRow {
                name: r.get(0),
                role: r.get(1),
                sha256: r.get(2),
                created_s: to_u64(r.get(3)),
            })
            .collect())
    }

    /// Removes the token `name` and every session opened with it; the token removed, or
    /// `None` if there was none of that name.
    pub async fn api_token_revoke(&self, name: &str) -> Result<Option<ApiTokenRow>, PgError> {
        let doing = format!("revoking API token {name}");
        let client = self.client(&doing).await?;
        let row = client
            .query_opt(
                "DELETE FROM docket_api_tokens WHERE name = $1
                 RETURNING name, role, sha256, created_s",
                &[&name],
            )
            .await
            .map_err(self.db(&doing))?;
        Ok(row.map(|r| ApiTokenRow {
            name: r.get(0),
            role: r.get(1),
            sha256: r.get(2),
            created_s: to_u64(r.get(3)),
        }))
    }

    /// The token whose text hashes to `sha256`, if any. The lookup is by the hash's
    /// index: the hash of a secret, not the secret, so its timing tells nothing useful.
    pub async fn api_token_by_hash(&self, sha256: &str) -> Result<Option<ApiTokenRow>, PgError> {
        let doing = "checking an API token";
        let client = self.client(doing).await?;
        let row = client
            .query_opt(
                "SELECT name, role, sha256, created_s FROM docket_api_tokens WHERE sha256 = $1",
                &[&sha256],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(row.map(|r| ApiTokenRow {
            name: r.get(0),
            role: r.get(1),
            sha256: r.get(2),
            created_s: to_u64(r.get(3)),
        }))
    }

    /// Records a session for `ttl` by the database's clock, as the in-memory sessions of a
    /// data directory's server do: the lapsed ones are dropped first, and at most `max`
    /// are kept, the ones that lapse soonest going first. Opens take one advisory lock in
    /// turn, so servers opening sessions together keep the limit. `false` if the token was
    /// revoked meanwhile (nothing is recorded).
    pub async fn api_session_open(
        &self,
        id_sha256: &str,
        token_sha256: &str,
        ttl: Duration,
        max: usize,
    ) -> Result<bool, PgError> {
        let doing = "opening a browser session";
        let mut client = self.client(doing).await?;
        let tx = client.transaction().await.map_err(self.db(doing))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SESSION_LOCK])
            .await
            .map_err(self.db(doing))?;
        tx.execute(
            "DELETE FROM docket_api_sessions WHERE expires_at <= now()",
            &[],
        )
        .await
        .map_err(self.db(doing))?;
        // Room for the new one: the newest `max - 1` stay.
        let keep = i64::try_from(max.saturating_sub(1)).unwrap_or(i64::MAX);
        tx.execute(
            "DELETE FROM docket_api_sessions WHERE id_sha256 IN (
                 SELECT id_sha256 FROM docket_api_sessions
                 ORDER BY expires_at DESC, id_sha256 OFFSET $1)",
            &[&keep],
        )
        .await
        .map_err(self.db(doing))?;
        let n = tx
            .execute(
                "INSERT INTO docket_api_sessions (id_sha256, token_sha256, expires_at)
                 SELECT $1, sha256, now() + make_interval(secs => $3)
                 FROM docket_api_tokens WHERE sha256 = $2",
                &[&id_sha256, &token_sha256, &ttl.as_secs_f64()],
            )
            .await
            .map_err(self.db(doing))?;
        tx.commit().await.map_err(self.db(doing))?;
        Ok(n == 1)
    }

    /// How many sessions the database holds, lapsed or not (until the next open drops
    /// the lapsed ones).
    pub async fn api_session_count(&self) -> Result<u64, PgError> {
        let doing = "counting browser sessions";
        let client = self.client(doing).await?;
        let row = client
            .query_one("SELECT count(*) FROM docket_api_sessions", &[])
            .await
            .map_err(self.db(doing))?;
        Ok(to_u64(row.get(0)))
    }

    /// The token of a live session, if the session exists and has not lapsed.
    pub async fn api_session_token(&self, id_sha256: &str) -> Result<Option<ApiTokenRow>, PgError> {
        let doing = "checking a browser session";
        let client = self.client(doing).await?;
        let row = client
            .query_opt(
                "SELECT t.name, t.role, t.sha256, t.created_s
                 FROM docket_api_sessions s JOIN docket_api_tokens t ON t.sha256 = s.token_sha256
                 WHERE s.id_sha256 = $1 AND s.expires_at > now()",
                &[&id_sha256],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(row.map(|r| ApiTokenRow {
            name: r.get(0),
            role: r.get(1),
            sha256: r.get(2),
            created_s: to_u64(r.get(3)),
        }))
    }

    /// Ends a session (logging out).
    pub async fn api_session_close(&self, id_sha256: &str) -> Result<(), PgError> {
        let doing = "closing a browser session";
        let client = self.client(doing).await?;
        client
            .execute(
                "DELETE FROM docket_api_sessions WHERE id_sha256 = $1",
                &[&id_sha256],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(())
    }

    /// Appends one answered request to the request log.
    pub async fn api_request_record(&self, request: &ApiRequestRow) -> Result<(), PgError> {
        let doing = "recording an API request";
        let client = self.client(doing).await?;
        client
            .execute(
                "INSERT INTO docket_api_requests (at_ms, by_name, role, method, path, status)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &to_i64(request.at_ms),
                    &request.by,
                    &request.role,
                    &request.method,
                    &request.path,
                    &i32::from(request.status),
                ],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(())
    }

    /// The request log, oldest first, from every server over this database.
    pub async fn api_requests(&self) -> Result<Vec<ApiRequestRow>, PgError> {
        let doing = "reading the API request log";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                "SELECT at_ms, by_name, role, method, path, status
                 FROM docket_api_requests ORDER BY id",
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(rows
            .iter()
            .map(|r| ApiRequestRow {
                at_ms: to_u64(r.get(0)),
                by: r.get(1),
                role: r.get(2),
                method: r.get(3),
                path: r.get(4),
                status: u16::try_from(r.get::<_, i32>(5)).unwrap_or(0),
            })
            .collect())
    }
}
