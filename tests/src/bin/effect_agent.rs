//! An agent (docket's stdio agent protocol) that asks for side effects, for the effect
//! crash test: `effect-agent --prefix P --count N --lane L [--to AGENT] [--episode-result]
//! [--not-before TIME | --not-before-in-ms MS]` (each publish scheduled not before TIME,
//! RFC 3339, or MS after the agent started).
//!
//! Each request: when fewer than N `effect_result` inputs have come back, ask for the next
//! publish (`request_effect`, kind `publish`, key `P-i`, params `{"text": "hello P-i"}`);
//! otherwise hand `{"results": [...], "input": FIRST_INPUT}` to AGENT (output type
//! `posts`), or finish with it when no `--to` is given (with `--episode-result`: end the
//! episode with an EpisodeResult, status ok, the output as its decisions and the post ids
//! as its artifacts). Each result is kept as its key,
//! status and receipt only, so an interrupted run's output can equal an uninterrupted one.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::process::ExitCode;

use docket_decider::{Action, AgentRequest, AgentResponse, Confidence};
use serde_json::{Value, json};

fn main() -> ExitCode {
    let (mut prefix, mut count, mut lane, mut to) =
        ("post".to_owned(), 1usize, "api".to_owned(), None::<String>);
    let mut episode_result = false;
    let mut record = None::<String>;
    let mut not_before = None::<String>;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--episode-result" {
            episode_result = true;
            continue;
        }
        let value = args.next().unwrap_or_default();
        match arg.as_str() {
            "--prefix" => prefix = value,
            "--count" => count = value.parse().unwrap_or(1),
            "--lane" => lane = value,
            "--to" => to = Some(value),
            "--record" => record = Some(value),
            "--not-before" => not_before = Some(value),
            "--not-before-in-ms" => {
                let ms: i64 = value.parse().unwrap_or(0);
                let at = jiff::Timestamp::now()
                    .checked_add(jiff::SignedDuration::from_millis(ms))
                    .unwrap_or_else(|_| jiff::Timestamp::now());
                not_before = Some(at.to_string());
            }
            other => {
                eprintln!("effect-agent: unknown argument {other:?}");
                return ExitCode::from(2);
            }
        }
    }
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        if let Some(path) = &record {
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| writeln!(f, "{line}"));
            if let Err(e) = appended {
                eprintln!("effect-agent: cannot record to {path}: {e}");
                return ExitCode::FAILURE;
            }
        }
        let request: AgentRequest = match serde_json::from_str(&line) {
            Ok(request) => request,
            Err(e) => {
                eprintln!("effect-agent: bad request: {e}");
                return ExitCode::from(2);
            }
        };
        let results: Vec<Value> = request
            .decision_inputs
            .iter()
            .filter(|i| i.output_type == "effect_result")
            .map(|i| {
                let p = &i.payload;
                json!({
                    "key": p["idempotency_key"],
                    "status": p["status"],
                    "receipt": p["receipt"],
                })
            })
            .collect();
        let input = request
            .decision_inputs
            .iter()
            .find(|i| i.output_type != "effect_result")
            .map_or(Value::Null, |i| Value::clone(&i.payload));
        let action = if results.len() < count {
            let key = format!("{prefix}-{}", results.len() + 1);
            Action::RequestEffect {
                kind: "publish".into(),
                lane: lane.clone(),
                params: json!({ "text": format!("hello {key}") }),
                idempotency_key: Some(key),
                not_before: not_before.clone(),
            }
        } else {
            let output = json!({ "results": results, "input": input });
            match &to {
                Some(to) => Action::Handoff {
                    to: to.into(),
                    output_type: "posts".into(),
                    payload: output,
                    task: None,
                },
                None if episode_result => {
                    let artifacts: Vec<Value> = results
                        .iter()
                        .filter_map(|r| r["receipt"]["result"]["post_id"].as_str())
                        .map(|id| Value::String(id.to_owned()))
                        .collect();
                    let result = json!({
                        "status": "ok",
                        "summary": format!("{} posts published", artifacts.len()),
                        "artifacts_created": artifacts,
                        "decisions": [output],
                    });
                    match serde_json::from_value(result) {
                        Ok(result) => Action::FinishEpisode { result },
                        Err(e) => {
                            eprintln!("effect-agent: EpisodeResult: {e}");
                            return ExitCode::FAILURE;
                        }
                    }
                }
                None => Action::Finish { output },
            }
        };
        let response =
            AgentResponse::success(request.request_id.clone(), Confidence::High, vec![action]);
        let text = serde_json::to_string(&response).unwrap_or_default();
        if writeln!(stdout, "{text}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    ExitCode::SUCCESS
}
