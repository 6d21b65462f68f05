//! Agents as HTTP services: the request JSON is POSTed to a URL and the response JSON is
//! the body of the answer (`docs/agent-protocol.md`). Plain `http://` only (see
//! [`HttpTransport`]).

use super::{AgentExecutor, CallFuture, ExecutorConfigError, exchange, traced};
use crate::transport::HttpTransport;
use docket_decider::AgentRequest;

/// An agent behind an HTTP endpoint. Connections are pooled and reused between calls.
pub struct HttpExecutor {
    transport: HttpTransport,
}

impl HttpExecutor {
    /// An executor POSTing to `url` (which must be `http://...`), with a 1 MiB response
    /// limit.
    ///
    /// # Errors
    /// [`ExecutorConfigError`] when the URL does not parse or is not plain HTTP.
    pub fn new(url: &str) -> Result<Self, ExecutorConfigError> {
        let transport =
            HttpTransport::new(url).map_err(|err| ExecutorConfigError::from_transport(err, url))?;
        Ok(Self { transport })
    }

    /// Sets the largest response body accepted, in bytes.
    #[must_use]
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.transport.set_max_response_bytes(limit);
        self
    }
}

impl AgentExecutor for HttpExecutor {
    fn call<'a>(&'a self, request: &'a AgentRequest) -> CallFuture<'a> {
        traced(
            "http",
            request,
            exchange(request, false, |body, deadline| {
                self.transport.post(body, deadline)
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_urls_are_accepted() {
        assert!(HttpExecutor::new("http://127.0.0.1:8080/agent").is_ok());
        assert_eq!(
            HttpExecutor::new("https://example.invalid/agent").err(),
            Some(ExecutorConfigError::UnsupportedScheme {
                url: "https://example.invalid/agent".into()
            })
        );
        assert!(matches!(
            HttpExecutor::new("http://exa mple/"),
            Err(ExecutorConfigError::InvalidUrl { .. })
        ));
        assert!(matches!(
            HttpExecutor::new("/relative"),
            Err(ExecutorConfigError::UnsupportedScheme { .. })
        ));
    }
}
