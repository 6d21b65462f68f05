//! Agents as commands: child processes speaking JSON lines, one request line in on stdin,
//! one response line out on stdout (`docs/agent-protocol.md`). The process plumbing
//! (kept between calls, restarted, killed at the deadline, stderr tail) is
//! [`ProcessTransport`](crate::transport::ProcessTransport)'s; several processes of one
//! agent are a [`ProcessPool`].

use std::num::NonZeroUsize;

use super::{AgentCallError, AgentExecutor, CallFuture, accept_response, encode, traced};
use crate::transport::{CommandConfig, ProcessPool};
use docket_decider::AgentRequest;

/// An agent behind child processes' stdin and stdout: up to `processes` of them
/// (`[agents.NAME] processes`, docs/workflow.md#agents), each serving one call at a time
/// (the protocol has one request in flight per process). A call takes the first idle
/// process, so calls one after another reach the same one; calls waiting for a process go
/// by their priority (docs/agent-protocol.md#priority), and time queued counts against
/// the request's `timeout_ms`.
pub struct CommandExecutor {
    pool: ProcessPool,
}

impl CommandExecutor {
    /// An executor of one process, started on its first call. A process that exits
    /// cleanly after each answer (a one-shot agent) serves every call.
    #[must_use]
    pub fn new(config: CommandConfig) -> Self {
        Self::pooled(config, NonZeroUsize::MIN, NonZeroUsize::MIN)
    }

    /// An executor of up to `processes` processes, each started when a call finds every
    /// started one full; each takes `requests_per_process` requests at once
    /// (docs/agent-protocol.md#several-requests-at-once), answered in any order.
    #[must_use]
    pub fn pooled(
        config: CommandConfig,
        processes: NonZeroUsize,
        requests_per_process: NonZeroUsize,
    ) -> Self {
        Self {
            pool: ProcessPool::new(&config, processes, requests_per_process, true),
        }
    }

    /// How many times its processes have been started (1 after the first call, more
    /// after restarts or when calls overlapped).
    #[must_use]
    pub fn start_count(&self) -> u64 {
        self.pool.start_count()
    }

    /// How many of its processes have been started at least once: the most calls that
    /// were under way at once, up to its size.
    #[must_use]
    pub fn processes_started(&self) -> usize {
        self.pool.started()
    }

    /// Kills its processes, if any is running. The next call starts a new one.
    pub async fn shutdown(&self) {
        self.pool.shutdown().await;
    }
}

impl AgentExecutor for CommandExecutor {
    fn call<'a>(&'a self, request: &'a AgentRequest) -> CallFuture<'a> {
        traced("command", request, async move {
            let (line, deadline) = encode(request, true)?;
            // An answer that is not a response (a banner line, a half-written document)
            // or that answers another request leaves the process out of step with the
            // requests: it is killed before the next call, which starts a fresh one.
            self.pool
                .exchange_checked(
                    &line,
                    (&request.request_id, request.priority),
                    deadline,
                    |answer| {
                        let checked = accept_response(request, &answer);
                        let in_step = !matches!(
                            checked,
                            Err(AgentCallError::Malformed(_)
                                | AgentCallError::RequestIdMismatch { .. })
                        );
                        (checked, in_step)
                    },
                )
                .await
                .map_err(|err| AgentCallError::from_transport(err, request))?
        })
    }
}
