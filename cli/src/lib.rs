//! `docket`: the command line. Runs (`run`, `resume`, `runs`, `status`, `events`,
//! `approve`, `deny`, `answer`, `override`, `cancel`), schedules (`schedule`), forensics (`replay`, `inspect`, `diff`,
//! `fork`), kill switches (`kill-switch`), circuit breakers (`circuits`), evidence
//! (`keys`, `verify`, `prove`, `export`, `verify-export`), policy bundles (`policy
//! check | explain | diff | schema`), bundle versions and handoff rules (`policy versions |
//! register | rules | set-rules`), the examples' tour (`demo`) and the HTTP API (`serve`,
//! `token`).
//! This is the one crate that prints and chooses exit codes.
//!
//! It writes diagnostics through `say!` and a command's output on stdout in one write
//! whose failure on a closed pipe is quiet, never through `println!` or `eprintln!`,
//! which panic when the reader has gone (`docket status RUN 2>&1 | head -1`); clippy
//! holds the crate to that.
#![deny(clippy::print_stdout, clippy::print_stderr)]

/// Writes a line on stderr. What cannot be written (stderr closed, a pipe whose reader
/// has gone) is dropped: a diagnostic is not worth a panic, and the exit code still says
/// how the command ended.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use docket_policies::{BundleError, FlowStep, InputKind, PolicyBundle, Verdict, load_file};
use serde_json::{Value, json};

use crate::words::{input_kind, word};

mod checkpoint;
mod circuits;
// What every command shares: exit codes, the data directory, the store opened.
mod command;
mod demo;
mod diff;
mod disclose;
mod effects;
mod episodes;
mod errors;
mod export;
mod fork;
mod keys;
mod kill_switch;
mod progress;
mod prove;
mod replay;
mod rules;
mod runs;
mod schedule;
mod serve;
// How a run is shown: its summary, its events in one line each.
mod show;
mod store;
mod telemetry;
mod verify;
mod words;
mod worker;

/// Exit code for an invalid bundle (or one that cannot be read).
const EXIT_INVALID: u8 = 1;
/// Exit code for bad command-line input (e.g. a payload that is not JSON), as clap uses.
const EXIT_USAGE: u8 = 2;

#[derive(Parser)]
#[command(
    name = "docket",
    version,
    about = "Durable, audited multi-agent workflows",
    after_help = "Exit codes: 0 completed or success, 1 failed or could not be carried out, \
                  2 bad command-line usage, 3 waiting for a human, 4 blocked by policy.\n\
                  RUST_LOG filters the trace written on stderr (e.g. RUST_LOG=docket_runtime=info); \
                  NO_COLOR turns its colours off."
)]
struct Cli {
    /// Data directory holding the event log (default: $DOCKET_DATA, else ./.docket).
    #[arg(long, global = true, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Where runs are recorded: a postgres:// URL, or a data directory (default:
    /// $DOCKET_STORE, else the data directory).
    ///
    /// A postgres:// (or postgresql://) URL records in that PostgreSQL database, which
    /// many docket processes share (create or upgrade its schema with `docket store
    /// migrate`); `docket serve`'s tokens, browser sessions and request log, the kill
    /// switches and the public halves of signing keys are kept there too, while the
    /// private signing key stays in the data directory (--data) or where
    /// DOCKET_SIGNING_KEY says. Anything else names the
    /// data directory, as --data does. The password
    /// in a URL is never printed (docs/postgres.md).
    #[arg(long, global = true, value_name = "URL|DIR")]
    store: Option<String>,
    /// Seconds a command that records waits for another process recording here.
    ///
    /// Commands that record (run, resume, approve, answer, deny, override, fork, ...) wait
    /// up to this many seconds while another process records in the data directory, then
    /// say which process it is. Commands that only read never wait.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 10.0, value_parser = seconds)]
    lock_wait: f64,
    /// Export spans over OTLP/HTTP to this collector.
    ///
    /// The runtime's spans (runs, agent calls, handoffs, tool calls, effects), to a
    /// collector such as http://127.0.0.1:4318 (default:
    /// $OTEL_EXPORTER_OTLP_ENDPOINT; off when neither is set). docs/observability.md.
    #[arg(long, global = true, value_name = "ENDPOINT")]
    otlp: Option<String>,
    /// Worker threads that drive runs.
    ///
    /// Default: $DOCKET_THREADS, else the machine's available parallelism. `docket
    /// serve` answers the API on threads of its own.
    #[arg(long, global = true, value_name = "N", value_parser = threads)]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Policy bundles: the rules every handoff, spawn and side effect is decided by.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    #[command(flatten)]
    Run(runs::RunCommand),
    /// Engage, release and show kill switches for side effects.
    ///
    /// Engaged, no effect of the lane (or none at all) executes, in any run, from its
    /// next effect on.
    #[command(name = "kill-switch")]
    KillSwitch {
        #[command(subcommand)]
        command: kill_switch::KillSwitchCommand,
    },
    /// Start runs of a workflow on a cron expression or an interval.
    ///
    /// `docket serve` fires the schedules of a data directory, the workers those of a
    /// PostgreSQL store (docs/schedules.md).
    Schedule {
        #[command(subcommand)]
        command: schedule::ScheduleCommand,
    },
    /// Show agents' circuit breakers, or reset one.
    ///
    /// Every agent's circuit breaker across runs (state, failures, last failure, last
    /// probe); `docket circuits reset AGENT --by NAME --reason TEXT` closes one.
    Circuits(circuits::CircuitsArgs),
    /// Make or show the signing key finished runs are sealed with.
    ///
    /// A new store gets one; `docket keys generate` makes one for a store without (or
    /// replaces it), `docket keys show` prints its public key (docs/checkpoints.md).
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// Keep the heads log's signed checkpoint where the log's writer cannot rewrite it.
    ///
    /// `docket checkpoint publish --to DIR` copies the latest one into DIR;
    /// `docket verify --against DIR` checks that the log still extends every checkpoint
    /// kept there (docs/checkpoints.md#publishing-checkpoints).
    Checkpoint {
        #[command(subcommand)]
        command: checkpoint::CheckpointCommand,
    },
    /// Check the data directory's chains, hashes, trees and signed seals.
    ///
    /// Reads only, without trusting docket: every chain link,
    /// hash and blob, each run's Merkle tree against its signed seal, the log of run heads
    /// against its signed checkpoint, and with --checkpoint that the log extends one you
    /// kept. One line per run; exit 1 on any failure (docs/checkpoints.md#verify).
    Verify(verify::VerifyArgs),
    /// Export a run for auditors (JSON lines, or an HTML report).
    ///
    /// `--format html`: its report, one self-contained page.
    /// The page has no script and loads nothing from the network; it shows the run's
    /// header, the verification of its log, every denial, the episode tree, handoffs,
    /// decisions, effects, human decisions and budgets over time (docs/report.md).
    Export(export::ExportArgs),
    /// Check an exported run offline.
    ///
    /// Reads nothing but the file: every line against the
    /// bytes its hashes cover, every link, the tree head and the signed checkpoint; names
    /// the first bad line and why (exit 1). See docs/export-format.md.
    #[command(name = "verify-export")]
    VerifyExport(export::VerifyExportArgs),
    /// Print the disclosures behind a committed value, for an auditor.
    ///
    /// The disclosures of the values event N of a run commits to at a JSON pointer
    /// (payload encoding 3): salt, name and value, and the base64url disclosure whose
    /// SHA-256 is the digest in the event, so that an auditor holding a redacted export
    /// checks the value against it (docs/export-format.md#checking-a-disclosure). Reads
    /// only.
    Disclose(disclose::DiscloseArgs),
    /// Erase a run's values for an erasure request; the log keeps verifying.
    ///
    /// Values committed apart (payload encoding 3): their
    /// disclosures are removed from the data directory, a tombstone naming who, when and
    /// why in their place; the log is untouched and keeps verifying (`docket verify`
    /// counts them as shredded). A writer: it waits for the writer lock.
    Shred(disclose::ShredArgs),
    /// Print an RFC 9162 Merkle proof over a run's events.
    ///
    /// Checked first: that event N is
    /// in the run's tree (--seq N), or that an earlier tree is a prefix of a later one
    /// (--from-size M). docs/proofs.md says how to check one with any RFC 9162 library.
    Prove(prove::ProveArgs),
    /// Serve the data directory over HTTP: the API, live events and the web UI.
    ///
    /// A JSON API for runs, tickets, kill switches,
    /// policy bundles, replay and exports, with server-sent events of each run's log
    /// (docs/api.md). Every route needs a bearer token (`docket token create`). The server
    /// holds the directory's writer lock while it runs: commands that record are refused
    /// meanwhile (use the API); commands that read work as usual. Loopback only unless
    /// --allow-remote.
    Serve(serve::ServeArgs),
    /// Create or upgrade a PostgreSQL store's schema.
    ///
    /// `docket store init --store URL` creates docket's tables in a database,
    /// `docket store migrate --store URL` brings an older schema to this docket's version;
    /// both say the version found and the versions applied (docs/postgres.md).
    Store {
        #[command(subcommand)]
        command: store::StoreCommand,
    },
    /// Drive a PostgreSQL store's runs with other workers.
    ///
    /// Claims runnable runs, resumes each from its log, renews the claims and gives them
    /// back when stopped. Runs queued with `docket run --queue`, runs whose ticket was decided and runs a
    /// dead worker left are claimed; a claim lasts `--lease` seconds unless renewed, and
    /// an append under a claim another worker took since is refused (docs/postgres.md).
    Worker(worker::WorkerArgs),
    /// Create, list and revoke the bearer tokens of `docket serve`.
    ///
    /// A token is printed once and stored hashed (docs/api.md#tokens-and-roles): in
    /// DATA/api/tokens.json, or in the database with --store postgres://.
    Token {
        #[command(subcommand)]
        command: serve::TokenCommand,
    },
    /// Run every example's scenarios and summarise them.
    ///
    /// On a fresh data directory (default ./docket-demo; a
    /// previous demo's is replaced, any other non-empty one refused): human steps are
    /// answered by `demo-reviewer`, each run is summarised (what was allowed and denied
    /// and why, failed calls, human steps, effects, result), then every run is replayed,
    /// the directory verified and every run exported, JSON lines and HTML, into
    /// DIR/reports. Exit 1 if a run does not end as its example says (docs/demo.md).
    Demo(demo::DemoArgs),
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Validate a bundle and print its hash.
    Check {
        /// The policy bundle (a .toml or .json file).
        #[arg(value_name = "BUNDLE")]
        file: PathBuf,
        /// Print JSON (with every diagnostic, located, when the bundle is invalid).
        #[arg(long)]
        json: bool,
    },
    /// Explain the decision for a handoff, and what context would cross it.
    Explain {
        /// The policy bundle (a .toml or .json file).
        #[arg(value_name = "BUNDLE")]
        file: PathBuf,
        /// The sending agent (an agent the bundle declares).
        #[arg(long, value_name = "AGENT")]
        from: String,
        /// The receiving agent (an agent the bundle declares).
        #[arg(long, value_name = "AGENT")]
        to: String,
        /// Decide a read-only context handoff instead of a decision handoff.
        #[arg(long)]
        context: bool,
        /// In a sequential flow: the agents the run went through before FROM, from
        /// `external` on (comma-separated), to decide the handoff at that position.
        #[arg(long, value_name = "AGENTS", value_delimiter = ',')]
        after: Option<Vec<String>>,
        /// A JSON payload to scope for this handoff: prints what the receiver would get.
        #[arg(long, value_name = "JSON")]
        payload: Option<String>,
        /// Print JSON (the decision with its rule chain, and the scoping audit).
        #[arg(long)]
        json: bool,
    },
    /// Print the JSON Schema of the bundle format (for editors).
    Schema,
    /// What changed between two bundles, per agent pair and per rule.
    Diff {
        /// The bundle before the change.
        #[arg(value_name = "OLD")]
        old: PathBuf,
        /// The bundle after the change.
        #[arg(value_name = "NEW")]
        new: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Registry(rules::RegistryCommand),
}

/// A failure with the exit code it maps to.
struct Failure {
    code: u8,
    error: anyhow::Error,
}

/// Runs `docket` with the process arguments.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = command::LOCK_WAIT.set(std::time::Duration::from_secs_f64(cli.lock_wait));
    let _ = telemetry::OTLP_FLAG.set(cli.otlp.clone());
    let threads = match cli
        .threads
        .map_or_else(command::threads_from_env, |n| Ok(Some(n)))
    {
        Ok(threads) => threads,
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let _ = command::THREADS.set(threads);
    match command::key_place_from_env() {
        Ok(place) => {
            let _ = command::KEY_PLACE.set(place);
        }
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    let data = match command::resolve_store(cli.store, cli.data) {
        Ok((data, url)) => {
            let _ = command::STORE_URL.set(url);
            data
        }
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let command = match cli.command {
        Command::Policy {
            command: PolicyCommand::Registry(command),
        } => {
            return command::run_async(data, |data, out| {
                Box::pin(async move { rules::execute(command, &data, out).await })
            });
        }
        Command::Policy { command } => command,
        Command::Run(command) => return runs::main(command, data),
        Command::KillSwitch { command } => {
            return kill_switch::main(command, &command::data_dir(data));
        }
        Command::Schedule { command } => {
            return schedule::main(command, &command::data_dir(data));
        }
        Command::Circuits(args) => return runs::circuits_main(args, data),
        Command::Keys { command } => {
            return command::run_async(data, |data, out| {
                Box::pin(async move { keys::execute(command, &data, out).await })
            });
        }
        Command::Checkpoint { command } => {
            return command::run_async(data, |data, out| {
                Box::pin(async move { checkpoint::execute(command, &data, out).await })
            });
        }
        Command::Verify(args) if command::postgres_url().is_some() => {
            return command::run_async(data, |_, out| {
                Box::pin(async move { verify::execute_store(args, out).await })
            });
        }
        Command::Verify(args) => {
            let data = command::data_dir(data);
            return plain(|out| verify::execute(args, &data, out));
        }
        Command::Store { command } => return store::main(command, data),
        Command::Worker(args) => return worker::main(args, data),
        Command::Export(args) => return export::main(args, data),
        Command::VerifyExport(args) => return plain(|out| export::verify_export(&args, out)),
        Command::Disclose(args) => return disclose::main(args, data),
        Command::Shred(args) => return disclose::shred_main(args, data),
        Command::Prove(args) => return prove::main(args, data),
        Command::Demo(args) => return demo::main(args, data),
        Command::Serve(args) => return serve::main(args, data),
        Command::Token { command } if command::postgres_url().is_some() => {
            return command::run_async(data, |_, out| {
                Box::pin(async move { serve::token_in_database(command, out).await })
            });
        }
        Command::Token { command } => {
            let data = command::data_dir(data);
            return plain(|out| serve::token(command, &data, out));
        }
    };
    let mut out = String::new();
    let result = run(command, &mut out);
    // A closed pipe (`docket ... | head`) is not an error worth a message.
    if let Err(e) = std::io::stdout().lock().write_all(out.as_bytes())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        say!("error: cannot write output: {e}");
        return ExitCode::from(1);
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            say!("error: {}", errors::error_text(&f.error));
            ExitCode::from(f.code)
        }
    }
}

/// Runs a command that needs no async runtime, prints its output and maps an error to
/// exit code 1.
fn plain(command: impl FnOnce(&mut String) -> anyhow::Result<u8>) -> ExitCode {
    let mut out = String::new();
    let result = command(&mut out);
    if let Err(e) = std::io::stdout().lock().write_all(out.as_bytes())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        say!("error: cannot write output: {e}");
        return ExitCode::from(1);
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            say!("error: {}", errors::error_text(&e));
            ExitCode::from(1)
        }
    }
}

/// `--lock-wait`: a number of seconds, not negative.
fn threads(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=command::MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{text}` is not a number of threads from 1 to {}",
            command::MAX_THREADS
        )),
    }
}

fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.0..=86_400.0 * 365.0).contains(&s) => Ok(s),
        _ => Err(format!("`{text}` is not a number of seconds (0 or more)")),
    }
}

fn load_bundle(path: &Path) -> Result<PolicyBundle, Failure> {
    load_file(path).map_err(|e: BundleError| Failure {
        code: EXIT_INVALID,
        error: anyhow::Error::new(e),
    })
}

/// Appends a line to the command's output (writing to a `String` cannot fail).
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

fn print_json(out: &mut String, v: &Value) {
    outln!(
        out,
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_default()
    );
}

fn run(command: PolicyCommand, out: &mut String) -> Result<u8, Failure> {
    match command {
        PolicyCommand::Check { file, json } => {
            let b = match load_file(&file) {
                Ok(b) => b,
                Err(e) if json => {
                    print_json(
                        out,
                        &json!({ "valid": false, "file": file.display().to_string(), "error": e.to_string(), "diagnostics": e.diagnostics() }),
                    );
                    return Ok(EXIT_INVALID);
                }
                Err(e) => {
                    return Err(Failure {
                        code: EXIT_INVALID,
                        error: anyhow::Error::new(e),
                    });
                }
            };
            // Valid, but refused for new runs (a handoff whose payload would arrive empty,
            // audit switched off).
            let refused = b.admission_problems();
            if !refused.is_empty() {
                let problems: Vec<String> = refused
                    .iter()
                    .map(|e| format!("{}: {e}", file.display()))
                    .collect();
                if json {
                    print_json(
                        out,
                        &json!({ "valid": false, "file": file.display().to_string(), "error": problems.join("\n"), "problems": problems }),
                    );
                    return Ok(EXIT_INVALID);
                }
                return Err(Failure {
                    code: EXIT_INVALID,
                    error: anyhow::anyhow!(problems.join("\n")),
                });
            }
            // Valid and admitted, but content off the interaction matrix would arrive
            // empty (a capability's answer, a person's, a tool's result): said, not refused.
            let warnings: Vec<String> = b
                .emptied_content()
                .iter()
                .map(|e| format!("{}: {e}", file.display()))
                .collect();
            if json {
                print_json(
                    out,
                    &json!({ "valid": true, "file": file.display().to_string(), "bundle": b.spec().bundle.id, "hash": b.hash(), "warnings": warnings }),
                );
            } else {
                for w in &warnings {
                    say!("warning: {w}");
                }
                outln!(
                    out,
                    "ok {} ({} agents)",
                    file.display(),
                    b.agent_ids().count()
                );
                outln!(
                    out,
                    "bundle {} version {}",
                    b.spec().bundle.id,
                    b.spec().bundle.version
                );
                outln!(out, "hash {}", b.hash());
            }
            Ok(0)
        }
        PolicyCommand::Explain {
            file,
            from,
            to,
            context,
            after,
            payload,
            json,
        } => {
            let b = load_bundle(&file)?;
            let input = if context {
                InputKind::Context
            } else {
                InputKind::Decision
            };
            for (flag, agent) in [("--from", &from), ("--to", &to)] {
                if !b.agent_ids().any(|a| a == agent) {
                    return Err(Failure {
                        code: EXIT_USAGE,
                        error: anyhow::anyhow!(
                            "{flag} {agent}: the bundle {} declares no agent `{agent}` (its agents: {})",
                            file.display(),
                            b.agent_ids().collect::<Vec<_>>().join(", ")
                        ),
                    });
                }
            }
            let payload: Option<Value> = payload
                .map(|p| {
                    serde_json::from_str(&p).map_err(|e| {
                        anyhow::anyhow!("--payload is not valid JSON: {}", errors::json_error(&e))
                    })
                })
                .transpose()
                .map_err(|error| Failure {
                    code: EXIT_USAGE,
                    error,
                })?;
            let decision = b.decide_handoff(&from, &to, input);
            // Where the run is, in a sequential flow: from `--after`.
            let flow = match &after {
                Some(path) => {
                    let path: Vec<&str> = path.iter().map(String::as_str).collect();
                    let position = b.flow_position_after(&path).map_err(|why| Failure {
                        code: EXIT_USAGE,
                        error: anyhow::anyhow!("--after {}: {why}", path.join(",")),
                    })?;
                    Some((position, b.decide_flow_step(&from, &to, position)))
                }
                None => None,
            };
            let scoped = payload
                .as_ref()
                .map(|p| b.scope_context(&from, &to, input, p));
            let flow_denial = match &flow {
                Some((_, FlowStep::Denied(d))) if input == InputKind::Decision => Some(d),
                _ => None,
            };
            if json {
                let flow_json = flow.as_ref().map(|(position, step)| match step {
                    FlowStep::Free => json!({ "position": position, "step": "free" }),
                    FlowStep::Next(next) => {
                        json!({ "position": position, "step": "next", "moves_to": next })
                    }
                    FlowStep::Denied(d) => {
                        json!({ "position": position, "step": "denied", "decision": d })
                    }
                });
                print_json(
                    out,
                    &json!({ "handoff": decision, "flow": flow_json, "scoped": scoped }),
                );
            } else {
                let d = flow_denial.unwrap_or(&decision.decision);
                outln!(
                    out,
                    "{} → {} ({}): {}",
                    from,
                    to,
                    input_kind(input),
                    verdict(d.verdict)
                );
                outln!(out, "rule   {}", d.rule_id);
                outln!(out, "reason {}", d.reason);
                if flow_denial.is_some() {
                    outln!(
                        out,
                        "matrix {} by {}, but not from this position of the flow",
                        verdict(decision.decision.verdict),
                        decision.decision.rule_id
                    );
                }
                match &flow {
                    Some((position, FlowStep::Next(next))) => outln!(
                        out,
                        "flow   the next step from position {} (moves to position {})",
                        position + 1,
                        next + 1
                    ),
                    None if b.spec().interactions.sequential_flow => outln!(
                        out,
                        "flow   sequential: pass --after to decide at a position of the flow"
                    ),
                    _ => {}
                }
                outln!(out, "chain:");
                for s in &d.chain {
                    outln!(out, "  - {} [{}] {}", s.rule_id, word(&s.outcome), s.note);
                }
                if let Some(s) = scoped {
                    let a = &s.audit;
                    outln!(
                        out,
                        "scoping: {} mode by {}",
                        word(&a.handoff_mode),
                        a.governance_rule_id
                    );
                    for step in s.decision.chain.iter().skip(d.chain.len()) {
                        outln!(
                            out,
                            "  - {} [{}] {}",
                            step.rule_id,
                            word(&step.outcome),
                            step.note
                        );
                    }
                    outln!(
                        out,
                        "included: {}",
                        a.context_after_scoping.fields_included.join(", ")
                    );
                    outln!(
                        out,
                        "excluded: {}",
                        a.context_after_scoping.fields_excluded.join(", ")
                    );
                    outln!(
                        out,
                        "tokens: {} → {}",
                        a.context_before_scoping.total_tokens,
                        a.context_after_scoping.total_tokens
                    );
                    outln!(
                        out,
                        "context: {}",
                        serde_json::to_string_pretty(&s.context).unwrap_or_default()
                    );
                }
                outln!(out, "bundle {}", d.bundle_hash);
            }
            Ok(0)
        }
        PolicyCommand::Schema => {
            out.push_str(&docket_policies::bundle_json_schema());
            Ok(0)
        }
        // Run on the async runtime by `main`.
        PolicyCommand::Registry(_) => Ok(EXIT_USAGE),
        PolicyCommand::Diff { old, new, json } => {
            let (a, b) = (load_bundle(&old)?, load_bundle(&new)?);
            let d = docket_policies::diff(&a, &b);
            if json {
                print_json(out, &serde_json::to_value(&d).unwrap_or(Value::Null));
            } else if d.is_empty() {
                outln!(out, "no changes ({} → {})", d.old_hash, d.new_hash);
            } else {
                outln!(out, "{} → {}", d.old_hash, d.new_hash);
                for p in &d.pairs {
                    outln!(
                        out,
                        "pair {} → {} ({}): {} by {} → {} by {}",
                        p.from,
                        p.to,
                        input_kind(p.input),
                        verdict(p.old.verdict),
                        p.old.rule_id,
                        verdict(p.new.verdict),
                        p.new.rule_id
                    );
                }
                for r in &d.rules {
                    outln!(out, "rule {} {} {}", word(&r.change), r.section, r.id);
                }
            }
            Ok(0)
        }
    }
}

fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Allow => "ALLOW",
        Verdict::Deny => "DENY",
        Verdict::NeedsApproval => "NEEDS APPROVAL",
    }
}
