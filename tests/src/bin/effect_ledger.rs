//! An effect executor speaking docket's effect protocol on stdin/stdout (JSON lines, see
//! docs/effect-protocol.md) that keeps ITS OWN ledger, so tests can check what really
//! happened without trusting docket's log.
//!
//! `effect-ledger [--ledger FILE] [--calls FILE] [--starts FILE] [--banner-once FILE]` (or
//! `$EFFECT_LEDGER`, `$EFFECT_LEDGER_CALLS`):
//! - `execute` appends `key<TAB>result-json` to the ledger and fsyncs before answering; a
//!   key already in the ledger gets its recorded result back without a new line. The check
//!   and the append hold an exclusive lock on the ledger, so two executor processes (one
//!   orphaned by a killed docket) cannot both apply a key;
//! - `verify` answers `applied` with the recorded result, or `not_applied`;
//! - a call's `fence` (docs/effect-protocol.md) is kept per key in `LEDGER.fences`, under
//!   the same lock: an `execute` with a lower fence than one already seen for its key (by
//!   `execute` or `verify`) is refused with `FENCED` (noted `fenced`), applying nothing;
//! - `dry_run` checks the params: an object with a string `text` (else `ok: false`);
//! - `--calls FILE` appends `op<TAB>key<TAB>outcome` for every call (outcome `applied`,
//!   `duplicate`, `applied?`/`not_applied`, `ok`/`rejected`, `failed`, `fenced`);
//! - `--starts FILE` appends a line each time a process starts;
//! - `--banner-once FILE`: when FILE does not exist, creates it and writes a banner line
//!   on stdout as the process starts (a stray line, as a library printing a notice on its
//!   first run would): only the first process ever started with FILE does.
//!
//! The result of `execute` is `{"post_id": "post-KEY", "text": TEXT}`: deterministic, so
//! an interrupted run can be compared with an uninterrupted one.
//!
//! Faults for tests (environment): `EFFECT_LEDGER_FAIL_EXECUTE=N` answers an error to this
//! process's Nth execute (not applied); `EFFECT_LEDGER_HANG=OP` never answers OP
//! (`dry_run`, `execute`, `verify`); `EFFECT_LEDGER_CRASH_EXECUTE=N` exits with code 3 at
//! this process's Nth execute, after the append when `EFFECT_LEDGER_CRASH_AFTER_APPEND=1`
//! (else before it); `EFFECT_LEDGER_ANSWER=garbage|oversized|wrong_id` answers every call
//! with that kind of broken line; `EFFECT_LEDGER_ON_EXECUTE='["prog", "arg"...]'` runs
//! that command (and waits for it) after this process's first applied execute, before
//! answering (an operator acting while a run goes).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fs::{File, OpenOptions};
use std::io::{BufRead, Read as _, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use docket_decider::{DryRunReport, EffectReceipt, Verification};
use docket_decider::{EffectAnswer, EffectCall, EffectOp};
use serde::Serialize;
use serde_json::{Value, json};

struct Options {
    ledger: PathBuf,
    calls: Option<PathBuf>,
    starts: Option<PathBuf>,
    banner_once: Option<PathBuf>,
    fail_execute: Option<u64>,
    crash_execute: Option<u64>,
    crash_after_append: bool,
    hang: Option<String>,
    answer: Option<String>,
    on_execute: Option<Vec<String>>,
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn options() -> Result<Options, String> {
    let mut ledger = std::env::var_os("EFFECT_LEDGER").map(PathBuf::from);
    let mut calls = std::env::var_os("EFFECT_LEDGER_CALLS").map(PathBuf::from);
    let (mut starts, mut banner_once) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--ledger" => ledger = args.next().map(PathBuf::from),
            "--calls" => calls = args.next().map(PathBuf::from),
            "--starts" => starts = args.next().map(PathBuf::from),
            "--banner-once" => banner_once = args.next().map(PathBuf::from),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        ledger: ledger.ok_or("no ledger: give --ledger FILE or $EFFECT_LEDGER")?,
        calls,
        starts,
        banner_once,
        fail_execute: env_number("EFFECT_LEDGER_FAIL_EXECUTE"),
        crash_execute: env_number("EFFECT_LEDGER_CRASH_EXECUTE"),
        crash_after_append: std::env::var("EFFECT_LEDGER_CRASH_AFTER_APPEND")
            .is_ok_and(|v| v == "1"),
        hang: std::env::var("EFFECT_LEDGER_HANG").ok(),
        answer: std::env::var("EFFECT_LEDGER_ANSWER").ok(),
        on_execute: match std::env::var("EFFECT_LEDGER_ON_EXECUTE") {
            Ok(json) => Some(serde_json::from_str(&json).map_err(|e| {
                format!("EFFECT_LEDGER_ON_EXECUTE is not a JSON list of strings: {e}")
            })?),
            Err(_) => None,
        },
    })
}

/// The ledger's entries: (key, result), in order.
fn read_ledger(file: &mut File) -> std::io::Result<Vec<(String, Value)>> {
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let (key, result) = line.split_once('\t')?;
            Some((key.to_owned(), serde_json::from_str(result).ok()?))
        })
        .collect())
}

fn open_locked(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    fs2::FileExt::lock_exclusive(&file)?;
    Ok(file)
}

fn note(options: &Options, op: &str, key: &str, outcome: &str) {
    if let Some(path) = &options.calls
        && let Ok(mut file) = OpenOptions::new().create(true).append(true).open(path)
    {
        let _ = writeln!(file, "{op}\t{key}\t{outcome}");
        let _ = file.sync_all();
    }
}

fn answer_line<T: Serialize>(answer: &EffectAnswer<T>) -> String {
    serde_json::to_string(answer).unwrap_or_default()
}

fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("effect-ledger: {message}");
            return ExitCode::from(2);
        }
    };
    let mut executes = 0u64;
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    if let Some(path) = &options.starts
        && let Ok(mut file) = OpenOptions::new().create(true).append(true).open(path)
    {
        let _ = writeln!(file, "{}", std::process::id());
    }
    if let Some(path) = &options.banner_once
        && OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .is_ok()
    {
        let _ = writeln!(stdout, "effect-ledger 1.0 starting up");
        let _ = stdout.flush();
    }
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let call: EffectCall = match serde_json::from_str(&line) {
            Ok(call) => call,
            Err(e) => {
                eprintln!("effect-ledger: bad call line: {e}");
                return ExitCode::from(2);
            }
        };
        let request = &call.request;
        let key = request.idempotency_key.as_str();
        if options.hang.as_deref() == Some(call.op.name()) {
            loop {
                std::thread::park();
            }
        }
        let reply = match options.answer.as_deref() {
            Some("garbage") => "this is not json".to_owned(),
            Some("oversized") => format!(
                "{{\"effect_id\":{:?},\"result\":{{\"ok\":true,\"preview\":\"{}\"}}}}",
                request.effect_id,
                "x".repeat(2 * 1024 * 1024)
            ),
            Some("wrong_id") => {
                answer_line(&EffectAnswer::ok("someone-else", Verification::NotApplied))
            }
            _ => match call.op {
                EffectOp::DryRun => {
                    let text = request.params.get("text").and_then(Value::as_str);
                    let report = match text {
                        Some(text) => DryRunReport {
                            ok: true,
                            preview: json!({ "would_post": text }),
                            message: None,
                        },
                        None => DryRunReport {
                            ok: false,
                            preview: Value::Null,
                            message: Some("params need a string `text`".to_owned()),
                        },
                    };
                    note(
                        &options,
                        "dry_run",
                        key,
                        if report.ok { "ok" } else { "rejected" },
                    );
                    answer_line(&EffectAnswer::ok(request.effect_id.clone(), report))
                }
                EffectOp::Verify => {
                    // A verification changes nothing, so a lower fence is answered too;
                    // a higher one is kept, so that no execute under a lower one follows.
                    let found = open_locked(&options.ledger).and_then(|mut f| {
                        admit(&options.ledger, key, request.fence)?;
                        let entries = read_ledger(&mut f)?;
                        Ok(entries.into_iter().find(|(k, _)| k == key))
                    });
                    match found {
                        Ok(Some((_, result))) => {
                            note(&options, "verify", key, "applied");
                            answer_line(&EffectAnswer::ok(
                                request.effect_id.clone(),
                                Verification::Applied { result },
                            ))
                        }
                        Ok(None) => {
                            note(&options, "verify", key, "not_applied");
                            answer_line(&EffectAnswer::ok(
                                request.effect_id.clone(),
                                Verification::NotApplied,
                            ))
                        }
                        Err(e) => answer_line(&EffectAnswer::<Verification>::ok(
                            request.effect_id.clone(),
                            Verification::Unknown {
                                message: format!("cannot read the ledger: {e}"),
                            },
                        )),
                    }
                }
                EffectOp::Execute => {
                    executes += 1;
                    if options.fail_execute == Some(executes) {
                        note(&options, "execute", key, "failed");
                        answer_line(&EffectAnswer::<EffectReceipt>::failed(
                            request.effect_id.clone(),
                            "LEDGER_INJECTED_FAILURE",
                            format!("execute number {executes} fails on purpose"),
                        ))
                    } else {
                        let crash = options.crash_execute == Some(executes);
                        if crash && !options.crash_after_append {
                            eprintln!("effect-ledger: crashing before the append of {key}");
                            return ExitCode::from(3);
                        }
                        match execute(&options, request) {
                            Ok(None) => {
                                note(&options, "execute", key, "fenced");
                                answer_line(&EffectAnswer::<EffectReceipt>::failed(
                                    request.effect_id.clone(),
                                    "FENCED",
                                    "a call with a later fence was made for this key",
                                ))
                            }
                            Ok(Some((result, fresh))) => {
                                note(
                                    &options,
                                    "execute",
                                    key,
                                    if fresh { "applied" } else { "duplicate" },
                                );
                                if crash {
                                    eprintln!("effect-ledger: crashing after the append of {key}");
                                    return ExitCode::from(3);
                                }
                                if let (true, Some([program, args @ ..])) =
                                    (fresh && executes == 1, options.on_execute.as_deref())
                                {
                                    let status = std::process::Command::new(program)
                                        .args(args)
                                        .stdout(std::process::Stdio::null())
                                        .status();
                                    if !status.as_ref().is_ok_and(|s| s.success()) {
                                        eprintln!("effect-ledger: {program} failed: {status:?}");
                                    }
                                }
                                answer_line(&EffectAnswer::ok(
                                    request.effect_id.clone(),
                                    EffectReceipt {
                                        result,
                                        drift: None,
                                    },
                                ))
                            }
                            Err(e) => answer_line(&EffectAnswer::<EffectReceipt>::failed(
                                request.effect_id.clone(),
                                "LEDGER_IO",
                                e.to_string(),
                            )),
                        }
                    }
                }
            },
        };
        if writeln!(stdout, "{reply}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    ExitCode::SUCCESS
}

/// Whether a call for `key` under `fence` may go on: not when a higher fence was seen for
/// the key. A higher one is kept (synced) for the calls after. The caller holds the
/// ledger's lock.
fn admit(ledger: &Path, key: &str, fence: Option<u64>) -> std::io::Result<bool> {
    let Some(fence) = fence else {
        return Ok(true);
    };
    let path = ledger.with_extension("fences");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let highest = text
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(k, _)| *k == key)
        .filter_map(|(_, f)| f.parse::<u64>().ok())
        .max();
    match highest {
        Some(h) if fence < h => return Ok(false),
        Some(h) if fence == h => return Ok(true),
        _ => {}
    }
    let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
    writeln!(file, "{key}\t{fence}")?;
    file.sync_all()?;
    Ok(true)
}

/// Applies the request's key once: the recorded result when the ledger has it, else
/// appends and syncs a new entry. Returns the result and whether it was applied now, or
/// `None` when the call's fence is lower than one seen for the key.
fn execute(
    options: &Options,
    request: &docket_decider::EffectRequest,
) -> std::io::Result<Option<(Value, bool)>> {
    let (key, params) = (request.idempotency_key.as_str(), &request.params);
    let mut file = open_locked(&options.ledger)?;
    if !admit(&options.ledger, key, request.fence)? {
        return Ok(None);
    }
    if let Some((_, result)) = read_ledger(&mut file)?.into_iter().find(|(k, _)| k == key) {
        return Ok(Some((result, false)));
    }
    let result = json!({
        "post_id": format!("post-{key}"),
        "text": params.get("text").cloned().unwrap_or(Value::Null),
    });
    writeln!(
        file,
        "{key}\t{}",
        serde_json::to_string(&result).unwrap_or_default()
    )?;
    file.sync_all()?;
    Ok(Some((result, true)))
}
