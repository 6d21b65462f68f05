//! Circuit breakers across runs: the runtime's side (docs/governance.md#circuit-breaker).
//!
//! Each agent's breaker lives in the data directory's `_circuits` stream (a name no run id
//! can take: run ids start with a letter or digit), one event per change: a failed call
//! (`circuit.failed`), a half-open probe let through (`circuit.probed`), a success after
//! failures (`circuit.closed`), a person's reset (`circuit.reset`: who and why; it
//! closes the breaker). The runtime folds it once, keeps the fold in memory, and
//! appends to it as runs answer calls. Before a run calls an agent whose failures reached
//! the threshold, it records what it read in the run (`agent.circuit_checked`) and the
//! decider decides; the run's log alone replays it.
//!
//! The stream is written after the run's own batch: a crash between the two loses that
//! one outcome from the breaker, never anything from a run.

use std::collections::BTreeMap;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use docket_store::{EventStore, NewEvent, StoreError, StreamId, WallTime};

use super::RuntimeError;

/// The stream holding every agent's breaker, one per data directory.
pub const CIRCUITS_STREAM: &str = "_circuits";

/// What changed an agent's breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// A call to it failed.
    Failed,
    /// A call was let through as the half-open probe.
    Probed,
    /// A call succeeded after failures: the count starts again.
    Closed,
    /// A person reset it (`docket circuits reset`): closed, the count starts again.
    Reset,
}

impl Change {
    fn kind(self) -> &'static str {
        match self {
            Self::Failed => "circuit.failed",
            Self::Probed => "circuit.probed",
            Self::Closed => "circuit.closed",
            Self::Reset => "circuit.reset",
        }
    }

    fn from_kind(kind: &str) -> Option<Self> {
        match kind {
            "circuit.failed" => Some(Self::Failed),
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
    /// The run and call that changed it.
    pub run_id: String,
    pub request_id: String,
    /// For a failure: the error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// When, ms since the Unix epoch (the run's recorded time of the outcome).
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

/// An agent's breaker as folded from the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Breaker {
    pub consecutive_failures: u32,
    pub last_failure_ms: i64,
    pub last_probe_ms: Option<i64>,
}

impl Breaker {
    fn apply(&mut self, change: Change, at_ms: i64) {
        match change {
            Change::Failed => {
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                self.last_failure_ms = at_ms;
                self.last_probe_ms = None;
            }
            Change::Probed => self.last_probe_ms = Some(at_ms),
            Change::Closed | Change::Reset => *self = Self::default(),
        }
    }
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
    fn apply(&mut self, change: Change, agent: &str, at_ms: i64, reset: Option<CircuitReset>) {
        self.agents
            .entry(agent.to_owned())
            .or_default()
            .apply(change, at_ms);
        if let Some(reset) = reset {
            self.resets.insert(agent.to_owned(), reset);
        }
    }
}

/// The breakers of a data directory, folded on first use.
#[derive(Debug, Default)]
pub(crate) struct Circuits {
    folded: tokio::sync::Mutex<Option<Folded>>,
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
            folded.apply(change, &r.agent.clone(), r.at_ms, Some(r));
        } else {
            let e: CircuitEvent =
                serde_json::from_slice(&bytes).map_err(|err| bad(err.to_string()))?;
            folded.apply(change, &e.agent, e.at_ms, None);
        }
        folded.version = event.seq;
    }
    Ok(folded)
}

impl Circuits {
    /// `agent`'s breaker as recorded so far.
    pub(crate) async fn read<S: EventStore>(
        &self,
        store: &S,
        agent: &str,
    ) -> Result<Breaker, RuntimeError> {
        let mut guard = self.folded.lock().await;
        if guard.is_none() {
            *guard = Some(load(store).await?);
        }
        Ok(guard
            .as_ref()
            .and_then(|f| f.agents.get(agent).copied())
            .unwrap_or_default())
    }

    /// Every agent's breaker as recorded so far, with its last reset, by agent.
    async fn all<S: EventStore>(
        &self,
        store: &S,
    ) -> Result<Vec<(String, Breaker, Option<CircuitReset>)>, RuntimeError> {
        let mut guard = self.folded.lock().await;
        if guard.is_none() {
            *guard = Some(load(store).await?);
        }
        Ok(guard.as_ref().map_or_else(Vec::new, |f| {
            f.agents
                .iter()
                .map(|(a, b)| (a.clone(), *b, f.resets.get(a).cloned()))
                .collect()
        }))
    }

    /// Appends `change` of `event.agent`'s breaker. Another writer of the data directory
    /// having appended meanwhile, the stream is folded again and the append retried.
    pub(crate) async fn record<S: EventStore>(
        &self,
        store: &S,
        change: Change,
        event: CircuitEvent,
        recorded_at: WallTime,
    ) -> Result<(), RuntimeError> {
        let (agent, at_ms) = (event.agent.clone(), event.at_ms);
        let payload = docket_policies::canonical_json_bytes(&event);
        self.append(store, change, (&agent, at_ms, None), payload, recorded_at)
            .await
    }

    /// Appends one change, its payload encoded, and folds it.
    async fn append<S: EventStore>(
        &self,
        store: &S,
        change: Change,
        (agent, at_ms, reset): (&str, i64, Option<CircuitReset>),
        payload: Vec<u8>,
        recorded_at: WallTime,
    ) -> Result<(), RuntimeError> {
        let stream = stream()?;
        let mut guard = self.folded.lock().await;
        for _ in 0..3 {
            if guard.is_none() {
                *guard = Some(load(store).await?);
            }
            let Some(folded) = guard.as_mut() else {
                continue;
            };
            let new = NewEvent {
                kind: change.kind().to_owned(),
                kind_version: 1,
                recorded_at,
                policy: None,
                payload: payload.clone(),
            };
            match store.append(&stream, folded.version, vec![new]).await {
                Ok(_) => {
                    folded.version += 1;
                    folded.apply(change, agent, at_ms, reset);
                    return Ok(());
                }
                Err(StoreError::Conflict { .. }) => *guard = None,
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
    /// Before calling: reads each target's breaker; when its failures
    /// reached the bundle's threshold, records the reading in the run and lets the decider
    /// decide. Returns the calls to make: those below the threshold and the half-open
    /// probes (each recorded in the circuits stream before it is made).
    pub(crate) async fn read_circuits(
        &self,
        state: &mut docket_decider::RunState,
        bundle: &docket_policies::PolicyBundle,
        pending: Vec<std::sync::Arc<docket_decider::AgentRequest>>,
    ) -> Result<Vec<std::sync::Arc<docket_decider::AgentRequest>>, RuntimeError> {
        let threshold = bundle.spec().defaults.circuit_breaker.failure_threshold;
        let mut calls = Vec::with_capacity(pending.len());
        for request in pending {
            if state.status().is_final() {
                break;
            }
            let agent = request.target_agent.as_str();
            let breaker = self.circuits().read(self.store(), agent).await?;
            if breaker.consecutive_failures < threshold {
                calls.push(request);
                continue;
            }
            let at_ms = self.now_ms();
            let reading = docket_decider::CircuitReading {
                request_id: request.request_id.clone(),
                agent: request.target_agent.clone(),
                consecutive_failures: breaker.consecutive_failures,
                last_failure_ms: breaker.last_failure_ms,
                last_probe_ms: breaker.last_probe_ms,
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

    /// After a call's answer was decided: a failure counts toward its
    /// agent's breaker; a success after failures closes it.
    pub(crate) async fn record_outcome(
        &self,
        state: &docket_decider::RunState,
        request: &docket_decider::AgentRequest,
        at_ms: i64,
    ) -> Result<(), RuntimeError> {
        // The call answered last stays in the state until the next answer is folded.
        let Some(call) = state.live_calls().get(&request.request_id) else {
            return Ok(());
        };
        let agent = request.target_agent.as_str();
        let change = if call.failure.is_some() {
            Change::Failed
        } else if self
            .circuits()
            .read(self.store(), agent)
            .await?
            .consecutive_failures
            > 0
        {
            Change::Closed
        } else {
            return Ok(());
        };
        let event = CircuitEvent {
            agent: agent.to_owned(),
            run_id: state.run_id().map(ToString::to_string).unwrap_or_default(),
            request_id: request.request_id.to_string(),
            code: call.failure.clone(),
            at_ms,
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
    fn failures_count_a_probe_restarts_the_cool_down_and_a_success_closes() {
        let mut b = Breaker::default();
        b.apply(Change::Failed, 10);
        b.apply(Change::Failed, 20);
        assert_eq!((b.consecutive_failures, b.last_failure_ms), (2, 20));
        b.apply(Change::Probed, 30);
        assert_eq!(b.last_probe_ms, Some(30));
        b.apply(Change::Failed, 40);
        assert_eq!((b.consecutive_failures, b.last_probe_ms), (3, None));
        b.apply(Change::Closed, 50);
        assert_eq!(b, Breaker::default());
    }
}

/// Where an agent's breaker stands, for people (`docket circuits`, `docket status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreakerState {
    /// Calls are made (its failures, if any, are below the threshold).
    Closed,
    /// Calls are not made: the threshold is reached and the cool-down has not passed.
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
    /// Failures in a row across runs since it last closed.
    pub consecutive_failures: u32,
    /// When the last of them was recorded (ms since the Unix epoch), if any.
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
    let state = if b.consecutive_failures < settings.failure_threshold {
        BreakerState::Closed
    } else if cooled {
        BreakerState::HalfOpen
    } else {
        BreakerState::Open
    };
    BreakerStatus {
        agent,
        state,
        consecutive_failures: b.consecutive_failures,
        last_failure_ms: (b.consecutive_failures > 0).then_some(b.last_failure_ms),
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
        let payload = docket_policies::canonical_json_bytes(&reset);
        self.circuits()
            .append(
                self.store(),
                Change::Reset,
                (agent, reset.at_ms, Some(reset.clone())),
                payload,
                self.wall_time(),
            )
            .await
    }
}
