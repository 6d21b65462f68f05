//! The run commands' dispatcher: start, resume and inspect runs, and decide human
//! tickets. What other commands share with them is in `command.rs` (exit codes, the data
//! directory, opening the store) and `show.rs` (how a run is printed); no command file
//! imports this one.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use clap::Subcommand;
use docket_app::ChoiceError;
use docket_app::Store;
use docket_decider::{HandoffRecord, RunId, RunState, RunStatus};
use docket_runtime::{
    HumanDecision, HumanOverride, RunOutcome, Runtime, RuntimeError, Workflow, WorkflowLoadError,
};
use docket_store::{EmbeddedStore, EventStore as _, LockHolder};
use serde_json::{Value, json};

use crate::command::{EXIT_COMPLETED, driven, open, open_read, open_read_for, run_async};
use crate::show::{describe, history_of, summary};
use crate::words::date_ns;

#[derive(Subcommand)]
pub(crate) enum RunCommand {
    /// Start a run of a workflow and drive it.
    ///
    /// Drives it until it completes, is blocked, fails or waits for a human. Says `run ID recorded` on stderr as soon as the run is in the
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
        /// Record the run and leave it for a worker (`docket worker`) instead of driving
        /// it here; exits once it is recorded and queued. Needs a PostgreSQL store.
        #[arg(long)]
        queue: bool,
    },
    /// Send the user's next message to a finished run: it starts the session's next turn.
    ///
    /// A new run (id `SESSION.N`, turn N of the session the run belongs to) of the same workflow, its input the previous turn's with
    /// `message` set to TEXT, whose agents are told what the earlier turns' user said, what they were answered and what people decided
    /// (`context.handoff.session`), so they do not ask again. The run must be the session's latest turn and completed, failed or
    /// cancelled. Driven like `docket run` (over PostgreSQL, queued for the workers). See docs/agent-protocol.md#sessions.
    Send {
        /// The run (the session's latest turn).
        run: RunId,
        /// The user's message.
        #[arg(long, value_name = "TEXT")]
        message: String,
        /// Who sends it (recorded in the new run's log).
        #[arg(long, value_name = "NAME", value_parser = someone, default_value = "user")]
        by: String,
    },
    /// Continue a run from its log: calls without a recorded answer are made again.
    Resume {
        /// The run id.
        run: RunId,
    },
    /// List the runs in the data directory.
    ///
    /// Id, workflow, status, events, open tickets. A run whose driving process died shows as `interrupted` with the `docket resume`
    /// that continues it; a run whose events fail their checks as `damaged`, with where.
    Runs {
        /// Only the runs waiting for a human, with their open tickets.
        #[arg(long)]
        waiting: bool,
    },
    /// Show where a run stands.
    ///
    /// `interrupted` when no process drives a running run.
    Status {
        /// The run id.
        run: RunId,
        /// Print JSON (status, handoffs, open tickets, episodes, effects, output).
        #[arg(long)]
        json: bool,
    },
    /// Print a run's events, one per line.
    ///
    /// Sequence, recorded time (UTC), kind, summary.
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
    /// Answer an agent's question; the agent is called again with the answer.
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
    /// Cancel a run that is not finished.
    ///
    /// `run.cancelled` is recorded with who and why and the run ends `cancelled`; nothing more happens in it (a run recorded by a decider
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
    /// Pause a run that is not finished: nothing new starts until `docket unpause`.
    ///
    /// `run.paused` is recorded with who and why. Calls already made are recorded as they answer, and timers fire and are recorded,
    /// but no agent is called, no effect or tool call starts. See docs/events.md#runpaused.
    Pause {
        /// The run id.
        run: RunId,
        /// Who pauses (recorded in the run's log).
        #[arg(long, value_name = "NAME", value_parser = someone)]
        by: String,
        /// Why (recorded in the run's log).
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
    /// Send an outside event to a run: an agent waiting for it receives it.
    ///
    /// `signal.received` is recorded with its payload and sender, then decided by the bundle's `[[signals]]` (who may send it, to which
    /// agents, how large): kept for the run until an agent waits for it, or refused. The run is then driven on (over PostgreSQL,
    /// queued for the workers). Sent again with the same --key, it is recorded once. See docs/events.md#outside-events.
    Signal {
        /// The run id.
        run: RunId,
        /// The event's name, as the bundle's [[signals]] declares it.
        name: String,
        /// Who sends it (checked against the signal's senders, recorded in the run's log).
        #[arg(long, value_name = "NAME", value_parser = someone)]
        by: String,
        /// The event's content as JSON: a file, or `-` for stdin (default: null).
        #[arg(long, value_name = "FILE")]
        payload: Option<String>,
        /// Your key for this event: sent again with the same key, it is recorded once.
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
    },
    /// Write a domain of a run as a person: its next version, recorded as your act.
    ///
    /// `human.wrote_domain` is recorded with who, the role and why, then the domain's new version (`domain.written`), kept as the
    /// domain's rules say (content type, required references and size checked; raw pointers redacted). The role must be a person's
    /// entry of the bundle's registry (authority = "human") whose write_scopes hold the domain; a write the bundle refuses records
    /// nothing. Agents that read the domain get the new version on their next call. See docs/governance.md#a-person-writes-a-domain.
    Write {
        /// The run id.
        run: RunId,
        /// The domain, as the bundle's [[domains]] declares it.
        domain: String,
        /// Who writes (recorded in the run's log).
        #[arg(long, value_name = "NAME", value_parser = someone)]
        by: String,
        /// The role you write in: a person's entry of the bundle's registry.
        #[arg(long, value_name = "ROLE")]
        role: String,
        /// Why (recorded in the run's log).
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// The new version's content as JSON: a file, or `-` for stdin.
        #[arg(long, value_name = "FILE|-")]
        content: String,
    },
    /// Let a paused run go on.
    ///
    /// `run.unpaused` is recorded with who and why, and the run is driven on from where it stood (over PostgreSQL, queued for the
    /// workers). See docs/events.md#runpaused.
    Unpause {
        /// The run id.
        run: RunId,
        /// Who lets it go on (recorded in the run's log).
        #[arg(long, value_name = "NAME", value_parser = someone)]
        by: String,
        /// Why (recorded in the run's log).
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
    /// Override the rule that blocked a run, in a role that outranks it.
    ///
    /// In a role of the bundle's registry that outranks the rule: what the block stopped goes on (docs/governance.md#human-override).
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
    /// Re-derive a run's decisions from its log, or what-if under another bundle.
    ///
    /// Every decision the run recorded, with its recorded bundle and decider version,
    /// calling no agent: prints the counts and the run's result, or the first
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
    /// Compare two runs step by step.
    ///
    /// Calls, handoffs, policy decisions, effects (by
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
    /// Start a new run from a recorded one, reusing its answers up to a point.
    ///
    /// The recorded answers, receipts and decisions
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
    /// Show a run as it stood at any event, and what that event carried.
    ///
    /// Status, flow position, pending
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
    docket_app::option_number(state, ticket, choice).map_err(|e| match e {
        ChoiceError::NotAnOption {
            ticket,
            choice,
            choices,
        } => anyhow!(
            "ticket {ticket} offers {}; `{choice}` is not one of them",
            choices
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{} `{c}`", i + 1))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => anyhow!(other),
    })
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

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Prints `run RUN recorded` on stderr once the run's first event is in the log; aborted
/// when the run ends before (or was never recorded).
fn announce_when_recorded(rt: &Runtime<Store>, run: &RunId) -> tokio::task::JoinHandle<()> {
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

/// An outside event's payload: JSON from a file or stdin (`-`), read up to the largest a
/// bundle may accept and one byte more, so a larger one is refused by its size; null
/// when none is given.
/// JSON from a file or stdin (`-`), named `what` in errors; `None` is null. At most the
/// largest event a bundle accepts.
fn read_payload(arg: Option<&str>, what: &str) -> anyhow::Result<Value> {
    let Some(arg) = arg else {
        return Ok(Value::Null);
    };
    let limit = docket_policies::MAX_SIGNAL_BYTES;
    let mut text = String::new();
    let (read, name) = if arg == "-" {
        (
            std::io::stdin().take(limit + 1).read_to_string(&mut text),
            "stdin",
        )
    } else {
        let file =
            std::fs::File::open(arg).with_context(|| format!("cannot read the {what} {arg}"))?;
        (file.take(limit + 1).read_to_string(&mut text), arg)
    };
    read.with_context(|| format!("cannot read the {what} {name} (it must be UTF-8 JSON)"))?;
    if text.len() as u64 > limit {
        return Err(anyhow!(
            "the {what} {name} is over {limit} bytes, the most docket accepts from a person"
        ));
    }
    serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "the {what} {name} is not valid JSON: {}",
            crate::errors::json_error(&e)
        )
    })
}

pub(crate) fn read_input(arg: Option<&str>, workflow: &Workflow) -> anyhow::Result<Value> {
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
            queue,
        } => {
            if queue && crate::command::postgres_url().is_none() {
                return Err(anyhow!(
                    "--queue leaves the run for a worker, and workers share runs through a PostgreSQL store: give one with --store postgres://USER@HOST[:PORT]/DATABASE (or DOCKET_STORE)"
                ));
            }
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
                    crate::command::place(rt.store(), data)
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
            if queue {
                let app = crate::verify::app(&rt, data);
                return crate::worker::queue(&app, &wf, input, run_id, &workflow, out).await;
            }
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
        RunCommand::Send { run, message, by } => {
            let rt = open(data).await?;
            let recorded = rt.record_turn(&run, &message, &by).await?;
            let turn = recorded.state().run_id().cloned().unwrap_or_default();
            if let Some(session) = recorded.state().session() {
                say!(
                    "run {turn} recorded: turn {} of session {}; follow it with: docket status {turn}",
                    session.turn,
                    session.id
                );
            }
            handed_on(out, &rt, data, &turn, recorded).await
        }
        RunCommand::Resume { run } => {
            let rt = open(data).await?;
            let app = crate::verify::app(&rt, data);
            if app.shared() {
                // Workers drive the runs of a shared store; one may hold this run now.
                let state = rt.state(&run).await?;
                if state.status() != RunStatus::Running
                    && state.status() != RunStatus::WaitingForHuman
                {
                    // Finished: nothing for a worker to do.
                    let _ = writeln!(out, "run {run}: {}", state.status().as_str());
                    return Ok(crate::show::exit_code(state.status()));
                }
                app.queue(&run).await?;
                return Ok(queued(out, &run, &state));
            }
            let outcome = app.resume(&run).await?;
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
            let recorded = rt.record_decision(&run, &ticket, decision).await?;
            handed_on(out, &rt, data, &run, recorded).await
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
            let recorded = rt.record_decision(&run, &ticket, decision).await?;
            handed_on(out, &rt, data, &run, recorded).await
        }
        RunCommand::Deny {
            run,
            ticket,
            by,
            reason,
        } => {
            let rt = open(data).await?;
            let recorded = rt
                .record_decision(&run, &ticket, HumanDecision::deny(&by, &reason))
                .await?;
            handed_on(out, &rt, data, &run, recorded).await
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
        RunCommand::Pause { run, by, reason } => {
            let rt = open(data).await?;
            let recorded = rt.record_pause(&run, &by, &reason, true).await?;
            outln!(
                out,
                "run {run}: {}, paused by {by} ({reason}); nothing new starts until: docket unpause {run} --by NAME --reason TEXT",
                recorded.state().status().as_str()
            );
            Ok(EXIT_COMPLETED)
        }
        RunCommand::Signal {
            run,
            name,
            by,
            payload,
            key,
        } => {
            let payload = read_payload(payload.as_deref(), "payload")?;
            let rt = open(data).await?;
            let signal = docket_decider::SignalReceived {
                name,
                payload,
                by,
                idempotency_key: key,
                at_ms: 0,
            };
            let recorded = match rt.record_signal(&run, signal).await {
                Ok(recorded) => recorded,
                Err(docket_runtime::RuntimeError::Rejected {
                    rejection: docket_decider::Rejection::SignalRecorded { signal_id },
                    ..
                }) => {
                    outln!(
                        out,
                        "run {run}: this event was already recorded, as {signal_id}; nothing more is recorded"
                    );
                    return Ok(EXIT_COMPLETED);
                }
                Err(e) => return Err(e.into()),
            };
            outln!(out, "{}", crate::show::signal_line(recorded.state()));
            handed_on(out, &rt, data, &run, recorded).await
        }
        RunCommand::Write {
            run,
            domain,
            by,
            role,
            reason,
            content,
        } => {
            let content = read_payload(Some(&content), "content")?;
            let rt = open(data).await?;
            let write = docket_decider::HumanWroteDomain {
                by: by.clone(),
                role: role.clone(),
                domain: domain.clone(),
                content,
                reason,
                at_ms: 0,
            };
            let recorded = rt.record_domain_write(&run, write).await?;
            let version = recorded
                .state()
                .episodes()
                .domains
                .get(&domain)
                .and_then(|v| v.last())
                .map_or(0, |v| v.version);
            outln!(
                out,
                "run {run}: domain {domain} version {version} written by {by} as {role}"
            );
            Ok(EXIT_COMPLETED)
        }
        RunCommand::Unpause { run, by, reason } => {
            let rt = open(data).await?;
            let recorded = rt.record_pause(&run, &by, &reason, false).await?;
            handed_on(out, &rt, data, &run, recorded).await
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
            let recorded = rt.record_override(&run, o).await?;
            handed_on(out, &rt, data, &run, recorded).await
        }
        RunCommand::Runs { waiting } => {
            let rt = open_read(data).await?;
            // The run list the server answers `GET /api/runs` from (the runtime's
            // `run_list.rs`); a read-only view reads it from the log (store/FORMAT.md §10).
            // A run that says it is running, with no live process driving it, was
            // interrupted: its driver died (or was stopped) before it finished.
            // A PostgreSQL store has no writer lock to tell by: its running runs are not
            // called interrupted.
            let postgres = rt.store().postgres().is_some();
            let holder = LockHolder::of(data).filter(|_| !postgres);
            let query = docket_runtime::RunQuery {
                waiting,
                ..docket_runtime::RunQuery::default()
            };
            let page = rt
                .list_runs(&query, |run| {
                    postgres
                        || docket_store::StreamId::new(run.as_str())
                            .is_ok_and(|s| holder.as_ref().is_some_and(|h| h.drives(&s)))
                })
                .await?;
            let mut runs = page.runs;
            runs.sort_by(|a, b| a.summary.run_id.cmp(&b.summary.run_id));
            for listed in runs {
                let run = listed.summary;
                let status = if listed.interrupted {
                    format!("interrupted (resume with: docket resume {})", run.run_id)
                } else if run.paused && !run.status.is_final() {
                    format!("paused, {}", run.status.as_str())
                } else if let Some(waits) = waits(&run) {
                    format!("{}, {waits}", run.status.as_str())
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
                let workflow = match &run.session {
                    Some(s) => format!("{} (session {}, turn {})", run.workflow, s.id, s.turn),
                    None => run.workflow.clone(),
                };
                outln!(
                    out,
                    "{}\t{workflow}\t{status}{overridable}\t{} events{tickets}",
                    run.run_id,
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
            let report = rt
                .store()
                .embedded()
                .and_then(EmbeddedStore::view_report)
                .unwrap_or_default();
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
            // A run waiting for an outside event needs no process until it comes.
            let interrupted = state.status() == RunStatus::Running
                && !state.awaits_signal()
                && !driven(data, &run);
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
    rt: &Runtime<Store>,
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

fn status_json(outcome: &RunOutcome, handoffs: &[HandoffRecord]) -> Value {
    let s = &outcome.state;
    json!({
        "run_id": outcome.run_id,
        "status": s.status(),
        "forked_from": s.request().and_then(|r| r.forked_from.as_deref()),
        "scheduled": s.request().and_then(|r| r.scheduled.as_deref()),
        "session": s.session().map(|x| json!({
            "id": x.id, "turn": x.turn, "previous_run": x.previous_run, "by": x.by,
        })),
        "events": s.version(),
        "handoffs": handoffs,
        "open_tickets": s.open_tickets().map(|(id, t)| json!({"ticket": id, "reason": t.reason})).collect::<Vec<_>>(),
        "pending_calls": s.pending_call_ids(),
        "timers": s.timers().values().map(|t| json!({
            "timer_id": t.set.timer_id,
            "agent": t.set.agent,
            "due_at_ms": t.set.due_at_ms,
            "reason": t.set.reason,
            "fired_at_ms": t.fired_at_ms,
        })).collect::<Vec<_>>(),
        "output": s.output(),
        "stop_reason": s.stop_reason(),
        "blocked_by": s.blocked_by(),
        "overridable": s.overridable(),
        "episodes": crate::episodes::tree_json(s.episodes()),
        "effects": crate::effects::list_json(s),
    })
}

/// After a person's input was recorded: the run driven on here and summarised, or, where
/// workers share the runs, queued for them and said so.
async fn handed_on(
    out: &mut String,
    rt: &Runtime<Store>,
    data: &Path,
    run: &RunId,
    recorded: docket_runtime::Recorded<Store>,
) -> anyhow::Result<u8> {
    match crate::verify::app(rt, data).hand_on(recorded).await? {
        docket_app::HandedOn::Driven(outcome) => {
            let history = history_of(rt, &outcome.run_id).await?;
            Ok(summary(out, &outcome, history.handoffs()))
        }
        docket_app::HandedOn::Queued(state) => Ok(queued(out, run, &state)),
        docket_app::HandedOn::Settled(state) => {
            let _ = writeln!(out, "run {run}: {}", state.status().as_str());
            Ok(crate::show::exit_code(state.status()))
        }
    }
}

/// Says that `run` was queued for workers, where it stands, and how to follow it. The
/// input is recorded and the run queued: exit 0, whatever the run's status.
fn queued(out: &mut String, run: &RunId, state: &RunState) -> u8 {
    let _ = writeln!(
        out,
        "run {run}: {}; queued for workers, follow it with: docket status {run}",
        state.status().as_str()
    );
    EXIT_COMPLETED
}

/// What a listed run waits for besides people, as `docket runs` says it: each outside event
/// its agents wait for (with its timeout), then each other timer, by when it is due.
fn waits(run: &docket_runtime::RunSummary) -> Option<String> {
    let due = |timer: &str| {
        run.timers
            .iter()
            .find(|t| t.timer_id == timer)
            .map(|t| docket_evidence::date_ms(t.due_at_ms))
    };
    let mut said: Vec<String> = run
        .awaited_events
        .iter()
        .map(|a| match a.timeout.as_deref().and_then(due) {
            Some(until) => format!("waits for event {:?} until {until}", a.name),
            None => format!("waits for event {:?}", a.name),
        })
        .collect();
    said.extend(
        run.timers
            .iter()
            .filter(|t| {
                !run.awaited_events
                    .iter()
                    .any(|a| a.timeout.as_deref() == Some(t.timer_id.as_str()))
            })
            .map(|t| format!("waits until {}", docket_evidence::date_ms(t.due_at_ms))),
    );
    (!said.is_empty()).then(|| said.join("; "))
}
