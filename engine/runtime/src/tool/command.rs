//! Tool executors as commands: a child process reading one call per line on stdin (the
//! `ToolRequest` as JSON) and answering one line on stdout
//! (`{"tool_call_id", "result"}` or `{"tool_call_id", "error": {"code", "message"}}`).

use super::{ToolCallError, ToolExecutor, ToolFuture, accept, encode_call, transport_error};
use crate::transport::{CommandConfig, ProcessTransport};
use docket_decider::ToolRequest;

/// A tool executor behind a child process's stdin and stdout, kept between calls; restarted
/// after an answer that breaks the protocol (a banner line, an answer to another call), as
/// agents and effect executors are, so one stray line does not poison every later call.
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

impl CommandToolExecutor {
    /// How many times the process has been started.
    #[must_use]
    pub fn start_count(&self) -> u64 {
        self.transport.start_count()
    }
}

impl ToolExecutor for CommandToolExecutor {
    fn call<'a>(&'a self, request: &'a ToolRequest) -> ToolFuture<'a> {
        Box::pin(async move {
            let endpoint = self.endpoint.as_str();
            let (line, deadline) = encode_call(request, true, endpoint)?;
            self.transport
                .exchange_checked(&line, deadline, |answer| {
                    let checked = accept(request, endpoint, &answer);
                    let in_step = !matches!(checked, Err(ToolCallError::Malformed { .. }));
                    (checked, in_step)
                })
                .await
                .map_err(|err| transport_error(err, request, endpoint))?
        })
    }
}
