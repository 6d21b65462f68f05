//! The run commands: start, resume and inspect runs, and decide human tickets.
//!
//! Exit codes (documented in the README): 0 completed (or the command succeeded),
//! 1 failed or an error, 2 bad command-line input (clap), 3 waiting for a human,
//! 4 blocked by policy.

use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use clap::Subcommand;
use docket_decider::{
    HandoffRecord, RunEvent, RunHistory, RunId, RunState, RunStatus, TicketSubject,
};
use docket_policies::InputKind;
use docket_runtime::{
    HumanDecision, HumanOverride, RunOutcome, Runtime, RuntimeError, Workflow, WorkflowLoadError,
};
use docket_store::{EmbeddedStore, EventStore as _, LockHolder, StoreConfig, StoreError};
use serde_json::{Value, json};

use crate::words::{date_ns, word};

/// The run completed.
pub const EXIT_COMPLETED: u8 = 0;
/// The run failed, or the command could not be carried out.
pub const EXIT_FAILED: u8 = 1;
/// The run waits for a human decision (`docket approve`, `docket answer` or `docket deny`).
pub const EXIT_WAITING: u8 = 3;
/// A policy stopped the run.
pub const EXIT_BLOCKED: u8 = 4;

#[derive(Subcommand)]
pub(crate) enum RunCommand {
    /// Start a run of a workflow and drive it until it completes, is blocked, fails or
    /// waits for a human. Says `run ID recorded` on stderr as soon as the run is in the
    /// log, so another terminal can follow it.
    Run {
        /// The workflow file (TOML, see docs/workflow.md).
        workflow: PathBuf,
        /// The run's input as JSON: a file, or `-` for stdin (default: the workflow's
        /// `input` file).
        #[arg(long, value_name = "FILE|-")]
        input: Option<String>,
        /// Use this run id instead of a generated one (fails if it exists): letters,
        /// digits, '.', '_' and '-', at most 128.
        #[arg(long, value_name = "ID", value_parser = |id: &str| RunId::parse(id))]
        run_id: Option<RunId>,
    },
    /// Continue a run from its log: calls without a recorded answer are made again.
    Resume {
        /// The run id.
        run: RunId,
    },
    /// List the runs in the data directory: id, workflow, status, events, open tickets.
    /// A run whose driving process died shows as `interrupted` with the `docket resume`
    /// that continues it; a run whose events fail their checks as `damaged`, with where.
    Runs {
        /// Only the runs waiting for a human, with their open tickets.
        #[arg(long)]
        waiting: bool,
    },
    /// Show where a run stands (`interrupted` when no process drives a running run).
    Status {
        /// The run id.
        run: RunId,
        /// Print JSON (status, handoffs, open tickets, episodes, effects, output).
        #[arg(long)]
        json: bool,
    },
    /// Print a run's events, one per line: sequence, recorded time (UTC), kind, summary.
    Events {
        /// The run id.
        run: RunId,
        /// One JSON object per line (envelope and plain payload; `content`: what the payload refers to by hash, docs/events.md#content-stored-once).
        #[arg(long)]
        json: bool,
    },
    /// Approve a human ticket and continue the run.
    Approve {
        /// The run id.
        run: RunId,
        /// The ticket (`ticket-N`, as `docket status` or `docket runs --waiting` show).
        ticket: String,
        /// On a conflict ticket: the number of the output to keep (default 1); on a question
        /// with options: the option chosen (or use `docket answer`).
        #[arg(long, value_name = "N")]
        choose: Option<u32>,
        /// Who decides (recorded in the run's log).
        #[arg(long, value_name = "NAME", value_parser = someone)]
        by: String,
        /// Why (recorded in the run's log).
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
    /// Refuse a human ticket: the run stops, blocked.
    Deny {
        /// The run id.
        run: RunId,
        /// The ticket (`ticket-N`, as `docket status` or `docket runs --waiting` show).
        ticket: String,
        /// Who decides (recorded in the run's log).
        #[arg(long, value_name = "NAME", value_parser = someone)]
        by: String,
        /// Why (recorded in the run's log).
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
    /// Answer an agent's question: the agent is called again with the answer.
    #[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["choice", "text"])))]
    Answer {
        /// The run id.
        run: RunId,
        /// The ticket (`ticket-N`, as `docket status` shows with the question).
        ticket: String,
        /// Who answers (recorded in the run's log).
        #[arg(long, value_name = "NAME", value_parser = someone)]
        by: String,
        /// One of the options the agent offered: its number (from 1) or its text.
        #[arg(long, value_name = "C")]
        choice: Option<String>,
        /// The answer in your own words.
        #[arg(long, value_name = "TEXT")]
        text: Option<String>,
        /// Why (recorded in the run's log).
        #[arg(long, value_name = "TEXT", default_value = "")]
        reason: String,
    },
    /// Cancel a run that is not finished: `run.cancelled` is recorded with who and why and
    /// the run ends `cancelled`; nothing more happens in it (a run recorded by a decider
    /// before version 10 cannot be cancelled). See docs/events.md#runcancelled.
    Cancel {
        /// The run id.
        run: RunId,
        /// Who cancels (recorded in the run's log).
        #[arg(long, value_name = "NAME", value_parser = someone)]
        by: String,
        /// Why (recorded in the run's log).
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
    /// Override the rule that blocked a run, in a role of the bundle's registry that
    /// outranks it: what the block stopped goes on (docs/governance.md#human-override).
    Override {
        /// The run id.
        run: RunId,
        /// Who overrides (recorded in the run's log).
        #[arg(long, value_name = "NAME", value_parser = someone)]
        by: String,
        /// The role you act in: an agent id of the bundle's registry (e.g. one with
        /// authority = "human"); `docket status` names the roles that may.
        #[arg(long, value_name = "ROLE")]
        role: String,
        /// Why (recorded in the run's log).
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// The rule you override; it must be the one that blocked (default: that one).
        #[arg(long, value_name = "RULE")]
        rule: Option<String>,
    },
    /// Re-derive every decision a run recorded, with its recorded bundle and decider
    /// version, calling no agent: prints the counts and the run's result, or the first
    /// divergence with what differs and why (docs/replay.md). Exit 1 on a divergence.
    Replay {
        /// The run id (or --all).
        #[arg(required_unless_present = "all")]
        run: Option<RunId>,
        /// Every run in the data directory, one line each.
        #[arg(long, conflicts_with = "run")]
        all: bool,
        /// What-if: decide the recorded answers under this bundle instead. Each decision
        /// that would change (handoffs and fields, capability requests, spawns, effects,
        /// tool calls, limits, stop conditions, tickets, the run's end) is classed
        /// stricter, looser or changed with its rule before and after; then where the
        /// run would have parted, what is decided instead, and the recorded steps that
        /// would not have happened, in causal order. With --all, a summary per kind of
        /// decision and per rule.
        #[arg(long, value_name = "BUNDLE")]
        policies: Option<PathBuf>,
        /// Print JSON (the report of each run; with --all --policies, a last line with
        /// the summary).
        #[arg(long)]
        json: bool,
    },
    /// Compare two runs step by step: calls, handoffs, policy decisions, effects (by
    /// idempotency key), tool calls and tickets are aligned by what they are, not by
    /// where they sit in the logs, and each difference of decision, payload or outcome is
    /// shown, with the steps only one run took (docs/replay.md#diff).
    Diff {
        /// Run A.
        run_a: RunId,
        /// Run B.
        run_b: RunId,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Start a new run from a recorded one: the recorded answers, receipts and decisions
    /// before POINT are reused (no agent called, no effect applied again), while the fork
    /// asks what the parent asked; from there it runs live. The fork records what it was
    /// forked from (docs/replay.md#fork).
    Fork {
        /// The parent run.
        run: RunId,
        /// Where the fork goes live: an event number, or first, last, first-denial,
        /// last-denial, first-effect, last-effect, first-escalation, last-escalation.
        /// Recorded inputs before it are reused.
        #[arg(long, value_name = "POINT")]
        from: String,
        /// Decide the fork under this bundle instead of the parent's.
        #[arg(long, value_name = "BUNDLE")]
        policies: Option<PathBuf>,
        /// Answer one of the parent's calls (`call-3`, or the full id) with the agent
        /// response in FILE instead of its recorded answer.
        #[arg(long, value_name = "CALL=FILE")]
        override_output: Option<String>,
        /// The fork's run id (default: a new one).
        #[arg(long, value_name = "ID", value_parser = |id: &str| RunId::parse(id))]
        run_id: Option<RunId>,
    },
    /// Show a run as it stood at any event of its log: status, flow position, pending
    /// calls and tool calls, open tickets, the episode tree with budgets used and left,
    /// effects, circuit readings; and exactly what that event carried: for a call or a
    /// handoff, the whole request the receiving agent was sent, with its request hash
    /// (BLAKE3 of its canonical JSON, docs/replay.md#inspect) and the event's chain hash.
    Inspect {
        /// The run id.
        run: RunId,
        /// An event number, or first, last, or first-X / last-X with X one of denial,
        /// effect, escalation, failure, handoff, call, spawn, tool, override, circuit.
        #[arg(long, value_name = "POINT", default_value = "last")]
        at: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `--by`: a decision names someone.
fn someone(name: &str) -> Result<String, String> {
    if name.trim().is_empty() {
        Err("a decision must name who decides".to_owned())
    } else {
        Ok(name.to_owned())
    }
}

/// `--choice C` on a question: the option's number (from 1), given as a number or as the
/// option's text.
fn option_number(state: &RunState, ticket: &str, choice: &str) -> anyhow::Result<u32> {
    if let Ok(n) = choice.parse::<u32>() {
        return Ok(n);
    }
    let t = state
        .tickets()
        .get(&docket_decider::TicketId::from(ticket))
        .ok_or_else(|| anyhow!("no ticket {ticket} in this run"))?;
    let TicketSubject::Question { choices, .. } = &t.subject else {
        return Err(anyhow!(
            "ticket {ticket} asks no question with options: approve or deny it"
        ));
    };
    choices
        .iter()
        .position(|c| c == choice)
        .and_then(|i| u32::try_from(i + 1).ok())
        .ok_or_else(|| {
            anyhow!(
                "ticket {ticket} offers {}; `{choice}` is not one of them",
                choices
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{} `{c}`", i + 1))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// The data directory: `--data`, else `$DOCKET_DATA`, else `./.docket`.
pub(crate) fn data_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("DOCKET_DATA").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(".docket"))
}

/// `docket circuits`, on the same async runtime and error reporting as the run commands.
pub(crate) fn circuits_main(
    args: crate::circuits::CircuitsArgs,
    data: Option<PathBuf>,
) -> ExitCode {
    run_async(data, |data, out| {
        Box::pin(async move { crate::circuits::execute(args, &data, out).await })
    })
}

pub(crate) fn main(command: RunCommand, data: Option<PathBuf>) -> ExitCode {
    run_async(data, |data, out| {
        Box::pin(async move { execute(command, &data, out).await })
    })
}

pub(crate) type Pending<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<u8>> + 'a>>;

/// The most worker threads `--threads` or `DOCKET_THREADS` may ask for.
pub(crate) const MAX_THREADS: usize = 1024;

/// The worker threads runs are driven on (`--threads`, `DOCKET_THREADS`, else the
/// machine's available parallelism), set once by `main`.
pub(crate) static THREADS: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();

/// `DOCKET_THREADS`, when set; `None` when not (the machine's parallelism then).
pub(crate) fn threads_from_env() -> Result<Option<usize>, String> {
    match std::env::var("DOCKET_THREADS") {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err("DOCKET_THREADS is not a number of threads".to_owned())
        }
        Ok(text) => match text.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(Some(n)),
            _ => Err(format!(
                "DOCKET_THREADS={text}: not a number of threads from 1 to {MAX_THREADS}"
            )),
        },
    }
}

/// The tokio runtime commands run on, with [`THREADS`] workers; on failure the error is
/// printed and the exit code returned.
pub(crate) fn async_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    let threads = THREADS.get().copied().flatten().unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| {
            say!("error: cannot start the async runtime: {e}");
            ExitCode::from(EXIT_FAILED)
        })
}

/// Runs a command on a tokio runtime, prints its output and maps its result to an exit
/// code.
pub(crate) fn run_async(
    data: Option<PathBuf>,
    command: impl for<'a> FnOnce(PathBuf, &'a mut String) -> Pending<'a>,
) -> ExitCode {
    // Declared before the async runtime, so dropped after it: queued spans are sent
    // outside it, before the process exits.
    let _telemetry = match crate::telemetry::init() {
        Ok(t) => t,
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match async_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let mut out = String::new();
    let result = runtime.block_on(command(data_dir(data), &mut out));
    if let Err(e) = std::io::stdout().lock().write_all(out.as_bytes())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        say!("error: cannot write output: {e}");
        return ExitCode::from(EXIT_FAILED);
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            say!("error: {}", crate::errors::error_text(&e));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// How long a command that records waits for another process that is recording in the
/// same data directory (`--lock-wait`); set once by `main`.
pub(crate) static LOCK_WAIT: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();

/// Said once on stderr when a command has to wait for the writer lock.
fn tell_waiting(dir: &Path, holder: &LockHolder) {
    say!(
        "waiting for {holder}, which is recording in {}: one process records at a time (--lock-wait SECS says how long to wait)",
        dir.display()
    );
}

/// Opens the data directory to record in it (creating it if need be): takes its writer
/// lock, waiting up to `--lock-wait` for another recording process (store/FORMAT.md §10).
pub(crate) async fn open(dir: &Path) -> anyhow::Result<Runtime<EmbeddedStore>> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "cannot open the data directory {}: it is a file, not a directory (give another with --data DIR)",
            dir.display()
        );
    }
    // `docket serve` holds the lock for its lifetime: waiting for it is pointless.
    if let Some(holder) = LockHolder::of(dir).filter(|h| docket_serve::is_server(&h.command)) {
        anyhow::bail!(
            "the data directory {} is served by process {} (`{}`), which records for it while it runs: use its API instead (docs/api.md), e.g. POST /api/runs/RUN/tickets/TICKET/approve",
            dir.display(),
            holder.pid,
            holder.command
        );
    }
    let config = StoreConfig {
        lock_wait: LOCK_WAIT.get().copied().unwrap_or(DEFAULT_LOCK_WAIT),
        on_lock_wait: Some(tell_waiting),
        ..StoreConfig::default()
    };
    let store = match EmbeddedStore::open(dir, config).await {
        Ok(store) => store,
        // `docket serve` holds the lock for its lifetime: what it would record goes
        // through its API (docs/api.md).
        Err(e) if held_by_server(&e) => {
            return Err(anyhow!(
                "{e}. `docket serve` records for this data directory while it runs: use its API instead (docs/api.md), e.g. POST /api/runs/RUN/tickets/TICKET/approve"
            ));
        }
        Err(e @ StoreError::Held { .. }) => {
            return Err(anyhow!(
                "{e}. Try again once it is done (`docket runs` shows what it drives), stop it, or wait longer with --lock-wait SECS"
            ));
        }
        // The index is a cache of the log (store/FORMAT.md §1): what to do is safe.
        Err(e @ StoreError::Index { .. }) => {
            return Err(anyhow!(
                "cannot open the data directory {}: {e}. The index is a cache of the log: move {} aside (or delete it) and run the command again to rebuild it from the log",
                dir.display(),
                dir.join("index").display()
            ));
        }
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("cannot open the data directory {}", dir.display())));
        }
    };
    let runtime = Runtime::new(store);
    // Read before every effect execution, so `docket kill-switch on` from another
    // process stops this run's next effect.
    runtime.set_kill_switch(std::sync::Arc::new(docket_runtime::FileKillSwitch::new(
        dir,
    )));
    Ok(runtime)
}

/// Whether the writer lock is held by `docket serve`.
fn held_by_server(e: &StoreError) -> bool {
    matches!(e, StoreError::Held { holder: Some(h), .. } if docket_serve::is_server(&h.command))
}

/// The default of `--lock-wait`.
pub(crate) const DEFAULT_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens the data directory to read it, while another process may be recording in it:
/// no lock, nothing created or repaired (store/FORMAT.md §10). A directory that does not
/// exist is an error naming it.
pub(crate) async fn open_read(dir: &Path) -> anyhow::Result<Runtime<EmbeddedStore>> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "cannot read the data directory {}: it is a file, not a directory (give another with --data DIR)",
            dir.display()
        );
    }
    let store = EmbeddedStore::open_read_only(dir)
        .await
        .map_err(|e| match e {
            StoreError::NoDataDirectory { .. } | StoreError::NotADataDirectory { .. } => {
                anyhow!("{e} (give another with --data DIR or $DOCKET_DATA)")
            }
            other => anyhow::Error::new(other)
                .context(format!("cannot read the data directory {}", dir.display())),
        })?;
    if let Some(damage) = store.view_report().and_then(|r| r.log_damage) {
        let after = if damage.streams_after.is_empty() {
            "runs may lack their later events".to_owned()
        } else {
            format!(
                "these runs have events recorded after it, not shown: {}",
                damage
                    .streams_after
                    .iter()
                    .map(docket_store::StreamId::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        say!(
            "warning: the log is damaged in {} at byte offset {} ({}): nothing after it was read, so {after} (docket verify checks the whole directory)",
            damage.segment.display(),
            damage.offset,
            damage.damage
        );
    }
    Ok(Runtime::new(store))
}

/// [`open_read`] for a command about one run: a missing directory is said as the run
/// missing from it, and a run recorded only after damage to the log as that damage.
pub(crate) async fn open_read_for(
    dir: &Path,
    run: &RunId,
) -> anyhow::Result<Runtime<EmbeddedStore>> {
    if !dir.exists() {
        anyhow::bail!(
            "no run {run} in the data directory {}: it does not exist (give another with --data DIR or $DOCKET_DATA)",
            dir.display()
        );
    }
    let rt = open_read(dir).await?;
    if let Some(damage) = rt.store().view_report().and_then(|r| r.log_damage)
        && let Ok(stream) = docket_store::StreamId::new(run.as_str())
        && damage.streams_after.contains(&stream)
        && matches!(rt.store().head(&stream).await, Ok(None))
    {
        anyhow::bail!(
            "run {run} was recorded after damage to the log in {} at byte offset {} ({}): none of its events can be read (docket verify checks the whole directory)",
            damage.segment.display(),
            damage.offset,
            damage.damage
        );
    }
    Ok(rt)
}

/// Whether a run whose log says it is running is driven by a live process: the holder
/// of the writer lock, if it appended to the run (store/FORMAT.md §10).
pub(crate) fn driven(dir: &Path, run: &RunId) -> bool {
    let Ok(stream) = docket_store::StreamId::new(run.as_str()) else {
        return false;
    };
    LockHolder::of(dir).is_some_and(|h| h.drives(&stream))
}

/// Prints `run RUN recorded` on stderr once the run's first event is in the log; aborted
/// when the run ends before (or was never recorded).
fn announce_when_recorded(rt: &Runtime<EmbeddedStore>, run: &RunId) -> tokio::task::JoinHandle<()> {
    let stream = docket_store::StreamId::new(run.as_str()).ok();
    let store = rt.store().clone();
    let run = run.clone();
    tokio::spawn(async move {
        let Some(stream) = stream else { return };
        let mut tail = Box::pin(store.tail(&stream, 1));
        if let Some(Ok(_)) = futures::StreamExt::next(&mut tail).await {
            say!("run {run} recorded; follow it with: docket status {run}");
        }
    })
}

fn read_input(arg: Option<&str>, workflow: &Workflow) -> anyhow::Result<Value> {
    let (text, name) = match arg {
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the input from stdin")?;
            (text, "stdin".to_owned())
        }
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("cannot read input {path}"))?,
            path.to_owned(),
        ),
        None => {
            let path = workflow.spec.input.as_deref().ok_or_else(|| {
                anyhow!("no --input given and the workflow names no `input` file")
            })?;
            (
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the workflow's input {path}"))?,
                path.to_owned(),
            )
        }
    };
    serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "the input {name} is not valid JSON: {}",
            crate::errors::json_error(&e)
        )
    })
}

async fn execute(command: RunCommand, data: &Path, out: &mut String) -> anyhow::Result<u8> {
    match command {
        RunCommand::Diff { run_a, run_b, json } => {
            let rt = open_read_for(data, &run_a).await?;
            crate::diff::diff(&rt, &run_a, &run_b, json, out).await
        }
        RunCommand::Fork {
            run,
            from,
            policies,
            override_output,
            run_id,
        } => {
            let rt = open(data).await?;
            let policies = policies
                .map(|path| crate::replay::NewPolicies::load(&path))
                .transpose()?;
            let args = crate::fork::ForkArgs {
                run: &run,
                from: &from,
                policies: policies.as_ref(),
                override_output: override_output.as_deref(),
                run_id,
            };
            crate::fork::fork(&crate::verify::app(&rt, data), args, out).await
        }
        RunCommand::Inspect { run, at, json } => {
            let rt = open_read_for(data, &run).await?;
            crate::replay::inspect(&rt, &run, &at, json, out).await
        }
        RunCommand::Replay {
            run,
            all,
            policies,
            json,
        } => {
            let rt = match &run {
                Some(run) => open_read_for(data, run).await?,
                None => open_read(data).await?,
            };
            let what_if = policies
                .map(|path| crate::replay::NewPolicies::load(&path))
                .transpose()?;
            crate::replay::execute(&rt, run.as_ref(), all, what_if.as_ref(), json, out).await
        }
        RunCommand::Run {
            workflow,
            input,
            run_id,
        } => {
            let wf = Workflow::load(&workflow)?;
            let input = read_input(input.as_deref(), &wf)?;
            let rt = open(data).await?;
            // The docket command registers no in-process code: such sections cannot run.
            let problems = rt.unregistered(&wf.spec);
            if !problems.is_empty() {
                return Err(WorkflowLoadError::Refused {
                    path: workflow,
                    problems,
                }
                .into());
            }
            // New runs use the latest registered version of the bundle (`Runtime::start`):
            // said, with whether the workflow's own file is that version.
            let latest = rt.with_latest_bundle(&wf).await?;
            if let Some(latest) = &latest {
                let v = &latest.version;
                let file = if latest.file_hash == v.hash {
                    "the same as the workflow's bundle file"
                } else {
                    "not the workflow's bundle file, which differs (`docket policy register` it to run it)"
                };
                say!(
                    "bundle {} version {} ({}), the latest registered in {}: {file}",
                    v.bundle,
                    v.version,
                    v.hash,
                    data.display()
                );
            }
            // Content off the interaction matrix that the bundle would empty: said before
            // the run starts, not refused (docs/governance.md#content-that-is-not-a-handoff).
            let chosen = latest.as_ref().map_or(&wf, |l| &l.workflow);
            for w in chosen.emptied_content() {
                say!("warning: {w}");
            }
            // The run id is said as soon as the run is recorded, before its agents run:
            // another terminal can follow it (`docket status`) while this one drives.
            let run_id = run_id.unwrap_or_else(|| rt.new_run_id());
            let announce = announce_when_recorded(&rt, &run_id);
            let started = rt.start(&wf, input, Some(run_id)).await;
            announce.abort();
            let outcome = match started {
                Ok(outcome) => outcome,
                // The workflow does not fit its bundle or this machine: named by the file.
                Err(RuntimeError::WorkflowRefused { problems, .. }) => {
                    return Err(WorkflowLoadError::Refused {
                        path: workflow,
                        problems,
                    }
                    .into());
                }
                Err(other) => return Err(other.into()),
            };
            crate::verify::app(&rt, data).seal().await;
            let history = history_of(&rt, &outcome.run_id).await?;
            Ok(summary(out, &outcome, history.handoffs()))
        }
        RunCommand::Resume { run } => {
            let rt = open(data).await?;
            let outcome = crate::verify::app(&rt, data).resume(&run).await?;
            let history = history_of(&rt, &outcome.run_id).await?;
            Ok(summary(out, &outcome, history.handoffs()))
        }
        RunCommand::Approve {
            run,
            ticket,
            choose,
            by,
            reason,
        } => {
            let rt = open(data).await?;
            let decision = HumanDecision::approve(&by, &reason).choosing(choose);
            let outcome = crate::verify::app(&rt, data)
                .decide_ticket(&run, &ticket, decision)
                .await?;
            let history = history_of(&rt, &outcome.run_id).await?;
            Ok(summary(out, &outcome, history.handoffs()))
        }
        RunCommand::Answer {
            run,
            ticket,
            by,
            choice,
            text,
            reason,
        } => {
            let rt = open(data).await?;
            let choice = match choice {
                Some(c) => Some(option_number(&rt.state(&run).await?, &ticket, &c)?),
                None => None,
            };
            let decision = HumanDecision::approve(&by, &reason)
                .choosing(choice)
                .answering(text);
            let outcome = crate::verify::app(&rt, data)
                .decide_ticket(&run, &ticket, decision)
                .await?;
            let history = history_of(&rt, &outcome.run_id).await?;
            Ok(summary(out, &outcome, history.handoffs()))
        }
        RunCommand::Deny {
            run,
            ticket,
            by,
            reason,
        } => {
            let rt = open(data).await?;
            let outcome = crate::verify::app(&rt, data)
                .decide_ticket(&run, &ticket, HumanDecision::deny(&by, &reason))
                .await?;
            let history = history_of(&rt, &outcome.run_id).await?;
            Ok(summary(out, &outcome, history.handoffs()))
        }
        RunCommand::Cancel { run, by, reason } => {
            let rt = open(data).await?;
            let outcome = crate::verify::app(&rt, data)
                .cancel(&run, &by, &reason)
                .await?;
            let history = history_of(&rt, &outcome.run_id).await?;
            summary(out, &outcome, history.handoffs());
            Ok(EXIT_COMPLETED)
        }
        RunCommand::Override {
            run,
            by,
            role,
            reason,
            rule,
        } => {
            let rt = open(data).await?;
            let o = HumanOverride {
                by,
                role,
                reason,
                rule_id: rule,
            };
            let outcome = crate::verify::app(&rt, data)
                .override_block(&run, o)
                .await?;
            let history = history_of(&rt, &outcome.run_id).await?;
            Ok(summary(out, &outcome, history.handoffs()))
        }
        RunCommand::Runs { waiting } => {
            let rt = open_read(data).await?;
            // The run list the server answers `GET /api/runs` from (the runtime's
            // `run_list.rs`); a read-only view reads it from the log (store/FORMAT.md §10).
            // A run that says it is running, with no live process driving it, was
            // interrupted: its driver died (or was stopped) before it finished.
            let holder = LockHolder::of(data);
            let query = docket_runtime::RunQuery {
                waiting,
                ..docket_runtime::RunQuery::default()
            };
            let page = rt
                .list_runs(&query, |run| {
                    docket_store::StreamId::new(run.as_str())
                        .is_ok_and(|s| holder.as_ref().is_some_and(|h| h.drives(&s)))
                })
                .await?;
            let mut runs = page.runs;
            runs.sort_by(|a, b| a.summary.run_id.cmp(&b.summary.run_id));
            for listed in runs {
                let run = listed.summary;
                let status = if listed.interrupted {
                    format!("interrupted (resume with: docket resume {})", run.run_id)
                } else {
                    run.status.as_str().to_owned()
                };
                let tickets = if run.open_tickets.is_empty() {
                    String::new()
                } else {
                    format!("\t{}", run.open_tickets.join(" "))
                };
                let overridable = if run.overridable {
                    " (overridable: docket status shows who may)"
                } else {
                    ""
                };
                outln!(
                    out,
                    "{}\t{}\t{status}{overridable}\t{} events{tickets}",
                    run.run_id,
                    run.workflow,
                    run.events
                );
            }
            if !waiting {
                for (run, why) in &page.unreadable {
                    outln!(out, "{run}\t?\tunreadable: {why}");
                }
            }
            // Runs whose events fail their checks: listed with what and where, the
            // others are read as usual.
            let report = rt.store().view_report().unwrap_or_default();
            for d in report
                .damaged_streams
                .iter()
                .filter(|d| docket_evidence::is_run_stream(d.stream.as_str()))
            {
                if waiting {
                    continue;
                }
                outln!(
                    out,
                    "{}\t?\tdamaged: event {} fails its checks in {} at byte offset {} ({}); `docket verify` checks the directory\t{} sound events",
                    d.stream,
                    d.seq,
                    d.segment.display(),
                    d.offset,
                    d.damage,
                    d.seq - 1
                );
            }
            Ok(EXIT_COMPLETED)
        }
        RunCommand::Status { run, json } => {
            let rt = open_read_for(data, &run).await?;
            let state = rt.state(&run).await?;
            let circuits = run_circuits(&rt, &state).await?;
            let interrupted = state.status() == RunStatus::Running && !driven(data, &run);
            let history = history_of(&rt, &run).await?;
            let outcome = RunOutcome { run_id: run, state };
            if json {
                let mut status = status_json(&outcome, history.handoffs());
                status["circuits"] = circuits.iter().map(crate::circuits::breaker_json).collect();
                status["interrupted"] = Value::Bool(interrupted);
                outln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&status).unwrap_or_default()
                );
                Ok(EXIT_COMPLETED)
            } else {
                summary(out, &outcome, history.handoffs());
                if interrupted {
                    outln!(
                        out,
                        "interrupted: no process drives it (its driver stopped before it finished); resume with: docket resume {}",
                        outcome.run_id
                    );
                }
                for b in &circuits {
                    outln!(out, "circuit {}", crate::circuits::breaker_line(b));
                }
                crate::episodes::tree_text(out, outcome.state.episodes());
                crate::effects::list_text(out, &outcome.state);
                Ok(EXIT_COMPLETED)
            }
        }
        RunCommand::Events { run, json } => {
            let rt = open_read_for(data, &run).await?;
            for e in rt.events(&run).await? {
                if json {
                    let mut line = json!({
                        "seq": e.seq,
                        "kind": e.event.kind(),
                        "recorded_at_ns": e.recorded_at_ns,
                        "policy": e.policy,
                        "hash": e.hash,
                        "payload": e.event.to_value(),
                    });
                    if !e.content.is_empty() {
                        line["content"] = crate::replay::content_refs_json(&e.content);
                    }
                    if !e.shredded.is_empty() {
                        line["shredded"] = json!(e.shredded);
                    }
                    outln!(out, "{line}");
                } else {
                    let erased = if e.shredded.is_empty() {
                        String::new()
                    } else {
                        format!(" [_shredded: {}]", e.shredded.join(", "))
                    };
                    outln!(
                        out,
                        "{:>4} {} {:<22} {}{erased}",
                        e.seq,
                        date_ns(e.recorded_at_ns),
                        e.event.kind(),
                        describe(&e.event)
                    );
                }
            }
            Ok(EXIT_COMPLETED)
        }
    }
}

/// The breakers of the run's agents that are not closed, judged by the run's recorded
/// bundle.
async fn run_circuits(
    rt: &Runtime<EmbeddedStore>,
    state: &RunState,
) -> anyhow::Result<Vec<docket_runtime::BreakerStatus>> {
    let Some(run) = state.request() else {
        return Ok(Vec::new());
    };
    let settings = docket_decider::recorded_bundle(run)
        .map(|b| b.spec().defaults.circuit_breaker.clone())
        .unwrap_or_default();
    Ok(rt
        .circuit_breakers(&settings)
        .await?
        .into_iter()
        .filter(|b| {
            run.workflow.agents.contains_key(b.agent.as_str()) && crate::circuits::not_closed(b)
        })
        .collect())
}

/// The exit code for a run's status.
fn exit_code(status: RunStatus) -> u8 {
    match status {
        RunStatus::Completed => EXIT_COMPLETED,
        RunStatus::WaitingForHuman => EXIT_WAITING,
        RunStatus::Blocked => EXIT_BLOCKED,
        RunStatus::Failed | RunStatus::Cancelled | RunStatus::NotStarted | RunStatus::Running => {
            EXIT_FAILED
        }
    }
}

/// Every call and handoff decision of a run, folded from its log: the run's state keeps
/// only what later decisions read (docs/replay.md#long-runs).
pub(crate) async fn history_of(
    rt: &Runtime<EmbeddedStore>,
    run: &RunId,
) -> anyhow::Result<RunHistory> {
    let events = rt.events(run).await?;
    Ok(RunHistory::fold(events.iter().map(|e| &e.event)))
}

fn status_json(outcome: &RunOutcome, handoffs: &[HandoffRecord]) -> Value {
    let s = &outcome.state;
    json!({
        "run_id": outcome.run_id,
        "status": s.status(),
        "forked_from": s.request().and_then(|r| r.forked_from.as_deref()),
        "events": s.version(),
        "handoffs": handoffs,
        "open_tickets": s.open_tickets().map(|(id, t)| json!({"ticket": id, "reason": t.reason})).collect::<Vec<_>>(),
        "pending_calls": s.pending_call_ids(),
        "output": s.output(),
        "stop_reason": s.stop_reason(),
        "blocked_by": s.blocked_by(),
        "overridable": s.overridable(),
        "episodes": crate::episodes::tree_json(s.episodes()),
        "effects": crate::effects::list_json(s),
    })
}

/// One line about an event, for `docket events`.
pub(crate) fn describe(event: &RunEvent) -> String {
    if let Some(line) = crate::episodes::describe(event) {
        return line;
    }
    match event {
        RunEvent::RunRequested(r) => format!(
            "workflow {} entry {} bundle {}{}",
            r.workflow.name,
            r.workflow.entry,
            &r.bundle_hash[..12.min(r.bundle_hash.len())],
            r.forked_from
                .as_ref()
                .map(|f| format!("; {}", forked_from(f)))
                .unwrap_or_default()
        ),
        RunEvent::AgentCallScheduled {
            request, again_of, ..
        } => format!(
            "{} → {} {} attempt {} in {}{}",
            request.request_id,
            request.target_agent,
            request.capability_code,
            request.attempt,
            request.episode_id,
            again_of
                .as_ref()
                .map(|asked| format!(" (again of {asked})"))
                .unwrap_or_default()
        ),
        RunEvent::AgentResponded {
            request_id,
            response,
            ..
        } => format!(
            "{request_id} {} ({} action(s))",
            response.status,
            response.actions.len()
        ),
        RunEvent::AgentCallFailed {
            request_id,
            code,
            message,
            ..
        } => {
            format!("{request_id} {code}: {message}")
        }
        RunEvent::HandoffAllowed {
            from,
            to,
            output_type,
            input,
            decision,
            ..
        } => format!(
            "{from} → {to} {output_type}{} by {}",
            if *input == InputKind::Context {
                " (read-only context)"
            } else {
                ""
            },
            decision.rule_id
        ),
        RunEvent::HandoffDenied {
            from, to, decision, ..
        } => {
            format!("{from} → {to}: {} [{}]", decision.reason, decision.rule_id)
        }
        RunEvent::PolicyDecided { subject, decision } => format!(
            "{subject}: {} {} by {}: {}",
            word(&decision.kind),
            word(&decision.verdict),
            decision.rule_id,
            decision.reason
        ),
        RunEvent::RiskClassified {
            request_id,
            classifier,
            verdict,
            reason,
        } => {
            format!("{request_id} {} by {classifier}: {reason}", word(verdict))
        }
        RunEvent::Escalated { ticket, reason, .. } => format!("{ticket}: {reason}"),
        RunEvent::OutputHeld { group, delivery } => format!(
            "{} → {} {} held for fan-out {group}",
            delivery.from, delivery.to, delivery.output_type
        ),
        RunEvent::ConflictDetected {
            candidates,
            resolution,
            winner,
            ..
        } => format!(
            "{} conflicting outputs for {}, {resolution}: {}",
            candidates.len(),
            candidates.first().map_or("?", |d| d.to.as_str()),
            winner.map_or_else(
                || "a human decides".to_owned(),
                |w| format!("output {} wins", w + 1)
            )
        ),
        RunEvent::OutputArchived {
            delivery, reason, ..
        } => {
            format!(
                "{}'s {} archived: {reason}",
                delivery.from, delivery.output_type
            )
        }
        RunEvent::FanoutBranchFailed { group, gap } => format!(
            "fan-out {group}: {}'s branch failed ({}: {}), the others go on",
            gap.agent, gap.error_code, gap.error_message
        ),
        RunEvent::FanoutJoined { group, deliveries } => {
            format!(
                "fan-out {group} joined, {} output(s) go on",
                deliveries.len()
            )
        }
        RunEvent::HumanDecided {
            ticket,
            approved,
            by,
            reason,
            ..
        } => format!(
            "{ticket} {} by {by}: {reason}",
            if *approved { "approved" } else { "denied" }
        ),
        RunEvent::HumanOverrode {
            by,
            role,
            rule_id,
            reason,
            ..
        } => format!("{by} ({role}) overrode {rule_id}: {reason}"),
        RunEvent::CircuitChecked {
            request_id,
            agent,
            consecutive_failures,
            ..
        } => format!(
            "{request_id} {agent}'s circuit read: {consecutive_failures} failure(s) in a row across runs"
        ),
        RunEvent::CallDegraded {
            request_id, agent, ..
        } => format!("{request_id} not sent: {agent}'s circuit is open"),
        RunEvent::RunCompleted { .. } => "output recorded".to_owned(),
        RunEvent::RunBlocked {
            rule_id, reason, ..
        } => format!("{reason} [{rule_id}]"),
        RunEvent::RunFailed { reason } => reason.clone(),
        RunEvent::RunCancelled { by, reason, .. } => format!("by {by}: {reason}"),
        other => crate::effects::describe(other).unwrap_or_default(),
    }
}

/// The summary a person reads after `run`, `resume`, `approve`, `deny` and `status`;
/// returns the exit code for the run's status.
pub(crate) fn summary(out: &mut String, outcome: &RunOutcome, handoffs: &[HandoffRecord]) -> u8 {
    let s: &RunState = &outcome.state;
    let name = s.request().map_or("?", |r| r.workflow.name.as_str());
    outln!(
        out,
        "run {} ({name}): {}",
        outcome.run_id,
        s.status().as_str()
    );
    if let Some(f) = s.request().and_then(|r| r.forked_from.as_deref()) {
        outln!(out, "{}", forked_from(f));
    }
    if !handoffs.is_empty() {
        outln!(out, "handoffs:");
        for h in handoffs {
            let what = if h.input == InputKind::Context {
                format!("{} (read-only context)", h.output_type)
            } else {
                h.output_type.clone()
            };
            if h.allowed {
                outln!(
                    out,
                    "  allowed  {} → {}  {}  [{}]{}",
                    h.from,
                    h.to,
                    what,
                    h.rule_id,
                    if h.every_field_removed {
                        "  (every field removed: the receiver got none of the payload)"
                    } else {
                        ""
                    }
                );
            } else {
                outln!(
                    out,
                    "  DENIED   {} → {}  {}  [{}]: {}",
                    h.from,
                    h.to,
                    what,
                    h.rule_id,
                    h.reason
                );
            }
        }
    }
    for (id, t) in s.open_tickets() {
        print_ticket(out, &outcome.run_id, id.as_str(), t);
    }
    if let Some(reason) = s.stop_reason() {
        outln!(out, "stopped: {reason}");
    }
    print_overridable(out, &outcome.run_id, s);
    if let Some(output) = s.output() {
        print_output(out, output);
    }
    exit_code(s.status())
}

/// What a fork was forked from, in one line.
fn forked_from(f: &docket_decider::ForkedFrom) -> String {
    let overrides: Vec<String> = f
        .overrides
        .iter()
        .map(|o| format!("{} answered from {}", o.call, o.file))
        .collect();
    format!(
        "forked from {} at event {} (its chain hash there {}){}",
        f.run_id,
        f.seq,
        f.hash.get(..16).unwrap_or(&f.hash),
        if overrides.is_empty() {
            String::new()
        } else {
            format!("; {}", overrides.join("; "))
        }
    )
}

/// An open ticket: what is asked, what there is to choose from, and the command that
/// decides it.
fn print_ticket(out: &mut String, run: &RunId, id: &str, t: &docket_decider::Ticket) {
    outln!(out, "waiting for a human on {id}: {}", t.reason);
    match &t.subject {
        TicketSubject::Question { choices, .. } => {
            for (i, c) in choices.iter().enumerate() {
                outln!(out, "  {}. {c}", i + 1);
            }
            let what = if choices.is_empty() {
                "--text TEXT"
            } else {
                "--choice N|--text TEXT"
            };
            outln!(
                out,
                "  answer with: docket answer {run} {id} --by NAME {what}  (or docket approve / deny ...)"
            );
            return;
        }
        TicketSubject::Conflict { conflicts, .. } => {
            for (i, d) in conflicts.first().into_iter().flatten().enumerate() {
                let confidence = d.confidence.map_or_else(String::new, |c| {
                    format!(", confidence {}", format!("{c:?}").to_uppercase())
                });
                outln!(
                    out,
                    "  {}. from {} ({}{confidence}): {}",
                    i + 1,
                    d.from,
                    d.output_type,
                    serde_json::to_string(&*d.payload).unwrap_or_default()
                );
            }
            outln!(
                out,
                "  decide with: docket approve {run} {id} --choose N --by NAME --reason TEXT  (or docket deny ...)"
            );
            return;
        }
        TicketSubject::Tool {
            name,
            invocation,
            rule_id,
            pattern,
            ..
        } => {
            let argument = invocation
                .strip_prefix(name.as_str())
                .and_then(|r| r.strip_prefix('('))
                .and_then(|r| r.strip_suffix(')'))
                .unwrap_or("");
            outln!(out, "  tool: {name}");
            outln!(out, "  argument: {argument}");
            outln!(out, "  review pattern: {rule_id} (`{pattern}`)");
        }
        _ => {}
    }
    outln!(
        out,
        "  decide with: docket approve {run} {id} --by NAME --reason TEXT  (or docket deny ...)"
    );
}

/// A block a person may override: what an override continues, the level the rule sits
/// at, the roles that outrank it and the command (docs/governance.md#human-override).
fn print_overridable(out: &mut String, run: &RunId, s: &RunState) {
    let (Some(held), Some(rule)) = (s.overridable(), s.blocked_by()) else {
        return;
    };
    let level = held.level;
    let roles = s
        .request()
        .and_then(|r| docket_decider::recorded_bundle(r).ok())
        .map(|b| {
            b.roles_outranking(level)
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    outln!(
        out,
        "overridable: `{rule}` sits at authority level {} ({}); an override means {}",
        level.level(),
        level.as_str(),
        held.step.describe()
    );
    if let Some(pattern) = &held.deny_pattern {
        outln!(
            out,
            "  but the deny pattern `{pattern}` is behind it: absolute unless the bundle sets [overrides] deny_patterns_overridable"
        );
    }
    let who = if roles.is_empty() {
        "no role of the bundle's registry outranks it".to_owned()
    } else {
        format!("roles that may: {}", roles.join(", "))
    };
    outln!(
        out,
        "  override with: docket override {run} --by NAME --role ROLE --reason TEXT  ({who})"
    );
}

fn print_output(out: &mut String, output: &Value) {
    let Some(recs) = output.get("recommendations").and_then(Value::as_array) else {
        outln!(out, "output:");
        outln!(
            out,
            "{}",
            serde_json::to_string_pretty(output).unwrap_or_default()
        );
        return;
    };
    let status = output.get("status").and_then(Value::as_str).unwrap_or("?");
    outln!(out, "recommendations ({status}):");
    let field = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    for r in recs {
        outln!(
            out,
            "  {} [{}] {}: {}",
            field(r, "id"),
            field(r, "priority"),
            field(r, "topic"),
            field(r, "action")
        );
        let why = field(r, "rationale");
        if !why.is_empty() {
            outln!(out, "      why: {why} (cites {})", field(r, "gap_id"));
        }
        let impact = field(r, "expected_impact");
        if !impact.is_empty() {
            outln!(out, "      expected impact: {impact}");
        }
    }
    if let Some(warnings) = output.get("warnings").and_then(Value::as_array) {
        for w in warnings {
            outln!(out, "  warning: {}", w.as_str().unwrap_or_default());
        }
    }
}
