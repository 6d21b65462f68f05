//! The API's request log over a data directory: `<data>/api/requests.jsonl`, append-only, one JSON line per
//! mutating request once it is answered (when, who, role, method, path, status). It is
//! outside the event log: what a request did to a run is in the run's own events, with
//! the same principal; this log also keeps what was refused (docs/api.md#request-log).
//! Mode 0600, as the token file beside it. Over a PostgreSQL store the log is the table
//! `docket_api_requests` instead ([`crate::access`]).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::json;

use crate::ServeError;
use crate::tokens::{API_DIR, Principal};

/// The request log's file in `<data>/api/`.
pub const REQUESTS_FILE: &str = "requests.jsonl";

pub(crate) struct RequestLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl RequestLog {
    pub(crate) fn open(data: &Path) -> Result<Self, ServeError> {
        let path = data.join(API_DIR).join(REQUESTS_FILE);
        let error = |source| ServeError::RequestLog {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(data.join(API_DIR)).map_err(error)?;
        let file = open_private(&path).map_err(error)?;
        Ok(Self {
            path,
            file: Mutex::new(file),
        })
    }

    /// The log's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line; a failure is said in the server's trace (the request was
    /// answered already).
    pub(crate) fn record(
        &self,
        who: &Principal,
        at_ms: u64,
        method: &str,
        path: &str,
        status: u16,
    ) {
        let line = json!({
            "at_ms": at_ms, "by": who.name, "role": who.role.as_str(),
            "method": method, "path": path, "status": status,
        });
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = writeln!(file, "{line}").and_then(|()| file.sync_data()) {
            tracing::error!(path = %self.path.display(), "cannot record a request: {e}");
        }
    }
}

/// Opens the log for appending, readable and writable by its owner only (it names who
/// did what): created so, and a log an older server made readable to others is narrowed.
#[cfg(unix)]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

#[cfg(not(unix))]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}
