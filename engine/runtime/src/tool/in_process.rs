//! Tool executors as Rust code in the engine's process, for embedding and tests.

use serde_json::Value;

use super::{ToolCallError, ToolExecutor, ToolFuture};
use docket_decider::ToolRequest;

type ToolFn = dyn Fn(&ToolRequest) -> Result<Value, ToolCallError> + Send + Sync;

/// A tool executor calling a closure; register it with `Runtime::register_tool` for a
/// section declared `in_process = true`.
pub struct InProcessToolExecutor {
    run: Box<ToolFn>,
}

impl InProcessToolExecutor {
    /// An executor answering each call with `run`.
    pub fn new(
        run: impl Fn(&ToolRequest) -> Result<Value, ToolCallError> + Send + Sync + 'static,
    ) -> Self {
        Self { run: Box::new(run) }
    }
}

impl ToolExecutor for InProcessToolExecutor {
    fn call<'a>(&'a self, request: &'a ToolRequest) -> ToolFuture<'a> {
        let outcome = (self.run)(request);
        Box::pin(async move { outcome })
    }
}
