//! An agent's response: its checks (status, tool calls, intent classification, locks),
//! then its actions in order (handoffs, capability requests, escalations, spawns, domain
//! writes, effects, finish).

use super::*;
use docket_policies::PARTIAL_OUTPUT_REFUSED;
use docket_protocol::CallId;

impl Batch<'_> {
    pub(super) fn on_response(&mut self, request_id: &CallId, response: &AgentResponse) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        let agent = call.recorded.target_agent.clone();
        self.confidence = response.confidence_level;
        let failed = response.status == ResponseStatus::Error
            || (response.status == ResponseStatus::Timeout && response.actions.is_empty());
        if failed {
            let code = response.failure_code();
            let message = response
                .error_message
                .clone()
                .unwrap_or_else(|| format!("{agent} answered {}", response.status));
            self.on_failure(request_id, &code, &message);
            return;
        }
        if let Some(message) = self.partial_refused(&agent, &call, response) {
            self.on_failure(request_id, PARTIAL_OUTPUT_REFUSED, &message);
            return;
        }
        // Boundary validation (docs/governance.md#output-validation): every tool the agent
        // ran, against deny patterns and its allowed tools.
        let mut violation = None;
        let mut review = None;
        let task_denied = self.task_denied(&call.recorded);
        for tool in &response.tool_calls {
            let d = self
                .bundle
                .decide_tool_call(&agent, &tool.invocation(), task_denied);
            match d.verdict {
                Verdict::Allow => {}
                Verdict::Deny if violation.is_none() => violation = Some(d.reason.to_string()),
                Verdict::NeedsApproval if review.is_none() => review = Some(d.reason.to_string()),
                _ => {}
            }
            self.push(RunEvent::PolicyDecided {
                subject: request_id.to_string(),
                decision: d,
            });
        }
        // Side effects: a verifier's answer settles its effect; a denied or reviewable tool
        // call in it sends the effect to a human instead.
        if let Some(effect_id) = self.state.verifier_calls.get(request_id).cloned() {
            let doubt = violation.or(review);
            let answer = doubt.is_none().then_some(response);
            self.on_verifier_answer(&effect_id, &agent, answer, doubt.as_deref());
            return;
        }
        if let Some(reason) = violation {
            self.on_failure(
                request_id,
                "BOUNDARY_VIOLATION",
                &format!("output rejected: {reason}"),
            );
            return;
        }
        if let Some(reason) = review {
            let ticket = self.next_ticket();
            self.push(RunEvent::Escalated {
                ticket,
                reason: format!("{agent}'s tool call needs review: {reason}"),
                subject: TicketSubject::Proceed {
                    agent,
                    request_id: request_id.clone(),
                    actions: response.actions.clone(),
                },
            });
            return;
        }
        if self.intent_refused(request_id, &call, response) {
            return;
        }
        if let Some(of) = call.classifies.clone() {
            self.on_verdict(request_id, &agent, &of, response);
            return;
        }
        if !response.actions.is_empty() && !self.classifiers_of(&agent).is_empty() {
            self.classify(request_id, 0);
            return;
        }
        if self.finalize_or_escalate(&agent, request_id, &response.actions) {
            self.process_actions(&agent, request_id, &response.actions);
        }
    }

    /// Why a partial answer (PARTIAL, or a TIMEOUT with actions)
    /// may not go on, when one of its handoffs, or its finish at the exit, crosses an edge
    /// that refuses partial outputs (docs/governance.md#partial-outputs).
    fn partial_refused(
        &self,
        agent: &str,
        call: &crate::state::Call,
        response: &AgentResponse,
    ) -> Option<String> {
        let partial = matches!(
            response.status,
            ResponseStatus::Partial | ResponseStatus::Timeout
        );
        if !partial {
            return None;
        }
        // A finish leaves the run (the exit edge to `external`) unless it answers a
        // capability or classifier call, or ends a child episode.
        let exit = call.reply_to.is_none()
            && call.classifies.is_none()
            && self.episode_of_call(&call.recorded.request_id) == docket_protocol::ROOT_EPISODE
            && self.bundle.agent_ids().any(|a| a == EXTERNAL);
        response.actions.iter().find_map(|action| {
            let to = match action {
                Action::Handoff { to, .. } => to.as_str(),
                Action::Finish { .. } if exit => EXTERNAL,
                _ => return None,
            };
            let rule = self.bundle.partial_refused_by(agent, to)?;
            Some(format!(
                "{agent} answered {} and {agent} → {to} refuses partial outputs (rule {rule})",
                response.status
            ))
        })
    }

    pub(super) fn process_actions(&mut self, agent: &str, request_id: &CallId, actions: &[Action]) {
        self.run_actions(agent, request_id, actions);
        self.flush(request_id);
    }

    pub(super) fn run_actions(&mut self, agent: &str, request_id: &CallId, actions: &[Action]) {
        let Some(origin) = self.state.calls.get(request_id).map(|c| c.recorded.clone()) else {
            return;
        };
        // What a block would stop is held for an override.
        let all: Arc<[Action]> = actions.into();
        for (i, action) in actions.iter().enumerate() {
            if self.stopped() {
                return;
            }
            self.acting = Some((request_id.clone(), all.clone(), i + 1));
            match action {
                Action::Handoff {
                    to,
                    output_type,
                    payload,
                    task,
                } => {
                    if !self.handoff(agent, to, output_type, payload, Some(&*origin)) {
                        return;
                    }
                    self.give_task(to, task.as_ref());
                }
                Action::RequestCapability {
                    target_agent,
                    capability_code,
                    inputs,
                    priority,
                } => {
                    if !self.request_capability(
                        agent,
                        &origin,
                        target_agent,
                        (capability_code, *priority),
                        inputs,
                    ) {
                        return;
                    }
                }
                Action::Escalate { reason, choices } => {
                    let ticket = self.next_ticket();
                    let rest = &actions[i + 1..];
                    // An escalation with nothing after it is a question: the agent is
                    // called again with the human's answer.
                    let subject = if rest.is_empty() {
                        TicketSubject::Question {
                            agent: agent.into(),
                            request_id: request_id.clone(),
                            question: reason.clone(),
                            choices: choices.clone(),
                        }
                    } else {
                        TicketSubject::Proceed {
                            agent: agent.into(),
                            request_id: request_id.clone(),
                            actions: rest.to_vec(),
                        }
                    };
                    self.push(RunEvent::Escalated {
                        ticket,
                        reason: format!("{agent} asks a human: {reason}"),
                        subject,
                    });
                    return;
                }
                Action::Finish { output } => {
                    if !self.episode_plain_finish(agent, request_id, output) {
                        self.finish(agent, request_id, output);
                    }
                }
                // Episodes
                Action::Spawn {
                    agent: child,
                    episode_type,
                    goal,
                    budget,
                    inputs,
                    trigger,
                } => {
                    let spawn = episode::Spawn {
                        agent: child,
                        episode_type,
                        goal,
                        budget,
                        inputs,
                        trigger: trigger.as_deref(),
                    };
                    if !self.episode_spawn(agent, request_id, &spawn) {
                        return;
                    }
                }
                Action::WriteDomain { domain, content } => {
                    if !self.episode_write_domain(agent, request_id, domain, content) {
                        return;
                    }
                }
                Action::FinishEpisode { result } => self.episode_finish(agent, request_id, result),
                // Side effects
                Action::RequestEffect { .. } => self.request_effect(agent, request_id, action),
                Action::CallTool { .. } => self.call_tool(agent, request_id, action),
                // Durable timers
                Action::Wait { .. } => self.wait(agent, request_id, action),
            }
        }
    }

    /// A `finish`: a capability call's answer goes back to the agent that asked; the last
    /// agent's finish passes the exit checkpoint (its handoff to `external`, when the
    /// bundle has that agent) and completes the run.
    pub(super) fn finish(&mut self, agent: &str, request_id: &CallId, output: &Value) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        if let Some(asker_id) = &call.reply_to {
            let Some(asker) = self.state.calls.get(asker_id).cloned() else {
                return;
            };
            let code = call.recorded.capability_code.clone();
            let authority = PolicyDecision {
                kind: DecisionKind::Capability,
                verdict: Verdict::Allow,
                rule_id: format!("capabilities.{code}").into(),
                reason: format!(
                    "the answer to {}'s request for {code} returns to it",
                    asker.recorded.target_agent
                )
                .into(),
                bundle_hash: self.bundle.hash(),
                chain: Vec::new(),
            };
            let (answer, labels) = self.gate_labelled(
                Some(request_id),
                (agent, &asker.recorded.target_agent),
                &code,
                output,
                &authority,
            );
            let mut input = DecisionInput::new(agent, code, answer);
            input.confidence_level = labels.confidence;
            input.warnings = labels.warnings;
            self.call_again(asker_id, input);
            return;
        }
        let held = call
            .branch_of
            .as_ref()
            .is_some_and(|g| self.state.held.get(g).is_some_and(|h| !h.is_empty()));
        if !self.state.pending.is_empty()
            || !self.outbox.is_empty()
            || held
            || self.state.effects_in_flight()
            || self.state.tools_in_flight()
            || self.state.timers_pending()
            || !self.state.signal_waits.is_empty()
        {
            return;
        }
        let has_external = self.bundle.agent_ids().any(|a| a == EXTERNAL);
        if has_external {
            let output_type = self
                .bundle
                .decide_handoff(agent, EXTERNAL, InputKind::Decision)
                .output_type
                .map_or_else(|| "output".to_owned(), |t| t.to_string());
            self.handoff(agent, EXTERNAL, &output_type, output, Some(&*call.recorded));
        } else {
            self.complete_run(output.clone(), Some(agent));
        }
    }
}
