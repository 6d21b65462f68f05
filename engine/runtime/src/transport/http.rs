//! A JSON document POSTed to a URL, the answer being the response body. `http://` or
//! `https://` (rustls, HTTP/1.1: [`super::tls`]), with credentials read from the
//! environment for each request ([`HttpOptions`]). Connections are pooled and reused
//! between exchanges.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;

use super::credentials::{Credentials, HttpOptions};
use super::tls::{HandshakeError, HttpsConnector, handshake_failure, https_connector};
use super::{DEFAULT_MAX_RESPONSE_BYTES, TransportError};

/// How many body bytes of a non-2xx answer are quoted in the error.
const STATUS_BODY_EXCERPT_BYTES: usize = 512;

/// An HTTP endpoint taking JSON documents by POST.
pub(crate) struct HttpTransport {
    url: Uri,
    client: Connection,
    credentials: Credentials,
    max_response_bytes: usize,
}

/// The client of one scheme: `http://` connects as it always has, with no TLS
/// configuration loaded.
enum Connection {
    Plain(Client<HttpConnector, Full<Bytes>>),
    Tls(Client<HttpsConnector, Full<Bytes>>),
}

impl HttpTransport {
    /// A transport POSTing to `url` (`http://...` or `https://...`), with a 1 MiB answer
    /// limit, trusting the system's roots and `options`' CA file and sending `options`'
    /// credentials.
    ///
    /// # Errors
    /// [`TransportError::InvalidUrl`], [`TransportError::UnsupportedScheme`],
    /// [`TransportError::CredentialsInClear`] (credentials over `http://` to a host that
    /// is not this machine), [`TransportError::InvalidHeaderName`] or
    /// [`TransportError::TlsSetup`] (the CA file).
    pub(crate) fn new(url: &str, options: &HttpOptions) -> Result<Self, TransportError> {
        let parsed: Uri = url.parse().map_err(|err: hyper::http::uri::InvalidUri| {
            TransportError::InvalidUrl {
                url: url.to_owned(),
                message: err.to_string(),
            }
        })?;
        let Some(host) = parsed.host() else {
            return Err(TransportError::UnsupportedScheme {
                url: url.to_owned(),
            });
        };
        let tls = match parsed.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(TransportError::UnsupportedScheme {
                    url: url.to_owned(),
                });
            }
        };
        if !tls && options.sends_credentials() && !docket_decider::is_loopback_host(host) {
            return Err(TransportError::CredentialsInClear {
                url: url.to_owned(),
            });
        }
        let credentials = options
            .credentials()
            .map_err(TransportError::InvalidHeaderName)?;
        let client = if tls {
            let connector =
                https_connector(options.ca_file_path()).map_err(TransportError::TlsSetup)?;
            Connection::Tls(Client::builder(TokioExecutor::new()).build(connector))
        } else {
            Connection::Plain(Client::builder(TokioExecutor::new()).build_http())
        };
        Ok(Self {
            url: parsed,
            client,
            credentials,
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
    /// [`TransportError::Credential`] (a variable the credentials are read from is unset;
    /// nothing is sent), [`TransportError::TimedOut`], [`TransportError::Tls`] (the
    /// handshake failed), [`TransportError::Post`], [`TransportError::HttpStatus`] (with
    /// the first 512 bytes of the body), [`TransportError::BodyTooLong`] (a declared
    /// `Content-Length` or a body past the limit) or [`TransportError::Body`].
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
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|err| failed(std::io::Error::other(err)))?;
        for (name, value) in self.credentials.headers()? {
            request.headers_mut().insert(name, value);
        }
        let sent = match &self.client {
            Connection::Plain(client) => client.request(request).await,
            Connection::Tls(client) => client.request(request).await,
        };
        let answer = sent.map_err(|err| match handshake_failure(&err) {
            Some(tls) => TransportError::Tls {
                url: self.url.clone(),
                source: Box::new(HandshakeError(tls.clone())),
            },
            None => failed(std::io::Error::other(err)),
        })?;

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
