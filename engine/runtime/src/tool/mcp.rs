//! A tool executor fronting an MCP server over stdio (the `rmcp` crate's client), so the
//! tools of any existing MCP server are governed like every other tool: docket starts the
//! server on the first call, lists its tools once, and makes one `tools/call` per allowed
//! `call_tool`. A call of a tool the server does not list fails (`TOOL_UNKNOWN`) without
//! reaching the server; a result the server marks `isError` fails with `TOOL_ERROR`; a
//! broken connection drops the server, which is started again on the next call.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use tokio::sync::Mutex;

use super::{ToolCallError, ToolExecutor, ToolFuture};
use crate::transport::CommandConfig;
use docket_decider::ToolRequest;

struct Connection {
    service: RunningService<RoleClient, ()>,
    /// The tools the server listed when it started, sorted.
    tools: Vec<String>,
}

/// A tool executor in front of an MCP server started as a child process.
pub struct McpToolExecutor {
    config: CommandConfig,
    endpoint: String,
    connection: Mutex<Option<Connection>>,
}

impl McpToolExecutor {
    /// An executor that starts the server on its first call.
    #[must_use]
    pub fn new(config: CommandConfig) -> Self {
        let endpoint = format!("MCP server {}", config.program.display());
        Self {
            config,
            endpoint,
            connection: Mutex::new(None),
        }
    }

    fn unavailable(&self, message: String) -> ToolCallError {
        ToolCallError::Unavailable {
            endpoint: self.endpoint.clone(),
            message,
        }
    }

    /// Starts the server, initializes the session and lists its tools.
    async fn connect(&self) -> Result<Connection, ToolCallError> {
        let mut command = tokio::process::Command::new(&self.config.program);
        command.args(&self.config.args);
        for (k, v) in &self.config.env {
            command.env(k, v);
        }
        if let Some(dir) = &self.config.current_dir {
            command.current_dir(dir);
        }
        let transport = TokioChildProcess::new(command)
            .map_err(|e| self.unavailable(format!("cannot start it: {e}")))?;
        let service = ()
            .serve(transport)
            .await
            .map_err(|e| self.unavailable(format!("initializing the MCP session: {e}")))?;
        let mut tools: Vec<String> = service
            .list_all_tools()
            .await
            .map_err(|e| self.unavailable(format!("listing its tools: {e}")))?
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        tools.sort();
        tracing::info!(server = %self.endpoint, tools = %tools.join(","), "MCP server listed its tools");
        Ok(Connection { service, tools })
    }

    async fn run(&self, request: &ToolRequest) -> Result<Value, ToolCallError> {
        let arguments = match &request.arguments {
            Value::Null => None,
            Value::Object(map) => Some(map.clone()),
            other => {
                return Err(ToolCallError::Refused {
                    endpoint: self.endpoint.clone(),
                    code: "TOOL_INVALID_ARGUMENTS".to_owned(),
                    message: format!(
                        "an MCP tool takes an object of arguments, not {}",
                        json_kind(other)
                    ),
                });
            }
        };
        let mut slot = self.connection.lock().await;
        if slot.is_none() {
            *slot = Some(self.connect().await?);
        }
        let Some(connection) = slot.as_ref() else {
            return Err(self.unavailable("no session".to_owned()));
        };
        if connection.tools.binary_search(&request.tool).is_err() {
            return Err(ToolCallError::UnknownTool {
                endpoint: self.endpoint.clone(),
                tool: request.tool.clone(),
                listed: connection.tools.join(", "),
            });
        }
        let mut params = CallToolRequestParams::new(request.tool.clone());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let result = match connection.service.call_tool(params).await {
            Ok(result) => result,
            Err(e) => {
                // The session is in doubt: start a new server next time.
                *slot = None;
                return Err(self.unavailable(format!("calling `{}`: {e}", request.tool)));
            }
        };
        if result.is_error == Some(true) {
            let message = result
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                .collect::<Vec<_>>()
                .join("\n");
            return Err(ToolCallError::Refused {
                endpoint: self.endpoint.clone(),
                code: "TOOL_ERROR".to_owned(),
                message,
            });
        }
        serde_json::to_value(&result).map_err(|e| ToolCallError::Malformed {
            endpoint: self.endpoint.clone(),
            message: e.to_string(),
        })
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl ToolExecutor for McpToolExecutor {
    fn call<'a>(&'a self, request: &'a ToolRequest) -> ToolFuture<'a> {
        Box::pin(async move {
            let limit = Duration::from_millis(request.timeout_ms);
            match tokio::time::timeout(limit, self.run(request)).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    // A server that did not answer in time is not trusted with the next call.
                    *self.connection.lock().await = None;
                    Err(ToolCallError::Timeout {
                        endpoint: self.endpoint.clone(),
                        timeout_ms: request.timeout_ms,
                    })
                }
            }
        })
    }
}
