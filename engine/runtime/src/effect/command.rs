//! Effect executors as child processes speaking JSON lines (see `docs/effect-protocol.md`):
//! one call line in on stdin, one answer line out on stdout. The process is kept between
//! calls, started again when it has died, and killed when a call times out or its answer
//! is oversized. The process plumbing is the agent executor's (`executor::stdio`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::{
    DryRunReport, EffectCallError, EffectExecutor, EffectFuture, EffectReceipt, EffectRequest,
    Verification,
};
use crate::agent::StdioConfig;
use crate::agent::stdio::{AgentProcess, LineRead, read_line};
use docket_decider::{EffectCall, EffectOp, accept_effect_answer as accept_answer};

/// An effect executor behind a child process's stdin and stdout. Calls are served one at
/// a time (one call in flight per process).
pub struct CommandEffectExecutor {
    config: StdioConfig,
    supports_dry_run: bool,
    /// Replaces each request's `timeout_ms` (the workflow's `[effects]` value).
    timeout_ms: Option<u64>,
    process: Mutex<Option<AgentProcess>>,
    starts: AtomicU64,
}

impl CommandEffectExecutor {
    /// An executor that starts the process on its first call. `config`'s
    /// `max_response_bytes` bounds each answer line.
    #[must_use]
    pub fn new(config: StdioConfig) -> Self {
        Self {
            config,
            supports_dry_run: true,
            timeout_ms: None,
            process: Mutex::new(None),
            starts: AtomicU64::new(0),
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
        self.starts.load(Ordering::Relaxed)
    }

    /// Kills the process, if one is running. The next call starts a new one.
    pub async fn shutdown(&self) {
        if let Some(process) = self.process.lock().await.take() {
            process.kill().await;
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        op: EffectOp,
        request: &EffectRequest,
    ) -> Result<T, EffectCallError> {
        let request = &*super::with_timeout(request, self.timeout_ms);
        let call = EffectCall {
            op,
            request: request.clone(),
        };
        let mut line = serde_json::to_vec(&call).map_err(|e| self.unavailable(request, e))?;
        line.push(b'\n');
        // The deadline includes time queued behind other calls to this executor.
        let deadline = Instant::now() + Duration::from_millis(request.timeout_ms);
        let timeout = || EffectCallError::Timeout {
            effect_id: request.effect_id.clone(),
            timeout_ms: request.timeout_ms,
        };
        let Ok(mut slot) = tokio::time::timeout_at(deadline, self.process.lock()).await else {
            return Err(timeout());
        };
        match tokio::time::timeout_at(deadline, self.exchange(&mut slot, request, &line)).await {
            Ok(Ok(bytes)) => accept_answer(request, op, &bytes),
            Ok(Err(err)) => Err(err),
            Err(_elapsed) => {
                if let Some(process) = slot.take() {
                    tracing::warn!(
                        effect_id = %request.effect_id,
                        timeout_ms = request.timeout_ms,
                        "effect executor timed out; killing its process"
                    );
                    process.kill().await;
                }
                Err(timeout())
            }
        }
    }

    fn unavailable(&self, request: &EffectRequest, err: impl std::fmt::Display) -> EffectCallError {
        EffectCallError::Unavailable {
            effect_id: request.effect_id.clone(),
            message: format!("{}: {err}", self.config.program.display()),
        }
    }

    /// Writes the call and reads one answer line, starting the process if needed.
    async fn exchange(
        &self,
        slot: &mut Option<AgentProcess>,
        request: &EffectRequest,
        line: &[u8],
    ) -> Result<Vec<u8>, EffectCallError> {
        let limit = self.config.max_response_bytes;
        let mut reused = self.ensure_running(slot, request).await?;
        loop {
            let Some(process) = slot.as_mut() else {
                return Err(self.unavailable(request, "the process is gone"));
            };
            if let Err(err) = process.write_line(line).await {
                if reused {
                    // It died after the last call, before taking this one: it cannot have
                    // acted on it, so a new process gets it, once.
                    tracing::info!(
                        "effect executor was gone when the call was written; restarting"
                    );
                    self.restart(slot, request).await?;
                    reused = false;
                    continue;
                }
                return Err(self
                    .ended(slot, request, &format!("writing the call: {err}"))
                    .await);
            }
            let read = read_line(&mut process.stdout, limit).await;
            return match read {
                Ok(LineRead::Line(bytes)) => {
                    process.in_flight = false;
                    Ok(bytes)
                }
                Ok(LineRead::Ended { partial }) => Err(self
                    .ended(
                        slot,
                        request,
                        &format!("stdout ended after {partial} bytes of an answer"),
                    )
                    .await),
                Ok(LineRead::TooLong { received }) => {
                    if let Some(process) = slot.take() {
                        process.kill().await;
                    }
                    Err(EffectCallError::Malformed {
                        effect_id: request.effect_id.clone(),
                        message: format!(
                            "the answer exceeds the limit of {limit} bytes (reading stopped after {received} bytes)"
                        ),
                    })
                }
                Err(err) => {
                    if let Some(process) = slot.take() {
                        process.kill().await;
                    }
                    Err(self.unavailable(request, format!("reading its stdout: {err}")))
                }
            };
        }
    }

    /// The process stopped answering: how it ended and what it last said on stderr.
    async fn ended(
        &self,
        slot: &mut Option<AgentProcess>,
        request: &EffectRequest,
        what: &str,
    ) -> EffectCallError {
        let Some(process) = slot.take() else {
            return self.unavailable(request, what);
        };
        let (exit, stderr_tail) = process.ended().await;
        self.unavailable(
            request,
            format!("the process ended ({exit}) without answering ({what}); last stderr: {stderr_tail:?}"),
        )
    }

    async fn restart(
        &self,
        slot: &mut Option<AgentProcess>,
        request: &EffectRequest,
    ) -> Result<(), EffectCallError> {
        if let Some(process) = slot.take() {
            process.kill().await;
        }
        *slot = Some(self.spawn(request)?);
        Ok(())
    }

    /// Makes sure a live, in-step process is in `slot`; whether it was already running.
    async fn ensure_running(
        &self,
        slot: &mut Option<AgentProcess>,
        request: &EffectRequest,
    ) -> Result<bool, EffectCallError> {
        if let Some(process) = slot.as_mut() {
            if matches!(process.child.try_wait(), Ok(None)) && !process.in_flight {
                return Ok(true);
            }
            tracing::info!("effect executor exited or was left mid-answer; restarting");
        }
        self.restart(slot, request).await?;
        Ok(false)
    }

    fn spawn(&self, request: &EffectRequest) -> Result<AgentProcess, EffectCallError> {
        let process = AgentProcess::spawn(&self.config)
            .map_err(|err| self.unavailable(request, format!("cannot start it: {err}")))?;
        self.starts.fetch_add(1, Ordering::Relaxed);
        Ok(process)
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
