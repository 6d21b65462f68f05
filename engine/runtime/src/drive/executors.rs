//! Executors for a workflow's agents, built once and shared by every run of the runtime
//! (a command agent's process is kept between calls).

use std::collections::BTreeMap;

use std::sync::{Arc, Mutex, PoisonError};

use crate::agent::{AgentCallError, AgentExecutor, CommandExecutor, HttpExecutor};
use crate::transport::{CommandConfig, HttpOptions, resolve_program};
use docket_decider::{ExecutorSpec, WorkflowSpec};

#[derive(Default)]
pub(super) struct Executors {
    registered: Mutex<BTreeMap<String, Arc<dyn AgentExecutor>>>,
    built: Mutex<BTreeMap<String, Arc<dyn AgentExecutor>>>,
}

fn config_error(message: String) -> AgentCallError {
    AgentCallError::Io {
        during: "setting up the agent's executor".to_owned(),
        source: std::io::Error::other(message),
    }
}

impl Executors {
    pub(super) fn register(&self, agent: &str, executor: Arc<dyn AgentExecutor>) {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(agent.to_owned(), executor);
    }

    pub(super) fn is_registered(&self, agent: &str) -> bool {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(agent)
    }

    pub(super) fn get(
        &self,
        workflow: &WorkflowSpec,
        agent: &str,
    ) -> Result<Arc<dyn AgentExecutor>, AgentCallError> {
        let spec = workflow
            .agents
            .get(agent)
            .ok_or_else(|| config_error(format!("the workflow has no agent `{agent}`")))?;
        if let ExecutorSpec::InProcess { .. } = spec.executor {
            return self
                .registered
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(agent)
                .cloned()
                .ok_or_else(|| {
                    config_error(format!(
                        "agent `{agent}` is in-process but no Rust agent was registered for it"
                    ))
                });
        }
        // One executor (one pool of processes) per agent and way of reaching it.
        let key = format!(
            "{agent}\u{0}{}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{:?}",
            serde_json::to_string(&spec.executor).unwrap_or_default(),
            spec.cwd,
            spec.max_response_bytes,
            spec.processes,
            spec.requests_per_process,
            spec.ca_file,
            spec.bearer_env,
            spec.headers_env
        );
        let limit = spec
            .max_response_bytes
            .and_then(|limit| usize::try_from(limit).ok());
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(executor) = built.get(&key) {
            return Ok(executor.clone());
        }
        let executor: Arc<dyn AgentExecutor> = match &spec.executor {
            ExecutorSpec::Command { command, args, env } => {
                let mut config = CommandConfig::new(resolve_program(command)).args(args);
                for (k, v) in env {
                    config = config.env(k, v);
                }
                if let Some(cwd) = &spec.cwd {
                    config = config.current_dir(cwd);
                }
                if let Some(limit) = limit {
                    config = config.max_response_bytes(limit);
                }
                Arc::new(CommandExecutor::pooled(
                    config,
                    agent_processes(spec.processes),
                    spec.requests_per_process
                        .and_then(|n| usize::try_from(n).ok())
                        .and_then(std::num::NonZeroUsize::new)
                        .unwrap_or(std::num::NonZeroUsize::MIN),
                ))
            }
            ExecutorSpec::Http { http } => {
                let options = HttpOptions::from_section(
                    spec.ca_file.as_deref(),
                    spec.bearer_env.as_deref(),
                    &spec.headers_env,
                );
                let executor = HttpExecutor::with_options(http, &options)
                    .map_err(|e| config_error(e.to_string()))?;
                Arc::new(match limit {
                    Some(limit) => executor.max_response_bytes(limit),
                    None => executor,
                })
            }
            ExecutorSpec::InProcess { .. } => {
                return Err(config_error(format!("agent `{agent}` is in-process")));
            }
        };
        built.insert(key, executor.clone());
        Ok(executor)
    }
}

/// How many processes a `command` agent may have: its `processes`, else as many as the
/// machine has cores (docs/workflow.md#agents).
fn agent_processes(declared: Option<u32>) -> std::num::NonZeroUsize {
    declared
        .and_then(|n| usize::try_from(n).ok())
        .and_then(std::num::NonZeroUsize::new)
        .unwrap_or_else(|| {
            std::thread::available_parallelism().unwrap_or(std::num::NonZeroUsize::MIN)
        })
}
