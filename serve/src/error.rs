//! The API's errors: `{ "error": { "code", "message", "where" } }` with the status that
//! fits (docs/api.md#errors). Every failure of a handler becomes one; none panics. The
//! libraries' errors carry data; where one has a way out, it is said here in the API's
//! terms (a parameter, a route), never as a command to type.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use docket_app::ReplaceError;
use docket_policies::RulesError;
use docket_runtime::{RegistryError, RuntimeError, SourceError, WorkflowLoadError};
use serde_json::json;

/// A failed request: its status, a stable code, a message in the user's words and where
/// the problem is (a field, a parameter, a run), if anywhere.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable code (`unauthenticated`, `forbidden`, `bad_request`,
    /// `not_found`, `conflict`, `refused`, `too_large`, `too_many_streams`, `busy`,
    /// `unavailable`, `no_space`, `internal`).
    pub code: &'static str,
    /// What went wrong and what to do.
    pub message: String,
    /// The field, parameter or resource concerned (`body.reason`, `query.status`,
    /// `run run-1`), when there is one.
    pub at: Option<String>,
    /// Each problem, when the request has several (a refused replacement of handoff
    /// rules: each naming its rule and field).
    pub problems: Option<Box<serde_json::Value>>,
    /// Seconds to wait before trying again (`Retry-After`), when waiting helps.
    pub retry_after: Option<u64>,
    /// The run this request recorded before it failed: it stays in the log, stopped where
    /// the failure found it, for a resume once the cause is mended.
    pub recorded: Option<String>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            at: None,
            problems: None,
            retry_after: None,
            recorded: None,
        }
    }

    /// Where the problem is.
    #[must_use]
    pub fn at(mut self, at: impl Into<String>) -> Self {
        self.at = Some(at.into());
        self
    }

    /// 400: the request itself is wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 401: no token, or one the server does not know.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthenticated", message)
    }

    /// 403: the token's role may not do this.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 404: no such run, ticket, bundle or route.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 405: the route exists, not with this method.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            message,
        )
    }

    /// 409: the request conflicts with where things stand (a finished run, a run
    /// driven meanwhile, a ticket already decided).
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 422: well-formed, but the decider or the runtime refuses it.
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "refused", message)
    }

    /// 500: the server failed (the log, a file).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// 413 (a body) or 431 (the headers), 414 (the URI): the request is larger than the
    /// API takes.
    pub fn too_large(status: StatusCode, message: impl Into<String>) -> Self {
        Self::new(status, "too_large", message)
    }

    /// 429: this token holds as many event streams as it may.
    pub fn too_many_streams(message: impl Into<String>) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, "too_many_streams", message)
    }

    /// 503: the server holds as many event streams as it may.
    pub fn busy(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message)
    }

    /// 503: what the server needs cannot be reached now (the database of its tokens,
    /// sessions and request log); the request was not let through.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// 507: the server's disk is full; nothing was recorded, unless `recorded` names a run.
    pub fn no_space(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INSUFFICIENT_STORAGE, "no_space", message)
    }

    /// A failure of the server's own files: 507 when the disk is full, else 500; the
    /// message names the file (never the client's fault, whatever the operation).
    pub fn io(message: impl Into<String>, source: &std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::StorageFull {
            Self::no_space(message)
        } else {
            Self::internal(message)
        }
    }

    /// Says that run `run` was recorded before the failure and stopped where it found it.
    #[must_use]
    pub fn after_recording(mut self, run: &str) -> Self {
        self.message = format!(
            "run {run} is recorded up to where it stopped: {}; resume it \
             (POST /api/runs/{run}/resume) once that is mended",
            self.message
        );
        self.recorded = Some(run.to_owned());
        self
    }

    /// Says when to try again.
    #[must_use]
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": {
            "code": self.code,
            "message": self.message,
            "where": self.at,
        }});
        if let Some(problems) = self.problems {
            body["error"]["problems"] = *problems;
        }
        if let Some(run) = self.recorded {
            body["error"]["recorded"] = run.into();
        }
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"docket\""),
            );
        }
        response
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        let message = e.to_string();
        match &e {
            RegistryError::NoVersions { .. } | RegistryError::UnknownVersion { .. } => {
                Self::not_found(message).at("query.bundle")
            }
            RegistryError::WhichBundle { .. } => {
                Self::bad_request(format!("{message} (`?bundle=NAME`)")).at("query.bundle")
            }
            RegistryError::Unexplained { .. } => Self::bad_request(message).at("query.reason"),
            RegistryError::Unchanged { .. } | RegistryError::Conflict => Self::conflict(message),
            RegistryError::Rules(RulesError::UnknownAgent { side, .. }) => {
                Self::not_found(message).at(format!("path.{side}_agent"))
            }
            RegistryError::Rules(RulesError::Refused { problems }) => {
                let mut refused = Self::refused(message).at("body");
                refused.problems = Some(Box::new(json!(problems)));
                refused
            }
            RegistryError::Rules(_)
            | RegistryError::Invalid(_)
            | RegistryError::NotAdmitted { .. } => Self::refused(message).at("body"),
            _ => Self::internal(message),
        }
    }
}

impl From<ReplaceError> for ApiError {
    fn from(e: ReplaceError) -> Self {
        match e {
            ReplaceError::Registry(e) => Self::from(e),
            _ => Self::internal(e.to_string()),
        }
    }
}

impl ApiError {
    /// A file a request named that was not read, found at `at` (`body.workflow`): the
    /// request's fault (400) unless the server could not read a file it may read (500,
    /// naming the path).
    pub(crate) fn source(e: &SourceError, at: &str) -> Self {
        let message = e.to_string();
        if e.is_io() {
            Self::internal(message).at(at)
        } else {
            Self::bad_request(message).at(at)
        }
    }

    /// A workflow that was not loaded, named at `body.workflow`.
    pub(crate) fn workflow(e: &WorkflowLoadError) -> Self {
        match e {
            WorkflowLoadError::Read(source) | WorkflowLoadError::ReadBundle { source } => {
                let mut error = Self::source(source, "body.workflow");
                error.message = e.to_string();
                error
            }
            _ => Self::bad_request(e.to_string()).at("body.workflow"),
        }
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        use docket_decider::Rejection;
        let message = e.to_string();
        match &e {
            RuntimeError::UnknownRun(run) => Self::not_found(message).at(format!("run {run}")),
            RuntimeError::InvalidRunId { id, .. } => {
                Self::bad_request(message).at(format!("run {id}"))
            }
            RuntimeError::RunExists(run) => Self::conflict(message).at(format!("run {run}")),
            RuntimeError::TicketDecided { run, ticket, .. } => {
                Self::conflict(message).at(format!("run {run} ticket {ticket}"))
            }
            RuntimeError::Conflict { run, .. } => Self::conflict(message).at(format!("run {run}")),
            RuntimeError::TurnRefused { run, .. } => {
                Self::conflict(message).at(format!("run {run}"))
            }
            RuntimeError::MessageRefused(_) => Self::bad_request(message).at("body.message"),
            RuntimeError::Rejected { run, rejection } => {
                let at = format!("run {run}");
                match rejection {
                    Rejection::Finished(_) | Rejection::TicketClosed(_) => {
                        Self::conflict(message).at(at)
                    }
                    Rejection::UnknownTicket(t) => {
                        Self::not_found(message).at(format!("run {run} ticket {t}"))
                    }
                    Rejection::Anonymous(_) | Rejection::Unnamed(_) => {
                        Self::refused(message).at("body.by")
                    }
                    Rejection::Unexplained(_) => Self::refused(message).at("body.reason"),
                    _ => Self::refused(message).at(at),
                }
            }
            RuntimeError::NoRequest(run) => Self::not_found(message).at(format!("run {run}")),
            RuntimeError::WorkflowRefused { .. } | RuntimeError::NotAdmitted { .. } => {
                Self::refused(message).at("body.workflow")
            }
            RuntimeError::Bundle { .. } => Self::refused(message),
            RuntimeError::Shredded { run, .. } => Self::internal(format!(
                "{message}; cancelling it (`POST /api/runs/{run}/cancel`) and reading it still work"
            )),
            RuntimeError::Store(store) => Self::from(store),
            _ => Self::internal(message),
        }
    }
}

impl From<&docket_store::StoreError> for ApiError {
    /// The log's failures are the server's: 5xx naming the file (507 when its disk is
    /// full), whatever the request.
    fn from(e: &docket_store::StoreError) -> Self {
        let message = format!("event log: {e}");
        match e {
            docket_store::StoreError::Io { source, path, .. } => {
                Self::io(message, source).at(format!("file {}", path.display()))
            }
            _ => Self::internal(message),
        }
    }
}
