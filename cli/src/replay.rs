//! `docket replay`: forensic replay of recorded runs (docs/replay.md), on the replay
//! crate; the runtime only reads the logs.

use std::fmt::Write as _;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use docket_app::Store;
use docket_decider::{RunEvent, RunId};
use docket_policies::{Format, PolicyBundle};
use docket_replay::{
    ChangeKind, DecisionArea, ReplayReport, WhatIf, point_in, what_if_with_shredded,
};
use docket_runtime::Runtime;
use serde_json::json;

use crate::command::{EXIT_COMPLETED, EXIT_FAILED};

/// Characters of a run's output the text report shows.
const OUTPUT_SHOWN: usize = 160;

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// The bundle a what-if decides under, with its text (recorded in the re-decided run).
pub(crate) struct NewPolicies {
    pub(crate) bundle: PolicyBundle,
    pub(crate) source: String,
    pub(crate) name: String,
}

impl NewPolicies {
    pub(crate) fn load(path: &Path) -> anyhow::Result<Self> {
        let name = path.display().to_string();
        let source = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the bundle {name}"))?;
        let format = Format::from_name(&name).unwrap_or(Format::Toml);
        let bundle = docket_policies::parse(&source, &name, format)?;
        Ok(Self {
            bundle,
            source,
            name,
        })
    }
}

/// Replays `run`, or every run with `all` (under `new` for a what-if); exit 1 when a
/// replay diverges.
pub(crate) async fn execute(
    rt: &Runtime<Store>,
    run: Option<&RunId>,
    all: bool,
    new: Option<&NewPolicies>,
    json: bool,
    out: &mut String,
) -> anyhow::Result<u8> {
    let runs: Vec<RunId> = match run {
        Some(run) if !all => vec![run.clone()],
        _ => rt
            .run_summaries()
            .await?
            .into_iter()
            .map(|s| s.run_id)
            .collect(),
    };
    if let Some(new) = new {
        let mut affected = 0;
        // Per deciding rule under the new bundle: runs and decisions it changes.
        let mut per_rule: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        // Per kind of decision: runs, and stricter / looser / changed decisions.
        let mut per_area: BTreeMap<DecisionArea, (usize, [usize; 3])> = BTreeMap::new();
        for run in &runs {
            let (events, shredded) = split_shredded(rt.events(run).await?);
            let report =
                what_if_with_shredded(&events, &shredded, &new.bundle, &new.source, &new.name)
                    .map_err(|e| anyhow::anyhow!("run {run}: {e}"))?;
            affected += usize::from(!report.unchanged());
            for (area, counts) in report.by_area() {
                let entry = per_area.entry(area).or_default();
                entry.0 += 1;
                for (total, n) in entry.1.iter_mut().zip(counts) {
                    *total += n;
                }
            }
            let mut rules: Vec<&str> = Vec::new();
            // Steps that name no rule of their own (a call, a ticket) count per kind only.
            for change in report.changes.iter().filter(|c| !c.rule_after.is_empty()) {
                let after = change.rule_after.as_str();
                let entry = per_rule.entry(after.to_owned()).or_default();
                entry.1 += 1;
                if !rules.contains(&after) {
                    rules.push(after);
                    entry.0 += 1;
                }
            }
            if json {
                outln!(
                    out,
                    "{}",
                    serde_json::to_string(&report).unwrap_or_default()
                );
            } else {
                what_if_text(out, &report, &new.name);
            }
        }
        if all && !json {
            outln!(
                out,
                "{} runs re-decided under {}: {affected} would change",
                runs.len(),
                new.name
            );
            for (area, (runs, [stricter, looser, changed])) in &per_area {
                outln!(
                    out,
                    "  {}: {stricter} stricter, {looser} looser, {changed} changed in {runs} runs",
                    area.as_str()
                );
            }
            for (rule, (runs, decisions)) in &per_rule {
                outln!(out, "  rule {rule}: {decisions} decisions in {runs} runs");
            }
        } else if all {
            // The summary, as the last line after one report per run.
            let areas: BTreeMap<&str, serde_json::Value> = per_area
                .iter()
                .map(|(area, (runs, [stricter, looser, changed]))| {
                    (
                        area.as_str(),
                        json!({"runs": runs, "stricter": stricter, "looser": looser, "changed": changed}),
                    )
                })
                .collect();
            let rules: BTreeMap<&str, serde_json::Value> = per_rule
                .iter()
                .map(|(rule, (runs, decisions))| {
                    (rule.as_str(), json!({"runs": runs, "decisions": decisions}))
                })
                .collect();
            outln!(
                out,
                "{}",
                json!({"summary": {
                    "runs": runs.len(), "would_change": affected, "bundle": new.name,
                    "per_area": areas, "per_rule": rules,
                }})
            );
        }
        return Ok(EXIT_COMPLETED);
    }
    let mut diverged = 0;
    for run in &runs {
        let (events, shredded) = split_shredded(rt.events(run).await?);
        let report = crate::progress::replay_shown(&events, &shredded)
            .map_err(|e| anyhow::anyhow!("run {run}: {e}"))?;
        diverged += usize::from(!report.reproduced());
        if json {
            outln!(
                out,
                "{}",
                serde_json::to_string(&report).unwrap_or_default()
            );
        } else if all {
            outln!(out, "{}", one_line(&report));
        } else {
            text(out, &report);
        }
    }
    if all && !json {
        outln!(
            out,
            "{} runs replayed, {} reproduced, {diverged} diverged",
            runs.len(),
            runs.len() - diverged
        );
    }
    Ok(if diverged == 0 {
        EXIT_COMPLETED
    } else {
        EXIT_FAILED
    })
}

/// A run's events, and the sequence numbers of those holding a shredded value's marker
/// (replay takes what was decided of them as recorded: docs/replay.md#shredded-values).
pub(crate) fn split_shredded(
    recorded: Vec<docket_runtime::RecordedEvent>,
) -> (Vec<RunEvent>, std::collections::BTreeSet<u64>) {
    let shredded = recorded
        .iter()
        .filter(|e| !e.shredded.is_empty())
        .map(|e| e.seq)
        .collect();
    (recorded.into_iter().map(|e| e.event).collect(), shredded)
}

/// A value of a difference as the text report shows it.
fn shown(value: &Option<serde_json::Value>) -> String {
    value
        .as_ref()
        .map_or_else(|| "(absent)".to_owned(), ToString::to_string)
}

/// ", N worded otherwise" when this build words some decisions otherwise.
fn reworded_note(r: &ReplayReport) -> String {
    if r.reworded_decisions == 0 {
        String::new()
    } else {
        format!(", {} worded otherwise", r.reworded_decisions)
    }
}

fn one_line(r: &ReplayReport) -> String {
    match &r.divergence {
        None if r.not_rederivable > 0 => format!(
            "{}\treproduced\t{} events, {} decisions, {} reproduced, {} depend on shredded values (not re-derivable)\t{}",
            r.run_id,
            r.events,
            r.decisions,
            r.reproduced_decisions,
            r.not_rederivable,
            r.status.as_str()
        ),
        None => format!(
            "{}\treproduced\t{} events, {} decisions{}\t{}",
            r.run_id,
            r.events,
            r.decisions,
            reworded_note(r),
            r.status.as_str()
        ),
        Some(d) => format!(
            "{}\tDIVERGED {} at event {}\t{}",
            r.run_id, d.code, d.seq, d.why
        ),
    }
}

pub(crate) fn text(out: &mut String, r: &ReplayReport) {
    outln!(
        out,
        "run {} (decider version {}): {} events, {} inputs, {} decisions",
        r.run_id,
        r.decider_version,
        r.events,
        r.inputs,
        r.decisions
    );
    match &r.divergence {
        None if r.not_rederivable > 0 => outln!(
            out,
            "{} events, {} decisions, {} reproduced, {} depend on shredded values (not re-derivable: taken as recorded)",
            r.events,
            r.decisions,
            r.reproduced_decisions,
            r.not_rederivable
        ),
        None => outln!(out, "every decision reproduced"),
        Some(d) => {
            outln!(
                out,
                "DIVERGED at event {} ({}), error {}: {}",
                d.seq,
                d.input,
                d.code,
                d.why
            );
            outln!(out, "  recorded: {}", d.recorded_kinds.join(", "));
            outln!(out, "  decided:  {}", d.decided_kinds.join(", "));
            for diff in &d.differences {
                outln!(
                    out,
                    "  event {} at {}: recorded {}, decided {}",
                    d.at_event + 1,
                    if diff.path.is_empty() {
                        "/"
                    } else {
                        &diff.path
                    },
                    shown(&diff.recorded),
                    shown(&diff.decided)
                );
            }
            outln!(out, "  help: docs/errors/{}.md", d.code);
        }
    }
    if r.divergence.is_none() && r.reworded_decisions > 0 {
        outln!(
            out,
            "{} of them worded otherwise by this build: their reasons changed, not their decisions (docs/replay.md#wording)",
            r.reworded_decisions
        );
        for rewording in &r.rewordings {
            for diff in &rewording.differences {
                outln!(
                    out,
                    "  event {} ({}) at {}: recorded {}, now {}",
                    rewording.seq,
                    rewording.kind,
                    diff.path,
                    shown(&diff.recorded),
                    shown(&diff.decided)
                );
            }
        }
        if r.rewordings.len() < r.reworded_decisions {
            outln!(out, "  ... (--json lists the first {})", r.rewordings.len());
        }
    }
    let result = match (&r.stop_reason, &r.output) {
        (Some(why), _) => format!("{} ({why})", r.status.as_str()),
        (None, Some(output)) => {
            let text = json!(output).to_string();
            let shown: String = text.chars().take(OUTPUT_SHOWN).collect();
            let more = if shown.len() < text.len() {
                " ... (--json for all of it)"
            } else {
                ""
            };
            format!("{}, output {shown}{more}", r.status.as_str())
        }
        (None, None) => r.status.as_str().to_owned(),
    };
    outln!(out, "result: {result}");
}

/// Steps listed as not happening in the text report (`--json` lists all).
const CONSEQUENCES_SHOWN: usize = 12;

/// Characters of a decision's description the text report shows (reasons can be long).
const WHAT_SHOWN: usize = 200;

fn shorten(text: &str) -> String {
    if text.chars().count() <= WHAT_SHOWN {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(WHAT_SHOWN).collect();
    short.push_str("... (--json for all of it)");
    short
}

/// A decision's area and what it was, the area said once: `effect post-1 admitted`, not
/// `effect effect post-1 admitted` (most readings already begin with their area).
fn area_what(area: docket_replay::DecisionArea, what: &str) -> String {
    let words = area.as_str().replace('_', " ");
    let what = shorten(what);
    if what.starts_with(&format!("{words} ")) {
        what
    } else {
        format!("{words}  {what}")
    }
}

fn what_if_text(out: &mut String, r: &WhatIf, bundle: &str) {
    if r.not_rederivable > 0 {
        outln!(
            out,
            "run {}: {} recorded decisions depend on shredded values (not re-derivable: taken as recorded)",
            r.run_id,
            r.not_rederivable
        );
    }
    if r.unchanged() {
        outln!(out, "run {}: nothing would change under {bundle}", r.run_id);
        return;
    }
    let count = |kind| r.changes.iter().filter(|c| c.kind == kind).count();
    outln!(
        out,
        "run {} under {bundle}: {} decisions would change ({} stricter, {} looser, {} changed)",
        r.run_id,
        r.changes.len(),
        count(ChangeKind::Stricter),
        count(ChangeKind::Looser),
        count(ChangeKind::Changed)
    );
    let outcome = |o: Option<docket_replay::Outcome>| o.map_or("none", |o| o.as_str());
    let rule = |r: &str| {
        if r.is_empty() {
            "-".to_owned()
        } else {
            r.to_owned()
        }
    };
    for c in &r.changes {
        let mut fields = String::new();
        if !c.fields_newly_removed.is_empty() {
            fields.push_str(&format!("; removes {}", c.fields_newly_removed.join(", ")));
        }
        if !c.fields_newly_passed.is_empty() {
            fields.push_str(&format!("; passes {}", c.fields_newly_passed.join(", ")));
        }
        let outcomes = if c.before == c.after {
            String::new()
        } else {
            format!(": {} → {}", outcome(c.before), outcome(c.after))
        };
        let rules = if c.rule_before.is_empty() && c.rule_after.is_empty() {
            String::new()
        } else if c.rule_before == c.rule_after {
            format!("  [{}]", c.rule_after)
        } else {
            format!("  [{} -> {}]", rule(&c.rule_before), rule(&c.rule_after))
        };
        outln!(
            out,
            "  event {}  {}  {}{outcomes}{fields}{rules}",
            c.seq,
            c.kind.as_str(),
            area_what(c.area, &c.what),
        );
    }
    if let Some(p) = &r.path_change {
        outln!(
            out,
            "the run would have parted at event {}: {}",
            p.seq,
            p.why
        );
        outln!(out, "  decided:  {}", p.decided_kinds.join(", "));
        for d in &p.instead {
            outln!(
                out,
                "  instead: {}: {}{}",
                area_what(d.area, &d.what),
                d.outcome.as_str(),
                if d.rule.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", d.rule)
                }
            );
        }
        let not: Vec<String> = r
            .not_as_recorded
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        outln!(out, "  not as recorded after it: {}", not.join(", "));
        for c in r.would_not_happen.iter().take(CONSEQUENCES_SHOWN) {
            outln!(out, "    event {}  {}", c.seq, area_what(c.area, &c.what));
        }
        if r.would_not_happen.len() > CONSEQUENCES_SHOWN {
            outln!(
                out,
                "    ... {} more (--json for all of them)",
                r.would_not_happen.len() - CONSEQUENCES_SHOWN
            );
        }
    }
}

/// `docket inspect RUN --at POINT`.
pub(crate) async fn inspect(
    rt: &Runtime<Store>,
    run: &RunId,
    at: &str,
    json: bool,
    out: &mut String,
) -> anyhow::Result<u8> {
    let recorded = rt.events(run).await?;
    let events: Vec<RunEvent> = recorded.iter().map(|e| e.event.clone()).collect();
    let seq = point_in(&events, at).map_err(|why| anyhow::anyhow!("--at {at}: {why}"))?;
    // Only the state is folded: from the nearest snapshot at or before the point.
    let base = rt.state_at(run, Some(seq as u64)).await?;
    let found = docket_replay::inspect_from(base.clone(), &events, seq);
    let state = base;
    let here = &recorded[seq - 1];
    let event_json = serde_json::to_value(&here.event).unwrap_or_default();
    if json {
        let mut value = serde_json::to_value(&found).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.insert("run".to_owned(), json!(run.as_str()));
            object.insert("hash".to_owned(), json!(here.hash));
            object.insert("effects".to_owned(), crate::effects::list_json(&state));
            object.insert("event".to_owned(), event_json);
            // The content the event (and the call that carried it on) holds by hash.
            object.insert("content".to_owned(), content_refs_json(&here.content));
            if let Some(r) = &found.received
                && let Some(call) = recorded.get(
                    usize::try_from(r.seq)
                        .unwrap_or(usize::MAX)
                        .saturating_sub(1),
                )
            {
                object.insert(
                    "received_content".to_owned(),
                    content_refs_json(&call.content),
                );
            }
        }
        outln!(
            out,
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
        return Ok(EXIT_COMPLETED);
    }
    let none = |list: Vec<String>| {
        if list.is_empty() {
            "none".to_owned()
        } else {
            list.join("; ")
        }
    };
    outln!(
        out,
        "run {run} at event {seq} of {} ({}): {}",
        found.of,
        found.kind,
        found.status
    );
    if let Some(flow) = &found.flow {
        outln!(
            out,
            "flow: at {} (position {} of {})",
            flow.agent,
            flow.position,
            flow.of
        );
    }
    outln!(
        out,
        "pending calls: {}",
        none(
            found
                .pending_calls
                .iter()
                .map(|c| format!(
                    "{} → {} (attempt {}, {})",
                    c.request_id, c.agent, c.attempt, c.episode_id
                ))
                .collect()
        )
    );
    if !found.pending_tools.is_empty() {
        outln!(
            out,
            "pending tool calls: {}",
            none(
                found
                    .pending_tools
                    .iter()
                    .map(|t| format!("{} {} by {} ({})", t.tool_call_id, t.name, t.agent, t.phase))
                    .collect()
            )
        );
    }
    outln!(
        out,
        "open tickets: {}",
        none(
            found
                .open_tickets
                .iter()
                .map(|t| format!("{}: {}", t.ticket, t.reason))
                .collect()
        )
    );
    outln!(out, "episodes (budget used/limit, left):");
    for e in &found.episodes {
        let status = match e.stop_condition {
            Some(c) => format!("{} ({c})", e.phase),
            None => e.phase.to_owned(),
        };
        let budgets: Vec<String> = e
            .budgets
            .iter()
            .map(|b| format!("{} {}/{} ({} left)", b.dimension, b.used, b.limit, b.left))
            .collect();
        outln!(
            out,
            "  {}{} {} by {}: {status}; {}",
            "  ".repeat(e.depth as usize),
            e.episode_id,
            e.episode_type,
            e.agent,
            budgets.join(", ")
        );
    }
    crate::effects::list_text(out, &state);
    if found.circuits.is_empty() {
        outln!(out, "circuits: no reading recorded (every breaker closed)");
    } else {
        outln!(out, "circuits:");
        for c in &found.circuits {
            let read = c.window.map_or_else(
                || format!("after {} consecutive failures", c.consecutive_failures),
                |w| {
                    format!(
                        "with {} of {} call(s) failed in the last {} s",
                        w.failures,
                        w.calls,
                        w.window_ms / 1000
                    )
                },
            );
            outln!(
                out,
                "  {}: {} {read} (read at event {}) [{}]; {} call(s) degraded",
                c.agent,
                c.state,
                c.read_at,
                if c.rule.is_empty() { "-" } else { &c.rule },
                c.degraded_calls
            );
        }
    }
    let show_request = |out: &mut String, r: &docket_replay::Received| {
        outln!(
            out,
            "{}",
            serde_json::to_string_pretty(&r.request).unwrap_or_default()
        );
        outln!(
            out,
            "request hash {} (BLAKE3 of the canonical JSON of event {}'s request, docs/replay.md#inspect)",
            r.request_hash,
            r.seq
        );
    };
    match (&here.event, &found.received) {
        (RunEvent::AgentCallScheduled { .. }, Some(r)) => {
            outln!(out, "what {} received (request {}):", r.agent, r.request_id);
            show_request(out, r);
        }
        (
            RunEvent::HandoffAllowed {
                from,
                to,
                delivered,
                audit,
                decision,
                ..
            },
            received,
        ) => {
            outln!(
                out,
                "allowed by rule {}: {}",
                decision.rule_id,
                decision.reason
            );
            outln!(
                out,
                "what crossed {from} → {to} ({} mode by {}; removed: {}):",
                serde_json::to_value(audit.handoff_mode)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or_default(),
                audit.governance_rule_id,
                if audit.context_after_scoping.fields_excluded.is_empty() {
                    "nothing".to_owned()
                } else {
                    audit.context_after_scoping.fields_excluded.join(", ")
                }
            );
            outln!(
                out,
                "{}",
                serde_json::to_string_pretty(&**delivered).unwrap_or_default()
            );
            match received {
                Some(r) => {
                    outln!(
                        out,
                        "what {} received with it (request {}, event {}; the content above at {}):",
                        r.agent,
                        r.request_id,
                        r.seq,
                        r.delivered_at.as_deref().unwrap_or("/")
                    );
                    show_request(out, r);
                }
                None => outln!(
                    out,
                    "no call in the log carries it to {to} (the run's output, or a call not made yet)"
                ),
            }
        }
        (_, received) => {
            outln!(
                out,
                "{}",
                serde_json::to_string_pretty(&event_json).unwrap_or_default()
            );
            if let Some(r) = received {
                outln!(
                    out,
                    "answering request {} to {} (event {}), request hash {}",
                    r.request_id,
                    r.agent,
                    r.seq,
                    r.request_hash
                );
            }
        }
    }
    if let Some(r) = &found.received
        && r.seq != seq as u64
        && let Some(call) = recorded.get(
            usize::try_from(r.seq)
                .unwrap_or(usize::MAX)
                .saturating_sub(1),
        )
    {
        content_lines(out, &format!("the call (event {})", r.seq), &call.content);
    }
    content_lines(out, &format!("event {seq}"), &here.content);
    outln!(
        out,
        "recorded as event {seq}, chain hash {} (the store checks every hash on read)",
        here.hash
    );
    Ok(EXIT_COMPLETED)
}

/// The content an event of payload encoding 2 refers to, as `events --json` and
/// `inspect --json` show it: pointer, BLAKE3 (hex) and length of each.
pub(crate) fn content_refs_json(refs: &[docket_decider::ContentRef]) -> serde_json::Value {
    refs.iter()
        .map(|r| json!({"pointer": r.pointer, "blake3": r.hash_hex(), "len": r.len}))
        .collect()
}

/// Names by hash the content `what` carries (docs/events.md#content-stored-once): the
/// blob the log holds once, which `docket verify` checks against its hash.
fn content_lines(out: &mut String, what: &str, refs: &[docket_decider::ContentRef]) {
    if refs.is_empty() {
        return;
    }
    outln!(
        out,
        "content {what} holds by hash (stored once, BLAKE3 of its canonical JSON, docs/events.md#content-stored-once):"
    );
    for r in refs {
        outln!(
            out,
            "  {} blake3 {} ({} bytes)",
            r.pointer,
            r.hash_hex(),
            r.len
        );
    }
}
