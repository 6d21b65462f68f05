//! Which recorded runs a bundle change would have affected (docs/governance.md#bundle-versions):
//! a what-if of each run under the new bundle, summed per run and per deciding rule. What
//! `docket policy set-rules` answers with, and `docket replay --all --what-if` prints.

use std::collections::BTreeMap;

use serde::Serialize;

use docket_decider::RunEvent;
use docket_policies::PolicyBundle;

use crate::report::ReplayError;
use crate::what_if::{ChangeKind, what_if};

/// One run the change would have decided otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AffectedRun {
    pub run_id: String,
    /// Decisions that come out stricter, looser, or otherwise changed.
    pub stricter: usize,
    pub looser: usize,
    pub changed: usize,
    /// The run would have taken another path (a denial, a stop, another end).
    pub path_changes: bool,
    /// The rules deciding the changed decisions under the new bundle, by id.
    pub rules: Vec<String>,
}

/// A rule under the new bundle that decides recorded decisions otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleEffect {
    /// The runs it changes, in the order given.
    pub runs: Vec<String>,
    /// The decisions it changes, over those runs.
    pub decisions: usize,
}

/// Every recorded run re-decided under a new bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Affected {
    /// Runs re-decided.
    pub runs_compared: usize,
    /// The runs that would have been decided otherwise, in the order given.
    pub runs: Vec<AffectedRun>,
    /// Per deciding rule under the new bundle (steps that name no rule, such as a call or a
    /// ticket, count in their run only).
    pub per_rule: BTreeMap<String, RuleEffect>,
}

/// Re-decides each of `runs` (id and recorded events) under `bundle` (source text
/// `source`, named `name`), with the decider version each recorded.
///
/// # Errors
/// [`ReplayError`] naming nothing but the first log that is not a run's; the caller
/// knows which run it passed.
pub fn affected_runs<'a>(
    runs: impl IntoIterator<Item = (&'a str, &'a [RunEvent])>,
    bundle: &PolicyBundle,
    source: &str,
    name: &str,
) -> Result<Affected, (String, ReplayError)> {
    let mut out = Affected {
        runs_compared: 0,
        runs: Vec::new(),
        per_rule: BTreeMap::new(),
    };
    for (run_id, events) in runs {
        out.runs_compared += 1;
        let report = what_if(events, bundle, source, name).map_err(|e| (run_id.to_owned(), e))?;
        if report.unchanged() {
            continue;
        }
        let mut run = AffectedRun {
            run_id: run_id.to_owned(),
            stricter: 0,
            looser: 0,
            changed: 0,
            path_changes: report.path_change.is_some(),
            rules: Vec::new(),
        };
        for change in &report.changes {
            match change.kind {
                ChangeKind::Stricter => run.stricter += 1,
                ChangeKind::Looser => run.looser += 1,
                ChangeKind::Changed => run.changed += 1,
            }
            if change.rule_after.is_empty() {
                continue;
            }
            let effect = out
                .per_rule
                .entry(change.rule_after.clone())
                .or_insert_with(|| RuleEffect {
                    runs: Vec::new(),
                    decisions: 0,
                });
            effect.decisions += 1;
            if effect.runs.last().map(String::as_str) != Some(run_id) {
                effect.runs.push(run_id.to_owned());
            }
            if !run.rules.contains(&change.rule_after) {
                run.rules.push(change.rule_after.clone());
            }
        }
        run.rules.sort();
        out.runs.push(run);
    }
    Ok(out)
}
