//! The page: one HTML document with its CSS inline and no script, no external resource
//! and no form, readable on screen (keyboard: a table of contents first, links between
//! the parts, focusable scroll areas) and printed (scroll areas unfold).
//!
//! Text from the log reaches the page only through [`Page::text`], which escapes it;
//! markup only as `&'static str` through [`Page::raw`]. So nothing an agent, a tool or a
//! person wrote can become markup: a `<script>` in a payload shows as text. The page's
//! Content-Security-Policy forbids every script and every load besides, a second wall.

use std::collections::BTreeMap;

use docket_replay::Outcome;
use serde_json::Value;

use super::dates::{date_ms, date_ns};
use super::model::{BUDGET_ROWS, Report};
use super::{ChainCheck, CheckpointCheck};

/// The page being written.
pub(crate) struct Page {
    out: String,
}

impl Page {
    pub(crate) fn new() -> Self {
        Self {
            out: String::with_capacity(64 * 1024),
        }
    }

    pub(crate) fn finish(self) -> String {
        self.out
    }

    /// Markup written by this file, never read from a log.
    fn raw(&mut self, markup: &'static str) -> &mut Self {
        self.out.push_str(markup);
        self
    }

    /// Text, escaped for an element's content and for a quoted attribute value alike.
    pub(crate) fn text(&mut self, text: &str) -> &mut Self {
        for c in text.chars() {
            match c {
                '&' => self.out.push_str("&amp;"),
                '<' => self.out.push_str("&lt;"),
                '>' => self.out.push_str("&gt;"),
                '"' => self.out.push_str("&quot;"),
                '\'' => self.out.push_str("&#39;"),
                c => self.out.push(c),
            }
        }
        self
    }

    /// A recorded reason, or that none was given (a reason recorded empty).
    fn reason(&mut self, reason: &str) -> &mut Self {
        if reason.trim().is_empty() {
            self.raw("<span class=\"none\">no reason given</span>")
        } else {
            self.text(reason)
        }
    }

    fn count(&mut self, n: u64) -> &mut Self {
        self.out.push_str(&n.to_string());
        self
    }

    /// A recorded time (ns since the epoch) as a `<time>` element.
    fn time_ns(&mut self, ns: i64) -> &mut Self {
        self.time(&date_ns(ns))
    }

    fn time_ms(&mut self, ms: i64) -> &mut Self {
        self.time(&date_ms(ms))
    }

    fn time(&mut self, date: &str) -> &mut Self {
        self.raw("<time datetime=\"")
            .text(date)
            .raw("\">")
            .text(date)
            .raw("</time>")
    }

    /// A link to event `seq` in the list of events.
    fn event(&mut self, seq: u64) -> &mut Self {
        self.raw("<a href=\"#e")
            .count(seq)
            .raw("\">")
            .count(seq)
            .raw("</a>")
    }

    /// A JSON value, pretty-printed in a scroll area that takes the keyboard focus.
    fn json(&mut self, label: &str, value: &Value) -> &mut Self {
        let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
        self.raw("<pre class=\"json\" tabindex=\"0\" aria-label=\"")
            .text(label)
            .raw("\">")
            .text(&pretty)
            .raw("</pre>")
    }

    /// A comma-separated list of names, or `none`.
    fn names(&mut self, names: &[String]) -> &mut Self {
        if names.is_empty() {
            return self.raw("<span class=\"none\">none</span>");
        }
        for (i, n) in names.iter().enumerate() {
            if i > 0 {
                self.raw(", ");
            }
            self.raw("<code>").text(n).raw("</code>");
        }
        self
    }

    fn outcome(&mut self, outcome: Outcome) -> &mut Self {
        match outcome {
            Outcome::Allowed => self.raw("<span class=\"ok\">allowed</span>"),
            Outcome::DryRunFirst => self.raw("<span class=\"wait\">dry run first</span>"),
            Outcome::NeedsApproval => self.raw("<span class=\"wait\">needs approval</span>"),
            Outcome::Denied => self.raw("<span class=\"bad\">denied</span>"),
        }
    }
}

const STYLE: &str = r#"
:root { color-scheme: light; --fg: #1b1b1b; --muted: #555; --line: #c8c8c8; --bad: #a4000f; --ok: #0b6e24; --wait: #7a4d00; --focus: #0b57d0; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); margin: 0 auto; max-width: 72rem; padding: 1rem 1.5rem 3rem; }
h1 { font-size: 1.6rem; margin: .5rem 0; } h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 2px solid var(--line); padding-bottom: .2rem; } h3 { font-size: 1.05rem; margin-bottom: .3rem; }
code, pre, .hash { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .86em; }
.hash, td code, dd code { overflow-wrap: anywhere; }
pre.json { background: #f5f5f5; border: 1px solid var(--line); padding: .5rem; max-height: 18rem; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere; margin: .3rem 0; }
table { border-collapse: collapse; width: 100%; margin: .4rem 0; }
th, td { border: 1px solid var(--line); padding: .25rem .45rem; text-align: left; vertical-align: top; }
th { background: #efefef; }
.wide { overflow-x: auto; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: .5rem 0; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
.bad { color: var(--bad); font-weight: 600; } .ok { color: var(--ok); font-weight: 600; } .wait { color: var(--wait); font-weight: 600; }
.none, .muted { color: var(--muted); }
ol.timeline { list-style: none; padding: 0; } ol.timeline > li { border-left: 4px solid var(--ok); padding: .3rem .8rem; margin: .6rem 0; }
ol.timeline > li.denied { border-left-color: var(--bad); }
ul.tree, ul.tree ul { list-style: none; padding-left: 1.4rem; } ul.tree { padding-left: 0; }
ul.tree li { margin: .4rem 0; }
.card { border: 1px solid var(--line); border-radius: 4px; padding: .5rem .8rem; margin: .6rem 0; }
nav ol { columns: 2; }
a { color: var(--focus); }
a:focus-visible, pre:focus-visible, .wide:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
figure { margin: .6rem 0; }
svg { max-width: 100%; height: auto; border: 1px solid var(--line); background: #fff; }
svg text { font: 11px system-ui, sans-serif; fill: var(--muted); }
@media print {
  body { max-width: none; padding: 0; font-size: 10.5pt; }
  nav { display: none; }
  pre.json { max-height: none; overflow: visible; }
  .wide { overflow: visible; }
  h2 { break-after: avoid; } tr, ol.timeline > li, .card { break-inside: avoid; }
  thead { display: table-header-group; }
  a { color: inherit; text-decoration: none; }
}
"#;

/// Colours and dash patterns of the budget chart's lines (a line is told apart by both,
/// so the chart reads in black and white too).
const LINES: &[(&str, &str)] = &[
    ("#0b57d0", ""),
    ("#a4000f", "6 3"),
    ("#0b6e24", "2 2"),
    ("#7a4d00", "8 3 2 3"),
    ("#6a1b9a", "1 3"),
    ("#00695c", "10 4"),
];

pub(crate) fn render(r: &Report<'_>) -> String {
    let mut p = Page::new();
    let run_id = r.run.run_id.as_str();
    p.raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
        .raw("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'\">\n")
        .raw("<meta name=\"referrer\" content=\"no-referrer\">\n")
        .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
        .raw("<meta name=\"generator\" content=\"docket export --format html\">\n")
        .raw("<title>docket run ")
        .text(run_id)
        .raw("</title>\n<style>")
        .raw(STYLE)
        .raw("</style>\n</head>\n<body>\n<main>\n");
    header(&mut p, r);
    verification(&mut p, r);
    denials(&mut p, r);
    episodes(&mut p, r);
    handoffs(&mut p, r);
    decisions(&mut p, r);
    effects(&mut p, r);
    humans(&mut p, r);
    budgets(&mut p, r);
    events(&mut p, r);
    p.raw("</main>\n</body>\n</html>\n");
    p.finish()
}

/// The table of contents, right after the run's facts, so a keyboard reaches each part
/// in a few steps.
fn contents(p: &mut Page, r: &Report<'_>) {
    p.raw("<nav aria-label=\"Sections\"><ol>")
        .raw("<li><a href=\"#verification\">Verification</a></li>")
        .raw("<li><a href=\"#denials\">Denials</a> (")
        .count(r.denials.len() as u64)
        .raw(")</li><li><a href=\"#episodes\">Episode tree</a></li>")
        .raw("<li><a href=\"#handoffs\">Handoffs</a> (")
        .count(r.handoffs.len() as u64)
        .raw(")</li><li><a href=\"#decisions\">Decisions</a> (")
        .count(r.decisions.len() as u64)
        .raw(")</li><li><a href=\"#effects\">Effects</a> (")
        .count(r.effects.len() as u64)
        .raw(")</li><li><a href=\"#humans\">Human decisions</a> (")
        .count(r.humans.len() as u64)
        .raw(")</li><li><a href=\"#budgets\">Budgets over time</a></li>")
        .raw("<li><a href=\"#events\">Events</a> (")
        .count(r.events.len() as u64)
        .raw(")</li></ol></nav>\n");
}

fn header(p: &mut Page, r: &Report<'_>) {
    let run = r.run;
    let status = r.state.status();
    p.raw("<header>\n<h1>Run <code id=\"run-id\">")
        .text(run.run_id.as_str())
        .raw("</code></h1>\n<dl class=\"facts\">")
        .raw("<dt>Workflow</dt><dd>")
        .text(&run.workflow.name)
        .raw(" (entry <code>")
        .text(run.workflow.entry.as_str())
        .raw("</code>)</dd><dt>Status</dt><dd id=\"status\">");
    let class: &'static str = match status {
        docket_decider::RunStatus::Completed => "<span class=\"ok\">",
        docket_decider::RunStatus::Blocked
        | docket_decider::RunStatus::Failed
        | docket_decider::RunStatus::Cancelled => "<span class=\"bad\">",
        _ => "<span class=\"wait\">",
    };
    p.raw(class).text(status.as_str()).raw("</span>");
    if let Some(rule) = r.state.blocked_by() {
        p.raw(" by <code>").text(rule).raw("</code>");
    }
    p.raw("</dd>");
    if let Some(reason) = r.state.stop_reason() {
        p.raw("<dt>Why it stopped</dt><dd>")
            .reason(reason)
            .raw("</dd>");
    }
    p.raw("<dt>Policy bundle</dt><dd>");
    match &r.bundle {
        Some((id, version)) => {
            p.text(id).raw(" version ").text(version).raw(" from ");
        }
        None => {
            p.raw("(its recorded text no longer compiles) from ");
        }
    }
    p.raw("<code>")
        .text(&run.bundle_source_name)
        .raw("</code><br>hash <span class=\"hash\">")
        .text(&run.bundle_hash)
        .raw("</span></dd><dt>Decider version</dt><dd>")
        .count(u64::from(r.state.decider_version()))
        .raw("</dd><dt>Started</dt><dd>")
        .time_ns(r.started_ns)
        .raw("</dd><dt>Finished</dt><dd>");
    match r.finished_ns {
        Some(ns) => {
            p.time_ns(ns);
        }
        None => {
            p.raw("<span class=\"muted\">not finished (")
                .text(status.as_str())
                .raw(")</span>");
        }
    }
    p.raw("</dd><dt>Events</dt><dd>")
        .count(r.events.len() as u64)
        .raw("</dd>");
    if let Some(f) = &run.forked_from {
        p.raw("<dt>Forked from</dt><dd>run <code>")
            .text(f.run_id.as_str())
            .raw("</code> at its event ")
            .count(f.seq)
            .raw(" (chain hash <span class=\"hash\">")
            .text(&f.hash)
            .raw("</span>)</dd>");
    }
    if let Some(s) = &run.scheduled {
        p.raw("<dt>Started by</dt><dd>schedule <code>")
            .text(&s.schedule)
            .raw("</code> (made by ")
            .text(&s.made_by)
            .raw("), its firing due ")
            .time_ms(s.due_at_ms)
            .raw("</dd>");
    }
    p.raw("</dl>\n");
    contents(p, r);
    p.raw("<h3>Input</h3>").json("the run's input", &run.input);
    if let Some(output) = r.state.output() {
        p.raw("<h3>Result</h3>").json("the run's output", output);
    }
    p.raw("</header>\n");
}

fn verification(p: &mut Page, r: &Report<'_>) {
    p.raw("<section id=\"verification\" aria-labelledby=\"verification-h\">\n<h2 id=\"verification-h\">Verification</h2>\n<dl class=\"facts\"><dt>Hash chain</dt><dd id=\"chain\">");
    match &r.verification.chain {
        ChainCheck::Sound { events } => {
            p.raw("<span class=\"ok\">sound</span>: every link and hash of events 1 to ")
                .count(*events)
                .raw(" checked when this report was made");
        }
        ChainCheck::Broken {
            verified,
            seq,
            what,
        } => {
            p.raw("<span class=\"bad\">BROKEN</span> at event ")
                .count(*seq)
                .raw(": ")
                .text(what)
                .raw(" (")
                .count(*verified)
                .raw(" events checked sound before it)");
        }
    }
    p.raw("</dd>");
    if let Some(last) = r.events.last() {
        p.raw("<dt>Head</dt><dd>event ")
            .count(last.seq)
            .raw(", hash <span class=\"hash\">")
            .text(&last.hash)
            .raw("</span></dd>");
    }
    p.raw("<dt>Signed checkpoint</dt><dd id=\"checkpoint\">");
    match &r.verification.checkpoint {
        Some(CheckpointCheck {
            note,
            outcome,
            sound,
        }) => {
            p.raw(if *sound {
                "<span class=\"ok\">checked</span>: "
            } else {
                "<span class=\"bad\">FAILED</span>: "
            })
            .text(outcome)
            .raw("<pre class=\"json\" tabindex=\"0\" aria-label=\"the signed checkpoint\">")
            .text(note)
            .raw("</pre>");
        }
        None => {
            p.raw("<span class=\"muted\">none: no signed checkpoint is kept for this run</span>");
        }
    }
    p.raw("</dd><dt>Replay</dt><dd id=\"replay\">");
    match &r.replay {
        Ok(report) => {
            p.count(report.events as u64)
                .raw(" events, ")
                .count(report.inputs as u64)
                .raw(" recorded inputs, ")
                .count(report.decisions as u64)
                .raw(" decisions: ");
            match &report.divergence {
                None => {
                    p.raw(
                        "<span class=\"ok\">every decision reproduced</span> by decider version ",
                    )
                    .count(u64::from(report.decider_version));
                }
                Some(d) => {
                    p.raw("<span class=\"bad\">DIVERGED</span> at event ")
                        .event(d.seq)
                        .raw(" (")
                        .text(d.input)
                        .raw("), error ")
                        .text(d.code)
                        .raw(": ")
                        .text(&d.why);
                }
            }
        }
        Err(why) => {
            p.raw("<span class=\"bad\">not replayable</span>: ")
                .text(why);
        }
    }
    p.raw("</dd></dl>\n</section>\n");
}

fn denials(p: &mut Page, r: &Report<'_>) {
    p.raw("<section id=\"denials\" aria-labelledby=\"denials-h\">\n<h2 id=\"denials-h\">Denials</h2>\n");
    if r.denials.is_empty() {
        p.raw("<p class=\"none\">Nothing was denied in this run.</p>\n</section>\n");
        return;
    }
    p.raw("<p>Every handoff, spawn or other episode action, tool call, effect, domain write or outside event refused, and every policy decision denied, in log order.</p>\n");
    decision_table(p, &r.denials, false);
    p.raw("</section>\n");
}

fn decision_table(p: &mut Page, rows: &[super::model::Decision<'_>], outcome: bool) {
    p.raw("<div class=\"wide\" tabindex=\"0\"><table>\n<thead><tr><th scope=\"col\">Event</th><th scope=\"col\">Time</th><th scope=\"col\">Kind</th><th scope=\"col\">What</th>");
    if outcome {
        p.raw("<th scope=\"col\">Outcome</th>");
    }
    p.raw("<th scope=\"col\">Rule</th><th scope=\"col\">Reason</th></tr></thead>\n<tbody>\n");
    for d in rows {
        p.raw("<tr><td>")
            .event(d.seq)
            .raw("</td><td>")
            .time_ns(d.at_ns)
            .raw("</td><td>")
            .text(d.decided.area.as_str())
            .raw("</td><td>")
            .text(&d.decided.what)
            .raw("</td>");
        if outcome {
            p.raw("<td>").outcome(d.decided.outcome).raw("</td>");
        }
        p.raw("<td>");
        if d.decided.rule.is_empty() {
            p.raw("<span class=\"none\">—</span>");
        } else {
            p.raw("<code>").text(&d.decided.rule).raw("</code>");
        }
        p.raw("</td><td>");
        match d.reason {
            Some(reason) => p.reason(reason),
            None => p.raw("<span class=\"none\">—</span>"),
        };
        p.raw("</td></tr>\n");
    }
    p.raw("</tbody></table></div>\n");
}

fn episodes(p: &mut Page, r: &Report<'_>) {
    p.raw("<section id=\"episodes\" aria-labelledby=\"episodes-h\">\n<h2 id=\"episodes-h\">Episode tree</h2>\n");
    if r.episodes.is_empty() {
        p.raw("<p class=\"none\">No episode was started.</p>\n</section>\n");
        return;
    }
    let mut children: BTreeMap<Option<&str>, Vec<usize>> = BTreeMap::new();
    for (i, e) in r.episodes.iter().enumerate() {
        children.entry(e.parent.as_deref()).or_default().push(i);
    }
    fn branch(
        p: &mut Page,
        r: &Report<'_>,
        children: &BTreeMap<Option<&str>, Vec<usize>>,
        parent: Option<&str>,
        top: bool,
    ) {
        let Some(list) = children.get(&parent) else {
            return;
        };
        p.raw(if top { "<ul class=\"tree\">" } else { "<ul>" });
        for &i in list {
            let e = &r.episodes[i];
            p.raw("<li><strong><code>")
                .text(&e.episode_id)
                .raw("</code></strong> ")
                .text(&e.episode_type)
                .raw(", agent <code>")
                .text(&e.agent)
                .raw("</code>, depth ")
                .count(u64::from(e.depth))
                .raw(": ")
                .text(e.phase);
            if let Some(c) = e.stop_condition {
                p.raw(" (").text(c).raw(")");
            }
            if !e.budgets.is_empty() {
                p.raw("<table class=\"budget\"><thead><tr><th scope=\"col\">Budget</th><th scope=\"col\">Used</th><th scope=\"col\">Limit</th><th scope=\"col\">Left</th></tr></thead><tbody>");
                for b in &e.budgets {
                    p.raw("<tr><th scope=\"row\">")
                        .text(&b.dimension)
                        .raw("</th><td>")
                        .count(b.used)
                        .raw("</td><td>")
                        .count(b.limit)
                        .raw("</td><td>")
                        .count(b.left)
                        .raw("</td></tr>");
                }
                p.raw("</tbody></table>");
            }
            branch(p, r, children, Some(&e.episode_id), false);
            p.raw("</li>");
        }
        p.raw("</ul>\n");
    }
    // Roots are the episodes without a parent, or whose parent is not in the tree.
    let known: Vec<&str> = r.episodes.iter().map(|e| e.episode_id.as_str()).collect();
    let mut roots: BTreeMap<Option<&str>, Vec<usize>> = children.clone();
    let orphans: Vec<usize> = r
        .episodes
        .iter()
        .enumerate()
        .filter(|(_, e)| e.parent.as_deref().is_some_and(|p| !known.contains(&p)))
        .map(|(i, _)| i)
        .collect();
    roots.entry(None).or_default().extend(orphans);
    branch(p, r, &roots, None, true);
    p.raw("</section>\n");
}

fn handoffs(p: &mut Page, r: &Report<'_>) {
    p.raw("<section id=\"handoffs\" aria-labelledby=\"handoffs-h\">\n<h2 id=\"handoffs-h\">Handoffs</h2>\n");
    if r.handoffs.is_empty() {
        p.raw("<p class=\"none\">No content crossed between agents.</p>\n</section>\n");
        return;
    }
    p.raw("<p>Every handoff, and content crossing by another rule (a spawn's inputs, a child's result, a domain read), in log order: who handed what to whom, the deciding rule, the fields that crossed and those withheld, and what the receiver was given.</p>\n<ol class=\"timeline\">\n");
    for h in &r.handoffs {
        p.raw(if h.allowed {
            "<li>"
        } else {
            "<li class=\"denied\">"
        })
        .raw("<h3>Event ")
        .event(h.seq)
        .raw(": <code>")
        .text(h.from)
        .raw("</code> → <code>")
        .text(h.to)
        .raw("</code> (")
        .text(h.output_type)
        .raw(if h.context {
            ", read-only context) "
        } else {
            ") "
        })
        .raw(if h.allowed {
            "<span class=\"ok\">allowed</span>"
        } else {
            "<span class=\"bad\">DENIED</span>"
        })
        .raw("</h3><dl class=\"facts\"><dt>When</dt><dd>")
        .time_ns(h.at_ns)
        .raw("</dd><dt>Rule</dt><dd><code>")
        .text(&h.rule)
        .raw("</code></dd><dt>Reason</dt><dd>")
        .reason(h.reason)
        .raw("</dd>");
        if let Some(mode) = &h.mode {
            p.raw("<dt>Scoping</dt><dd>")
                .text(mode)
                .raw("</dd><dt>Crossed</dt><dd>")
                .names(h.crossed)
                .raw("</dd><dt>Withheld</dt><dd>")
                .names(h.withheld);
            if h.every_field_removed {
                p.raw(" <span class=\"bad\">(every field removed: the receiver got none of the payload)</span>");
            }
            p.raw("</dd>");
        } else {
            p.raw("<dt>Crossed</dt><dd><span class=\"none\">nothing: the handoff was denied</span></dd>");
        }
        p.raw("</dl>");
        if let Some(delivered) = h.delivered {
            p.json("what the receiver was given", delivered);
        }
        p.raw("</li>\n");
    }
    p.raw("</ol>\n</section>\n");
}

fn decisions(p: &mut Page, r: &Report<'_>) {
    p.raw("<section id=\"decisions\" aria-labelledby=\"decisions-h\">\n<h2 id=\"decisions-h\">Decisions</h2>\n<p>Every decision the log records, classed as <code>docket replay --policies</code> classes them, with its outcome and the rule that decided it.</p>\n");
    decision_table(p, &r.decisions, true);
    p.raw("</section>\n");
}

fn effects(p: &mut Page, r: &Report<'_>) {
    p.raw("<section id=\"effects\" aria-labelledby=\"effects-h\">\n<h2 id=\"effects-h\">Effects</h2>\n");
    if r.effects.is_empty() {
        p.raw("<p class=\"none\">No side effect was requested.</p>\n</section>\n");
        return;
    }
    for e in &r.effects {
        p.raw("<div class=\"card\"><h3><code>")
            .text(&e.effect_id)
            .raw("</code>: ")
            .text(&e.kind)
            .raw(" in lane ")
            .text(&e.lane)
            .raw(", ")
            .text(e.phase)
            .raw("</h3><dl class=\"facts\"><dt>Idempotency key</dt><dd><code>")
            .text(&e.key)
            .raw("</code></dd><dt>Asked by</dt><dd><code>")
            .text(&e.agent)
            .raw("</code>");
        if let Some(seq) = e.requested_seq {
            p.raw(" at event ").event(seq);
        }
        p.raw("</dd><dt>Dry run</dt><dd>");
        match &e.dry_run {
            Some(d) => p.text(d),
            None => p.raw("<span class=\"none\">none</span>"),
        };
        p.raw("</dd><dt>Human approval</dt><dd>")
            .raw(if e.human_approved {
                "approved (see Human decisions)"
            } else {
                "<span class=\"none\">none</span>"
            })
            .raw("</dd>");
        if let Some((rule, reason)) = &e.outcome {
            p.raw("<dt>Refused or failed</dt><dd><code>")
                .text(rule)
                .raw("</code>: ")
                .reason(reason)
                .raw("</dd>");
        }
        p.raw("<dt>Receipt</dt><dd>");
        match (&e.receipt, &e.applied) {
            (Some(receipt), applied) => {
                if let Some((seq, at_ms, reused)) = applied {
                    p.raw("applied at event ")
                        .event(*seq)
                        .raw(", ")
                        .time_ms(*at_ms);
                    if let Some(from) = reused {
                        p.raw(", the receipt of <code>")
                            .text(from)
                            .raw("</code> reused");
                    }
                }
                p.json("the effect's receipt", receipt);
            }
            (None, _) => {
                p.raw("<span class=\"none\">none</span>");
            }
        }
        for (which, screenshot, dom) in &e.drift {
            p.raw("</dd><dt>Drift evidence, ")
                .text(which)
                .raw("</dt><dd>screenshot SHA-256 <code>")
                .text(screenshot)
                .raw("</code>, DOM SHA-256 <code>")
                .text(dom)
                .raw("</code>");
        }
        p.raw("</dd><dt>Parameters</dt><dd>")
            .json("the effect's parameters", &e.params)
            .raw("</dd></dl></div>\n");
    }
    p.raw("</section>\n");
}

fn humans(p: &mut Page, r: &Report<'_>) {
    p.raw("<section id=\"humans\" aria-labelledby=\"humans-h\">\n<h2 id=\"humans-h\">Human decisions</h2>\n");
    if r.humans.is_empty() {
        p.raw("<p class=\"none\">No person decided anything in this run.</p>\n");
    } else {
        p.raw("<div class=\"wide\" tabindex=\"0\"><table>\n<thead><tr><th scope=\"col\">Event</th><th scope=\"col\">When</th><th scope=\"col\">Who</th><th scope=\"col\">Decision</th><th scope=\"col\">On</th><th scope=\"col\">Why</th><th scope=\"col\">Answer</th></tr></thead>\n<tbody>\n");
        for h in &r.humans {
            p.raw("<tr><td>")
                .event(h.seq)
                .raw("</td><td>")
                .time_ms(h.at_ms)
                .raw("</td><td>")
                .text(h.by)
                .raw("</td><td>")
                .text(&h.decision)
                .raw("</td><td>")
                .text(&h.asked)
                .raw("</td><td>")
                .reason(h.reason)
                .raw("</td><td>")
                .text(h.answer.as_deref().unwrap_or(""))
                .raw("</td></tr>\n");
        }
        p.raw("</tbody></table></div>\n");
    }
    let open: Vec<_> = r.state.open_tickets().collect();
    if !open.is_empty() {
        p.raw("<h3>Waiting for a person</h3><ul>");
        for (id, t) in open {
            p.raw("<li><code>")
                .text(id.as_str())
                .raw("</code>: ")
                .reason(&t.reason)
                .raw("</li>");
        }
        p.raw("</ul>\n");
    }
    p.raw("</section>\n");
}

fn budgets(p: &mut Page, r: &Report<'_>) {
    let b = &r.budgets;
    p.raw("<section id=\"budgets\" aria-labelledby=\"budgets-h\">\n<h2 id=\"budgets-h\">Budgets over time</h2>\n");
    if b.columns.is_empty() {
        p.raw("<p class=\"none\">No episode had a budget.</p>\n</section>\n");
        return;
    }
    p.raw("<p>Each episode's budget used, per dimension, after every event that changed it.");
    if b.changes > b.rows.len() {
        p.raw(" The run changed its budgets ")
            .count(b.changes as u64)
            .raw(" times; ")
            .count(BUDGET_ROWS as u64)
            .raw(" of them, evenly spaced and the last included, are shown.");
    }
    p.raw("</p>\n");
    let mut dimensions: Vec<&str> = b.columns.iter().map(|(_, d, _)| d.as_str()).collect();
    dimensions.sort_unstable();
    dimensions.dedup();
    for (n, dim) in dimensions.iter().enumerate() {
        chart(p, r, n, dim);
    }
    p.raw("<div class=\"wide\" tabindex=\"0\"><table>\n<caption>Budget used after each event that changed it (used of limit)</caption>\n<thead><tr><th scope=\"col\">Event</th><th scope=\"col\">Time</th>");
    for (episode, dim, limit) in &b.columns {
        p.raw("<th scope=\"col\">")
            .text(episode)
            .raw(" ")
            .text(dim)
            .raw(" (of ")
            .count(*limit)
            .raw(")</th>");
    }
    p.raw("</tr></thead>\n<tbody>\n");
    for (seq, at, used) in &b.rows {
        p.raw("<tr><td>")
            .event(*seq)
            .raw("</td><td>")
            .time_ns(*at)
            .raw("</td>");
        for u in used {
            match u {
                Some(u) => p.raw("<td>").count(*u).raw("</td>"),
                None => p.raw("<td class=\"none\">—</td>"),
            };
        }
        p.raw("</tr>\n");
    }
    p.raw("</tbody></table></div>\n</section>\n");
}

/// Basis points (1/100 of a percent) of `limit` that `used` is.
fn basis_points(used: u64, limit: u64) -> u64 {
    if limit == 0 {
        return 0;
    }
    u64::try_from(u128::from(used.min(limit)) * 10_000 / u128::from(limit)).unwrap_or(10_000)
}

/// The smallest of 1, 2, 5, 10, 20, 50... basis points at or above `bp` (at most 100%).
fn ceiling(bp: u64) -> u64 {
    let mut step = 1;
    loop {
        for m in [1, 2, 5] {
            if m * step >= bp {
                return (m * step).min(10_000);
            }
        }
        step *= 10;
    }
}

/// Basis points as a percentage (`25%`, `0.5%`, `0.01%`).
fn percent(bp: u64) -> String {
    let (whole, frac) = (bp / 100, bp % 100);
    match frac {
        0 => format!("{whole}%"),
        f if f % 10 == 0 => format!("{whole}.{}%", f / 10),
        f => format!("{whole}.{f:02}%"),
    }
}

/// The chart of one budget dimension: the share of its limit each episode used, by
/// event, its scale up to the largest share used (so a run that used 0.03% of a budget
/// still shows its shape), each line told apart by colour and dash.
fn chart(p: &mut Page, r: &Report<'_>, n: usize, dim: &str) {
    let b = &r.budgets;
    let columns: Vec<(usize, &str, u64)> = b
        .columns
        .iter()
        .enumerate()
        .filter(|(_, (_, d, limit))| d == dim && *limit > 0)
        .map(|(c, (episode, _, limit))| (c, episode.as_str(), *limit))
        .collect();
    let top_bp = columns
        .iter()
        .flat_map(|&(c, _, limit)| {
            b.rows
                .iter()
                .filter_map(move |(_, _, used)| used[c].map(|u| basis_points(u, limit)))
        })
        .max()
        .unwrap_or(0);
    if top_bp == 0 {
        p.raw("<p><strong>")
            .text(dim)
            .raw("</strong>: none used by any episode.</p>\n");
        return;
    }
    let scale = ceiling(top_bp);
    let last_seq = r.events.last().map_or(2, |e| e.seq).max(2);
    // The plot: x from 40 to 630 (event 1 to the last), y from 155 (0) up to 10 (`scale`).
    let (left, width, bottom, height) = (40u64, 590u64, 155u64, 145u64);
    p.raw("<figure><svg viewBox=\"0 0 640 180\" width=\"640\" height=\"180\" role=\"img\" aria-labelledby=\"chart-")
        .count(n as u64)
        .raw("\"><title id=\"chart-")
        .count(n as u64)
        .raw("\">")
        .text(dim)
        .raw(" used by each episode, as a share of its limit (0 to ")
        .text(&percent(scale))
        .raw("), by event</title>")
        .raw("<line x1=\"40\" y1=\"10\" x2=\"40\" y2=\"155\" stroke=\"#888\"/><line x1=\"40\" y1=\"155\" x2=\"630\" y2=\"155\" stroke=\"#888\"/>")
        .raw("<text x=\"2\" y=\"14\">")
        .text(&percent(scale))
        .raw("</text><text x=\"14\" y=\"158\">0%</text><text x=\"40\" y=\"172\">event 1</text><text x=\"560\" y=\"172\">event ")
        .count(last_seq)
        .raw("</text>");
    for (k, &(c, _, limit)) in columns.iter().enumerate() {
        let (colour, dash) = LINES[k % LINES.len()];
        // A step line: a value holds until the event that changes it, and to the end.
        let mut points = String::new();
        let mut held: Option<u64> = None;
        for (seq, _, used) in &b.rows {
            let Some(used) = used[c] else { continue };
            let x = left + seq.saturating_sub(1).min(last_seq - 1) * width / (last_seq - 1);
            let y = bottom - basis_points(used, limit).min(scale) * height / scale;
            if let Some(before) = held {
                points.push_str(&format!("{x},{before} "));
            }
            points.push_str(&format!("{x},{y} "));
            held = Some(y);
        }
        if let Some(y) = held {
            points.push_str(&format!("{},{y}", left + width));
        }
        p.raw("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"")
            .raw(colour)
            .raw("\" stroke-dasharray=\"")
            .raw(dash)
            .raw("\" points=\"")
            .text(points.trim_end())
            .raw("\"/>");
    }
    p.raw("</svg><figcaption><strong>")
        .text(dim)
        .raw("</strong>: ");
    for (k, &(_, episode, limit)) in columns.iter().enumerate() {
        if k > 0 {
            p.raw("; ");
        }
        let (colour, dash) = LINES[k % LINES.len()];
        p.raw("<svg width=\"28\" height=\"8\" aria-hidden=\"true\" style=\"border:0\"><line x1=\"0\" y1=\"4\" x2=\"28\" y2=\"4\" stroke-width=\"2\" stroke=\"")
            .raw(colour)
            .raw("\" stroke-dasharray=\"")
            .raw(dash)
            .raw("\"/></svg> <code>")
            .text(episode)
            .raw("</code> (limit ")
            .count(limit)
            .raw(")");
    }
    p.raw("</figcaption></figure>\n");
}

fn events(p: &mut Page, r: &Report<'_>) {
    p.raw("<section id=\"events\" aria-labelledby=\"events-h\">\n<h2 id=\"events-h\">Events</h2>\n<p>The run's log: each event's sequence, recorded time, kind and hash in the chain (<code>docket events RUN --json</code> prints them whole).</p>\n<div class=\"wide\" tabindex=\"0\"><table>\n<thead><tr><th scope=\"col\">Event</th><th scope=\"col\">Time</th><th scope=\"col\">Kind</th><th scope=\"col\">Hash</th></tr></thead>\n<tbody>\n");
    for e in r.events {
        p.raw("<tr id=\"e")
            .count(e.seq)
            .raw("\"><td>")
            .count(e.seq)
            .raw("</td><td>")
            .time_ns(e.recorded_at_ns)
            .raw("</td><td>")
            .text(e.event.kind())
            .raw("</td><td class=\"hash\">")
            .text(&e.hash)
            .raw("</td></tr>\n");
    }
    p.raw("</tbody></table></div>\n</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_scales_round_up_to_1_2_5_steps_and_read_as_percentages() {
        assert_eq!(basis_points(907, 3_600_000), 2);
        assert_eq!(basis_points(5, 0), 0);
        assert_eq!(basis_points(2_000, 1_000), 10_000);
        assert_eq!(basis_points(u64::MAX, u64::MAX), 10_000);
        assert_eq!(
            [1, 2, 3, 7, 11, 2_400, 6_000, 10_000].map(ceiling),
            [1, 2, 5, 10, 20, 5_000, 10_000, 10_000]
        );
        assert_eq!(
            [1, 50, 500, 2_500, 10_000].map(percent),
            ["0.01%", "0.5%", "5%", "25%", "100%"]
        );
    }
}
