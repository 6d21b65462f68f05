//! Effect executors as HTTP services: every call is POSTed to one URL as the same
//! `{"op", "request"}` document the command executor writes on a line, and the answer is
//! the response body (see `docs/effect-protocol.md`). One URL with an `op` field rather
//! than a path per operation, so a service is configured by a single address and the two
//! transports carry identical documents. Plain `http://` only, like agents.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;

use super::{
    DryRunReport, EffectCallError, EffectExecutor, EffectFuture, EffectReceipt, EffectRequest,
    Verification,
};
use crate::agent::http::{BodyError, plain_http_url, read_limited_body};
use crate::agent::{DEFAULT_MAX_RESPONSE_BYTES, ExecutorConfigError};
use docket_decider::{EffectCall, EffectOp, accept_effect_answer as accept_answer};

/// How many body bytes of a non-2xx answer are quoted in the error.
const STATUS_BODY_EXCERPT_BYTES: usize = 512;

/// An effect executor behind an HTTP endpoint. Connections are pooled between calls.
pub struct HttpEffectExecutor {
    url: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    max_response_bytes: usize,
    supports_dry_run: bool,
    /// Replaces each request's `timeout_ms` (the workflow's `[effects]` value).
    timeout_ms: Option<u64>,
}

impl HttpEffectExecutor {
    /// An executor POSTing to `url` (`http://...`), with a 1 MiB answer limit.
    ///
    /// # Errors
    /// [`ExecutorConfigError`] when the URL does not parse or is not plain HTTP.
    pub fn new(url: &str) -> Result<Self, ExecutorConfigError> {
        let parsed = plain_http_url(url)?;
        Ok(Self {
            url: parsed,
            client: Client::builder(TokioExecutor::new()).build_http(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            supports_dry_run: true,
            timeout_ms: None,
        })
    }

    /// Sets the largest answer body accepted, in bytes.
    #[must_use]
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.max_response_bytes = limit;
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
        let limit = Duration::from_millis(request.timeout_ms);
        match tokio::time::timeout(limit, self.post(op, request)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(EffectCallError::Timeout {
                effect_id: request.effect_id.clone(),
                timeout_ms: request.timeout_ms,
            }),
        }
    }

    async fn post<T: DeserializeOwned>(
        &self,
        op: EffectOp,
        request: &EffectRequest,
    ) -> Result<T, EffectCallError> {
        let unavailable = |message: String| EffectCallError::Unavailable {
            effect_id: request.effect_id.clone(),
            message: format!("POST {}: {message}", self.url),
        };
        let call = EffectCall {
            op,
            request: request.clone(),
        };
        let body = serde_json::to_vec(&call).map_err(|e| unavailable(e.to_string()))?;
        let http_request = Request::builder()
            .method(Method::POST)
            .uri(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| unavailable(e.to_string()))?;
        let answer = self
            .client
            .request(http_request)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let status = answer.status();
        if !status.is_success() {
            let excerpt = match read_limited_body(answer, STATUS_BODY_EXCERPT_BYTES, true).await {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(_) => String::new(),
            };
            let message = format!("HTTP {}; body began with {excerpt:?}", status.as_u16());
            // A 4xx is a refusal: nothing was applied. Anything else (5xx, a redirect)
            // says nothing about whether the effect happened, so the runtime verifies.
            return Err(if status.is_client_error() {
                EffectCallError::Failed {
                    effect_id: request.effect_id.clone(),
                    code: format!("EFFECT_HTTP_{}", status.as_u16()),
                    message,
                }
            } else {
                unavailable(message)
            });
        }
        let limit = self.max_response_bytes;
        let oversized = |received: u64| EffectCallError::Malformed {
            effect_id: request.effect_id.clone(),
            message: format!(
                "the answer exceeds the limit of {limit} bytes ({received} bytes received or declared)"
            ),
        };
        let declared = answer
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(length) = declared
            && length > limit as u64
        {
            return Err(oversized(length));
        }
        let bytes = match read_limited_body(answer, limit, false).await {
            Ok(bytes) => bytes,
            Err(BodyError::TooLong { received }) => return Err(oversized(received)),
            Err(BodyError::Broken(message)) => return Err(unavailable(message)),
        };
        accept_answer(request, op, &bytes)
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
    fn only_plain_http_urls_are_accepted() {
        assert!(HttpEffectExecutor::new("http://127.0.0.1:8080/effects").is_ok());
        assert!(matches!(
            HttpEffectExecutor::new("https://example.invalid/effects"),
            Err(ExecutorConfigError::UnsupportedScheme { .. })
        ));
    }
}
