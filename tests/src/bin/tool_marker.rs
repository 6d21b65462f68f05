//! A tool executor speaking docket's tool protocol as JSON lines, for the tool tests.
//!
//! `tool-marker --marker FILE`: every call it receives is appended to FILE (one line per
//! call: its `tool_call_id`, `tool` and arguments), so a test can show whether a call
//! ever reached it. It answers `{"tool_call_id", "result": {"echo": ARGUMENTS, "tool":
//! TOOL}}`; a call whose arguments are the string `fail` is answered with an error.
//!
//! `--banner-once FLAG`: when FLAG does not exist yet, creates it and prints a banner line
//! before its first answer (as a library's first-run notice would), which breaks the
//! protocol for that call.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::process::ExitCode;

use serde_json::{Value, json};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let Some(marker) = value("--marker") else {
        eprintln!("tool-marker: usage: tool-marker --marker FILE [--banner-once FLAG]");
        return ExitCode::from(2);
    };
    let mut banner = value("--banner-once").filter(|flag| !std::path::Path::new(flag).exists());
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
        if let Some(flag) = banner.take()
            && (std::fs::write(&flag, "printed").is_err()
                || writeln!(out, "tool-marker 1.0 ready").is_err())
        {
            return ExitCode::from(7);
        }
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::from(6);
        }
    }
    ExitCode::SUCCESS
}
