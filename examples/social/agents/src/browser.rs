//! The browser lane's executor (docs/effect-protocol.md#browser-lanes): replies posted by
//! "driving" the platform's comment page rather than its API. There is no browser here:
//! the pages are the static HTML files of `examples/social/pages/`, compiled into this
//! program so it finds them wherever docket is started from, and driving one means
//! checking that the selectors the reply needs each match exactly one element, then
//! sending the reply to the outbox (the real target) or nowhere (the sandbox).
//!
//! Drift evidence: `dom_sha256` is the SHA-256 of the page's HTML with each run of
//! whitespace made one space; `screenshot_sha256` is not of a screenshot (nothing renders
//! the page) but of its visible text: the body's text outside tags, whitespace collapsed,
//! a deterministic stand-in for what a screenshot would show.

use std::io::{BufRead, Write};

use docket_protocol::{
    DriftEvidence, DryRunReport, EffectAnswer, EffectCall, EffectOp, EffectReceipt, EffectTarget,
    UNSTABLE_SELECTORS,
};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::outbox::{Outbox, OutboxError, answer_effect, serve_lines};

/// The pages, by name: `NAME` is the real site's, `NAME.sandbox` its sandbox copy.
const PAGES: &[(&str, &str)] = &[
    ("thread", include_str!("../../pages/thread.html")),
    (
        "thread.sandbox",
        include_str!("../../pages/thread.sandbox.html"),
    ),
    (
        "thread-redesign",
        include_str!("../../pages/thread-redesign.html"),
    ),
    (
        "thread-redesign.sandbox",
        include_str!("../../pages/thread-redesign.sandbox.html"),
    ),
];

/// The elements a reply needs, by their `data-testid`: the text box and the button.
const SELECTORS: &[&str] = &["reply-box", "reply-submit"];

/// The page a call names (`params.page`, default `thread`), on its target.
fn page_name(call: &EffectCall, target: EffectTarget) -> String {
    let page = call.request.params["page"].as_str().unwrap_or("thread");
    match target {
        EffectTarget::Sandbox => format!("{page}.sandbox"),
        EffectTarget::Live => page.to_owned(),
    }
}

fn page(name: &str) -> Option<&'static str> {
    PAGES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, html)| *html)
}

/// The selectors that do not match exactly one element of `html`, each with its count.
#[must_use]
pub fn unstable_selectors(html: &str) -> Vec<String> {
    SELECTORS
        .iter()
        .filter_map(|id| {
            let n = html.matches(&format!("data-testid=\"{id}\"")).count();
            (n != 1).then(|| {
                let what = if n == 0 {
                    "no element".to_owned()
                } else {
                    format!("{n} elements")
                };
                format!("[data-testid={id}] matches {what}")
            })
        })
        .collect()
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The body's text outside tags, whitespace collapsed: what a screenshot would show.
#[must_use]
pub fn visible_text(html: &str) -> String {
    let body = html.find("<body").map_or(html, |at| &html[at..]);
    let mut text = String::new();
    let mut in_tag = false;
    for c in body.chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    collapse(&text)
}

/// The drift evidence of a page (see the module's documentation for what each hashes).
#[must_use]
pub fn drift_evidence(html: &str) -> DriftEvidence {
    DriftEvidence {
        screenshot_sha256: sha256_hex(&visible_text(html)),
        dom_sha256: sha256_hex(&collapse(html)),
    }
}

/// The answer line to one call on the browser lane.
///
/// # Errors
/// [`OutboxError::File`] when the outbox cannot be used; the caller exits without
/// answering, so docket asks `verify` rather than trusting a guess.
pub fn answer_browser(outbox: &Outbox, call: &EffectCall) -> Result<String, OutboxError> {
    let id = call.request.effect_id.to_string();
    let target = call.request.target.unwrap_or(EffectTarget::Live);
    let name = page_name(call, target);
    let Some(html) = page(&name) else {
        let message = format!("no page `{name}` on the platform");
        return Ok(match call.op {
            EffectOp::DryRun => serde_json::to_string(&EffectAnswer::ok(
                id,
                DryRunReport {
                    ok: false,
                    preview: json!({ "page": name }),
                    message: Some(message),
                },
            )),
            _ => serde_json::to_string(&EffectAnswer::<EffectReceipt>::failed(
                id,
                "PAGE_NOT_FOUND",
                message,
            )),
        }
        .unwrap_or_default());
    };
    if call.op != EffectOp::Execute {
        // The dry run checks the message, verify reads the outbox: as on the API lane.
        return answer_effect(outbox, call);
    }
    let unstable = unstable_selectors(html);
    if !unstable.is_empty() {
        return Ok(
            serde_json::to_string(&EffectAnswer::<EffectReceipt>::failed(
                id,
                UNSTABLE_SELECTORS,
                format!("{} on page {name}", unstable.join(", ")),
            ))
            .unwrap_or_default(),
        );
    }
    let result = match target {
        EffectTarget::Sandbox => json!({
            "sandbox": true,
            "page": name,
            "would_post": call.request.params["text"],
        }),
        EffectTarget::Live => outbox.send(call)?,
    };
    Ok(serde_json::to_string(&EffectAnswer::ok(
        id,
        EffectReceipt {
            result,
            drift: Some(drift_evidence(html)),
        },
    ))
    .unwrap_or_default())
}

/// Serves the effect protocol for the browser lane on `input`/`output` until `input` ends.
///
/// # Errors
/// [`OutboxError`]: I/O, a line that is not a call, an outbox that cannot be used.
pub fn serve_browser(
    outbox: &Outbox,
    input: impl BufRead,
    output: impl Write,
) -> Result<(), OutboxError> {
    serve_lines(input, output, |line| {
        let call: EffectCall = serde_json::from_str(line).map_err(OutboxError::BadCall)?;
        answer_browser(outbox, &call)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn call(target: &str, page: &str) -> EffectCall {
        serde_json::from_value(json!({
            "op": "execute",
            "request": { "run_id": "run-1", "episode_id": "ep-1", "effect_id": "run-1/effect-1",
                         "kind": "comment", "lane": "browser", "idempotency_key": "comment:e1",
                         "params": {"page": page, "text": "thanks"},
                         "attempt": 1, "timeout_ms": 1000, "target": target }
        }))
        .expect("a call")
    }

    fn answer(outbox: &Outbox, call: &EffectCall) -> Value {
        serde_json::from_str(&answer_browser(outbox, call).expect("answers")).expect("JSON")
    }

    #[test]
    fn the_sandbox_posts_nothing_and_the_real_target_posts_once_each_with_evidence() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outbox = Outbox::at(dir.path().join("outbox.jsonl"));
        let sandbox = answer(&outbox, &call("sandbox", "thread"));
        assert_eq!(sandbox["result"]["result"]["sandbox"], true, "{sandbox}");
        assert!(outbox.records().expect("read").is_empty());
        let live = answer(&outbox, &call("live", "thread"));
        assert_eq!(live["result"]["result"]["post_id"], "comment-1", "{live}");
        assert_eq!(outbox.records().expect("read").len(), 1);
        // Each page has its own evidence, the same every time it is read.
        let evidence = |a: &Value| a["result"]["drift"].clone();
        assert_ne!(evidence(&sandbox), evidence(&live));
        assert_eq!(
            evidence(&live),
            serde_json::to_value(drift_evidence(page("thread").expect("page"))).expect("JSON")
        );
        let drift: DriftEvidence = serde_json::from_value(evidence(&live)).expect("drift evidence");
        assert_eq!(drift.problem(), None);
    }

    #[test]
    fn a_duplicated_selector_is_reported_unstable_and_nothing_is_posted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outbox = Outbox::at(dir.path().join("outbox.jsonl"));
        for target in ["sandbox", "live"] {
            let a = answer(&outbox, &call(target, "thread-redesign"));
            assert_eq!(a["error"]["code"], UNSTABLE_SELECTORS, "{a}");
            assert!(
                a["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("[data-testid=reply-submit] matches 2 elements")),
                "{a}"
            );
        }
        assert!(outbox.records().expect("read").is_empty());
        assert_eq!(
            unstable_selectors(page("thread").expect("page")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_visible_text_leaves_out_tags_and_the_head() {
        let text = visible_text(page("thread").expect("page"));
        assert!(
            text.starts_with("The spring creator cohort opens on launch day"),
            "{text}"
        );
        assert!(
            !text.contains("data-testid") && !text.contains("<title>"),
            "{text}"
        );
    }
}
