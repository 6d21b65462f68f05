//! Human overrides (docs/governance.md#human-override): a block a person may override is
//! remembered with what it stopped; `human.overrode` lifts it, reopens the episodes the
//! block ended and counts the time blocked as time waiting for a human.

use super::episode::EpisodePhase;
use super::{RunState, RunStatus};
use crate::events::HumanOverrode;
use crate::events::RunEvent;
use docket_protocol::EpisodeStatus;

impl RunState {
    pub(super) fn apply_override(&mut self, event: &RunEvent) {
        match event {
            RunEvent::RunBlocked {
                rule_id,
                overridable,
                ..
            } => {
                self.blocked_by = Some(rule_id.clone());
                self.overridable.clone_from(overridable);
                let tree = &mut self.episodes;
                if overridable.is_some() && tree.waiting_since.is_none() {
                    tree.waiting_since = Some(tree.last_input_ms);
                }
            }
            RunEvent::HumanOverrode(HumanOverrode { at_ms, .. }) => {
                let waiting = self.tickets.values().any(|t| t.open);
                self.status = if waiting {
                    RunStatus::WaitingForHuman
                } else {
                    RunStatus::Running
                };
                self.stop_reason = None;
                self.blocked_by = None;
                let reopened = self
                    .overridable
                    .take()
                    .map(|o| o.episodes)
                    .unwrap_or_default();
                let tree = &mut self.episodes;
                for id in &reopened {
                    if let Some(e) = tree.episodes.get_mut(id) {
                        let review = e
                            .result
                            .as_ref()
                            .is_some_and(|r| r.status == EpisodeStatus::NeedsReview);
                        e.phase = if review {
                            EpisodePhase::Review
                        } else {
                            EpisodePhase::Running
                        };
                        e.stop_condition = None;
                        e.stop_reason = None;
                    }
                }
                tree.last_input_ms = *at_ms;
                if !waiting && let Some(since) = tree.waiting_since.take() {
                    tree.human_wait_ms += (*at_ms - since).max(0);
                }
            }
            _ => {}
        }
    }

    /// The rule that blocked the run, while it is blocked.
    #[must_use]
    pub fn blocked_by(&self) -> Option<&str> {
        self.blocked_by.as_deref()
    }

    /// What the block stopped, when a person may override it: the
    /// level the rule sits at and the step an override continues.
    #[must_use]
    pub fn overridable(&self) -> Option<&crate::events::overrides::Overridable> {
        self.overridable.as_deref()
    }
}
