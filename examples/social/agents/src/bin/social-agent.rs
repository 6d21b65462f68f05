//! One of the social example's agents, named by its first argument (`orchestrator`,
//! `planner`, `creator`, `publisher`, `engagement`, `verifier`), speaking the agent
//! protocol on stdin/stdout (docs/agent-protocol.md).
#![allow(clippy::print_stderr)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let role = std::env::args().nth(1).unwrap_or_default();
    let Some(agent) = docket_example_social::agent(&role) else {
        eprintln!(
            "social-agent: unknown role {role:?}; one of: {}",
            docket_example_social::AGENTS.join(", ")
        );
        return ExitCode::from(2);
    };
    match docket_example_kit::run(agent) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("social-agent {role}: {err}");
            ExitCode::FAILURE
        }
    }
}
