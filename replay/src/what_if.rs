//! What-if: a run's recorded answers decided again under another policy bundle
//! (docs/replay.md#what-if). The run is re-decided from its start with the new bundle,
//! feeding it the recorded inputs in order, for as long as the run takes the same path;
//! each decision that comes out otherwise is classed stricter, looser or changed, with the
//! rule that decided it before and after. Where the path first changes, the report says
//! so and what the log holds after that point that would not have happened as recorded.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use docket_decider::{Command, RunEvent, RunRequested, RunState, decide};
use docket_policies::{PolicyBundle, Verdict};

use crate::report::ReplayError;

/// How a decision compares under the new bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Denied now, or fewer fields cross.
    Stricter,
    /// Allowed now, or more fields cross.
    Looser,
    /// Decided the same way, by another rule or with other content.
    Changed,
}

/// One decision that comes out otherwise under the new bundle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// 1-based sequence of the recorded event.
    pub seq: u64,
    /// Stricter, looser or changed.
    pub kind: ChangeKind,
    /// What was decided, in words (`handoff reasoning → strategy (gaps_and_opportunities)`).
    pub what: String,
    /// The deciding rule as recorded.
    pub rule_before: String,
    /// The deciding rule under the new bundle.
    pub rule_after: String,
    /// Fields that crossed as recorded and would not now.
    pub fields_newly_removed: Vec<String>,
    /// Fields that would cross now and did not as recorded.
    pub fields_newly_passed: Vec<String>,
}

/// Where the run would first have taken another path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathChange {
    /// 1-based sequence of the recorded input whose batch comes out otherwise.
    pub seq: u64,
    /// What happens instead.
    pub why: String,
    /// Kinds the log records for that batch.
    pub recorded_kinds: Vec<&'static str>,
    /// Kinds decided under the new bundle.
    pub decided_kinds: Vec<&'static str>,
}

/// What a run would have been under another bundle, as far as its recorded answers go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhatIf {
    /// The run.
    pub run_id: String,
    /// Batches decided under the new bundle the same way or with changes only in content.
    pub batches_compared: usize,
    /// Each decision that comes out otherwise, in the run's order.
    pub changes: Vec<Change>,
    /// Where the path first changes (`None`: the run would have gone the same way).
    pub path_change: Option<PathChange>,
    /// Recorded events from the path change on, by kind: what would not have happened as
    /// recorded (later handoffs, calls, effects, the run's end).
    pub not_as_recorded: BTreeMap<&'static str, usize>,
}

impl WhatIf {
    /// Nothing would have been decided otherwise.
    #[must_use]
    pub fn unchanged(&self) -> bool {
        self.changes.is_empty() && self.path_change.is_none()
    }
}

/// Re-decides the run in `events` under `bundle` (its source text `source`, named
/// `name`), with the decider version the run recorded.
///
/// # Errors
/// [`ReplayError`] when `events` is not a run's log.
pub fn what_if(
    events: &[RunEvent],
    bundle: &PolicyBundle,
    source: &str,
    name: &str,
) -> Result<WhatIf, ReplayError> {
    let Some(RunEvent::RunRequested(run)) = events.first() else {
        return Err(ReplayError::NotARun);
    };
    let rewritten = RunRequested {
        bundle_source: source.to_owned(),
        bundle_source_name: name.to_owned(),
        bundle_hash: bundle.hash().to_hex(),
        ..RunRequested::clone(run)
    };
    let mut report = WhatIf {
        run_id: run.run_id.to_string(),
        batches_compared: 0,
        changes: Vec::new(),
        path_change: None,
        not_as_recorded: BTreeMap::new(),
    };
    let mut state = RunState::default();
    let mut start = 0;
    while start < events.len() {
        let first = &events[start];
        let seq = start as u64 + 1;
        let end = events[start + 1..]
            .iter()
            .position(RunEvent::is_input)
            .map_or(events.len(), |p| start + 1 + p);
        let command = if start == 0 {
            Some(Command::Start(rewritten.clone()))
        } else {
            Command::from_event(first)
        };
        let Some(command) = command else {
            return Err(ReplayError::NotAnInput {
                seq,
                kind: first.kind(),
            });
        };
        let recorded = &events[start..end];
        let decided = match decide(&state, bundle, command) {
            Ok(decided) => decided,
            Err(rejection) => {
                report.path_change = Some(PathChange {
                    seq,
                    why: format!(
                        "this recorded input would not have come: under the new bundle {rejection}"
                    ),
                    recorded_kinds: recorded.iter().map(RunEvent::kind).collect(),
                    decided_kinds: Vec::new(),
                });
                count_rest(&mut report, &events[start..]);
                return Ok(report);
            }
        };
        // Same path as long as the same kinds of events come in the same order; the
        // decisions up to where it parts are compared.
        let parts = recorded
            .iter()
            .zip(&decided)
            .position(|(r, d)| r.kind() != d.kind());
        let same_path = parts.is_none() && recorded.len() == decided.len();
        let compared = parts.map_or(recorded.len().min(decided.len()), |at| at + 1);
        for (i, (r, d)) in recorded
            .iter()
            .zip(&decided)
            .enumerate()
            .take(compared)
            .skip(1)
        {
            if let Some(change) = compare(seq + i as u64, r, d) {
                report.changes.push(change);
            }
        }
        if !same_path {
            let at = parts.unwrap_or(recorded.len().min(decided.len()));
            report.path_change = Some(PathChange {
                seq,
                why: match (recorded.get(at), decided.get(at)) {
                    (Some(r), Some(d)) => {
                        format!("{} where the log records {}", d.kind(), r.kind())
                    }
                    (Some(r), None) => format!("no {} where the log records one", r.kind()),
                    (None, Some(d)) => format!("also {}", d.kind()),
                    (None, None) => "the batch differs".to_owned(),
                },
                recorded_kinds: recorded.iter().map(RunEvent::kind).collect(),
                decided_kinds: decided.iter().map(RunEvent::kind).collect(),
            });
            count_rest(&mut report, &events[start + at.max(1)..]);
            return Ok(report);
        }
        report.batches_compared += 1;
        for event in &decided {
            state.apply(event);
        }
        start = end;
    }
    Ok(report)
}

fn count_rest(report: &mut WhatIf, rest: &[RunEvent]) {
    for event in rest.iter().filter(|e| !e.is_input()) {
        *report.not_as_recorded.entry(event.kind()).or_default() += 1;
    }
}

/// How `decided` differs from `recorded` (events of the same position in a batch), for
/// the decisions a reader asks about: handoffs and other policy decisions.
fn compare(seq: u64, recorded: &RunEvent, decided: &RunEvent) -> Option<Change> {
    match (recorded, decided) {
        (
            RunEvent::HandoffAllowed {
                from,
                to,
                output_type,
                decision: before,
                audit: a,
                ..
            },
            RunEvent::HandoffAllowed {
                decision: after,
                audit: b,
                ..
            },
        ) => {
            let was = &a.context_after_scoping.fields_included;
            let now = &b.context_after_scoping.fields_included;
            let removed: Vec<String> = was.iter().filter(|f| !now.contains(f)).cloned().collect();
            let passed: Vec<String> = now.iter().filter(|f| !was.contains(f)).cloned().collect();
            let rules_same =
                before.rule_id == after.rule_id && a.governance_rule_id == b.governance_rule_id;
            if removed.is_empty() && passed.is_empty() && rules_same {
                return None;
            }
            let kind = match (removed.is_empty(), passed.is_empty()) {
                (false, true) => ChangeKind::Stricter,
                (true, false) => ChangeKind::Looser,
                _ => ChangeKind::Changed,
            };
            Some(Change {
                seq,
                kind,
                what: format!("handoff {from} → {to} ({output_type})"),
                rule_before: rule(&before.rule_id, &a.governance_rule_id),
                rule_after: rule(&after.rule_id, &b.governance_rule_id),
                fields_newly_removed: removed,
                fields_newly_passed: passed,
            })
        }
        (
            RunEvent::PolicyDecided {
                subject,
                decision: before,
            },
            RunEvent::PolicyDecided {
                decision: after, ..
            },
        ) if before.verdict != after.verdict || before.rule_id != after.rule_id => Some(Change {
            seq,
            kind: verdict_change(before.verdict, after.verdict),
            what: format!("{} decision on {subject}", kind_name(before.kind)),
            rule_before: before.rule_id.to_string(),
            rule_after: after.rule_id.to_string(),
            fields_newly_removed: Vec::new(),
            fields_newly_passed: Vec::new(),
        }),
        (
            RunEvent::HandoffAllowed {
                from,
                to,
                output_type,
                decision: before,
                ..
            },
            RunEvent::HandoffDenied {
                decision: after, ..
            },
        ) => Some(Change {
            seq,
            kind: ChangeKind::Stricter,
            what: format!("handoff {from} → {to} ({output_type}) denied"),
            rule_before: before.rule_id.to_string(),
            rule_after: after.rule_id.to_string(),
            fields_newly_removed: Vec::new(),
            fields_newly_passed: Vec::new(),
        }),
        (
            RunEvent::HandoffDenied {
                from,
                to,
                output_type,
                decision: before,
                ..
            },
            RunEvent::HandoffAllowed {
                decision: after, ..
            },
        ) => Some(Change {
            seq,
            kind: ChangeKind::Looser,
            what: format!("handoff {from} → {to} ({output_type}) allowed"),
            rule_before: before.rule_id.to_string(),
            rule_after: after.rule_id.to_string(),
            fields_newly_removed: Vec::new(),
            fields_newly_passed: Vec::new(),
        }),
        _ => None,
    }
}

fn rule(decision: &str, scoping: &Arc<str>) -> String {
    if decision == &**scoping {
        decision.to_owned()
    } else {
        format!("{decision}; scoped by {scoping}")
    }
}

fn verdict_change(before: Verdict, after: Verdict) -> ChangeKind {
    match (before, after) {
        (Verdict::Allow, Verdict::Deny) => ChangeKind::Stricter,
        (Verdict::Deny, Verdict::Allow) => ChangeKind::Looser,
        _ => ChangeKind::Changed,
    }
}

/// A decision kind as recorded (`capability`, `tool_call`...).
fn kind_name(kind: docket_policies::DecisionKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
