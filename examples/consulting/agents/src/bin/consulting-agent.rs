//! One of the consulting example's agents, named by its first argument (`orc`, `cst`,
//! `anl`, `aud`, `cha`, `doc`): one JSON request per line on stdin, one JSON response per
//! line on stdout (docs/agent-protocol.md).
#![allow(clippy::print_stderr)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let role = std::env::args().nth(1).unwrap_or_default();
    let Some(agent) = docket_example_consulting::agent(&role) else {
        eprintln!(
            "consulting-agent: unknown agent {role:?}; one of: {}",
            docket_example_consulting::AGENTS.join(", ")
        );
        return ExitCode::from(2);
    };
    match docket_example_kit::run(agent) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("consulting-agent {role}: {err}");
            ExitCode::FAILURE
        }
    }
}
