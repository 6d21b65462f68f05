//! docket's imperative shell around the pure decider (`docket-decider`).
//!
//! It reads the clock, chooses run ids, calls agents and effect executors, records every
//! answer as an event, asks the decider what follows, and appends each decided batch to
//! the event log; it resumes runs by folding their logs.
//! - [`Runtime`]: starting, resuming and listing runs, deciding tickets;
//! - agents reached in-process, as a child process speaking JSON lines, or over HTTP
//!   ([`AgentExecutor`] and its implementations), every failure an [`AgentCallError`];
//! - side-effect executors (once per idempotency key, verified after a crash) and the
//!   kill switches read before every execution;
//! - [`Workflow::load`]: workflow files and the bundles they name;
//! - bundle versions registered in the data directory, and the handoff-rule API over them
//!   ([`Runtime::replace_handoff_rules`]).
//!
//! It does not replay: what a bundle change would have decided otherwise is the
//! application layer's (`docket-app`), over [`Runtime::runs_of_bundle`].

// A library reports every failure as an error value naming what and where; it never
// aborts its caller. (Tests are exempt: see clippy.toml.)
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agent;
// Bundle versions: the `_bundles` stream, and the handoff-rule API over it.
mod bundles;
mod clock;
mod drive;
mod effect;
// A process-wide memory setting for programs that drive many runs (the docket binary).
mod memory;
// The spans of runs, agent calls, handoffs, tool calls and effects, named for OpenTelemetry.
mod telemetry;
// Test oracles for other crates' tests and benchmarks (feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod testing;
// Governed tools: executors of allowed `call_tool` actions.
mod tool;
mod transport;
mod workflow;

pub use agent::{
    AgentCallError, AgentExecutor, CallFuture, CommandExecutor, ExecutorConfigError, HttpExecutor,
    InProcessAgent, InProcessExecutor,
};
pub use bundles::{
    BUNDLES_STREAM, BundleVersion, LatestBundle, RegisteredPairRules, RegisteredRules,
    RegistryError, RulesRegistered,
};
pub use clock::{Clock, SteppingClock, SystemClock};
pub use drive::{
    AwaitedEvent, BreakerState, BreakerStatus, CIRCUITS_STREAM, CircuitReset, HumanDecision,
    HumanOverride, ListedRun, ListedStatus, PayloadEncoding, PendingTimer, Recorded, RecordedEvent,
    RunOutcome, RunPage, RunQuery, RunSummary, Runtime, RuntimeError, SessionMark, TurnRefusal,
    message_input, turn_run_id,
};
pub use effect::{
    CommandEffectExecutor, EffectExecutor, EffectExecutors, EffectFuture, Engagement,
    FileKillSwitch, HttpEffectExecutor, InMemoryKillSwitch, InProcessEffect,
    InProcessEffectExecutor, KILL_SWITCH_FILE, KILL_SWITCH_HISTORY_FILE, KillSwitchError,
    KillSwitchFileError, KillSwitchFlip, KillSwitchFuture, KillSwitchSource, KillSwitchState,
    is_switch_name,
};
pub use memory::prefer_small_pages;
pub use tool::{
    CommandToolExecutor, HttpToolExecutor, InProcessToolExecutor, McpToolExecutor, ToolCallError,
    ToolExecutor, ToolExecutors, ToolFuture,
};
pub use transport::{
    CommandConfig, CredentialError, DEFAULT_MAX_RESPONSE_BYTES, ExitReport, HandshakeError,
    HttpOptions, HttpsConnector, InvalidHeaderName, TlsSetupError, https_connector,
    resolve_program,
};
pub use workflow::{
    MAX_SOURCE_BYTES, SourceError, SourceKind, SourceRoot, Workflow, WorkflowLoadError,
    WorkflowProblem, check_against_bundle, check_executables, check_workflow, read_source,
};
