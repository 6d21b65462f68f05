//! A JSON document POSTed to a URL, the answer being the response body. Plain `http://`
//! only, so no TLS stack is linked: put a local proxy in front of a remote service that
//! needs TLS. Connections are pooled and reused between exchanges.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;

use super::{DEFAULT_MAX_RESPONSE_BYTES, TransportError};

/// How many body bytes of a non-2xx answer are quoted in the error.
const STATUS_BODY_EXCERPT_BYTES: usize = 512;

/// An HTTP endpoint taking JSON documents by POST.
pub(crate) struct HttpTransport {
    url: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    max_response_bytes: usize,
}

impl HttpTransport {
    /// A transport POSTing to `url` (which must be `http://...`), with a 1 MiB answer
    /// limit.
    ///
    /// # Errors
    /// [`TransportError::InvalidUrl`] or [`TransportError::UnsupportedScheme`].
    pub(crate) fn new(url: &str) -> Result<Self, TransportError> {
        let parsed: Uri = url.parse().map_err(|err: hyper::http::uri::InvalidUri| {
            TransportError::InvalidUrl {
                url: url.to_owned(),
                message: err.to_string(),
            }
        })?;
        if parsed.scheme_str() != Some("http") || parsed.host().is_none() {
            return Err(TransportError::UnsupportedScheme {
                url: url.to_owned(),
            });
        }
        Ok(Self {
            url: parsed,
            client: Client::builder(TokioExecutor::new()).build_http(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// Sets the largest answer body accepted, in bytes.
    pub(crate) fn set_max_response_bytes(&mut self, limit: usize) {
        self.max_response_bytes = limit;
    }

    /// Where it POSTs.
    pub(crate) fn url(&self) -> &Uri {
        &self.url
    }

    /// POSTs `body` as `application/json` and returns the answer's body, all before
    /// `deadline` (after it the connection is dropped).
    ///
    /// # Errors
    /// [`TransportError::TimedOut`], [`TransportError::Post`],
    /// [`TransportError::HttpStatus`] (with the first 512 bytes of the body),
    /// [`TransportError::BodyTooLong`] (a declared `Content-Length` or a body past the
    /// limit) or [`TransportError::Body`].
    pub(crate) async fn post(
        &self,
        body: Vec<u8>,
        deadline: Instant,
    ) -> Result<Vec<u8>, TransportError> {
        tokio::time::timeout_at(deadline, self.post_now(body))
            .await
            .unwrap_or(Err(TransportError::TimedOut))
    }

    async fn post_now(&self, body: Vec<u8>) -> Result<Vec<u8>, TransportError> {
        let failed = |source: std::io::Error| TransportError::Post {
            url: self.url.clone(),
            source,
        };
        let request = Request::builder()
            .method(Method::POST)
            .uri(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|err| failed(std::io::Error::other(err)))?;
        let answer = self
            .client
            .request(request)
            .await
            .map_err(|err| failed(std::io::Error::other(err)))?;

        let status = answer.status();
        if !status.is_success() {
            let excerpt = read_limited_body(answer, STATUS_BODY_EXCERPT_BYTES, true)
                .await
                .unwrap_or_default();
            return Err(TransportError::HttpStatus {
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
            return Err(TransportError::BodyTooLong {
                limit,
                received: length,
            });
        }
        read_limited_body(answer, limit, false).await
    }
}

/// Reads at most `limit` bytes of the body. Past the limit: the bytes so far when
/// `truncate`, [`TransportError::BodyTooLong`] otherwise.
async fn read_limited_body(
    answer: Response<Incoming>,
    limit: usize,
    truncate: bool,
) -> Result<Vec<u8>, TransportError> {
    let mut body = answer.into_body();
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| TransportError::Body(std::io::Error::other(err)))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if bytes.len() + data.len() > limit {
            if truncate {
                let room = limit - bytes.len();
                bytes.extend_from_slice(&data[..room]);
                return Ok(bytes);
            }
            return Err(TransportError::BodyTooLong {
                limit,
                received: (bytes.len() + data.len()) as u64,
            });
        }
        bytes.extend_from_slice(&data);
    }
    Ok(bytes)
}
