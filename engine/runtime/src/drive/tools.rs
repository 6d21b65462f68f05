//! Governed tool calls in the drive loop: a call the decider scheduled
//! (`tool.call_scheduled`, durable before this runs) is run by its section's executor and
//! its outcome recorded as `tool.returned` or `tool.failed`, inside a `tool` span.
//!
//! Exactly once, as far as docket can: a call found scheduled without an outcome when
//! driving began (a crash between scheduling and recording) is run again only when its
//! section is `read_only`; otherwise `tool.failed` with `TOOL_INTERRUPTED` is recorded and
//! the asking agent decides what to do (the tool may or may not have run).

use std::collections::BTreeSet;
use std::time::Duration;

use tracing::Instrument;

use super::{Runtime, RuntimeError};
use crate::tool::ToolCallError;
use docket_decider::{
    Command, RunState, TOOL_INTERRUPTED, ToolCallId, ToolCallRecord, ToolFailed, ToolInput,
    ToolReturned, WorkflowSpec,
};
use docket_policies::PolicyBundle;
use docket_store::EventStore;

/// The tool calls scheduled without an outcome in `state`: when driving begins, these
/// were interrupted.
pub(super) fn interrupted_tools(state: &RunState) -> BTreeSet<ToolCallId> {
    state
        .tool_calls()
        .values()
        .filter(|r| r.phase.awaits_outcome())
        .map(|r| r.tool_call_id.clone())
        .collect()
}

impl<S: EventStore + 'static> Runtime<S> {
    /// Runs one scheduled tool call (or records its interruption) and decides what follows.
    pub(super) async fn tool_step(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        workflow: &WorkflowSpec,
        record: &ToolCallRecord,
        interrupted: bool,
    ) -> Result<(), RuntimeError> {
        let run_id = state.run_id().map(ToString::to_string).unwrap_or_default();
        let span = crate::telemetry::execute_tool(&run_id, record);
        async {
            let outcome = if interrupted && !record.read_only {
                Err((
                    TOOL_INTERRUPTED.to_owned(),
                    format!(
                        "the run stopped while `{}` was running and its result was not recorded; \
                         its [tools.{}] section is not read_only, so docket does not run it again \
                         (it may or may not have run)",
                        record.name,
                        record.section.as_deref().unwrap_or(&record.name)
                    ),
                ))
            } else {
                self.run_tool(workflow, record)
                    .await
                    .map_err(|e| (e.code(), e.to_string()))
            };
            let at_ms = self.now_ms();
            let tool_call_id = record.tool_call_id.clone();
            let input = match outcome {
                Ok(result) => {
                    tracing::info!("tool returned");
                    ToolInput::Returned(ToolReturned {
                        tool_call_id,
                        result,
                        at_ms,
                    })
                }
                Err((code, message)) => {
                    let span = tracing::Span::current();
                    span.record("error.type", code.as_str());
                    span.record("otel.status_code", "ERROR");
                    tracing::warn!(code = %code, message = %message, "tool failed");
                    ToolInput::Failed(ToolFailed {
                        tool_call_id,
                        code,
                        message,
                        at_ms,
                    })
                }
            };
            tracing::Span::current().record("docket.seq", state.version() + 1);
            self.decide_and_append(state, bundle, Command::RecordTool(input))
                .await
        }
        .instrument(span)
        .await
    }

    async fn run_tool(
        &self,
        workflow: &WorkflowSpec,
        record: &ToolCallRecord,
    ) -> Result<serde_json::Value, ToolCallError> {
        let (Some(request), Some(section)) = (&record.request, &record.section) else {
            return Err(ToolCallError::NoExecutor {
                section: record.name.clone(),
            });
        };
        let executor = self.inner.tools.get(workflow, section)?;
        // Executors keep the timeout themselves; this bound catches one that does not.
        let bound = Duration::from_millis(request.timeout_ms.saturating_add(1_000));
        match tokio::time::timeout(bound, executor.call(request)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ToolCallError::Timeout {
                endpoint: format!("[tools.{section}]"),
                timeout_ms: request.timeout_ms,
            }),
        }
    }
}
