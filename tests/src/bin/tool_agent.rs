//! An agent that asks docket to run one tool, then finishes with what came back.
//!
//! `tool-agent --tool NAME --arguments JSON`: a request without a `tool_result` decision
//! input is answered with `{"type": "call_tool", "name": NAME, "arguments": JSON}`; a
//! request with one is answered with a `finish` whose output is that `tool_result`
//! payload, so a test sees exactly what reached the agent.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::process::ExitCode;

use docket_decider::AgentRequest;
use serde_json::{Value, json};

fn main() -> ExitCode {
    let mut tool = String::new();
    let mut arguments = Value::Null;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--tool", Some(v)) => tool = v,
            ("--arguments", Some(v)) => match serde_json::from_str(&v) {
                Ok(v) => arguments = v,
                Err(err) => {
                    eprintln!("tool-agent: --arguments is not JSON: {err}");
                    return ExitCode::from(2);
                }
            },
            _ => {
                eprintln!("tool-agent: usage: tool-agent --tool NAME --arguments JSON");
                return ExitCode::from(2);
            }
        }
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else {
            return ExitCode::from(4);
        };
        let request: AgentRequest = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(err) => {
                eprintln!("tool-agent: bad request: {err}");
                return ExitCode::from(5);
            }
        };
        let result = request
            .decision_inputs
            .iter()
            .find(|i| i.output_type == "tool_result")
            .map(|i| i.payload.clone());
        let action = match result {
            Some(payload) => json!({"type": "finish", "output": payload}),
            None => json!({"type": "call_tool", "name": tool, "arguments": arguments}),
        };
        let response = json!({
            "request_id": request.request_id,
            "status": "SUCCESS",
            "confidence_level": "HIGH",
            "actions": [action],
        });
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{response}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::from(6);
        }
    }
    ExitCode::SUCCESS
}
