//! How an agent call can fail. Each failure is recorded as an agent error and goes through
//! the retry path; none is a panic.

use docket_decider::{AgentRequest, MalformedResponse, ValidationError};

use crate::transport::{ExitReport, Interrupted, InvalidHeaderName, TlsSetupError, TransportError};

/// An agent call that produced no acceptable response.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentCallError {
    /// No response within the request's `timeout_ms`. A child process is killed and
    /// started again on the next call.
    #[error("the agent did not answer within {timeout_ms} ms")]
    Timeout {
        /// The limit that was exceeded.
        timeout_ms: u64,
    },
    /// The agent process ended before answering.
    #[error("the agent process ended ({exit}) before answering; last stderr: {stderr_tail:?}")]
    Crashed {
        /// How it ended.
        exit: ExitReport,
        /// The last bytes it wrote to stderr (bounded), for diagnosis.
        stderr_tail: String,
    },
    /// An in-process agent panicked.
    #[error("the in-process agent panicked: {message}")]
    Panicked {
        /// The panic message, when it was a string.
        message: String,
    },
    /// The response is not a well-formed response document.
    #[error("the agent sent a {0}")]
    Malformed(#[from] MalformedResponse),
    /// The response is larger than the executor accepts; reading stopped at the limit
    /// (a child process is killed and started again on the next call).
    #[error(
        "the response of agent `{agent}` exceeds its limit of {limit} bytes \
         (max_response_bytes; reading stopped after {received} bytes)"
    )]
    Oversized {
        /// The agent.
        agent: String,
        /// The configured limit in bytes.
        limit: usize,
        /// How many bytes had arrived when reading stopped (more than `limit`).
        received: u64,
    },
    /// The response answers another request.
    #[error("the response's request_id {actual:?} does not echo the request's {expected:?}")]
    RequestIdMismatch {
        /// The request's request_id.
        expected: String,
        /// The one in the response.
        actual: String,
    },
    /// The response parsed but breaks a protocol rule.
    #[error("the agent's response breaks the protocol: {0}")]
    Invalid(ValidationError),
    /// An HTTP agent answered with a status other than 2xx.
    #[error("the agent answered HTTP {status}; body began with {body_excerpt:?}")]
    HttpStatus {
        /// The HTTP status code.
        status: u16,
        /// The first bytes of the body.
        body_excerpt: String,
    },
    /// Starting the process, writing the request or reading the response failed.
    #[error("I/O error while {during}: {source}")]
    Io {
        /// What the executor was doing, e.g. `starting ./agent`.
        during: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl AgentCallError {
    /// A stable CATEGORY_SPECIFIC_ERROR code for recording the failure in an event.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Timeout { .. } => "AGENT_TIMEOUT",
            Self::Crashed { .. } => "AGENT_CRASHED",
            Self::Panicked { .. } => "AGENT_PANICKED",
            Self::Malformed(_) => "AGENT_MALFORMED_RESPONSE",
            Self::Oversized { .. } => "AGENT_OVERSIZED_RESPONSE",
            Self::RequestIdMismatch { .. } => "AGENT_REQUEST_ID_MISMATCH",
            Self::Invalid(_) => "AGENT_INVALID_RESPONSE",
            Self::HttpStatus { .. } => "AGENT_HTTP_STATUS",
            Self::Io { .. } => "AGENT_IO_ERROR",
        }
    }

    pub(crate) fn io(during: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            during: during.into(),
            source,
        }
    }

    /// What a transport failure means for a call of `request`.
    pub(crate) fn from_transport(err: TransportError, request: &AgentRequest) -> Self {
        match err {
            TransportError::TimedOut => Self::Timeout {
                timeout_ms: request.timeout_ms,
            },
            TransportError::CannotStart { program, source } => {
                Self::io(format!("starting {}", program.display()), source)
            }
            // A process taking several requests answered one not under way.
            TransportError::Ended {
                during: Interrupted::OutOfStep { named, .. },
                ..
            } => Self::RequestIdMismatch {
                expected: request.request_id.to_string(),
                actual: named.unwrap_or_default(),
            },
            TransportError::Ended {
                exit, stderr_tail, ..
            } => Self::Crashed { exit, stderr_tail },
            TransportError::LineTooLong { limit, received }
            | TransportError::BodyTooLong { limit, received } => Self::Oversized {
                agent: request.target_agent.to_string(),
                limit,
                received,
            },
            TransportError::Stdout(source) => Self::io("reading the agent's stdout", source),
            TransportError::Post { url, source } => Self::io(format!("POSTing to {url}"), source),
            TransportError::Tls { url, source } => Self::io(
                format!("POSTing to {url}"),
                std::io::Error::new(std::io::ErrorKind::InvalidData, *source),
            ),
            // Nothing was sent: a variable the workflow names is missing here.
            TransportError::Credential(source) => Self::io(
                "reading the agent's credentials",
                std::io::Error::new(std::io::ErrorKind::NotFound, source),
            ),
            TransportError::Body(source) => Self::io(
                "reading the response body",
                std::io::Error::other(format!("reading the body: {source}")),
            ),
            TransportError::HttpStatus {
                status,
                body_excerpt,
            } => Self::HttpStatus {
                status,
                body_excerpt,
            },
            // Found when the executor is built, never by a call.
            err @ (TransportError::InvalidUrl { .. }
            | TransportError::UnsupportedScheme { .. }
            | TransportError::CredentialsInClear { .. }
            | TransportError::InvalidHeaderName(_)
            | TransportError::TlsSetup(_)) => Self::io(
                "setting up the agent's executor",
                std::io::Error::other(err),
            ),
        }
    }
}

/// An executor that cannot be built from its configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutorConfigError {
    /// The URL does not parse.
    #[error("invalid agent URL {url:?}: {message}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why it does not parse.
        message: String,
    },
    /// Only `http://` and `https://` URLs are supported.
    #[error("unsupported scheme in agent URL {url:?}: only http:// and https:// are supported")]
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
    Tls(TlsSetupError),
}

impl ExecutorConfigError {
    /// Why an HTTP transport could not be set up for `url`.
    pub(crate) fn from_transport(err: TransportError, url: &str) -> Self {
        match err {
            TransportError::InvalidUrl { url, message } => Self::InvalidUrl { url, message },
            TransportError::UnsupportedScheme { url } => Self::UnsupportedScheme { url },
            TransportError::CredentialsInClear { url } => Self::CredentialsInClear { url },
            TransportError::InvalidHeaderName(err) => Self::InvalidHeaderName(err),
            TransportError::TlsSetup(err) => Self::Tls(err),
            other => Self::InvalidUrl {
                url: url.to_owned(),
                message: other.to_string(),
            },
        }
    }
}
