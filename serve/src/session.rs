//! Browser sessions (docs/api.md#sessions-for-the-browser): a browser's `EventSource` and
//! plain links (an export) cannot send an `Authorization` header, so `POST /api/session`
//! exchanges the bearer token for an `HttpOnly`, `SameSite=Strict` cookie naming a
//! session. Only the routes the route table marks [`crate::routes::Route::session`] (reads
//! a browser makes without headers) accept it; every other route still needs the bearer
//! token, so the cookie can never change anything.
//!
//! A session keeps the SHA-256 of the token it was made from, not the token, and is
//! checked against the tokens on every request like a bearer token: revoking the token
//! ends its sessions at once. A session lasts [`SESSION_TTL`]; the UI makes a new one
//! whenever the stream is refused. Where sessions live is chosen in [`crate::access`]:
//! over a data directory, in this server's memory ([`Sessions`]), ending with it; over a
//! PostgreSQL store, in the database (by the SHA-256 of their ids), so a session opened
//! on one server is taken by every other, with the same lifetime and limit.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::AppState;
use crate::access::SessionCheck;
use crate::error::ApiError;
use crate::tokens::Principal;

/// The cookie's name.
pub const COOKIE: &str = "docket_session";

/// How long a session lasts after it is made.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);

/// At most this many sessions are kept; the ones that lapse soonest go first (a client
/// looping on `POST /api/session` cannot grow the server's memory, or the database's
/// table, without bound).
pub(crate) const MAX_SESSIONS: usize = 10_000;

struct Session {
    token_sha256: String,
    expires: Instant,
}

/// A data directory's server's live sessions, in its memory, by id.
#[derive(Default)]
pub(crate) struct Sessions {
    live: Mutex<BTreeMap<String, Session>>,
}

/// A new session id: 32 random bytes in hex.
pub(crate) fn new_id() -> Result<String, String> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| e.to_string())?;
    Ok(secret.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sessions {
    /// Keeps session `id` of the token whose SHA-256 is `token_sha256` for [`SESSION_TTL`],
    /// dropping the lapsed ones and, past [`MAX_SESSIONS`], those that lapse soonest.
    pub(crate) fn open(&self, id: String, token_sha256: String) {
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
            id,
            Session {
                token_sha256,
                expires: now + SESSION_TTL,
            },
        );
    }

    pub(crate) fn close(&self, id: &str) {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
    }

    /// The SHA-256 of the token of session `id`, if it is live.
    pub(crate) fn token_of(&self, id: &str) -> Option<String> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .filter(|s| s.expires > Instant::now())
            .map(|s| s.token_sha256.clone())
    }
}

/// Who the session cookie of `headers` stands for: `None` without a cookie, an error
/// when the session is unknown, expired, or its token was revoked, or when the sessions
/// or tokens cannot be read (never a way through).
pub(crate) async fn principal(
    state: &AppState,
    headers: &HeaderMap,
) -> Option<Result<Principal, ApiError>> {
    let id = cookie(headers)?;
    Some(match state.access.session(&id).await {
        Ok(SessionCheck::Live(p)) => Ok(p),
        Ok(SessionCheck::Unknown) => Err(ApiError::unauthenticated(
            "the session has expired, is unknown, or its token was revoked: sign in again (POST /api/session with the bearer token)",
        )
        .at("cookie.docket_session")),
        Ok(SessionCheck::Revoked) => Err(ApiError::unauthenticated(
            "the token this session was made from has been revoked",
        )
        .at("cookie.docket_session")),
        Err(e) => Err(e.answer()),
    })
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
    let id = state
        .access
        .open_session(token)
        .await
        .map_err(|e| e.answer())?
        .ok_or_else(|| {
            ApiError::unauthenticated("unknown or revoked token").at("header.authorization")
        })?;
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
        state
            .access
            .close_session(&id)
            .await
            .map_err(|e| e.answer())?;
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
    fn a_closed_or_unknown_session_is_not_live() {
        let sessions = Sessions::default();
        let id = new_id().expect("an id");
        assert_eq!(id.len(), 64);
        sessions.open(id.clone(), "ab".repeat(32));
        assert_eq!(sessions.token_of(&id), Some("ab".repeat(32)));
        assert_eq!(sessions.token_of("cd"), None);
        sessions.close(&id);
        assert_eq!(sessions.token_of(&id), None);
    }
}
