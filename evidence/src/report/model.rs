//! What the report shows, read from the log by the replay crate and the decider's fold:
//! the page is rendered from this and from nothing else.

use docket_decider::{HumanDecided, HumanOverrode};
use docket_decider::{RunEvent, RunRequested, RunState, TicketSubject, recorded_bundle};
use docket_policies::InputKind;
use docket_replay::{Decided, EpisodeAt, ReplayReport, decision_of, episode_tree, is_denial};
use serde_json::Value;

use super::{LoggedEvent, ReportError, ReportVerification};

/// Budget rows the page lists at most; a longer run's are sampled evenly (the last row is
/// always kept), so a report of a long run stays a page a browser opens.
pub(crate) const BUDGET_ROWS: usize = 240;

/// Everything the page shows.
pub(crate) struct Report<'a> {
    pub(crate) events: &'a [LoggedEvent],
    pub(crate) run: &'a RunRequested,
    /// The fold of the whole log.
    pub(crate) state: RunState,
    pub(crate) verification: &'a ReportVerification,
    /// `docket replay`'s report, or why the log could not be replayed.
    pub(crate) replay: Result<ReplayReport, String>,
    /// The recorded bundle's id and version, when its text still compiles.
    pub(crate) bundle: Option<(String, String)>,
    pub(crate) started_ns: i64,
    /// The time of the last event once the run is over.
    pub(crate) finished_ns: Option<i64>,
    pub(crate) episodes: Vec<EpisodeAt>,
    pub(crate) handoffs: Vec<Handoff<'a>>,
    pub(crate) decisions: Vec<Decision<'a>>,
    pub(crate) denials: Vec<Decision<'a>>,
    pub(crate) effects: Vec<Effect>,
    pub(crate) humans: Vec<Human<'a>>,
    pub(crate) budgets: Budgets,
}

/// One handoff (or content crossing by another rule), allowed or denied.
pub(crate) struct Handoff<'a> {
    pub(crate) seq: u64,
    pub(crate) at_ns: i64,
    pub(crate) from: &'a str,
    pub(crate) to: &'a str,
    pub(crate) output_type: &'a str,
    pub(crate) context: bool,
    pub(crate) allowed: bool,
    /// The deciding rule, and the scoping rule when another (as what-if names it).
    pub(crate) rule: String,
    pub(crate) reason: &'a str,
    /// How it was scoped (`full`, `minimal`, `scoped`...), when allowed.
    pub(crate) mode: Option<String>,
    pub(crate) crossed: &'a [String],
    pub(crate) withheld: &'a [String],
    pub(crate) every_field_removed: bool,
    /// What the receiver was given.
    pub(crate) delivered: Option<&'a Value>,
}

/// One recorded decision, with its reason when the event gives one.
pub(crate) struct Decision<'a> {
    pub(crate) seq: u64,
    pub(crate) at_ns: i64,
    pub(crate) decided: Decided,
    pub(crate) reason: Option<&'a str>,
}

/// A side effect as the fold leaves it, with where its steps sit in the log.
pub(crate) struct Effect {
    pub(crate) effect_id: String,
    pub(crate) agent: String,
    pub(crate) kind: String,
    pub(crate) lane: String,
    pub(crate) key: String,
    pub(crate) params: Value,
    pub(crate) phase: &'static str,
    pub(crate) dry_run: Option<String>,
    pub(crate) human_approved: bool,
    pub(crate) receipt: Option<Value>,
    /// The rule or code and reason of its last refusal or failure.
    pub(crate) outcome: Option<(String, String)>,
    pub(crate) requested_seq: Option<u64>,
    /// Where its receipt was recorded, when, and the effect it was reused from.
    pub(crate) applied: Option<(u64, i64, Option<String>)>,
    /// On a browser lane, the drift evidence recorded: which run (`sandbox run`, `real
    /// target`), the screenshot's and the DOM's SHA-256.
    pub(crate) drift: Vec<(&'static str, String, String)>,
}

/// A person's decision on a ticket, or an override.
pub(crate) struct Human<'a> {
    pub(crate) seq: u64,
    pub(crate) at_ms: i64,
    pub(crate) by: &'a str,
    /// approved, denied, overrode RULE in ROLE, paused, unpaused, or sent an outside event.
    pub(crate) decision: String,
    pub(crate) reason: &'a str,
    /// What was asked (the ticket's question), or the rule overridden.
    pub(crate) asked: String,
    pub(crate) answer: Option<String>,
}

/// Budget used per episode and dimension after each event that changed any.
pub(crate) struct Budgets {
    /// (episode, dimension, limit), in the order first seen.
    pub(crate) columns: Vec<(String, String, u64)>,
    /// (seq, time, used per column: `None` before the episode exists).
    pub(crate) rows: Vec<(u64, i64, Vec<Option<u64>>)>,
    /// Rows there were before sampling.
    pub(crate) changes: usize,
}

impl<'a> Report<'a> {
    pub(crate) fn read(
        events: &'a [LoggedEvent],
        verification: &'a ReportVerification,
    ) -> Result<Self, ReportError> {
        let Some(RunEvent::RunRequested(run)) = events.first().map(|e| &e.event) else {
            return Err(ReportError::NotARun);
        };
        if let Some((i, e)) = events
            .iter()
            .enumerate()
            .find(|(i, e)| e.seq != *i as u64 + 1)
        {
            return Err(ReportError::OutOfOrder {
                position: i as u64 + 1,
                seq: e.seq,
            });
        }
        let plain: Vec<RunEvent> = events.iter().map(|e| e.event.clone()).collect();
        let (state, budgets) = fold_with_budgets(events);
        let replay = docket_replay::replay(&plain).map_err(|e| e.to_string());
        let bundle = recorded_bundle(run).ok().map(|b| {
            let id = &b.spec().bundle;
            (id.id.clone(), id.version.clone())
        });
        let finished_ns = state
            .status()
            .is_final()
            .then(|| events.last().map(|e| e.recorded_at_ns))
            .flatten();
        let decisions: Vec<Decision<'a>> = events
            .iter()
            .filter_map(|e| {
                decision_of(&e.event).map(|decided| Decision {
                    seq: e.seq,
                    at_ns: e.recorded_at_ns,
                    decided,
                    reason: reason_of(&e.event),
                })
            })
            .collect();
        let denials = events
            .iter()
            .filter(|e| is_denial(&e.event))
            .map(|e| Decision {
                seq: e.seq,
                at_ns: e.recorded_at_ns,
                decided: decision_of(&e.event).unwrap_or_else(|| Decided {
                    area: docket_replay::DecisionArea::Handoff,
                    what: e.event.kind().to_owned(),
                    outcome: docket_replay::Outcome::Denied,
                    rule: String::new(),
                }),
                reason: reason_of(&e.event),
            })
            .collect();
        Ok(Self {
            events,
            run,
            episodes: episode_tree(&state),
            effects: effects(&state, events),
            humans: humans(&state, events),
            handoffs: handoffs(events),
            state,
            verification,
            replay,
            bundle,
            started_ns: events[0].recorded_at_ns,
            finished_ns,
            decisions,
            denials,
            budgets,
        })
    }
}

/// Why an event decided as it did, when it says.
fn reason_of(event: &RunEvent) -> Option<&str> {
    Some(match event {
        RunEvent::HandoffAllowed { decision, .. }
        | RunEvent::HandoffDenied { decision, .. }
        | RunEvent::PolicyDecided { decision, .. }
        | RunEvent::EpisodeStarted { decision, .. }
        | RunEvent::EpisodeActionDenied { decision, .. }
        | RunEvent::DomainWritten { decision, .. }
        | RunEvent::DomainWriteDenied { decision, .. } => &decision.reason,
        RunEvent::EpisodeStopped { reason, .. }
        | RunEvent::RunBlocked { reason, .. }
        | RunEvent::RunFailed { reason }
        | RunEvent::Escalated { reason, .. }
        | RunEvent::RiskClassified { reason, .. } => reason,
        RunEvent::EffectRefused(e) => &e.reason,
        RunEvent::ToolDenied(t) => &t.reason,
        RunEvent::SignalRefused(s) => &s.reason,
        _ => return None,
    })
}

/// The log folded event by event, noting each episode's budgets whenever one changes.
fn fold_with_budgets(events: &[LoggedEvent]) -> (RunState, Budgets) {
    let mut state = RunState::default();
    let mut budgets = Budgets {
        columns: Vec::new(),
        rows: Vec::new(),
        changes: 0,
    };
    let mut last: Vec<Option<u64>> = Vec::new();
    for e in events {
        state.apply(&e.event);
        let tree = episode_tree(&state);
        let mut now = vec![None; budgets.columns.len()];
        for episode in &tree {
            for b in &episode.budgets {
                let at = budgets
                    .columns
                    .iter()
                    .position(|(ep, dim, _)| *ep == episode.episode_id && *dim == b.dimension)
                    .unwrap_or_else(|| {
                        budgets.columns.push((
                            episode.episode_id.clone(),
                            b.dimension.clone(),
                            b.limit,
                        ));
                        now.push(None);
                        budgets.columns.len() - 1
                    });
                now[at] = Some(b.used);
            }
        }
        if now != last {
            budgets.rows.push((e.seq, e.recorded_at_ns, now.clone()));
            last = now;
        }
    }
    budgets.changes = budgets.rows.len();
    budgets.rows = sample(budgets.rows, BUDGET_ROWS);
    // Rows from before an episode existed are padded to the final width.
    let width = budgets.columns.len();
    for (_, _, used) in &mut budgets.rows {
        used.resize(width, None);
    }
    (state, budgets)
}

/// At most `max` (at least 2) of `rows`, evenly spaced, the first and the last kept.
pub(crate) fn sample<T>(rows: Vec<T>, max: usize) -> Vec<T> {
    let n = rows.len();
    if n <= max || max < 2 {
        return rows;
    }
    let mut keep = (0..max).map(|i| i * (n - 1) / (max - 1)).peekable();
    rows.into_iter()
        .enumerate()
        .filter_map(|(i, row)| {
            (keep.peek() == Some(&i)).then(|| {
                keep.next();
                row
            })
        })
        .collect()
}

fn handoffs(events: &[LoggedEvent]) -> Vec<Handoff<'_>> {
    events
        .iter()
        .filter_map(|e| {
            let rule = || decision_of(&e.event).map(|d| d.rule).unwrap_or_default();
            Some(match &e.event {
                RunEvent::HandoffAllowed {
                    from,
                    to,
                    output_type,
                    input,
                    decision,
                    audit,
                    delivered,
                    ..
                } => Handoff {
                    seq: e.seq,
                    at_ns: e.recorded_at_ns,
                    from,
                    to,
                    output_type,
                    context: *input == InputKind::Context,
                    allowed: true,
                    rule: rule(),
                    reason: &decision.reason,
                    mode: Some(word(&audit.handoff_mode)),
                    crossed: &audit.context_after_scoping.fields_included,
                    withheld: &audit.context_after_scoping.fields_excluded,
                    every_field_removed: audit.every_field_removed,
                    delivered: Some(delivered),
                },
                RunEvent::HandoffDenied {
                    from,
                    to,
                    output_type,
                    decision,
                    ..
                } => Handoff {
                    seq: e.seq,
                    at_ns: e.recorded_at_ns,
                    from,
                    to,
                    output_type,
                    context: false,
                    allowed: false,
                    rule: rule(),
                    reason: &decision.reason,
                    mode: None,
                    crossed: &[],
                    withheld: &[],
                    every_field_removed: false,
                    delivered: None,
                },
                _ => return None,
            })
        })
        .collect()
}

fn effects(state: &RunState, events: &[LoggedEvent]) -> Vec<Effect> {
    state
        .effects()
        .values()
        .map(|record| {
            let id = &record.requested.effect_id;
            let requested_seq = events.iter().find_map(|e| match &e.event {
                RunEvent::EffectRequested(r) if r.effect_id == *id => Some(e.seq),
                _ => None,
            });
            let applied = events.iter().rev().find_map(|e| match &e.event {
                RunEvent::EffectApplied(a) if a.effect_id == *id => Some((
                    e.seq,
                    a.at_ms,
                    a.reused_from.as_ref().map(ToString::to_string),
                )),
                _ => None,
            });
            Effect {
                effect_id: id.to_string(),
                agent: record.requested.agent.to_string(),
                kind: record.requested.effect_kind.clone(),
                lane: record.requested.lane.clone(),
                key: record.key(),
                params: record.requested.params.clone(),
                phase: record.phase.as_str(),
                dry_run: record.dry_run.as_ref().map(|d| {
                    let verdict = if d.ok { "passed" } else { "failed" };
                    match &d.message {
                        Some(m) => format!("{verdict}: {m}"),
                        None => verdict.to_owned(),
                    }
                }),
                human_approved: record.human_approved,
                receipt: record.receipt.as_ref().map(|r| r.result.clone()),
                outcome: record.outcome.clone(),
                requested_seq,
                applied,
                drift: [
                    ("sandbox run", record.sandbox.as_ref()),
                    ("real target", record.receipt.as_ref()),
                ]
                .into_iter()
                .filter_map(|(which, receipt)| {
                    let d = receipt?.drift.as_ref()?;
                    Some((which, d.screenshot_sha256.clone(), d.dom_sha256.clone()))
                })
                .collect(),
            }
        })
        .collect()
}

fn humans<'a>(state: &RunState, events: &'a [LoggedEvent]) -> Vec<Human<'a>> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            RunEvent::HumanDecided(HumanDecided {
                ticket,
                approved,
                by,
                reason,
                choice,
                answer,
                at_ms,
            }) => {
                let asked = state.tickets().get(ticket).map_or_else(
                    || ticket.to_string(),
                    |t| format!("{ticket} ({}): {}", subject(&t.subject), t.reason),
                );
                let answer = match (choice, answer) {
                    (Some(c), Some(a)) => Some(format!("option {c}; {a}")),
                    (Some(c), None) => Some(format!("option {c}")),
                    (None, Some(a)) => Some(a.clone()),
                    (None, None) => None,
                };
                Some(Human {
                    seq: e.seq,
                    at_ms: *at_ms,
                    by,
                    decision: if *approved { "approved" } else { "denied" }.to_owned(),
                    reason,
                    asked,
                    answer,
                })
            }
            RunEvent::HumanOverrode(HumanOverrode {
                by,
                role,
                rule_id,
                reason,
                at_ms,
            }) => Some(Human {
                seq: e.seq,
                at_ms: *at_ms,
                by,
                decision: format!("overrode as {role}"),
                reason,
                asked: format!("the block by {rule_id}"),
                answer: None,
            }),
            RunEvent::RunPaused(p) | RunEvent::RunUnpaused(p) => Some(Human {
                seq: e.seq,
                at_ms: p.at_ms,
                by: &p.by,
                decision: if matches!(e.event, RunEvent::RunPaused(_)) {
                    "paused"
                } else {
                    "unpaused"
                }
                .to_owned(),
                reason: &p.reason,
                asked: "the run".to_owned(),
                answer: None,
            }),
            // Outside events: who sent what (the bundle's verdict is among the decisions).
            RunEvent::SignalReceived(s) => Some(Human {
                seq: e.seq,
                at_ms: s.at_ms,
                by: &s.by,
                decision: format!("sent the event `{}`", s.name),
                reason: "",
                asked: "an outside event".to_owned(),
                answer: Some(docket_policies::canonical_json_text(&s.payload)),
            }),
            _ => None,
        })
        .collect()
}

/// What a ticket is about, in a word.
fn subject(subject: &TicketSubject) -> &'static str {
    match subject {
        TicketSubject::Retry { .. } => "retry",
        TicketSubject::Conflict { .. } => "conflict",
        TicketSubject::Proceed { .. } => "proceed",
        TicketSubject::Question { .. } => "question",
        TicketSubject::EpisodeReview { .. } => "episode review",
        TicketSubject::Tool { .. } => "tool",
        TicketSubject::Effect { .. } => "effect",
    }
}

/// A unit enum variant by its recorded name (`full`, `minimal`...).
pub(crate) fn word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}
