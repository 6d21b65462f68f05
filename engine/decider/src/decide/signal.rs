//! Outside events in the decider (docs/events.md#outside-events): an event sent to a run is
//! decided against the bundle's `[[signals]]` (its sender, its size) and kept or refused;
//! kept, it is written to its domain when the signal names one, and delivered to the first
//! agent waiting for it. An agent's `wait` with `event` receives the first kept event of
//! that name at once, or waits (`signal.awaited`, with a timeout timer when it gives
//! `until` or `for`). A delivery crosses the gate as content from `events`, scoped for
//! the receiving agent; a timeout calls the agent again with `event_timed_out`.
//!
//! ```text
//! signal.received ─▶ policy.decided ─▶ signal.kept ─▶ (domain.written) ─▶ signal.delivered ─▶ handoff.allowed ─▶ agent.call_scheduled
//!                                  └─▶ signal.refused                  └─ nobody waits: kept for the run
//! wait{event} ─▶ policy.decided ─▶ a kept event: signal.delivered ...
//!                              └─▶ none: (timer.set) signal.awaited ─▶ timer.fired ─▶ signal.timed_out ─▶ agent.call_scheduled
//! ```

use super::*;
use crate::events::SIGNALS;
use crate::events::signal::{
    EVENT_TIMED_OUT_TYPE, EVENT_TYPE, EVENTS_SOURCE, SignalAwaited, SignalDelivered, SignalKept,
    SignalReceived, SignalRefused, SignalTimedOut,
};
use crate::events::timer::{TIMERS_SOURCE, TimerSet};
use crate::state::SignalPhase;
use docket_policies::StopCondition;
use docket_protocol::{AgentId, SignalId, TimerId};

/// The longest idempotency key a sender may give.
pub const MAX_SIGNAL_KEY_BYTES: usize = 200;

/// A sender's key that already recorded an event: the event is not recorded again.
pub(super) fn check_duplicate(state: &RunState, input: &SignalReceived) -> Result<(), Rejection> {
    match input
        .idempotency_key
        .as_deref()
        .and_then(|k| state.signal_with_key(k))
    {
        Some(signal_id) => Err(Rejection::SignalRecorded {
            signal_id: signal_id.clone(),
        }),
        None => Ok(()),
    }
}

/// Whether an event can be received: the run's version knows events, and the event is
/// named and says who sent it.
pub(super) fn check_signal(state: &RunState, input: &SignalReceived) -> Result<(), Rejection> {
    if state.decider_version() < SIGNALS {
        return Err(Rejection::SignalsUnknownTo(state.decider_version()));
    }
    if input.name.trim().is_empty() {
        return Err(Rejection::SignalUnnamed);
    }
    if input.by.trim().is_empty() {
        return Err(Rejection::SignalUnsigned(input.name.clone()));
    }
    if input
        .idempotency_key
        .as_deref()
        .is_some_and(|k| k.is_empty() || k.len() > MAX_SIGNAL_KEY_BYTES)
    {
        return Err(Rejection::SignalKey);
    }
    Ok(())
}

impl Batch<'_> {
    /// An outside event received (its event already pushed): decided, then kept, written
    /// to its domain and delivered to an agent waiting for it, or refused.
    pub(super) fn on_signal(&mut self, received: &SignalReceived) {
        let Some(signal_id) = self.state.signals.keys().next_back().cloned() else {
            return;
        };
        let name = received.name.clone();
        let bytes = docket_policies::canonical_json_text(&received.payload).len();
        let decision = self.bundle.decide_signal(&name, &received.by, bytes);
        let allowed = decision.is_allowed();
        self.push(RunEvent::PolicyDecided {
            subject: signal_id.to_string(),
            decision: decision.clone(),
        });
        if !allowed {
            self.push(RunEvent::SignalRefused(SignalRefused {
                signal_id,
                name,
                reason: decision.reason.to_string(),
            }));
            return;
        }
        self.push(RunEvent::SignalKept(SignalKept {
            signal_id: signal_id.clone(),
            name: name.clone(),
        }));
        if let Some(domain) = self.bundle.signal(&name).and_then(|s| s.domain.clone()) {
            // Its domain's content rules hold for an outside event's write too: a refused
            // write leaves the domain as it was, and the event kept.
            let (decision, content) = self.domain_content(&domain, &received.payload, decision);
            if !decision.is_allowed() {
                self.push(RunEvent::DomainWriteDenied {
                    domain,
                    agent: received.by.as_str().into(),
                    episode_id: EpisodeId::root(),
                    decision,
                    by: None,
                });
            } else {
                let version = self
                    .state
                    .episodes
                    .domains
                    .get(&domain)
                    .map_or(0, Vec::len)
                    .saturating_add(1);
                self.push(RunEvent::DomainWritten {
                    domain,
                    version: u32::try_from(version).unwrap_or(u32::MAX),
                    agent: received.by.as_str().into(),
                    episode_id: EpisodeId::root(),
                    content,
                    decision,
                    by: None,
                });
            }
        }
        // The first wait for it, in the order the waits were made.
        let waiting = self
            .state
            .signal_waits
            .values()
            .find(|w| w.name == name)
            .cloned();
        if let Some(wait) = waiting {
            self.deliver(&signal_id, &wait.request_id, &wait.agent);
        }
    }

    /// An agent's `wait` for an outside event, allowed by `decision` (the gate and the
    /// bundle's `[[signals]]`): the first kept event of that name is delivered at once;
    /// without one, the wait is recorded with its timeout timer, if it has one.
    pub(super) fn wait_for_signal(
        &mut self,
        (agent, request_id, episode_id): (&str, &CallId, &EpisodeId),
        (name, reason): (&str, &str),
        timeout: Option<(TimerId, i64)>,
    ) {
        if let Some(signal_id) = self.state.first_kept(name).map(|(id, _)| id.clone()) {
            self.deliver(&signal_id, request_id, &AgentId::from(agent));
            return;
        }
        let counts = self.bundle.waiting_counts_against_wall_time();
        let timer_id = timeout.map(|(timer_id, due_at_ms)| {
            self.push(RunEvent::TimerSet(TimerSet {
                timer_id: timer_id.clone(),
                request_id: request_id.clone(),
                agent: agent.into(),
                episode_id: episode_id.clone(),
                due_at_ms,
                reason: format!("the timeout of a wait for `{name}`: {reason}"),
                counts_against_wall_time: counts,
                effect_id: None,
            }));
            timer_id
        });
        self.push(RunEvent::SignalAwaited(SignalAwaited {
            request_id: request_id.clone(),
            agent: agent.into(),
            episode_id: episode_id.clone(),
            name: name.to_owned(),
            reason: reason.to_owned(),
            timeout: timer_id,
            counts_against_wall_time: counts,
        }));
    }

    /// Hands the kept event `signal_id` to `agent`, whose call `request_id` waits for it:
    /// its payload crosses the gate as content from `events`, and the agent is called
    /// again with it.
    fn deliver(&mut self, signal_id: &SignalId, request_id: &CallId, agent: &AgentId) {
        let Some(signal) = self.state.signals.get(signal_id).cloned() else {
            return;
        };
        self.push(RunEvent::SignalDelivered(SignalDelivered {
            signal_id: signal_id.clone(),
            name: signal.name.clone(),
            request_id: request_id.clone(),
            agent: agent.clone(),
        }));
        self.episode = self.episode_of_call(request_id);
        let authority = PolicyDecision {
            kind: DecisionKind::Signal,
            verdict: Verdict::Allow,
            rule_id: format!("signals.{}.agents", signal.name).into(),
            reason: format!(
                "`{}` from {} is delivered to {agent}, which waits for it",
                signal.name, signal.by
            )
            .into(),
            bundle_hash: self.bundle.hash(),
            chain: Vec::new(),
        };
        let payload = signal.payload.as_deref().cloned().unwrap_or(Value::Null);
        let content = self.gate_content(
            EVENTS_SOURCE,
            agent.as_str(),
            (EVENT_TYPE, InputKind::Decision),
            &payload,
            &authority,
        );
        let input = DecisionInput::new(
            EVENTS_SOURCE,
            EVENT_TYPE,
            Arc::new(json!({
                    "signal_id": signal_id,
                    "name": signal.name,
                    "by": signal.by,
                    "payload": *content,
            })),
        );
        self.call_again(request_id, input);
    }

    /// A timer fired that is the timeout of a wait for an event: the wait ends and the
    /// agent is called again with `event_timed_out`. Returns false for any other timer.
    pub(super) fn on_wait_timed_out(&mut self, timer_id: &TimerId, fired_at_ms: i64) -> bool {
        let Some(wait) = self.state.wait_timed_by(timer_id).cloned() else {
            return false;
        };
        let due_at_ms = self
            .state
            .timers
            .get(timer_id)
            .map_or(fired_at_ms, |t| t.set.due_at_ms);
        self.push(RunEvent::SignalTimedOut(SignalTimedOut {
            request_id: wait.request_id.clone(),
            agent: wait.agent.clone(),
            name: wait.name.clone(),
            timer_id: timer_id.clone(),
        }));
        self.episode = wait.episode_id.clone();
        let input = DecisionInput::new(
            TIMERS_SOURCE,
            EVENT_TIMED_OUT_TYPE,
            Arc::new(json!({
                    "event": wait.name,
                    "timer_id": timer_id,
                    "reason": wait.reason,
                    "due_at_ms": due_at_ms,
                    "fired_at_ms": fired_at_ms,
                    "late_ms": (fired_at_ms - due_at_ms).max(0),
            })),
        );
        self.call_again(&wait.request_id, input);
        true
    }

    /// The refusal of a write to `domain` when it is where agents annotate an outside
    /// event and `content` does not name one received (`"signal_id"`, an event of that
    /// name kept or delivered): an annotation is about an event, which it never alters.
    /// `None` for any other domain, or an annotation that names its event.
    pub(super) fn annotation_refused(
        &self,
        domain: &str,
        content: &Value,
    ) -> Option<PolicyDecision> {
        let spec = self.bundle.signal_annotated_in(domain)?;
        let named = content.get("signal_id").and_then(Value::as_str);
        let received = named.and_then(|id| self.state.signals.get(&SignalId::from(id)));
        let reason = match (named, received) {
            (None, _) => format!(
                "`{domain}` holds annotations of `{}` events: the content must name the event it annotates (\"signal_id\")",
                spec.name
            ),
            (Some(id), None) => format!("{id} is no event this run received"),
            (Some(id), Some(s)) if s.name != spec.name => {
                format!(
                    "{id} is a `{}` event; `{domain}` annotates `{}` events",
                    s.name, spec.name
                )
            }
            (Some(id), Some(s)) if s.phase == SignalPhase::Refused => {
                format!("{id} was refused; there is nothing to annotate")
            }
            (Some(_), Some(_)) => return None,
        };
        Some(PolicyDecision {
            kind: DecisionKind::DomainWrite,
            verdict: Verdict::Deny,
            rule_id: format!("signals.{}.annotations", spec.name).into(),
            reason: reason.into(),
            bundle_hash: self.bundle.hash(),
            chain: Vec::new(),
        })
    }

    /// A refused `wait` for an event: recorded as a refused action of the episode, and
    /// the agent told (as a refused timer is).
    pub(super) fn refuse_wait(
        &mut self,
        (agent, request_id, episode_id): (&str, &CallId, &EpisodeId),
        detail: Value,
        decision: &PolicyDecision,
    ) {
        self.push(RunEvent::EpisodeActionDenied {
            episode_id: episode_id.clone(),
            agent: agent.into(),
            action: "wait".to_owned(),
            detail,
            decision: decision.clone(),
            condition: StopCondition::PolicyBlocks,
        });
        if !self.refusals_repeat(episode_id) {
            self.tell(
                agent,
                request_id,
                "wait",
                decision,
                StopCondition::PolicyBlocks,
            );
        }
    }
}
