//! Compare two runs step by step (docs/replay.md#diff): each run's log is read as the
//! steps it took, each named by what it is rather than where it sits in the log, so a
//! fork that took one call more still lines up with its parent:
//!
//! | step | named by | decision | payload | outcome |
//! |---|---|---|---|---|
//! | agent call | target agent, n-th call to it | — | the request it received | its answer, or the failure |
//! | handoff (and what crosses by other rules) | from → to (type), n-th | allowed or denied, rule | what was delivered | — |
//! | policy decision (capability, tool, ladder...) | kind and subject, n-th | verdict, rule | — | — |
//! | effect | idempotency key, n-th | applied, deduplicated, refused, failed | kind, lane, params | receipt, settlement |
//! | tool call | tool name, n-th | scheduled or denied, rule | arguments | result, or the failure |
//! | ticket | what it asks, n-th | approved or denied, by whom | the question | choice, answer |
//! | the run | — | completed, blocked, failed | — | output, why it stopped |
//!
//! Each run's own ids are read as the steps they name (`run-1/call-3` as `call strategy
//! #2`, in a request, an answer or a receipt), so two runs' requests compare by content,
//! and a request's inputs are compared in the order of their sources, so a join whose
//! branches answered in another order lines up branch by branch.

use docket_decider::{AgentCallFailed, AgentResponded, HumanDecided, HumanOverrode, RunCancelled};
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use docket_decider::RunEvent;

use crate::decisions::handoff_rule;
use crate::diff::differences;
use crate::fork::rename_run;

/// How many differing places a step lists, per part.
const DIFFERENCES_SHOWN: usize = 20;

/// What a run's own id is read as, so that two runs' ids compare.
const ANY_RUN: &str = "{run}";

/// One step of a run, as compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// What the step is (`call strategy #2`, `effect post-1 #1`, `run`).
    pub id: String,
    /// 1-based sequence of its first event.
    pub seq: u64,
    /// What was decided (`allowed [rule]`, `denied [rule]`, `applied`...), if anything.
    pub decision: Option<String>,
    /// What it carried (a request, a delivered payload, an effect's params).
    pub payload: Option<Value>,
    /// What came of it (an answer, a receipt, an output).
    pub outcome: Option<Value>,
}

/// One place where the two runs' versions of a step differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldDiff {
    /// JSON pointer into the payload or the outcome.
    pub path: String,
    /// The value in run A (`None`: absent).
    pub a: Option<Value>,
    /// The value in run B (`None`: absent).
    pub b: Option<Value>,
}

/// A step both runs took, differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepDiff {
    /// What the step is.
    pub id: String,
    /// Its first event in run A and in run B.
    pub seq_a: u64,
    /// See `seq_a`.
    pub seq_b: u64,
    /// The decisions, when they differ: (A's, B's).
    pub decision: Option<(Option<String>, Option<String>)>,
    /// Where what it carried differs.
    pub payload: Vec<FieldDiff>,
    /// Where what came of it differs.
    pub outcome: Vec<FieldDiff>,
}

/// A step only one run took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OnlyIn {
    /// What the step is.
    pub id: String,
    /// Its first event.
    pub seq: u64,
    /// What was decided there.
    pub decision: Option<String>,
}

/// Two runs compared step by step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiff {
    /// Run A's id.
    pub run_a: String,
    /// Run B's id.
    pub run_b: String,
    /// Steps both took, the same way.
    pub same: usize,
    /// Steps both took, differently, in run A's order.
    pub differing: Vec<StepDiff>,
    /// Steps only run A took.
    pub only_a: Vec<OnlyIn>,
    /// Steps only run B took.
    pub only_b: Vec<OnlyIn>,
}

impl RunDiff {
    /// The runs took the same steps the same way.
    #[must_use]
    pub fn no_difference(&self) -> bool {
        self.differing.is_empty() && self.only_a.is_empty() && self.only_b.is_empty()
    }
}

/// Compares the runs whose logs are `a` and `b`.
#[must_use]
pub fn diff_runs(a: &[RunEvent], b: &[RunEvent]) -> RunDiff {
    let (steps_a, steps_b) = (steps(a), steps(b));
    let by_id: BTreeMap<&str, &Step> = steps_b.iter().map(|s| (s.id.as_str(), s)).collect();
    let in_a: BTreeMap<&str, ()> = steps_a.iter().map(|s| (s.id.as_str(), ())).collect();
    let mut diff = RunDiff {
        run_a: run_id(a),
        run_b: run_id(b),
        same: 0,
        differing: Vec::new(),
        only_a: Vec::new(),
        only_b: Vec::new(),
    };
    for step in &steps_a {
        let Some(other) = by_id.get(step.id.as_str()) else {
            diff.only_a.push(only(step));
            continue;
        };
        let part = |x: &Option<Value>, y: &Option<Value>| -> Vec<FieldDiff> {
            let null = Value::Null;
            differences(
                x.as_ref().unwrap_or(&null),
                y.as_ref().unwrap_or(&null),
                DIFFERENCES_SHOWN,
            )
            .into_iter()
            .map(|d| FieldDiff {
                path: d.path,
                a: d.recorded,
                b: d.decided,
            })
            .collect()
        };
        let found = StepDiff {
            id: step.id.clone(),
            seq_a: step.seq,
            seq_b: other.seq,
            decision: (step.decision != other.decision)
                .then(|| (step.decision.clone(), other.decision.clone())),
            payload: part(&step.payload, &other.payload),
            outcome: part(&step.outcome, &other.outcome),
        };
        if found.decision.is_none() && found.payload.is_empty() && found.outcome.is_empty() {
            diff.same += 1;
        } else {
            diff.differing.push(found);
        }
    }
    diff.only_b = steps_b
        .iter()
        .filter(|s| !in_a.contains_key(s.id.as_str()))
        .map(only)
        .collect();
    diff
}

fn only(step: &Step) -> OnlyIn {
    OnlyIn {
        id: step.id.clone(),
        seq: step.seq,
        decision: step.decision.clone(),
    }
}

fn run_id(events: &[RunEvent]) -> String {
    match events.first() {
        Some(RunEvent::RunRequested(r)) => r.run_id.to_string(),
        _ => String::new(),
    }
}

/// The steps of a run's log, in the order they began.
#[must_use]
pub fn steps(events: &[RunEvent]) -> Vec<Step> {
    let run = run_id(events);
    let mut walk = Walk {
        run,
        steps: Vec::new(),
        counts: BTreeMap::new(),
        by_run_id: BTreeMap::new(),
    };
    for (i, event) in events.iter().enumerate() {
        walk.event(i as u64 + 1, event);
    }
    walk.steps
}

/// A request's inputs in the order of their sources (agent, then output type), not the
/// order they came in: a join delivers a fan-out's outputs in the order its branches
/// answered, which says nothing of the run, so two runs' requests line up branch by
/// branch.
fn by_source(request: &mut Value) {
    for inputs in ["decision_inputs", "context_inputs"] {
        if let Some(Value::Array(list)) = request.get_mut(inputs) {
            list.sort_by(|a, b| {
                let key = |v: &Value| {
                    (
                        v["source_agent"].as_str().unwrap_or_default().to_owned(),
                        v["output_type"].as_str().unwrap_or_default().to_owned(),
                    )
                };
                key(a).cmp(&key(b))
            });
        }
    }
}

struct Walk {
    run: String,
    steps: Vec<Step>,
    /// How many steps of each name so far (the n-th call to an agent...).
    counts: BTreeMap<String, usize>,
    /// The step of each of the run's own ids (call, effect, tool call, ticket).
    by_run_id: BTreeMap<String, usize>,
}

impl Walk {
    /// The value with the run's own ids read as the steps they name (`{run}/call-7` as
    /// `call worker #2`), and any other id of the run as any run's.
    fn neutral(&self, value: Value) -> Value {
        let mut value = value;
        self.name_ids(&mut value);
        rename_run(&mut value, &self.run, ANY_RUN);
        value
    }

    fn name_ids(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Some(step) = self
                    .by_run_id
                    .get(s.as_str())
                    .and_then(|at| self.steps.get(*at))
                {
                    *s = step.id.clone();
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.name_ids(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.name_ids(v)),
            _ => {}
        }
    }

    fn begin(&mut self, name: String, seq: u64, own_id: Option<String>) -> usize {
        let n = self.counts.entry(name.clone()).or_default();
        *n += 1;
        self.steps.push(Step {
            id: format!("{name} #{n}"),
            seq,
            decision: None,
            payload: None,
            outcome: None,
        });
        let at = self.steps.len() - 1;
        if let Some(id) = own_id {
            self.by_run_id.insert(id, at);
        }
        at
    }

    fn step_of(&mut self, own_id: &str) -> Option<&mut Step> {
        let at = *self.by_run_id.get(own_id)?;
        self.steps.get_mut(at)
    }

    fn event(&mut self, seq: u64, event: &RunEvent) {
        match event {
            RunEvent::RunRequested(_) => {
                self.begin("run".to_owned(), seq, None);
            }
            RunEvent::AgentCallScheduled { request, .. } => {
                let at = self.begin(
                    format!("call {}", request.target_agent),
                    seq,
                    Some(request.request_id.to_string()),
                );
                let mut payload =
                    self.neutral(serde_json::to_value(&**request).unwrap_or_default());
                by_source(&mut payload);
                self.steps[at].payload = Some(payload);
            }
            RunEvent::AgentResponded(AgentResponded {
                request_id,
                response,
                ..
            }) => {
                let outcome = self.neutral(serde_json::to_value(&**response).unwrap_or_default());
                if let Some(step) = self.step_of(request_id.as_str()) {
                    step.decision = Some(format!("answered {}", response.status.as_str()));
                    step.outcome = Some(outcome);
                }
            }
            RunEvent::AgentCallFailed(AgentCallFailed {
                request_id,
                code,
                message,
                ..
            }) => {
                if let Some(step) = self.step_of(request_id.as_str()) {
                    step.decision = Some(format!("failed {code}"));
                    step.outcome = Some(json!({ "code": code, "message": message }));
                }
            }
            RunEvent::CallDegraded {
                request_id, error, ..
            } => {
                let outcome = self.neutral(error.clone());
                if let Some(step) = self.step_of(request_id.as_str()) {
                    step.decision = Some("degraded: circuit open".to_owned());
                    step.outcome = Some(outcome);
                }
            }
            RunEvent::HandoffAllowed {
                from,
                to,
                output_type,
                decision,
                audit,
                delivered,
                ..
            } => {
                let at = self.begin(format!("handoff {from} → {to} ({output_type})"), seq, None);
                let rule = handoff_rule(decision, audit);
                let payload = self.neutral((**delivered).clone());
                let step = &mut self.steps[at];
                step.decision = Some(format!("allowed [{rule}]"));
                step.payload = Some(payload);
            }
            RunEvent::HandoffDenied {
                from,
                to,
                output_type,
                decision,
                ..
            } => {
                let at = self.begin(format!("handoff {from} → {to} ({output_type})"), seq, None);
                self.steps[at].decision = Some(format!("denied [{}]", decision.rule_id));
            }
            RunEvent::PolicyDecided { subject, decision } => {
                let kind = serde_json::to_value(decision.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                let subject = self.neutral(Value::from(subject.as_str()));
                let at = self.begin(
                    format!(
                        "{kind} decision on {}",
                        subject.as_str().unwrap_or_default()
                    ),
                    seq,
                    None,
                );
                self.steps[at].decision = Some(format!(
                    "{} [{}]",
                    verdict(decision.verdict),
                    decision.rule_id
                ));
            }
            RunEvent::EffectRequested(e) => {
                let key = e
                    .idempotency_key
                    .clone()
                    .unwrap_or_else(|| e.effect_id.to_string());
                let mut key = Value::from(key);
                rename_run(&mut key, &self.run, ANY_RUN);
                let at = self.begin(
                    format!("effect {}", key.as_str().unwrap_or_default()),
                    seq,
                    Some(e.effect_id.to_string()),
                );
                let payload = json!({ "kind": e.effect_kind, "lane": e.lane, "params": e.params, "attempt": e.attempt });
                self.steps[at].payload = Some(payload);
            }
            RunEvent::EffectDeduplicated(e) => {
                let outcome = json!({ "receipt": e.receipt });
                if let Some(step) = self.step_of(e.effect_id.as_str()) {
                    step.decision = Some("deduplicated".to_owned());
                    step.outcome = Some(outcome);
                }
            }
            RunEvent::EffectRefused(e) => {
                if let Some(step) = self.step_of(e.effect_id.as_str()) {
                    step.decision = Some(format!("refused [{}]", e.rule_id));
                    step.outcome = Some(json!({ "reason": e.reason }));
                }
            }
            RunEvent::EffectApplied(e) => {
                if let Some(step) = self.step_of(e.effect_id.as_str()) {
                    step.decision = Some("applied".to_owned());
                    step.outcome = Some(json!({ "receipt": e.receipt }));
                }
            }
            RunEvent::EffectFailed(e) => {
                if let Some(step) = self.step_of(e.effect_id.as_str()) {
                    step.decision = Some(format!("failed {}", e.code));
                    step.outcome = Some(json!({ "code": e.code, "message": e.message }));
                }
            }
            RunEvent::EffectSettled(e) => {
                let settled = serde_json::to_value(e.status).unwrap_or_default();
                if let Some(step) = self.step_of(e.effect_id.as_str()) {
                    let mut outcome = step.outcome.take().unwrap_or_else(|| json!({}));
                    outcome["settled"] = settled;
                    step.outcome = Some(outcome);
                }
            }
            RunEvent::ToolCallScheduled(t) => {
                let at = self.begin(
                    format!("tool {}", t.name),
                    seq,
                    Some(t.tool_call_id.to_string()),
                );
                let payload = self.neutral(serde_json::to_value(&t.request).unwrap_or_default());
                self.steps[at].decision = Some("scheduled".to_owned());
                self.steps[at].payload = Some(payload);
            }
            RunEvent::ToolDenied(t) => {
                let at = self.begin(format!("tool {}", t.name), seq, None);
                self.steps[at].decision = Some(format!("denied [{}]", t.rule_id));
                self.steps[at].payload = Some(t.arguments.clone());
            }
            RunEvent::ToolReturned(t) => {
                let outcome = self.neutral(t.result.clone());
                if let Some(step) = self.step_of(t.tool_call_id.as_str()) {
                    step.outcome = Some(outcome);
                }
            }
            RunEvent::ToolFailed(t) => {
                if let Some(step) = self.step_of(t.tool_call_id.as_str()) {
                    step.decision = Some(format!("failed {}", t.code));
                    step.outcome = Some(json!({ "code": t.code, "message": t.message }));
                }
            }
            RunEvent::Escalated {
                ticket, subject, ..
            } => {
                let subject = self.neutral(serde_json::to_value(subject).unwrap_or_default());
                let what = subject
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("ticket")
                    .to_owned();
                let at = self.begin(format!("ticket {what}"), seq, Some(ticket.to_string()));
                self.steps[at].payload = Some(subject);
            }
            RunEvent::HumanDecided(HumanDecided {
                ticket,
                approved,
                by,
                choice,
                answer,
                ..
            }) => {
                if let Some(step) = self.step_of(ticket.as_str()) {
                    let what = if *approved { "approved" } else { "denied" };
                    step.decision = Some(format!("{what} by {by}"));
                    step.outcome = Some(json!({ "choice": choice, "answer": answer }));
                }
            }
            RunEvent::HumanOverrode(HumanOverrode { by, rule_id, .. }) => {
                let at = self.begin(format!("override of {rule_id}"), seq, None);
                self.steps[at].decision = Some(format!("overridden by {by}"));
            }
            RunEvent::RunCompleted { output, conflicts } => {
                let output = self.neutral(output.clone());
                let mut outcome = json!({ "output": output });
                if !conflicts.is_empty() {
                    outcome["conflicts"] = json!(conflicts);
                }
                self.end("completed".to_owned(), outcome);
            }
            RunEvent::RunBlocked {
                rule_id, reason, ..
            } => self.end(format!("blocked [{rule_id}]"), json!({ "reason": reason })),
            RunEvent::RunFailed { reason } => {
                self.end("failed".to_owned(), json!({ "reason": reason }));
            }
            RunEvent::RunCancelled(RunCancelled { by, reason, .. }) => {
                self.end(format!("cancelled by {by}"), json!({ "reason": reason }));
            }
            _ => {}
        }
    }

    /// The run's own step takes its end (the last, after an override went on).
    fn end(&mut self, decision: String, outcome: Value) {
        if let Some(run) = self.steps.first_mut() {
            run.decision = Some(decision);
            run.outcome = Some(outcome);
        }
    }
}

fn verdict(v: docket_policies::Verdict) -> &'static str {
    match v {
        docket_policies::Verdict::Allow => "allowed",
        docket_policies::Verdict::Deny => "denied",
        docket_policies::Verdict::NeedsApproval => "needs approval",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use docket_decider::{
        Action, AgentRequest, AgentResponse, CallId, Confidence, DecisionInput, RunRequested,
        WorkflowSpec,
    };

    fn start(run: &str) -> RunEvent {
        RunEvent::RunRequested(Arc::new(RunRequested {
            run_id: run.into(),
            workflow: WorkflowSpec {
                name: "w".into(),
                policy: "w.toml".into(),
                entry: "worker".into(),
                input_type: None,
                goal: None,
                budget: Default::default(),
                input: None,
                agents: Default::default(),
                effects: Default::default(),
                tools: Default::default(),
                evidence: Default::default(),
            },
            bundle_source: String::new(),
            bundle_source_name: "w.toml".into(),
            bundle_hash: String::new(),
            input: json!({}),
            at_ms: 0,
            decider_version: 7,
            forked_from: None,
            scheduled: None,
            session: None,
        }))
    }

    fn call(run: &str, n: u32, agent: &str, text: &str) -> RunEvent {
        let mut request = AgentRequest::new(
            CallId::from(format!("{run}/call-{n}")),
            "external",
            agent,
            "work",
        );
        request.run_id = run.into();
        request.context.insert("text".into(), json!(text));
        RunEvent::AgentCallScheduled {
            request: Arc::new(request),
            reply_to: None,
            classifies: None,
            branch_of: None,
            again_of: None,
        }
    }

    fn answer(run: &str, n: u32, output: Value) -> RunEvent {
        let id = CallId::from(format!("{run}/call-{n}"));
        RunEvent::AgentResponded(AgentResponded {
            request_id: id.clone(),
            response: Arc::new(AgentResponse::success(
                id,
                Confidence::High,
                vec![Action::Finish { output }],
            )),
            at_ms: 1,
        })
    }

    fn done(output: Value) -> RunEvent {
        RunEvent::RunCompleted {
            output,
            conflicts: Vec::new(),
        }
    }

    #[test]
    fn the_same_steps_of_two_runs_align_whatever_their_ids() {
        let a = [
            start("a"),
            call("a", 1, "worker", "x"),
            answer("a", 1, json!({"n": 1})),
            done(json!({"n": 1})),
        ];
        let b = [
            start("b"),
            call("b", 1, "worker", "x"),
            answer("b", 1, json!({"n": 1})),
            done(json!({"n": 1})),
        ];
        let diff = diff_runs(&a, &b);
        assert!(diff.no_difference(), "{diff:?}");
        assert_eq!(diff.same, 2);
        assert!(diff_runs(&a, &a).no_difference());
    }

    #[test]
    fn steps_align_by_agent_and_order_not_by_sequence() {
        // B calls a checker first: every later step sits elsewhere in its log, and its
        // call numbers are shifted, yet the worker's call still aligns.
        let a = [
            start("a"),
            call("a", 1, "worker", "x"),
            answer("a", 1, json!({"n": 1})),
            done(json!({"n": 1})),
        ];
        let b = [
            start("b"),
            call("b", 1, "checker", "x"),
            answer("b", 1, json!({"ok": true})),
            call("b", 2, "worker", "x"),
            answer("b", 2, json!({"n": 2})),
            done(json!({"n": 2})),
        ];
        let diff = diff_runs(&a, &b);
        assert_eq!(diff.only_b.len(), 1);
        assert_eq!(diff.only_b[0].id, "call checker #1");
        assert!(diff.only_a.is_empty());
        let ids: Vec<&str> = diff.differing.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["run #1", "call worker #1"]);
        let worker = &diff.differing[1];
        assert_eq!((worker.seq_a, worker.seq_b), (2, 4));
        assert!(worker.payload.is_empty(), "{worker:?}");
        assert_eq!(worker.outcome.len(), 1, "{worker:?}");
        assert_eq!(worker.outcome[0].path, "/actions/0/output/n");
        assert_eq!(
            (worker.outcome[0].a.clone(), worker.outcome[0].b.clone()),
            (Some(json!(1)), Some(json!(2)))
        );
        assert_eq!(diff.differing[0].outcome[0].path, "/output/n");
    }

    /// A join's call to `agent`, carrying the branches' outputs in `order`.
    fn joined(run: &str, n: u32, agent: &str, order: &[(&str, Value)]) -> RunEvent {
        let RunEvent::AgentCallScheduled { request, .. } = call(run, n, agent, "join") else {
            unreachable!("call makes a scheduled call")
        };
        let mut request = (*request).clone();
        request.decision_inputs = order
            .iter()
            .map(|(from, payload)| DecisionInput::new(*from, "finding", Arc::new(payload.clone())))
            .collect();
        RunEvent::AgentCallScheduled {
            request: Arc::new(request),
            reply_to: None,
            classifies: None,
            branch_of: None,
            again_of: None,
        }
    }

    #[test]
    fn fan_out_answers_align_by_branch_not_by_arrival() {
        // Two branches answer in one order in A and in the other in B; the join hands the
        // judge their outputs in the order they came.
        let (left, right) = (json!({"side": "left"}), json!({"side": "right"}));
        let a = [
            start("a"),
            call("a", 1, "left", "x"),
            call("a", 2, "right", "x"),
            answer("a", 1, left.clone()),
            answer("a", 2, right.clone()),
            joined(
                "a",
                3,
                "judge",
                &[("left", left.clone()), ("right", right.clone())],
            ),
        ];
        let b = [
            start("b"),
            call("b", 1, "left", "x"),
            call("b", 2, "right", "x"),
            answer("b", 2, right.clone()),
            answer("b", 1, left.clone()),
            joined("b", 3, "judge", &[("right", right), ("left", left)]),
        ];
        let diff = diff_runs(&a, &b);
        assert!(diff.no_difference(), "{diff:?}");
        assert_eq!(diff.same, 4);
    }

    #[test]
    fn a_different_request_and_a_step_only_in_one_run_are_named() {
        let a = [
            start("a"),
            call("a", 1, "worker", "x"),
            answer("a", 1, json!({})),
            call("a", 2, "worker", "again"),
        ];
        let b = [
            start("b"),
            call("b", 1, "worker", "y"),
            answer("b", 1, json!({})),
        ];
        let diff = diff_runs(&a, &b);
        assert_eq!(diff.differing.len(), 1);
        assert_eq!(diff.differing[0].payload[0].path, "/context/text");
        assert_eq!(diff.only_a.len(), 1);
        assert_eq!(diff.only_a[0].id, "call worker #2");
        assert_eq!(diff.only_a[0].seq, 4);
    }
}
