//! TLS for the HTTP transport and the `docket` command's OTLP export: HTTP/1.1 over the
//! rustls client of `docket-tls` (the system's roots and a configured CA file).

use std::path::Path;

use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::HttpConnector;

pub use docket_tls::{HandshakeError, TlsSetupError, client_config, handshake_failure};

/// The connector of an `https://` client: TCP, then TLS.
pub type HttpsConnector = hyper_rustls::HttpsConnector<HttpConnector>;

/// A connector for `https://` URLs only (HTTP/1.1), trusting the system's roots and
/// those of `ca_file`. The `docket` command's OTLP export posts through one.
///
/// # Errors
/// [`TlsSetupError`] when `ca_file` cannot be read or holds no usable certificate.
pub fn https_connector(ca_file: Option<&Path>) -> Result<HttpsConnector, TlsSetupError> {
    let config = client_config(ca_file)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    Ok(HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .wrap_connector(http))
}
