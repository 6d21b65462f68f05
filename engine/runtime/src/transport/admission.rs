//! Room for calls, given in priority order (docs/agent-protocol.md#priority): where calls
//! to an agent wait for one of its processes, a `HIGH` call goes before `NORMAL` and `LOW`
//! ones that came earlier, `NORMAL` before `LOW`, and calls of one priority go in the order
//! they came. A waiting call passed over by [`PASSED_OVER_LIMIT`] calls that came after it
//! goes next, whatever its priority: `LOW` calls are delayed, never starved.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use tokio::sync::oneshot;

use docket_decider::Priority;

/// How many later calls may go before a waiting one.
pub(crate) const PASSED_OVER_LIMIT: u32 = 8;

/// A counting gate that lets waiters in by priority.
pub(crate) struct Admission {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Room not taken.
    free: usize,
    /// The number the next waiter gets: the order calls came in.
    next: u64,
    waiting: BTreeMap<u64, Waiter>,
}

struct Waiter {
    rank: u8,
    passed_over: u32,
    grant: oneshot::Sender<()>,
}

/// Room taken, given back when dropped.
pub(crate) struct Pass<'a> {
    admission: &'a Admission,
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.admission.release();
    }
}

/// A caller in the queue; dropped before it was let in (its deadline passed), it leaves
/// the queue, or gives back the room it was given meanwhile.
struct Queued<'a> {
    admission: &'a Admission,
    number: u64,
    entered: bool,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if self.entered {
            return;
        }
        let mut state = self.admission.lock();
        if state.waiting.remove(&self.number).is_none() {
            // Let in while it stopped waiting: the room goes to the next.
            state.free += 1;
            grant_next(&mut state);
        }
    }
}

impl State {
    /// Puts a caller in the queue: its number, and where it hears it was let in.
    fn queue(&mut self, priority: Priority) -> (u64, oneshot::Receiver<()>) {
        let (grant, granted) = oneshot::channel();
        let number = self.next;
        self.next += 1;
        self.waiting.insert(
            number,
            Waiter {
                rank: rank(priority),
                passed_over: 0,
                grant,
            },
        );
        (number, granted)
    }
}

fn rank(priority: Priority) -> u8 {
    match priority {
        Priority::High => 0,
        Priority::Normal => 1,
        Priority::Low => 2,
    }
}

/// Lets waiters in while there is room: first one passed over too often, else the best
/// priority, else the first come. The earlier waiters it passes count one more pass.
fn grant_next(state: &mut State) {
    while state.free > 0 {
        let next = state
            .waiting
            .iter()
            .min_by_key(|(number, w)| (w.passed_over < PASSED_OVER_LIMIT, w.rank, **number))
            .map(|(number, _)| *number);
        let Some(number) = next else { return };
        let Some(waiter) = state.waiting.remove(&number) else {
            return;
        };
        for (_, earlier) in state.waiting.range_mut(..number) {
            earlier.passed_over += 1;
        }
        state.free -= 1;
        if waiter.grant.send(()).is_err() {
            // It stopped waiting as it was let in: the room goes to the next.
            state.free += 1;
        }
    }
}

impl Admission {
    /// Room for `size` calls at once.
    pub(crate) fn new(size: usize) -> Admission {
        Admission {
            state: Mutex::new(State {
                free: size,
                ..State::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for room, in priority order (cancel-safe: dropping the future leaves the
    /// queue).
    pub(crate) async fn enter(&self, priority: Priority) -> Pass<'_> {
        let (number, granted) = {
            let mut state = self.lock();
            if state.free > 0 && state.waiting.is_empty() {
                state.free -= 1;
                return Pass { admission: self };
            }
            state.queue(priority)
        };
        let mut queued = Queued {
            admission: self,
            number,
            entered: false,
        };
        // The sender is dropped unsent only with the whole gate.
        let _ = granted.await;
        queued.entered = true;
        Pass { admission: self }
    }

    fn release(&self) {
        let mut state = self.lock();
        state.free += 1;
        grant_next(&mut state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// With one room taken, calls that come LOW, NORMAL, HIGH, NORMAL are let in HIGH
    /// first, then NORMAL in the order they came, then LOW.
    #[tokio::test]
    async fn higher_priorities_go_first_and_equal_ones_in_order() {
        let gate = Arc::new(Admission::new(1));
        let first = gate.enter(Priority::Normal).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for (name, priority) in [
            ("low", Priority::Low),
            ("normal-1", Priority::Normal),
            ("high", Priority::High),
            ("normal-2", Priority::Normal),
        ] {
            let (entering, order) = (Arc::clone(&gate), Arc::clone(&order));
            waiting.push(tokio::spawn(async move {
                let _pass = entering.enter(priority).await;
                order.lock().expect("order").push(name);
            }));
            // Each is queued before the next comes.
            while gate.lock().waiting.len() < waiting.len() {
                tokio::task::yield_now().await;
            }
        }
        drop(first);
        for w in waiting {
            w.await.expect("let in");
        }
        assert_eq!(
            *order.lock().expect("order"),
            ["high", "normal-1", "normal-2", "low"]
        );
    }

    /// A LOW call behind a stream of HIGH ones goes once PASSED_OVER_LIMIT of them went
    /// before it.
    #[tokio::test]
    async fn a_low_call_is_let_in_after_being_passed_over_enough() {
        let gate = Admission::new(1);
        let held = gate.enter(Priority::High).await;
        let (_, low) = gate.lock().queue(Priority::Low);
        let highs: Vec<_> = (0..PASSED_OVER_LIMIT + 2)
            .map(|_| gate.lock().queue(Priority::High).1)
            .collect();
        drop(held);
        // Each HIGH let in gives its room back at once, as a short call would.
        let mut low = low;
        let mut let_in = 0;
        for mut high in highs {
            if low.try_recv().is_ok() {
                break;
            }
            high.try_recv().expect("the next HIGH is let in");
            let_in += 1;
            gate.release();
        }
        assert_eq!(let_in, PASSED_OVER_LIMIT, "then the LOW call goes");
    }

    /// A caller that stops waiting leaves the queue; room given to it as it stopped goes
    /// to the next.
    #[tokio::test]
    async fn a_caller_that_stops_waiting_takes_no_room() {
        let gate = Admission::new(1);
        let held = gate.enter(Priority::Normal).await;
        let gave_up = tokio::time::timeout(
            std::time::Duration::from_millis(1),
            gate.enter(Priority::High),
        )
        .await;
        assert!(gave_up.is_err(), "no room while held");
        assert!(gate.lock().waiting.is_empty(), "it left the queue");
        drop(held);
        let _again = gate.enter(Priority::Low).await;
        assert_eq!(gate.lock().free, 0);
    }
}
