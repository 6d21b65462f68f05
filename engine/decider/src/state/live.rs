//! The live part of the state: which answered calls later decisions may still read, so
//! that the state, and its snapshot, holds those and not every call of the run
//! (docs/replay.md#long-runs). The others are left to the log, where status, inspect and
//! diff read them ([`super::RunHistory`]).
//!
//! A decision reads a call only when its input concerns the call or something that
//! refers to it: the call's own answer (it is pending), a capability's answer (the asker
//! is the pending helper's `reply_to`), a classifier's verdict (`classifies`), an effect's
//! or a tool call's outcome (their asker), a human's decision (the open ticket's subject),
//! an override (the block's held step), a child episode's result (the running child's
//! `spawned_by`), a fan-out's join (its group). So the calls kept are the pending ones and
//! those such open things name, closed under `reply_to`, `classifies` and `branch_of`.
//!
//! Calls are dropped only before an agent's answer, an agent's failure, a human's decision
//! or an override is folded: each is the first event of its batch (`Command::to_event`),
//! so a call is never dropped in the middle of the decision that read it, and the call
//! just answered stays until the next such input (the runtime reads its failure code).
//! Dropping waits until the map holds twice what was kept last time (and at least 8), plus
//! a 32nd of the effects, tool calls, tickets and episodes it scans, so its cost is
//! spread over the calls scheduled in between. (The decider's own tests drop at every
//! input, so that every canned history checks that nothing dropped was read.)
//! Dropping is decided from the folded events alone, so a state folded from a snapshot
//! drops exactly what the state folded from the first event drops.

use docket_protocol::CallId;
use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use super::RunState;
use super::episode::EpisodePhase;

/// The map is pruned no more often than when it holds this many calls.
#[cfg(not(test))]
const PRUNE_FLOOR: usize = 8;

/// How the decider's own tests prune: at every input (the default, so that every canned
/// history checks that no decision reads a dropped call), or never (every call kept, as
/// the state did before it was split), to compare the two.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pruning {
    EveryInput,
    Never,
}

#[cfg(test)]
thread_local! {
    pub(crate) static PRUNING: std::cell::Cell<Pruning> = const { std::cell::Cell::new(Pruning::EveryInput) };
}

impl RunState {
    /// Drops the answered calls no later decision reads (see the module's doc).
    pub(super) fn prune_calls(&mut self) {
        #[cfg(test)]
        let due = PRUNING.get() == Pruning::EveryInput;
        #[cfg(not(test))]
        let due = self.calls.len() >= self.prune_at.max(PRUNE_FLOOR);
        if !due {
            return;
        }
        let keep = self.calls_referred_to();
        self.calls
            .retain(|id, call| !call.answered || keep.contains(id));
        let scanned =
            self.effects.len() + self.tool_calls.len() + self.tickets.len() + self.episodes.count();
        self.prune_at = self.calls.len().saturating_mul(2) + scanned / 32;
    }

    /// The pending calls, the calls open things name, and those they refer to in turn.
    fn calls_referred_to(&self) -> BTreeSet<CallId> {
        let mut named: Vec<CallId> = self.pending.iter().cloned().collect();
        named.extend(self.verifier_calls.keys().cloned());
        let mut strings = Vec::new();
        for ticket in self.tickets.values().filter(|t| t.open) {
            strings_in(&ticket.subject, &mut strings);
        }
        for effect in self.effects.values().filter(|e| !e.phase.is_final()) {
            named.push(effect.requested.request_id.clone());
            strings_in(effect, &mut strings);
        }
        for tool in self.tool_calls.values() {
            if tool.phase.awaits_outcome() || tool.phase == super::ToolPhase::AwaitingReview {
                named.push(tool.request_id.clone());
            }
        }
        for timer in self.timers.values().filter(|t| t.pending()) {
            named.push(timer.set.request_id.clone());
        }
        named.extend(self.signal_waits.keys().cloned());
        for episode in self.episodes.in_order() {
            if matches!(episode.phase, EpisodePhase::Running | EpisodePhase::Review) {
                named.extend(episode.spawned_by.iter().cloned());
            }
        }
        if let Some(held) = &self.overridable {
            strings_in(held, &mut strings);
        }
        strings.extend(self.held.keys().cloned());
        strings.extend(self.gaps.keys().cloned());
        for gaps in self.gaps.values() {
            strings_in(gaps, &mut strings);
        }
        named.extend(
            strings
                .into_iter()
                .map(CallId::from)
                .filter(|id| self.calls.contains_key(id)),
        );
        let mut keep = BTreeSet::new();
        while let Some(id) = named.pop() {
            let Some(call) = self.calls.get(&id) else {
                continue;
            };
            if !keep.insert(id) {
                continue;
            }
            named.extend(call.reply_to.iter().cloned());
            named.extend(call.classifies.iter().map(|c| c.request_id.clone()));
            named.extend(call.branch_of.iter().map(|g| CallId::from(g.as_str())));
        }
        keep
    }

    /// Whether `id` names a call of this run that was scheduled, answered and left to the
    /// log (ids are `{run}/call-{n}`, numbered from 1 as they were scheduled).
    pub(crate) fn answered_and_dropped(&self, id: &CallId) -> bool {
        let Some(run) = self.run_id() else {
            return false;
        };
        let n = id
            .as_str()
            .strip_prefix(run.as_str())
            .and_then(|rest| rest.strip_prefix("/call-"))
            .and_then(|n| n.parse::<u32>().ok());
        !self.calls.contains_key(id)
            && !self.pending.contains(id)
            && n.is_some_and(|n| (1..=self.calls_scheduled).contains(&n))
    }

    /// Whether the call `id` is scheduled and not yet answered.
    #[must_use]
    pub fn is_pending(&self, id: &CallId) -> bool {
        self.pending.contains(id)
    }
}

/// Every string in `value`'s JSON form: the call ids an open thing may name, whichever
/// field holds them (a conservative reading: a string that is not a call id keeps nothing).
fn strings_in(value: &impl Serialize, out: &mut Vec<String>) {
    fn walk(v: Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(items) => items.into_iter().for_each(|i| walk(i, out)),
            Value::Object(map) => map.into_iter().for_each(|(_, i)| walk(i, out)),
            _ => {}
        }
    }
    if let Ok(v) = serde_json::to_value(value) {
        walk(v, out);
    }
}
