//! Circuit breakers across runs (docs/governance.md#circuit-breaker).
//!
//! An agent's breaker counts its calls and failures in every run of a data directory, so
//! the decider cannot read it: the runtime reads it before a call and, when the failures
//! reached the bundle's rate (decider version 13; version 12 counted failures in a row),
//! records what it read (`agent.circuit_checked`). This
//! file decides from that record alone: half-open (the cool-down has passed since the last
//! failure or probe: the call is made, as the one probe) or open (the call is not made:
//! `agent.call_degraded`, and the caller gets a graceful degradation response). Replay
//! decides again from the record, without the circuits stream.

use super::*;
use crate::events::TicketSubject;
use crate::state::CIRCUIT_OPEN_CODE;
use docket_policies::{ErrorClass, OnOpen};

/// Whether a reading applies: a call scheduled and not answered, to the agent whose
/// circuit was read.
pub(super) fn check_reading(state: &RunState, reading: &CircuitReading) -> Result<(), Rejection> {
    let id = reading.request_id.to_string();
    let call = state.calls.get(&reading.request_id).ok_or_else(|| {
        if state.answered_and_dropped(&reading.request_id) {
            Rejection::AlreadyAnswered(id.clone())
        } else {
            Rejection::UnknownCall(id.clone())
        }
    })?;
    if call.answered {
        return Err(Rejection::AlreadyAnswered(id));
    }
    if call.recorded.target_agent != reading.agent {
        return Err(Rejection::CircuitOfAnotherAgent {
            request_id: id,
            target: call.recorded.target_agent.to_string(),
            agent: reading.agent.to_string(),
        });
    }
    Ok(())
}

impl Batch<'_> {
    /// Decides the breaker from what was read: half-open lets the call go (the runtime
    /// makes it); open settles it with a degradation response, or blocks the run when
    /// the bundle says `on_open = "block"`.
    pub(super) fn on_circuit_checked(&mut self, reading: &CircuitReading) {
        let agent = reading.agent.as_str();
        let request_id = &reading.request_id;
        let d = match reading.window {
            Some(w) => self.bundle.decide_circuit_rate(
                agent,
                (w.calls, w.failures),
                reading.ms_since_last_attempt(),
            ),
            None => self.bundle.decide_circuit(
                agent,
                reading.consecutive_failures,
                reading.ms_since_last_attempt(),
            ),
        };
        let open = !d.is_allowed();
        self.push(RunEvent::PolicyDecided {
            subject: request_id.to_string(),
            decision: d.clone(),
        });
        if !open {
            return;
        }
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        let rule = d.rule_id.to_string();
        // The rate's reason names the agent already.
        let reason = if reading.window.is_some() {
            d.reason.to_string()
        } else {
            format!("circuit open for {agent}: {}", d.reason)
        };
        let settings = &self.bundle.spec().defaults.circuit_breaker;
        let details = match reading.window {
            Some(w) => json!({
                "ruleId": rule,
                "callsInWindow": w.calls,
                "failuresInWindow": w.failures,
                "windowMs": w.window_ms,
                "failureRatePercent": settings.failure_rate_percent,
                "lastFailureMs": reading.last_failure_ms,
            }),
            None => json!({
                "ruleId": rule,
                "consecutiveFailures": reading.consecutive_failures,
                "lastFailureMs": reading.last_failure_ms,
                "threshold": settings.failure_threshold,
            }),
        };
        let error = seed_error(
            request_id,
            agent,
            "circuit_open",
            &reason,
            details,
            call.recorded.attempt.saturating_sub(1),
        );
        self.push(RunEvent::CallDegraded {
            request_id: request_id.clone(),
            agent: reading.agent.clone(),
            error: error.clone(),
        });
        // Side effects: a verifier whose circuit is open sends the effect to a human.
        if let Some(effect_id) = self.state.verifier_calls.get(request_id).cloned() {
            let failure = format!("{CIRCUIT_OPEN_CODE}: {reason}");
            self.on_verifier_answer(&effect_id, agent, None, Some(&failure));
            return;
        }
        if self.bundle.spec().defaults.circuit_breaker.on_open == OnOpen::Block {
            if self.episode_hard_stop(request_id, &rule, &reason) {
                return;
            }
            self.block(&rule, reason, error);
            return;
        }
        if let Some(asker) = &call.reply_to {
            // The refusal was counted in the asking episode by the fold: an agent that
            // keeps asking stops on `failure_repeats` instead of being told again.
            let episode = self.episode_of_call(request_id);
            if self.refusals_repeat(&episode) {
                return;
            }
            let class = ErrorClass {
                code: CIRCUIT_OPEN_CODE.to_owned(),
                class: "circuit_open".to_owned(),
                rule_id: rule,
            };
            self.return_failure(asker, &call.recorded, &class, &reason, &d);
            return;
        }
        // A handoff's receiver (or a retry, a classifier): nobody asked who could fall
        // back, so the run waits for a human, who may try again once a probe is let
        // through. The run goes on with its other branches meanwhile.
        let ticket = self.next_ticket();
        let probe_after = self
            .bundle
            .spec()
            .defaults
            .circuit_breaker
            .probe_interval_ms;
        let why = match reading.window {
            Some(w) => format!(
                "{} of its {} calls in the last {} s failed",
                w.failures,
                w.calls,
                w.window_ms / 1000
            ),
            None => format!("after {} failures in a row", reading.consecutive_failures),
        };
        self.push(RunEvent::Escalated {
            ticket,
            reason: format!(
                "{agent} was not called: its circuit is open {why} (across runs); one call \
                 is let through {probe_after} ms after the last failure: approve to try \
                 again, deny to stop"
            ),
            subject: TicketSubject::Retry {
                request_id: request_id.clone(),
            },
        });
    }
}
