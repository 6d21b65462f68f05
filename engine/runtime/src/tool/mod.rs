//! Tool executors: how a governed tool call (an agent's `call_tool`, allowed by the
//! decider and recorded as `tool.call_scheduled`) is run, over the same transports as
//! agents: a child process speaking JSON lines ([`CommandToolExecutor`]), an HTTP POST
//! ([`HttpToolExecutor`]), Rust code ([`InProcessToolExecutor`]), and an MCP server over
//! stdio ([`McpToolExecutor`], through the `rmcp` crate) so existing MCP tools can be
//! governed. Every failure is a [`ToolCallError`] with a stable code, recorded as
//! `tool.failed`; the executor never decides whether a call may run.

mod command;
mod http;
mod in_process;
mod mcp;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

pub use command::CommandToolExecutor;
pub use http::HttpToolExecutor;
pub use in_process::InProcessToolExecutor;
pub use mcp::McpToolExecutor;

use crate::transport::resolve_program;
use crate::transport::{CommandConfig, HttpOptions, Interrupted, TransportError};
use docket_decider::{ToolAnswerError, ToolRequest, ToolSpec, WorkflowSpec, accept_tool_answer};

/// The future a tool executor returns for one call: the tool's result (any JSON).
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolCallError>> + Send + 'a>>;

/// Runs governed tool calls. It is only ever given calls the decider allowed.
pub trait ToolExecutor: Send + Sync {
    /// Runs `request.tool` with `request.arguments`, within `request.timeout_ms`.
    fn call<'a>(&'a self, request: &'a ToolRequest) -> ToolFuture<'a>;
}

/// Why a tool call gave no result. Each has a stable code, recorded in `tool.failed`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolCallError {
    /// No answer within the call's `timeout_ms` (a command's process is killed).
    #[error("{endpoint}: no answer within {timeout_ms} ms")]
    Timeout {
        /// The executor.
        endpoint: String,
        /// The limit.
        timeout_ms: u64,
    },
    /// The executor could not be reached, or ended without answering.
    #[error("{endpoint}: {message}")]
    Unavailable {
        /// The executor.
        endpoint: String,
        /// What happened.
        message: String,
    },
    /// The answer is not a tool answer (not JSON, wrong id, both or neither of
    /// `result` / `error`, an unknown field, too large).
    #[error("{endpoint}: malformed answer: {message}")]
    Malformed {
        /// The executor.
        endpoint: String,
        /// What is wrong, naming where.
        message: String,
    },
    /// The tool refused or failed the call: its own code and message.
    #[error("{endpoint}: {code}: {message}")]
    Refused {
        /// The executor.
        endpoint: String,
        /// The tool's code.
        code: String,
        /// The tool's message.
        message: String,
    },
    /// No executor serves the section (an `in_process` section nothing registered).
    #[error("no executor serves [tools.{section}]")]
    NoExecutor {
        /// The section.
        section: String,
    },
    /// The MCP server does not list the tool.
    #[error("{endpoint}: the MCP server has no tool `{tool}` (it lists: {listed})")]
    UnknownTool {
        /// The server.
        endpoint: String,
        /// The tool asked for.
        tool: String,
        /// The tools it lists, comma-separated.
        listed: String,
    },
}

impl ToolCallError {
    /// The stable code recorded in `tool.failed`.
    #[must_use]
    pub fn code(&self) -> String {
        match self {
            Self::Timeout { .. } => "TOOL_TIMEOUT".to_owned(),
            Self::Unavailable { .. } => "TOOL_UNAVAILABLE".to_owned(),
            Self::Malformed { .. } => "TOOL_MALFORMED_ANSWER".to_owned(),
            Self::Refused { code, .. } => code.clone(),
            Self::NoExecutor { .. } => "TOOL_NO_EXECUTOR".to_owned(),
            Self::UnknownTool { .. } => "TOOL_UNKNOWN".to_owned(),
        }
    }
}

/// The tool executors a runtime knows, by `[tools.NAME]` section: registered in code
/// (in-process) first, else built from the workflow's section and kept (a command's or an
/// MCP server's process lives between calls and runs).
#[derive(Default)]
pub struct ToolExecutors {
    registered: Mutex<BTreeMap<String, Arc<dyn ToolExecutor>>>,
    built: Mutex<BTreeMap<String, Arc<dyn ToolExecutor>>>,
}

impl ToolExecutors {
    /// Registers an executor for the section `section` (declared `in_process = true`).
    pub fn register(&self, section: &str, executor: Arc<dyn ToolExecutor>) {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(section.to_owned(), executor);
    }

    /// The executor of `section` in a run of `workflow`.
    ///
    /// # Errors
    /// [`ToolCallError::NoExecutor`] when the section is not declared or nothing was
    /// registered for an `in_process` one; [`ToolCallError::Unavailable`] for a bad URL.
    pub fn get(
        &self,
        workflow: &WorkflowSpec,
        section: &str,
    ) -> Result<Arc<dyn ToolExecutor>, ToolCallError> {
        let registered = self
            .registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(section)
            .cloned();
        if let Some(executor) = registered {
            return Ok(executor);
        }
        let no_executor = || ToolCallError::NoExecutor {
            section: section.to_owned(),
        };
        let spec = workflow.tools.get(section).ok_or_else(no_executor)?;
        let key = format!(
            "{section}\u{0}{}",
            serde_json::to_string(spec).unwrap_or_default()
        );
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(executor) = built.get(&key) {
            return Ok(executor.clone());
        }
        let executor = build_declared(section, spec)?;
        built.insert(key, executor.clone());
        Ok(executor)
    }
}

fn command_config(program: &str, spec: &ToolSpec) -> CommandConfig {
    let mut config = CommandConfig::new(resolve_program(program)).args(&spec.args);
    for (k, v) in &spec.env {
        config = config.env(k, v);
    }
    config
}

/// Builds the executor a `[tools.NAME]` section declares.
fn build_declared(section: &str, spec: &ToolSpec) -> Result<Arc<dyn ToolExecutor>, ToolCallError> {
    if let Some(command) = &spec.command {
        return Ok(Arc::new(CommandToolExecutor::new(command_config(
            command, spec,
        ))));
    }
    if let Some(program) = &spec.mcp {
        return Ok(Arc::new(McpToolExecutor::new(command_config(
            program, spec,
        ))));
    }
    if let Some(url) = &spec.http {
        let options = HttpOptions::from_section(
            spec.ca_file.as_deref(),
            spec.bearer_env.as_deref(),
            &spec.headers_env,
        );
        return Ok(Arc::new(
            HttpToolExecutor::with_options(url, &options).map_err(|e| {
                ToolCallError::Unavailable {
                    endpoint: format!("[tools.{section}]"),
                    message: e.to_string(),
                }
            })?,
        ));
    }
    Err(ToolCallError::NoExecutor {
        section: section.to_owned(),
    })
}

/// One call over a byte transport: the request as JSON (a line when `line`), carried by
/// `send` before the call's deadline, its answer checked against the call.
async fn exchange<Sent>(
    request: &ToolRequest,
    line: bool,
    endpoint: &str,
    send: impl FnOnce(Vec<u8>, Instant) -> Sent,
) -> Result<Value, ToolCallError>
where
    Sent: Future<Output = Result<Vec<u8>, TransportError>>,
{
    let (document, deadline) = encode_call(request, line, endpoint)?;
    let answer = send(document, deadline)
        .await
        .map_err(|err| transport_error(err, request, endpoint))?;
    accept(request, endpoint, &answer)
}

/// The request as JSON (a line when `line`), and the call's deadline.
fn encode_call(
    request: &ToolRequest,
    line: bool,
    endpoint: &str,
) -> Result<(Vec<u8>, Instant), ToolCallError> {
    let mut document = serde_json::to_vec(request).map_err(|err| ToolCallError::Unavailable {
        endpoint: endpoint.to_owned(),
        message: err.to_string(),
    })?;
    if line {
        document.push(b'\n');
    }
    Ok((
        document,
        Instant::now() + Duration::from_millis(request.timeout_ms),
    ))
}

/// An executor's answer checked against the call it answers.
fn accept(request: &ToolRequest, endpoint: &str, answer: &[u8]) -> Result<Value, ToolCallError> {
    accept_tool_answer(request, answer).map_err(|err| match err {
        ToolAnswerError::Malformed(message) => ToolCallError::Malformed {
            endpoint: endpoint.to_owned(),
            message,
        },
        ToolAnswerError::Refused { code, message } => ToolCallError::Refused {
            endpoint: endpoint.to_owned(),
            code,
            message,
        },
    })
}

/// What a transport failure means for a tool call.
fn transport_error(err: TransportError, request: &ToolRequest, endpoint: &str) -> ToolCallError {
    let endpoint = endpoint.to_owned();
    match err {
        TransportError::TimedOut => ToolCallError::Timeout {
            endpoint,
            timeout_ms: request.timeout_ms,
        },
        TransportError::LineTooLong { .. } | TransportError::BodyTooLong { .. } => {
            ToolCallError::Malformed {
                endpoint,
                message: err.to_string(),
            }
        }
        TransportError::HttpStatus {
            status,
            body_excerpt,
        } if (400..500).contains(&status) => ToolCallError::Refused {
            endpoint,
            code: format!("TOOL_HTTP_{status}"),
            message: format!("HTTP {status}; body began with {body_excerpt:?}"),
        },
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
            ToolCallError::Unavailable {
                endpoint,
                message: format!(
                    "the process ended ({exit}) without answering ({what}); last stderr: {stderr_tail:?}"
                ),
            }
        }
        other => ToolCallError::Unavailable {
            endpoint,
            message: other.to_string(),
        },
    }
}
