//! Tool executors as HTTP services: every call is POSTed to one URL as the same document
//! the command executor writes on a line; the answer is the response body.

use super::{ToolExecutor, ToolFuture, exchange};
use crate::agent::ExecutorConfigError;
use crate::transport::{HttpOptions, HttpTransport};
use docket_decider::ToolRequest;

/// A tool executor behind an HTTP endpoint (`http://` or `https://`).
pub struct HttpToolExecutor {
    transport: HttpTransport,
    endpoint: String,
}

impl HttpToolExecutor {
    /// An executor POSTing to `url`, trusting the system's roots and sending no
    /// credentials.
    ///
    /// # Errors
    /// [`ExecutorConfigError`] when the URL does not parse or is neither HTTP nor HTTPS.
    pub fn new(url: &str) -> Result<Self, ExecutorConfigError> {
        Self::with_options(url, &HttpOptions::new())
    }

    /// An executor POSTing to `url` with `options`' CA file and credentials.
    ///
    /// # Errors
    /// [`ExecutorConfigError`] as [`crate::HttpExecutor::with_options`].
    pub fn with_options(url: &str, options: &HttpOptions) -> Result<Self, ExecutorConfigError> {
        let transport = HttpTransport::new(url, options)
            .map_err(|err| ExecutorConfigError::from_transport(err, url))?;
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
