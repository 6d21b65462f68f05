//! The fuzzing harness's binary (README.md): runs each target's seeds and regression
//! inputs, then, with `DOCKET_FUZZ_SECONDS` set, generated cases for that many seconds
//! per target; prints what each target ran and found, and fails if anything failed.
//!
//! Environment: `DOCKET_FUZZ_SECONDS` (per target; default 0: seeds and regressions
//! only), `DOCKET_FUZZ_TARGETS` (comma-separated; default all), `DOCKET_FUZZ_SEED` (the
//! random seed; default one from the clock, printed), `DOCKET_FUZZ_OUT` (where
//! reproducers go; default the system's temporary directory), `DOCKET_FUZZ_REGRESSIONS` (the
//! directory of regression inputs, `<dir>/<target>/*`; default `fuzz/regressions`).

// The harness reports to the terminal, as a command does.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the harness prints its report"
)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use docket_fuzz::targets::{
    api::Api, bundles::Bundles, responses::Responses, segments::Segments, workflows::Workflows,
};
use docket_fuzz::{Report, Settings, Target, alloc, run};

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

/// No case may have more than this many bytes live at once (the process aborts): well
/// above any target's bound, well below the machine's memory.
const HARD_CAP: usize = 3 << 30;

/// A case running longer than this is a hang: the process aborts.
const CASE_LIMIT: Duration = Duration::from_secs(120);

const TARGETS: [&str; 5] = ["bundles", "workflows", "responses", "api", "segments"];

fn go<T: Target>(made: Result<T, docket_fuzz::SetupError>, settings: &Settings) -> Report {
    match made {
        Ok(mut target) => run(&mut target, settings),
        Err(e) => Report {
            failures: vec![format!("setting the target up failed: {e}")],
            ..Report::default()
        },
    }
}

fn main() -> ExitCode {
    // libtest's flags (`cargo test` passes some to every test binary) are ignored.
    let seconds: f64 = std::env::var("DOCKET_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0);
    let seed: u64 = std::env::var("DOCKET_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs())
        });
    let chosen: Vec<String> = std::env::var("DOCKET_FUZZ_TARGETS")
        .ok()
        .map(|s| {
            s.split(',')
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect()
        })
        .unwrap_or_else(|| TARGETS.iter().map(|t| (*t).to_owned()).collect());
    if let Some(unknown) = chosen.iter().find(|t| !TARGETS.contains(&t.as_str())) {
        eprintln!(
            "DOCKET_FUZZ_TARGETS: no target `{unknown}` (targets: {})",
            TARGETS.join(", ")
        );
        return ExitCode::from(2);
    }
    let out = std::env::var_os("DOCKET_FUZZ_OUT")
        .map_or_else(|| std::env::temp_dir().join("docket-fuzz"), PathBuf::from);
    let settings = Settings {
        seconds,
        seed,
        out,
        regressions: std::env::var_os("DOCKET_FUZZ_REGRESSIONS").map_or_else(
            || docket_fuzz::repository().join("fuzz/regressions"),
            PathBuf::from,
        ),
    };
    docket_fuzz::install(HARD_CAP, CASE_LIMIT);
    println!(
        "docket-fuzz: {} s per target, seed {seed} (DOCKET_FUZZ_SEED={seed} repeats it), targets {}",
        seconds,
        chosen.join(", ")
    );
    let mut failed = false;
    for name in &chosen {
        let report = match name.as_str() {
            "bundles" => go(Bundles::new(), &settings),
            "workflows" => go(Workflows::new(), &settings),
            "responses" => go(Responses::new(), &settings),
            "api" => go(Api::new(), &settings),
            _ => go(Segments::new(), &settings),
        };
        println!(
            "{:<10} {:>8} generated + {:>4} seeds and regressions, {:>8.1} CPU s, max {} bytes live for a {}-byte input, {} failures",
            name,
            report.generated,
            report.fixed,
            report.cpu_seconds,
            report.max_peak.0,
            report.max_peak.1,
            report.failures.len()
        );
        for n in &report.notes {
            println!("  {name}: {n}");
        }
        for f in &report.failures {
            println!("  FAILED {name}: {f}");
            failed = true;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
