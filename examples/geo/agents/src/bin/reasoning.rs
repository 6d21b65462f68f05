//! The geo example's reasoning agent: one JSON request per line on stdin, one JSON response per
//! line on stdout (docs/agent-protocol.md); diagnostics on stderr.
#![allow(clippy::print_stderr)]

use std::process::ExitCode;

fn main() -> ExitCode {
    match docket_example_geo::serve(docket_example_geo::reasoning) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("reasoning: {err}");
            ExitCode::FAILURE
        }
    }
}
