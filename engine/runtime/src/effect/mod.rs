//! Side-effect executors: how an approved side effect (a publish, a DM, a payment) reaches
//! the outside world, and how the engine learns whether it happened.
//!
//! An effect is executed at most once per idempotency key. The runtime records
//! `effect.started` durably before it calls [`EffectExecutor::execute`], so after a crash
//! it knows which effects may have happened; for those it asks [`EffectExecutor::verify`]
//! instead of executing again. An executor therefore keeps (or can look up) what each key
//! did: that ledger is the executor's, not docket's.
//!
//! Like agents, effects are held as `Arc<dyn EffectExecutor>` (in-process, a command
//! speaking JSON lines, HTTP), one boxed future per call; the command and HTTP executors
//! put the effect protocol on a transport (`crate::transport`).

mod command;
mod http;
mod in_process;
mod kill_switch_file;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::time::Instant;

pub use command::CommandEffectExecutor;
pub use http::HttpEffectExecutor;
pub use in_process::{InProcessEffect, InProcessEffectExecutor};
pub use kill_switch_file::{
    Engagement, FileKillSwitch, KILL_SWITCH_FILE, KILL_SWITCH_HISTORY_FILE, KillSwitchFileError,
    KillSwitchFlip, KillSwitchState, is_switch_name,
};

// The effect protocol's types, for this module's executors.
use crate::transport::resolve_program;
use crate::transport::{CommandConfig, HttpOptions, Interrupted, TransportError};
pub(crate) use docket_decider::{
    DryRunReport, EffectCallError, EffectReceipt, EffectRequest, Verification, WorkflowSpec,
};
use docket_decider::{EffectCall, EffectId, EffectOp, accept_effect_answer};

/// The future an effect executor returns for one call.
pub type EffectFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, EffectCallError>> + Send + 'a>>;

/// Carries out side effects of some kinds, once per idempotency key.
pub trait EffectExecutor: Send + Sync {
    /// Whether [`EffectExecutor::dry_run`] does anything. When it does not, an effect whose
    /// policy requires a dry run is recorded as dry-run-unsupported and waits for a human.
    fn supports_dry_run(&self) -> bool;

    /// Checks what executing would do, changing nothing.
    fn dry_run<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, DryRunReport>;

    /// Applies the effect. Must apply it at most once per `idempotency_key`: a second
    /// call with a key already applied returns the first receipt without applying again.
    fn execute<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, EffectReceipt>;

    /// Says whether the effect behind `request.idempotency_key` was applied.
    fn verify<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, Verification>;
}

/// What a kill-switch source returns: the switches engaged now, read when it is awaited.
pub type KillSwitchFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<String>, KillSwitchError>> + Send + 'a>>;

/// Where the runtime reads the kill switches before every effect execution. The switches
/// are flipped by another process (`docket kill-switch on`) while runs are going, so a
/// source reads their current state on every call; the runtime records what it read. The
/// read is a future because a source may be a database shared by many machines (the
/// application layer's, for a PostgreSQL store), which the runtime must not block on.
pub trait KillSwitchSource: Send + Sync {
    /// The switches engaged now: `global` and/or lane names, sorted.
    ///
    /// # Errors
    /// When the state cannot be read; the runtime then treats every switch as engaged
    /// (an unreadable kill switch must stop effects, not let them through).
    fn engaged(&self) -> KillSwitchFuture<'_>;
}

/// The kill switches could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cannot read the kill switches at {location}: {message}")]
pub struct KillSwitchError {
    /// Where they live (a file path...).
    pub location: String,
    /// What went wrong.
    pub message: String,
}

/// Kill switches held in memory: none engaged unless a test or an embedding program
/// engages them.
#[derive(Debug, Default)]
pub struct InMemoryKillSwitch {
    engaged: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl InMemoryKillSwitch {
    /// Engages (`on = true`) or releases a switch (`global` or a lane).
    pub fn set(&self, switch: &str, on: bool) {
        let mut engaged = self
            .engaged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if on {
            engaged.insert(switch.to_owned());
        } else {
            engaged.remove(switch);
        }
    }
}

impl KillSwitchSource for InMemoryKillSwitch {
    fn engaged(&self) -> KillSwitchFuture<'_> {
        let engaged = self
            .engaged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        Box::pin(std::future::ready(Ok(engaged)))
    }
}

/// The effect executors a runtime knows, by effect kind. Executors registered in code
/// (in-process) come first; otherwise the workflow's `[effects.<kind>]` section names one.
#[derive(Default)]
pub struct EffectExecutors {
    registered:
        std::sync::Mutex<std::collections::BTreeMap<String, std::sync::Arc<dyn EffectExecutor>>>,
    /// Executors built from workflows' `[effects]` sections, by kind and section (a
    /// command's process is kept between calls and runs).
    built: std::sync::Mutex<std::collections::BTreeMap<String, std::sync::Arc<dyn EffectExecutor>>>,
}

impl EffectExecutors {
    /// Registers an in-process executor for `kind`.
    pub fn register(&self, kind: &str, executor: std::sync::Arc<dyn EffectExecutor>) {
        self.registered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(kind.to_owned(), executor);
    }

    /// Whether an executor was registered in code for `kind`.
    pub(crate) fn is_registered(&self, kind: &str) -> bool {
        self.registered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(kind)
    }

    /// The executor for `kind` in a run of `workflow`.
    ///
    /// # Errors
    /// [`EffectCallError::NoExecutor`] when none is registered or declared.
    pub fn get(
        &self,
        workflow: &WorkflowSpec,
        kind: &str,
    ) -> Result<std::sync::Arc<dyn EffectExecutor>, EffectCallError> {
        let registered = self
            .registered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(kind)
            .cloned();
        if let Some(executor) = registered {
            return Ok(executor);
        }
        let no_executor = || EffectCallError::NoExecutor {
            kind: kind.to_owned(),
        };
        let spec = workflow.effects.get(kind).ok_or_else(no_executor)?;
        let key = format!(
            "{kind}\u{0}{}",
            serde_json::to_string(spec).unwrap_or_default()
        );
        let mut built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(executor) = built.get(&key) {
            return Ok(executor.clone());
        }
        let executor = build_declared(kind, spec)?;
        built.insert(key, executor.clone());
        Ok(executor)
    }
}

/// Builds the executor an `[effects.<kind>]` section declares (`in_process` ones are
/// registered in code, so reaching here without one is an error).
fn build_declared(
    kind: &str,
    spec: &docket_decider::EffectSpec,
) -> Result<std::sync::Arc<dyn EffectExecutor>, EffectCallError> {
    let supports_dry_run = spec.supports_dry_run.unwrap_or(true);
    if let Some(command) = &spec.command {
        let mut config = CommandConfig::new(resolve_program(command)).args(&spec.args);
        for (k, v) in &spec.env {
            config = config.env(k, v);
        }
        if let Some(cwd) = &spec.cwd {
            config = config.current_dir(cwd);
        }
        return Ok(std::sync::Arc::new(
            CommandEffectExecutor::new(config)
                .supports_dry_run(supports_dry_run)
                .timeout_ms(spec.timeout_ms()),
        ));
    }
    if let Some(url) = &spec.http {
        let options = HttpOptions::from_section(
            spec.ca_file.as_deref(),
            spec.bearer_env.as_deref(),
            &spec.headers_env,
        );
        let executor = HttpEffectExecutor::with_options(url, &options).map_err(|e| {
            EffectCallError::Unavailable {
                effect_id: EffectId::default(),
                message: format!("[effects.{kind}]: {e}"),
            }
        })?;
        return Ok(std::sync::Arc::new(
            executor
                .supports_dry_run(supports_dry_run)
                .timeout_ms(spec.timeout_ms()),
        ));
    }
    Err(EffectCallError::NoExecutor {
        kind: kind.to_owned(),
    })
}

/// `request` with its `timeout_ms` replaced by `timeout_ms`, when given.
fn with_timeout(
    request: &EffectRequest,
    timeout_ms: Option<u64>,
) -> std::borrow::Cow<'_, EffectRequest> {
    match timeout_ms {
        Some(timeout_ms) if timeout_ms != request.timeout_ms => {
            let mut request = request.clone();
            request.timeout_ms = timeout_ms;
            std::borrow::Cow::Owned(request)
        }
        _ => std::borrow::Cow::Borrowed(request),
    }
}

/// One call over a transport: the `{"op", "request"}` document (followed by `\n` when
/// `line`), carried by `send` before the request's deadline, its answer checked.
/// `endpoint` names the executor in the messages of [`EffectCallError::Unavailable`].
async fn exchange<T, Sent>(
    op: EffectOp,
    request: &EffectRequest,
    line: bool,
    endpoint: &str,
    send: impl FnOnce(Vec<u8>, Instant) -> Sent,
) -> Result<T, EffectCallError>
where
    T: DeserializeOwned,
    Sent: Future<Output = Result<Vec<u8>, TransportError>>,
{
    let (document, deadline) = encode_call(op, request, line, endpoint)?;
    let answer = send(document, deadline)
        .await
        .map_err(|err| effect_error(err, request, endpoint))?;
    accept_effect_answer(request, op, &answer)
}

/// The call document (a line when `line`) and the deadline of its answer.
fn encode_call(
    op: EffectOp,
    request: &EffectRequest,
    line: bool,
    endpoint: &str,
) -> Result<(Vec<u8>, Instant), EffectCallError> {
    let call = EffectCall {
        op,
        request: request.clone(),
    };
    let mut document = serde_json::to_vec(&call).map_err(|err| EffectCallError::Unavailable {
        effect_id: request.effect_id.clone(),
        message: format!("{endpoint}: {err}"),
    })?;
    if line {
        document.push(b'\n');
    }
    let deadline = Instant::now() + Duration::from_millis(request.timeout_ms);
    Ok((document, deadline))
}

/// What a transport failure means for an effect call. A refusal (HTTP 4xx) is a failure:
/// nothing was applied. Anything else says nothing about whether the effect happened, so
/// it is a timeout, a malformed answer or an unavailable executor, after which the
/// runtime verifies.
fn effect_error(err: TransportError, request: &EffectRequest, endpoint: &str) -> EffectCallError {
    let effect_id = request.effect_id.clone();
    let unavailable = |detail: String| EffectCallError::Unavailable {
        effect_id: request.effect_id.clone(),
        message: format!("{endpoint}: {detail}"),
    };
    match err {
        TransportError::TimedOut => EffectCallError::Timeout {
            effect_id,
            timeout_ms: request.timeout_ms,
        },
        TransportError::CannotStart { source, .. } => {
            unavailable(format!("cannot start it: {source}"))
        }
        TransportError::Ended {
            exit,
            stderr_tail,
            during,
        } => {
            let what = match during {
                Interrupted::Writing(err) => format!("writing the call: {err}"),
                other @ (Interrupted::Reading { .. } | Interrupted::OutOfStep { .. }) => {
                    other.to_string()
                }
            };
            unavailable(format!(
                "the process ended ({exit}) without answering ({what}); last stderr: {stderr_tail:?}"
            ))
        }
        TransportError::LineTooLong { limit, received } => EffectCallError::Malformed {
            effect_id,
            message: format!(
                "the answer exceeds the limit of {limit} bytes (reading stopped after {received} bytes)"
            ),
        },
        TransportError::BodyTooLong { limit, received } => EffectCallError::Malformed {
            effect_id,
            message: format!(
                "the answer exceeds the limit of {limit} bytes ({received} bytes received or declared)"
            ),
        },
        TransportError::Stdout(err) => unavailable(format!("reading its stdout: {err}")),
        TransportError::Post { source, .. } => unavailable(source.to_string()),
        TransportError::Tls { source, .. } => unavailable(source.to_string()),
        TransportError::Credential(err) => unavailable(err.to_string()),
        TransportError::Body(err) => unavailable(format!("reading the body: {err}")),
        TransportError::HttpStatus {
            status,
            body_excerpt,
        } => {
            let message = format!("HTTP {status}; body began with {body_excerpt:?}");
            if (400..500).contains(&status) {
                EffectCallError::Failed {
                    effect_id,
                    code: format!("EFFECT_HTTP_{status}"),
                    message,
                }
            } else {
                unavailable(message)
            }
        }
        err @ (TransportError::InvalidUrl { .. }
        | TransportError::UnsupportedScheme { .. }
        | TransportError::CredentialsInClear { .. }
        | TransportError::InvalidHeaderName(_)
        | TransportError::TlsSetup(_)) => unavailable(err.to_string()),
    }
}
