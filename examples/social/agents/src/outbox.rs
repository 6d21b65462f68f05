//! The outbox: the example's stand-in for the social platforms. One JSON line per message
//! that went out (a post, a reply, a DM), and the executor's ledger at the same time: a key
//! in the outbox was applied, so `execute` never appends it twice, in this run or any
//! other (docs/effect-protocol.md, "the once-per-key duty").
//!
//! Two servers read it: the effect executor (`dry_run`, `execute`, `verify`) and the
//! `outbox_lookup` tool through which the verifier sees what was posted.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, Read as _, Write};
use std::path::{Path, PathBuf};

use docket_protocol::{
    DryRunReport, EffectAnswer, EffectCall, EffectOp, EffectReceipt, Verification,
};
use serde_json::{Value, json};

/// Why the outbox could not be used.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// Reading, locking or appending the outbox file failed.
    #[error("outbox {path}: {source}")]
    File {
        /// The outbox file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// Reading stdin or writing stdout failed.
    #[error("I/O error on stdin/stdout: {0}")]
    Io(std::io::Error),
    /// A line on stdin was not a call (docket never sends one; stop rather than guess).
    #[error("a line on stdin is not a call: {0}")]
    BadCall(serde_json::Error),
}

/// One message in the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRecord {
    /// The idempotency key it was sent under.
    pub key: String,
    /// The whole line, as JSON.
    pub line: Value,
}

/// The outbox file.
#[derive(Debug, Clone)]
pub struct Outbox {
    path: PathBuf,
}

/// Largest text a post or message may carry (the dry run refuses longer ones).
const MAX_TEXT_CHARS: usize = 3_000;

impl Outbox {
    /// The outbox at `path` (created on the first message).
    #[must_use]
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Where the outbox is.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, source: std::io::Error) -> OutboxError {
        OutboxError::File {
            path: self.path.clone(),
            source,
        }
    }

    /// Opens the file locked exclusively, so two executor processes (one orphaned by a
    /// killed docket) cannot both apply a key.
    fn open_locked(&self) -> Result<File, OutboxError> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| self.err(e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| self.err(e))?;
        fs2::FileExt::lock_exclusive(&file).map_err(|e| self.err(e))?;
        Ok(file)
    }

    fn read(file: &mut File) -> std::io::Result<Vec<OutboxRecord>> {
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|line| {
                let key = line["idempotency_key"].as_str()?.to_owned();
                Some(OutboxRecord { key, line })
            })
            .collect())
    }

    /// Every message, in the order sent.
    ///
    /// # Errors
    /// [`OutboxError::File`] when the file cannot be read.
    pub fn records(&self) -> Result<Vec<OutboxRecord>, OutboxError> {
        if !self.path.exists() {
            return Ok(Vec::new());
        }
        let mut file = self.open_locked()?;
        Self::read(&mut file).map_err(|e| self.err(e))
    }

    /// Sends the message of `call` unless its key is already in the outbox; either way the
    /// receipt of the first send under the key. The line is synced before this returns.
    ///
    /// # Errors
    /// [`OutboxError::File`] when the file cannot be read or appended.
    pub fn send(&self, call: &EffectCall) -> Result<Value, OutboxError> {
        let request = &call.request;
        let mut file = self.open_locked()?;
        let records = Self::read(&mut file).map_err(|e| self.err(e))?;
        if let Some(first) = records.iter().find(|r| r.key == request.idempotency_key) {
            return Ok(receipt(&first.line));
        }
        let line = json!({
            "post_id": format!("{}-{}", request.kind, records.len() + 1),
            "idempotency_key": request.idempotency_key,
            "kind": request.kind,
            "lane": request.lane,
            "run_id": request.run_id,
            "effect_id": request.effect_id,
            "params": request.params,
        });
        let mut text = line.to_string();
        text.push('\n');
        file.write_all(text.as_bytes()).map_err(|e| self.err(e))?;
        file.sync_all().map_err(|e| self.err(e))?;
        Ok(receipt(&line))
    }

    /// The messages sent under `key`.
    ///
    /// # Errors
    /// [`OutboxError::File`] when the file cannot be read.
    pub fn lookup(&self, key: &str) -> Result<Vec<Value>, OutboxError> {
        Ok(self
            .records()?
            .into_iter()
            .filter(|r| r.key == key)
            .map(|r| r.line)
            .collect())
    }
}

fn receipt(line: &Value) -> Value {
    json!({ "post_id": line["post_id"], "kind": line["kind"], "text": line["params"]["text"] })
}

/// What executing `call` would send, or why it would be refused: a non-empty text within
/// the platform's limit, and a recipient for a DM.
fn dry_run(call: &EffectCall) -> DryRunReport {
    let params = &call.request.params;
    let text = params["text"].as_str().unwrap_or_default();
    let problem = if text.trim().is_empty() {
        Some("the message has no text".to_owned())
    } else if text.chars().count() > MAX_TEXT_CHARS {
        Some(format!(
            "the text is longer than {MAX_TEXT_CHARS} characters"
        ))
    } else if call.request.kind == "dm" && params["to"].as_str().is_none_or(str::is_empty) {
        Some("a DM needs a recipient (`to`)".to_owned())
    } else {
        None
    };
    DryRunReport {
        ok: problem.is_none(),
        preview: json!({ "would_send": call.request.kind, "to": params["to"], "text": text }),
        message: problem,
    }
}

/// The answer line to one effect call.
///
/// # Errors
/// [`OutboxError::File`] when the outbox cannot be used; the caller exits without
/// answering, so docket asks `verify` rather than trusting a guess.
pub fn answer_effect(outbox: &Outbox, call: &EffectCall) -> Result<String, OutboxError> {
    let id = call.request.effect_id.to_string();
    Ok(match call.op {
        EffectOp::DryRun => serde_json::to_string(&EffectAnswer::ok(id, dry_run(call))),
        EffectOp::Execute => {
            let result = outbox.send(call)?;
            serde_json::to_string(&EffectAnswer::ok(
                id,
                EffectReceipt {
                    result,
                    drift: None,
                },
            ))
        }
        EffectOp::Verify => {
            let sent = outbox.lookup(&call.request.idempotency_key)?;
            let verification = match sent.first() {
                Some(first) => Verification::Applied {
                    result: receipt(first),
                },
                None => Verification::NotApplied,
            };
            serde_json::to_string(&EffectAnswer::ok(id, verification))
        }
    }
    .unwrap_or_default())
}

fn write_line(out: &mut impl Write, line: &str) -> Result<(), OutboxError> {
    out.write_all(line.as_bytes()).map_err(OutboxError::Io)?;
    out.write_all(b"\n").map_err(OutboxError::Io)?;
    out.flush().map_err(OutboxError::Io)
}

/// Serves the effect protocol on `input`/`output` until `input` ends.
///
/// # Errors
/// [`OutboxError`]: I/O, a line that is not a call, an outbox that cannot be used.
pub fn serve_effects(
    outbox: &Outbox,
    input: impl BufRead,
    output: impl Write,
) -> Result<(), OutboxError> {
    serve_lines(input, output, |line| {
        let call: EffectCall = serde_json::from_str(line).map_err(OutboxError::BadCall)?;
        answer_effect(outbox, &call)
    })
}

/// Answers each non-blank line of `input` with one line on `output`, until `input` ends.
pub(crate) fn serve_lines(
    input: impl BufRead,
    mut output: impl Write,
    mut answer: impl FnMut(&str) -> Result<String, OutboxError>,
) -> Result<(), OutboxError> {
    for line in input.lines() {
        let line = line.map_err(OutboxError::Io)?;
        if line.trim().is_empty() {
            continue;
        }
        write_line(&mut output, &answer(&line)?)?;
    }
    Ok(())
}

/// Serves the `outbox_lookup` tool (docs/agent-protocol.md#tool-executors): arguments
/// `{"idempotency_key": KEY}`, result `{"count": N, "records": [...]}`.
///
/// # Errors
/// [`OutboxError`]: I/O or a line that is not JSON.
pub fn serve_lookup(
    outbox: &Outbox,
    input: impl BufRead,
    output: impl Write,
) -> Result<(), OutboxError> {
    serve_lines(input, output, |line| {
        let call: Value = serde_json::from_str(line).map_err(OutboxError::BadCall)?;
        let id = call["tool_call_id"].clone();
        let answer = match call["arguments"]["idempotency_key"].as_str() {
            None => {
                json!({ "tool_call_id": id, "error": { "code": "INVALID_ARGUMENTS", "message": "outbox_lookup needs {\"idempotency_key\": KEY}" } })
            }
            Some(key) => match outbox.lookup(key) {
                Ok(records) => {
                    json!({ "tool_call_id": id, "result": { "count": records.len(), "records": records } })
                }
                Err(err) => {
                    json!({ "tool_call_id": id, "error": { "code": "OUTBOX_UNREADABLE", "message": err.to_string() } })
                }
            },
        };
        Ok(answer.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(op: &str, key: &str, params: Value) -> EffectCall {
        serde_json::from_value(json!({
            "op": op,
            "request": { "run_id": "run-1", "episode_id": "ep-1", "effect_id": "run-1/effect-1",
                         "kind": "dm", "lane": "api", "idempotency_key": key, "params": params,
                         "attempt": 1, "timeout_ms": 1000 }
        }))
        .expect("a call")
    }

    #[test]
    fn a_key_is_sent_once_and_its_first_receipt_returned_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outbox = Outbox::at(dir.path().join("out/outbox.jsonl"));
        let first = outbox
            .send(&call("execute", "dm:e1", json!({"to": "jo", "text": "hi"})))
            .expect("sent");
        let again = outbox
            .send(&call(
                "execute",
                "dm:e1",
                json!({"to": "jo", "text": "changed"}),
            ))
            .expect("deduplicated");
        assert_eq!(first, again);
        assert_eq!(outbox.records().expect("read").len(), 1);
        let verify =
            answer_effect(&outbox, &call("verify", "dm:e1", Value::Null)).expect("answers");
        assert!(verify.contains("\"applied\""), "{verify}");
        let verify =
            answer_effect(&outbox, &call("verify", "dm:e2", Value::Null)).expect("answers");
        assert!(verify.contains("not_applied"), "{verify}");
    }

    #[test]
    fn the_dry_run_refuses_a_dm_without_recipient_and_sends_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outbox = Outbox::at(dir.path().join("outbox.jsonl"));
        let report = dry_run(&call("dry_run", "dm:e1", json!({"text": "hi"})));
        assert!(!report.ok);
        assert!(report.message.unwrap_or_default().contains("recipient"));
        assert!(outbox.records().expect("read").is_empty());
    }

    #[test]
    fn the_lookup_tool_counts_the_messages_of_a_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outbox = Outbox::at(dir.path().join("outbox.jsonl"));
        outbox
            .send(&call("execute", "dm:e1", json!({"to": "jo", "text": "hi"})))
            .expect("sent");
        let mut out = Vec::new();
        let input = "{\"tool_call_id\": \"t1\", \"arguments\": {\"idempotency_key\": \"dm:e1\"}}\n";
        serve_lookup(&outbox, input.as_bytes(), &mut out).expect("serves");
        let answer: Value = serde_json::from_slice(&out).expect("JSON");
        assert_eq!(answer["result"]["count"], 1);
        assert_eq!(answer["result"]["records"][0]["post_id"], "dm-1");
    }
}
