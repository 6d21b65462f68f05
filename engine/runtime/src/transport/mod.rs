//! How documents reach agents and effect executors, whatever the documents say: a child
//! process speaking JSON lines ([`ProcessTransport`]), an HTTP POST over `http://` or
//! `https://` ([`HttpTransport`], [`tls`]), or Rust code in the engine's process ([`catch_panic`], [`CatchPanic`]).
//!
//! The transports carry bytes and know nothing of either protocol: `agent/` and `effect/`
//! encode their documents, hand them over with a deadline, turn a [`TransportError`] into
//! an `AgentCallError` or an `EffectCallError`, and check the answer.

mod admission;
mod credentials;
mod http;
mod in_process;
mod multiplex;
mod pool;
mod process;
mod tls;

use std::path::PathBuf;

pub use credentials::{CredentialError, HttpOptions, InvalidHeaderName};
pub(crate) use http::HttpTransport;
pub(crate) use in_process::{CatchPanic, catch_panic};
pub(crate) use pool::ProcessPool;
pub(crate) use process::ProcessTransport;
pub use process::{CommandConfig, ExitReport, resolve_program};
pub use tls::{HandshakeError, HttpsConnector, TlsSetupError, https_connector};

/// The default limit on one answer (a response line or body): 1 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// What went wrong carrying a document to its reader and its answer back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TransportError {
    /// No answer before the deadline (time queued behind another exchange included). A
    /// process is killed and started again on the next exchange.
    #[error("no answer before the deadline")]
    TimedOut,
    /// The process could not be started.
    #[error("cannot start {}: {source}", program.display())]
    CannotStart {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The process ended, or closed its stdout, before answering.
    #[error(
        "the process ended ({exit}) without answering ({during}); last stderr: {stderr_tail:?}"
    )]
    Ended {
        /// How it ended.
        exit: ExitReport,
        /// The last bytes it wrote to stderr (bounded), for diagnosis.
        stderr_tail: String,
        /// Whether the line was being written or the answer read.
        during: Interrupted,
    },
    /// An answer line grew past the limit; reading stopped and the process was killed.
    #[error(
        "the answer line exceeds the limit of {limit} bytes (reading stopped after {received} bytes)"
    )]
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
        /// How many bytes had arrived (more than `limit`).
        received: u64,
    },
    /// An answer body was declared or grew larger than the limit.
    #[error(
        "the answer body exceeds the limit of {limit} bytes ({received} bytes received or declared)"
    )]
    BodyTooLong {
        /// The limit in bytes.
        limit: usize,
        /// The declared length, or how many bytes had arrived.
        received: u64,
    },
    /// Reading the process's stdout failed; the process was killed.
    #[error("reading the process's stdout: {0}")]
    Stdout(#[source] std::io::Error),
    /// Sending the POST or receiving the answer's head failed (connection refused...).
    #[error("POST {url}: {source}")]
    Post {
        /// Where.
        url: hyper::Uri,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The connection broke while the answer body was read.
    #[error("reading the body: {0}")]
    Body(#[source] std::io::Error),
    /// The server answered with a status other than 2xx.
    #[error("HTTP {status}; body began with {body_excerpt:?}")]
    HttpStatus {
        /// The status code.
        status: u16,
        /// The first bytes of the body (bounded).
        body_excerpt: String,
    },
    /// The URL does not parse.
    #[error("invalid URL {url:?}: {message}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why it does not parse.
        message: String,
    },
    /// The URL is not `http://` or `https://` with a host.
    #[error("unsupported URL {url:?}: only http:// and https:// are supported")]
    UnsupportedScheme {
        /// The URL as given.
        url: String,
    },
    /// Credentials would be sent in clear (`http://`) to a host that is not this machine.
    #[error(
        "{url:?} is plain http:// to another host: credentials (`bearer_env`, \
         `headers_env`) are sent over https:// only, or to this machine (localhost)"
    )]
    CredentialsInClear {
        /// The URL as given.
        url: String,
    },
    /// A `headers_env` name is not an HTTP header name.
    #[error(transparent)]
    InvalidHeaderName(InvalidHeaderName),
    /// The TLS client could not be set up (the CA file).
    #[error(transparent)]
    TlsSetup(TlsSetupError),
    /// The TLS handshake failed (the server's certificate was refused...).
    #[error("POST {url}: {source}")]
    Tls {
        /// Where.
        url: hyper::Uri,
        /// Why (boxed: rustls's error is large).
        #[source]
        source: Box<HandshakeError>,
    },
    /// A credential could not be read from the environment; nothing was sent.
    #[error(transparent)]
    Credential(#[from] CredentialError),
}

/// What a process transport was doing when the process turned out to have ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Interrupted {
    /// Writing the line failed (the process no longer reads its stdin).
    #[error("writing the line: {0}")]
    Writing(#[source] std::io::Error),
    /// stdout ended after `partial` bytes of an unfinished answer line.
    #[error("stdout ended after {partial} bytes of an answer")]
    Reading {
        /// How many bytes of the line had arrived.
        partial: usize,
    },
    /// A process taking several lines at once answered with a line that names no line
    /// under way: which answer is whose is lost, so the process was ended.
    #[error("an answer named no request under way ({}; it began {excerpt:?})", named.as_deref().map_or_else(|| "no request_id".to_owned(), |id| format!("request_id {id:?}")))]
    OutOfStep {
        /// The request id it named, if it named one.
        named: Option<String>,
        /// The line's first bytes (bounded).
        excerpt: String,
    },
}
