//! A scriptable agent speaking docket's stdio protocol, for the executor tests.
//!
//! `test-agent [MODE] [--size BYTES]`. Each request is handled by the behaviour named by
//! its `capability_code` when that is one of the modes below, otherwise by MODE (default
//! `echo`):
//! - `echo`: SUCCESS with a `finish` whose output repeats the request's inputs, plus this
//!   process's pid and how many requests it has served;
//! - `hang`: never answers;
//! - `crash`: writes half a response and a message on stderr, then exits with code 3;
//! - `noisy_crash`: writes 100 KiB to stderr, then crashes like `crash`;
//! - `garbage`: answers with a line that is not JSON;
//! - `oversized`: answers with a valid response line of `--size` bytes (default 2 MiB);
//! - `flood`: writes bytes without a newline until it is killed;
//! - `wrong_id`: answers with another request_id;
//! - `invalid`: answers SUCCESS without a confidence_level;
//! - `exit_after_answer`: answers, then exits with code 0;
//! - `blank_lines`: writes blank lines before answering;
//! - `environment`: answers with `DOCKET_TEST_VALUE` and the working directory;
//! - `crash_on_start` (as MODE only): exits with code 7 before reading anything;
//! - `handoff` (with `--to AGENT --output-type TYPE`, optionally `--task JSON`, the
//!   handoff's task restrictions): hands off the payload;
//! - `finish`: finishes with the payload;
//! - `escalate_then_finish`: asks a human, then (once approved) finishes with the payload;
//! - `ask`: asks a human which of `fast` and `thorough` to follow; called again with the
//!   human's answer (a `human_answer` decision input), finishes with that answer;
//! - `request_capability` (with `--to AGENT --capability CODE`, optionally `--priority
//!   HIGH|NORMAL|LOW`): asks for a capability;
//! - `ask_or_fall_back` (with `--to AGENT --capability CODE`): asks for a capability, and
//!   when called again with its answer or a `capability_failed`, finishes with
//!   `{"answer": ...}` or `{"fell_back": ...}` (the failure's payload);
//! - `fanout` (with `--to A,B,... --output-type TYPE`): hands the payload to each agent;
//! - `wait` (with `--for DURATION`, default `1s`): waits on a timer; called again with its
//!   `timer_fired` decision input, finishes with `{"fired": <that input's payload>}`.
//!
//! The payload is `--payload JSON`, else the first decision input's payload, else `{}`.
//! `--partial`: the scripted modes answer PARTIAL (MEDIUM confidence, one warning)
//! instead of SUCCESS.
//! `--ran-tool NAME ARGUMENTS`: the scripted modes report that they ran the tool NAME with
//! ARGUMENTS (`tool_calls`), which docket checks at the boundary.
//! `--record FILE` appends every request line received to FILE (what reached stdin).
//! `--banner-once FILE`: when FILE does not exist, creates it and writes a banner line on
//! stdout as the process starts (a stray line, as a library printing a notice on its first
//! run would): only the first process ever started with FILE does.
//! `--kill-parent-once FILE`: when FILE does not exist, creates it on the first request
//! and kills the parent process (docket) with SIGKILL before answering, as a crash of
//! docket between recording a request and its answer would.
//! `--gate FILE`: on each request, creates `FILE.waiting` and answers only once FILE
//! exists (a test holds the agent, and so the run, mid-call until it creates FILE).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::process::ExitCode;

use docket_decider::{Action, AgentRequest, AgentResponse, Confidence, TaskRestrictions};
use serde_json::json;

const MODES: &[&str] = &[
    "echo",
    "hang",
    "crash",
    "noisy_crash",
    "garbage",
    "oversized",
    "flood",
    "wrong_id",
    "invalid",
    "exit_after_answer",
    "blank_lines",
    "environment",
    "handoff",
    "finish",
    "escalate_then_finish",
    "ask",
    "request_capability",
    "ask_or_fall_back",
    "fanout",
    "wait",
];

/// Options of the scripted (engine test) modes.
#[derive(Default)]
struct Script {
    to: String,
    output_type: String,
    capability: String,
    payload: Option<serde_json::Value>,
    task: Option<TaskRestrictions>,
    record: Option<String>,
    banner_once: Option<String>,
    kill_parent_once: Option<String>,
    gate: Option<String>,
    partial: bool,
    wait_for: Option<String>,
    ask_first: bool,
    priority: Option<docket_decider::Priority>,
    ran_tool: Option<(String, String)>,
}

/// Creates `path` if it does not exist; whether this call created it.
fn first_time(path: &str) -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .is_ok()
}

fn main() -> ExitCode {
    let mut mode = "echo".to_owned();
    let mut size: usize = 2 * 1024 * 1024;
    let mut script = Script::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("test-agent: {name} needs a value");
                std::process::exit(2)
            })
        };
        if arg == "--to" {
            script.to = value("--to");
        } else if arg == "--output-type" {
            script.output_type = value("--output-type");
        } else if arg == "--capability" {
            script.capability = value("--capability");
        } else if arg == "--priority" {
            let given = value("--priority");
            script.priority = Some(
                serde_json::from_value(serde_json::Value::String(given.clone())).unwrap_or_else(
                    |_| {
                        eprintln!("test-agent: --priority {given}: HIGH, NORMAL or LOW");
                        std::process::exit(2)
                    },
                ),
            );
        } else if arg == "--banner-once" {
            script.banner_once = Some(value("--banner-once"));
        } else if arg == "--kill-parent-once" {
            script.kill_parent_once = Some(value("--kill-parent-once"));
        } else if arg == "--gate" {
            script.gate = Some(value("--gate"));
        } else if arg == "--for" {
            script.wait_for = Some(value("--for"));
        } else if arg == "--ask-first" {
            script.ask_first = true;
        } else if arg == "--ran-tool" {
            let name = value("--ran-tool");
            let arguments = value("--ran-tool");
            script.ran_tool = Some((name, arguments));
        } else if arg == "--partial" {
            script.partial = true;
        } else if arg == "--record" {
            script.record = Some(value("--record"));
        } else if arg == "--task" {
            match serde_json::from_str(&value("--task")) {
                Ok(v) => script.task = Some(v),
                Err(err) => {
                    eprintln!("test-agent: --task is not a task object: {err}");
                    return ExitCode::from(2);
                }
            }
        } else if arg == "--payload" {
            match serde_json::from_str(&value("--payload")) {
                Ok(v) => script.payload = Some(v),
                Err(err) => {
                    eprintln!("test-agent: --payload is not JSON: {err}");
                    return ExitCode::from(2);
                }
            }
        } else if arg == "--size" {
            match args.next().and_then(|s| s.parse().ok()) {
                Some(n) => size = n,
                None => {
                    eprintln!("test-agent: --size needs a number");
                    return ExitCode::from(2);
                }
            }
        } else {
            mode = arg;
        }
    }
    if mode == "crash_on_start" {
        eprintln!("test-agent: refusing to start (crash_on_start)");
        return ExitCode::from(7);
    }

    if script.banner_once.as_deref().is_some_and(first_time) {
        println!("test-agent 1.0 ready (a banner on stdout)");
    }

    let stdin = std::io::stdin();
    let mut served: u64 = 0;
    for line in stdin.lock().lines() {
        let Ok(line) = line else {
            return ExitCode::from(4);
        };
        let request: AgentRequest = match serde_json::from_str(&line) {
            Ok(request) => request,
            Err(err) => {
                eprintln!("test-agent: bad request: {err}");
                return ExitCode::from(5);
            }
        };
        served += 1;
        if let Some(path) = &script.record {
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| writeln!(f, "{line}"));
            if let Err(err) = appended {
                eprintln!("test-agent: cannot record to {path}: {err}");
                return ExitCode::from(8);
            }
        }
        if let Some(gate) = &script.gate {
            let _ = std::fs::write(format!("{gate}.waiting"), b"");
            // Bounded: a test that never opens the gate must not leave an agent behind.
            let mut waited = 0;
            while !std::path::Path::new(gate).exists() {
                if waited > 120_000 {
                    eprintln!("test-agent: the gate {gate} was never opened");
                    return ExitCode::from(10);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
                waited += 10;
            }
        }
        if script.kill_parent_once.as_deref().is_some_and(first_time) {
            let parent = std::os::unix::process::parent_id().to_string();
            let killed = std::process::Command::new("kill")
                .args(["-KILL", &parent])
                .status();
            if !killed.is_ok_and(|s| s.success()) {
                eprintln!("test-agent: could not kill the parent {parent}");
                return ExitCode::from(9);
            }
            // The request stays unanswered; stdin closes with the parent gone.
            continue;
        }
        let behaviour = if MODES.contains(&request.capability_code.as_str()) {
            request.capability_code.clone()
        } else {
            mode.clone()
        };
        let mut out = std::io::stdout().lock();
        match behaviour.as_str() {
            "hang" => loop {
                std::thread::park();
            },
            "crash" | "noisy_crash" => {
                if behaviour == "noisy_crash" {
                    let noise = "noise ".repeat(100 * 1024 / 6);
                    eprintln!("{noise}");
                }
                let _ = out.write_all(br#"{"request_id":"#);
                let _ = out.flush();
                eprintln!(
                    "test-agent: crashing on purpose while handling {}",
                    request.request_id
                );
                return ExitCode::from(3);
            }
            "garbage" => {
                let _ = writeln!(out, "this is not json");
            }
            "oversized" => {
                let head = format!(
                    r#"{{"request_id":"{}","status":"SUCCESS","confidence_level":"HIGH","actions":[{{"type":"finish","output":""#,
                    request.request_id
                );
                let tail = r#""}]}"#;
                let filler = size.saturating_sub(head.len() + tail.len());
                let _ = out.write_all(head.as_bytes());
                let chunk = [b'x'; 8192];
                let mut left = filler;
                while left > 0 {
                    let n = left.min(chunk.len());
                    if out.write_all(&chunk[..n]).is_err() {
                        return ExitCode::from(6);
                    }
                    left -= n;
                }
                let _ = writeln!(out, "{tail}");
            }
            "flood" => {
                let chunk = [b'x'; 8192];
                while out.write_all(&chunk).is_ok() {}
                return ExitCode::from(6);
            }
            "wrong_id" => {
                let response = answer(&request, served, &format!("{}-other", request.request_id));
                let _ = writeln!(out, "{response}");
            }
            "invalid" => {
                let mut response = answer_value(&request, served, &request.request_id);
                if let Some(fields) = response.as_object_mut() {
                    fields.remove("confidence_level");
                }
                let _ = writeln!(out, "{response}");
            }
            "blank_lines" => {
                let _ = write!(out, "\n  \n\r\n");
                let _ = writeln!(out, "{}", answer(&request, served, &request.request_id));
            }
            "environment" => {
                let response = AgentResponse::success(
                    request.request_id.clone(),
                    Confidence::High,
                    vec![Action::Finish {
                        output: json!({
                            "value": std::env::var("DOCKET_TEST_VALUE").ok(),
                            "cwd": std::env::current_dir().ok(),
                        }),
                    }],
                );
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&response).unwrap_or_default()
                );
            }
            "handoff"
            | "finish"
            | "escalate_then_finish"
            | "ask"
            | "request_capability"
            | "ask_or_fall_back"
            | "fanout"
            | "wait"
            | "wait_event" => {
                let payload = script.payload.clone().unwrap_or_else(|| {
                    request
                        .decision_inputs
                        .first()
                        .map_or_else(|| json!({}), |i| serde_json::Value::clone(&i.payload))
                });
                let actions = match behaviour.as_str() {
                    "handoff" => vec![Action::Handoff {
                        to: (&script.to).into(),
                        output_type: script.output_type.clone(),
                        payload,
                        task: script.task.clone(),
                    }],
                    "finish" => vec![Action::Finish { output: payload }],
                    "fanout" => script
                        .to
                        .split(',')
                        .map(|to| Action::Handoff {
                            to: to.into(),
                            output_type: script.output_type.clone(),
                            payload: payload.clone(),
                            task: None,
                        })
                        .collect(),
                    "ask" => match request
                        .decision_inputs
                        .iter()
                        .find(|i| i.output_type == "human_answer")
                    {
                        Some(answer) => vec![Action::Finish {
                            output: json!({ "human_answer": answer.payload }),
                        }],
                        None => vec![Action::Escalate {
                            reason: "which approach should I follow?".into(),
                            choices: vec!["fast".into(), "thorough".into()],
                        }],
                    },
                    "ask_or_fall_back" if request.decision_inputs.len() > 1 => {
                        let last = &request.decision_inputs[request.decision_inputs.len() - 1];
                        let key = if last.output_type == "capability_failed" {
                            "fell_back"
                        } else {
                            "answer"
                        };
                        vec![Action::Finish {
                            output: json!({ key: last.payload }),
                        }]
                    }
                    "wait" => match request
                        .decision_inputs
                        .iter()
                        .find(|i| i.output_type == "timer_fired")
                    {
                        Some(fired) => vec![Action::Finish {
                            output: json!({ "fired": fired.payload }),
                        }],
                        None => vec![Action::Wait {
                            until: None,
                            duration: Some(script.wait_for.clone().unwrap_or_else(|| "1s".into())),
                            event: None,
                            reason: "the slot opens later".into(),
                        }],
                    },
                    // Waits for two `comment` events (after a person's answer, with
                    // --ask-first), then finishes with what it received; a timeout (--for)
                    // ends the wait.
                    "wait_event" => {
                        let has =
                            |t: &str| request.decision_inputs.iter().find(|i| i.output_type == t);
                        let events: Vec<&serde_json::Value> = request
                            .decision_inputs
                            .iter()
                            .filter(|i| i.output_type == "event")
                            .map(|i| &*i.payload)
                            .collect();
                        if script.ask_first && has("human_answer").is_none() {
                            vec![Action::Escalate {
                                reason: "may I answer comments?".into(),
                                choices: vec!["yes".into()],
                            }]
                        } else if let Some(timed_out) = has("event_timed_out") {
                            vec![Action::Finish {
                                output: json!({ "events": events, "timed_out": timed_out.payload }),
                            }]
                        } else if events.len() >= 2 {
                            vec![Action::Finish {
                                output: json!({ "events": events }),
                            }]
                        } else {
                            vec![Action::Wait {
                                until: None,
                                duration: script.wait_for.clone(),
                                event: Some("comment".into()),
                                reason: "a reply needs a comment".into(),
                            }]
                        }
                    }
                    "escalate_then_finish" => vec![
                        Action::Escalate {
                            reason: "needs a person's sign-off".into(),
                            choices: Vec::new(),
                        },
                        Action::Finish { output: payload },
                    ],
                    _ => vec![Action::RequestCapability {
                        target_agent: (&script.to).into(),
                        capability_code: script.capability.clone(),
                        inputs: payload.as_object().cloned().unwrap_or_default(),
                        priority: script.priority,
                    }],
                };
                let mut response =
                    AgentResponse::success(request.request_id.clone(), Confidence::High, actions);
                if let Some((name, arguments)) = &script.ran_tool {
                    response.tool_calls.push(docket_decider::ToolCall {
                        name: name.clone(),
                        arguments: arguments.clone(),
                    });
                    response.usage.tool_calls += 1;
                }
                if script.partial {
                    response.status = docket_decider::ResponseStatus::Partial;
                    response.confidence_level = Some(Confidence::Medium);
                    response.warnings = vec!["some of the work could not be done".into()];
                }
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&response).unwrap_or_default()
                );
            }
            _ => {
                let _ = writeln!(out, "{}", answer(&request, served, &request.request_id));
                if behaviour == "exit_after_answer" {
                    let _ = out.flush();
                    return ExitCode::SUCCESS;
                }
            }
        }
        let _ = out.flush();
    }
    ExitCode::SUCCESS
}

fn answer_value(request: &AgentRequest, served: u64, request_id: &str) -> serde_json::Value {
    let mut response = AgentResponse::success(
        request_id,
        Confidence::High,
        vec![Action::Finish {
            output: json!({
                "capability_code": request.capability_code,
                "attempt": request.attempt,
                "decision_inputs": request.decision_inputs,
                "context_inputs": request.context_inputs,
            }),
        }],
    );
    response
        .metadata
        .insert("pid".into(), json!(std::process::id()));
    response.metadata.insert("served".into(), json!(served));
    serde_json::to_value(&response).unwrap_or_default()
}

fn answer(request: &AgentRequest, served: u64, request_id: &str) -> String {
    answer_value(request, served, request_id).to_string()
}
