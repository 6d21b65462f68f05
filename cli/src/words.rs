//! The words the CLI prints for values of the library crates: enum variants by the names
//! users write in bundles and read in `docs/events.md` (never Rust's `Debug` names), epoch
//! times as RFC 3339 dates, and whether stderr may carry colour.

use std::io::IsTerminal as _;

use serde::Serialize;

/// The name of a unit enum variant as it is serialised (the bundle format's and the event
/// log's word: `applied`, `not_applicable`, `needs_approval`, `dry_run_passed`,
/// `REVIEW_REQUIRED`...). Anything that does not serialise to a string is shown as JSON.
pub(crate) fn word<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

/// A reason as a person reads it: a reason recorded empty says so, never a dangling colon.
pub(crate) fn reason(text: &str) -> &str {
    if text.trim().is_empty() {
        "no reason given"
    } else {
        text
    }
}

/// A JSON value in at most `max` characters, for one line about an event.
pub(crate) fn json_preview(value: &serde_json::Value, max: usize) -> String {
    let text = value.to_string();
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// A decision's input kind, as `policy explain` and `policy diff` describe it.
pub(crate) fn input_kind(input: docket_policies::InputKind) -> &'static str {
    match input {
        docket_policies::InputKind::Decision => "decision input",
        docket_policies::InputKind::Context => "read-only context",
    }
}

// Dates are written as the HTML report writes them (RFC 3339 UTC, to the millisecond).
pub(crate) use docket_evidence::{date_ms, date_ns};

/// Whether text written to stderr may carry ANSI colour: only on a terminal, and only
/// when `NO_COLOR` is unset or empty (<https://no-color.org>).
pub(crate) fn stderr_colour() -> bool {
    colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

fn colour(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_policies::{StepOutcome, Verdict};

    #[test]
    fn enum_words_are_their_serialised_names() {
        assert_eq!(word(&StepOutcome::NotApplicable), "not_applicable");
        assert_eq!(word(&Verdict::NeedsApproval), "needs_approval");
        assert_eq!(
            word(&docket_decider::ReadyBecause::DryRunPassed),
            "dry_run_passed"
        );
        assert_eq!(
            word(&docket_decider::RiskVerdict::ReviewRequired),
            "REVIEW_REQUIRED"
        );
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))));
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None));
    }
}
