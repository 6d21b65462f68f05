//! Human overrides (docs/governance.md#human-override).
//!
//! A run blocked by a rule a person may override records on its `run.blocked` what the
//! block stopped (`overridable`): the level of seed 002's precedence the rule sits at,
//! the step it stopped, and the episodes the block ended. The mapping of blocking rules
//! to levels is [`HeldStep::level`]:
//!
//! | what blocked | level | an override continues |
//! |---|---|---|
//! | a handoff the interaction matrix, the flow order, a data contract or a provenance rule denied | `global_rules` (2) | the handoff, scoped and recorded as `handoff.allowed` (rule `human.override`), then the agent's remaining actions |
//! | a DANGEROUS risk verdict | `safety_skill` (3) | the agent's held actions |
//! | a spawn of a forbidden child type | `global_rules` (2) | the spawn, authorised by a human, then the remaining actions |
//! | the failure ladder's hard stop | `global_rules` (2) | the call, retried |
//!
//! `human.overrode` (who, role, the rule, why) is accepted only when the role outranks the
//! level and the rule is not absolute (`PolicyBundle::decide_human_override`); otherwise it
//! is refused and nothing is recorded. Its batch records the authority decision
//! (`policy.decided`), then what the block stopped goes on through the usual gates.

use super::*;
use crate::events::overrides::{HeldStep, Overridable};
use docket_policies::OverrideRequest;

/// Whether an override of this run may be recorded: a run blocked by a rule a person may override, asked by a named person who says why and names the rule
/// that blocked, in a role that outranks it. Nothing is recorded otherwise.
pub(super) fn check_override(
    state: &RunState,
    bundle: &PolicyBundle,
    by: &str,
    role: &str,
    rule_id: &str,
    reason: &str,
) -> Result<(), Rejection> {
    if state.status != RunStatus::Blocked {
        return Err(Rejection::NotBlocked(state.status.as_str()));
    }
    let blocked_by = state.blocked_by.as_deref().unwrap_or("");
    let Some(held) = state.overridable.as_deref() else {
        return Err(Rejection::OverrideRefused(format!(
            "`{blocked_by}` stopped nothing an override can continue (overridable: a handoff a policy denied, a DANGEROUS verdict, a forbidden child type, the failure ladder's hard stop)"
        )));
    };
    if by.trim().is_empty() {
        return Err(Rejection::Unnamed(PersonAct::Override));
    }
    if reason.trim().is_empty() {
        return Err(Rejection::Unexplained(PersonAct::Override));
    }
    if rule_id != blocked_by {
        return Err(Rejection::OverrideRefused(format!(
            "the run is blocked by `{blocked_by}`, not `{rule_id}`"
        )));
    }
    let d = bundle.decide_human_override(&OverrideRequest {
        role,
        rule_id,
        level: held.level,
        deny_pattern: held.deny_pattern.as_deref(),
    });
    if d.is_allowed() {
        Ok(())
    } else {
        Err(Rejection::OverrideRefused(d.reason.to_string()))
    }
}

impl Batch<'_> {
    /// Remembers what the block about to be recorded stops, with the episodes still open
    /// (the block ends them; an override reopens them).
    pub(super) fn hold(&mut self, step: HeldStep, deny_pattern: Option<String>) {
        let episodes = self
            .state
            .episodes
            .in_order()
            .into_iter()
            .filter(|e| {
                matches!(
                    e.phase,
                    crate::state::episode::EpisodePhase::Running
                        | crate::state::episode::EpisodePhase::Review
                )
            })
            .map(|e| e.id.clone())
            .collect();
        self.held = Some(Box::new(Overridable {
            level: step.level(),
            step,
            episodes,
            deny_pattern,
        }));
    }

    /// A handoff about to be denied: held with the answer's actions after it.
    pub(super) fn hold_handoff(
        &mut self,
        from: &str,
        to: &str,
        output_type: &str,
        payload: &Value,
        origin: Option<&AgentRequest>,
    ) {
        let request_id = origin.map(|r| r.request_id.clone());
        let (then, task) = match (&self.acting, &request_id) {
            (Some((id, all, next)), Some(r)) if id == r => {
                let task = match next.checked_sub(1).and_then(|i| all.get(i)) {
                    Some(Action::Handoff { task, .. }) => task.clone(),
                    _ => None,
                };
                (all.get(*next..).unwrap_or(&[]).to_vec(), task)
            }
            _ => (Vec::new(), None),
        };
        self.hold(
            HeldStep::Handoff {
                from: from.into(),
                to: to.into(),
                output_type: output_type.to_owned(),
                payload: payload.clone(),
                request_id,
                then,
                task,
            },
            None,
        );
    }

    /// The deny pattern behind a rejected output, if a tool call of the answer to
    /// `request_id` was denied by one.
    pub(super) fn deny_pattern_behind(&self, request_id: &CallId) -> Option<String> {
        let call = self.state.calls.get(request_id)?;
        let response = call.response.as_ref()?;
        let agent = &call.recorded.target_agent;
        response.tool_calls.iter().find_map(|tool| {
            let d = self.bundle.decide_tool_call(agent, &tool.invocation(), &[]);
            (!d.is_allowed() && self.bundle.is_deny_pattern(&d.rule_id))
                .then(|| d.rule_id.to_string())
        })
    }

    /// `human.overrode`: its event opens the batch (the fold lifts the block and reopens
    /// the episodes it ended), then the authority decision, then what the block stopped.
    pub(super) fn on_override(&mut self, command: Command) {
        let held = self.state.overridable.clone();
        self.push(command.to_event());
        let Command::RecordOverride(HumanOverrode {
            by,
            role,
            rule_id,
            reason,
            ..
        }) = command
        else {
            return;
        };
        let Some(held) = held else {
            return;
        };
        let decision = self.bundle.decide_human_override(&OverrideRequest {
            role: &role,
            rule_id: &rule_id,
            level: held.level,
            deny_pattern: held.deny_pattern.as_deref(),
        });
        self.push(RunEvent::PolicyDecided {
            subject: format!("override of {rule_id}"),
            decision: decision.clone(),
        });
        let authority = PolicyDecision {
            reason: format!("{by} ({role}) overrode `{rule_id}`: {reason}").into(),
            ..decision
        };
        match held.step {
            HeldStep::Handoff {
                from,
                to,
                output_type,
                payload,
                request_id,
                then,
                task,
            } => {
                if let Some(r) = &request_id {
                    self.enter(r);
                    self.confidence = self.confidence_of(r);
                }
                let (delivered, labels) = self.gate_labelled(
                    request_id.as_ref(),
                    (&from, &to),
                    &output_type,
                    &payload,
                    &authority,
                );
                if to == EXTERNAL {
                    self.complete_run(Value::clone(&delivered), Some(&from));
                    return;
                }
                self.outbox.push(Delivery {
                    from: from.clone(),
                    to,
                    output_type,
                    confidence: self.confidence,
                    payload: delivered,
                    task,
                    warnings: labels.warnings,
                    conflict: None,
                });
                match request_id {
                    Some(r) => {
                        self.run_actions(&from, &r, &then);
                        self.flush(&r);
                    }
                    None => {
                        let deliveries = std::mem::take(&mut self.outbox);
                        self.dispatch(None, deliveries);
                    }
                }
            }
            HeldStep::Actions {
                agent,
                request_id,
                actions,
            } => {
                self.enter(&request_id);
                self.confidence = self.confidence_of(&request_id);
                self.process_actions(&agent, &request_id, &actions);
            }
            HeldStep::Spawn {
                agent,
                request_id,
                actions,
            } => {
                self.enter(&request_id);
                self.confidence = self.confidence_of(&request_id);
                self.human_authorized = true;
                self.process_actions(&agent, &request_id, &actions);
                self.human_authorized = false;
            }
            HeldStep::Retry { request_id } => {
                self.enter(&request_id);
                let note = json!({
                    "request_id": request_id,
                    "blocked_by": rule_id,
                    "overridden_by": by,
                    "role": role,
                    "override_reason": reason,
                });
                let Some(agent) = self
                    .state
                    .calls
                    .get(&request_id)
                    .map(|c| c.recorded.target_agent.clone())
                else {
                    return;
                };
                let note = self.gate_content(
                    "human",
                    &agent,
                    ("previous_attempt", InputKind::Context),
                    &note,
                    &authority,
                );
                self.retry(&request_id, Arc::unwrap_or_clone(note));
            }
        }
    }

    fn confidence_of(&self, request_id: &CallId) -> Option<Confidence> {
        self.state
            .calls
            .get(request_id)
            .and_then(|c| c.response.as_ref())
            .and_then(|r| r.confidence_level)
    }
}
