//! A tool executor speaking docket's tool protocol as JSON lines, for the tool tests.
//!
//! `tool-marker --marker FILE`: every call it receives is appended to FILE (one line per
//! call: its `tool_call_id`, `tool` and arguments), so a test can show whether a call
//! ever reached it. It answers `{"tool_call_id", "result": {"echo": ARGUMENTS, "tool":
//! TOOL}}`; a call whose arguments are the string `fail` is answered with an error.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::process::ExitCode;

use serde_json::{Value, json};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let marker = match (args.next().as_deref(), args.next()) {
        (Some("--marker"), Some(path)) => path,
        _ => {
            eprintln!("tool-marker: usage: tool-marker --marker FILE");
            return ExitCode::from(2);
        }
    };
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else {
            return ExitCode::from(4);
        };
        let call: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(err) => {
                eprintln!("tool-marker: bad call: {err}");
                return ExitCode::from(5);
            }
        };
        let entry = json!({"tool_call_id": call["tool_call_id"], "tool": call["tool"], "arguments": call["arguments"]});
        let marked = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&marker)
            .and_then(|mut f| writeln!(f, "{entry}").and_then(|()| f.sync_all()));
        if let Err(err) = marked {
            eprintln!("tool-marker: cannot write {marker}: {err}");
            return ExitCode::from(8);
        }
        let answer = if call["arguments"] == json!("fail") {
            json!({"tool_call_id": call["tool_call_id"], "error": {"code": "TOOL_SAID_NO", "message": "asked to fail"}})
        } else {
            json!({"tool_call_id": call["tool_call_id"], "result": {"echo": call["arguments"], "tool": call["tool"]}})
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::from(6);
        }
    }
    ExitCode::SUCCESS
}
