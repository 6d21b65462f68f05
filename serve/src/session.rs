//! Browser sessions (docs/api.md#sessions-for-the-browser): a browser's `EventSource` and
//! plain links (an export) cannot send an `Authorization` header, so `POST /api/session`
//! exchanges the bearer token for an `HttpOnly`, `SameSite=Strict` cookie naming a
//! session. Only the routes the route table marks [`crate::routes::Route::session`] (reads
//! a browser makes without headers) accept it; every other route still needs the bearer
//! token, so the cookie can never change anything.
//!
//! A session keeps the SHA-256 of the token it was made from, not the token, and is
//! checked against the token file on every request like a bearer token: revoking the
//! token ends its sessions at once. Sessions live in the server's memory for
//! [`SESSION_TTL`] and end with it; the UI makes a new one whenever the stream is refused.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::AppState;
use crate::error::ApiError;
use crate::tokens::{self, Principal};

/// The cookie's name.
pub const COOKIE: &str = "docket_session";

/// How long a session lasts after it is made.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);

/// At most this many sessions are kept; the oldest go first (a client looping on
/// `POST /api/session` cannot grow the server's memory without bound).
const MAX_SESSIONS: usize = 10_000;

struct Session {
    token_sha256: String,
    expires: Instant,
}

/// The live sessions, by id.
#[derive(Default)]
pub(crate) struct Sessions {
    live: Mutex<BTreeMap<String, Session>>,
}

impl Sessions {
    fn open(&self, token_sha256: String) -> Result<String, ApiError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| {
            ApiError::internal(format!(
                "cannot make a session: no randomness from the operating system ({e})"
            ))
        })?;
        let id: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let now = Instant::now();
        let mut live = self
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        live.retain(|_, s| s.expires > now);
        while live.len() >= MAX_SESSIONS {
            let oldest = live
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => live.remove(&id),
                None => break,
            };
        }
        live.insert(
            id.clone(),
            Session {
                token_sha256,
                expires: now + SESSION_TTL,
            },
        );
        Ok(id)
    }

    fn close(&self, id: &str) {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
    }

    /// Who the session cookie of `headers` stands for: `None` without a cookie, an error
    /// when the session is unknown, expired, or its token was revoked.
    pub(crate) fn principal(
        &self,
        data: &Path,
        headers: &HeaderMap,
    ) -> Option<Result<Principal, ApiError>> {
        let id = cookie(headers)?;
        let hash = {
            let live = self
                .live
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            live.get(&id)
                .filter(|s| s.expires > Instant::now())
                .map(|s| s.token_sha256.clone())
        };
        let unknown = || {
            ApiError::unauthenticated(
                "the session has expired or is unknown: sign in again (POST /api/session with the bearer token)",
            )
            .at("cookie.docket_session")
        };
        let Some(hash) = hash else {
            return Some(Err(unknown()));
        };
        Some(match tokens::authenticate_hash(data, &hash) {
            Ok(Some(p)) => Ok(p),
            Ok(None) => Err(ApiError::unauthenticated(
                "the token this session was made from has been revoked",
            )
            .at("cookie.docket_session")),
            Err(e) => Err(ApiError::internal(e.to_string())),
        })
    }
}

/// The session id of the request's `Cookie` header, if it has one.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_owned())
}

fn set_cookie(value: &str, max_age: u64) -> Result<HeaderValue, ApiError> {
    // Path=/api: sent to the API only; HttpOnly: no script reads it; SameSite=Strict: no
    // other site's page makes the browser send it.
    HeaderValue::from_str(&format!(
        "{COOKIE}={value}; Path=/api; Max-Age={max_age}; HttpOnly; SameSite=Strict"
    ))
    .map_err(|e| ApiError::internal(format!("cannot set the session cookie: {e}")))
}

/// `POST /api/session`: the bearer token (checked by the router) exchanged for a session
/// cookie; answers who signed in.
pub(crate) async fn open(
    State(state): State<std::sync::Arc<AppState>>,
    Extension(who): Extension<Principal>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::unauthenticated("a session is made from a bearer token")
                .at("header.authorization")
        })?;
    let id = state.sessions.open(tokens::token_hash(token))?;
    let ttl = SESSION_TTL.as_secs();
    Ok((
        [(header::SET_COOKIE, set_cookie(&id, ttl)?)],
        Json(json!({ "name": who.name, "role": who.role, "expires_in_s": ttl })),
    )
        .into_response())
}

/// `DELETE /api/session`: forgets the request's session and clears the cookie.
pub(crate) async fn close(
    State(state): State<std::sync::Arc<AppState>>,
    Extension(who): Extension<Principal>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if let Some(id) = cookie(&headers) {
        state.sessions.close(&id);
    }
    Ok((
        [(header::SET_COOKIE, set_cookie("", 0)?)],
        Json(json!({ "name": who.name, "signed_out": true })),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_id_is_read_from_among_other_cookies() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; docket_session=abc ; b=2"),
        );
        assert_eq!(cookie(&headers).as_deref(), Some("abc"));
        assert_eq!(cookie(&HeaderMap::new()), None);
    }

    #[test]
    fn a_closed_or_unknown_session_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = tokens::create(dir.path(), "ana", crate::Role::Approver, 1).expect("token");
        let sessions = Sessions::default();
        let id = sessions.open(tokens::token_hash(&token)).expect("session");
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("{COOKIE}={id}")).expect("header"),
        );
        let who = sessions.principal(dir.path(), &headers).expect("a cookie");
        assert_eq!(who.expect("known").name, "ana");
        tokens::revoke(dir.path(), "ana").expect("revoke");
        assert!(
            sessions
                .principal(dir.path(), &headers)
                .expect("a cookie")
                .is_err()
        );
        sessions.close(&id);
        let refused = sessions.principal(dir.path(), &headers).expect("a cookie");
        assert_eq!(refused.expect_err("closed").status.as_u16(), 401);
    }
}
