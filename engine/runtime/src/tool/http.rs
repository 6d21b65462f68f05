//! Tool executors as HTTP services: every call is POSTed to one URL as the same document
//! the command executor writes on a line; the answer is the response body.

use super::{ToolExecutor, ToolFuture, exchange};
use crate::agent::ExecutorConfigError;
use crate::transport::HttpTransport;
use docket_decider::ToolRequest;

/// A tool executor behind an HTTP endpoint (plain `http://`).
pub struct HttpToolExecutor {
    transport: HttpTransport,
    endpoint: String,
}

impl HttpToolExecutor {
    /// An executor POSTing to `url`.
    ///
    /// # Errors
    /// [`ExecutorConfigError`] when the URL does not parse or is not plain HTTP.
    pub fn new(url: &str) -> Result<Self, ExecutorConfigError> {
        let transport =
            HttpTransport::new(url).map_err(|err| ExecutorConfigError::from_transport(err, url))?;
        Ok(Self {
            endpoint: format!("POST {}", transport.url()),
            transport,
        })
    }
}

impl ToolExecutor for HttpToolExecutor {
    fn call<'a>(&'a self, request: &'a ToolRequest) -> ToolFuture<'a> {
        Box::pin(exchange(
            request,
            false,
            &self.endpoint,
            |body, deadline| self.transport.post(body, deadline),
        ))
    }
}
