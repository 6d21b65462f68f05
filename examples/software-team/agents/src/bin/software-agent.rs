//! One of the software-team example's programs, named by its first argument: an agent
//! (`orchestrator`, `database`, `backend`, `frontend`, `qa`, `docs`, `design-reviewer`,
//! `risk-classifier`) speaking the agent protocol, or `shell-tool`, the executor of the
//! `Bash` tool speaking the tool protocol (docs/agent-protocol.md).
#![allow(clippy::print_stderr)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let role = std::env::args().nth(1).unwrap_or_default();
    let served = if role == "shell-tool" {
        docket_example_software_team::serve_shell_tool()
    } else if let Some(agent) = docket_example_software_team::agent(&role) {
        docket_example_kit::run(agent).map_err(|e| e.to_string())
    } else {
        eprintln!(
            "software-agent: unknown role {role:?}; one of: shell-tool, {}",
            docket_example_software_team::AGENTS.join(", ")
        );
        return ExitCode::from(2);
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("software-agent {role}: {err}");
            ExitCode::FAILURE
        }
    }
}
