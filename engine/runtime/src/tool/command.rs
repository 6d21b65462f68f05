//! Tool executors as commands: a child process reading one call per line on stdin (the
//! `ToolRequest` as JSON) and answering one line on stdout
//! (`{"tool_call_id", "result"}` or `{"tool_call_id", "error": {"code", "message"}}`).

use super::{ToolExecutor, ToolFuture, exchange};
use crate::transport::{CommandConfig, ProcessTransport};
use docket_decider::ToolRequest;

/// A tool executor behind a child process's stdin and stdout, kept between calls.
pub struct CommandToolExecutor {
    transport: ProcessTransport,
    endpoint: String,
}

impl CommandToolExecutor {
    /// An executor that starts the process on its first call.
    #[must_use]
    pub fn new(config: CommandConfig) -> Self {
        let endpoint = config.program.display().to_string();
        Self {
            transport: ProcessTransport::new(config),
            endpoint,
        }
    }
}

impl ToolExecutor for CommandToolExecutor {
    fn call<'a>(&'a self, request: &'a ToolRequest) -> ToolFuture<'a> {
        let transport = &self.transport;
        Box::pin(exchange(
            request,
            true,
            &self.endpoint,
            move |line, deadline| async move { transport.exchange(&line, deadline).await },
        ))
    }
}
