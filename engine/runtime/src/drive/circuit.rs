//! Circuit breakers across runs: the runtime's side (docs/governance.md#circuit-breaker).
//!
//! Each agent's breaker lives in the data directory's `_circuits` stream (a name no run id
//! can take: run ids start with a letter or digit), one event per change: a failed call
//! (`circuit.failed`), successful calls counted together (`circuit.succeeded`, at most one
//! a second per agent and process, and before any other change of that agent), a
//! half-open probe let through (`circuit.probed`), a probe's success (`circuit.closed`), a
//! person's reset (`circuit.reset`: who and why). Both of the last close the breaker and
//! start its count again. The runtime folds the stream once, keeps the fold in memory
//! (with the successes not yet written), and appends to it as runs answer calls. Before a
//! run calls an agent whose recent failures reached the bundle's rate, it records what it
//! read in the run (`agent.circuit_checked`) and the decider decides; the run's log alone
//! replays it.
//!
//! The stream is written after the run's own batch: a crash between the two loses that
//! one outcome from the breaker, never anything from a run; a crash loses the successes
//! not yet written (at most a second's, or a quiet agent's last ones), which can only make
//! the breaker more cautious for one window.

use std::collections::{BTreeMap, VecDeque};

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use docket_decider::CircuitWindow;
use docket_store::{EventStore, NewEvent, StoreError, StreamId, WallTime};

use super::RuntimeError;

/// The stream holding every agent's breaker, one per data directory.
pub const CIRCUITS_STREAM: &str = "_circuits";

/// Outcomes kept per agent (successes within a second counted as one): a window counts
/// within these.
const OUTCOMES_KEPT: usize = 4096;

/// How long successes wait in memory before they are written, counted together.
const SUCCESSES_WRITTEN_EVERY_MS: i64 = 1000;

/// What changed an agent's breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// A call to it failed.
    Failed,
    /// Calls to it succeeded (`count` of them).
    Succeeded,
    /// A call was let through as the half-open probe.
    Probed,
    /// The probe succeeded (or, in runs of decider version 12, a call succeeded after
    /// failures): the count starts again.
    Closed,
    /// A person reset it (`docket circuits reset`): closed, the count starts again.
    Reset,
}

impl Change {
    fn kind(self) -> &'static str {
        match self {
            Self::Failed => "circuit.failed",
            Self::Succeeded => "circuit.succeeded",
            Self::Probed => "circuit.probed",
            Self::Closed => "circuit.closed",
            Self::Reset => "circuit.reset",
        }
    }

    fn from_kind(kind: &str) -> Option<Self> {
        match kind {
            "circuit.failed" => Some(Self::Failed),
            "circuit.succeeded" => Some(Self::Succeeded),
            "circuit.probed" => Some(Self::Probed),
            "circuit.closed" => Some(Self::Closed),
            "circuit.reset" => Some(Self::Reset),
            _ => None,
        }
    }
}

/// One event of the circuits stream (its kind, in the envelope, says which change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CircuitEvent {
    /// The agent whose breaker changed.
    pub agent: String,
    /// The run and call that changed it (for successes counted together: the last).
    pub run_id: String,
    pub request_id: String,
    /// For a failure: the error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// For successes counted together: how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// When, ms since the Unix epoch (the run's recorded time of the outcome; for
    /// successes counted together, of the last).
    pub at_ms: i64,
}

/// `circuit.reset`: a person closed an agent's breaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CircuitReset {
    /// The agent whose breaker was reset.
    pub agent: String,
    /// Who reset it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// Calls answered at about one time: a failure, or successes counted together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    at_ms: i64,
    calls: u32,
    failed: bool,
}

/// An agent's breaker as folded from the stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Breaker {
    /// Failures in a row (what runs of decider version 12 decide by).
    pub consecutive_failures: u32,
    pub last_failure_ms: i64,
    pub last_probe_ms: Option<i64>,
    /// Its latest outcomes since it last closed, oldest first.
    outcomes: VecDeque<Outcome>,
    /// Failures among them (none: the window is closed without counting).
    failures_kept: usize,
}

impl Breaker {
    fn apply(&mut self, change: Change, at_ms: i64, count: u32) {
        match change {
            Change::Failed => {
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                self.last_failure_ms = at_ms;
                self.last_probe_ms = None;
                self.keep(Outcome {
                    at_ms,
                    calls: 1,
                    failed: true,
                });
            }
            Change::Succeeded => {
                self.consecutive_failures = 0;
                match self.outcomes.back_mut() {
                    Some(last)
                        if !last.failed
                            && at_ms.saturating_sub(last.at_ms) < SUCCESSES_WRITTEN_EVERY_MS =>
                    {
                        last.calls = last.calls.saturating_add(count);
                    }
                    _ => self.keep(Outcome {
                        at_ms,
                        calls: count,
                        failed: false,
                    }),
                }
            }
            Change::Probed => self.last_probe_ms = Some(at_ms),
            Change::Closed | Change::Reset => *self = Self::default(),
        }
    }

    fn keep(&mut self, outcome: Outcome) {
        if self.outcomes.len() == OUTCOMES_KEPT
            && let Some(old) = self.outcomes.pop_front()
            && old.failed
        {
            self.failures_kept -= 1;
        }
        self.failures_kept += usize::from(outcome.failed);
        self.outcomes.push_back(outcome);
    }

    /// The calls answered in the `window_ms` before `now_ms`, and how many failed.
    pub(crate) fn window(&self, window_ms: u64, now_ms: i64) -> CircuitWindow {
        let mut w = CircuitWindow {
            window_ms,
            calls: 0,
            failures: 0,
        };
        if self.failures_kept == 0 {
            return w;
        }
        let since = now_ms.saturating_sub(i64::try_from(window_ms).unwrap_or(i64::MAX));
        for o in self.outcomes.iter().rev().take_while(|o| o.at_ms > since) {
            w.calls = w.calls.saturating_add(o.calls);
            w.failures = w.failures.saturating_add(u32::from(o.failed));
        }
        w
    }

    /// Whether a failure is kept from within the `window_ms` before `now_ms`.
    fn failed_within(&self, window_ms: u64, now_ms: i64) -> bool {
        self.failures_kept > 0
            && self.last_failure_ms
                > now_ms.saturating_sub(i64::try_from(window_ms).unwrap_or(i64::MAX))
    }

    /// Whether the failures in the window reach `settings`' rate over enough calls.
    fn opens(&self, settings: &docket_policies::CircuitBreaker, now_ms: i64) -> bool {
        reaches(&self.window(settings.window_ms, now_ms), settings)
    }
}

/// Whether the failures in `w` reach `settings`' rate over at least `minimum_calls`.
fn reaches(w: &CircuitWindow, settings: &docket_policies::CircuitBreaker) -> bool {
    w.calls >= settings.minimum_calls
        && u64::from(w.failures) * 100
            >= u64::from(settings.failure_rate_percent) * u64::from(w.calls)
}

/// Successes of one agent not written yet.
#[derive(Debug, Clone)]
struct Unwritten {
    count: u32,
    /// When the first of them was answered.
    since_ms: i64,
    /// The last of them.
    last: CircuitEvent,
}

#[derive(Debug, Default)]
struct Folded {
    /// Events folded: the version the next append expects.
    version: u64,
    agents: BTreeMap<String, Breaker>,
    /// Each agent's last reset.
    resets: BTreeMap<String, CircuitReset>,
}

impl Folded {
    fn apply(
        &mut self,
        change: Change,
        (agent, at_ms, count): (&str, i64, u32),
        reset: Option<CircuitReset>,
    ) {
        self.agents
            .entry(agent.to_owned())
            .or_default()
            .apply(change, at_ms, count);
        if let Some(reset) = reset {
            self.resets.insert(agent.to_owned(), reset);
        }
    }
}

/// The fold, and the successes counted in memory only so far (folded already, written
/// later).
#[derive(Debug, Default)]
struct Kept {
    folded: Option<Folded>,
    unwritten: BTreeMap<String, Unwritten>,
}

/// What a call needs of its agent's breaker, copied out of the fold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BreakerHead {
    pub consecutive_failures: u32,
    pub last_failure_ms: i64,
    pub last_probe_ms: Option<i64>,
    failures_kept: usize,
}

impl BreakerHead {
    /// Whether the failures kept could reach `settings`' rate over enough calls in some
    /// window (at least the rate of `minimum_calls` failed); no clock needed.
    pub(crate) fn may_open(&self, settings: &docket_policies::CircuitBreaker) -> bool {
        self.failures_kept as u64 * 100
            >= u64::from(settings.failure_rate_percent) * u64::from(settings.minimum_calls)
    }
}

impl Breaker {
    fn head(&self) -> BreakerHead {
        BreakerHead {
            consecutive_failures: self.consecutive_failures,
            last_failure_ms: self.last_failure_ms,
            last_probe_ms: self.last_probe_ms,
            failures_kept: self.failures_kept,
        }
    }
}

/// The breakers of a data directory, folded on first use.
#[derive(Debug, Default)]
pub(crate) struct Circuits {
    kept: tokio::sync::Mutex<Kept>,
}

fn stream() -> Result<StreamId, RuntimeError> {
    StreamId::new(CIRCUITS_STREAM).map_err(RuntimeError::Store)
}

async fn load<S: EventStore>(store: &S) -> Result<Folded, RuntimeError> {
    let stream = stream()?;
    let mut folded = Folded::default();
    let Some(head) = store.head(&stream).await.map_err(RuntimeError::Store)? else {
        return Ok(folded);
    };
    let mut reader = Box::pin(store.read(&stream, 1..=head.seq));
    while let Some(event) = reader.next().await {
        let event = event.map_err(RuntimeError::Store)?;
        let bad = |message: String| RuntimeError::Circuits {
            seq: event.seq,
            message,
        };
        let change = Change::from_kind(&event.kind)
            .ok_or_else(|| bad(format!("unknown kind {:?}", event.kind)))?;
        let bytes = super::payload_bytes(store, &event).await?;
        if change == Change::Reset {
            let r: CircuitReset =
                serde_json::from_slice(&bytes).map_err(|err| bad(err.to_string()))?;
            folded.apply(change, (&r.agent.clone(), r.at_ms, 0), Some(r));
        } else {
            let e: CircuitEvent =
                serde_json::from_slice(&bytes).map_err(|err| bad(err.to_string()))?;
            folded.apply(change, (&e.agent, e.at_ms, e.count.unwrap_or(1)), None);
        }
        folded.version = event.seq;
    }
    Ok(folded)
}

/// One change to append: its kind, the agent, its time and count, the reset it is, and
/// its payload encoded.
struct Append<'a> {
    change: Change,
    agent: &'a str,
    at_ms: i64,
    count: u32,
    reset: Option<CircuitReset>,
    payload: Vec<u8>,
    /// Successes counted in memory when they came: written now, folded already.
    folded: bool,
}

impl<'a> Append<'a> {
    fn of(change: Change, event: &'a CircuitEvent) -> Append<'a> {
        Append {
            change,
            agent: &event.agent,
            at_ms: event.at_ms,
            count: event.count.unwrap_or(1),
            reset: None,
            payload: docket_policies::canonical_json_bytes(event),
            folded: false,
        }
    }

    /// Successes of `u` counted in memory, to write.
    fn tally(u: &'a Unwritten) -> Append<'a> {
        Append {
            folded: true,
            count: u.count,
            ..Append::of(Change::Succeeded, &u.last)
        }
    }
}

impl Circuits {
    /// The fold, loaded from the stream first if needed (the successes not written yet
    /// folded in again).
    async fn loaded<'g, S: EventStore>(
        &self,
        store: &S,
        kept: &'g mut tokio::sync::MutexGuard<'_, Kept>,
    ) -> Result<&'g mut Folded, RuntimeError> {
        if kept.folded.is_none() {
            let mut folded = load(store).await?;
            for (agent, u) in &kept.unwritten {
                folded.apply(Change::Succeeded, (agent, u.last.at_ms, u.count), None);
            }
            kept.folded = Some(folded);
        }
        Ok(kept.folded.get_or_insert_with(Folded::default))
    }

    /// What a call needs of `agent`'s breaker as recorded so far.
    pub(crate) async fn read<S: EventStore>(
        &self,
        store: &S,
        agent: &str,
    ) -> Result<BreakerHead, RuntimeError> {
        let mut kept = self.kept.lock().await;
        let folded = self.loaded(store, &mut kept).await?;
        Ok(folded
            .agents
            .get(agent)
            .map(Breaker::head)
            .unwrap_or_default())
    }

    /// `agent`'s calls answered in the `window_ms` before `now_ms`, and how many failed.
    pub(crate) async fn window<S: EventStore>(
        &self,
        store: &S,
        agent: &str,
        window_ms: u64,
        now_ms: i64,
    ) -> Result<CircuitWindow, RuntimeError> {
        let mut kept = self.kept.lock().await;
        let folded = self.loaded(store, &mut kept).await?;
        Ok(folded.agents.get(agent).map_or(
            CircuitWindow {
                window_ms,
                calls: 0,
                failures: 0,
            },
            |b| b.window(window_ms, now_ms),
        ))
    }

    /// Every agent's breaker as recorded so far, with its last reset, by agent.
    async fn all<S: EventStore>(
        &self,
        store: &S,
    ) -> Result<Vec<(String, Breaker, Option<CircuitReset>)>, RuntimeError> {
        let mut kept = self.kept.lock().await;
        let folded = self.loaded(store, &mut kept).await?;
        Ok(folded
            .agents
            .iter()
            .map(|(a, b)| (a.clone(), b.clone(), folded.resets.get(a).cloned()))
            .collect())
    }

    /// Appends `change` of `event.agent`'s breaker (after the successes of that agent not
    /// written yet, so the stream keeps their order).
    pub(crate) async fn record<S: EventStore>(
        &self,
        store: &S,
        change: Change,
        event: CircuitEvent,
        recorded_at: WallTime,
    ) -> Result<(), RuntimeError> {
        let mut kept = self.kept.lock().await;
        let unwritten = kept.unwritten.remove(&event.agent);
        let mut changes = Vec::with_capacity(2);
        if let Some(u) = &unwritten {
            changes.push(Append::tally(u));
        }
        changes.push(Append::of(change, &event));
        self.append(store, &mut kept, changes, recorded_at).await
    }

    /// Counts a successful call, folded at once. While its agent has a failure within
    /// `window_ms`, where the count decides, it is written at once (with any others not
    /// written yet); otherwise it is written with the others of its agent once a second
    /// has passed since the first of them. The clock (`recorded_at`) is read only to
    /// write.
    pub(crate) async fn succeeded<S: EventStore>(
        &self,
        store: &S,
        event: CircuitEvent,
        window_ms: u64,
        recorded_at: impl FnOnce() -> WallTime,
    ) -> Result<(), RuntimeError> {
        let mut kept = self.kept.lock().await;
        let folded = self.loaded(store, &mut kept).await?;
        let at_ms = event.at_ms;
        let breaker = folded.agents.entry(event.agent.clone()).or_default();
        let counts = breaker.failed_within(window_ms, at_ms);
        breaker.apply(Change::Succeeded, at_ms, 1);
        let agent = event.agent.clone();
        let u = kept.unwritten.entry(agent.clone()).or_insert(Unwritten {
            count: 0,
            since_ms: at_ms,
            last: event.clone(),
        });
        u.count = u.count.saturating_add(1);
        u.last = CircuitEvent {
            count: Some(u.count),
            ..event
        };
        if !counts && at_ms.saturating_sub(u.since_ms) < SUCCESSES_WRITTEN_EVERY_MS {
            return Ok(());
        }
        let Some(u) = kept.unwritten.remove(&agent) else {
            return Ok(());
        };
        self.append(store, &mut kept, vec![Append::tally(&u)], recorded_at())
            .await
    }

    /// Appends a person's reset; the successes of that agent not written yet go with the
    /// count it closes.
    async fn reset<S: EventStore>(
        &self,
        store: &S,
        reset: CircuitReset,
        recorded_at: WallTime,
    ) -> Result<(), RuntimeError> {
        let mut kept = self.kept.lock().await;
        kept.unwritten.remove(&reset.agent);
        let change = Append {
            change: Change::Reset,
            agent: &reset.agent,
            at_ms: reset.at_ms,
            count: 0,
            reset: Some(reset.clone()),
            payload: docket_policies::canonical_json_bytes(&reset),
            folded: false,
        };
        self.append(store, &mut kept, vec![change], recorded_at)
            .await
    }

    /// Appends changes in one write, each payload encoded, and folds them. Another writer
    /// of the data directory having appended meanwhile, the stream is folded again and
    /// the append retried.
    async fn append<S: EventStore>(
        &self,
        store: &S,
        kept: &mut tokio::sync::MutexGuard<'_, Kept>,
        changes: Vec<Append<'_>>,
        recorded_at: WallTime,
    ) -> Result<(), RuntimeError> {
        let stream = stream()?;
        for _ in 0..3 {
            let folded = self.loaded(store, kept).await?;
            let new = changes
                .iter()
                .map(|c| NewEvent {
                    kind: c.change.kind().to_owned(),
                    kind_version: 1,
                    recorded_at,
                    policy: None,
                    payload: c.payload.clone(),
                })
                .collect();
            match store.append(&stream, folded.version, new).await {
                Ok(_) => {
                    for c in changes.iter().filter(|c| !c.folded) {
                        folded.apply(c.change, (c.agent, c.at_ms, c.count), c.reset.clone());
                    }
                    folded.version += changes.len() as u64;
                    return Ok(());
                }
                Err(StoreError::Conflict { .. }) => kept.folded = None,
                Err(other) => return Err(RuntimeError::Store(other)),
            }
        }
        Err(RuntimeError::Circuits {
            seq: 0,
            message: "another writer kept appending to the stream; the outcome was not recorded"
                .to_owned(),
        })
    }
}

impl<S: EventStore + 'static> super::Runtime<S> {
    /// Before calling: reads each target's breaker; when its recent failures reached the
    /// bundle's rate (in runs of decider version 12: its failures in a row reached
    /// `failure_threshold`), records the reading in the run and lets the decider decide. Returns the
    /// calls to make: those whose breaker is closed and the half-open probes (each
    /// recorded in the circuits stream before it is made).
    pub(crate) async fn read_circuits(
        &self,
        state: &mut docket_decider::RunState,
        bundle: &docket_policies::PolicyBundle,
        pending: Vec<std::sync::Arc<docket_decider::AgentRequest>>,
    ) -> Result<Vec<std::sync::Arc<docket_decider::AgentRequest>>, RuntimeError> {
        let settings = &bundle.spec().defaults.circuit_breaker;
        let by_rate = state.decider_version() >= docket_decider::CIRCUIT_RATE;
        let mut calls = Vec::with_capacity(pending.len());
        for request in pending {
            if state.status().is_final() {
                break;
            }
            let agent = request.target_agent.as_str();
            let breaker = self.circuits().read(self.store(), agent).await?;
            // The clock is read only when the breaker may be open: a run whose breakers
            // cannot be records the same times whatever its agents' outcomes.
            let may_open = if by_rate {
                breaker.may_open(settings)
            } else {
                breaker.consecutive_failures >= settings.failure_threshold
            };
            if !may_open {
                calls.push(request);
                continue;
            }
            let at_ms = self.now_ms();
            let window = if by_rate {
                let w = self
                    .circuits()
                    .window(self.store(), agent, settings.window_ms, at_ms)
                    .await?;
                if !reaches(&w, settings) {
                    calls.push(request);
                    continue;
                }
                Some(w)
            } else {
                None
            };
            let reading = docket_decider::CircuitReading {
                request_id: request.request_id.clone(),
                agent: request.target_agent.clone(),
                consecutive_failures: breaker.consecutive_failures,
                last_failure_ms: breaker.last_failure_ms,
                last_probe_ms: breaker.last_probe_ms,
                window,
                at_ms,
            };
            self.decide_and_append(
                state,
                bundle,
                docket_decider::Command::RecordCircuit(reading),
            )
            .await?;
            let still_pending = state.is_pending(&request.request_id);
            if still_pending && !state.status().is_final() {
                tracing::info!(agent, request_id = %request.request_id, "circuit half-open: probe");
                let event = CircuitEvent {
                    agent: agent.to_owned(),
                    run_id: state.run_id().map(ToString::to_string).unwrap_or_default(),
                    request_id: request.request_id.to_string(),
                    code: None,
                    count: None,
                    at_ms,
                };
                self.circuits()
                    .record(self.store(), Change::Probed, event, self.wall_time())
                    .await?;
                calls.push(request);
            } else {
                tracing::warn!(agent, request_id = %request.request_id, "circuit open: not called");
            }
        }
        Ok(calls)
    }

    /// After a call's answer was decided: a failure counts toward its agent's breaker, a
    /// success too (with the others in memory); the success of a probe closes it (in runs
    /// of decider version 12, any success after failures does).
    pub(crate) async fn record_outcome(
        &self,
        state: &docket_decider::RunState,
        bundle: &docket_policies::PolicyBundle,
        request: &docket_decider::AgentRequest,
        at_ms: i64,
    ) -> Result<(), RuntimeError> {
        // The call answered last stays in the state until the next answer is folded.
        let Some(call) = state.live_calls().get(&request.request_id) else {
            return Ok(());
        };
        let agent = request.target_agent.as_str();
        let event = CircuitEvent {
            agent: agent.to_owned(),
            run_id: state.run_id().map(ToString::to_string).unwrap_or_default(),
            request_id: request.request_id.to_string(),
            code: call.failure.clone(),
            count: None,
            at_ms,
        };
        let change = if call.failure.is_some() {
            Change::Failed
        } else {
            let breaker = self.circuits().read(self.store(), agent).await?;
            let by_rate = state.decider_version() >= docket_decider::CIRCUIT_RATE;
            if breaker.last_probe_ms.is_some() || (!by_rate && breaker.consecutive_failures > 0) {
                Change::Closed
            } else {
                let window_ms = bundle.spec().defaults.circuit_breaker.window_ms;
                return self
                    .circuits()
                    .succeeded(self.store(), event, window_ms, || self.wall_time())
                    .await;
            }
        };
        self.circuits()
            .record(self.store(), change, event, self.wall_time())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_count_a_probe_restarts_the_cool_down_and_a_close_starts_again() {
        let mut b = Breaker::default();
        b.apply(Change::Failed, 10, 1);
        b.apply(Change::Failed, 20, 1);
        assert_eq!((b.consecutive_failures, b.last_failure_ms), (2, 20));
        b.apply(Change::Probed, 30, 1);
        assert_eq!(b.last_probe_ms, Some(30));
        b.apply(Change::Failed, 40, 1);
        assert_eq!((b.consecutive_failures, b.last_probe_ms), (3, None));
        b.apply(Change::Closed, 50, 1);
        assert_eq!(b, Breaker::default());
    }

    /// The window counts every call answered in it, failed or not: one success among
    /// failures does not close the breaker, as a count of failures in a row would.
    #[test]
    fn the_window_counts_calls_and_failures_and_one_success_does_not_close_it() {
        let settings = docket_policies::CircuitBreaker {
            minimum_calls: 4,
            window_ms: 10_000,
            ..docket_policies::CircuitBreaker::default()
        };
        let mut b = Breaker::default();
        b.apply(Change::Succeeded, 1_000, 1);
        // Successes alone: nothing counted, the breaker closed.
        assert_eq!(b.window(10_000, 2_000).calls, 0);
        b.apply(Change::Failed, 2_000, 1);
        b.apply(Change::Failed, 3_000, 1);
        // 2 of 3 calls: too few to open.
        assert!(!b.opens(&settings, 3_000));
        b.apply(Change::Succeeded, 4_000, 1);
        assert_eq!(b.consecutive_failures, 0);
        // 2 of 4 calls failed: 50%, open, whatever the success in between.
        assert_eq!(
            b.window(10_000, 4_000),
            CircuitWindow {
                window_ms: 10_000,
                calls: 4,
                failures: 2
            }
        );
        assert!(b.opens(&settings, 4_000));
        // Successes within a second are one outcome, counted as many calls.
        b.apply(Change::Succeeded, 4_500, 3);
        assert_eq!(b.window(10_000, 4_500).calls, 7);
        assert!(!b.opens(&settings, 4_500), "2 of 7 is under 50%");
        // The first calls leave the window as time passes: 1 failure of 5 calls left.
        assert_eq!(b.window(10_000, 12_500).calls, 5);
        assert_eq!(b.window(10_000, 12_500).failures, 1);
        // Nothing left.
        assert_eq!(b.window(10_000, 20_000).calls, 0);
    }

    #[test]
    fn only_the_latest_outcomes_are_kept() {
        let mut b = Breaker::default();
        b.apply(Change::Failed, 0, 1);
        for i in 1..=OUTCOMES_KEPT as i64 {
            b.apply(Change::Succeeded, i * 2_000, 1);
        }
        assert_eq!(b.outcomes.len(), OUTCOMES_KEPT);
        assert_eq!(b.failures_kept, 0, "the failure fell out");
        assert_eq!(b.window(u64::MAX / 2, i64::MAX / 2).calls, 0);
    }
}

/// Where an agent's breaker stands, for people (`docket circuits`, `docket status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreakerState {
    /// Calls are made (its recent failures, if any, are below the rate).
    Closed,
    /// Calls are not made: the rate is reached and the cool-down has not passed.
    Open,
    /// The cool-down has passed: the next call is made as the one probe.
    HalfOpen,
}

impl BreakerState {
    /// The word people read.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half-open",
        }
    }
}

/// One agent's breaker as recorded in the `_circuits` stream, and the state it is in
/// under the given settings now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BreakerStatus {
    /// The agent.
    pub agent: String,
    /// Its state under the settings asked about.
    pub state: BreakerState,
    /// The calls answered in the settings' window until now, across runs, and how many
    /// failed: what the state follows from.
    pub window: CircuitWindow,
    /// Failures in a row across runs since it last closed (what runs recorded by decider
    /// version 12 decide by).
    pub consecutive_failures: u32,
    /// When the last failure was recorded (ms since the Unix epoch), if one is kept.
    pub last_failure_ms: Option<i64>,
    /// When the last half-open probe since that failure was let through, if one was.
    pub last_probe_ms: Option<i64>,
    /// The last reset by a person, if any.
    pub last_reset: Option<CircuitReset>,
}

fn status_of(
    agent: String,
    b: Breaker,
    last_reset: Option<CircuitReset>,
    settings: &docket_policies::CircuitBreaker,
    now_ms: i64,
) -> BreakerStatus {
    let last = b
        .last_probe_ms
        .map_or(b.last_failure_ms, |p| p.max(b.last_failure_ms));
    let cooled =
        u64::try_from(now_ms.saturating_sub(last)).unwrap_or(0) >= settings.probe_interval_ms;
    let state = if !b.opens(settings, now_ms) {
        BreakerState::Closed
    } else if cooled {
        BreakerState::HalfOpen
    } else {
        BreakerState::Open
    };
    BreakerStatus {
        agent,
        state,
        window: b.window(settings.window_ms, now_ms),
        consecutive_failures: b.consecutive_failures,
        last_failure_ms: (b.failures_kept > 0).then_some(b.last_failure_ms),
        last_probe_ms: b.last_probe_ms,
        last_reset,
    }
}

impl<S: EventStore + 'static> super::Runtime<S> {
    /// Every agent's breaker recorded in this data directory, by agent, in the state it is
    /// in now under `settings` (a bundle's `defaults.circuit_breaker`). Reads only.
    ///
    /// # Errors
    /// [`RuntimeError::Store`], or [`RuntimeError::Circuits`] for an unreadable event.
    pub async fn circuit_breakers(
        &self,
        settings: &docket_policies::CircuitBreaker,
    ) -> Result<Vec<BreakerStatus>, RuntimeError> {
        let now_ms = self.now_ms();
        Ok(self
            .circuits()
            .all(self.store())
            .await?
            .into_iter()
            .map(|(agent, b, reset)| status_of(agent, b, reset, settings, now_ms))
            .collect())
    }

    /// Closes `agent`'s breaker: records `circuit.reset` (who, why, when) in the
    /// `_circuits` stream. The next call of any run reads it closed.
    ///
    /// # Errors
    /// [`RuntimeError::ResetUnexplained`] when `by` or `reason` is blank,
    /// [`RuntimeError::UnknownCircuit`] when no breaker is recorded for `agent`, and
    /// store errors.
    pub async fn reset_circuit(
        &self,
        agent: &str,
        by: &str,
        reason: &str,
    ) -> Result<(), RuntimeError> {
        for (value, missing) in [(by, "who resets it"), (reason, "why")] {
            if value.trim().is_empty() {
                return Err(RuntimeError::ResetUnexplained {
                    agent: agent.to_owned(),
                    missing,
                });
            }
        }
        let known = self
            .circuits()
            .all(self.store())
            .await?
            .iter()
            .any(|(a, _, _)| a == agent);
        if !known {
            return Err(RuntimeError::UnknownCircuit(agent.to_owned()));
        }
        let reset = CircuitReset {
            agent: agent.to_owned(),
            by: by.to_owned(),
            reason: reason.to_owned(),
            at_ms: self.now_ms(),
        };
        self.circuits()
            .reset(self.store(), reset, self.wall_time())
            .await
    }
}
