//! Effect executors as HTTP services: every call is POSTed to one URL as the same
//! `{"op", "request"}` document the command executor writes on a line, and the answer is
//! the response body (see `docs/effect-protocol.md`). One URL with an `op` field rather
//! than a path per operation, so a service is configured by a single address and the two
//! transports carry identical documents. `http://` or `https://`, like agents.

use serde::de::DeserializeOwned;

use super::{
    DryRunReport, EffectCallError, EffectExecutor, EffectFuture, EffectReceipt, EffectRequest,
    Verification, exchange,
};
use crate::agent::ExecutorConfigError;
use crate::transport::{HttpOptions, HttpTransport};
use docket_decider::EffectOp;

/// An effect executor behind an HTTP endpoint. Connections are pooled between calls.
pub struct HttpEffectExecutor {
    transport: HttpTransport,
    /// `POST {url}`, naming the executor in errors.
    endpoint: String,
    supports_dry_run: bool,
    /// Replaces each request's `timeout_ms` (the workflow's `[effects]` value).
    timeout_ms: Option<u64>,
}

impl HttpEffectExecutor {
    /// An executor POSTing to `url` (`http://...` or `https://...`), with a 1 MiB answer
    /// limit, trusting the system's roots and sending no credentials.
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
            supports_dry_run: true,
            timeout_ms: None,
        })
    }

    /// Sets the largest answer body accepted, in bytes.
    #[must_use]
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.transport.set_max_response_bytes(limit);
        self
    }

    /// Cuts every call off after `timeout_ms` (written into the request the executor
    /// receives) instead of the request's own limit.
    #[must_use]
    pub fn timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = Some(timeout_ms);
        self
    }

    /// Declares whether the service implements `dry_run` (default: it does).
    #[must_use]
    pub fn supports_dry_run(mut self, supported: bool) -> Self {
        self.supports_dry_run = supported;
        self
    }

    async fn call<T: DeserializeOwned>(
        &self,
        op: EffectOp,
        request: &EffectRequest,
    ) -> Result<T, EffectCallError> {
        let request = &*super::with_timeout(request, self.timeout_ms);
        exchange(op, request, false, &self.endpoint, |body, deadline| {
            self.transport.post(body, deadline)
        })
        .await
    }
}

impl EffectExecutor for HttpEffectExecutor {
    fn supports_dry_run(&self) -> bool {
        self.supports_dry_run
    }

    fn dry_run<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, DryRunReport> {
        Box::pin(self.call(EffectOp::DryRun, request))
    }

    fn execute<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, EffectReceipt> {
        Box::pin(self.call(EffectOp::Execute, request))
    }

    fn verify<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, Verification> {
        Box::pin(self.call(EffectOp::Verify, request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_and_https_urls_are_accepted() {
        assert!(HttpEffectExecutor::new("http://127.0.0.1:8080/effects").is_ok());
        assert!(HttpEffectExecutor::new("https://example.invalid/effects").is_ok());
        assert!(matches!(
            HttpEffectExecutor::new("ftp://example.invalid/effects"),
            Err(ExecutorConfigError::UnsupportedScheme { .. })
        ));
    }
}
