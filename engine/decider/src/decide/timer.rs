//! Durable timers in the decider (docs/agent-protocol.md#waiting-wait): an agent's `wait`
//! is decided (the episode's budget gate, then the bundle's `[waiting] max_wait_ms`) and,
//! allowed, recorded as `timer.set` with the time it is due, computed from the response's
//! recorded time: the decider reads no clock. The runtime records `timer.fired` with the
//! time it fired, at or after that; the agent is then called again with a `timer_fired`
//! decision input saying when it was due, when it fired and how late.
//!
//! ```text
//! wait ─▶ policy.decided ─▶ allowed ─▶ timer.set ─▶ (the runtime waits) ─▶ timer.fired (input)
//!                 │                                                      ─▶ agent.call_scheduled
//!                 └─ denied ─▶ episode.action_denied ─▶ agent.call_scheduled (the agent told)
//! ```

use super::*;
use crate::events::TIMERS;
use crate::events::timer::{TIMER_FIRED_TYPE, TIMERS_SOURCE, TimerFired, TimerSet};
use docket_protocol::TimerId;

/// Whether a firing applies: the timer was set, has not fired nor been cleared (the event
/// it was the timeout for came first), and is due by then.
pub(super) fn check_fired(state: &RunState, fired: &TimerFired) -> Result<(), Rejection> {
    let timer = state
        .timers
        .get(&fired.timer_id)
        .ok_or_else(|| Rejection::UnknownTimer(fired.timer_id.to_string()))?;
    if timer.cleared {
        return Err(Rejection::TimerCleared(fired.timer_id.to_string()));
    }
    if let Some(at_ms) = timer.fired_at_ms {
        return Err(Rejection::TimerFired {
            timer_id: fired.timer_id.to_string(),
            at_ms,
        });
    }
    if fired.at_ms < timer.set.due_at_ms {
        return Err(Rejection::TimerNotDue {
            timer_id: fired.timer_id.to_string(),
            due_at_ms: timer.set.due_at_ms,
            at_ms: fired.at_ms,
        });
    }
    Ok(())
}

impl Batch<'_> {
    /// An agent's `wait`: decided, then its timer set (or, for a wait on an outside
    /// event, `signal.rs` takes over), or the agent told it was refused.
    pub(super) fn wait(&mut self, agent: &str, request_id: &CallId, action: &Action) {
        let Action::Wait { reason, event, .. } = action else {
            return;
        };
        let Some(asker) = self.state.calls.get(request_id) else {
            return;
        };
        let episode_id = asker.recorded.episode_id.clone();
        let timer_id = TimerId::from(format!(
            "{}/timer-{}",
            self.run_id(),
            self.state.timers_set + 1
        ));
        // The response's recorded time: `for` counts from it.
        let responded_at = self.now_ms;
        let due_at_ms = match crate::protocol::wait_due_ms(action, responded_at) {
            Some(Ok(due)) => due,
            // Validated before it was recorded; a response built otherwise waits for nothing.
            _ => Some(responded_at),
        };
        let decision = if self.state.decider_version() < TIMERS {
            Some(PolicyDecision {
                kind: DecisionKind::Wait,
                verdict: Verdict::Deny,
                rule_id: "decider_version".into(),
                reason: format!(
                    "runs recorded by decider version {} cannot wait (timers came with version {TIMERS})",
                    self.state.decider_version()
                )
                .into(),
                bundle_hash: self.bundle.hash(),
                chain: Vec::new(),
            })
        } else {
            self.state.episode_gate(self.bundle, &episode_id)
        };
        let decide_time = |due: i64| {
            self.bundle
                .decide_wait(agent, due.saturating_sub(responded_at))
        };
        let decision = decision.unwrap_or_else(|| match (event, due_at_ms) {
            (Some(name), due) => {
                let d = self.bundle.decide_signal_wait(agent, name);
                match due {
                    Some(due) if d.is_allowed() => decide_time(due),
                    _ => d,
                }
            }
            (None, due) => decide_time(due.unwrap_or(responded_at)),
        });
        let verdict = decision.verdict;
        // The timer's id names the decision when the wait has a time; a wait for an event
        // alone is named by the call that waits.
        let subject = match due_at_ms {
            Some(_) => timer_id.to_string(),
            None => request_id.to_string(),
        };
        self.push(RunEvent::PolicyDecided {
            subject,
            decision: decision.clone(),
        });
        let who = (agent, request_id, &episode_id);
        if verdict != Verdict::Allow {
            // Recorded as a refused action of the episode (counted, so an agent that keeps
            // asking stops on `failure_repeats`); the agent is told and may wait less.
            let detail = match event {
                None => json!({
                    "timer_id": timer_id,
                    "due_at_ms": due_at_ms.unwrap_or(responded_at),
                    "reason": reason,
                }),
                Some(name) => json!({ "event": name, "due_at_ms": due_at_ms, "reason": reason }),
            };
            self.refuse_wait(who, detail, &decision);
            return;
        }
        if let Some(name) = event {
            let timeout = due_at_ms.map(|due| (timer_id, due));
            self.wait_for_signal(who, (name, reason), timeout);
            return;
        }
        self.push(RunEvent::TimerSet(TimerSet {
            timer_id,
            request_id: request_id.clone(),
            agent: agent.into(),
            episode_id,
            due_at_ms: due_at_ms.unwrap_or(responded_at),
            reason: reason.clone(),
            counts_against_wall_time: self.bundle.waiting_counts_against_wall_time(),
            effect_id: None,
        }));
    }

    /// A timer fired: the agent that waited is called again with when it was due, when it
    /// fired and how late.
    pub(super) fn on_timer_fired(&mut self, fired: &TimerFired) {
        // The timeout of a wait for an outside event.
        if self.on_wait_timed_out(&fired.timer_id, fired.at_ms) {
            return;
        }
        // A scheduled side effect's time came.
        if let Some(effect_id) = self
            .state
            .timers
            .get(&fired.timer_id)
            .and_then(|t| t.set.effect_id.clone())
        {
            self.on_effect_due(&effect_id);
            return;
        }
        let Some(timer) = self.state.timers.get(&fired.timer_id).cloned() else {
            return;
        };
        self.episode = timer.set.episode_id.clone();
        let input = DecisionInput::new(
            TIMERS_SOURCE,
            TIMER_FIRED_TYPE,
            Arc::new(json!({
                    "timer_id": fired.timer_id,
                    "reason": timer.set.reason,
                    "due_at_ms": timer.set.due_at_ms,
                    "fired_at_ms": fired.at_ms,
                    "late_ms": (fired.at_ms - timer.set.due_at_ms).max(0),
            })),
        );
        self.call_again(&timer.set.request_id, input);
    }
}
