//! What-if: a run's recorded answers decided again under another policy bundle
//! (docs/replay.md#what-if). The run is re-decided from its start with the new bundle,
//! feeding it the recorded inputs in order, for as long as the run takes the same path;
//! each decision that comes out otherwise (a handoff, a capability request, a spawn, an
//! effect, a tool call, a limit, a stop condition, a ticket, the run's end) is classed
//! stricter, looser or changed, with the rule that decided it before and after. Where the
//! path first changes, the report classes that decision too, says what is decided
//! instead, and lists what the log holds that would not have happened: the
//! consequences of the recorded decisions that are not made, following the run's causal
//! order (everything after it when the new decision ends the run).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use docket_decider::{Command, RunEvent, RunRequested, RunState, batches, decide_in_place};
use docket_policies::PolicyBundle;

use crate::causes::consequences;
use crate::decisions::{DecisionArea, Outcome, Reading, handoff_rule, read};
use crate::report::ReplayError;

/// How a decision compares under the new bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Denied, refused, stopped or sent to a human now, or fewer fields cross.
    Stricter,
    /// Allowed now, or more fields cross.
    Looser,
    /// Decided the same way, by another rule or with other content.
    Changed,
}

impl ChangeKind {
    /// In words.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stricter => "stricter",
            Self::Looser => "looser",
            Self::Changed => "changed",
        }
    }
}

/// One decision that comes out otherwise under the new bundle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// 1-based sequence of the recorded event (for the decision where the path parts,
    /// the recorded event it takes the place of).
    pub seq: u64,
    /// Stricter, looser or changed.
    pub kind: ChangeKind,
    /// What kind of decision (`handoff`, `effect`, `limit`...).
    pub area: DecisionArea,
    /// What was decided, in words (`handoff reasoning → strategy (gaps_and_opportunities)`).
    pub what: String,
    /// The outcome as recorded (`None`: the log holds no such decision).
    pub before: Option<Outcome>,
    /// The outcome under the new bundle (`None`: it would not be decided).
    pub after: Option<Outcome>,
    /// The deciding rule as recorded.
    pub rule_before: String,
    /// The deciding rule under the new bundle.
    pub rule_after: String,
    /// Fields that crossed as recorded and would not now.
    pub fields_newly_removed: Vec<String>,
    /// Fields that would cross now and did not as recorded.
    pub fields_newly_passed: Vec<String>,
    /// This is the decision where the run would first have taken another path.
    pub parts_path: bool,
}

/// One decision, as decided under the new bundle where the path parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decided {
    /// What kind of decision.
    pub area: DecisionArea,
    /// In words.
    pub what: String,
    /// Its outcome.
    pub outcome: Outcome,
    /// The deciding rule (empty when the event names none).
    pub rule: String,
}

impl From<Reading> for Decided {
    fn from(r: Reading) -> Self {
        Self {
            area: r.area,
            what: r.what,
            outcome: r.outcome,
            rule: r.rule,
        }
    }
}

/// What one recorded event decided, read as replay and what-if read every decision: its
/// kind, in words, its outcome and its deciding rule. `None` for a recorded input other
/// than an effect's execution, and for steps that decide nothing of their own (held
/// outputs, a verifier's call...). Reports built on the log use it so they class each
/// decision the way what-if does.
#[must_use]
pub fn decision_of(event: &RunEvent) -> Option<Decided> {
    read(event).map(Decided::from)
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
    /// The decisions made instead, from where the batch parts.
    pub instead: Vec<Decided>,
}

/// A recorded step that would not have happened as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Consequence {
    /// 1-based sequence in the log.
    pub seq: u64,
    /// Its event kind.
    pub kind: &'static str,
    /// What kind of step.
    pub area: DecisionArea,
    /// In words.
    pub what: String,
}

/// What a run would have been under another bundle, as far as its recorded answers go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhatIf {
    /// The run.
    pub run_id: String,
    /// Batches decided under the new bundle the same way or with changes only in content.
    pub batches_compared: usize,
    /// Recorded decisions that depend on values `docket shred` erased: taken as
    /// recorded, not decided again (docs/replay.md#shredded-values).
    pub not_rederivable: usize,
    /// Each decision that comes out otherwise, in the run's order; the last one parts the
    /// path when there is a path change with a decision to class.
    pub changes: Vec<Change>,
    /// Where the path first changes (`None`: the run would have gone the same way).
    pub path_change: Option<PathChange>,
    /// Recorded decisions that would not have happened as recorded, by kind: the
    /// consequences of the path change, in the run's causal order.
    pub not_as_recorded: BTreeMap<&'static str, usize>,
    /// The steps among them a reader asks about (handoffs, calls, spawns, effects, tool
    /// calls, domain writes, tickets, the run's end), in log order.
    pub would_not_happen: Vec<Consequence>,
}

impl WhatIf {
    /// Nothing would have been decided otherwise.
    #[must_use]
    pub fn unchanged(&self) -> bool {
        self.changes.is_empty() && self.path_change.is_none()
    }

    /// Changes per kind of decision: (area, stricter, looser, changed).
    #[must_use]
    pub fn by_area(&self) -> BTreeMap<DecisionArea, [usize; 3]> {
        let mut out: BTreeMap<DecisionArea, [usize; 3]> = BTreeMap::new();
        for c in &self.changes {
            let i = match c.kind {
                ChangeKind::Stricter => 0,
                ChangeKind::Looser => 1,
                ChangeKind::Changed => 2,
            };
            out.entry(c.area).or_default()[i] += 1;
        }
        out
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
    what_if_with_shredded(events, &BTreeSet::new(), bundle, source, name)
}

/// [`what_if`] of a run some of whose values `docket shred` erased: `shredded` holds the
/// sequence numbers (from 1) of the events holding a shredded value's marker. A batch
/// holding one is not decided again: its recorded events are folded as given (the
/// start under the new bundle) and its decisions counted as not re-derivable
/// (docs/replay.md#shredded-values).
///
/// # Errors
/// As [`what_if`].
pub fn what_if_with_shredded(
    events: &[RunEvent],
    shredded: &BTreeSet<u64>,
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
        not_rederivable: 0,
        changes: Vec::new(),
        path_change: None,
        not_as_recorded: BTreeMap::new(),
        would_not_happen: Vec::new(),
    };
    let mut state = RunState::default();
    for (start, recorded) in batches(events) {
        let first = &recorded[0];
        let seq = start as u64 + 1;
        let end = start + recorded.len();
        let command = if start == 0 {
            Some(Command::Start(rewritten.clone().into()))
        } else {
            Command::from_event(first)
        };
        let Some(command) = command else {
            return Err(ReplayError::NotAnInput {
                seq,
                kind: first.kind(),
            });
        };
        if shredded.range(seq..=end as u64).next().is_some() {
            // What the decider would make of an erased value cannot be known: the batch
            // is taken as recorded (its start under the new bundle).
            for (i, event) in recorded.iter().enumerate() {
                match (start + i, event) {
                    (0, RunEvent::RunRequested(_)) => {
                        state.apply(&RunEvent::RunRequested(Arc::new(rewritten.clone())));
                    }
                    _ => state.apply(event),
                }
            }
            report.not_rederivable += recorded.len() - 1;
            continue;
        }
        // Decided in place (a rejection leaves the state as it was): a copy of the state
        // per batch would make a long run's what-if quadratic.
        let decided = match decide_in_place(&mut state, bundle, command) {
            Ok(decided) => decided,
            Err(rejection) => {
                report.path_change = Some(PathChange {
                    seq,
                    why: format!(
                        "this recorded input would not have come: under the new bundle {rejection}"
                    ),
                    recorded_kinds: recorded.iter().map(RunEvent::kind).collect(),
                    decided_kinds: Vec::new(),
                    instead: Vec::new(),
                });
                let mut marked = vec![false; events.len()];
                marked[start..end].fill(true);
                not_happening(&mut report, events, marked);
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
        let compared = parts.map_or(recorded.len().min(decided.len()), |at| at);
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
            let (r, d) = (recorded.get(at), decided.get(at));
            let after = &state;
            let stops = |batch: &[RunEvent]| {
                batch
                    .iter()
                    .any(|e| matches!(e, RunEvent::RunBlocked { .. } | RunEvent::RunFailed { .. }))
            };
            let stopping = match (stops(recorded), stops(&decided)) {
                (false, true) => Some(ChangeKind::Stricter),
                (true, false) => Some(ChangeKind::Looser),
                _ => None,
            };
            if let Some(change) = parting(seq + at as u64, r, d, stopping) {
                report.changes.push(change);
            }
            report.path_change = Some(PathChange {
                seq,
                why: match (r, d) {
                    (Some(r), Some(d)) => {
                        format!("{} where the log records {}", d.kind(), r.kind())
                    }
                    (Some(r), None) => format!("no {} where the log records one", r.kind()),
                    (None, Some(d)) => format!("also {}", d.kind()),
                    (None, None) => "the batch differs".to_owned(),
                },
                recorded_kinds: recorded.iter().map(RunEvent::kind).collect(),
                decided_kinds: decided.iter().map(RunEvent::kind).collect(),
                instead: decided
                    .get(at..)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(read)
                    .map(Decided::from)
                    .collect(),
            });
            // The recorded decisions of this batch that are not made now, and, when
            // what is decided now ends the run, everything the log holds after it.
            let at = at.max(1);
            let mut marked = vec![false; events.len()];
            for (i, r) in recorded.iter().enumerate().skip(at) {
                marked[start + i] = !decided.get(at..).unwrap_or_default().contains(r);
            }
            if after.status().is_final() {
                marked[end..].fill(true);
            }
            not_happening(&mut report, events, marked);
            return Ok(report);
        }
        report.batches_compared += 1;
    }
    Ok(report)
}

/// Fills in what would not have happened: the `marked` events and their consequences.
fn not_happening(report: &mut WhatIf, events: &[RunEvent], marked: Vec<bool>) {
    let marked = consequences(events, marked);
    for (i, event) in events.iter().enumerate().filter(|(i, _)| marked[*i]) {
        if !event.is_input() {
            *report.not_as_recorded.entry(event.kind()).or_default() += 1;
        }
        if matches!(
            event,
            RunEvent::PolicyDecided { .. } | RunEvent::RiskClassified { .. }
        ) {
            continue;
        }
        if let Some(r) = read(event) {
            report.would_not_happen.push(Consequence {
                seq: i as u64 + 1,
                kind: event.kind(),
                area: r.area,
                what: r.what,
            });
        }
    }
}

/// Stricter when the outcome rises, looser when it falls; a decision that appears is
/// stricter when it holds something up, one that disappears looser when it did.
fn classify(before: Option<Outcome>, after: Option<Outcome>) -> ChangeKind {
    match (before, after) {
        (Some(b), Some(a)) if a > b => ChangeKind::Stricter,
        (Some(b), Some(a)) if a < b => ChangeKind::Looser,
        (None, Some(a)) if a > Outcome::Allowed => ChangeKind::Stricter,
        (Some(b), None) if b > Outcome::Allowed => ChangeKind::Looser,
        _ => ChangeKind::Changed,
    }
}

/// The decision where the path parts: `decided` takes the place of `recorded` (either
/// may be absent). Classed by outcome, named by the stricter side's kind of decision (a
/// budget stop in place of a call is a limit newly hit; a call in place of the stop, a
/// limit no longer hit). Decisions of the same outcome are classed by `stopping`: the
/// new batch stops the run where the recorded one did not (stricter), or the reverse.
fn parting(
    seq: u64,
    recorded: Option<&RunEvent>,
    decided: Option<&RunEvent>,
    stopping: Option<ChangeKind>,
) -> Option<Change> {
    let r = recorded.and_then(read);
    let d = decided.and_then(read);
    if r.is_none() && d.is_none() {
        return None;
    }
    let (before, after) = (r.as_ref().map(|r| r.outcome), d.as_ref().map(|d| d.outcome));
    let area = match (&r, &d) {
        (Some(r), Some(d)) if r.outcome > d.outcome => r.area,
        (_, Some(d)) => d.area,
        (Some(r), None) => r.area,
        (None, None) => return None,
    };
    let what = match (&r, &d) {
        (Some(r), Some(d)) if r.what == d.what => d.what.clone(),
        (Some(r), Some(d)) => format!("{} where the log records {}", d.what, r.what),
        (None, Some(d)) => format!("also {}", d.what),
        (Some(r), None) => format!("no {}", r.what),
        (None, None) => return None,
    };
    let rule = |x: &Option<Reading>| x.as_ref().map(|x| x.rule.clone()).unwrap_or_default();
    Some(Change {
        seq,
        kind: match classify(before, after) {
            ChangeKind::Changed => stopping.unwrap_or(ChangeKind::Changed),
            kind => kind,
        },
        area,
        what,
        before,
        after,
        rule_before: rule(&r),
        rule_after: rule(&d),
        fields_newly_removed: Vec::new(),
        fields_newly_passed: Vec::new(),
        parts_path: true,
    })
}

/// How `decided` differs from `recorded` (events of the same kind at the same position
/// in a batch): another outcome, another deciding rule, or other fields crossing.
fn compare(seq: u64, recorded: &RunEvent, decided: &RunEvent) -> Option<Change> {
    let r = read(recorded)?;
    let d = read(decided)?;
    let (removed, passed) = match (recorded, decided) {
        (RunEvent::HandoffAllowed { audit: a, .. }, RunEvent::HandoffAllowed { audit: b, .. }) => {
            let was = &a.context_after_scoping.fields_included;
            let now = &b.context_after_scoping.fields_included;
            if was == now {
                (Vec::new(), Vec::new())
            } else {
                let (was_set, now_set): (BTreeSet<&String>, BTreeSet<&String>) =
                    (was.iter().collect(), now.iter().collect());
                (
                    was.iter()
                        .filter(|f| !now_set.contains(f))
                        .cloned()
                        .collect(),
                    now.iter()
                        .filter(|f| !was_set.contains(f))
                        .cloned()
                        .collect(),
                )
            }
        }
        _ => (Vec::<String>::new(), Vec::<String>::new()),
    };
    if r.outcome == d.outcome && r.rule == d.rule && removed.is_empty() && passed.is_empty() {
        return None;
    }
    let kind = match (removed.is_empty(), passed.is_empty()) {
        _ if r.outcome != d.outcome => classify(Some(r.outcome), Some(d.outcome)),
        (false, true) => ChangeKind::Stricter,
        (true, false) => ChangeKind::Looser,
        _ => ChangeKind::Changed,
    };
    // Named by the stricter side's kind of decision: a tool call the budget gate now
    // refuses is a limit newly hit.
    let (area, what) = if d.outcome > r.outcome && d.area != r.area {
        (d.area, d.what)
    } else {
        (r.area, r.what)
    };
    // A handoff scoped by another rule that played a part names both rules.
    let rule_after = match decided {
        RunEvent::HandoffAllowed {
            decision, audit, ..
        } => handoff_rule(decision, audit),
        _ => d.rule,
    };
    Some(Change {
        seq,
        kind,
        area,
        what,
        before: Some(r.outcome),
        after: Some(d.outcome),
        rule_before: r.rule,
        rule_after,
        fields_newly_removed: removed,
        fields_newly_passed: passed,
        parts_path: false,
    })
}
