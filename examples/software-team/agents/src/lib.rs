//! The agents of docket's software-team example (seed 002: how agents, skills and rules
//! interact). Agents never talk to each other: the orchestrator creates a task per step
//! (a handoff carrying a `task`), each specialist reports back, a risk classifier reads
//! every output, and the bundle decides every tool call before it runs.
//!
//! The flow for a feature: database writes the migration, then backend and frontend work
//! in parallel (and disagree on the API's shape: a person decides), then qa tests, then
//! docs documents. Nothing here runs a real command: `shell-tool` answers with canned
//! output, so the example is the same on every machine.

use std::io::{BufRead, Write};

use docket_protocol::{
    Action, AgentRequest, AgentResponse, Confidence, TaskRestrictions, ToolCall,
};
use serde_json::{Value, json};

/// The agents, by the name the binary takes.
pub const AGENTS: [&str; 8] = [
    "orchestrator",
    "database",
    "backend",
    "frontend",
    "qa",
    "docs",
    "design-reviewer",
    "risk-classifier",
];

/// The agent function for a name of [`AGENTS`].
pub fn agent(name: &str) -> Option<fn(&AgentRequest) -> AgentResponse> {
    Some(match name {
        "orchestrator" => orchestrator,
        "database" => database,
        "backend" => backend,
        "frontend" => frontend,
        "qa" => qa,
        "docs" => docs,
        "design-reviewer" => design_reviewer,
        "risk-classifier" => risk_classifier,
        _ => return None,
    })
}

fn ok(request: &AgentRequest, actions: Vec<Action>) -> AgentResponse {
    AgentResponse::success(request.request_id.clone(), Confidence::High, actions)
}

fn input<'a>(request: &'a AgentRequest, output_type: &str) -> Option<&'a Value> {
    request
        .decision_inputs
        .iter()
        .find(|i| i.output_type == output_type)
        .map(|i| &*i.payload)
}

/// The answer of a specialist called without a task.
fn no_task(request: &AgentRequest) -> AgentResponse {
    AgentResponse::error(
        request.request_id.clone(),
        "INPUT_MISSING_TASK",
        "expected a task",
    )
}

fn tool_results(request: &AgentRequest) -> Vec<&Value> {
    request
        .decision_inputs
        .iter()
        .filter(|i| i.output_type == "tool_result")
        .map(|i| &*i.payload)
        .collect()
}

/// A task for `to`: the handoff carries the task's context in full (rule
/// `orchestrator-delegates-full`) and its restrictions (`task`).
fn task(to: &str, id: &str, title: &str, context: Value, denied_tools: &[&str]) -> Action {
    Action::Handoff {
        to: to.into(),
        output_type: "task".into(),
        payload: json!({ "task_id": id, "title": title, "context": context }),
        task: Some(TaskRestrictions {
            id: id.into(),
            denied_tools: denied_tools.iter().map(|p| (*p).to_owned()).collect(),
        }),
    }
}

/// A specialist's report to the orchestrator (only these fields cross: rule
/// `specialist-reports`).
fn report(output_type: &str, task_id: &Value, files: &[&str], summary: &str) -> Action {
    Action::Handoff {
        to: "orchestrator".into(),
        output_type: output_type.to_owned(),
        payload: json!({
            "task_id": task_id,
            "outcome": "completed",
            "files_changed": files,
            "summary": summary,
        }),
        task: None,
    }
}

/// The API contract the orchestrator put in its latest task (`context.api`), which it
/// gets back as the read-only context input `prior:task` (the bundle's
/// `requires_prior_outputs = ["orchestrator"]`).
fn chosen_api(request: &AgentRequest) -> Option<Value> {
    request
        .context_inputs
        .iter()
        .find(|i| i.output_type == "prior:task" && i.source_agent == "orchestrator")
        .map(|i| i.payload["context"]["api"].clone())
        .filter(|api| api["contract"].is_string())
}

/// The orchestrator's answer when its latest task (`task_id`) does not carry the API
/// contract.
fn missing_api(request: &AgentRequest, task_id: &str) -> AgentResponse {
    AgentResponse::error(
        request.request_id.clone(),
        "INPUT_MISSING_API_CONTRACT",
        format!(
            "the orchestrator expects its task {task_id} (context input prior:task) to carry the API contract at context.api.contract"
        ),
    )
}

/// The orchestrator: one task per step, validated reports in between.
pub fn orchestrator(request: &AgentRequest) -> AgentResponse {
    if let Some(docs) = input(request, "task_report").filter(|r| r["task_id"] == "T5") {
        let Some(api) = chosen_api(request) else {
            return missing_api(request, "T5");
        };
        return ok(
            request,
            vec![Action::Finish {
                output: json!({
                    "feature": "user signup",
                    "tasks": ["T1 migration", "T2 API", "T3 form", "T4 tests", "T5 docs"],
                    "api": api,
                    "docs": docs["summary"],
                }),
            }],
        );
    }
    if let Some(tests) = input(request, "test_report") {
        let Some(api) = chosen_api(request) else {
            return missing_api(request, "T4");
        };
        return ok(
            request,
            vec![task(
                "docs",
                "T5",
                "Document the signup endpoint",
                json!({
                    "tests": tests["summary"],
                    "api": api,
                }),
                &[],
            )],
        );
    }
    if let Some(contract) = input(request, "api_contract") {
        // The contract kept: the only one when the specialists agree, else the one a
        // person chose (the other is archived and never reaches the orchestrator).
        let proposed_by = request
            .decision_inputs
            .iter()
            .find(|i| i.output_type == "api_contract")
            .map(|i| i.source_agent.to_string())
            .unwrap_or_default();
        return ok(
            request,
            vec![task(
                "qa",
                "T4",
                "Test user signup",
                json!({
                    "api": { "contract": contract["summary"], "proposed_by": proposed_by },
                    "flaky": request.context.get("handoff").and_then(|h| h["original_request"]["flaky_tests"].as_bool()).unwrap_or(false),
                }),
                &["Bash(cargo publish*)"],
            )],
        );
    }
    if let Some(migration) = input(request, "task_report").filter(|r| r["task_id"] == "T1") {
        let context =
            json!({ "migration": migration["files_changed"], "summary": migration["summary"] });
        return ok(
            request,
            vec![
                task(
                    "backend",
                    "T2",
                    "Implement the user API",
                    context.clone(),
                    &["Bash(git push*)"],
                ),
                task("frontend", "T3", "Build the signup form", context, &[]),
            ],
        );
    }
    let Some(feature) = input(request, "feature_request") else {
        return AgentResponse::error(
            request.request_id.clone(),
            "INPUT_MISSING_DECISION_INPUT",
            "the orchestrator expects a feature_request",
        );
    };
    ok(
        request,
        vec![task(
            "database",
            "T1",
            "Create the user migration",
            json!({
                "feature": feature["feature"],
                "fields": feature["fields"],
            }),
            &["Bash(psql * DROP *)"],
        )],
    )
}

/// Database: writes the migration.
pub fn database(request: &AgentRequest) -> AgentResponse {
    let Some(t) = input(request, "task") else {
        return no_task(request);
    };
    let mut response = ok(
        request,
        vec![report(
            "task_report",
            &t["task_id"],
            &["migrations/001_users.sql"],
            "Migration file: migrations/001_users.sql (users: id, email unique, password_hash)",
        )],
    );
    response.tool_calls = vec![ToolCall {
        name: "Write".into(),
        arguments: "migrations/001_users.sql".into(),
    }];
    response.usage.tool_calls = 1;
    response
}

/// Backend: cleans the build (refused: `rm -rf` is denied for everyone), builds, and
/// proposes a REST contract.
pub fn backend(request: &AgentRequest) -> AgentResponse {
    let Some(t) = input(request, "task") else {
        return no_task(request);
    };
    let results = tool_results(request);
    match results.len() {
        0 => ok(
            request,
            vec![Action::CallTool {
                name: "Bash".into(),
                arguments: json!("rm -rf target/"),
            }],
        ),
        1 => ok(
            request,
            vec![Action::CallTool {
                name: "Bash".into(),
                arguments: json!("cargo build"),
            }],
        ),
        _ => {
            // The clean was refused; the build ran (or failed): the contract stands
            // either way, the outcome says whether it was built.
            let built = results.iter().any(|r| r["status"] == "returned");
            let mut contract = report(
                "api_contract",
                &t["task_id"],
                &["src/api/users.rs"],
                "REST: POST /users {email, password} -> 201 {id}",
            );
            if !built && let Action::Handoff { payload, .. } = &mut contract {
                payload["outcome"] = json!("not_built");
            }
            ok(request, vec![contract])
        }
    }
}

/// Frontend: builds the form against the API it expects, which is not backend's.
pub fn frontend(request: &AgentRequest) -> AgentResponse {
    let Some(t) = input(request, "task") else {
        return no_task(request);
    };
    ok(
        request,
        vec![report(
            "api_contract",
            &t["task_id"],
            &["web/src/Signup.tsx"],
            "GraphQL: mutation signUp(email, password) { id }",
        )],
    )
}

/// QA: runs the tests. With `flaky_tests` in the feature request the suite fails every
/// time, to show retry, then a person, then a block.
pub fn qa(request: &AgentRequest) -> AgentResponse {
    let Some(t) = input(request, "task") else {
        return no_task(request);
    };
    if t["context"]["flaky"] == true {
        return AgentResponse::error(
            request.request_id.clone(),
            "TEST_SUITE_FAILED",
            "signup_rejects_duplicate_email failed: expected 409, got 500",
        );
    }
    let mut response = ok(
        request,
        vec![Action::Handoff {
            to: "orchestrator".into(),
            output_type: "test_report".into(),
            payload: json!({ "task_id": t["task_id"], "outcome": "passed", "failures": [], "summary": "12 tests passed" }),
            task: None,
        }],
    );
    response.tool_calls = vec![ToolCall {
        name: "Bash".into(),
        arguments: "cargo test signup".into(),
    }];
    response.usage.tool_calls = 1;
    response
}

/// Docs: documents the API contract its task carries.
pub fn docs(request: &AgentRequest) -> AgentResponse {
    let Some(t) = input(request, "task") else {
        return no_task(request);
    };
    let Some(contract) = t["context"]["api"]["contract"].as_str() else {
        return AgentResponse::error(
            request.request_id.clone(),
            "INPUT_MISSING_API_CONTRACT",
            "docs expects its task to carry the API contract at context.api.contract",
        );
    };
    ok(
        request,
        vec![report(
            "task_report",
            &t["task_id"],
            &["docs/api/users.md"],
            &format!("docs/api/users.md: {contract}"),
        )],
    )
}

/// The design reviewer: read-only; reports that it has nothing to change.
pub fn design_reviewer(request: &AgentRequest) -> AgentResponse {
    let id = input(request, "task")
        .map(|t| t["task_id"].clone())
        .unwrap_or(Value::Null);
    ok(
        request,
        vec![report("task_report", &id, &[], "reviewed: no changes")],
    )
}

/// The risk classifier (seed 002's safety skill): every specialist's output passes
/// through it. Outputs that touch files outside the specialist's area are DANGEROUS;
/// everything here is SAFE.
pub fn risk_classifier(request: &AgentRequest) -> AgentResponse {
    let response = input(request, "agent_response")
        .cloned()
        .unwrap_or(Value::Null);
    let text = response.to_string();
    let verdict = if text.contains("/etc/") || text.contains("secrets") {
        "DANGEROUS"
    } else {
        "SAFE"
    };
    ok(
        request,
        vec![Action::Finish {
            output: json!({ "verdict": verdict }),
        }],
    )
}

/// The `Bash` tool's executor: one call per line on stdin, one answer per line on stdout
/// (docs/agent-protocol.md#tool-executors). It runs nothing: it answers with canned
/// output for the commands the example uses.
pub fn serve_shell_tool() -> Result<(), String> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        if line.trim().is_empty() {
            continue;
        }
        let call: Value =
            serde_json::from_str(&line).map_err(|e| format!("not a tool call: {e}"))?;
        let command = call["arguments"].as_str().unwrap_or_default();
        let answer = match command.split_whitespace().next() {
            Some("cargo") => {
                json!({ "tool_call_id": call["tool_call_id"], "result": { "exit_code": 0, "stdout": format!("{command}: finished (simulated)") } })
            }
            _ => {
                json!({ "tool_call_id": call["tool_call_id"], "error": { "code": "NOT_SIMULATED", "message": format!("the example's shell does not simulate {command:?}") } })
            }
        };
        writeln!(stdout, "{answer}").map_err(|e| e.to_string())?;
        stdout.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_agent_exists() {
        for name in AGENTS {
            assert!(agent(name).is_some(), "{name}");
        }
        assert!(agent("shell-tool").is_none());
    }

    #[test]
    fn the_classifier_flags_outputs_reaching_outside() {
        let request = AgentRequest::new("r1", "backend", "risk-classifier", "risk_classification")
            .with_decision_input(
                "backend",
                "agent_response",
                json!({"files": ["/etc/passwd"]}),
            );
        let response = risk_classifier(&request);
        assert!(
            serde_json::to_string(&response)
                .unwrap()
                .contains("DANGEROUS")
        );
    }
}
