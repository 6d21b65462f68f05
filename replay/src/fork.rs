//! Fork: a new run that reuses a recorded run's answers up to a chosen event and goes
//! live from there (docs/replay.md#fork). This file plans the reused part, purely: the
//! fork is decided from its start under its own bundle, fed the parent's recorded inputs
//! in order (agent answers, effect receipts, human decisions, tool results), each only
//! while the fork asks exactly what the parent asked; the runtime records the plan and
//! drives the rest live.
//!
//! ```text
//! parent:  run.requested  answer(call-1)  receipt(effect-1)  answer(call-2) | SEQ ...
//!              │               │ same request?   │ same effect?    │
//! fork:    run.requested ─▶ reused ──────────▶ reused ─────────▶ reused | live from here
//! ```
//!
//! A recorded input is matched to the fork's step by its id (`call-N`, `effect-N`,
//! `tool-N`, `ticket-N`, the run's ids renamed to the fork's), and reused only if what
//! the fork asked there equals what the parent asked (the request the agent received,
//! the effect requested and started, the tool call, the ticket's question). The first
//! input that fails this, before `SEQ`, is where the fork parts from its parent: it is
//! reported with what differs, and the fork goes live from there.

use docket_decider::{AgentCallFailed, AgentResponded};
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use docket_decider::{
    AgentRequest, AgentResponse, CallId, Command, ForkedFrom, OutputOverride, RunEvent, RunId,
    RunRequested, RunState, TIMERS_SOURCE, UnsupportedDecider, batches, decide_in_place,
};
use docket_policies::PolicyBundle;

use crate::diff::{Difference, differences};

/// How many differing places a parting lists.
const DIFFERENCES_SHOWN: usize = 10;

/// Why a fork cannot be made (nothing is recorded then).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// The parent's log is not a run's log.
    #[error("the parent's log does not start with run.requested")]
    NotARun,
    /// The parent was recorded by a decider version this build does not decide as.
    #[error("the parent run: {0}")]
    Version(#[from] UnsupportedDecider),
    /// `--from` is not an event of the parent.
    #[error("--from {seq}: the parent has events 1 to {len}")]
    OutOfRange {
        /// As given.
        seq: u64,
        /// The parent's length.
        len: usize,
    },
    /// The parent's bundle no longer compiles (a fork under it cannot be decided).
    #[error("the parent's policy bundle {name} no longer compiles: {message}")]
    Bundle {
        /// Its recorded name.
        name: String,
        /// The compiler's error.
        message: String,
    },
    /// `--override-output` names a call the parent never scheduled.
    #[error("--override-output {call}: the parent run has no call {call} (its calls: {known})")]
    UnknownCall {
        /// As given.
        call: String,
        /// The parent's calls.
        known: String,
    },
    /// The override's answer names another call.
    #[error(
        "--override-output {call}={file}: the answer's request_id is {found}, not the call it replaces ({call})"
    )]
    OtherCall {
        /// The overridden call.
        call: String,
        /// The answer's file.
        file: String,
        /// Its request_id.
        found: String,
    },
    /// The fork never asks the overridden call before going live.
    #[error(
        "--override-output {call}: the fork does not reach this call before going live ({why}); fork from a later event"
    )]
    OverrideNotReached {
        /// The overridden call.
        call: String,
        /// Where the fork went live instead.
        why: String,
    },
    /// The decider refuses the override's answer for its call.
    #[error("--override-output {call}: the fork refuses this answer: {message}")]
    OverrideRefused {
        /// The overridden call.
        call: String,
        /// The decider's refusal.
        message: String,
    },
    /// The fork's `run.requested` is refused (the workflow does not fit the bundle).
    #[error("the fork cannot start: {0}")]
    Start(String),
}

/// What a fork is given instead of the parent's bundle and answers.
#[derive(Debug, Clone)]
pub struct ForkSpec<'a> {
    /// The new run's id.
    pub run_id: RunId,
    /// The parent's event from which the fork goes live (1-based).
    pub from: u64,
    /// The parent's chain hash at `from`, recorded in the fork.
    pub parent_hash: String,
    /// Another bundle, its source text and name (`--policies`); `None`: the parent's.
    pub policies: Option<(&'a PolicyBundle, &'a str, &'a str)>,
    /// One call's answer replaced: the parent's call, the file it was read from, the
    /// answer (already parsed and validated).
    pub output_override: Option<(CallId, String, AgentResponse)>,
    /// The time now (ms since the Unix epoch): the reused inputs' times are shifted so the
    /// last reused one falls here, keeping the parent's intervals (episode wall time).
    pub now_ms: i64,
}

/// Where the fork first asked otherwise than its parent, before `--from`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parting {
    /// The parent's input (1-based) that was not reused.
    pub seq: u64,
    /// Its kind.
    pub input: &'static str,
    /// What differs, in words.
    pub why: String,
    /// Where what the fork asked differs from what the parent asked (JSON pointers;
    /// `recorded` is the parent's side, `decided` the fork's).
    pub differences: Vec<Difference>,
}

/// The reused part of a fork, ready to record: its `run.requested` and the inputs fed
/// after it, each decided by the runtime as any input.
#[derive(Debug, Clone)]
pub struct ForkPlan {
    /// The fork's first event.
    pub request: RunRequested,
    /// The inputs fed after it, in order (the parent's, renamed to the fork's ids; the
    /// override in place of its call's answer).
    pub inputs: Vec<Command>,
    /// How many of them are the parent's recorded inputs, by kind.
    pub reused: BTreeMap<&'static str, usize>,
    /// The parent event (1-based) from which the fork is live: `--from`, or where it
    /// parted.
    pub live_from: u64,
    /// Where the fork parted from its parent before `--from`, if it did.
    pub parting: Option<Parting>,
    /// Whether the override was fed in place of a recorded answer (`true`) or as the
    /// answer to a call the parent answered at or after `--from` (`false`).
    pub override_replaced: Option<bool>,
}

/// Plans a fork of the run whose log is `parent`.
///
/// # Errors
/// [`ForkError`]: not a run, `from` out of range, an override of a call the parent does
/// not have, that the fork does not reach or whose answer the decider refuses.
pub fn plan_fork(parent: &[RunEvent], spec: ForkSpec<'_>) -> Result<ForkPlan, ForkError> {
    let Some(RunEvent::RunRequested(run)) = parent.first() else {
        return Err(ForkError::NotARun);
    };
    UnsupportedDecider::check(run.decider_version)?;
    let len = parent.len();
    let from = usize::try_from(spec.from).unwrap_or(usize::MAX);
    if !(1..=len).contains(&from) {
        return Err(ForkError::OutOfRange {
            seq: spec.from,
            len,
        });
    }
    let (parent_id, fork_id) = (run.run_id.as_str(), spec.run_id.as_str());
    let known_calls: Vec<&CallId> = parent
        .iter()
        .filter_map(|e| match e {
            RunEvent::AgentCallScheduled { request, .. } => Some(&request.request_id),
            _ => None,
        })
        .collect();
    // The override, its call named as the parent's and as the fork's.
    let mut output_override = match spec.output_override {
        Some((call, file, response)) => {
            let call = qualified(&call, parent_id);
            if !known_calls.contains(&&call) {
                return Err(ForkError::UnknownCall {
                    call: call.to_string(),
                    known: short_ids(&known_calls, parent_id),
                });
            }
            let fork_call = CallId::from(rename_id(call.as_str(), parent_id, fork_id));
            let found = response.request_id.as_str();
            if found != call.as_str() && found != fork_call.as_str() {
                return Err(ForkError::OtherCall {
                    call: call.to_string(),
                    file,
                    found: found.to_owned(),
                });
            }
            let response = AgentResponse {
                request_id: fork_call.clone(),
                ..response
            };
            Some((call, fork_call, file, response))
        }
        None => None,
    };

    // The last input reused at most: its time becomes now.
    let last_at = parent[..from - 1]
        .iter()
        .rev()
        .find_map(input_time)
        .unwrap_or(run.at_ms);
    let shift = spec.now_ms.saturating_sub(last_at);
    let recorded_bundle;
    let (bundle, source, name) = match spec.policies {
        Some(p) => p,
        None => {
            recorded_bundle =
                docket_decider::recorded_bundle(run).map_err(|e| ForkError::Bundle {
                    name: run.bundle_source_name.clone(),
                    message: e.to_string(),
                })?;
            (
                &recorded_bundle,
                run.bundle_source.as_str(),
                run.bundle_source_name.as_str(),
            )
        }
    };
    let request = RunRequested {
        run_id: spec.run_id.clone(),
        bundle_source: source.to_owned(),
        bundle_source_name: name.to_owned(),
        bundle_hash: bundle.hash().to_hex(),
        at_ms: run.at_ms.saturating_add(shift),
        // The fork continues the parent, so it decides as the parent's version did.
        decider_version: run.decider_version,
        forked_from: Some(Box::new(ForkedFrom {
            run_id: run.run_id.clone(),
            seq: spec.from,
            hash: spec.parent_hash,
            overrides: output_override
                .as_ref()
                .map(|(call, _, file, _)| OutputOverride {
                    call: call.clone(),
                    file: file.clone(),
                })
                .into_iter()
                .collect(),
        })),
        // A fork is started by a person, not by the schedule that started its parent.
        scheduled: None,
        ..RunRequested::clone(run)
    };
    let mut state = RunState::default();
    let mut asked_by_fork = Questions::default();
    let started = decide_in_place(&mut state, bundle, Command::Start(request.clone().into()))
        .map_err(|rejection| ForkError::Start(rejection.to_string()))?;
    asked_by_fork.note(&started);

    let mut plan = ForkPlan {
        request,
        inputs: Vec::new(),
        reused: BTreeMap::new(),
        live_from: spec.from,
        parting: None,
        override_replaced: None,
    };
    let mut asked_by_parent = Questions::default();
    // The parent's batches before `--from`: each input decided again for the fork (the
    // first, `run.requested`, is the fork's start above), then the questions the parent's
    // recorded decisions of it asked.
    for (start, batch) in batches(&parent[..from - 1]) {
        let (input, decisions) = (&batch[0], &batch[1..]);
        if start > 0 {
            let seq = start as u64 + 1;
            let event = renamed(input, parent_id, fork_id, shift);
            let overrides = match (&output_override, &event) {
                (
                    Some((_, fork_call, _, _)),
                    RunEvent::AgentResponded(AgentResponded { request_id, .. })
                    | RunEvent::AgentCallFailed(AgentCallFailed { request_id, .. }),
                ) => request_id == fork_call,
                _ => false,
            };
            let subject = subject(&event);
            let (was, now) = (asked_by_parent.get(&subject), asked_by_fork.get(&subject));
            if !overrides && was != now {
                plan.parting = Some(parting(seq, &event, &subject, was, now));
                plan.live_from = seq;
                break;
            }
            let command = match (&output_override, overrides) {
                (Some((_, fork_call, _, response)), true) => {
                    Command::RecordResponse(AgentResponded {
                        request_id: fork_call.clone(),
                        response: response.clone().into(),
                        at_ms: input_time(&event).unwrap_or(spec.now_ms),
                    })
                }
                _ => match Command::from_event(&event) {
                    Some(command) => command,
                    None => break,
                },
            };
            match decide_in_place(&mut state, bundle, command.clone()) {
                Ok(decided) => asked_by_fork.note(&decided),
                Err(rejection) if overrides => {
                    return Err(ForkError::OverrideRefused {
                        call: rename_id(subject.as_str(), fork_id, parent_id),
                        message: rejection.to_string(),
                    });
                }
                // The fork took another path that does not wait for this input (an effect
                // now needing approval, a ticket never opened): it goes live from here.
                Err(rejection) => {
                    plan.parting = Some(Parting {
                        seq,
                        input: event.kind(),
                        why: format!("the fork does not wait for this input: {rejection}"),
                        differences: Vec::new(),
                    });
                    plan.live_from = seq;
                    break;
                }
            }
            if overrides {
                output_override = None;
                plan.override_replaced = Some(true);
            } else {
                *plan.reused.entry(event.kind()).or_default() += 1;
            }
            plan.inputs.push(command);
        }
        for event in decisions.iter().filter(|e| Questions::asks(e)) {
            let event = timer_inputs_shifted(&renamed(event, parent_id, fork_id, 0), shift);
            asked_by_parent.note(std::slice::from_ref(&event));
        }
    }
    // An override of a call the parent answered at or after `--from`: the fork's answer to
    // it, if the fork has asked it and not been answered.
    if let Some((call, fork_call, _, response)) = output_override.take() {
        let pending = state.pending_call_ids().iter().any(|id| **id == fork_call);
        if !pending {
            let why = plan.parting.as_ref().map_or_else(
                || format!("it is not waiting for an answer at event {}", spec.from),
                |p| format!("it parts from its parent at event {}: {}", p.seq, p.why),
            );
            return Err(ForkError::OverrideNotReached {
                call: call.to_string(),
                why,
            });
        }
        let command = Command::RecordResponse(AgentResponded {
            request_id: fork_call,
            response: response.into(),
            at_ms: spec.now_ms,
        });
        decide_in_place(&mut state, bundle, command.clone()).map_err(|rejection| {
            ForkError::OverrideRefused {
                call: call.to_string(),
                message: rejection.to_string(),
            }
        })?;
        plan.override_replaced = Some(false);
        plan.inputs.push(command);
    }
    Ok(plan)
}

/// `call-3` as the parent's `{run}/call-3`; a full id as given.
fn qualified(call: &CallId, run: &str) -> CallId {
    if call.as_str().starts_with(&format!("{run}/")) {
        call.clone()
    } else {
        CallId::from(format!("{run}/{call}"))
    }
}

fn short_ids(calls: &[&CallId], run: &str) -> String {
    let prefix = format!("{run}/");
    let mut names: Vec<&str> = calls
        .iter()
        .map(|c| c.as_str().strip_prefix(&prefix).unwrap_or(c.as_str()))
        .collect();
    names.dedup();
    names.join(", ")
}

/// The recorded time of an input (`at_ms`), if it is one.
fn input_time(event: &RunEvent) -> Option<i64> {
    if !event.is_input() {
        return None;
    }
    event.to_value().get("at_ms").and_then(Value::as_i64)
}

/// An id of run `from` as the same id of run `to` (`from/call-3` → `to/call-3`).
fn rename_id(id: &str, from: &str, to: &str) -> String {
    if id == from {
        return to.to_owned();
    }
    // An id, not text that begins with one (`run-1/call-2 failed`).
    match id
        .strip_prefix(from)
        .and_then(|rest| rest.strip_prefix('/'))
    {
        Some(rest) if !rest.contains(char::is_whitespace) => format!("{to}/{rest}"),
        _ => id.to_owned(),
    }
}

/// Every string in `value` that is run `from`'s id or one of its ids, as run `to`'s.
pub(crate) fn rename_run(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::String(s) if s.starts_with(from) => *s = rename_id(s, from, to),
        Value::Array(items) => items.iter_mut().for_each(|v| rename_run(v, from, to)),
        Value::Object(map) => map.values_mut().for_each(|v| rename_run(v, from, to)),
        _ => {}
    }
}

/// `event` of run `from` as run `to` would record it: its ids renamed, and an input's
/// `at_ms` shifted by `shift`.
fn renamed(event: &RunEvent, from: &str, to: &str, shift: i64) -> RunEvent {
    let mut value = event.to_value();
    rename_run(&mut value, from, to);
    if event.is_input()
        && let Some(at) = value.get_mut("at_ms")
        && let Some(ms) = at.as_i64()
    {
        *at = Value::from(ms.saturating_add(shift));
    }
    serde_json::from_value(value).unwrap_or_else(|_| event.clone())
}

/// A call of the parent as the fork would ask it: a timer's firing (or a wait's timeout)
/// tells the agent when it was due and when it fired, times the fork shifts with the
/// firing and the answer that set the timer; a `for` wait then asks the same question.
/// (An `until` wait's due time does not move, so its lateness differs and the fork parts.)
fn timer_inputs_shifted(event: &RunEvent, shift: i64) -> RunEvent {
    if shift == 0 || !matches!(event, RunEvent::AgentCallScheduled { .. }) {
        return event.clone();
    }
    let mut value = event.to_value();
    let Some(inputs) = value
        .pointer_mut("/request/decision_inputs")
        .and_then(Value::as_array_mut)
    else {
        return event.clone();
    };
    let mut shifted = false;
    for input in inputs
        .iter_mut()
        .filter(|i| i["source_agent"] == TIMERS_SOURCE)
    {
        for key in ["due_at_ms", "fired_at_ms"] {
            if let Some(ms) = input["payload"][key].as_i64() {
                input["payload"][key] = Value::from(ms.saturating_add(shift));
                shifted = true;
            }
        }
    }
    if !shifted {
        return event.clone();
    }
    serde_json::from_value(value).unwrap_or_else(|_| event.clone())
}

/// What a recorded input answers: the call, effect, tool call or ticket it names (the
/// block, for an override).
fn subject(input: &RunEvent) -> String {
    let value = input.to_value();
    if let RunEvent::HumanOverrode(_) = input {
        return "run.blocked".to_owned();
    }
    ["request_id", "effect_id", "tool_call_id", "ticket"]
        .iter()
        .find_map(|k| value.get(*k).and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned()
}

/// What a run asked of the outside, by the id an answer names: the requests agents
/// received, the effects requested and started, the tool calls scheduled, the tickets'
/// questions, the block an override answers.
#[derive(Default)]
struct Questions(BTreeMap<String, Vec<Value>>);

impl Questions {
    /// Whether `event` asks something of the outside that an answer names.
    fn asks(event: &RunEvent) -> bool {
        matches!(
            event,
            RunEvent::AgentCallScheduled { .. }
                | RunEvent::EffectRequested(_)
                | RunEvent::EffectStarted(_)
                | RunEvent::ToolCallScheduled(_)
                | RunEvent::Escalated { .. }
                | RunEvent::RunBlocked { .. }
        )
    }

    fn note(&mut self, events: &[RunEvent]) {
        for event in events {
            let (id, value) = match event {
                RunEvent::AgentCallScheduled {
                    request, again_of, ..
                } => (
                    request.request_id.to_string(),
                    self.whole_request(request, again_of.as_ref()),
                ),
                RunEvent::EffectRequested(e) => (e.effect_id.to_string(), event.to_value()),
                RunEvent::EffectStarted(e) => (e.effect_id.to_string(), event.to_value()),
                RunEvent::ToolCallScheduled(t) => (
                    t.tool_call_id.to_string(),
                    serde_json::to_value(&t.request).unwrap_or(Value::Null),
                ),
                RunEvent::Escalated {
                    ticket, subject, ..
                } => (
                    ticket.to_string(),
                    serde_json::to_value(subject).unwrap_or(Value::Null),
                ),
                RunEvent::RunBlocked {
                    rule_id,
                    overridable,
                    ..
                } => (
                    "run.blocked".to_owned(),
                    serde_json::json!({ "rule_id": rule_id, "overridable": overridable }),
                ),
                _ => continue,
            };
            self.0.entry(id).or_default().push(value);
        }
    }

    /// The request a call sent, whole: a call made again (decider version 9) records only
    /// the decision inputs it adds to the call it repeats, and two calls that add the same
    /// input to different requests ask different things.
    fn whole_request(&self, request: &AgentRequest, again_of: Option<&CallId>) -> Value {
        let mut value = serde_json::to_value(request).unwrap_or(Value::Null);
        let inherited = again_of
            .and_then(|asked| self.0.get(asked.as_str()))
            .and_then(|asked| asked.last())
            .and_then(|before| before["decision_inputs"].as_array());
        if let (Some(inherited), Some(Value::Array(added))) =
            (inherited, value.get_mut("decision_inputs"))
        {
            let added = std::mem::take(added);
            value["decision_inputs"] =
                Value::Array(inherited.iter().cloned().chain(added).collect());
        }
        value
    }

    fn get(&self, id: &str) -> Option<&Vec<Value>> {
        self.0.get(id)
    }
}

fn parting(
    seq: u64,
    input: &RunEvent,
    subject: &str,
    was: Option<&Vec<Value>>,
    now: Option<&Vec<Value>>,
) -> Parting {
    // Name a call by its agent too: `writer's call run-2/call-3`.
    let agent = was
        .or(now)
        .and_then(|asked| asked.first())
        .and_then(|first| first.get("target_agent"))
        .and_then(Value::as_str);
    let subject = match agent {
        Some(agent) => format!("{agent}'s call {subject}"),
        None => subject.to_owned(),
    };
    let why = match (was, now) {
        (_, None) => format!("the fork never asks {subject}, which this answers"),
        (None, Some(_)) => format!("the parent never asked {subject} before this"),
        (Some(_), Some(_)) => format!(
            "the fork asks {subject} otherwise than the parent did: its recorded answer does not answer the fork"
        ),
    };
    let empty = Vec::new();
    let (was, now) = (was.unwrap_or(&empty), now.unwrap_or(&empty));
    let differences = differences(
        &Value::Array(was.clone()),
        &Value::Array(now.clone()),
        DIFFERENCES_SHOWN,
    );
    Parting {
        seq,
        input: input.kind(),
        why,
        differences,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_runs_own_ids_are_renamed() {
        let mut value = json!({
            "run_id": "run-1",
            "request_id": "run-1/call-3",
            "other": ["run-10/call-1", "run-1x", "about run-1/call-2", "run-1/call-2 failed"],
        });
        rename_run(&mut value, "run-1", "fork");
        assert_eq!(
            value,
            json!({
                "run_id": "fork",
                "request_id": "fork/call-3",
                "other": ["run-10/call-1", "run-1x", "about run-1/call-2", "run-1/call-2 failed"],
            })
        );
    }

    #[test]
    fn an_input_is_renamed_and_shifted_a_decision_only_renamed() {
        let failed = RunEvent::AgentCallFailed(AgentCallFailed {
            request_id: "run-1/call-2".into(),
            code: "AGENT_TIMEOUT".into(),
            message: "late".into(),
            at_ms: 100,
        });
        let RunEvent::AgentCallFailed(AgentCallFailed {
            request_id, at_ms, ..
        }) = renamed(&failed, "run-1", "fork", 50)
        else {
            panic!("the same kind");
        };
        assert_eq!((request_id.as_str(), at_ms), ("fork/call-2", 150));
        assert_eq!(subject(&failed), "run-1/call-2");
        let failed_run = RunEvent::RunFailed {
            reason: "run-1/call-2 failed".into(),
        };
        assert_eq!(renamed(&failed_run, "run-1", "fork", 50), failed_run);
    }
}
