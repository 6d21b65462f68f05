//! Effect executors as commands: child processes speaking JSON lines (see
//! `docs/effect-protocol.md`), one call line in on stdin, one answer line out on stdout.
//! The process plumbing (kept between calls, restarted, killed at the deadline or when
//! the answer is oversized or breaks the protocol, stderr tail) is [`ProcessTransport`]'s.

use serde::de::DeserializeOwned;

use super::{
    DryRunReport, EffectCallError, EffectExecutor, EffectFuture, EffectReceipt, EffectRequest,
    Verification, accept_effect_answer, effect_error, encode_call,
};
use crate::transport::{CommandConfig, ProcessTransport};
use docket_decider::EffectOp;

/// An effect executor behind a child process's stdin and stdout. Calls are served one at
/// a time (one call in flight per process), and time queued counts against the timeout.
pub struct CommandEffectExecutor {
    transport: ProcessTransport,
    /// The program, naming the executor in errors.
    endpoint: String,
    supports_dry_run: bool,
    /// Replaces each request's `timeout_ms` (the workflow's `[effects]` value).
    timeout_ms: Option<u64>,
}

impl CommandEffectExecutor {
    /// An executor that starts the process on its first call. `config`'s
    /// `max_response_bytes` bounds each answer line.
    #[must_use]
    pub fn new(config: CommandConfig) -> Self {
        let endpoint = config.program.display().to_string();
        Self {
            transport: ProcessTransport::new(config),
            endpoint,
            supports_dry_run: true,
            timeout_ms: None,
        }
    }

    /// Cuts every call off after `timeout_ms` (written into the request the executor
    /// receives) instead of the request's own limit.
    #[must_use]
    pub fn timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = Some(timeout_ms);
        self
    }

    /// Declares whether the executor implements `dry_run` (default: it does).
    #[must_use]
    pub fn supports_dry_run(mut self, supported: bool) -> Self {
        self.supports_dry_run = supported;
        self
    }

    /// How many times the process has been started.
    #[must_use]
    pub fn start_count(&self) -> u64 {
        self.transport.start_count()
    }

    /// Kills the process, if one is running. The next call starts a new one.
    pub async fn shutdown(&self) {
        self.transport.shutdown().await;
    }

    async fn call<T: DeserializeOwned>(
        &self,
        op: EffectOp,
        request: &EffectRequest,
    ) -> Result<T, EffectCallError> {
        let request = &*super::with_timeout(request, self.timeout_ms);
        let (line, deadline) = encode_call(op, request, true, &self.endpoint)?;
        // An answer that is not the protocol's (a banner line, a half-written document, an
        // answer to another effect) leaves the process out of step with the calls: it is
        // killed before the next call, which starts a fresh one.
        self.transport
            .exchange_checked(&line, deadline, |answer| {
                let checked = accept_effect_answer::<T>(request, op, &answer);
                let in_step = !matches!(checked, Err(EffectCallError::Malformed { .. }));
                (checked, in_step)
            })
            .await
            .map_err(|err| effect_error(err, request, &self.endpoint))?
    }
}

impl EffectExecutor for CommandEffectExecutor {
    fn supports_dry_run(&self) -> bool {
        self.supports_dry_run
    }

    fn dry_run<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, DryRunReport> {
        Box::pin(self.call(EffectOp::DryRun, request))
    }

    fn execute<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, EffectReceipt> {
        Box::pin(self.call(EffectOp::Execute, request))
    }

    fn verify<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, Verification> {
        Box::pin(self.call(EffectOp::Verify, request))
    }
}
