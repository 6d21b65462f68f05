//! Error messages as a user reads them: what went wrong and where, once, in the words of
//! the workflow and bundle formats rather than those of the parsing libraries.
//!
//! The library crates' errors often repeat their source's text in their own message
//! (`cannot read X: <io error>`, with the I/O error as their source too), and serde
//! describes values by Rust types (`expected u64`, `untagged enum ExecutorSpec`). This
//! module walks an error chain, prints each message once, and rewrites those phrases.

use std::error::Error as StdError;
use std::fmt::Write as _;
use std::path::Path;

use docket_app::ReplaceError;
use docket_decider::{Rejection, TicketAsks, WorkflowError};
use docket_evidence::{ExportError, VerifyError};
use docket_runtime::{RegistryError, RuntimeError, WorkflowLoadError};

/// The whole chain of `error`, each cause once, in user words (no trailing newline).
pub(crate) fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let raw = cause.to_string();
        let words = cause_text(cause).unwrap_or_else(|| raw.clone());
        if text.is_empty() {
            text = words;
        } else if !raw.is_empty() && text.contains(&raw) {
            // The outer message already says it: say it once, in the better words.
            text = text.replacen(&raw, &words, 1);
        } else if !text.contains(&words) {
            let _ = write!(text, ": {words}");
        }
        // A PostgreSQL error already says the driver's causes in the database's words.
        if cause
            .downcast_ref::<docket_store_postgres::PgError>()
            .is_some()
        {
            break;
        }
    }
    // The runtime's errors name the store as a data directory; with a PostgreSQL store
    // they are about the database.
    if crate::command::postgres_url().is_some() {
        text = text.replace("in this data directory", "in the PostgreSQL store");
    }
    plain(&text)
}

/// A serde_json parse error as `line L, column C: what`, in user words.
pub(crate) fn json_error(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Eof => "the JSON text ends before its value is complete",
        serde_json::error::Category::Io => "it could not be read",
        _ => "",
    };
    let full = e.to_string();
    // serde_json appends ` at line L column C` to its message.
    let message = full
        .rfind(" at line ")
        .map_or(full.as_str(), |at| &full[..at]);
    let message = if what.is_empty() {
        json_phrase(message)
    } else {
        what.to_owned()
    };
    if e.line() == 0 {
        message
    } else {
        format!("line {}, column {}: {message}", e.line(), e.column())
    }
}

const NOT_A_VALUE: &str = "expected a JSON value (text needs double quotes; the only bare words are true, false and null)";

fn json_phrase(message: &str) -> String {
    match message {
        "expected value" | "expected ident" => NOT_A_VALUE.to_owned(),
        "trailing characters" => "unexpected text after the JSON value".to_owned(),
        "trailing comma" => "a comma before a closing bracket or brace".to_owned(),
        "key must be a string" => "an object key must be a string in double quotes".to_owned(),
        other => plain(other),
    }
}

/// The user-facing text of one cause, when it is a kind this module rewrites.
fn cause_text(cause: &(dyn StdError + 'static)) -> Option<String> {
    if let Some(WorkflowLoadError::Spec(WorkflowError::Parse { path, message, .. })) =
        cause.downcast_ref::<WorkflowLoadError>()
    {
        return Some(workflow_parse(path, message));
    }
    if let Some(WorkflowError::Parse { path, message, .. }) = cause.downcast_ref::<WorkflowError>()
    {
        return Some(workflow_parse(path, message));
    }
    if let Some(words) = command_words(cause) {
        return Some(words);
    }
    if let Some(e) = cause.downcast_ref::<std::io::Error>() {
        return Some(io_words(e));
    }
    if let Some(e) = cause.downcast_ref::<serde_json::Error>() {
        return Some(json_error(e));
    }
    None
}

/// A library error whose way out is a command to type: its message, with the command.
/// The libraries' errors carry the data (the run, the agent, what is missing); which
/// command helps is the command line's to say.
fn command_words(cause: &(dyn StdError + 'static)) -> Option<String> {
    if let Some(e) = cause.downcast_ref::<RuntimeError>() {
        return runtime_words(e);
    }
    if let Some(e) = cause.downcast_ref::<Rejection>() {
        return rejection_words(e);
    }
    if let Some(e @ VerifyError::UnknownRun { .. }) = cause.downcast_ref::<VerifyError>() {
        return Some(format!("{e} (`docket runs` lists them)"));
    }
    match cause.downcast_ref::<ExportError>() {
        Some(e @ ExportError::MissingDisclosure { .. }) => {
            return Some(format!("{e} (`docket verify` says more)"));
        }
        Some(e @ ExportError::NothingThere { run, .. }) => {
            return Some(format!(
                "{e}; the pointers of the run's values: `docket events {run} --json`"
            ));
        }
        _ => {}
    }
    let registry = match cause.downcast_ref::<ReplaceError>() {
        Some(ReplaceError::Registry(e)) => Some(e),
        _ => cause.downcast_ref::<RegistryError>(),
    }?;
    match registry {
        RegistryError::Runtime(e) => runtime_words(e),
        RegistryError::Unexplained { .. } => Some(format!("{registry} (--by NAME --reason TEXT)")),
        RegistryError::WhichBundle { .. } => Some(format!("{registry} (--bundle NAME)")),
        RegistryError::NoVersions { .. } => Some(format!(
            "{registry}; `docket policy register BUNDLE --by NAME --reason TEXT` registers one"
        )),
        _ => None,
    }
}

/// A refused input whose way out is a flag or a command.
fn rejection_words(rejection: &Rejection) -> Option<String> {
    let hint = match rejection {
        Rejection::Anonymous(_) | Rejection::Unnamed(_) => "--by NAME",
        Rejection::Unexplained(_) => "--reason TEXT",
        Rejection::NoChoiceOffered {
            asks: TicketAsks::Words,
            ..
        } => "`docket answer RUN TICKET --text TEXT`",
        _ => return None,
    };
    Some(format!("{rejection} ({hint})"))
}

fn runtime_words(e: &RuntimeError) -> Option<String> {
    if let RuntimeError::Rejected { run, rejection } = e {
        return rejection_words(rejection).map(|words| format!("run {run}: {words}"));
    }
    match e {
        RuntimeError::RunExists(run) => Some(format!("{e} (use `docket resume {run}`)")),
        RuntimeError::Shredded { run, values } => Some(format!(
            "run {run} cannot go on: {values} value(s) it recorded were erased (`docket shred`), \
             and what it decides next would read them, so its state cannot be rebuilt without \
             them; nothing was recorded. End it with `docket cancel {run} --by NAME --reason \
             TEXT`; reading it (events, inspect, replay, export, verify) still works"
        )),
        RuntimeError::ResetUnexplained { .. } => Some(format!("{e} (--by NAME --reason TEXT)")),
        RuntimeError::UnknownCircuit(_) => Some(format!("{e} (`docket circuits` lists them)")),
        _ => None,
    }
}

/// An I/O error without its `(os error N)` and in lower case (`no such file or directory`).
fn io_words(e: &std::io::Error) -> String {
    let text = strip_os_error(&e.to_string());
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

fn strip_os_error(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" (os error ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + " (os error ".len()..];
        match after.find(')') {
            Some(end) if after[..end].chars().all(|c| c.is_ascii_digit()) => {
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str(" (os error ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A workflow file's TOML or shape error: `invalid workflow file PATH:LINE:COLUMN: what`,
/// naming the key or section, without the source excerpt the TOML parser draws.
fn workflow_parse(path: &Path, message: &str) -> String {
    let Some(toml) = TomlError::read(message) else {
        return format!(
            "invalid workflow file {}: {}",
            path.display(),
            plain(message)
        );
    };
    let what = plain(&toml.message);
    let header = toml
        .source_line
        .trim()
        .strip_prefix('[')
        .filter(|_| toml.source_line.trim_end().ends_with(']'))
        .map(|_| toml.source_line.trim());
    let body = if toml
        .message
        .contains("did not match any variant of untagged enum ExecutorSpec")
    {
        format!(
            "{} does not say how to reach the agent: give `command` (a string, with optional \
             `args`, a list of strings, and `env`, a table of strings), `http` (a URL string) \
             or `in_process = true`",
            header.unwrap_or("the agent's section")
        )
    } else if let Some(section) = header {
        format!("{section}: {what}")
    } else if toml.message.starts_with("missing field") && toml.line == 1 && toml.column == 1 {
        return format!(
            "invalid workflow file {}: {what} at the top level",
            path.display()
        );
    } else if let Some(key) = key_before(&toml.source_line, toml.column) {
        format!("`{key}`: {what}")
    } else {
        what
    };
    format!(
        "invalid workflow file {}:{}:{}: {body}",
        path.display(),
        toml.line,
        toml.column
    )
}

/// The parts of the `toml` crate's error text: position, source line, message.
struct TomlError {
    line: usize,
    column: usize,
    source_line: String,
    message: String,
}

impl TomlError {
    /// Reads `TOML parse error at line L, column C`, the excerpt (` L | text`, then the
    /// carets) and the message lines after it.
    fn read(text: &str) -> Option<Self> {
        let mut lines = text.lines();
        let first = lines.next()?.strip_prefix("TOML parse error at line ")?;
        let (line, column) = first.split_once(", column ")?;
        let (line, column) = (line.trim().parse().ok()?, column.trim().parse().ok()?);
        let mut source_line = String::new();
        let mut message = Vec::new();
        let mut after_carets = false;
        for l in lines {
            if after_carets {
                if !l.trim().is_empty() {
                    message.push(l.trim());
                }
                continue;
            }
            let Some((gutter, rest)) = l.split_once('|') else {
                continue;
            };
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            if gutter.trim().parse::<usize>().is_ok() {
                source_line = rest.to_owned();
            } else if rest.trim_start().starts_with('^') {
                after_carets = true;
            }
        }
        if message.is_empty() {
            return None;
        }
        Some(Self {
            line,
            column,
            source_line,
            message: message.join(" "),
        })
    }
}

/// The key a value at `column` (1-based, in characters) of `line` is assigned to:
/// `timeout_ms` in `timeout_ms = "5"`, `command` in `x = { command = 5 }`.
fn key_before(line: &str, column: usize) -> Option<String> {
    let prefix: String = line.chars().take(column.saturating_sub(1)).collect();
    let before_eq = &prefix[..prefix.rfind('=')?];
    let key = before_eq
        .trim_end()
        .rsplit(|c: char| c.is_whitespace() || matches!(c, '{' | ',' | '['))
        .next()?
        .trim_matches('"');
    (!key.is_empty()).then(|| key.to_owned())
}

/// `text` with serde's and the OS's phrases in user words, line by line.
pub(crate) fn plain(text: &str) -> String {
    text.split('\n')
        .map(|line| serde_phrases(&strip_os_error(line)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn serde_phrases(line: &str) -> String {
    // `policy bundle X: X:4:11: what` (the runtime naming the bundle its diagnostic names).
    if let Some(at) = line.find("policy bundle ") {
        let rest = &line[at + "policy bundle ".len()..];
        if let Some((name, after)) = rest.split_once(": ")
            && after.starts_with(name)
            && after[name.len()..].starts_with(':')
        {
            return serde_phrases(&format!("{}policy bundle {after}", &line[..at]));
        }
    }
    // The store's word for a run id, after the runtime's: `invalid run id "x": invalid
    // stream id "x": why`.
    if let Some(at) = line.find(": invalid stream id \"") {
        let rest = &line[at + ": invalid stream id \"".len()..];
        if let Some(end) = rest.find('"') {
            return serde_phrases(&format!("{}{}", &line[..at], &rest[end + 1..]));
        }
    }
    for marker in ["invalid type: ", "invalid value: "] {
        if let Some(at) = line.find(marker) {
            let rest = &line[at + marker.len()..];
            if let Some((found, expected_and_tail)) = rest.split_once(", expected ") {
                let (expected, tail) = split_tail(expected_and_tail);
                return format!(
                    "{}expected {}, found {}{tail}",
                    &line[..at],
                    expected_words(expected),
                    found_words(found)
                );
            }
        }
    }
    if let Some(at) = line.find("invalid length ") {
        let rest = &line[at + "invalid length ".len()..];
        if let Some((n, expected_and_tail)) = rest.split_once(", expected ") {
            let (expected, tail) = split_tail(expected_and_tail);
            return format!(
                "{}expected {}, found {n} item(s){tail}",
                &line[..at],
                expected_words(expected)
            );
        }
    }
    if let Some(at) = line.find("unknown field `") {
        let rest = &line[at + "unknown field ".len()..];
        let (key, known) = rest.split_once(", ").unwrap_or((rest, ""));
        let (known, tail) = split_tail(known);
        let known = if known.starts_with("there are no fields") {
            "this section takes no keys".to_owned()
        } else {
            let list = known
                .strip_prefix("expected one of ")
                .or_else(|| known.strip_prefix("expected "))
                .unwrap_or(known);
            format!("known keys: {}", list.replace('`', ""))
        };
        return format!("{}unknown key {key} ({known}){tail}", &line[..at]);
    }
    if let Some(at) = line.find("unknown variant `") {
        let rest = &line[at + "unknown variant ".len()..];
        let (value, known) = rest.split_once(", ").unwrap_or((rest, ""));
        let (known, tail) = split_tail(known);
        let list = known
            .strip_prefix("expected one of ")
            .or_else(|| known.strip_prefix("expected "))
            .unwrap_or(known);
        return format!(
            "{}{value} is not one of the accepted values ({}){tail}",
            &line[..at],
            list.replace('`', "")
        );
    }
    let mut line = line.to_owned();
    for (from, to) in [
        ("missing field `", "missing key `"),
        ("duplicate field `", "key given twice: `"),
    ] {
        line = line.replace(from, to);
    }
    if let Some(at) = line.find("data did not match any variant of untagged enum ") {
        line = format!("{}this value has none of the accepted forms", &line[..at]);
    }
    line
}

/// Splits a diagnostic's ` (at /pointer)` tail from the phrase before it.
fn split_tail(text: &str) -> (&str, &str) {
    match text.find(" (at /") {
        Some(at) => (&text[..at], &text[at..]),
        None => (text, ""),
    }
}

/// serde's `expected ...` in format words.
fn expected_words(expected: &str) -> String {
    let e = expected.trim();
    match e {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number of 0 or more".to_owned(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number".to_owned(),
        "f32" | "f64" => "a number".to_owned(),
        "a sequence" => "a list".to_owned(),
        "a map" => "a table".to_owned(),
        "a boolean" => "true or false".to_owned(),
        "a borrowed string" => "a string".to_owned(),
        "unit" => "nothing".to_owned(),
        _ if e.starts_with("struct ") || e.starts_with("a map ") => "a table".to_owned(),
        _ if e.starts_with("tuple struct ") => "a list".to_owned(),
        _ if e.starts_with("enum ") || e == "variant identifier" => {
            "one of the accepted values".to_owned()
        }
        _ if e.starts_with("a tuple of size ") => {
            format!("a list of {} items", &e["a tuple of size ".len()..])
        }
        _ => e.to_owned(),
    }
}

/// serde's description of the value found, in format words.
fn found_words(found: &str) -> String {
    let f = found.trim();
    let quoted = |prefix: &str| {
        f.strip_prefix(prefix)
            .map(|v| v.trim_matches('`').to_owned())
    };
    if let Some(n) = quoted("integer ").or_else(|| quoted("floating point ")) {
        return format!("the number {n}");
    }
    if let Some(b) = quoted("boolean ") {
        return b;
    }
    if let Some(s) = f.strip_prefix("string ") {
        return format!("the string {s}");
    }
    if let Some(c) = quoted("char ") {
        return format!("the character {c:?}");
    }
    match f {
        "sequence" => "a list".to_owned(),
        "map" => "a table".to_owned(),
        "unit value" | "unit" => "nothing".to_owned(),
        _ => f.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_phrases_become_format_words() {
        assert_eq!(
            plain("b.toml:2:6: wrong shape: invalid type: integer `5`, expected a string"),
            "b.toml:2:6: wrong shape: expected a string, found the number 5"
        );
        assert_eq!(
            plain("x: invalid value: integer `-1`, expected u32 (at /recursion/max_depth)"),
            "x: expected a whole number of 0 or more, found the number -1 (at /recursion/max_depth)"
        );
        assert_eq!(
            plain("invalid type: string \"5\", expected u64"),
            "expected a whole number of 0 or more, found the string \"5\""
        );
        assert_eq!(
            plain("invalid type: sequence, expected a string"),
            "expected a string, found a list"
        );
        assert_eq!(
            plain("unknown field `foo`, expected one of `id`, `role`"),
            "unknown key `foo` (known keys: id, role)"
        );
        assert_eq!(
            plain("unknown variant `partial`, expected one of `full`, `scoped`, `minimal`"),
            "`partial` is not one of the accepted values (full, scoped, minimal)"
        );
        assert_eq!(plain("missing field `entry`"), "missing key `entry`");
        assert_eq!(
            plain("cannot read: No such file or directory (os error 2)"),
            "cannot read: No such file or directory"
        );
        assert!(!plain("data did not match any variant of untagged enum Foo").contains("enum"));
        assert_eq!(
            plain("policy bundle p.toml: p.toml:4:11: wrong shape: missing field `id`"),
            "policy bundle p.toml:4:11: wrong shape: missing key `id`"
        );
        assert_eq!(
            plain("invalid run id \"\": invalid stream id \"\": is empty"),
            "invalid run id \"\": is empty"
        );
    }

    #[test]
    fn workflow_toml_errors_name_file_line_column_and_key() {
        let path = Path::new("wf.toml");
        let text = "TOML parse error at line 30, column 14\n   |\n30 | timeout_ms = \"5\"\n   |              ^^^\ninvalid type: string \"5\", expected u64\n";
        assert_eq!(
            workflow_parse(path, text),
            "invalid workflow file wf.toml:30:14: `timeout_ms`: expected a whole number of 0 or more, found the string \"5\""
        );
        let text = "TOML parse error at line 28, column 1\n   |\n28 | [agents.strategy]\n   | ^^^^^^^^^^^^^^^^^\ndata did not match any variant of untagged enum ExecutorSpec\n";
        let words = workflow_parse(path, text);
        assert!(
            words.starts_with("invalid workflow file wf.toml:28:1: [agents.strategy] does not say how to reach the agent"),
            "{words}"
        );
        assert!(!words.contains("ExecutorSpec"), "{words}");
        let text = "TOML parse error at line 1, column 1\n  |\n1 | name=\"x\"\n  | ^\nmissing field `entry`\n";
        assert_eq!(
            workflow_parse(path, text),
            "invalid workflow file wf.toml: missing key `entry` at the top level"
        );
        assert_eq!(
            workflow_parse(path, "something else"),
            "invalid workflow file wf.toml: something else"
        );
    }

    #[test]
    fn a_source_repeated_in_its_parent_is_said_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "cannot read x.toml: {}", self.0)
            }
        }
        impl StdError for Outer {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let io = std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(Outer(io)).context("cannot start the run");
        assert_eq!(
            error_text(&e),
            "cannot start the run: cannot read x.toml: no such file or directory"
        );
    }

    #[test]
    fn json_errors_say_line_column_and_what() {
        let e = serde_json::from_str::<serde_json::Value>("{\"a\":").unwrap_err();
        assert_eq!(
            json_error(&e),
            "line 1, column 5: the JSON text ends before its value is complete"
        );
        let e = serde_json::from_str::<serde_json::Value>("nope").unwrap_err();
        assert!(
            json_error(&e).contains("double quotes"),
            "{}",
            json_error(&e)
        );
        let e = serde_json::from_str::<serde_json::Value>("{} x").unwrap_err();
        assert_eq!(
            json_error(&e),
            "line 1, column 4: unexpected text after the JSON value"
        );
    }
}
