//! Agents as HTTP services: the request JSON is POSTed to a URL and the response JSON is
//! the body of the answer (`docs/agent-protocol.md`), over `http://` or `https://` (see
//! [`HttpTransport`]).

use super::{AgentExecutor, CallFuture, ExecutorConfigError, exchange, traced};
use crate::transport::{HttpOptions, HttpTransport};
use docket_decider::AgentRequest;

/// An agent behind an HTTP endpoint. Connections are pooled and reused between calls.
pub struct HttpExecutor {
    transport: HttpTransport,
}

impl HttpExecutor {
    /// An executor POSTing to `url` (`http://...` or `https://...`), with a 1 MiB
    /// response limit, trusting the system's roots and sending no credentials.
    ///
    /// # Errors
    /// [`ExecutorConfigError`] when the URL does not parse or is neither HTTP nor HTTPS.
    pub fn new(url: &str) -> Result<Self, ExecutorConfigError> {
        Self::with_options(url, &HttpOptions::new())
    }

    /// An executor POSTing to `url` with `options`' CA file and credentials.
    ///
    /// # Errors
    /// [`ExecutorConfigError`] when the URL does not parse or is neither HTTP nor HTTPS,
    /// when credentials would go over `http://` to another host, or when the CA file
    /// cannot be used.
    pub fn with_options(url: &str, options: &HttpOptions) -> Result<Self, ExecutorConfigError> {
        let transport = HttpTransport::new(url, options)
            .map_err(|err| ExecutorConfigError::from_transport(err, url))?;
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
    fn http_and_https_urls_are_accepted() {
        assert!(HttpExecutor::new("http://127.0.0.1:8080/agent").is_ok());
        assert!(HttpExecutor::new("https://example.invalid/agent").is_ok());
        assert!(matches!(
            HttpExecutor::new("ftp://example.invalid/agent"),
            Err(ExecutorConfigError::UnsupportedScheme { .. })
        ));
        assert!(matches!(
            HttpExecutor::new("http://exa mple/"),
            Err(ExecutorConfigError::InvalidUrl { .. })
        ));
        assert!(matches!(
            HttpExecutor::new("/relative"),
            Err(ExecutorConfigError::UnsupportedScheme { .. })
        ));
    }

    #[test]
    fn credentials_go_in_clear_to_this_machine_only() {
        let token = HttpOptions::new().bearer_env("TOKEN");
        for url in [
            "http://127.0.0.1:8080/agent",
            "http://localhost:8080/agent",
            "http://[::1]:8080/agent",
            "https://agents.example.invalid/agent",
        ] {
            assert!(HttpExecutor::with_options(url, &token).is_ok(), "{url}");
        }
        let key = HttpOptions::new().header_env("X-Api-Key", "KEY");
        for options in [&token, &key] {
            assert!(matches!(
                HttpExecutor::with_options("http://agents.example.invalid/agent", options),
                Err(ExecutorConfigError::CredentialsInClear { .. })
            ));
        }
    }

    #[test]
    fn a_ca_file_that_is_not_pem_certificates_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let missing = dir.path().join("missing.pem");
        let err = HttpExecutor::with_options(
            "https://127.0.0.1:1/agent",
            &HttpOptions::new().ca_file(&missing),
        )
        .err()
        .expect("refused");
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").expect("written");
        let err = HttpExecutor::with_options(
            "https://127.0.0.1:1/agent",
            &HttpOptions::new().ca_file(&empty),
        )
        .err()
        .expect("refused");
        assert!(err.to_string().contains("holds no certificate"), "{err}");
    }
}
