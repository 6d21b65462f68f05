//! Fan-out groups: branch outputs held until the group's last branch answers, and the
//! branches that failed past retrying (gaps), and the conflicts settled at joins.

use super::RunState;
use crate::events::RunEvent;

impl RunState {
    pub(super) fn apply_fan_out(&mut self, event: &RunEvent) {
        match event {
            RunEvent::OutputHeld { group, delivery } => {
                self.held
                    .entry(group.into())
                    .or_default()
                    .push(delivery.clone());
            }
            RunEvent::FanoutBranchFailed { group, gap } => {
                self.gaps.entry(group.into()).or_default().push(gap.clone());
            }
            RunEvent::FanoutJoined { group, deliveries } => {
                self.held.remove(group);
                self.gaps.remove(group);
                self.settled_conflicts
                    .extend(deliveries.iter().filter_map(|d| d.conflict.clone()));
            }
            _ => {}
        }
    }
}
