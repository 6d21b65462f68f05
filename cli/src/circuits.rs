//! `docket circuits`: every agent's circuit breaker across the runs of a data directory
//! (the `_circuits` stream, docs/governance.md#circuit-breaker), and `docket circuits
//! reset`, a person closing one (recorded: who, why, when). Listing reads only: it creates
//! and changes nothing; a missing data directory is an error naming it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use docket_policies::{CircuitBreaker, load_file};
use docket_runtime::{BreakerState, BreakerStatus};
use serde_json::json;

use crate::words::date_ms;

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// `docket circuits [--json] [--policy BUNDLE] [reset ...]`.
#[derive(Args)]
pub(crate) struct CircuitsArgs {
    #[command(subcommand)]
    command: Option<CircuitsCommand>,
    /// Print JSON (one object per agent).
    #[arg(long)]
    json: bool,
    /// Judge open and half-open by this bundle's `defaults.circuit_breaker` (default:
    /// the built-in threshold of 5 failures and 60 s cool-down).
    #[arg(long, value_name = "BUNDLE")]
    policy: Option<PathBuf>,
}

#[derive(Subcommand)]
enum CircuitsCommand {
    /// Close an agent's breaker.
    ///
    /// Recorded in the `_circuits` stream with who and why; the next call of any run is
    /// made.
    Reset {
        /// The agent, as `docket circuits` lists it.
        agent: String,
        /// Who resets it.
        #[arg(long, value_name = "NAME")]
        by: String,
        /// Why.
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
}

/// Runs the command; the exit code.
pub(crate) async fn execute(
    args: CircuitsArgs,
    data: &Path,
    out: &mut String,
) -> anyhow::Result<u8> {
    match args.command {
        Some(CircuitsCommand::Reset { agent, by, reason }) => {
            if crate::command::postgres_url().is_none() && !data.is_dir() {
                anyhow::bail!(
                    "no circuit breaker is recorded for agent `{agent}`: the data directory {} does not exist",
                    data.display()
                );
            }
            let rt = crate::command::open(data).await?;
            rt.reset_circuit(&agent, &by, &reason).await?;
            outln!(out, "{agent}: circuit closed by {by} ({reason})");
            Ok(0)
        }
        None => {
            let settings = match &args.policy {
                Some(path) => load_file(path)
                    .with_context(|| format!("cannot use the bundle {}", path.display()))?
                    .spec()
                    .defaults
                    .circuit_breaker
                    .clone(),
                None => CircuitBreaker::default(),
            };
            // A data directory that does not exist is an error naming it, as for every
            // read: a typo in --data must not pass for "no breakers".
            let breakers = crate::command::open_read(data)
                .await?
                .circuit_breakers(&settings)
                .await?;
            if args.json {
                let list: Vec<_> = breakers.iter().map(breaker_json).collect();
                outln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&list).unwrap_or_default()
                );
                return Ok(0);
            }
            if breakers.is_empty() {
                outln!(out, "no circuit breaker recorded");
                return Ok(0);
            }
            for b in &breakers {
                outln!(out, "{}", breaker_line(b));
            }
            Ok(0)
        }
    }
}

/// One breaker for people: agent, state, its calls and failures in the window, last
/// failure, last probe, last reset.
pub(crate) fn breaker_line(b: &BreakerStatus) -> String {
    let mut line = format!(
        "{}\t{}\t{} of {} call(s) failed in the last {} s",
        b.agent,
        b.state.as_str(),
        b.window.failures,
        b.window.calls,
        b.window.window_ms / 1000
    );
    if let Some(ms) = b.last_failure_ms {
        let _ = write!(line, ", last failure {}", date_ms(ms));
    }
    if let Some(ms) = b.last_probe_ms {
        let _ = write!(line, ", last probe {}", date_ms(ms));
    }
    if let Some(r) = &b.last_reset {
        let _ = write!(
            line,
            ", reset by {} {} ({})",
            r.by,
            date_ms(r.at_ms),
            r.reason
        );
    }
    line
}

/// One breaker as JSON.
pub(crate) fn breaker_json(b: &BreakerStatus) -> serde_json::Value {
    json!({
        "agent": b.agent,
        "state": b.state.as_str(),
        "window_ms": b.window.window_ms,
        "calls_in_window": b.window.calls,
        "failures_in_window": b.window.failures,
        "consecutive_failures": b.consecutive_failures,
        "last_failure_ms": b.last_failure_ms,
        "last_probe_ms": b.last_probe_ms,
        "last_reset": b.last_reset,
    })
}

/// Whether a breaker is worth a line in `docket status`.
pub(crate) fn not_closed(b: &BreakerStatus) -> bool {
    b.state != BreakerState::Closed
}
