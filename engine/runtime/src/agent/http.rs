//! Agents as HTTP services: the request JSON is POSTed to a URL and the response JSON is
//! the body of the answer. Plain `http://` only, so no TLS stack is linked; put a local
//! proxy in front of a remote agent that needs TLS.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tracing::Instrument;

use super::{
    AgentCallError, AgentExecutor, CallFuture, DEFAULT_MAX_RESPONSE_BYTES, ExecutorConfigError,
    accept_response, call_span, log_outcome,
};
use docket_decider::{AgentRequest, AgentResponse};

/// How many body bytes of a non-2xx answer are quoted in the error.
const STATUS_BODY_EXCERPT_BYTES: usize = 512;

/// An agent behind an HTTP endpoint. Connections are pooled and reused between calls.
pub struct HttpExecutor {
    url: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    max_response_bytes: usize,
}

impl HttpExecutor {
    /// An executor POSTing to `url` (which must be `http://...`), with a 1 MiB response
    /// limit.
    ///
    /// # Errors
    /// [`ExecutorConfigError`] when the URL does not parse or is not plain HTTP.
    pub fn new(url: &str) -> Result<Self, ExecutorConfigError> {
        let parsed = plain_http_url(url)?;
        Ok(Self {
            url: parsed,
            client: Client::builder(TokioExecutor::new()).build_http(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// Sets the largest response body accepted, in bytes.
    #[must_use]
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.max_response_bytes = limit;
        self
    }

    async fn post(&self, request: &AgentRequest) -> Result<AgentResponse, AgentCallError> {
        let body = serde_json::to_vec(request)
            .map_err(|err| AgentCallError::io("encoding the request", err.into()))?;
        let during = || format!("POSTing to {}", self.url);
        let http_request = Request::builder()
            .method(Method::POST)
            .uri(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|err| AgentCallError::io(during(), std::io::Error::other(err)))?;
        let answer = self
            .client
            .request(http_request)
            .await
            .map_err(|err| AgentCallError::io(during(), std::io::Error::other(err)))?;

        let status = answer.status();
        if !status.is_success() {
            let excerpt = read_body(answer, STATUS_BODY_EXCERPT_BYTES, true)
                .await
                .unwrap_or_default();
            return Err(AgentCallError::HttpStatus {
                status: status.as_u16(),
                body_excerpt: String::from_utf8_lossy(&excerpt).into_owned(),
            });
        }
        let limit = self.max_response_bytes;
        let declared = answer
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(length) = declared
            && length > limit as u64
        {
            return Err(AgentCallError::Oversized {
                limit,
                received: length,
            });
        }
        let bytes = read_body(answer, limit, false).await?;
        accept_response(request, &bytes)
    }
}

/// Parses `url`, which must be plain `http://` with a host (no TLS is linked).
///
/// # Errors
/// [`ExecutorConfigError::InvalidUrl`] or [`ExecutorConfigError::UnsupportedScheme`].
pub(crate) fn plain_http_url(url: &str) -> Result<Uri, ExecutorConfigError> {
    let parsed: Uri = url.parse().map_err(|err: hyper::http::uri::InvalidUri| {
        ExecutorConfigError::InvalidUrl {
            url: url.to_owned(),
            message: err.to_string(),
        }
    })?;
    if parsed.scheme_str() != Some("http") || parsed.host().is_none() {
        return Err(ExecutorConfigError::UnsupportedScheme {
            url: url.to_owned(),
        });
    }
    Ok(parsed)
}

/// Why a body could not be read whole.
pub(crate) enum BodyError {
    /// Past the limit: this many bytes had arrived.
    TooLong { received: u64 },
    /// The connection broke while reading.
    Broken(String),
}

/// Reads at most `limit` bytes of the body. Past the limit: the bytes so far when
/// `truncate`, [`BodyError::TooLong`] otherwise.
pub(crate) async fn read_limited_body(
    answer: Response<Incoming>,
    limit: usize,
    truncate: bool,
) -> Result<Vec<u8>, BodyError> {
    let mut body = answer.into_body();
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Broken(format!("reading the body: {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if bytes.len() + data.len() > limit {
            if truncate {
                let room = limit - bytes.len();
                bytes.extend_from_slice(&data[..room]);
                return Ok(bytes);
            }
            return Err(BodyError::TooLong {
                received: (bytes.len() + data.len()) as u64,
            });
        }
        bytes.extend_from_slice(&data);
    }
    Ok(bytes)
}

/// [`read_limited_body`] with its errors as agent call errors.
async fn read_body(
    answer: Response<Incoming>,
    limit: usize,
    truncate: bool,
) -> Result<Vec<u8>, AgentCallError> {
    read_limited_body(answer, limit, truncate)
        .await
        .map_err(|e| match e {
            BodyError::TooLong { received } => AgentCallError::Oversized { limit, received },
            BodyError::Broken(message) => {
                AgentCallError::io("reading the response body", std::io::Error::other(message))
            }
        })
}

impl AgentExecutor for HttpExecutor {
    fn call<'a>(&'a self, request: &'a AgentRequest) -> CallFuture<'a> {
        let span = call_span("http", request);
        Box::pin(
            async move {
                let limit = Duration::from_millis(request.timeout_ms);
                let outcome = match tokio::time::timeout(limit, self.post(request)).await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(AgentCallError::Timeout {
                        timeout_ms: request.timeout_ms,
                    }),
                };
                log_outcome(&outcome);
                outcome
            }
            .instrument(span),
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
