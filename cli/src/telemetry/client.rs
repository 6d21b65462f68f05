//! The HTTP client the OTLP exporter posts with: hyper's, which the runtime's HTTP
//! transport already links, over `http://` or, for an `https://` collector, the runtime's
//! rustls setup (the system's roots and the CA file of `OTEL_EXPORTER_OTLP_CERTIFICATE`).
//! The SDK's batch thread calls it outside docket's async runtime, so it drives its
//! requests on a small runtime of its own.
//!
//! What it does as the exporter's bundled clients do: the request deadline of
//! `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds,
//! 10 s by default) covers sending and reading the answer; an answer's body over 4 MiB is
//! an error; connections are kept and reused. It connects to the collector directly: no
//! HTTP proxy, no redirects followed. The headers the exporter adds (from
//! `OTEL_EXPORTER_OTLP_HEADERS`) are marked sensitive, so no `Debug` output shows them.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use docket_runtime::HttpsConnector;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};

/// The largest answer body read, as in the exporter's bundled clients.
const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// The OTLP exporter's default request timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(super) struct Collector {
    runtime: tokio::runtime::Runtime,
    http: Connection,
    timeout: Duration,
}

/// The client of the collector's scheme: `http://` connects as it always has.
#[derive(Debug)]
enum Connection {
    Plain(Client<HttpConnector, Full<Bytes>>),
    Tls(Client<HttpsConnector, Full<Bytes>>),
}

/// Why the exporter's client could not be made.
#[derive(Debug)]
pub(super) enum SetupError {
    /// Its runtime (no thread or no I/O driver).
    Runtime(std::io::Error),
    /// TLS (the CA file).
    Tls(docket_runtime::TlsSetupError),
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Runtime(err) => write!(f, "{err}"),
            Self::Tls(err) => write!(f, "{err}"),
        }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Runtime(err) => Some(err),
            Self::Tls(err) => Some(err),
        }
    }
}

impl Collector {
    /// A client with the timeout the OTLP variables set; over TLS when `https`, trusting
    /// the system's roots and `ca_file`'s certificates.
    ///
    /// # Errors
    /// The runtime could not be made (no thread or no I/O driver), or the CA file cannot
    /// be used.
    pub(super) fn new(https: bool, ca_file: Option<&Path>) -> Result<Self, SetupError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(SetupError::Runtime)?;
        let http = if https {
            let connector = docket_runtime::https_connector(ca_file).map_err(SetupError::Tls)?;
            Connection::Tls(Client::builder(TokioExecutor::new()).build(connector))
        } else {
            Connection::Plain(Client::builder(TokioExecutor::new()).build_http())
        };
        Ok(Self {
            runtime,
            http,
            timeout: timeout(|name| std::env::var(name).ok()),
        })
    }
}

/// The request timeout, as the OTLP exporter reads it: the traces variable, then the
/// general one, in milliseconds; a value that is not a number is ignored.
fn timeout(var: impl Fn(&str) -> Option<String>) -> Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .into_iter()
    .find_map(|name| var(name)?.trim().parse::<u64>().ok())
    .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
}

#[async_trait::async_trait]
impl HttpClient for Collector {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (mut parts, body) = request.into_parts();
        for value in parts.headers.values_mut() {
            value.set_sensitive(true);
        }
        let request = Request::from_parts(parts, Full::new(body));
        self.runtime.block_on(async {
            let exchange = async {
                let response = match &self.http {
                    Connection::Plain(client) => client.request(request).await?,
                    Connection::Tls(client) => client.request(request).await?,
                };
                let (parts, body) = response.into_parts();
                let body = Limited::new(body, MAX_RESPONSE_BYTES)
                    .collect()
                    .await?
                    .to_bytes();
                Ok::<_, HttpError>(Response::from_parts(parts, body))
            };
            tokio::time::timeout(self.timeout, exchange)
                .await
                .map_err(|_| format!("no answer within {} ms", self.timeout.as_millis()))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_is_the_traces_variable_then_the_general_one_then_10_s() {
        let vars = |set: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                set.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(timeout(vars(&[])), Duration::from_secs(10));
        assert_eq!(
            timeout(vars(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "2500")])),
            Duration::from_millis(2500)
        );
        assert_eq!(
            timeout(vars(&[
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
                ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "700"),
            ])),
            Duration::from_millis(700)
        );
        assert_eq!(
            timeout(vars(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")])),
            Duration::from_secs(10)
        );
    }
}
