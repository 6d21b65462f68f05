//! Durable timers in the drive loop (docs/agent-protocol.md#waiting-wait): when the only
//! thing a run waits for is a timer (`timer.set`, durable before this runs), the driver
//! sleeps until it is due by the runtime's clock, then records `timer.fired` with the
//! time it fired and decides what follows. A timer that fell due while no process drove
//! the run fires as soon as one does (`docket resume`), late, and its firing says how
//! late. Interrupting the wait loses nothing: the timer is in the log.

use std::time::Duration;

use super::{Runtime, RuntimeError};
use docket_decider::{Command, RunState, TimerFired, TimerRecord};
use docket_policies::PolicyBundle;
use docket_store::EventStore;

/// The longest single sleep: the clock is read again after it, so a wall clock set
/// forward or back moves the firing by at most this much.
const LONGEST_SLEEP: Duration = Duration::from_secs(60);

impl<S: EventStore + 'static> Runtime<S> {
    /// Waits until `timer` is due, then records its firing and decides what follows.
    pub(super) async fn timer_step(
        &self,
        state: &mut RunState,
        bundle: &PolicyBundle,
        timer: &TimerRecord,
    ) -> Result<(), RuntimeError> {
        let due = timer.set.due_at_ms;
        loop {
            let now = self.now_ms();
            if now >= due {
                if now - due > 1_000 {
                    tracing::warn!(
                        timer = %timer.set.timer_id,
                        late_ms = now - due,
                        "a timer fires late (no process drove the run when it was due)"
                    );
                }
                let fired = Command::FireTimer(TimerFired {
                    timer_id: timer.set.timer_id.clone(),
                    at_ms: now,
                });
                return self.decide_and_append(state, bundle, fired).await;
            }
            let left = Duration::from_millis(u64::try_from(due - now).unwrap_or(0));
            tokio::time::sleep(left.min(LONGEST_SLEEP)).await;
        }
    }
}
