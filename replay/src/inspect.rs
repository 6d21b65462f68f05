//! Inspect: a run as it stood at any point of its log (docs/replay.md#inspect), named by
//! a sequence or by what happened there (`last-denial`, `first-effect`...): its place
//! in the flow, the episode tree with budgets used and left, pending calls and tool
//! calls, open tickets, the circuit readings it recorded, and for a call or a handoff
//! exactly the request the receiving agent was sent, with a hash an auditor can
//! recompute from the log.

use docket_decider::{AgentCallFailed, AgentResponded, CircuitReading};
use serde::Serialize;
use serde_json::Value;

use docket_decider::{
    AgentRequest, RunEvent, RunHistory, RunState, condition_name, recorded_bundle,
};
use docket_policies::{DecisionKind, Verdict};

/// Names of the points `point_in` understands besides a plain sequence number; each
/// comes as `first-X` and `last-X` except `first` and `last` themselves.
pub const POINTS: &[&str] = &[
    "first",
    "last",
    "first-denial",
    "last-denial",
    "first-effect",
    "last-effect",
    "first-escalation",
    "last-escalation",
    "first-failure",
    "last-failure",
    "first-handoff",
    "last-handoff",
    "first-call",
    "last-call",
    "first-spawn",
    "last-spawn",
    "first-tool",
    "last-tool",
    "first-override",
    "last-override",
    "first-circuit",
    "last-circuit",
];

/// Whether `event` is a denial: a handoff, spawn or other episode action, tool call,
/// effect or domain write refused, or a policy decision denied (what `--at last-denial`
/// finds).
#[must_use]
pub fn is_denial(event: &RunEvent) -> bool {
    match event {
        RunEvent::HandoffDenied { .. }
        | RunEvent::EpisodeActionDenied { .. }
        | RunEvent::ToolDenied(_)
        | RunEvent::EffectRefused(_)
        | RunEvent::SignalRefused(_)
        | RunEvent::DomainWriteDenied { .. } => true,
        RunEvent::PolicyDecided { decision, .. } => decision.verdict == Verdict::Deny,
        _ => false,
    }
}

/// Whether `event` is one of `what` (the part of a point after `first-` / `last-`).
fn is(what: &str, e: &RunEvent) -> Option<bool> {
    Some(match what {
        "denial" => is_denial(e),
        "effect" => e.kind().starts_with("effect."),
        "escalation" => e.kind() == "human.escalated",
        "failure" => match e {
            RunEvent::AgentCallFailed(_) | RunEvent::ToolFailed(_) | RunEvent::EffectFailed(_) => {
                true
            }
            RunEvent::AgentResponded(AgentResponded { response, .. }) => {
                response.status == docket_decider::ResponseStatus::Error
            }
            _ => false,
        },
        "handoff" => matches!(
            e,
            RunEvent::HandoffAllowed { .. } | RunEvent::HandoffDenied { .. }
        ),
        "call" => e.kind() == "agent.call_scheduled",
        "spawn" => {
            matches!(e, RunEvent::EpisodeStarted { .. })
                || matches!(e, RunEvent::EpisodeActionDenied { action, .. } if action == "spawn")
        }
        "tool" => e.kind().starts_with("tool."),
        "override" => e.kind() == "human.overrode",
        "circuit" => matches!(
            e,
            RunEvent::CircuitChecked(_) | RunEvent::CallDegraded { .. }
        ),
        _ => return None,
    })
}

/// The 1-based sequence `point` names in `events`: a number, or one of [`POINTS`].
///
/// # Errors
/// What is wrong with `point`, in words: out of range, unknown, or a point the run does
/// not have (no denial, no effect).
pub fn point_in(events: &[RunEvent], point: &str) -> Result<usize, String> {
    let len = events.len();
    if let Ok(seq) = point.parse::<usize>() {
        return if (1..=len).contains(&seq) {
            Ok(seq)
        } else {
            Err(format!(
                "event {seq} is not in this run, which has events 1 to {len}"
            ))
        };
    }
    let unknown = || {
        format!(
            "`{point}` is neither an event number nor a point ({})",
            POINTS.join(", ")
        )
    };
    let (found, what) = match point {
        "first" => (Some(0).filter(|_| len > 0), "event"),
        "last" => (len.checked_sub(1), "event"),
        _ => {
            let (last, what) = if let Some(what) = point.strip_prefix("first-") {
                (false, what)
            } else if let Some(what) = point.strip_prefix("last-") {
                (true, what)
            } else {
                return Err(unknown());
            };
            is(
                what,
                &RunEvent::RunFailed {
                    reason: String::new(),
                },
            )
            .ok_or_else(unknown)?;
            let matches = |e: &RunEvent| is(what, e).unwrap_or(false);
            let found = if last {
                events.iter().rposition(matches)
            } else {
                events.iter().position(matches)
            };
            (found, what)
        }
    };
    found
        .map(|i| i + 1)
        .ok_or_else(|| format!("this run has no {what}"))
}

/// The run's state right after event `seq` (1-based).
#[must_use]
pub fn state_at(events: &[RunEvent], seq: usize) -> RunState {
    RunState::fold(events.iter().take(seq))
}

/// [`state_at`] from `base`, a state of the same log folded up to an event at or before
/// `seq` (a snapshot's): only the events after it are folded. A `base` past `seq` is not
/// used.
#[must_use]
pub fn state_at_from(base: RunState, events: &[RunEvent], seq: usize) -> RunState {
    let from = usize::try_from(base.version()).unwrap_or(usize::MAX);
    if from > seq {
        return state_at(events, seq);
    }
    base.fold_on(events.iter().take(seq).skip(from))
}

/// Where a sequential flow stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowAt {
    /// The agent at the current position.
    pub agent: String,
    /// 1-based position in `flow_order`.
    pub position: usize,
    /// Positions in the flow.
    pub of: usize,
}

/// A call scheduled and not answered yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingCall {
    /// Its request id.
    pub request_id: String,
    /// The agent called.
    pub agent: String,
    /// Its attempt (1 for a first call).
    pub attempt: u32,
    /// Its episode.
    pub episode_id: String,
}

/// A ticket waiting for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenTicket {
    /// `ticket-N`.
    pub ticket: String,
    /// What the person is asked.
    pub reason: String,
}

/// A governed tool call not settled yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingTool {
    /// `{run}/tool-N`.
    pub tool_call_id: String,
    /// The tool as named.
    pub name: String,
    /// The asking agent.
    pub agent: String,
    /// Where it stands.
    pub phase: &'static str,
}

/// One budget dimension of an episode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetAt {
    /// `tokens`, `tool_calls` or `wall_time_ms`.
    pub dimension: String,
    /// Used so far.
    pub used: u64,
    /// The limit.
    pub limit: u64,
    /// What is left.
    pub left: u64,
}

/// One episode of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EpisodeAt {
    /// `ep-N`.
    pub episode_id: String,
    /// Its parent (`None` for the root).
    pub parent: Option<String>,
    /// 0 for the root.
    pub depth: u32,
    /// Its type.
    pub episode_type: String,
    /// The agent that runs it.
    pub agent: String,
    /// running, finished, stopped...
    pub phase: &'static str,
    /// The stop condition, once stopped.
    pub stop_condition: Option<&'static str>,
    /// Each budget dimension.
    pub budgets: Vec<BudgetAt>,
}

/// An agent's circuit breaker as the run recorded it up to the point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CircuitAt {
    /// The agent.
    pub agent: String,
    /// Sequence of the last `agent.circuit_checked` reading of it.
    pub read_at: u64,
    /// Its consecutive failures across runs, as read.
    pub consecutive_failures: u32,
    /// Its calls and failures in the bundle's window, as read (decider version 13).
    pub window: Option<docket_decider::CircuitWindow>,
    /// When the last of them was recorded, ms since the Unix epoch.
    pub last_failure_ms: i64,
    /// When the last half-open probe was let through, if one was.
    pub last_probe_ms: Option<i64>,
    /// What the decider made of the reading: `closed`, `open` (the call degraded) or
    /// `half_open` (a probe let through), and by which rule.
    pub state: &'static str,
    /// The deciding rule.
    pub rule: String,
    /// The decision's reason, with the numbers.
    pub reason: String,
    /// Calls to it degraded (not made) in this run so far.
    pub degraded_calls: usize,
}

/// Exactly what an agent received: the request the runtime sent it, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Received {
    /// Sequence of the `agent.call_scheduled` that recorded the request.
    pub seq: u64,
    /// Its request id.
    pub request_id: String,
    /// The agent that received it.
    pub agent: String,
    /// For a handoff: where its delivery sits in the request (a JSON pointer, such as
    /// `/decision_inputs/0/payload`).
    pub delivered_at: Option<String>,
    /// The request: payload, decision and context inputs, `context.handoff`.
    pub request: Value,
    /// BLAKE3 (hex) of the request's canonical JSON: see [`request_hash`].
    pub request_hash: String,
}

/// The run as it stood right after one event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inspection {
    /// The run.
    pub run_id: String,
    /// 1-based sequence of the event.
    pub seq: u64,
    /// Events in the log.
    pub of: u64,
    /// Its kind.
    pub kind: &'static str,
    /// The run's status after it.
    pub status: &'static str,
    /// In a sequential flow, where it stands.
    pub flow: Option<FlowAt>,
    /// Calls scheduled and not answered.
    pub pending_calls: Vec<PendingCall>,
    /// Tool calls not settled.
    pub pending_tools: Vec<PendingTool>,
    /// Tickets waiting for a person.
    pub open_tickets: Vec<OpenTicket>,
    /// The episode tree, in order.
    pub episodes: Vec<EpisodeAt>,
    /// Circuit readings recorded so far, one per agent.
    pub circuits: Vec<CircuitAt>,
    /// For a call, a handoff to an agent, or an answer: what the agent received.
    pub received: Option<Received>,
}

/// BLAKE3 of `request`'s canonical JSON: object keys sorted at every depth, no
/// whitespace, as docket encodes event payloads. It is the `request` member of the
/// `agent.call_scheduled` event's payload (`docket events RUN --json`), so anyone can
/// recompute it from the log; that member is what the runtime encoded and sent to the
/// agent (docs/replay.md#inspect). A call made again from decider version 9 records only
/// the decision inputs it added (`again_of`): its whole request, hashed here, is the
/// repeated call's decision inputs followed by those.
#[must_use]
pub fn request_hash(request: &AgentRequest) -> String {
    blake3::hash(&docket_policies::canonical_json_bytes(request))
        .to_hex()
        .to_string()
}

/// What the call scheduled at `at` sent. `state` is folded at least past `at`: it holds the
/// whole request of a call made again, whose event records only the inputs it added
/// (decider version 9).
fn received(
    events: &[RunEvent],
    history: &RunHistory,
    at: usize,
    delivered_at: Option<String>,
) -> Option<Received> {
    let RunEvent::AgentCallScheduled { request, .. } = events.get(at)? else {
        return None;
    };
    let request = history
        .calls()
        .get(&request.request_id)
        .map_or_else(|| request.clone(), docket_decider::Call::request);
    Some(Received {
        seq: at as u64 + 1,
        request_id: request.request_id.to_string(),
        agent: request.target_agent.to_string(),
        delivered_at,
        request: serde_json::to_value(&*request).unwrap_or(Value::Null),
        request_hash: request_hash(&request),
    })
}

/// Where in `request` the content `delivered` from `from` sits: a decision or context
/// input carrying it, else anywhere under `/context` (the handoff context).
fn find_delivery(request: &Value, from: &str, delivered: &Value) -> Option<String> {
    for list in ["decision_inputs", "context_inputs"] {
        for (i, input) in request[list].as_array().into_iter().flatten().enumerate() {
            if input["source_agent"] == from && input["payload"] == *delivered {
                return Some(format!("/{list}/{i}/payload"));
            }
        }
    }
    fn walk(v: &Value, target: &Value, path: &mut String) -> bool {
        if v == target {
            return true;
        }
        let len = path.len();
        let found = match v {
            Value::Object(map) => map.iter().any(|(k, inner)| {
                path.truncate(len);
                path.push('/');
                path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                walk(inner, target, path)
            }),
            _ => false,
        };
        if !found {
            path.truncate(len);
        }
        found
    }
    let mut path = "/context".to_owned();
    walk(&request["context"], delivered, &mut path).then_some(path)
}

/// For a handoff at `at`: the first later call to its receiver whose request carries
/// what it delivered.
fn delivered_by_call(events: &[RunEvent], at: usize) -> Option<Received> {
    let RunEvent::HandoffAllowed {
        from,
        to,
        delivered,
        ..
    } = events.get(at)?
    else {
        return None;
    };
    let history = RunHistory::fold(events);
    events.iter().enumerate().skip(at + 1).find_map(|(i, e)| {
        let RunEvent::AgentCallScheduled { request, .. } = e else {
            return None;
        };
        if request.target_agent != *to {
            return None;
        }
        let request = history.calls().get(&request.request_id)?;
        let value = serde_json::to_value(&*request.request()).ok()?;
        let path = find_delivery(&value, from, delivered)?;
        received(events, &history, i, Some(path))
    })
}

/// The episode tree of `state`, in order, each episode with every budget dimension used,
/// its limit and what is left.
#[must_use]
pub fn episode_tree(state: &RunState) -> Vec<EpisodeAt> {
    state
        .episodes()
        .in_order()
        .into_iter()
        .map(|e| EpisodeAt {
            episode_id: e.id.to_string(),
            parent: e.parent.as_ref().map(ToString::to_string),
            depth: e.depth,
            episode_type: e.episode_type.clone(),
            agent: e.agent.to_string(),
            phase: e.phase.as_str(),
            stop_condition: e.stop_condition.map(condition_name),
            budgets: e
                .budget
                .iter()
                .map(|(dim, m)| BudgetAt {
                    dimension: dim.clone(),
                    used: m.used,
                    limit: m.limit,
                    left: m.remaining(),
                })
                .collect(),
        })
        .collect()
}

/// The run in `events` as it stood right after event `seq` (1-based, in range).
#[must_use]
pub fn inspect(events: &[RunEvent], seq: usize) -> Inspection {
    inspect_from(RunState::default(), events, seq)
}

/// [`inspect`] starting from `base`, a state of the same log at or before `seq` (the
/// nearest snapshot's), so that only the events after it are folded.
#[must_use]
pub fn inspect_from(base: RunState, events: &[RunEvent], seq: usize) -> Inspection {
    let state = state_at_from(base, events, seq);
    let at = seq.saturating_sub(1);
    let here = events.get(at);
    let flow = state
        .request()
        .and_then(|r| recorded_bundle(r).ok())
        .filter(|b| b.spec().interactions.sequential_flow)
        .map(|b| {
            let order = &b.spec().interactions.flow_order;
            let p = state.flow_position() as usize;
            FlowAt {
                agent: order.get(p).cloned().unwrap_or_default(),
                position: p + 1,
                of: order.len(),
            }
        });
    let pending_calls = state
        .pending_calls()
        .map(|c| &c.recorded)
        .map(|r| PendingCall {
            request_id: r.request_id.to_string(),
            agent: r.target_agent.to_string(),
            attempt: r.attempt,
            episode_id: r.episode_id.to_string(),
        })
        .collect();
    let pending_tools = state
        .tool_calls()
        .values()
        .filter(|t| t.phase.awaits_outcome())
        .map(|t| PendingTool {
            tool_call_id: t.tool_call_id.to_string(),
            name: t.name.clone(),
            agent: t.agent.to_string(),
            phase: t.phase.as_str(),
        })
        .collect();
    let open_tickets = state
        .open_tickets()
        .map(|(id, t)| OpenTicket {
            ticket: id.to_string(),
            reason: t.reason.clone(),
        })
        .collect();
    let episodes = episode_tree(&state);
    // Every call up to here, with its whole request (the state keeps only live calls).
    let history = RunHistory::fold(events.iter().take(seq));
    let received = match here {
        Some(RunEvent::AgentCallScheduled { .. }) => received(events, &history, at, None),
        Some(RunEvent::HandoffAllowed { .. }) => delivered_by_call(events, at),
        Some(
            RunEvent::AgentResponded(AgentResponded { request_id, .. })
            | RunEvent::AgentCallFailed(AgentCallFailed { request_id, .. }),
        ) => events[..at]
            .iter()
            .rposition(|e| {
                matches!(e, RunEvent::AgentCallScheduled { request, .. } if request.request_id == *request_id)
            })
            .and_then(|i| received(events, &history, i, None)),
        _ => None,
    };
    Inspection {
        run_id: state.run_id().map(ToString::to_string).unwrap_or_default(),
        seq: seq as u64,
        of: events.len() as u64,
        kind: here.map_or("", RunEvent::kind),
        status: state.status().as_str(),
        flow,
        pending_calls,
        pending_tools,
        open_tickets,
        episodes,
        circuits: circuits(&events[..seq.min(events.len())]),
        received,
    }
}

/// Each agent's last circuit reading in `events`, what was decided of it, and the
/// calls degraded.
fn circuits(events: &[RunEvent]) -> Vec<CircuitAt> {
    let mut out: Vec<CircuitAt> = Vec::new();
    for (i, event) in events.iter().enumerate() {
        match event {
            RunEvent::CircuitChecked(CircuitReading {
                agent,
                consecutive_failures,
                last_failure_ms,
                last_probe_ms,
                window,
                ..
            }) => {
                let reading = CircuitAt {
                    agent: agent.to_string(),
                    read_at: i as u64 + 1,
                    consecutive_failures: *consecutive_failures,
                    window: *window,
                    last_failure_ms: *last_failure_ms,
                    last_probe_ms: *last_probe_ms,
                    state: "closed",
                    rule: String::new(),
                    reason: String::new(),
                    degraded_calls: 0,
                };
                match out.iter_mut().find(|c| c.agent == reading.agent) {
                    Some(c) => {
                        *c = CircuitAt {
                            degraded_calls: c.degraded_calls,
                            ..reading
                        }
                    }
                    None => out.push(reading),
                }
                // What was decided of it: the batch's circuit-breaker decision.
                let decision = events[i + 1..]
                    .iter()
                    .take_while(|e| !e.is_input())
                    .find_map(|e| match e {
                        RunEvent::PolicyDecided { decision, .. }
                            if decision.kind == DecisionKind::CircuitBreaker =>
                        {
                            Some(decision)
                        }
                        _ => None,
                    });
                if let (Some(d), Some(c)) = (decision, out.iter_mut().find(|c| c.agent == *agent)) {
                    c.state = if !d.is_allowed() {
                        "open"
                    } else if d.reason.starts_with("circuit half-open") {
                        "half_open"
                    } else {
                        "closed"
                    };
                    c.rule = d.rule_id.to_string();
                    c.reason = d.reason.to_string();
                }
            }
            RunEvent::CallDegraded { agent, .. } => {
                if let Some(c) = out.iter_mut().find(|c| c.agent == **agent) {
                    c.degraded_calls += 1;
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_decider::RunEvent;

    fn kinds(events: &[RunEvent]) -> Vec<&'static str> {
        events.iter().map(RunEvent::kind).collect()
    }

    #[test]
    fn numbers_and_named_points_and_what_is_wrong_with_others() {
        let events: Vec<RunEvent> = vec![RunEvent::RunFailed { reason: "x".into() }];
        assert_eq!(kinds(&events), ["run.failed"]);
        assert_eq!(point_in(&events, "1"), Ok(1));
        assert_eq!(point_in(&events, "last"), Ok(1));
        assert!(
            point_in(&events, "2")
                .unwrap_err()
                .contains("events 1 to 1")
        );
        assert_eq!(
            point_in(&events, "last-denial"),
            Err("this run has no denial".to_owned())
        );
        assert!(
            point_in(&events, "middle")
                .unwrap_err()
                .contains("first-effect")
        );
    }
}
