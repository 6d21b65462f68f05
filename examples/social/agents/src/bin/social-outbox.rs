//! The social example's outbox: `social-outbox effects [--outbox FILE]` is the effect
//! executor for posts, replies and DMs (docs/effect-protocol.md); `social-outbox browser
//! [--outbox FILE]` the executor of replies on the browser lane (the static pages of
//! examples/social/pages, sandbox and real target, with drift evidence:
//! docs/effect-protocol.md#browser-lanes); `social-outbox lookup
//! [--outbox FILE]` serves the `outbox_lookup` tool the verifier reads it with
//! (docs/agent-protocol.md#tool-executors). The outbox file is `$SOCIAL_OUTBOX` when set,
//! else `--outbox FILE`, else `social-outbox.jsonl` in the working directory.
#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use docket_example_social::{Outbox, serve_browser, serve_effects, serve_lookup};

const USAGE: &str = "usage: social-outbox effects|browser|lookup [--outbox FILE]";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let mut path = PathBuf::from("social-outbox.jsonl");
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--outbox", Some(file)) => path = PathBuf::from(file),
            _ => {
                eprintln!("social-outbox: unexpected argument {arg:?}; {USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(file) = std::env::var_os("SOCIAL_OUTBOX").filter(|f| !f.is_empty()) {
        path = PathBuf::from(file);
    }
    let outbox = Outbox::at(path);
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    let served = match mode.as_str() {
        "effects" => serve_effects(&outbox, stdin.lock(), stdout.lock()),
        "browser" => serve_browser(&outbox, stdin.lock(), stdout.lock()),
        "lookup" => serve_lookup(&outbox, stdin.lock(), stdout.lock()),
        _ => {
            eprintln!("social-outbox: unknown mode {mode:?}; {USAGE}");
            return ExitCode::from(2);
        }
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("social-outbox {mode}: {err}");
            ExitCode::FAILURE
        }
    }
}
