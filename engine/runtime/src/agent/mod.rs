//! Agent executors: how a request reaches an agent and how its response comes back.
//!
//! The engine holds executors as `Arc<dyn AgentExecutor>`: a workflow names a different
//! kind of executor per agent (a Rust agent in-process, a Python agent as a command, a
//! service over HTTP, a fault-injecting one in tests), so the engine needs one map from
//! agent to executor over an open set of types. The price is one boxed future per call,
//! small next to any agent's work.
//!
//! The executors put the agent protocol on a transport (`crate::transport`): they encode
//! the request, hand it over with the request's deadline, and check what comes back the
//! same way ([`accept_response`]): the bytes must parse as a response, the response must
//! echo the request's request_id and follow the protocol's rules. Every failure is an
//! [`AgentCallError`]; none panics.

mod command;
mod error;
mod http;
mod in_process;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub use command::CommandExecutor;
pub use error::{AgentCallError, ExecutorConfigError};
pub use http::HttpExecutor;
pub use in_process::{InProcessAgent, InProcessExecutor};

use docket_decider::{
    AgentRequest, AgentResponse, ValidateResponse, ValidationProblem, parse_response,
};
use tokio::time::Instant;
use tracing::Instrument;

use crate::transport::TransportError;

/// The future an executor returns for one call.
pub type CallFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AgentResponse, AgentCallError>> + Send + 'a>>;

/// Sends one request to an agent and brings back its checked response.
pub trait AgentExecutor: Send + Sync {
    /// Calls the agent. The call ends within the request's `timeout_ms` (for in-process
    /// agents: when the agent yields), with a response that echoes the request's
    /// request_id and passes [`ValidateResponse::validate`], or with an [`AgentCallError`].
    fn call<'a>(&'a self, request: &'a AgentRequest) -> CallFuture<'a>;
}

/// Runs one call inside its tracing span (`executor` names the transport) and logs how it
/// ended.
fn traced<'a>(
    executor: &'static str,
    request: &'a AgentRequest,
    call: impl Future<Output = Result<AgentResponse, AgentCallError>> + Send + 'a,
) -> CallFuture<'a> {
    let span = tracing::info_span!(
        "agent_call",
        executor,
        agent = %request.target_agent,
        request_id = %request.request_id,
        attempt = request.attempt,
        run_id = %request.run_id,
    );
    Box::pin(
        async move {
            let outcome = call.await;
            log_outcome(&outcome);
            outcome
        }
        .instrument(span),
    )
}

/// One call over a transport: encodes the request (followed by `\n` when `line`), lets
/// `send` carry it before the request's deadline, and checks the answer.
async fn exchange<Sent>(
    request: &AgentRequest,
    line: bool,
    send: impl FnOnce(Vec<u8>, Instant) -> Sent,
) -> Result<AgentResponse, AgentCallError>
where
    Sent: Future<Output = Result<Vec<u8>, TransportError>>,
{
    let (document, deadline) = encode(request, line)?;
    let answer = send(document, deadline)
        .await
        .map_err(|err| AgentCallError::from_transport(err, request))?;
    accept_response(request, &answer)
}

/// The request as bytes (followed by `\n` when `line`), and its deadline.
fn encode(request: &AgentRequest, line: bool) -> Result<(Vec<u8>, Instant), AgentCallError> {
    let mut document = serde_json::to_vec(request)
        .map_err(|err| AgentCallError::io("encoding the request", err.into()))?;
    if line {
        document.push(b'\n');
    }
    Ok((
        document,
        Instant::now() + Duration::from_millis(request.timeout_ms),
    ))
}

/// Checks a response that arrived as bytes: parse, then [`check_response`].
///
/// # Errors
/// [`AgentCallError::Malformed`], [`AgentCallError::RequestIdMismatch`] or
/// [`AgentCallError::Invalid`].
pub fn accept_response(
    request: &AgentRequest,
    bytes: &[u8],
) -> Result<AgentResponse, AgentCallError> {
    let response = parse_response(bytes)?;
    check_response(request, response)
}

/// Checks a parsed response against the request it answers.
///
/// # Errors
/// [`AgentCallError::RequestIdMismatch`] or [`AgentCallError::Invalid`].
pub fn check_response(
    request: &AgentRequest,
    response: AgentResponse,
) -> Result<AgentResponse, AgentCallError> {
    match response.validate_for(request) {
        Ok(()) => Ok(response),
        Err(err) => match err.problem {
            ValidationProblem::RequestIdMismatch { expected, actual } => {
                Err(AgentCallError::RequestIdMismatch { expected, actual })
            }
            _ => Err(AgentCallError::Invalid(err)),
        },
    }
}

/// Logs how a call ended, inside its span.
fn log_outcome(outcome: &Result<AgentResponse, AgentCallError>) {
    match outcome {
        Ok(response) => tracing::debug!(
            status = %response.status,
            actions = response.actions.len(),
            "agent answered"
        ),
        Err(err) => tracing::warn!(code = err.code(), error = %err, "agent call failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_decider::{AgentResponse, Confidence};
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// Collects what the fmt subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn each_call_is_traced_with_agent_request_id_and_attempt() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);

        let executor = InProcessExecutor::new(|_: &AgentRequest| {
            AgentResponse::success("not-the-id", Confidence::High, Vec::new())
        });
        let mut request =
            AgentRequest::new("req-9", "reasoning", "strategy", "S").in_run("run-3", "ep", "c");
        request.attempt = 2;
        let outcome = executor.call(&request).await;
        assert!(matches!(
            outcome,
            Err(AgentCallError::RequestIdMismatch { .. })
        ));

        let text = String::from_utf8_lossy(
            &captured
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_owned();
        assert!(text.contains("agent_call{"), "{text}");
        for field in [
            "executor=\"in_process\"",
            "agent=strategy",
            "request_id=req-9",
            "attempt=2",
            "run_id=run-3",
            "code=\"AGENT_REQUEST_ID_MISMATCH\"",
        ] {
            assert!(text.contains(field), "missing {field} in {text}");
        }
    }
}
