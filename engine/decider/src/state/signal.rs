//! Outside events as folded from their events (docs/events.md#outside-events): each event
//! received, whether it was kept, refused or delivered, the senders' idempotency keys, and
//! the agents waiting for an event.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::RunState;
use crate::events::RunEvent;
use crate::events::signal::SignalAwaited;
use docket_protocol::{AgentId, CallId, SignalId, TimerId};

/// Where an outside event stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalPhase {
    /// Received; the bundle's verdict follows in the same batch.
    Received,
    /// Admitted and kept until an agent waiting for it receives it.
    Kept,
    /// Refused by the bundle.
    Refused,
    /// Handed to an agent.
    Delivered,
}

/// One outside event of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalRecord {
    /// Its name.
    pub name: String,
    /// Who sent it.
    pub by: String,
    /// When it was received, ms since the Unix epoch.
    pub at_ms: i64,
    /// Where it stands.
    pub phase: SignalPhase,
    /// The agent it was delivered to, once it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_to: Option<AgentId>,
    /// Why the bundle refused it, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Its content while it may still be delivered (dropped once delivered or refused:
    /// the log keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Arc<Value>>,
}

impl RunState {
    /// Every outside event of the run, by id.
    #[must_use]
    pub fn signals(&self) -> &BTreeMap<SignalId, SignalRecord> {
        &self.signals
    }

    /// The agents' waits for outside events not yet delivered nor timed out, by the call
    /// whose response waits.
    #[must_use]
    pub fn signal_waits(&self) -> &BTreeMap<CallId, SignalAwaited> {
        &self.signal_waits
    }

    /// Whether the run waits for an outside event an agent waits for, and for nothing
    /// else but that wait's timeout: its next step is [`NextStep::WaitForSignal`], or the
    /// timer of such a wait. A process driving the run stops there; the event is sent by
    /// another.
    ///
    /// [`NextStep::WaitForSignal`]: super::NextStep::WaitForSignal
    #[must_use]
    pub fn awaits_signal(&self) -> bool {
        match self.next_step() {
            super::NextStep::WaitForSignal => true,
            super::NextStep::WaitForTimer(t) => self.wait_timed_by(&t.set.timer_id).is_some(),
            _ => false,
        }
    }

    /// The event the sender's `key` recorded, if one did.
    #[must_use]
    pub fn signal_with_key(&self, key: &str) -> Option<&SignalId> {
        self.signal_keys.get(key)
    }

    /// The id the next `signal.received` gets.
    pub(crate) fn next_signal_id(&self) -> SignalId {
        let run = self.run_id().map_or("", |r| r.as_str());
        SignalId::from(format!("{run}/signal-{}", self.signals.len() + 1))
    }

    /// The kept event named `name` received first, if any: what a wait for it receives.
    pub(crate) fn first_kept(&self, name: &str) -> Option<(&SignalId, &SignalRecord)> {
        self.signals
            .iter()
            .find(|(_, s)| s.phase == SignalPhase::Kept && s.name == name)
    }

    /// Whether a branch of the fan-out `group` waits for an event.
    pub(crate) fn signal_waits_in(&self, group: &str) -> bool {
        self.signal_waits.keys().any(|asked| {
            self.calls
                .get(asked)
                .is_some_and(|c| c.branch_of.as_deref() == Some(group))
        })
    }

    /// Whether some wait for an event leaves its time out of wall time.
    pub(crate) fn signal_wait_uncounted(&self) -> bool {
        self.signal_waits
            .values()
            .any(|w| !w.counts_against_wall_time)
    }

    /// The wait whose timeout is `timer`, if any.
    pub(crate) fn wait_timed_by(&self, timer: &TimerId) -> Option<&SignalAwaited> {
        self.signal_waits
            .values()
            .find(|w| w.timeout.as_ref() == Some(timer))
    }

    /// Folds an outside event's event.
    pub(super) fn apply_signal(&mut self, event: &RunEvent) {
        match event {
            RunEvent::SignalReceived(received) => {
                let id = self.next_signal_id();
                if let Some(key) = &received.idempotency_key {
                    self.signal_keys.insert(key.clone(), id.clone());
                }
                self.signals.insert(
                    id,
                    SignalRecord {
                        name: received.name.clone(),
                        by: received.by.clone(),
                        at_ms: received.at_ms,
                        phase: SignalPhase::Received,
                        delivered_to: None,
                        refused: None,
                        payload: Some(Arc::new(received.payload.clone())),
                    },
                );
            }
            RunEvent::SignalKept(kept) => {
                if let Some(s) = self.signals.get_mut(&kept.signal_id) {
                    s.phase = SignalPhase::Kept;
                }
            }
            RunEvent::SignalRefused(refused) => {
                if let Some(s) = self.signals.get_mut(&refused.signal_id) {
                    s.phase = SignalPhase::Refused;
                    s.refused = Some(refused.reason.clone());
                    s.payload = None;
                }
            }
            RunEvent::SignalAwaited(awaited) => {
                self.signal_waits
                    .insert(awaited.request_id.clone(), awaited.clone());
            }
            RunEvent::SignalDelivered(delivered) => {
                if let Some(s) = self.signals.get_mut(&delivered.signal_id) {
                    s.phase = SignalPhase::Delivered;
                    s.delivered_to = Some(delivered.agent.clone());
                    s.payload = None;
                }
                // Its timeout no longer fires.
                if let Some(wait) = self.signal_waits.remove(&delivered.request_id)
                    && let Some(timer) = wait.timeout
                    && let Some(t) = self.timers.get_mut(&timer)
                {
                    t.cleared = true;
                }
            }
            RunEvent::SignalTimedOut(timed_out) => {
                self.signal_waits.remove(&timed_out.request_id);
            }
            _ => {}
        }
    }
}
