//! Episode decisions (docs/governance.md#episodes), as `Batch` methods the transition code
//! dispatches to: spawning children under the recursion policy and budget rules, domain
//! writes, episode results (back to the parent's agent, or the run's result for the root),
//! needs_review handoff tickets, and the six stop conditions.
//!
//! What a stop does: the episode and its running descendants get `episode.stopped`
//! naming the condition. A stopped child hands its parent a `failed` result
//! (`error_class` = the condition). The root stopping ends the run: `success_achieved`
//! completes it, `no_new_information` and `failure_repeats` fail it, the others
//! (`budget_exhausted`, `depth_exceeded`, `policy_blocks`) block it. A refusal whose
//! condition is not in the episode's `stop_conditions` does not stop anything: the agent
//! is called again with an `action_denied` decision input saying what was refused.
//!
//! When the run ends otherwise (a plain handoff to `external`, a block, a failure), every
//! episode still open gets its end recorded first (`close_open_episodes`), so each run's
//! episode tree is closed in its log.

use crate::state::episode::DomainVersion;
use docket_protocol::{AgentId, CallId, EffectId, EpisodeId};
use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use docket_policies::{ClassDecision, StopCondition, VERIFICATION_FIRST};
use docket_policies::{
    DecisionKind, InputKind, PolicyDecision, RuleStep, SpawnRequest, StepOutcome, Verdict,
};

use super::{Batch, EXTERNAL};
use crate::events::{
    BOUNDED_SUMMARIES, DOMAIN_ATTACH, MAX_SUMMARY_LINES, RECURSION_CLASSES, RunEvent,
    SUMMARY_LINES_RULE, TicketSubject, seed_error,
};
use crate::state::episode::{
    Episode, EpisodePhase, ROOT_EPISODE, TOKENS, TOOL_CALLS, WALL_TIME_MS, condition_name,
    stopped_result,
};
use docket_protocol::{
    Action, AgentRequest, BudgetRequest, ContextInput, DecisionInput, EpisodeResult, EpisodeStatus,
};

/// `source_agent` of the decision inputs the engine itself adds (refusals).
const ENGINE: &str = "docket";

/// A `spawn` action's fields.
pub(super) struct Spawn<'a> {
    pub agent: &'a str,
    pub episode_type: &'a str,
    pub goal: &'a str,
    pub budget: &'a BudgetRequest,
    pub inputs: &'a Map<String, Value>,
    pub trigger: Option<&'a str>,
}

impl Batch<'_> {
    /// The episode a call belongs to (the root for calls recorded before episodes).
    pub(super) fn episode_of_call(&self, request_id: &CallId) -> EpisodeId {
        self.state
            .calls
            .get(request_id)
            .map(|c| c.recorded.episode_id.clone())
            .filter(|e| self.state.episodes.get(e).is_some())
            .unwrap_or_else(EpisodeId::root)
    }

    pub(super) fn episode(&self, id: &EpisodeId) -> Option<Episode> {
        self.state.episodes.get(id).cloned()
    }

    fn listed(&self, episode: &Episode, condition: StopCondition) -> bool {
        self.bundle
            .recursion_policy(&episode.agent)
            .stop_conditions
            .contains(&condition)
    }

    /// Before a call's answer is acted on: false when its episode (or an ancestor) is no
    /// longer running (the answer is recorded, its actions are not carried out), or when
    /// the usage just charged exhausted a budget and `budget_exhausted` stopped it.
    pub(super) fn episode_admits(&mut self, request_id: &CallId) -> bool {
        let id = self.episode_of_call(request_id);
        // Read in place: an episode holds its children, so a copy of the chain (the
        // root's children grow with the run) made every answer cost the run's length.
        let chain = self.state.episodes.chain(&id);
        if chain.iter().any(|e| e.phase != EpisodePhase::Running) {
            return false;
        }
        let exhausted = chain.iter().find_map(|e| {
            if !self.listed(e, StopCondition::BudgetExhausted) {
                return None;
            }
            e.exhausted().map(|(dim, m)| {
                (
                    e.id.clone(),
                    format!("{dim}: used {} of {}", m.used, m.limit),
                )
            })
        });
        if let Some((id, reason)) = exhausted {
            self.stop_episode(
                &id,
                StopCondition::BudgetExhausted,
                "stop_conditions.budget_exhausted",
                &reason,
            );
            return false;
        }
        true
    }

    /// `finalize_or_escalate_at_percent` holds for an answer's every action: past it (in the call's episode or an ancestor), an answer that hands
    /// off, asks for a capability or writes a domain is not carried out but goes to a
    /// human as a `proceed` ticket naming the budget (approving carries the actions out,
    /// denying refuses them), so the agent finishes, escalates, or a person lets it go
    /// on. Spawns, effects and tool calls past the line are refused by their own gates.
    /// Returns false when the answer was held.
    pub(super) fn finalize_or_escalate(
        &mut self,
        agent: &str,
        request_id: &CallId,
        actions: &[Action],
    ) -> bool {
        if !actions.iter().any(|a| {
            matches!(
                a,
                Action::Handoff { .. }
                    | Action::RequestCapability { .. }
                    | Action::WriteDomain { .. }
            )
        }) {
            return true;
        }
        let id = self.episode_of_call(request_id);
        let crossed = self.state.episodes.chain(&id).into_iter().find_map(|e| {
            let d = self.bundle.decide_budget(&e.budget);
            (d.verdict == Verdict::NeedsApproval).then(|| (e.id.clone(), d))
        });
        let Some((episode, decision)) = crossed else {
            return true;
        };
        let reason = format!(
            "{agent} must finish or escalate: episode {episode}: {}",
            decision.reason
        );
        self.push(RunEvent::PolicyDecided {
            subject: request_id.to_string(),
            decision,
        });
        let ticket = self.next_ticket();
        self.push(RunEvent::Escalated {
            ticket,
            reason,
            subject: TicketSubject::Proceed {
                agent: agent.into(),
                request_id: request_id.clone(),
                actions: actions.to_vec(),
            },
        });
        false
    }

    /// The escalation ladder's hard stop for a call in a child episode: the child stops
    /// (`failure_repeats`: its step failed as often as the ladder allows) and its parent
    /// gets a failed result, instead of the whole run being blocked. Returns false for
    /// the root, or when `failure_repeats` is not listed (the run is blocked as before).
    pub(super) fn episode_hard_stop(
        &mut self,
        request_id: &CallId,
        rule: &str,
        reason: &str,
    ) -> bool {
        let id = self.episode_of_call(request_id);
        let Some(episode) = self.episode(&id) else {
            return false;
        };
        if episode.parent.is_none() || !self.listed(&episode, StopCondition::FailureRepeats) {
            return false;
        }
        self.stop_episode(&id, StopCondition::FailureRepeats, rule, reason);
        true
    }

    /// A `spawn`: allowed → `episode.started` and the child's first call; refused →
    /// `episode.action_denied` and a stop or a note to the agent. Returns whether the
    /// agent's remaining actions go on.
    pub(super) fn episode_spawn(
        &mut self,
        agent: &str,
        request_id: &CallId,
        s: &Spawn<'_>,
    ) -> bool {
        let parent_id = self.episode_of_call(request_id);
        let Some(parent) = self.episode(&parent_id) else {
            return false;
        };
        let mut detail = json!({
            "agent": s.agent, "episode_type": s.episode_type, "goal": s.goal,
            "budget": s.budget, "inputs": s.inputs,
        });
        if let Some(trigger) = s.trigger {
            detail["trigger"] = json!(trigger);
        }
        if let Some(d) = self.state.episode_gate(self.bundle, &parent_id) {
            let condition = if &*d.rule_id == "stop_conditions.budget_exhausted" {
                StopCondition::BudgetExhausted
            } else {
                StopCondition::PolicyBlocks
            };
            self.refuse(&parent, agent, request_id, "spawn", detail, d, condition);
            return false;
        }
        let mut child_budget = BTreeMap::new();
        for (dim, want) in [
            (TOKENS, s.budget.tokens),
            (TOOL_CALLS, s.budget.tool_calls),
            (WALL_TIME_MS, s.budget.wall_time_ms),
        ] {
            if let Some(want) = want {
                child_budget.insert(dim.to_owned(), want);
            }
        }
        let req = SpawnRequest {
            parent_agent: agent.to_owned(),
            child_type: s.episode_type.to_owned(),
            parent_depth: parent.depth,
            children_spawned: u32::try_from(parent.children.len()).unwrap_or(u32::MAX),
            total_episodes: u32::try_from(self.state.episodes.episodes.len()).unwrap_or(u32::MAX),
            parent_budget: parent.budget.clone(),
            child_budget: child_budget.clone(),
            consecutive_no_delta: parent.consecutive_no_delta,
            same_error_repeats: parent.same_error_repeats(),
            // A person's override authorises this one spawn.
            human_authorized: std::mem::take(&mut self.human_authorized),
        };
        // A spawn is no way around the matrix: a child may not be
        // an agent the spawner is forbidden to hand work to (a forbidden edge or the flow
        // order; an agent may spawn itself, and a pair merely without an edge may spawn).
        if agent != s.agent {
            let matrix = self
                .bundle
                .decide_handoff(agent, s.agent, InputKind::Decision);
            if !matrix.decision.is_allowed()
                && &*matrix.decision.rule_id != docket_policies::DENY_BY_DEFAULT
            {
                self.refuse(
                    &parent,
                    agent,
                    request_id,
                    "spawn",
                    detail,
                    matrix.decision,
                    StopCondition::PolicyBlocks,
                );
                return false;
            }
        }
        // What the child is for (decider version 14): its trigger, and verification
        // before repair once the episode applied a side effect.
        let class = if self.state.decider_version() >= RECURSION_CLASSES {
            match self.bundle.decide_spawn_class(
                s.episode_type,
                s.trigger,
                parent.unverified_effects,
            ) {
                ClassDecision::Unclassed => None,
                ClassDecision::Allowed(class) => Some(class),
                // Told, not stopped: the agent may name its trigger, or verify first;
                // refusals that repeat stop the episode (`failure_repeats`).
                ClassDecision::Denied(decision) => {
                    self.push(RunEvent::EpisodeActionDenied {
                        episode_id: parent.id.clone(),
                        agent: agent.into(),
                        action: "spawn".to_owned(),
                        detail,
                        decision: decision.clone(),
                        condition: StopCondition::PolicyBlocks,
                    });
                    if !self.refusals_repeat(&parent.id) {
                        self.tell(
                            agent,
                            request_id,
                            "spawn",
                            &decision,
                            StopCondition::PolicyBlocks,
                        );
                    }
                    return false;
                }
            }
        } else {
            None
        };
        let d = self.bundle.decide_spawn(&req);
        if !d.decision.is_allowed() {
            let condition = d.stop_condition.unwrap_or(StopCondition::PolicyBlocks);
            self.hold_forbidden_spawn(&parent, agent, request_id, s, &req, condition);
            self.refuse(
                &parent, agent, request_id, "spawn", detail, d.decision, condition,
            );
            self.held = None;
            return false;
        }
        let budget: BTreeMap<String, u64> = d
            .max_child_budget
            .iter()
            .map(|(dim, cap)| (dim.clone(), child_budget.get(dim).copied().unwrap_or(*cap)))
            .collect();
        let child_id = self.state.episodes.next_id();
        let authority = d.decision.clone();
        self.push(RunEvent::EpisodeStarted {
            episode_id: child_id.clone(),
            parent: parent_id,
            depth: d.child_depth,
            episode_type: s.episode_type.to_owned(),
            agent: s.agent.into(),
            goal: s.goal.to_owned(),
            budget: budget.clone(),
            spawned_by: request_id.clone(),
            at_ms: self.now_ms,
            decision: d.decision,
            class,
            trigger: (self.state.decider_version() >= RECURSION_CLASSES)
                .then(|| s.trigger.map(str::to_owned))
                .flatten(),
        });
        let inputs = self.gate_content(
            agent,
            s.agent,
            ("episode_inputs", InputKind::Decision),
            &Value::Object(s.inputs.clone()),
            &authority,
        );
        let mut request = self.new_request(agent, s.agent, s.episode_type);
        request.episode_id = child_id.clone();
        request.decision_inputs.push(DecisionInput::new(
            agent,
            "episode_goal",
            Arc::new(json!({
                    "episode_id": child_id, "episode_type": s.episode_type, "goal": s.goal,
                    "budget": budget, "inputs": inputs,
            })),
        ));
        self.schedule(request, None, None, None);
        true
    }

    /// A spawn refused only because its child type is forbidden,
    /// in the root episode, stops the root and blocks the run; the spawn (and the answer's
    /// actions after it) is held for a person to authorise by an override.
    fn hold_forbidden_spawn(
        &mut self,
        parent: &Episode,
        agent: &str,
        request_id: &CallId,
        s: &Spawn<'_>,
        req: &SpawnRequest,
        condition: StopCondition,
    ) {
        let authorised = SpawnRequest {
            human_authorized: true,
            ..req.clone()
        };
        let only_the_type = !req.human_authorized
            && self
                .bundle
                .recursion_policy(agent)
                .forbidden_child_types
                .iter()
                .any(|t| t == s.episode_type)
            && self.bundle.decide_spawn(&authorised).decision.is_allowed();
        if !only_the_type || parent.parent.is_some() || !self.listed(parent, condition) {
            return;
        }
        let mut actions = vec![Action::Spawn {
            agent: s.agent.into(),
            episode_type: s.episode_type.to_owned(),
            goal: s.goal.to_owned(),
            budget: *s.budget,
            inputs: s.inputs.clone(),
            trigger: s.trigger.map(str::to_owned),
        }];
        if let Some((id, all, next)) = &self.acting
            && id == request_id
        {
            actions.extend(all.get(*next..).unwrap_or(&[]).iter().cloned());
        }
        self.hold(
            crate::events::overrides::HeldStep::Spawn {
                agent: agent.into(),
                request_id: request_id.clone(),
                actions,
            },
            None,
        );
    }

    /// A `write_domain`: a new version when the bundle allows it; refused → recorded,
    /// then a `policy_blocks` stop (or a note to the agent). Returns whether the agent's
    /// remaining actions go on.
    pub(super) fn episode_write_domain(
        &mut self,
        agent: &str,
        request_id: &CallId,
        domain: &str,
        content: &Value,
    ) -> bool {
        let episode_id = self.episode_of_call(request_id);
        let Some(episode) = self.episode(&episode_id) else {
            return false;
        };
        let attaching = self.state.decider_version() >= DOMAIN_ATTACH;
        // The single-owner rule is between the agents that write the domain: one that
        // attached fields to it in this episode (decider version 15) owns nothing.
        let writer = episode
            .writers
            .get(domain)
            .map(AgentId::as_str)
            .filter(|w| !attaching || self.bundle.writes_domain(w, domain));
        let latest = self
            .state
            .episodes
            .domains
            .get(domain)
            .and_then(|v| v.last())
            .map(|v| (v.version, &v.content));
        // Outside events: an annotation names the event it annotates.
        let d = self
            .annotation_refused(domain, content)
            .or_else(|| {
                attaching
                    .then(|| {
                        self.bundle
                            .decide_domain_attach(agent, domain, latest, content)
                    })
                    .flatten()
            })
            .unwrap_or_else(|| self.bundle.decide_domain_write(agent, domain, writer));
        let (d, content) = self.domain_content(domain, content, d);
        if d.is_allowed() {
            let version = self
                .state
                .episodes
                .domains
                .get(domain)
                .map_or(0, Vec::len)
                .saturating_add(1);
            self.push(RunEvent::DomainWritten {
                domain: domain.to_owned(),
                version: u32::try_from(version).unwrap_or(u32::MAX),
                agent: agent.into(),
                episode_id,
                content,
                decision: d,
                by: None,
            });
            return true;
        }
        self.push(RunEvent::DomainWriteDenied {
            domain: domain.to_owned(),
            agent: agent.into(),
            episode_id,
            decision: d.clone(),
            by: None,
        });
        self.stop_or_tell(
            &episode,
            agent,
            request_id,
            "write_domain",
            &d,
            StopCondition::PolicyBlocks,
        );
        false
    }

    /// A plain `finish` in a child episode ends it with an ok result whose summary is the
    /// output's JSON text. Returns false when the finish is not an episode's (the root,
    /// a capability answer, a classifier verdict): the usual finish applies.
    pub(super) fn episode_plain_finish(
        &mut self,
        agent: &str,
        request_id: &CallId,
        output: &Value,
    ) -> bool {
        let Some(call) = self.state.calls.get(request_id) else {
            return false;
        };
        if call.reply_to.is_some() || call.classifies.is_some() {
            return false;
        }
        if self.episode_of_call(request_id) == ROOT_EPISODE {
            return false;
        }
        let summary = docket_policies::canonical_json_text(output);
        self.episode_finish(
            agent,
            request_id,
            &EpisodeResult::new(EpisodeStatus::Ok, summary),
        );
        true
    }

    /// Records a refused `finish_episode`: the result as asked, the decision, and the stop
    /// condition the refusal counts towards.
    fn finish_denied(
        &mut self,
        episode_id: &EpisodeId,
        agent: &str,
        result: &EpisodeResult,
        decision: &PolicyDecision,
        condition: StopCondition,
    ) {
        self.push(RunEvent::EpisodeActionDenied {
            episode_id: episode_id.clone(),
            agent: agent.into(),
            action: "finish_episode".to_owned(),
            detail: serde_json::to_value(result).unwrap_or(Value::Null),
            decision: decision.clone(),
            condition,
        });
    }

    /// A `finish_episode`.
    pub(super) fn episode_finish(
        &mut self,
        agent: &str,
        request_id: &CallId,
        result: &EpisodeResult,
    ) {
        let episode_id = self.episode_of_call(request_id);
        let Some(episode) = self.episode(&episode_id) else {
            return;
        };
        // A bounded summary (decider version 16): refused and told, whatever the
        // episode's stop conditions, since the agent can say it shorter; repeated
        // refusals stop the episode on failure repeats.
        let lines = result.summary.lines().count();
        if lines > MAX_SUMMARY_LINES && self.state.decider_version() >= BOUNDED_SUMMARIES {
            let reason = format!(
                "{episode_id}'s result summary has {lines} lines, more than {MAX_SUMMARY_LINES}: say it in at most {MAX_SUMMARY_LINES} lines and put the rest in artifacts or decisions"
            );
            let decision = self.engine_decision(SUMMARY_LINES_RULE, &reason);
            self.finish_denied(
                &episode_id,
                agent,
                result,
                &decision,
                StopCondition::PolicyBlocks,
            );
            if !self.refusals_repeat(&episode_id) {
                self.tell(
                    agent,
                    request_id,
                    "finish_episode",
                    &decision,
                    StopCondition::PolicyBlocks,
                );
            }
            return;
        }
        // Verification first (decider version 14): a child episode that applied side
        // effects succeeds only once a verification confirmed them.
        let unverified = episode.parent.is_some()
            && episode.unverified_effects > 0
            && self.state.decider_version() >= RECURSION_CLASSES;
        if result.status == EpisodeStatus::Ok
            && ((result.verification_needed && !episode.verified) || unverified)
            && self.listed(&episode, StopCondition::SuccessAchieved)
        {
            let (rule, reason) = if unverified {
                (
                    VERIFICATION_FIRST,
                    format!(
                        "{episode_id} applied {} side effect(s) no verification has confirmed: spawn a verification child (`verify`, trigger `side_effect_attempted`) first, or have the effects verified by their verifier (success needs a verification to pass)",
                        episode.unverified_effects
                    ),
                )
            } else {
                (
                    "stop_conditions.success_achieved",
                    format!(
                        "{episode_id} finished ok with verification_needed, but no `verify` child episode has passed: spawn one first (success needs the verifier to pass)"
                    ),
                )
            };
            let decision = self.engine_decision(rule, &reason);
            self.finish_denied(
                &episode_id,
                agent,
                result,
                &decision,
                StopCondition::SuccessAchieved,
            );
            let Some(after) = self.episode(&episode_id) else {
                return;
            };
            if self.failure_repeats(&after) {
                return;
            }
            self.tell(
                agent,
                request_id,
                "finish_episode",
                &decision,
                StopCondition::SuccessAchieved,
            );
            return;
        }
        self.push(RunEvent::EpisodeFinished {
            episode_id: episode_id.clone(),
            agent: agent.into(),
            result: result.clone(),
        });
        match result.status {
            EpisodeStatus::NeedsReview => {
                let ticket = self.next_ticket();
                let asked = if result.next_actions.is_empty() {
                    "review the result; approve to accept it, deny to stop the episode".to_owned()
                } else {
                    format!(
                        "review the result and its next actions {}; approve to accept it, deny to stop the episode",
                        docket_policies::canonical_json_text(&Value::Array(
                            result.next_actions.clone()
                        ))
                    )
                };
                self.push(RunEvent::Escalated {
                    ticket,
                    reason: format!(
                        "episode {episode_id} ({}, run by {agent}) needs review: {}",
                        episode.episode_type, result.summary
                    ),
                    subject: TicketSubject::EpisodeReview {
                        episode_id,
                        agent: agent.into(),
                        request_id: request_id.clone(),
                        summary: result.summary.clone(),
                        asked,
                        result: result.clone(),
                    },
                });
            }
            EpisodeStatus::Ok => self.episode_succeeded(&episode_id, agent, request_id, result),
            EpisodeStatus::Failed => {
                if episode.parent.is_none() {
                    self.end_run(
                        RunEvent::RunFailed {
                            reason: format!("episode {episode_id} failed: {}", result.summary),
                        },
                        None,
                    );
                } else {
                    self.return_to_parent(&episode_id, result);
                }
            }
        }
    }

    /// A human approved a needs_review result: it counts as ok.
    pub(super) fn episode_review_approved(
        &mut self,
        episode_id: &EpisodeId,
        agent: &str,
        request_id: &CallId,
        result: &EpisodeResult,
    ) {
        let mut accepted = result.clone();
        accepted.status = EpisodeStatus::Ok;
        self.episode_succeeded(episode_id, agent, request_id, &accepted);
    }

    /// A human denied a ticket: a needs_review episode stops (`policy_blocks`) before the
    /// run is blocked.
    pub(super) fn episode_review_denied(
        &mut self,
        subject: &TicketSubject,
        by: &str,
        reason: &str,
    ) {
        if let TicketSubject::EpisodeReview { episode_id, .. } = subject {
            let usage = self
                .episode(episode_id)
                .map(|e| e.budget)
                .unwrap_or_default();
            self.push(RunEvent::EpisodeStopped {
                episode_id: episode_id.clone(),
                condition: StopCondition::PolicyBlocks,
                rule_id: "human".to_owned(),
                reason: format!("{by} denied its result: {reason}"),
                usage,
            });
        }
    }

    /// Objective satisfied (and verified when asked): `success_achieved`, then the
    /// result goes to the parent's agent, or becomes the run's output for the root.
    fn episode_succeeded(
        &mut self,
        episode_id: &EpisodeId,
        agent: &str,
        request_id: &CallId,
        result: &EpisodeResult,
    ) {
        let Some(episode) = self.episode(episode_id) else {
            return;
        };
        if self.listed(&episode, StopCondition::SuccessAchieved) {
            let how = if result.verification_needed {
                "objective satisfied and the verifier passed"
            } else {
                "objective satisfied (no verification needed)"
            };
            self.push(RunEvent::EpisodeStopped {
                episode_id: episode_id.clone(),
                condition: StopCondition::SuccessAchieved,
                rule_id: "stop_conditions.success_achieved".to_owned(),
                reason: how.to_owned(),
                usage: episode.budget.clone(),
            });
        }
        if episode.parent.is_some() {
            self.return_to_parent(episode_id, result);
            return;
        }
        let output = serde_json::to_value(result).unwrap_or(Value::Null);
        if self.bundle.agent_ids().any(|a| a == EXTERNAL) {
            let Some(call) = self.state.calls.get(request_id).cloned() else {
                return;
            };
            let output_type = self
                .bundle
                .decide_handoff(agent, EXTERNAL, InputKind::Decision)
                .output_type
                .map_or_else(|| "episode_result".to_owned(), |t| t.to_string());
            self.handoff(agent, EXTERNAL, &output_type, &output, Some(&call.recorded));
        } else {
            self.complete_run(output, Some(agent));
        }
    }

    /// A child's result reaches its parent: the parent stops on `no_new_information` or
    /// `failure_repeats` when the counters (already folded) say so, else its agent gets a
    /// new call carrying the result.
    fn return_to_parent(&mut self, child_id: &EpisodeId, result: &EpisodeResult) {
        let Some(child) = self.episode(child_id) else {
            return;
        };
        let Some(parent) = child.parent.as_ref().and_then(|p| self.episode(p)) else {
            return;
        };
        if parent.phase != EpisodePhase::Running {
            return;
        }
        let policy = self.bundle.recursion_policy(&parent.agent);
        if self.listed(&parent, StopCondition::NoNewInformation)
            && parent.consecutive_no_delta >= policy.no_delta_limit
        {
            let reason = format!(
                "{} consecutive children returned no delta (limit {}; no delta = no artifacts_created and an empty or repeated summary)",
                parent.consecutive_no_delta, policy.no_delta_limit
            );
            self.stop_episode(
                &parent.id,
                StopCondition::NoNewInformation,
                "stop_conditions.no_new_information",
                &reason,
            );
            return;
        }
        if self.failure_repeats(&parent) {
            return;
        }
        let Some(spawner) = child
            .spawned_by
            .as_ref()
            .and_then(|r| self.state.calls.get(r))
            .cloned()
        else {
            return;
        };
        let authority = PolicyDecision {
            verdict: Verdict::Allow,
            ..self.engine_decision(
                "episodes.result",
                "a child episode's result returns to the agent that spawned it",
            )
        };
        let mut result = serde_json::to_value(result).unwrap_or_default();
        if let (Some(map), false) = (result.as_object_mut(), child.escalated_effects.is_empty()) {
            map.insert(
                "escalated_effects".to_owned(),
                self.escalated_effects(&child.escalated_effects),
            );
        }
        let result = self.gate_content(
            &child.agent,
            &spawner.recorded.target_agent,
            ("episode_result", InputKind::Decision),
            &result,
            &authority,
        );
        let Some(mut request) = self.request_again(&spawner.recorded.request_id) else {
            return;
        };
        request.decision_inputs.push(DecisionInput::new(
            child.agent.clone(),
            "episode_result",
            Arc::new(json!({
                    "episode_id": child.id, "episode_type": child.episode_type, "result": result,
            })),
        ));
        self.schedule_again(
            &spawner.recorded.request_id,
            request,
            spawner.reply_to.clone(),
            None,
            spawner.branch_of.clone(),
        );
    }

    /// What a child episode hands up with its result: each effect its agent had no
    /// permission for, as asked (kind, lane, key, parameters) and why it was refused, for
    /// the parent's agent to ask for itself or leave
    /// (docs/governance.md#effects-escalate-to-the-parent).
    fn escalated_effects(&self, effects: &[EffectId]) -> Value {
        effects
            .iter()
            .filter_map(|id| self.state.effects.get(id))
            .map(|e| {
                json!({
                    "effect_id": e.requested.effect_id,
                    "kind": e.requested.effect_kind,
                    "lane": e.requested.lane,
                    "idempotency_key": e.requested.idempotency_key,
                    "params": e.requested.params,
                    "asked_by": e.requested.agent,
                    "reason": e.outcome.as_ref().map(|(_, reason)| reason.clone()),
                })
            })
            .collect()
    }

    /// Stops `episode` on `failure_repeats` when one error class reached the limit.
    fn failure_repeats(&mut self, episode: &Episode) -> bool {
        if !self.listed(episode, StopCondition::FailureRepeats) {
            return false;
        }
        let limit = self
            .bundle
            .recursion_policy(&episode.agent)
            .failure_repeat_limit;
        let Some((class, n)) = episode.error_classes.iter().find(|(_, n)| **n >= limit) else {
            return false;
        };
        let reason = format!("error class `{class}` repeated {n} times (limit {limit})");
        self.stop_episode(
            &episode.id,
            StopCondition::FailureRepeats,
            "stop_conditions.failure_repeats",
            &reason,
        );
        true
    }

    /// Records a refused episode action and stops the episode or tells its agent.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn refuse(
        &mut self,
        episode: &Episode,
        agent: &str,
        request_id: &CallId,
        action: &str,
        detail: Value,
        decision: PolicyDecision,
        condition: StopCondition,
    ) {
        self.push(RunEvent::EpisodeActionDenied {
            episode_id: episode.id.clone(),
            agent: agent.into(),
            action: action.to_owned(),
            detail,
            decision: decision.clone(),
            condition,
        });
        self.stop_or_tell(episode, agent, request_id, action, &decision, condition);
    }

    fn stop_or_tell(
        &mut self,
        episode: &Episode,
        agent: &str,
        request_id: &CallId,
        action: &str,
        decision: &PolicyDecision,
        condition: StopCondition,
    ) {
        if self.listed(episode, condition) {
            let reason = format!("{agent}'s {action} was refused: {}", decision.reason);
            self.stop_episode(&episode.id, condition, &decision.rule_id, &reason);
        } else if !self.refusals_repeat(&episode.id) {
            self.tell(agent, request_id, action, decision, condition);
        }
    }

    /// After a refusal was counted (the fold counts it as its error class): stops the
    /// episode on `failure_repeats` when that class reached the limit, so an agent that
    /// keeps asking for what is refused does not loop until a budget runs out. Returns
    /// whether it stopped.
    pub(super) fn refusals_repeat(&mut self, episode_id: &EpisodeId) -> bool {
        match self.episode(episode_id) {
            Some(e) if e.phase == EpisodePhase::Running => self.failure_repeats(&e),
            _ => false,
        }
    }

    /// The agent is called again with an `action_denied` decision input.
    pub(super) fn tell(
        &mut self,
        agent: &str,
        request_id: &CallId,
        action: &str,
        decision: &PolicyDecision,
        condition: StopCondition,
    ) {
        let Some(call) = self.state.calls.get(request_id).cloned() else {
            return;
        };
        let Some(mut request) = self.request_again(&call.recorded.request_id) else {
            return;
        };
        request.decision_inputs.push(DecisionInput::new(
            ENGINE,
            "action_denied",
            Arc::new(json!({
                    "agent": agent, "action": action, "rule_id": &*decision.rule_id,
                    "reason": &*decision.reason, "condition": condition_name(condition),
            })),
        ));
        self.schedule_again(request_id, request, call.reply_to, None, call.branch_of);
    }

    /// `episode.stopped` for the episode and its running descendants, then what the stop
    /// means: a failed result for the parent, or the end of the run for the root.
    fn stop_episode(
        &mut self,
        episode_id: &EpisodeId,
        condition: StopCondition,
        rule_id: &str,
        reason: &str,
    ) {
        let Some(episode) = self.episode(episode_id) else {
            return;
        };
        let descendants = self.state.episodes.running_descendants(episode_id);
        self.push(RunEvent::EpisodeStopped {
            episode_id: episode_id.clone(),
            condition,
            rule_id: rule_id.to_owned(),
            reason: reason.to_owned(),
            usage: episode.budget.clone(),
        });
        for d in descendants {
            let usage = self.episode(&d).map(|e| e.budget).unwrap_or_default();
            self.push(RunEvent::EpisodeStopped {
                episode_id: d,
                condition,
                rule_id: rule_id.to_owned(),
                reason: format!("its ancestor {episode_id} stopped: {reason}"),
                usage,
            });
        }
        if episode.parent.is_some() {
            self.return_to_parent(episode_id, &stopped_result(condition, reason));
            return;
        }
        let name = condition_name(condition);
        let message = format!("episode {episode_id} stopped ({name}): {reason}");
        match condition {
            StopCondition::SuccessAchieved => {}
            StopCondition::NoNewInformation | StopCondition::FailureRepeats => {
                self.end_run(RunEvent::RunFailed { reason: message }, None);
            }
            StopCondition::BudgetExhausted
            | StopCondition::DepthExceeded
            | StopCondition::PolicyBlocks => {
                let error = seed_error(
                    &self.run_id(),
                    &episode.agent,
                    "episode_stopped",
                    &message,
                    json!({ "episode": episode_id, "condition": name, "ruleId": rule_id }),
                    0,
                );
                self.block(rule_id, message, error);
            }
        }
    }

    /// The run is ending with `ending`: every episode still running (or waiting for
    /// review) gets its end recorded, parents before children. Completed: the root
    /// finishes ok (its result's summary is the run's output; `by` is the agent whose
    /// output completed it) and, when listed, stops `success_achieved`; blocked: each
    /// stops `policy_blocks` with the block's rule and reason; failed: each finishes
    /// `failed` (`error_class` `run_failed`). Episodes below the root end the same way,
    /// naming the root. (Episodes a stop condition already ended are left as they are.)
    pub(super) fn close_open_episodes(&mut self, ending: &RunEvent, by: Option<&str>) {
        let open: Vec<Episode> = self
            .state
            .episodes
            .in_order()
            .into_iter()
            .filter(|e| matches!(e.phase, EpisodePhase::Running | EpisodePhase::Review))
            .cloned()
            .collect();
        for e in open {
            let root = e.parent.is_none();
            let why = |reason: &str| {
                if root {
                    reason.to_owned()
                } else {
                    format!("the run ended around it ({ROOT_EPISODE}): {reason}")
                }
            };
            match ending {
                RunEvent::RunCompleted { output, .. } => {
                    let reason = "the run completed: its output was handed to external";
                    if root {
                        let summary = docket_policies::canonical_json_text(output);
                        self.push(RunEvent::EpisodeFinished {
                            episode_id: e.id.clone(),
                            agent: by.unwrap_or(&e.agent).into(),
                            result: EpisodeResult::new(EpisodeStatus::Ok, summary),
                        });
                    }
                    if !root || self.listed(&e, StopCondition::SuccessAchieved) {
                        self.push(RunEvent::EpisodeStopped {
                            episode_id: e.id.clone(),
                            condition: StopCondition::SuccessAchieved,
                            rule_id: "stop_conditions.success_achieved".to_owned(),
                            reason: why(reason),
                            usage: e.budget.clone(),
                        });
                    }
                }
                RunEvent::RunBlocked {
                    rule_id, reason, ..
                } => self.push(RunEvent::EpisodeStopped {
                    episode_id: e.id.clone(),
                    condition: StopCondition::PolicyBlocks,
                    rule_id: rule_id.clone(),
                    reason: why(&format!("the run was blocked: {reason}")),
                    usage: e.budget.clone(),
                }),
                RunEvent::RunFailed { reason } => {
                    let mut result = EpisodeResult::new(
                        EpisodeStatus::Failed,
                        why(&format!("the run failed: {reason}")),
                    );
                    result.error_class = Some("run_failed".to_owned());
                    self.push(RunEvent::EpisodeFinished {
                        episode_id: e.id.clone(),
                        agent: e.agent.clone(),
                        result,
                    });
                }
                _ => {}
            }
        }
    }

    fn engine_decision(&self, rule: &str, reason: &str) -> PolicyDecision {
        PolicyDecision {
            kind: DecisionKind::Spawn,
            verdict: Verdict::Deny,
            rule_id: rule.into(),
            reason: reason.into(),
            bundle_hash: self.bundle.hash(),
            chain: vec![RuleStep::new(rule, StepOutcome::Applied, reason)],
        }
    }

    /// Read-only context inputs: the latest version of every domain the target may read
    /// (`domain:{id}@v{n}`), replacing any carried over from a copied request.
    pub(super) fn attach_domain_reads(&mut self, request: &mut AgentRequest) {
        request
            .context_inputs
            .retain(|c| !c.output_type.starts_with("domain:"));
        // The latest version of each domain the target may read (cloned only for those,
        // since recording the read needs the state mutably).
        let target = &request.target_agent;
        let readable: Vec<(DomainVersion, PolicyDecision, String)> = self
            .state
            .episodes
            .domains
            .iter()
            .filter_map(|(domain, versions)| {
                let read = self.bundle.decide_domain_read(target, domain);
                if !read.is_allowed() {
                    return None;
                }
                Some((versions.last()?.clone(), read, domain.clone()))
            })
            .collect();
        for (last, read, domain) in readable {
            let output_type = format!("domain:{domain}@v{}", last.version);
            let payload = self.gate_content(
                &last.agent,
                &request.target_agent,
                (&output_type, InputKind::Context),
                &last.content,
                &read,
            );
            request.context_inputs.push(ContextInput {
                source_agent: last.agent,
                output_type,
                payload,
            });
        }
    }
}
