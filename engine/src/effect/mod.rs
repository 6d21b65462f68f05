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
//! speaking JSON lines, HTTP), one boxed future per call.

mod command;
mod http;
mod in_process;
mod kill_switch_file;
pub mod wire;

use std::future::Future;
use std::pin::Pin;

pub use command::CommandEffectExecutor;
pub use http::HttpEffectExecutor;
pub use in_process::{InProcessEffect, InProcessEffectExecutor};
pub use kill_switch_file::{
    Engagement, FileKillSwitch, KILL_SWITCH_FILE, KILL_SWITCH_HISTORY_FILE, KillSwitchFileError,
    KillSwitchFlip, KillSwitchState,
};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the executor is asked to do, with everything it needs to do it idempotently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EffectRequest {
    /// The run the effect belongs to.
    pub run_id: String,
    /// The episode that asked for it.
    pub episode_id: String,
    /// Unique in the run (`{run}/effect-N`).
    pub effect_id: String,
    /// Effect kind, as the bundle's `[[side_effects]]` names it (`publish`, `dm`...).
    pub kind: String,
    /// Lane (`api`, `browser`...).
    pub lane: String,
    /// The key the executor must apply at most once.
    pub idempotency_key: String,
    /// The effect's parameters, as the agent gave them.
    #[serde(default)]
    pub params: Value,
    /// Which attempt this is for the key, from 1.
    pub attempt: u32,
    /// The call is cut off after this long.
    pub timeout_ms: u64,
}

/// The answer to a dry run: would the effect work, and what would it do?
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DryRunReport {
    /// The dry run passed: executing is expected to succeed.
    pub ok: bool,
    /// What the effect would do (a rendered payload, a diff...), for the record.
    #[serde(default)]
    pub preview: Value,
    /// Why it would fail, or any note for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The executor's receipt for an applied effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EffectReceipt {
    /// What the outside world returned (a post id, a message id...).
    #[serde(default)]
    pub result: Value,
}

/// Whether the effect behind an idempotency key happened, as the executor knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Verification {
    /// It happened; this is its receipt.
    Applied {
        /// What it returned.
        #[serde(default)]
        result: Value,
    },
    /// It did not happen: executing it is safe.
    NotApplied,
    /// The executor cannot tell; a human must look (the effect becomes needs_review).
    Unknown {
        /// Why it cannot tell.
        message: String,
    },
}

/// An effect call that produced no usable answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EffectCallError {
    /// The executor refused or failed the effect and said why.
    #[error("effect executor failed `{effect_id}` with {code}: {message}")]
    Failed {
        /// The effect.
        effect_id: String,
        /// The executor's error code.
        code: String,
        /// What it said.
        message: String,
    },
    /// No answer within the request's `timeout_ms`.
    #[error("effect executor did not answer `{effect_id}` within {timeout_ms} ms")]
    Timeout {
        /// The effect.
        effect_id: String,
        /// The limit.
        timeout_ms: u64,
    },
    /// The answer could not be understood (not JSON, wrong shape, wrong effect id...).
    #[error("effect executor answered `{effect_id}` with something malformed: {message}")]
    Malformed {
        /// The effect.
        effect_id: String,
        /// What was wrong.
        message: String,
    },
    /// The executor could not be reached (process died, connection refused...).
    #[error("effect executor for `{effect_id}` is unavailable: {message}")]
    Unavailable {
        /// The effect.
        effect_id: String,
        /// What happened.
        message: String,
    },
    /// No executor serves this effect kind.
    #[error("no effect executor for kind `{kind}` (declare one in the workflow's [effects])")]
    NoExecutor {
        /// The kind.
        kind: String,
    },
}

impl EffectCallError {
    /// A stable code for the record (`EFFECT_TIMEOUT`...).
    #[must_use]
    pub fn code(&self) -> &str {
        match self {
            Self::Failed { code, .. } => code,
            Self::Timeout { .. } => "EFFECT_TIMEOUT",
            Self::Malformed { .. } => "EFFECT_MALFORMED",
            Self::Unavailable { .. } => "EFFECT_UNAVAILABLE",
            Self::NoExecutor { .. } => "EFFECT_NO_EXECUTOR",
        }
    }
}

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

/// Where the runtime reads the kill switches before every effect execution. The switches
/// are flipped by another process (`docket kill-switch on`) while runs are going, so a
/// source reads their current state on every call; the runtime records what it read.
pub trait KillSwitchSource: Send + Sync {
    /// The switches engaged now: `global` and/or lane names, sorted.
    ///
    /// # Errors
    /// When the state cannot be read; the runtime then treats every switch as engaged
    /// (an unreadable kill switch must stop effects, not let them through).
    fn engaged(&self) -> Result<Vec<String>, KillSwitchError>;
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
    fn engaged(&self) -> Result<Vec<String>, KillSwitchError> {
        Ok(self
            .engaged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect())
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

    /// The executor for `kind` in a run of `workflow`.
    ///
    /// # Errors
    /// [`EffectCallError::NoExecutor`] when none is registered or declared.
    pub fn get(
        &self,
        workflow: &crate::workflow::WorkflowSpec,
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
    spec: &crate::workflow::EffectSpec,
) -> Result<std::sync::Arc<dyn EffectExecutor>, EffectCallError> {
    let supports_dry_run = spec.supports_dry_run.unwrap_or(true);
    if let Some(command) = &spec.command {
        let mut config =
            crate::executor::StdioConfig::new(crate::runtime::resolve_program(command))
                .args(&spec.args);
        for (k, v) in &spec.env {
            config = config.env(k, v);
        }
        return Ok(std::sync::Arc::new(
            CommandEffectExecutor::new(config)
                .supports_dry_run(supports_dry_run)
                .timeout_ms(spec.timeout_ms()),
        ));
    }
    if let Some(url) = &spec.http {
        let executor = HttpEffectExecutor::new(url).map_err(|e| EffectCallError::Unavailable {
            effect_id: String::new(),
            message: format!("[effects.{kind}]: {e}"),
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
