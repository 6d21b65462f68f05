//! The runtime: the imperative shell around the decider. It reads the clock, chooses run
//! ids, calls agents through their executors, records every answer as an event, asks the
//! decider what follows, and appends each batch atomically with the expected version of
//! the state it was decided from (so a second writer of the same run gets a conflict).
//!
//! Generic over the store (`EventStore` uses `impl Future` returns, so no `dyn`); many runs
//! can be driven at once from one `Runtime` (it is cheap to clone).

// Circuit breakers across runs: the `_circuits` stream, read before calls.
mod circuit;
mod effects;
mod executors;
// Recording a fork's reused part.
mod fork;
mod log;
mod recorded;
// Run state snapshots, and the salts of values committed apart.
mod salts;
mod session;
pub use session::{message_input, turn_run_id};
mod snapshots;
// The run list kept in memory and in the index's digests.
mod run_list;
// Listing runs without folding them.
mod summary;
// Governed tool calls.
// Durable timers: waiting until one is due, then recording its firing.
mod timers;
mod tools;

use docket_decider::{
    AgentCallFailed, AgentResponded, HumanDecided, HumanOverrode, HumanWroteDomain, RunCancelled,
    RunPause, SignalReceived,
};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tracing::Instrument;

use docket_policies::PolicyBundle;
use docket_store::{EventStore, Hash, NewEvent, StoreError, StreamId, WallTime};

use crate::agent::{AgentCallError, AgentExecutor};
use crate::clock::{Clock, SystemClock};
use crate::workflow::Workflow;
use docket_decider::WorkflowSpec;
use docket_decider::{AgentRequest, AgentResponse};
use docket_decider::{
    COMMITTED_PAYLOAD, Command, DecodeError, KIND_VERSION, NextStep, REFERENCED_PAYLOAD,
    ReferencedContent, Rejection, RunEvent, RunId, RunRequested, RunState, decide_in_place,
};

/// An event's payload bytes (for the other streams of a data directory).
pub(crate) async fn payload_bytes<S: EventStore>(
    store: &S,
    event: &docket_store::Event,
) -> Result<Vec<u8>, RuntimeError> {
    log::payload(store, event).await
}
pub use circuit::{BreakerState, BreakerStatus, CIRCUITS_STREAM, CircuitReset};
pub use log::RecordedEvent;
pub use recorded::Recorded;
pub use run_list::{ListedRun, ListedStatus, RunPage, RunQuery};
#[cfg(any(test, feature = "testing"))]
pub(crate) use summary::summarize;
pub use summary::{AwaitedEvent, PendingTimer, RunSummary, SessionMark};

/// Why a message cannot start the next turn of a run's session now
/// (docs/agent-protocol.md#sessions).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TurnRefusal {
    /// The run is not finished: it is running, waiting for a person or blocked.
    #[error(
        "it is {}: a message starts the next turn of a finished run (completed, failed or cancelled)",
        .0.as_str()
    )]
    NotFinished(docket_decider::RunStatus),
    /// A later turn of the session exists.
    #[error(
        "it is turn {turn} of session {session}, whose latest turn is run {latest}: send the message to it"
    )]
    NotLatestTurn {
        /// The run's turn.
        turn: u32,
        /// The session.
        session: RunId,
        /// The session's latest turn's run.
        latest: RunId,
    },
    /// The run's workflow records values to be withheld and erased (`[evidence]
    /// redactable = true`): the copy of its earlier turns a next turn records would escape
    /// erasure, so its runs take no message.
    #[error(
        "its workflow records redactable values ([evidence] redactable = true), and a next turn would copy them where shredding cannot erase them: start a new run instead"
    )]
    Redactable,
    /// Another message started the next turn first.
    #[error(
        "another message started its next turn (turn {turn}, run {run}) meanwhile: send yours to that run once it finished"
    )]
    TurnTaken {
        /// The turn.
        turn: u32,
        /// Its run.
        run: RunId,
    },
}

/// Why the runtime could not go on (agent failures are not errors: they are recorded).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The operating system's random source failed: payload encoding 3 needs unguessable
    /// salts, so nothing is recorded without one.
    #[error(
        "run {run}: the operating system's random source failed ({message}); nothing was \
         recorded (salted commitments need it: docs/events.md#values-committed-apart)"
    )]
    NoRandomness { run: String, message: String },
    /// Another writer appended to the run first.
    #[error(
        "run {run} was written by someone else meanwhile (expected version {expected}, found \
         {actual}): only one process may drive a run at a time; nothing was recorded by this one"
    )]
    Conflict {
        /// The run.
        run: RunId,
        /// The version this process decided from.
        expected: u64,
        /// The version found.
        actual: u64,
    },
    /// The event log failed.
    #[error("event log: {0}")]
    Store(StoreError),
    /// A message that cannot start the run's next turn now (docs/agent-protocol.md#sessions).
    #[error("run {run}: {why}")]
    TurnRefused {
        /// The run the message was sent to.
        run: RunId,
        /// Why.
        why: TurnRefusal,
    },
    /// A message that starts no turn: empty, or naming nobody.
    #[error("{0}")]
    MessageRefused(String),
    /// A run with erased values cannot be driven on: the state later decisions read
    /// holds those values (docs/events.md#values-committed-apart). Cancelling it and
    /// reading it still work.
    #[error(
        "run {run} cannot go on: {values} value(s) it recorded were erased, and what it \
         decides next would read them, so its state cannot be rebuilt without them; nothing \
         was recorded"
    )]
    Shredded {
        /// The run.
        run: RunId,
        /// How many of its values were erased.
        values: usize,
    },
    /// No run with this id in the log.
    #[error("no run {0} in this data directory")]
    UnknownRun(String),
    /// A run id is already taken (the run can be resumed).
    #[error("run {0} already exists")]
    RunExists(RunId),
    /// A recorded event could not be decoded.
    #[error("run {run}: {source}")]
    Decode {
        /// The run.
        run: RunId,
        /// What.
        #[source]
        source: DecodeError,
    },
    /// The log does not begin with `run.requested`.
    #[error("run {0}: the log does not begin with run.requested")]
    NoRequest(RunId),
    /// The bundle (given or recorded) does not compile.
    #[error("policy bundle {name}: {message}")]
    Bundle {
        /// Its source name.
        name: String,
        /// The bundle error.
        message: String,
    },
    /// A decision on a ticket that another decision closed first (two people deciding
    /// at once): nothing was recorded for this one.
    #[error(
        "run {run}: ticket {ticket} was already decided{}; nothing was recorded for this decision",
        decided.as_ref().map(|d| format!(
            " ({} by {}: {})",
            if d.approved { "approved" } else { "denied" },
            d.by,
            d.reason
        )).unwrap_or_default()
    )]
    TicketDecided {
        /// The run.
        run: RunId,
        /// The ticket.
        ticket: String,
        /// The decision that closed it, as recorded.
        decided: Option<Box<docket_decider::TicketDecision>>,
    },
    /// The decider refused the command.
    #[error("run {run}: {rejection}")]
    Rejected {
        /// The run.
        run: RunId,
        /// Why.
        rejection: Rejection,
    },
    /// The bundle is valid but states what docket will not run under (a pair whose every
    /// payload would arrive empty, audit switched off): refused for new runs, so that
    /// nothing is emptied or misread silently (docs/governance.md#handoff-modes).
    #[error("{bundle}: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NotAdmitted {
        /// The bundle's name (its path).
        bundle: String,
        /// What is wrong, each naming the pair or setting.
        problems: Vec<docket_policies::AdmissionProblem>,
    },
    /// The workflow does not fit its bundle or this machine (a section missing for an
    /// agent the bundle can route to, a section for an agent it does not know, a command
    /// or working directory not found): refused before anything was recorded
    /// (docs/workflow.md#checked-before-anything-runs).
    #[error(
        "{what} cannot run, nothing was recorded: {}",
        crate::workflow::problems_text(problems)
    )]
    WorkflowRefused {
        /// `workflow geo`, or `run run-1 (workflow geo)` for a recorded run.
        what: String,
        /// Each problem, naming its section and what to do.
        problems: Vec<crate::workflow::WorkflowProblem>,
    },
    /// The data directory's circuits stream holds an event docket cannot read.
    #[error(
        "circuit breakers (stream {}), event {seq}: {message}",
        circuit::CIRCUITS_STREAM
    )]
    Circuits {
        /// Its position in the stream (0 when no event is concerned).
        seq: u64,
        /// What is wrong.
        message: String,
    },
    /// A run id the store does not accept.
    #[error("invalid run id {id:?}: {message}")]
    InvalidRunId {
        /// The id.
        id: String,
        /// Why.
        message: String,
    },
    /// A circuit reset that does not say who resets it or why.
    #[error("resetting {agent}'s circuit breaker needs {missing}")]
    ResetUnexplained {
        /// The agent.
        agent: String,
        /// `who resets it` or `why`.
        missing: &'static str,
    },
    /// A circuit reset of an agent whose breaker was never recorded.
    #[error("no circuit breaker is recorded for agent `{0}` in this data directory")]
    UnknownCircuit(String),
}

/// Where a run stands after the runtime stopped driving it.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run.
    pub run_id: RunId,
    /// Its folded state (status, pending calls, tickets, output...; its handoffs and
    /// answered calls are in the log: `docket_decider::RunHistory`).
    pub state: RunState,
}

/// A human's decision on a ticket, as `docket approve`, `deny` and `answer` record it:
/// who, why, and for a conflict or a question the choice (from 1) or the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanDecision {
    /// Approve (true) or deny.
    pub approved: bool,
    /// Who decides.
    pub by: String,
    /// Why.
    pub reason: String,
    /// The chosen output of a conflict, or option of a question (from 1).
    pub choice: Option<u32>,
    /// An answer to a question, in the human's words.
    pub answer: Option<String>,
}

impl HumanDecision {
    /// `by` approves, because `reason`.
    #[must_use]
    pub fn approve(by: &str, reason: &str) -> Self {
        Self {
            approved: true,
            by: by.to_owned(),
            reason: reason.to_owned(),
            choice: None,
            answer: None,
        }
    }

    /// `by` denies, because `reason`.
    #[must_use]
    pub fn deny(by: &str, reason: &str) -> Self {
        Self {
            approved: false,
            ..Self::approve(by, reason)
        }
    }

    /// Choosing output or option `choice` (from 1).
    #[must_use]
    pub fn choosing(self, choice: Option<u32>) -> Self {
        Self { choice, ..self }
    }

    /// Answering a question with `text`.
    #[must_use]
    pub fn answering(self, text: Option<String>) -> Self {
        Self {
            answer: text,
            ..self
        }
    }
}

/// A person's override of the rule that blocked a run, as `docket override` records it
/// (docs/governance.md#human-override): who, in which role of the bundle's registry, why,
/// and optionally the rule they mean (it must be the one that blocked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanOverride {
    /// Who overrides.
    pub by: String,
    /// The role they act in: an agent id of the bundle's registry.
    pub role: String,
    /// Why.
    pub reason: String,
    /// The rule meant; `None`: the one the run is blocked by.
    pub rule_id: Option<String>,
}

/// Drives runs over an event store. Clones share executors and compiled bundles.
pub struct Runtime<S> {
    inner: Arc<Inner<S>>,
}

impl<S> Clone for Runtime<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<S> {
    store: S,
    executors: executors::Executors,
    bundles: std::sync::Mutex<std::collections::BTreeMap<String, Arc<PolicyBundle>>>,
    counter: std::sync::atomic::AtomicU64,
    clock: Arc<dyn Clock>,
    /// Every agent's circuit breaker across runs.
    circuits: circuit::Circuits,
    // Side effects
    effects: crate::effect::EffectExecutors,
    kill_switch: std::sync::RwLock<Arc<dyn crate::effect::KillSwitchSource>>,
    // Governed tools
    tools: crate::tool::ToolExecutors,
    /// How run events' payloads are written: 1, 2 or 3 ([`PayloadEncoding`]); 0: by
    /// each run's workflow (`[evidence] redactable`: 3, else 2).
    payload_encoding: std::sync::atomic::AtomicU8,
    /// Each run's salt key for payload encoding 3, drawn from the OS when first needed.
    salts: salts::SaltKeys,
    /// Every run's summary, once something lists runs (`run_list.rs`).
    run_list: run_list::RunList,
    /// Whether a drive sleeps until a timer is due (a command in the foreground) or ends,
    /// leaving the run to whatever fires this process's timers ([`Runtime::set_timers_elsewhere`]).
    timers_elsewhere: std::sync::atomic::AtomicBool,
}

/// How the runtime writes run events' payloads (docs/events.md#content-stored-once).
/// Either is read back; the choice only changes what new events look like in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadEncoding {
    /// Encoding 1 (`kind_version` 1): the event's canonical JSON, content and all, as
    /// every run recorded before encoding 2 (the golden logs) was written.
    Plain,
    /// Encoding 2 (`kind_version` 2): content written once as a blob and referred to by
    /// hash at the kind's content positions.
    Referenced,
    /// Encoding 3 (`kind_version` 3): the values at the content positions replaced by
    /// salted commitments, their disclosures kept outside the log so that they can be
    /// withheld from exports and erased (docs/events.md#values-committed-apart). What a
    /// run whose workflow says `[evidence] redactable = true` records.
    Committed,
}

/// Whether `state`'s run asked for redactable values (`[evidence] redactable`).
pub(super) fn redactable(state: &RunState) -> bool {
    state
        .request()
        .is_some_and(|r| r.workflow.evidence.redactable)
}

impl<S: EventStore + 'static> Runtime<S> {
    /// A runtime over `store`, reading the system clock.
    pub fn new(store: S) -> Self {
        Self::with_clock(store, Arc::new(SystemClock))
    }

    /// A runtime over `store` reading the time from `clock` (a [`crate::SteppingClock`]
    /// makes a recording reproducible to the byte).
    pub fn with_clock(store: S, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                clock,
                executors: executors::Executors::default(),
                bundles: std::sync::Mutex::default(),
                counter: std::sync::atomic::AtomicU64::new(0),
                circuits: circuit::Circuits::default(),
                effects: crate::effect::EffectExecutors::default(),
                kill_switch: std::sync::RwLock::new(Arc::new(
                    crate::effect::InMemoryKillSwitch::default(),
                )),
                tools: crate::tool::ToolExecutors::default(),
                payload_encoding: std::sync::atomic::AtomicU8::new(0),
                salts: salts::SaltKeys::default(),
                run_list: run_list::RunList::default(),
                timers_elsewhere: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// Writes every run's event payloads in `encoding` from now on, whatever its workflow
    /// says (by default a run's workflow chooses: [`PayloadEncoding::Committed`] when it
    /// says `[evidence] redactable = true`, else [`PayloadEncoding::Referenced`]; tests
    /// that compare a recording with a golden log of encoding 1 ask for
    /// [`PayloadEncoding::Plain`], benchmarks compare encodings).
    pub fn set_payload_encoding(&self, encoding: PayloadEncoding) {
        let n = match encoding {
            PayloadEncoding::Plain => 1,
            PayloadEncoding::Referenced => 2,
            PayloadEncoding::Committed => 3,
        };
        self.inner
            .payload_encoding
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// How the events of a run are written now: as [`Runtime::set_payload_encoding`]
    /// said, else as its workflow's `[evidence] redactable` says.
    pub(crate) fn payload_encoding(&self, redactable: bool) -> PayloadEncoding {
        match self
            .inner
            .payload_encoding
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            1 => PayloadEncoding::Plain,
            2 => PayloadEncoding::Referenced,
            3 => PayloadEncoding::Committed,
            _ if redactable => PayloadEncoding::Committed,
            _ => PayloadEncoding::Referenced,
        }
    }

    /// From now on a drive that comes to a timer not yet due ends there, the run still
    /// running, instead of sleeping until it is due: for a process that keeps many runs
    /// waiting (`docket serve`'s timer queue, workers that hand the run back with its due
    /// time), where a sleeping drive would hold each run's state for as long as it waits.
    /// By default a drive sleeps: a command in the foreground waits the timer out.
    pub fn set_timers_elsewhere(&self) {
        self.inner
            .timers_elsewhere
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// Registers a Rust agent for workflow agents declared `in_process = true`.
    pub fn register_agent(&self, agent: &str, executor: Arc<dyn AgentExecutor>) {
        self.inner.executors.register(agent, executor);
    }

    /// Registers a Rust tool executor for workflow tool sections declared
    /// `in_process = true`.
    pub fn register_tool(&self, section: &str, executor: Arc<dyn crate::tool::ToolExecutor>) {
        self.inner.tools.register(section, executor);
    }

    /// Every agent's circuit breaker across runs.
    pub(crate) fn circuits(&self) -> &circuit::Circuits {
        &self.inner.circuits
    }

    /// The time now, as the store's envelopes record it.
    pub(crate) fn wall_time(&self) -> WallTime {
        WallTime(self.inner.clock.now_ns())
    }

    /// The time now, in ms since the Unix epoch, as recorded in inputs' `at_ms` (read
    /// from the runtime's clock; a fork's reused inputs are timed from it).
    pub fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    /// A new run id, as [`Runtime::start`] chooses one (a fork's, before it starts).
    pub fn new_run_id(&self) -> RunId {
        let n = self
            .inner
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = self.inner.clock.now_ns();
        RunId::from(format!(
            "run-{:x}-{:x}{n:x}",
            nanos / 1_000_000,
            (nanos % 1_000_000) ^ i64::from(std::process::id())
        ))
    }

    /// Checks a new run before anything of it is recorded: the bundle admits runs, the
    /// workflow fits the bundle and this machine, and no run has its id yet.
    async fn admit(
        &self,
        bundle: &PolicyBundle,
        bundle_name: &str,
        spec: &WorkflowSpec,
        what: String,
        stream: &StreamId,
        run_id: &RunId,
    ) -> Result<(), RuntimeError> {
        let problems = bundle.admission_problems();
        if !problems.is_empty() {
            return Err(RuntimeError::NotAdmitted {
                bundle: bundle_name.to_owned(),
                problems,
            });
        }
        let problems = crate::workflow::check_workflow(spec, bundle);
        if !problems.is_empty() {
            return Err(RuntimeError::WorkflowRefused { what, problems });
        }
        if self
            .inner
            .store
            .head(stream)
            .await
            .map_err(RuntimeError::Store)?
            .is_some()
        {
            return Err(RuntimeError::RunExists(run_id.clone()));
        }
        Ok(())
    }

    fn stream(run_id: &str) -> Result<StreamId, RuntimeError> {
        StreamId::new(run_id).map_err(|e| RuntimeError::InvalidRunId {
            id: run_id.to_owned(),
            message: e.to_string(),
        })
    }

    fn bundle_for(&self, run: &RunRequested) -> Result<Arc<PolicyBundle>, RuntimeError> {
        self.compiled(&run.bundle_source, &run.bundle_source_name)
    }

    /// A run's priority: the `[defaults] priority` of the bundle it was started with,
    /// which orders it among the runs waiting for a worker (docs/postgres.md#claim-order).
    ///
    /// # Errors
    /// [`RuntimeError::Bundle`]: the recorded bundle does not compile.
    pub fn run_priority(
        &self,
        run: &RunRequested,
    ) -> Result<docket_policies::Priority, RuntimeError> {
        Ok(self.bundle_for(run)?.spec().defaults.priority)
    }

    /// The bundle compiled from `source`, compiled once per distinct source text (parsing
    /// and compiling is a pure function of the text and its name, and costs far more than
    /// a run's decisions).
    pub(crate) fn compiled(
        &self,
        source: &str,
        name: &str,
    ) -> Result<Arc<PolicyBundle>, RuntimeError> {
        let key = format!("{name}\0{source}");
        let mut cache = self
            .inner
            .bundles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(b) = cache.get(&key) {
            return Ok(b.clone());
        }
        let format =
            docket_policies::Format::from_name(name).unwrap_or(docket_policies::Format::Toml);
        let bundle =
            docket_policies::parse(source, name, format).map_err(|e| RuntimeError::Bundle {
                name: name.to_owned(),
                message: e.to_string(),
            })?;
        let bundle = Arc::new(bundle);
        cache.insert(key, bundle.clone());
        Ok(bundle)
    }

    /// Starts a run of `workflow` with `input` and drives it until it completes, is
    /// blocked, fails or waits for a human. `run_id` is chosen when `None`.
    ///
    /// # Errors
    /// [`RuntimeError`] for log, bundle and id problems.
    pub async fn start(
        &self,
        workflow: &Workflow,
        input: Value,
        run_id: Option<RunId>,
    ) -> Result<RunOutcome, RuntimeError> {
        self.record_start(workflow, input, run_id)
            .await?
            .drive()
            .await
    }

    /// Records a new run's `run.requested` (and the batch it causes), durably, without
    /// driving it: [`Recorded::drive`] goes on. For a caller that answers once the run is
    /// recorded (`docket serve`'s 202): an id already taken, even by a run started at the
    /// same moment, is [`RuntimeError::RunExists`] or [`RuntimeError::Conflict`].
    ///
    /// # Errors
    /// [`RuntimeError`] for log, bundle and id problems; nothing is recorded then.
    pub async fn record_start(
        &self,
        workflow: &Workflow,
        input: Value,
        run_id: Option<RunId>,
    ) -> Result<Recorded<S>, RuntimeError> {
        self.record_start_as(workflow, input, run_id, (None, None))
            .await
    }

    /// [`Runtime::record_start`] for a run a schedule fired: its `run.requested` names the
    /// schedule, who made it and when the firing was due (docs/schedules.md).
    ///
    /// # Errors
    /// As [`Runtime::record_start`]: an id already taken is [`RuntimeError::RunExists`]
    /// or [`RuntimeError::Conflict`], and nothing is recorded.
    pub async fn record_scheduled_start(
        &self,
        workflow: &Workflow,
        input: Value,
        run_id: RunId,
        scheduled: docket_decider::Scheduled,
    ) -> Result<Recorded<S>, RuntimeError> {
        self.record_start_as(
            workflow,
            input,
            Some(run_id),
            (Some(Box::new(scheduled)), None),
        )
        .await
    }

    /// Records a new run's first batch; `origin` is what started it besides a person: a
    /// schedule's firing, or the session it continues.
    async fn record_start_as(
        &self,
        workflow: &Workflow,
        input: Value,
        run_id: Option<RunId>,
        (scheduled, session): (
            Option<Box<docket_decider::Scheduled>>,
            Option<Box<docket_decider::Session>>,
        ),
    ) -> Result<Recorded<S>, RuntimeError> {
        let run_id = run_id.unwrap_or_else(|| self.new_run_id());
        let stream = Self::stream(&run_id)?;
        // New runs use the latest registered version of the bundle's name, if it has one
        // (docs/governance.md#bundle-versions).
        let latest = self
            .with_latest_bundle(workflow)
            .await
            .map_err(|e| RuntimeError::Bundle {
                name: workflow.bundle_source_name.clone(),
                message: e.to_string(),
            })?;
        let workflow = latest.as_ref().map_or(workflow, |l| &l.workflow);
        let bundle = self.compiled(&workflow.bundle_source, &workflow.bundle_source_name)?;
        self.admit(
            &bundle,
            &workflow.bundle_source_name,
            &workflow.spec,
            format!("workflow {}", workflow.spec.name),
            &stream,
            &run_id,
        )
        .await?;
        let request = RunRequested {
            run_id: run_id.clone(),
            workflow: workflow.spec.clone(),
            bundle_source: workflow.bundle_source.clone(),
            bundle_source_name: workflow.bundle_source_name.clone(),
            bundle_hash: bundle.hash().to_hex(),
            input,
            at_ms: self.now_ms(),
            decider_version: docket_decider::DECIDER_VERSION,
            forked_from: None,
            scheduled,
            session,
        };
        let mut state = RunState::default();
        // The run's span covers its first batch (the entry handoff) too.
        let span = crate::telemetry::run(run_id.as_str(), &workflow.spec.name);
        self.decide_and_append(&mut state, &bundle, Command::Start(request.into()))
            .instrument(span.clone())
            .await?;
        Ok(Recorded {
            runtime: self.clone(),
            state,
            bundle,
            interrupted: Default::default(),
            span,
        })
    }

    /// Folds a run's log and continues it: calls with no recorded answer are made again
    /// (same request, same request id), answered ones never.
    ///
    /// # Errors
    /// [`RuntimeError`].
    pub async fn resume(&self, run_id: &RunId) -> Result<RunOutcome, RuntimeError> {
        let (state, bundle) = self.load_state(run_id).await?;
        self.refuse_shredded(run_id, &state).await?;
        self.check_recorded(run_id, &state)?;
        let interrupted = tools::interrupted_tools(&state);
        self.drive(state, bundle, interrupted).await
    }

    /// The in-process agents and effect executors `spec` declares that no Rust code was
    /// registered for (yet). Not part of [`Runtime::start`]'s checks: an embedding program
    /// may start runs before registering the in-process code a run reaches only later. A
    /// program that registers none (the `docket` command) refuses every such section
    /// with this before it starts a run.
    #[must_use]
    pub fn unregistered(&self, spec: &WorkflowSpec) -> Vec<crate::workflow::WorkflowProblem> {
        let mut problems = Vec::new();
        for (id, agent) in &spec.agents {
            if matches!(
                agent.executor,
                docket_decider::ExecutorSpec::InProcess { .. }
            ) && !self.inner.executors.is_registered(id.as_str())
            {
                problems.push(crate::workflow::WorkflowProblem {
                    section: format!("[agents.{id}]"),
                    message: "is `in_process = true`, but no Rust agent is registered for it: \
                              in-process agents exist only when docket is embedded as a \
                              library (Runtime::register_agent); give `command` or `http` \
                              to run it with the docket command"
                        .to_owned(),
                });
            }
        }
        for (kind, effect) in &spec.effects {
            if effect.in_process == Some(true) && !self.inner.effects.is_registered(kind) {
                problems.push(crate::workflow::WorkflowProblem {
                    section: format!("[effects.{kind}]"),
                    message: "is `in_process = true`, but no Rust executor is registered \
                              for it: in-process executors exist only when docket is \
                              embedded as a library (Runtime::register_effect); give \
                              `command` or `http` to run it with the docket command"
                        .to_owned(),
                });
            }
        }
        problems
    }

    /// Before an unfinished run is driven again (resume, approve, override): refused when
    /// a value it recorded was shredded, since the decisions still to come read its state
    /// and the state holds markers where the erased values were. Cancelling needs no
    /// value and stays possible; a finished run has nothing left to drive.
    async fn refuse_shredded(&self, run_id: &RunId, state: &RunState) -> Result<(), RuntimeError> {
        if state.status().is_final() {
            return Ok(());
        }
        let held = self
            .inner
            .store
            .disclosures(&Self::stream(run_id)?)
            .await
            .map_err(RuntimeError::Store)?;
        let values = held
            .values()
            .filter(|d| matches!(d, docket_store::StoredDisclosure::Shredded(_)))
            .count();
        if values == 0 {
            return Ok(());
        }
        Err(RuntimeError::Shredded {
            run: run_id.clone(),
            values,
        })
    }

    /// Before a recorded run is driven again (resume, approve): what it needs of this
    /// machine, which may have changed since it started (commands, working directories).
    /// The sections against the bundle were checked when it started.
    fn check_recorded(&self, run_id: &RunId, state: &RunState) -> Result<(), RuntimeError> {
        let Some(request) = state.request() else {
            return Ok(());
        };
        if state.status().is_final() {
            return Ok(());
        }
        let problems = crate::workflow::check_executables(&request.workflow);
        if problems.is_empty() {
            return Ok(());
        }
        Err(RuntimeError::WorkflowRefused {
            what: format!("run {run_id} (workflow {})", request.workflow.name),
            problems,
        })
    }

    /// Records a human decision on a ticket and continues the run
    /// (docs/governance.md#escalation-and-tickets).
    ///
    /// # Errors
    /// [`RuntimeError`], e.g. an unknown or already decided ticket, a decision naming
    /// nobody, a choice the ticket does not offer, an answer to a ticket that asks none.
    pub async fn decide_ticket(
        &self,
        run_id: &RunId,
        ticket: &str,
        decision: HumanDecision,
    ) -> Result<RunOutcome, RuntimeError> {
        self.record_decision(run_id, ticket, decision)
            .await?
            .drive()
            .await
    }

    /// Records a human decision on a ticket, durably, without driving the run on:
    /// [`Recorded::drive`] goes on. When the run moved on meanwhile (another process
    /// drove it), the decision is decided again on the newer state; a ticket another
    /// decision closed first is [`RuntimeError::TicketDecided`], naming that decision.
    ///
    /// # Errors
    /// As [`Runtime::decide_ticket`]; nothing is recorded then.
    pub async fn record_decision(
        &self,
        run_id: &RunId,
        ticket: &str,
        decision: HumanDecision,
    ) -> Result<Recorded<S>, RuntimeError> {
        // Each try reads a newer version; a run written by others without end is not a
        // reason to try forever.
        const TRIES: usize = 8;
        let mut tries = 0;
        loop {
            tries += 1;
            let (mut state, bundle) = self.load_state(run_id).await?;
            // Decided already, by a decision that may also have ended the run: named
            // as such, whatever else the decider would refuse first.
            let decided = state
                .tickets()
                .get(&docket_decider::TicketId::from(ticket))
                .and_then(|t| t.decision.clone())
                .map(Box::new);
            if decided.is_some() {
                return Err(RuntimeError::TicketDecided {
                    run: run_id.clone(),
                    ticket: ticket.to_owned(),
                    decided,
                });
            }
            if decision.approved {
                // A refusal blocks the run and calls nobody: it needs nothing of this machine.
                self.refuse_shredded(run_id, &state).await?;
                self.check_recorded(run_id, &state)?;
            }
            let interrupted = tools::interrupted_tools(&state);
            let command = Command::RecordHumanDecision(HumanDecided {
                ticket: ticket.into(),
                approved: decision.approved,
                by: decision.by.clone(),
                reason: decision.reason.clone(),
                choice: decision.choice,
                answer: decision.answer.clone(),
                at_ms: self.now_ms(),
            });
            match self
                .decide_and_append_once(&mut state, &bundle, command)
                .await
            {
                Ok(()) => {
                    return Ok(Recorded {
                        runtime: self.clone(),
                        state,
                        bundle,
                        interrupted,
                        span: tracing::Span::none(),
                    });
                }
                // Written meanwhile: read again, and decided again or named as decided.
                Err(RuntimeError::Conflict { .. }) if tries < TRIES => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Records a person's override of the rule that blocked a run and continues what the
    /// block stopped (docs/governance.md#human-override).
    ///
    /// # Errors
    /// [`RuntimeError`], e.g. a run that is not blocked, a block nothing can override, a
    /// role that does not outrank the rule, an absolute rule; nothing is recorded then.
    pub async fn override_block(
        &self,
        run_id: &RunId,
        o: HumanOverride,
    ) -> Result<RunOutcome, RuntimeError> {
        self.record_override(run_id, o).await?.drive().await
    }

    /// Records a person's override of the rule that blocked a run, without driving it on:
    /// the returned [`Recorded`] drives it, here or (dropped) in the process that drives
    /// the run ([`Runtime::override_block`] does both).
    ///
    /// # Errors
    /// As [`Runtime::override_block`]; nothing is recorded then.
    pub async fn record_override(
        &self,
        run_id: &RunId,
        o: HumanOverride,
    ) -> Result<Recorded<S>, RuntimeError> {
        let (mut state, bundle) = self.load_state(run_id).await?;
        let rule_id = o
            .rule_id
            .unwrap_or_else(|| state.blocked_by().unwrap_or_default().to_owned());
        let command = Command::RecordOverride(HumanOverrode {
            by: o.by,
            role: o.role,
            rule_id,
            reason: o.reason,
            at_ms: self.now_ms(),
        });
        // Refused overrides record nothing and need nothing of this machine; an accepted
        // one calls agents again, so what the run needs of the machine is checked first.
        docket_decider::decide(&state, &bundle, command.clone()).map_err(|rejection| {
            RuntimeError::Rejected {
                run: run_id.clone(),
                rejection,
            }
        })?;
        self.refuse_shredded(run_id, &state).await?;
        if let Some(request) = state.request() {
            let problems = crate::workflow::check_executables(&request.workflow);
            if !problems.is_empty() {
                return Err(RuntimeError::WorkflowRefused {
                    what: format!("run {run_id} (workflow {})", request.workflow.name),
                    problems,
                });
            }
        }
        let interrupted = tools::interrupted_tools(&state);
        self.decide_and_append(&mut state, &bundle, command).await?;
        Ok(Recorded {
            runtime: self.clone(),
            state,
            bundle,
            interrupted,
            span: tracing::Span::none(),
        })
    }

    /// Records a person's pause of a run (`run.paused`, `paused` true) or its end
    /// (`run.unpaused`), without driving it: [`Recorded::drive`] goes on (a paused run's
    /// drive stops at once, an unpaused one goes on where it stood). When the run moved on
    /// meanwhile (a drive recording an answer), the pause is decided again on the newer
    /// state (docs/events.md#runpaused).
    ///
    /// # Errors
    /// [`RuntimeError`], e.g. a finished run, a run already paused (or not paused, to
    /// unpause), no `by` or `reason`; nothing is recorded then.
    pub async fn record_pause(
        &self,
        run_id: &RunId,
        by: &str,
        reason: &str,
        paused: bool,
    ) -> Result<Recorded<S>, RuntimeError> {
        self.record_input(run_id, |at_ms| {
            let input = RunPause {
                by: by.to_owned(),
                reason: reason.to_owned(),
                at_ms,
            };
            if paused {
                Command::Pause(input)
            } else {
                Command::Unpause(input)
            }
        })
        .await
    }

    /// Records an outside event sent to a run (`signal.received`, then the bundle's
    /// verdict and its delivery to an agent waiting for it), without driving it:
    /// [`Recorded::drive`] goes on (docs/events.md#outside-events). `at_ms` is set here.
    /// When the run moved on meanwhile, the event is decided again on the newer state.
    ///
    /// # Errors
    /// [`RuntimeError::Rejected`] with [`docket_decider::Rejection::SignalRecorded`] when
    /// its idempotency key already recorded one (not a failure to its sender); another
    /// [`RuntimeError`] for a finished run, a run of decider version 12, an event with no
    /// name or sender. Nothing is recorded then.
    pub async fn record_signal(
        &self,
        run_id: &RunId,
        signal: SignalReceived,
    ) -> Result<Recorded<S>, RuntimeError> {
        self.record_input(run_id, |at_ms| {
            Command::ReceiveSignal(SignalReceived {
                at_ms,
                ..signal.clone()
            })
        })
        .await
    }

    /// Records a person's write of a domain (`human.wrote_domain`, then the domain's new
    /// version), without driving the run: nothing waits on it, and the agents that read
    /// the domain get the new version on their next call
    /// (docs/governance.md#a-person-writes-a-domain). `at_ms` is set here.
    ///
    /// # Errors
    /// [`RuntimeError::Rejected`] with [`docket_decider::Rejection::DomainWriteRefused`]
    /// when the bundle does not let the role write that content there (the reason names
    /// the rule and the place); another [`RuntimeError`] for a finished run, a run of an
    /// older decider, a write naming nobody or no reason. Nothing is recorded then.
    pub async fn record_domain_write(
        &self,
        run_id: &RunId,
        write: HumanWroteDomain,
    ) -> Result<Recorded<S>, RuntimeError> {
        self.record_input(run_id, |at_ms| {
            Command::WriteDomain(HumanWroteDomain {
                at_ms,
                ..write.clone()
            })
        })
        .await
    }

    /// Records the input `command` makes (handed the time it is recorded at) on the run's
    /// latest state, deciding it again on a newer state when another writer appended
    /// meanwhile (at most a few times), without driving the run.
    async fn record_input(
        &self,
        run_id: &RunId,
        command: impl Fn(i64) -> Command,
    ) -> Result<Recorded<S>, RuntimeError> {
        const TRIES: usize = 8;
        let mut tries = 0;
        loop {
            tries += 1;
            let (mut state, bundle) = self.load_state(run_id).await?;
            let interrupted = tools::interrupted_tools(&state);
            match self
                .decide_and_append_once(&mut state, &bundle, command(self.now_ms()))
                .await
            {
                Ok(()) => {
                    return Ok(Recorded {
                        runtime: self.clone(),
                        state,
                        bundle,
                        interrupted,
                        span: tracing::Span::none(),
                    });
                }
                Err(RuntimeError::Conflict { .. }) if tries < TRIES => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Cancels a run that is not finished: records `run.cancelled`
    /// with who and why; the run ends `cancelled`. A process still driving it stops at its
    /// next append (the run's version moved on: [`RuntimeError::Conflict`]) or its next
    /// input (refused: the run is finished), recording nothing more.
    ///
    /// # Errors
    /// [`RuntimeError`], e.g. a finished run, a run of a decider version this build does
    /// not decide as, no `by` or `reason`; nothing is recorded then.
    pub async fn cancel(
        &self,
        run_id: &RunId,
        by: &str,
        reason: &str,
    ) -> Result<RunOutcome, RuntimeError> {
        let (mut state, bundle) = self.load_state(run_id).await?;
        let command = Command::Cancel(RunCancelled {
            by: by.to_owned(),
            reason: reason.to_owned(),
            at_ms: self.now_ms(),
        });
        self.decide_and_append(&mut state, &bundle, command).await?;
        Ok(RunOutcome {
            run_id: run_id.clone(),
            state,
        })
    }

    /// A run's events after sequence `after`, then each new one as it is recorded; never
    /// ends while the store is open (`docket serve`'s server-sent events).
    ///
    /// # Errors
    /// [`RuntimeError::InvalidRunId`] for an id the store does not accept; each item
    /// fails as reading or decoding its event fails.
    pub fn follow(
        &self,
        run_id: &RunId,
        after: u64,
    ) -> Result<
        impl futures::Stream<Item = Result<RecordedEvent, RuntimeError>> + Send + 'static,
        RuntimeError,
    >
    where
        S: Send + Sync,
    {
        let stream = Self::stream(run_id)?;
        // Boxed: the store's stream is 'static, but its type names the borrows it was made
        // from.
        let tail: std::pin::Pin<
            Box<dyn futures::Stream<Item = Result<docket_store::Event, StoreError>> + Send>,
        > = Box::pin(self.inner.store.tail(&stream, after.saturating_add(1)));
        let rt = self.clone();
        let run = run_id.to_string();
        Ok(futures::StreamExt::then(tail, move |event| {
            let rt = rt.clone();
            let run = run.clone();
            async move {
                let event = event.map_err(RuntimeError::Store)?;
                log::recorded(&rt.inner.store, &run, &event).await
            }
        }))
    }

    /// A run's first event, `run.requested`, read alone, with when it was recorded (ns
    /// since the Unix epoch): what a list of runs shows without reading whole runs.
    ///
    /// # Errors
    /// [`RuntimeError::UnknownRun`], [`RuntimeError::NoRequest`], and the log's errors.
    pub async fn requested(
        &self,
        run_id: &RunId,
    ) -> Result<(Arc<RunRequested>, i64), RuntimeError> {
        let stream = Self::stream(run_id)?;
        let mut reader = Box::pin(self.inner.store.read(&stream, 1..=1));
        let Some(event) = futures::StreamExt::next(&mut reader).await else {
            return Err(RuntimeError::UnknownRun(run_id.to_string()));
        };
        let event = event.map_err(RuntimeError::Store)?;
        let recorded = log::recorded(&self.inner.store, run_id.as_str(), &event).await?;
        match recorded.event {
            RunEvent::RunRequested(run) => Ok((run, recorded.recorded_at_ns)),
            _ => Err(RuntimeError::NoRequest(run_id.clone())),
        }
    }

    /// A run's recorded events with their envelopes.
    ///
    /// # Errors
    /// [`RuntimeError`].
    pub async fn events(&self, run_id: &RunId) -> Result<Vec<RecordedEvent>, RuntimeError> {
        log::read_run(&self.inner.store, &Self::stream(run_id)?, run_id).await
    }

    /// A run's state: from its latest snapshot, with the events after it folded on
    /// ([`Runtime::state_at`]).
    ///
    /// # Errors
    /// [`RuntimeError`].
    pub async fn state(&self, run_id: &RunId) -> Result<RunState, RuntimeError> {
        self.state_at(run_id, None).await
    }

    async fn load_state(
        &self,
        run_id: &RunId,
    ) -> Result<(RunState, Arc<PolicyBundle>), RuntimeError> {
        let state = self.state(run_id).await?;
        let run = state
            .request()
            .ok_or_else(|| RuntimeError::NoRequest(run_id.clone()))?;
        let bundle = self.bundle_for(run)?;
        Ok((state, bundle))
    }

    /// Decides `command` in place and appends the batch at the version it was decided
    /// from. When another writer appended meanwhile (a person's pause, decision or event
    /// recorded while this process drives the run), the input is decided again on the
    /// run as it now stands and appended after, so an answer in flight is recorded, not
    /// lost; an input the newer run refuses (the call answered elsewhere, the run
    /// cancelled) is an error. On an error the state may be past what is recorded: drop
    /// it (every caller returns the error), and fold the log again to go on.
    pub(crate) async fn decide_and_append(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        command: Command,
    ) -> Result<(), RuntimeError> {
        /// How many times an input is decided again on a run that moved on under it.
        const REBASES: usize = 3;
        if matches!(command, Command::Start(_)) {
            return self.decide_and_append_once(state, bundle, command).await;
        }
        let mut rebases = 0;
        loop {
            match self
                .decide_and_append_once(state, bundle, command.clone())
                .await
            {
                Err(RuntimeError::Conflict { run, .. }) if rebases < REBASES => {
                    rebases += 1;
                    tracing::info!(run = %run, "the run moved on under this drive: its input is decided again on the run as it stands");
                    *state = self.load_state(&run).await?.0;
                }
                other => return other,
            }
        }
    }

    /// [`Runtime::decide_and_append`] without deciding again on a newer run: for a caller
    /// that reads the newer run itself (a person's decision names the decision that closed
    /// its ticket first).
    async fn decide_and_append_once(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        command: Command,
    ) -> Result<(), RuntimeError> {
        let run_id = match &command {
            Command::Start(r) => r.run_id.clone(),
            _ => state.run_id().cloned().unwrap_or_default(),
        };
        let version = state.version();
        let events = decide_in_place(state, bundle, command).map_err(|rejection| {
            RuntimeError::Rejected {
                run: run_id.clone(),
                rejection,
            }
        })?;
        let redactable = redactable(state);
        self.append_decided(&run_id, version, redactable, bundle, &events)
            .await
    }

    /// Appends decided events (one batch, or several decided one after the other) at
    /// `version`, in one durable write; `redactable`: the run's workflow asks for values
    /// committed apart.
    async fn append_decided(
        &self,
        run_id: &RunId,
        version: u64,
        redactable: bool,
        bundle: &PolicyBundle,
        events: &[RunEvent],
    ) -> Result<(), RuntimeError> {
        let run_id = run_id.clone();
        let stream = Self::stream(&run_id)?;
        let policy = Some(Hash(bundle.hash().0));
        let recorded_at = WallTime(self.inner.clock.now_ns());
        let mut blobs = Vec::new();
        let mut disclosures = Vec::new();
        let encoding = self.payload_encoding(redactable);
        let mut salt = match encoding {
            PayloadEncoding::Committed => Some(self.inner.salts.for_run(run_id.as_str()).map_err(
                |message| RuntimeError::NoRandomness {
                    run: run_id.to_string(),
                    message,
                },
            )?),
            _ => None,
        };
        // Content two events of the batch share is written out, hashed and stored once.
        let mut referred = ReferencedContent::default();
        let batch: Vec<NewEvent> = events
            .iter()
            .map(|e| {
                let committed = salt
                    .as_mut()
                    .and_then(|salt| e.encode_committed(&mut |m| salt.salt(m)));
                let (kind_version, payload) = match (encoding, committed) {
                    (_, Some(encoded)) => {
                        disclosures
                            .extend(encoded.disclosures.into_iter().map(|d| (d.digest, d.bytes)));
                        (COMMITTED_PAYLOAD, encoded.payload)
                    }
                    (PayloadEncoding::Plain, None) => (KIND_VERSION, e.encode()),
                    // Encoding 2, or encoding 3's fallback for a value JCS cannot carry.
                    (_, None) => {
                        let encoded = e.encode_referenced_after(&mut referred);
                        blobs.extend(encoded.blobs);
                        (REFERENCED_PAYLOAD, encoded.payload)
                    }
                };
                NewEvent {
                    kind: e.kind().to_owned(),
                    kind_version,
                    recorded_at,
                    policy,
                    payload,
                }
            })
            .collect();
        // The disclosures first (outside the log, FORMAT.md §13): an event is never
        // acknowledged before what it commits to is durable.
        self.inner
            .store
            .put_disclosures(&stream, disclosures)
            .await
            .map_err(RuntimeError::Store)?;
        // The content the events refer to goes in the same atomic write, each blob once.
        let appended = self
            .inner
            .store
            .append_with_blobs(&stream, version, batch, blobs)
            .await
            .map_err(|e| match e {
                StoreError::Conflict {
                    expected, actual, ..
                } => RuntimeError::Conflict {
                    run: run_id.clone(),
                    expected,
                    actual,
                },
                other => RuntimeError::Store(other),
            })?;
        self.note_appended(&run_id, version, events, &appended.hashes)
            .await;
        for (seq, event) in (version + 1..).zip(events) {
            trace_decision(run_id.as_str(), event, seq);
        }
        Ok(())
    }

    /// Calls every pending agent (concurrently, for a fan-out), records each answer and
    /// what it causes, until the run is no longer running. `interrupted`: the tool calls
    /// found scheduled without an outcome when driving began.
    async fn drive(
        &self,
        mut state: RunState,
        bundle: Arc<PolicyBundle>,
        interrupted: std::collections::BTreeSet<docket_decider::ToolCallId>,
    ) -> Result<RunOutcome, RuntimeError> {
        let run_id = state.run_id().cloned().unwrap_or_default();
        let workflow = state
            .request()
            .map(|r| r.workflow.clone())
            .ok_or_else(|| RuntimeError::NoRequest(run_id.clone()))?;
        // Within `start`, its run span goes on.
        let current = tracing::Span::current();
        let span = if current.metadata().is_some_and(|m| m.name() == "run") {
            current
        } else {
            crate::telemetry::run(run_id.as_str(), &workflow.name)
        };
        async {
            let mut carried = None;
            let mut snapshot_at = state.version();
            loop {
                let pending = match state.next_step() {
                    // Side effects: due effect work first, one step at a time.
                    NextStep::Effect(record, work) => {
                        let work = (record.clone(), work);
                        self.effect_step(&mut state, &bundle, &workflow, carried.take(), work)
                            .await?;
                        continue;
                    }
                    // Governed tools: the asking agent waits for the outcome.
                    NextStep::Tool(record) => {
                        let record = record.clone();
                        self.commit_carried(&mut state, &bundle, carried.take())
                            .await?;
                        self.snapshot_if_due(&state, &mut snapshot_at, false).await;
                        let was_interrupted = interrupted.contains(&record.tool_call_id);
                        self.tool_step(&mut state, &bundle, &workflow, &record, was_interrupted)
                            .await?;
                        continue;
                    }
                    // Durable timers: nothing else to do until the first is due; the
                    // drive waits it out, or ends when this process fires timers apart.
                    NextStep::WaitForTimer(timer) => {
                        let timer = timer.clone();
                        self.commit_carried(&mut state, &bundle, carried.take())
                            .await?;
                        self.snapshot_if_due(&state, &mut snapshot_at, false).await;
                        let elsewhere = self
                            .inner
                            .timers_elsewhere
                            .load(std::sync::atomic::Ordering::Relaxed);
                        // The timeout of a wait for an outside event: the event, sent by
                        // another process, is what the run waits for; no process holds
                        // the run meanwhile (`docket resume` or `docket serve` fires the
                        // timeout, late when nothing drove the run at its time).
                        let for_event = state.awaits_signal();
                        if (elsewhere || for_event) && timer.set.due_at_ms > self.now_ms() {
                            break;
                        }
                        self.timer_step(&mut state, &bundle, &timer).await?;
                        continue;
                    }
                    NextStep::Call(pending) => pending,
                    _ => break,
                };
                self.commit_carried(&mut state, &bundle, carried.take())
                    .await?;
                self.snapshot_if_due(&state, &mut snapshot_at, false).await;
                let pending = self.read_circuits(&mut state, &bundle, pending).await?;
                // One span per call, kept open until its answer is recorded (its seq).
                let spans: Vec<tracing::Span> = pending
                    .iter()
                    .map(|r| crate::telemetry::invoke_agent(r))
                    .collect();
                let answers =
                    futures::future::join_all(pending.iter().zip(&spans).map(|(request, span)| {
                        self.call(&workflow, request).instrument(span.clone())
                    }))
                    .await;
                let last = pending.len().saturating_sub(1);
                for (i, ((request, answer), span)) in
                    pending.iter().zip(answers).zip(spans).enumerate()
                {
                    if state.status().is_final() {
                        break;
                    }
                    crate::telemetry::answered(
                        &span,
                        answer.as_ref().map_err(AgentCallError::code),
                        state.version() + 1,
                    );
                    let at_ms = self.now_ms();
                    let command = match answer {
                        Ok(response) => Command::RecordResponse(AgentResponded {
                            request_id: request.request_id.clone(),
                            response: response.into(),
                            at_ms,
                        }),
                        Err(err) => Command::RecordFailure(AgentCallFailed {
                            request_id: request.request_id.clone(),
                            code: err.code().to_owned(),
                            message: err.to_string(),
                            at_ms,
                        }),
                    };
                    if i == last {
                        // Side effects: an answer asking for an effect is written together
                        // with the effect's dry run and start (see `effects.rs`).
                        carried = self.stage_answer(&mut state, &bundle, command).await?;
                    } else {
                        self.decide_and_append(&mut state, &bundle, command).await?;
                    }
                    self.record_outcome(&state, &bundle, request, at_ms).await?;
                }
            }
            self.commit_carried(&mut state, &bundle, carried).await?;
            self.snapshot_if_due(&state, &mut snapshot_at, true).await;
            tracing::Span::current().record("docket.status", state.status().as_str());
            tracing::info!(status = state.status().as_str(), "run stopped");
            Ok(RunOutcome {
                run_id: run_id.clone(),
                state,
            })
        }
        .instrument(span)
        .await
    }

    async fn call(
        &self,
        workflow: &WorkflowSpec,
        request: &AgentRequest,
    ) -> Result<AgentResponse, AgentCallError> {
        let executor = self.inner.executors.get(workflow, &request.target_agent)?;
        // The executors enforce the timeout themselves (the command one kills the process);
        // this bound only catches an executor that does not.
        let bound = Duration::from_millis(request.timeout_ms.saturating_add(1_000));
        match tokio::time::timeout(bound, executor.call(request)).await {
            Ok(answer) => answer,
            Err(_) => Err(AgentCallError::Timeout {
                timeout_ms: request.timeout_ms,
            }),
        }
    }
}

/// One tracing event per decision (recorded at `seq`), inside a `handoff` span for
/// handoffs.
fn trace_decision(run_id: &str, event: &RunEvent, seq: u64) {
    match event {
        RunEvent::HandoffAllowed {
            from,
            to,
            output_type,
            decision,
            audit,
            ..
        } => {
            let _span = crate::telemetry::handoff(
                run_id,
                from.as_str(),
                to.as_str(),
                output_type,
                &decision.rule_id,
                Some(crate::telemetry::HandoffTokens {
                    before: audit.context_before_scoping.total_tokens,
                    after: audit.context_after_scoping.total_tokens,
                }),
                seq,
            )
            .entered();
            tracing::info!(rule = %decision.rule_id, "handoff allowed");
        }
        RunEvent::HandoffDenied {
            from,
            to,
            output_type,
            decision,
            ..
        } => {
            let _span = crate::telemetry::handoff(
                run_id,
                from.as_str(),
                to.as_str(),
                output_type,
                &decision.rule_id,
                None,
                seq,
            )
            .entered();
            tracing::warn!(rule = %decision.rule_id, reason = %decision.reason, "handoff denied");
        }
        RunEvent::Escalated { ticket, reason, .. } => {
            tracing::warn!(ticket = %ticket, reason = %reason, "waiting for a human");
        }
        RunEvent::TimerSet(set) => {
            tracing::warn!(
                timer = %set.timer_id,
                agent = %set.agent,
                due_at_ms = set.due_at_ms,
                reason = %set.reason,
                "waiting on a timer (interrupting loses nothing: the timer is in the log, and resuming the run fires it)"
            );
        }
        RunEvent::RunBlocked {
            rule_id, reason, ..
        } => {
            tracing::warn!(rule = %rule_id, reason = %reason, "run blocked");
        }
        RunEvent::HumanOverrode(HumanOverrode {
            by, role, rule_id, ..
        }) => {
            tracing::warn!(by = %by, role = %role, rule = %rule_id, "block overridden");
        }
        other => tracing::debug!(kind = other.kind(), "recorded"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::InProcessExecutor;
    use docket_decider::{Action, AgentResponse, Confidence};
    use docket_decider::{AgentSpec, ExecutorSpec, RunStatus};
    use docket_store::{EmbeddedStore, StoreConfig};

    fn workflow() -> Workflow {
        let bundle = "bundle = { id = \"w\" }\nagents = [{ id = \"external\" }, { id = \"worker\" }]\n\
                      [interactions]\nallowed = [{ from = \"external\", to = \"worker\" }, { from = \"worker\", to = \"external\" }]\n\
                      [multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\n";
        let mut spec = WorkflowSpec {
            name: "w".into(),
            policy: "w.toml".into(),
            entry: "worker".into(),
            input_type: None,
            goal: None,
            budget: Default::default(),
            input: None,
            agents: Default::default(),
            effects: Default::default(),
            tools: Default::default(),
            evidence: Default::default(),
        };
        spec.agents.insert(
            "worker".into(),
            AgentSpec {
                executor: ExecutorSpec::InProcess { in_process: true },
                timeout_ms: None,
                classifiers: Vec::new(),
                cwd: None,
                max_response_bytes: None,
                processes: None,
                requests_per_process: None,
                ca_file: None,
                bearer_env: None,
                headers_env: Default::default(),
            },
        );
        Workflow {
            spec,
            bundle_source: bundle.into(),
            bundle_source_name: "w.toml".into(),
        }
    }

    /// Deciding in place yields the same batch, and the same state, as deciding from a
    /// copy and folding the batch (the runtime relies on it instead of folding twice).
    #[test]
    fn deciding_in_place_equals_deciding_from_a_copy_then_folding() {
        let wf = workflow();
        let bundle = recorded_bundle_of(&wf);
        let start = Command::Start(Arc::new(RunRequested {
            run_id: "run-p".into(),
            workflow: wf.spec.clone(),
            bundle_source: wf.bundle_source.clone(),
            bundle_source_name: wf.bundle_source_name.clone(),
            bundle_hash: bundle.hash().to_hex(),
            input: serde_json::json!({"n": 1}),
            at_ms: 5,
            decider_version: docket_decider::DECIDER_VERSION,
            forked_from: None,
            scheduled: None,
            session: None,
        }));
        let before = RunState::default();
        let copied = docket_decider::decide(&before, &bundle, start.clone()).expect("decides");
        let mut in_place = before.clone();
        let events = decide_in_place(&mut in_place, &bundle, start.clone()).expect("decides");
        assert_eq!(events, copied);
        assert_eq!(in_place, RunState::fold(copied.iter()));
        // A rejection leaves the state as it was.
        let kept = in_place.clone();
        assert!(decide_in_place(&mut in_place, &bundle, start).is_err());
        assert_eq!(in_place, kept);
    }

    fn recorded_bundle_of(wf: &Workflow) -> PolicyBundle {
        docket_policies::parse(
            &wf.bundle_source,
            &wf.bundle_source_name,
            docket_policies::Format::Toml,
        )
        .expect("bundle")
    }

    /// A second writer decided from a state the first has moved past: its append
    /// conflicts, its input is decided again on the run as it stands, which refuses it
    /// (the run is finished), and nothing of it is recorded. Appending at a stale version
    /// is a conflict naming both versions.
    #[tokio::test]
    async fn a_second_writer_is_decided_again_and_records_nothing_the_run_refuses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
            .await
            .expect("store");
        let runtime = Runtime::new(store);
        let agent: Arc<dyn AgentExecutor> = Arc::new(InProcessExecutor::new(|r: &AgentRequest| {
            AgentResponse::success(
                r.request_id.clone(),
                Confidence::High,
                vec![
                    Action::Escalate {
                        reason: "sign-off".into(),
                        choices: Vec::new(),
                    },
                    Action::Finish {
                        output: serde_json::json!({"ok": true}),
                    },
                ],
            )
        }));
        runtime.register_agent("worker", agent);
        let outcome = runtime
            .start(&workflow(), serde_json::json!({}), Some("run-w".into()))
            .await
            .expect("starts");
        assert_eq!(outcome.state.status(), RunStatus::WaitingForHuman);

        let (mut stale, bundle) = runtime.load_state(&"run-w".into()).await.expect("loads");
        let first = runtime
            .decide_ticket(
                &"run-w".into(),
                "ticket-1",
                HumanDecision::approve("ana", "ok"),
            )
            .await
            .expect("first writer");
        assert_eq!(first.state.status(), RunStatus::Completed);
        let before = runtime.events(&"run-w".into()).await.expect("events").len();

        let decision = Command::RecordHumanDecision(HumanDecided {
            ticket: "ticket-1".into(),
            approved: false,
            by: "bo".into(),
            reason: "no".into(),
            choice: None,
            answer: None,
            at_ms: 0,
        });
        let mut staler = stale.clone();
        let second = runtime
            .decide_and_append(&mut stale, &bundle, decision.clone())
            .await;
        let err = second.expect_err("the stale writer is refused");
        assert!(
            matches!(
                err,
                RuntimeError::Rejected {
                    rejection: docket_decider::Rejection::Finished(_),
                    ..
                }
            ),
            "{err}"
        );
        let err = runtime
            .decide_and_append_once(&mut staler, &bundle, decision)
            .await
            .expect_err("a stale append conflicts");
        assert!(matches!(err, RuntimeError::Conflict { .. }), "{err}");
        assert!(
            err.to_string().contains("only one process may drive a run"),
            "{err}"
        );
        assert_eq!(
            runtime.events(&"run-w".into()).await.expect("events").len(),
            before
        );
    }

    /// The state is read from the latest snapshot tied to the log, with the events after
    /// it folded on; a snapshot this build cannot read, or one of another length than the
    /// event it is stored at, is ignored and the log folded: the state is the same.
    #[tokio::test]
    async fn the_state_comes_from_the_latest_usable_snapshot_and_equals_the_fold() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
            .await
            .expect("store");
        let runtime = Runtime::new(store.clone());
        let agent: Arc<dyn AgentExecutor> = Arc::new(InProcessExecutor::new(|r: &AgentRequest| {
            AgentResponse::success(
                r.request_id.clone(),
                Confidence::High,
                vec![Action::Escalate {
                    reason: "sign-off".into(),
                    choices: Vec::new(),
                }],
            )
        }));
        runtime.register_agent("worker", agent);
        let run: RunId = "run-s".into();
        runtime
            .start(&workflow(), serde_json::json!({}), Some(run.clone()))
            .await
            .expect("starts");
        let events: Vec<RunEvent> = runtime
            .events(&run)
            .await
            .expect("events")
            .into_iter()
            .map(|e| e.event)
            .collect();
        let folded = RunState::fold(&events);
        let stream = StreamId::new("run-s").expect("stream");
        let early = RunState::fold(&events[..2]);
        store
            .put_snapshot(&stream, 2, early.encode_snapshot().expect("encodes"))
            .await
            .expect("stored");
        assert_eq!(runtime.state(&run).await.expect("state"), folded);
        assert_eq!(runtime.state_at(&run, Some(2)).await.expect("state"), early);
        // It is read, not folded around: a snapshot of two events that are not the log's
        // (a forgery `docket verify` would catch) is what the state at 2 comes from.
        let forged = RunState::fold([&events[0], &events[0]]);
        assert_ne!(forged, early);
        store
            .put_snapshot(&stream, 2, forged.encode_snapshot().expect("encodes"))
            .await
            .expect("stored");
        assert_eq!(
            runtime.state_at(&run, Some(2)).await.expect("state"),
            forged
        );
        store
            .put_snapshot(&stream, 2, early.encode_snapshot().expect("encodes"))
            .await
            .expect("stored");
        let last = events.len() as u64;
        store
            .put_snapshot(&stream, last, b"not a snapshot".to_vec())
            .await
            .expect("stored");
        assert_eq!(runtime.state(&run).await.expect("state"), folded);
        store
            .put_snapshot(&stream, last, early.encode_snapshot().expect("encodes"))
            .await
            .expect("stored");
        assert_eq!(runtime.state(&run).await.expect("state"), folded);
    }
}
