//! One of the claims example's agents, named by its first argument (`intake`, `coverage`,
//! `fraud`, `recommendation`, `privacy-desk`, `reviewer`): one JSON request per line on
//! stdin, one JSON response per line on stdout (docs/agent-protocol.md).
#![allow(clippy::print_stderr)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let role = std::env::args().nth(1).unwrap_or_default();
    let Some(agent) = docket_example_claims::agent(&role) else {
        eprintln!(
            "claims-agent: unknown agent {role:?}; one of: {}",
            docket_example_claims::AGENTS.join(", ")
        );
        return ExitCode::from(2);
    };
    match docket_example_kit::run(agent) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("claims-agent {role}: {err}");
            ExitCode::FAILURE
        }
    }
}
