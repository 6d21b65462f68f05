//! TLS for docket's clients (agents, tools and effect executors over `https://`, the OTLP
//! export, PostgreSQL): rustls with the `ring` provider, the operating system's roots
//! (read once per process, as `rustls-native-certs` finds them: `SSL_CERT_FILE` and
//! `SSL_CERT_DIR` when set) and the certificates of a CA file when one is configured, and
//! handshake failures said in the words of the person configuring the endpoint.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use rustls::{CertificateError, RootCertStore};

pub use rustls;

/// Why a TLS client could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsSetupError {
    /// The CA file could not be read.
    #[error("cannot read the CA file {}: {source}", path.display())]
    ReadCaFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The CA file is not PEM, or a certificate in it does not parse.
    #[error("the CA file {} is not PEM certificates: {source}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The CA file holds no certificate.
    #[error("the CA file {} holds no certificate (`-----BEGIN CERTIFICATE-----`)", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A certificate of the CA file cannot be a root (it does not parse as X.509).
    #[error("a certificate of the CA file {} cannot be a root: {source}", path.display())]
    BadCertificate {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// rustls refused the configuration (no protocol version in common with the provider).
    #[error("cannot configure TLS: {0}")]
    Config(#[source] rustls::Error),
}

/// A TLS handshake that failed: the server's certificate was refused, or the server
/// and docket found no protocol in common.
#[derive(Debug, thiserror::Error)]
#[error("the TLS handshake failed: {}", describe(.0))]
pub struct HandshakeError(#[source] pub rustls::Error);

/// What a handshake failure means, in the words a person configuring the endpoint needs.
fn describe(err: &rustls::Error) -> String {
    match err {
        rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => format!(
            "the server's certificate is not trusted: no root of the system's store or of \
             the configured CA file signed it ({err})"
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!("the server's certificate does not name the URL's host ({err})"),
        rustls::Error::InvalidCertificate(
            CertificateError::Expired | CertificateError::ExpiredContext { .. },
        ) => format!("the server's certificate has expired ({err})"),
        other => other.to_string(),
    }
}

/// The roots of the operating system's store, read on first use. A store that cannot
/// be read (or holds nothing) leaves only the configured CA files to trust.
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            tracing::warn!(
                errors = found.errors.len(),
                "no root certificates found in the system's store: only configured CA files \
                 are trusted"
            );
        }
        found.certs
    })
}

/// The rustls client configuration: the system's roots, and those of `ca_file`.
///
/// # Errors
/// [`TlsSetupError`] when `ca_file` cannot be read or holds no usable certificate.
pub fn client_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, TlsSetupError> {
    let mut roots = RootCertStore::empty();
    // Certificates of the system's store that rustls cannot use are left out, as
    // browsers and curl leave them.
    roots.add_parsable_certificates(system_roots().iter().cloned());
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|source| TlsSetupError::ReadCaFile {
            path: path.to_owned(),
            source,
        })?;
        let mut count = 0;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|source| TlsSetupError::Pem {
                path: path.to_owned(),
                source,
            })?;
            roots
                .add(cert)
                .map_err(|source| TlsSetupError::BadCertificate {
                    path: path.to_owned(),
                    source,
                })?;
            count += 1;
        }
        if count == 0 {
            return Err(TlsSetupError::NoCertificate {
                path: path.to_owned(),
            });
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsSetupError::Config)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// The TLS failure under a client error, if a handshake is what failed.
pub fn handshake_failure<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a rustls::Error> {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        next = match err.downcast_ref::<std::io::Error>() {
            // An I/O error's `source` skips the error it wraps (the connector wraps
            // tokio-rustls's I/O error in another): go into it instead.
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}
