//! How a run is shown to people: its summary after a command drove it (status, handoffs,
//! open tickets, output), each event in one line, and the exit code its status maps to.

use docket_decider::{
    AgentCallFailed, AgentResponded, CircuitReading, HumanDecided, HumanOverrode, HumanWroteDomain,
    RunCancelled,
};
use std::fmt::Write as _;

use docket_app::Store;
use docket_decider::{
    HandoffRecord, RunEvent, RunHistory, RunId, RunState, RunStatus, Settlement, SignalPhase,
    TicketSubject,
};
use docket_policies::InputKind;
use docket_runtime::{RunOutcome, Runtime};
use serde_json::Value;

use crate::command::{EXIT_BLOCKED, EXIT_COMPLETED, EXIT_FAILED, EXIT_WAITING};
use crate::words::{json_preview, reason as said, word};

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// The exit code for a run's status.
pub(crate) fn exit_code(status: RunStatus) -> u8 {
    match status {
        RunStatus::Completed => EXIT_COMPLETED,
        RunStatus::WaitingForHuman => EXIT_WAITING,
        RunStatus::Blocked => EXIT_BLOCKED,
        RunStatus::Failed | RunStatus::Cancelled | RunStatus::NotStarted | RunStatus::Running => {
            EXIT_FAILED
        }
    }
}

/// Every call and handoff decision of a run, folded from its log: the run's state keeps
/// only what later decisions read (docs/replay.md#long-runs).
pub(crate) async fn history_of(rt: &Runtime<Store>, run: &RunId) -> anyhow::Result<RunHistory> {
    let events = rt.events(run).await?;
    Ok(RunHistory::fold(events.iter().map(|e| &e.event)))
}

/// One line about an event, for `docket events`.
pub(crate) fn describe(event: &RunEvent) -> String {
    if let Some(line) = crate::episodes::describe(event) {
        return line;
    }
    match event {
        RunEvent::RunRequested(r) => format!(
            "workflow {} entry {} bundle {}{}",
            r.workflow.name,
            r.workflow.entry,
            &r.bundle_hash[..12.min(r.bundle_hash.len())],
            r.forked_from
                .as_ref()
                .map(|f| format!("; {}", forked_from(f)))
                .or_else(|| r
                    .scheduled
                    .as_deref()
                    .map(|x| format!("; {}", scheduled(x))))
                .or_else(|| r.session.as_deref().map(|x| format!("; {}", session(x))))
                .unwrap_or_default()
        ),
        RunEvent::AgentCallScheduled {
            request, again_of, ..
        } => format!(
            "{} → {} {} attempt {} in {}{}",
            request.request_id,
            request.target_agent,
            request.capability_code,
            request.attempt,
            request.episode_id,
            again_of
                .as_ref()
                .map(|asked| format!(" (again of {asked})"))
                .unwrap_or_default()
        ),
        RunEvent::AgentResponded(AgentResponded {
            request_id,
            response,
            ..
        }) => format!(
            "{request_id} {} ({} action(s))",
            response.status,
            response.actions.len()
        ),
        RunEvent::AgentCallFailed(AgentCallFailed {
            request_id,
            code,
            message,
            ..
        }) => {
            format!("{request_id} {code}: {message}")
        }
        RunEvent::HandoffAllowed {
            from,
            to,
            output_type,
            input,
            decision,
            ..
        } => format!(
            "{from} → {to} {output_type}{} by {}",
            if *input == InputKind::Context {
                " (read-only context)"
            } else {
                ""
            },
            decision.rule_id
        ),
        RunEvent::HandoffDenied {
            from, to, decision, ..
        } => {
            format!(
                "{from} → {to}: {} [{}]",
                said(&decision.reason),
                decision.rule_id
            )
        }
        RunEvent::PolicyDecided { subject, decision } => format!(
            "{subject}: {} {}: {}",
            word(&decision.kind),
            word(&decision.verdict),
            because(&decision.reason, &decision.rule_id)
        ),
        RunEvent::RiskClassified {
            request_id,
            classifier,
            verdict,
            reason,
        } => {
            format!(
                "{request_id} {} by {classifier}: {}",
                word(verdict),
                said(reason)
            )
        }
        RunEvent::Escalated { ticket, reason, .. } => format!("{ticket}: {}", said(reason)),
        RunEvent::OutputHeld { group, delivery } => format!(
            "{} → {} {} held for fan-out {group}",
            delivery.from, delivery.to, delivery.output_type
        ),
        RunEvent::ConflictDetected {
            candidates,
            resolution,
            winner,
            ..
        } => format!(
            "{} conflicting outputs for {}, {resolution}: {}",
            candidates.len(),
            candidates.first().map_or("?", |d| d.to.as_str()),
            winner.map_or_else(
                || "a human decides".to_owned(),
                |w| format!("output {} wins", w + 1)
            )
        ),
        RunEvent::OutputArchived {
            delivery, reason, ..
        } => {
            format!(
                "{}'s {} archived: {}",
                delivery.from,
                delivery.output_type,
                said(reason)
            )
        }
        RunEvent::TaskReassigned {
            from,
            to,
            error_code,
            error_message,
            ..
        } => format!(
            "{from}'s output rejected ({error_code}: {}) and archived; its task goes to {to}",
            said(error_message)
        ),
        RunEvent::FanoutBranchFailed { group, gap } => format!(
            "fan-out {group}: {}'s branch failed ({}: {}), the others go on",
            gap.agent, gap.error_code, gap.error_message
        ),
        RunEvent::FanoutJoined { group, deliveries } => {
            format!(
                "fan-out {group} joined, {} output(s) go on",
                deliveries.len()
            )
        }
        RunEvent::HumanDecided(HumanDecided {
            ticket,
            approved,
            by,
            reason,
            ..
        }) => format!(
            "{ticket} {} by {by}: {}",
            if *approved { "approved" } else { "denied" },
            said(reason)
        ),
        RunEvent::HumanOverrode(HumanOverrode {
            by,
            role,
            rule_id,
            reason,
            ..
        }) => format!("{by} ({role}) overrode {rule_id}: {}", said(reason)),
        RunEvent::HumanWroteDomain(HumanWroteDomain {
            by,
            role,
            domain,
            reason,
            ..
        }) => format!("{by} ({role}) writes {domain}: {}", said(reason)),
        RunEvent::CircuitChecked(CircuitReading {
            request_id,
            agent,
            consecutive_failures,
            window,
            ..
        }) => match window {
            Some(w) => format!(
                "{request_id} {agent}'s circuit read: {} of {} call(s) failed in the last {} s across runs",
                w.failures,
                w.calls,
                w.window_ms / 1000
            ),
            None => format!(
                "{request_id} {agent}'s circuit read: {consecutive_failures} failure(s) in a row across runs"
            ),
        },
        RunEvent::CallDegraded {
            request_id, agent, ..
        } => format!("{request_id} not sent: {agent}'s circuit is open"),
        RunEvent::RunCompleted { .. } => "output recorded".to_owned(),
        RunEvent::RunBlocked {
            rule_id, reason, ..
        } => format!("{} [{rule_id}]", said(reason)),
        RunEvent::RunFailed { reason } => said(reason).to_owned(),
        RunEvent::RunCancelled(RunCancelled { by, reason, .. }) => {
            format!("by {by}: {}", said(reason))
        }
        RunEvent::ToolCallScheduled(t) => format!(
            "{} {} calls tool {} ([tools.{}]{}) for {}",
            t.tool_call_id,
            t.request.agent,
            t.name,
            t.section,
            if t.read_only { ", read-only" } else { "" },
            t.request_id
        ),
        RunEvent::ToolDenied(t) => format!(
            "{} {}'s call of tool {} refused: {} [{}]",
            t.tool_call_id,
            t.agent,
            t.name,
            said(&t.reason),
            t.rule_id
        ),
        RunEvent::ToolReturned(t) => format!(
            "{} returned {}",
            t.tool_call_id,
            json_preview(&t.result, 60)
        ),
        RunEvent::ToolFailed(t) => format!(
            "{} failed {}: {}",
            t.tool_call_id,
            t.code,
            if t.message.trim().is_empty() {
                "no message given"
            } else {
                &t.message
            }
        ),
        // Durable timers
        RunEvent::TimerSet(t) if t.effect_id.is_some() => format!(
            "{} holds effect {} until {}",
            t.timer_id,
            t.effect_id.as_ref().map_or("", |e| e.as_str()),
            docket_evidence::date_ms(t.due_at_ms)
        ),
        RunEvent::TimerSet(t) => format!(
            "{} {} waits until {}: {}",
            t.timer_id,
            t.agent,
            docket_evidence::date_ms(t.due_at_ms),
            said(&t.reason)
        ),
        RunEvent::TimerFired(t) => format!(
            "{} fired at {}",
            t.timer_id,
            docket_evidence::date_ms(t.at_ms)
        ),
        // Pause
        RunEvent::RunPaused(p) | RunEvent::RunUnpaused(p) => {
            format!("by {}: {}", p.by, said(&p.reason))
        }
        // Outside events
        RunEvent::SignalReceived(s) => format!(
            "`{}` from {}{}",
            s.name,
            s.by,
            s.idempotency_key
                .as_deref()
                .map(|k| format!(" (key {k})"))
                .unwrap_or_default()
        ),
        RunEvent::SignalKept(s) => format!("{} `{}` kept for the run", s.signal_id, s.name),
        RunEvent::SignalRefused(s) => {
            format!("{} `{}` refused: {}", s.signal_id, s.name, said(&s.reason))
        }
        RunEvent::SignalAwaited(w) => format!(
            "{} waits for `{}`{}: {}",
            w.agent,
            w.name,
            w.timeout
                .as_ref()
                .map(|t| format!(" (timeout {t})"))
                .unwrap_or_default(),
            said(&w.reason)
        ),
        RunEvent::SignalDelivered(d) => {
            format!("{} `{}` delivered to {}", d.signal_id, d.name, d.agent)
        }
        RunEvent::SignalTimedOut(t) => format!(
            "{}'s wait for `{}` timed out ({})",
            t.agent, t.name, t.timer_id
        ),
        // Every other kind is a side effect's; a kind this build has no words for (a
        // newer log) points at its payload.
        other => crate::effects::describe(other)
            .unwrap_or_else(|| format!("(no words for {}: see --json)", other.kind())),
    }
}

/// A decision's reason and its rule in brackets, the rule named once: a reason that
/// already names it (`... (strategy-told-the-request)`) is not followed by it again.
fn because(reason: &str, rule_id: &str) -> String {
    let reason = said(reason);
    if rule_id.is_empty() || reason.contains(rule_id) {
        reason.to_owned()
    } else {
        format!("{reason} [{rule_id}]")
    }
}

/// The summary a person reads after `run`, `resume`, `approve`, `deny` and `status`;
/// returns the exit code for the run's status.
pub(crate) fn summary(out: &mut String, outcome: &RunOutcome, handoffs: &[HandoffRecord]) -> u8 {
    let s: &RunState = &outcome.state;
    let name = s.request().map_or("?", |r| r.workflow.name.as_str());
    outln!(
        out,
        "run {} ({name}): {}",
        outcome.run_id,
        s.status().as_str()
    );
    if let Some(f) = s.request().and_then(|r| r.forked_from.as_deref()) {
        outln!(out, "{}", forked_from(f));
    }
    if let Some(x) = s.request().and_then(|r| r.scheduled.as_deref()) {
        outln!(out, "{}", scheduled(x));
    }
    if let Some(x) = s.session() {
        outln!(out, "{}", session(x));
    }
    if !handoffs.is_empty() {
        outln!(out, "handoffs:");
        for h in handoffs {
            let what = if h.input == InputKind::Context {
                format!("{} (read-only context)", h.output_type)
            } else {
                h.output_type.clone()
            };
            if h.allowed {
                let confidence = h.confidence_level.map_or_else(String::new, |c| {
                    format!("  confidence {}", format!("{c:?}").to_uppercase())
                });
                outln!(
                    out,
                    "  allowed  {} → {}  {}  [{}]{confidence}{}",
                    h.from,
                    h.to,
                    what,
                    h.rule_id,
                    if h.every_field_removed {
                        "  (every field removed: the receiver got none of the payload)"
                    } else {
                        ""
                    }
                );
                for w in &h.warnings {
                    outln!(out, "           {} warned {}: {}", h.from, h.to, said(w));
                }
            } else {
                outln!(
                    out,
                    "  DENIED   {} → {}  {}  [{}]: {}",
                    h.from,
                    h.to,
                    what,
                    h.rule_id,
                    said(&h.reason)
                );
            }
        }
    }
    for (id, t) in s.open_tickets() {
        print_ticket(out, &outcome.run_id, id.as_str(), t);
    }
    if let Some(p) = s.paused() {
        outln!(
            out,
            "paused by {}: {}; nothing new starts until: docket unpause {} --by NAME --reason TEXT",
            p.by,
            said(&p.reason),
            outcome.run_id
        );
    }
    // Durable timers: what the run waits for, and when.
    for t in s.timers().values().filter(|t| t.pending()) {
        // A scheduled side effect.
        if let Some(effect) = t.set.effect_id.as_ref() {
            outln!(
                out,
                "effect {effect} is scheduled for {}: {}; its kill switch and policy are read then",
                docket_evidence::date_ms(t.set.due_at_ms),
                said(&t.set.reason),
            );
            continue;
        }
        outln!(
            out,
            "timer {}: {} waits until {} ({}); the process driving the run fires it then, or `docket resume {}` after",
            t.set.timer_id,
            t.set.agent,
            docket_evidence::date_ms(t.set.due_at_ms),
            said(&t.set.reason),
            outcome.run_id
        );
    }
    // Outside events: who waits for which.
    for w in s.signal_waits().values() {
        outln!(
            out,
            "{} waits for event `{}` ({}); send it with: docket signal {} {} --by NAME --payload FILE",
            w.agent,
            w.name,
            said(&w.reason),
            outcome.run_id,
            w.name
        );
    }
    if let Some(reason) = s.stop_reason() {
        outln!(out, "stopped: {}", said(reason));
    }
    print_overridable(out, &outcome.run_id, s);
    if let Some(output) = s.output() {
        print_output(out, output);
    }
    print_conflicts(out, s);
    // Paused: what was asked is recorded, and the run waits for its unpause.
    if s.paused().is_some() && s.status() == RunStatus::Running {
        return 0;
    }
    // Waiting for an outside event, as for a person: the run goes on once it is sent.
    if s.awaits_signal() {
        return EXIT_WAITING;
    }
    exit_code(s.status())
}

/// The conflicts settled among a fan-out's outputs: never hidden from the user.
fn print_conflicts(out: &mut String, s: &RunState) {
    for c in s.settled_conflicts() {
        let outputs: Vec<String> = c
            .outputs
            .iter()
            .map(|o| {
                let mut labels: Vec<String> = o
                    .confidence_level
                    .map(|c| format!("{c:?}").to_uppercase())
                    .into_iter()
                    .collect();
                if o.kept {
                    labels.push("kept".to_owned());
                }
                if labels.is_empty() {
                    format!("{}'s", o.source_agent)
                } else {
                    format!("{}'s ({})", o.source_agent, labels.join(", "))
                }
            })
            .collect();
        let how = match (c.settled_by, &c.decided_by, &c.ticket) {
            (Settlement::HigherConfidence, ..) => "the higher confidence".to_owned(),
            (Settlement::HigherAuthority, ..) => "the higher authority".to_owned(),
            (Settlement::Person, Some(by), Some(ticket)) => format!("{by} in {ticket}"),
            (Settlement::Person, ..) => "a person".to_owned(),
        };
        outln!(
            out,
            "conflict over {}'s {}: {}; settled by {how} (the others are archived in the log)",
            c.receiver,
            c.output_type,
            outputs.join(" vs "),
        );
    }
}

/// What became of the event a run received last (`docket signal`): kept, delivered to an
/// agent, or refused and why.
pub(crate) fn signal_line(s: &RunState) -> String {
    let Some((id, signal)) = s.signals().iter().next_back() else {
        return "no event was recorded".to_owned();
    };
    let what = match (signal.phase, &signal.delivered_to, &signal.refused) {
        (SignalPhase::Delivered, Some(agent), _) => format!("delivered to {agent}"),
        (SignalPhase::Refused, _, Some(reason)) => format!("refused: {}", said(reason)),
        _ => "kept for the run until an agent waits for it".to_owned(),
    };
    format!("event {id} `{}` from {}: {what}", signal.name, signal.by)
}

/// What a fork was forked from, in one line.
/// `started by schedule NAME (made by WHO), due TIME`.
fn scheduled(x: &docket_decider::Scheduled) -> String {
    format!(
        "started by schedule {} (made by {}), due {}",
        x.schedule,
        x.made_by,
        crate::words::date_ms(x.due_at_ms)
    )
}

fn session(x: &docket_decider::Session) -> String {
    format!(
        "turn {} of session {} (after run {}), message from {}",
        x.turn, x.id, x.previous_run, x.by
    )
}

fn forked_from(f: &docket_decider::ForkedFrom) -> String {
    let overrides: Vec<String> = f
        .overrides
        .iter()
        .map(|o| format!("{} answered from {}", o.call, o.file))
        .collect();
    format!(
        "forked from {} at event {} (its chain hash there {}){}",
        f.run_id,
        f.seq,
        f.hash.get(..16).unwrap_or(&f.hash),
        if overrides.is_empty() {
            String::new()
        } else {
            format!("; {}", overrides.join("; "))
        }
    )
}

/// An open ticket: what is asked, what there is to choose from, and the command that
/// decides it.
fn print_ticket(out: &mut String, run: &RunId, id: &str, t: &docket_decider::Ticket) {
    outln!(out, "waiting for a human on {id}: {}", said(&t.reason));
    match &t.subject {
        TicketSubject::Question { choices, .. } => {
            for (i, c) in choices.iter().enumerate() {
                outln!(out, "  {}. {c}", i + 1);
            }
            let what = if choices.is_empty() {
                "--text TEXT"
            } else {
                "--choice N|--text TEXT"
            };
            outln!(
                out,
                "  answer with: docket answer {run} {id} --by NAME {what}  (or docket approve / deny ...)"
            );
            return;
        }
        TicketSubject::Conflict { conflicts, .. } => {
            for (i, d) in conflicts.first().into_iter().flatten().enumerate() {
                let confidence = d.confidence.map_or_else(String::new, |c| {
                    format!(", confidence {}", format!("{c:?}").to_uppercase())
                });
                outln!(
                    out,
                    "  {}. from {} ({}{confidence}): {}",
                    i + 1,
                    d.from,
                    d.output_type,
                    serde_json::to_string(&*d.payload).unwrap_or_default()
                );
            }
            outln!(
                out,
                "  decide with: docket approve {run} {id} --choose N --by NAME --reason TEXT  (or docket deny ...)"
            );
            return;
        }
        TicketSubject::Tool {
            name,
            invocation,
            rule_id,
            pattern,
            ..
        } => {
            let argument = invocation
                .strip_prefix(name.as_str())
                .and_then(|r| r.strip_prefix('('))
                .and_then(|r| r.strip_suffix(')'))
                .unwrap_or("");
            outln!(out, "  tool: {name}");
            outln!(out, "  argument: {argument}");
            outln!(out, "  review pattern: {rule_id} (`{pattern}`)");
        }
        _ => {}
    }
    outln!(
        out,
        "  decide with: docket approve {run} {id} --by NAME --reason TEXT  (or docket deny ...)"
    );
}

/// A block a person may override: what an override continues, the level the rule sits
/// at, the roles that outrank it and the command (docs/governance.md#human-override).
fn print_overridable(out: &mut String, run: &RunId, s: &RunState) {
    let (Some(held), Some(rule)) = (s.overridable(), s.blocked_by()) else {
        return;
    };
    let level = held.level;
    let roles = s
        .request()
        .and_then(|r| docket_decider::recorded_bundle(r).ok())
        .map(|b| {
            b.roles_outranking(level)
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    outln!(
        out,
        "overridable: `{rule}` sits at authority level {} ({}); an override means {}",
        level.level(),
        level.as_str(),
        held.step.describe()
    );
    if let Some(pattern) = &held.deny_pattern {
        outln!(
            out,
            "  but the deny pattern `{pattern}` is behind it: absolute unless the bundle sets [overrides] deny_patterns_overridable"
        );
    }
    let who = if roles.is_empty() {
        "no role of the bundle's registry outranks it".to_owned()
    } else {
        format!("roles that may: {}", roles.join(", "))
    };
    outln!(
        out,
        "  override with: docket override {run} --by NAME --role ROLE --reason TEXT  ({who})"
    );
}

fn print_output(out: &mut String, output: &Value) {
    let Some(recs) = output.get("recommendations").and_then(Value::as_array) else {
        outln!(out, "output:");
        outln!(
            out,
            "{}",
            serde_json::to_string_pretty(output).unwrap_or_default()
        );
        return;
    };
    let status = output.get("status").and_then(Value::as_str).unwrap_or("?");
    outln!(out, "recommendations ({status}):");
    let field = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    for r in recs {
        outln!(
            out,
            "  {} [{}] {}: {}",
            field(r, "id"),
            field(r, "priority"),
            field(r, "topic"),
            field(r, "action")
        );
        let why = field(r, "rationale");
        if !why.is_empty() {
            outln!(out, "      why: {why} (cites {})", field(r, "gap_id"));
        }
        let impact = field(r, "expected_impact");
        if !impact.is_empty() {
            outln!(out, "      expected impact: {impact}");
        }
    }
    if let Some(warnings) = output.get("warnings").and_then(Value::as_array) {
        for w in warnings {
            outln!(out, "  warning: {}", w.as_str().unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(json: &str) -> RunEvent {
        let value: Value = serde_json::from_str(json).expect("JSON");
        let kind = value["kind"].as_str().expect("a kind");
        RunEvent::decode(kind, json.as_bytes()).expect("an event")
    }

    #[test]
    fn tool_events_and_reasonless_decisions_say_something() {
        let request = r#"{"run_id":"r","episode_id":"ep-1","tool_call_id":"r/tool-1","agent":"analyst","tool":"search","arguments":{"q":"x"},"timeout_ms":1000}"#;
        let cases = [
            (
                format!(
                    r#"{{"kind":"tool.call_scheduled","tool_call_id":"r/tool-1","request_id":"r/call-2","name":"search","section":"search","read_only":true,"request":{request}}}"#
                ),
                "r/tool-1 analyst calls tool search ([tools.search], read-only) for r/call-2",
            ),
            (
                r#"{"kind":"tool.denied","tool_call_id":"r/tool-1","request_id":"r/call-2","agent":"analyst","episode_id":"ep-1","name":"rm","arguments":{},"rule_id":"deny-rm","reason":""}"#.to_owned(),
                "r/tool-1 analyst's call of tool rm refused: no reason given [deny-rm]",
            ),
            (
                r#"{"kind":"tool.returned","tool_call_id":"r/tool-1","result":{"hits":3},"at_ms":5}"#.to_owned(),
                r#"r/tool-1 returned {"hits":3}"#,
            ),
            (
                r#"{"kind":"tool.failed","tool_call_id":"r/tool-1","code":"TOOL_TIMEOUT","message":"","at_ms":5}"#.to_owned(),
                "r/tool-1 failed TOOL_TIMEOUT: no message given",
            ),
            (
                r#"{"kind":"risk.classified","request_id":"r/call-2","classifier":"risk-classifier","verdict":"SAFE","reason":""}"#.to_owned(),
                "r/call-2 SAFE by risk-classifier: no reason given",
            ),
        ];
        for (json, words) in cases {
            assert_eq!(describe(&event(&json)), words, "{json}");
        }
    }
}
