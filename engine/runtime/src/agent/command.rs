//! Agents as commands: child processes speaking JSON lines, one request line in on stdin,
//! one response line out on stdout (`docs/agent-protocol.md`). The process plumbing
//! (kept between calls, restarted, killed at the deadline, stderr tail) is
//! [`ProcessTransport`]'s.

use super::{AgentCallError, AgentExecutor, CallFuture, accept_response, encode, traced};
use crate::transport::{CommandConfig, ProcessTransport};
use docket_decider::AgentRequest;

/// An agent behind a child process's stdin and stdout. Calls to one executor are served
/// one at a time (the protocol has one request in flight per process), and time queued
/// counts against the request's `timeout_ms`.
pub struct CommandExecutor {
    transport: ProcessTransport,
}

impl CommandExecutor {
    /// An executor that starts the process on its first call. A process that exits
    /// cleanly after each answer (a one-shot agent) serves every call.
    #[must_use]
    pub fn new(config: CommandConfig) -> Self {
        Self {
            transport: ProcessTransport::new(config).retry_clean_exit(true),
        }
    }

    /// How many times the process has been started (1 after the first call, more after
    /// restarts).
    #[must_use]
    pub fn start_count(&self) -> u64 {
        self.transport.start_count()
    }

    /// Kills the process, if one is running. The next call starts a new one.
    pub async fn shutdown(&self) {
        self.transport.shutdown().await;
    }
}

impl AgentExecutor for CommandExecutor {
    fn call<'a>(&'a self, request: &'a AgentRequest) -> CallFuture<'a> {
        traced("command", request, async move {
            let (line, deadline) = encode(request, true)?;
            // An answer that is not a response (a banner line, a half-written document)
            // or that answers another request leaves the process out of step with the
            // requests: it is killed before the next call, which starts a fresh one.
            self.transport
                .exchange_checked(&line, deadline, |answer| {
                    let checked = accept_response(request, &answer);
                    let in_step = !matches!(
                        checked,
                        Err(AgentCallError::Malformed(_) | AgentCallError::RequestIdMismatch { .. })
                    );
                    (checked, in_step)
                })
                .await
                .map_err(|err| AgentCallError::from_transport(err, request))?
        })
    }
}
