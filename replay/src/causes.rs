//! The causal order of a run's log: for each event, the earlier event it follows from.
//! A decision follows from the recorded input of its batch; an input follows from the
//! decision that asked for it (an agent's answer from its call, a tool's result from
//! its scheduling, an effect's dry run or execution from the effect's last step, a
//! human's decision from the ticket, an override from the block). What-if uses it to say
//! what would not have happened after a decision that comes out otherwise: the
//! decision's consequences, and not the independent work around it (another branch of a
//! fan-out, an unrelated effect).

use docket_decider::{AgentCallFailed, AgentResponded, CircuitReading, HumanDecided};
use std::collections::BTreeMap;

use docket_decider::{EffectId, RunEvent, TicketSubject};

/// The effect an effect event or effect ticket is about.
fn effect_of(event: &RunEvent) -> Option<&EffectId> {
    Some(match event {
        RunEvent::EffectRequested(e) => &e.effect_id,
        RunEvent::EffectDeduplicated(e) => &e.effect_id,
        RunEvent::EffectAdmitted(e) => &e.effect_id,
        RunEvent::EffectRefused(e) => &e.effect_id,
        RunEvent::EffectReady(e) => &e.effect_id,
        RunEvent::EffectStarted(e) => &e.effect_id,
        RunEvent::EffectSandboxStarted(e) => &e.effect_id,
        RunEvent::EffectSandboxRan(e) => &e.effect_id,
        RunEvent::EffectVerifierCalled(e) => &e.effect_id,
        RunEvent::EffectSettled(e) => &e.effect_id,
        RunEvent::EffectDryRun(e) => &e.effect_id,
        RunEvent::EffectKillSwitchChecked(e) => &e.effect_id,
        RunEvent::EffectApplied(e) => &e.effect_id,
        RunEvent::EffectFailed(e) => &e.effect_id,
        RunEvent::EffectVerified(e) | RunEvent::EffectRecovered(e) => &e.effect_id,
        RunEvent::Escalated {
            subject: TicketSubject::Effect { effect_id, .. },
            ..
        } => effect_id,
        _ => return None,
    })
}

/// For each event of `events` (a run's log), the index of the event it follows from
/// (`None` for `run.requested`, and for an input whose cause the log does not hold). One
/// pass, each cause looked up by its id.
pub(crate) fn causes(events: &[RunEvent]) -> Vec<Option<usize>> {
    let mut out = Vec::with_capacity(events.len());
    let mut batch_input = None;
    let mut calls: BTreeMap<&str, usize> = BTreeMap::new();
    let mut tools: BTreeMap<&str, usize> = BTreeMap::new();
    let mut tickets: BTreeMap<&str, usize> = BTreeMap::new();
    let mut effects: BTreeMap<&str, usize> = BTreeMap::new();
    let mut blocked = None;
    for (i, event) in events.iter().enumerate() {
        if !event.is_input() {
            out.push(batch_input);
            match event {
                RunEvent::AgentCallScheduled { request, .. } => {
                    calls.insert(request.request_id.as_str(), i);
                }
                RunEvent::ToolCallScheduled(t) => {
                    tools.insert(t.tool_call_id.as_str(), i);
                }
                RunEvent::Escalated { ticket, .. } => {
                    tickets.insert(ticket.as_str(), i);
                }
                RunEvent::RunBlocked { .. } => blocked = Some(i),
                _ => {}
            }
            if let Some(id) = effect_of(event) {
                effects.insert(id.as_str(), i);
            }
            continue;
        }
        batch_input = Some(i);
        let cause = match event {
            RunEvent::AgentResponded(AgentResponded { request_id, .. })
            | RunEvent::AgentCallFailed(AgentCallFailed { request_id, .. })
            | RunEvent::CircuitChecked(CircuitReading { request_id, .. }) => {
                calls.get(request_id.as_str()).copied()
            }
            RunEvent::ToolReturned(t) => tools.get(t.tool_call_id.as_str()).copied(),
            RunEvent::ToolFailed(t) => tools.get(t.tool_call_id.as_str()).copied(),
            RunEvent::HumanDecided(HumanDecided { ticket, .. }) => {
                tickets.get(ticket.as_str()).copied()
            }
            RunEvent::HumanOverrode(_) => blocked,
            RunEvent::RunRequested(_) => None,
            other => effect_of(other).and_then(|id| effects.get(id.as_str()).copied()),
        };
        out.push(cause);
    }
    out
}

/// Which events of `events` follow, directly or not, from one marked in `from` (marked
/// events included).
pub(crate) fn consequences(events: &[RunEvent], mut from: Vec<bool>) -> Vec<bool> {
    from.resize(events.len(), false);
    for (i, cause) in causes(events).into_iter().enumerate() {
        if let Some(c) = cause
            && from[c]
        {
            from[i] = true;
        }
    }
    from
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_decider::{EffectApplied, EffectReceipt, EffectRefused};

    #[test]
    fn an_effects_execution_follows_from_its_last_step_and_a_decision_from_its_input() {
        let refused = |id: &str| {
            RunEvent::EffectRefused(EffectRefused {
                effect_id: id.into(),
                rule_id: "r".into(),
                reason: "no".into(),
                escalated_to: None,
            })
        };
        let applied = |id: &str| {
            RunEvent::EffectApplied(EffectApplied {
                effect_id: id.into(),
                receipt: EffectReceipt {
                    result: serde_json::Value::Null,
                    drift: None,
                },
                at_ms: 0,
                reused_from: None,
            })
        };
        let events = vec![
            RunEvent::RunFailed { reason: "x".into() },
            refused("e1"),
            refused("e2"),
            applied("e1"),
            RunEvent::RunFailed { reason: "y".into() },
            applied("e2"),
        ];
        assert_eq!(
            causes(&events),
            [None, None, None, Some(1), Some(3), Some(2)]
        );
        let marked = consequences(&events, vec![false, true]);
        assert_eq!(marked, [false, true, false, true, true, false]);
    }
}
