//! A scripted agent for the episode tests: one binary plays every agent of a workflow.
//!
//! `EPISODE_SCRIPT` (set in the workflow's `env`) names a JSON file mapping a key to a
//! list of steps. For each request the key is `{target_agent}/{episode_id}` if the script
//! has it, else `{target_agent}`; the step is picked by how many decision inputs the
//! request carries (1 → the first step, 2 → the second...; past the end, the last), so
//! a parent agent moves on each time a child's result (or a refusal) comes back, and a
//! restarted process answers exactly as before. A step is the response without its
//! `request_id`: `{"actions": [...], "usage": {...}}`; `status` defaults to SUCCESS and
//! `confidence_level` to HIGH.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::process::ExitCode;

use docket_decider::AgentRequest;
use serde_json::{Value, json};

fn main() -> ExitCode {
    let Some(path) = std::env::var_os("EPISODE_SCRIPT") else {
        eprintln!("episode-agent: EPISODE_SCRIPT is not set");
        return ExitCode::from(2);
    };
    let script: Value = match std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(err) => {
            eprintln!("episode-agent: cannot read the script {path:?}: {err}");
            return ExitCode::from(2);
        }
    };
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else {
            return ExitCode::from(4);
        };
        let request: AgentRequest = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(err) => {
                eprintln!("episode-agent: bad request: {err}");
                return ExitCode::from(5);
            }
        };
        let keyed = format!("{}/{}", request.target_agent, request.episode_id);
        let Some(steps) = script
            .get(&keyed)
            .or_else(|| script.get(request.target_agent.as_str()))
            .and_then(Value::as_array)
        else {
            eprintln!("episode-agent: the script has no steps for {keyed}");
            return ExitCode::from(6);
        };
        let index = request.decision_inputs.len().saturating_sub(1);
        let Some(step) = steps.get(index).or_else(|| steps.last()) else {
            eprintln!("episode-agent: the script's steps for {keyed} are empty");
            return ExitCode::from(6);
        };
        let mut response = step.clone();
        let Some(fields) = response.as_object_mut() else {
            eprintln!("episode-agent: a step for {keyed} is not an object");
            return ExitCode::from(6);
        };
        fields.insert("request_id".into(), json!(request.request_id));
        fields.entry("status").or_insert_with(|| json!("SUCCESS"));
        fields
            .entry("confidence_level")
            .or_insert_with(|| json!("HIGH"));
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{response}");
        let _ = out.flush();
    }
    ExitCode::SUCCESS
}
