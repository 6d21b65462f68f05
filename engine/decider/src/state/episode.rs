//! The episode tree of a run (docs/governance.md#episodes), folded from its events: each
//! episode's budget and charged usage, its children and results, the counters behind the
//! stop conditions, and the versions of every domain.
//!
//! The root episode `ep-1` is the run's main flow; it is made from `run.requested` (the
//! workflow's name as its type, its `goal` or a summary of the input, its `[budget]`).
//! Children come from `episode.started`. Usage reported in `agent.responded` is charged
//! to the call's episode and every ancestor; wall time is the recorded time since the
//! episode started, less the time the run waited for a human or on a timer whose wait
//! does not count (the bundle's `[waiting]`).

use crate::events::{AgentCallFailed, AgentResponded, HumanDecided};
use docket_protocol::{AgentId, CallId, EffectId, EpisodeId};
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::events::effect::{SettledBy, SettledStatus};
use docket_policies::{DecisionKind, Meter, PolicyBundle, PolicyDecision, Verdict};
use docket_policies::{RecursionClass, StopCondition};

use super::RunState;
use crate::events::{RunEvent, RunRequested, SUMMARY_LINES_RULE, TicketSubject};
use docket_protocol::{EpisodeResult, EpisodeStatus};

/// The root episode's id.
pub use docket_protocol::ROOT_EPISODE;

/// Budget dimensions, as named in meters and events.
pub const TOKENS: &str = "tokens";
/// Tool invocations.
pub const TOOL_CALLS: &str = "tool_calls";
/// Wall time in milliseconds.
pub const WALL_TIME_MS: &str = "wall_time_ms";

/// Where an episode stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodePhase {
    /// Its agent is working (or it waits for a child).
    #[default]
    Running,
    /// It finished `needs_review`; a handoff ticket is open.
    Review,
    /// It finished with a result.
    Finished,
    /// A stop condition ended it.
    Stopped,
    /// The run ended around it (completed by a plain `finish`, blocked or failed).
    Ended,
}

impl EpisodePhase {
    /// The word shown to users.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Review => "waiting for review",
            Self::Finished => "finished",
            Self::Stopped => "stopped",
            Self::Ended => "ended with the run",
        }
    }
}

/// One episode. (`Default` is a running episode with nothing counted yet, for filling in
/// everything but its identity, budget and start.)
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Episode {
    /// `ep-N`.
    pub id: EpisodeId,
    /// The spawning episode (`None` for the root).
    pub parent: Option<EpisodeId>,
    /// The root is 0.
    pub depth: u32,
    /// The workflow's name for the root, the child type otherwise.
    pub episode_type: String,
    /// The agent that runs it (the entry agent for the root).
    pub agent: AgentId,
    /// Its goal.
    pub goal: String,
    /// Limit and charged usage per dimension.
    pub budget: BTreeMap<String, Meter>,
    /// Recorded time it started.
    pub started_at_ms: i64,
    /// The run's total human-wait time when it started (subtracted from wall time).
    pub wait_at_start_ms: i64,
    /// The call whose `spawn` started it.
    pub spawned_by: Option<CallId>,
    /// Child episode ids, in spawn order.
    pub children: Vec<EpisodeId>,
    /// Where it stands.
    pub phase: EpisodePhase,
    /// Its result, once finished.
    pub result: Option<EpisodeResult>,
    /// The condition that stopped it.
    pub stop_condition: Option<StopCondition>,
    /// Why it stopped or ended.
    pub stop_reason: Option<String>,
    /// Consecutive child results without delta (`EpisodeResult::is_no_delta`).
    pub consecutive_no_delta: u32,
    /// The summary of the last child result it received.
    pub last_child_summary: Option<String>,
    /// Failures counted per error class: failed child results (their `error_class`, the
    /// stop condition of a stopped child, else `failed`), refused finishes
    /// (`verification_missing`, or `summary_refused` for a summary over its lines) and
    /// the agent's refused actions (`spawn_refused`,
    /// `write_domain_refused`, `effect_refused`).
    pub error_classes: BTreeMap<String, u32>,
    /// A verification child episode finished ok (`verify`, or from decider version 14 a
    /// child of the verification class).
    pub verified: bool,
    /// A child episode of the critique class finished ok: the second look an effect
    /// whose policy says `critique_first` needs (docs/governance.md#a-second-look-before-high-stakes-effects).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub critiqued: bool,
    /// What it is for, when its type has a recursion class (decider version 14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<RecursionClass>,
    /// Side effects it applied that no verification has confirmed since: a verification
    /// child finishing ok clears them, the effect's verifier or a person confirming one
    /// takes it off (docs/governance.md#recursion-classes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unverified_effects: u32,
    /// Which agent writes each domain in this episode (single-owner rule).
    pub writers: BTreeMap<String, AgentId>,
    /// Effects its agent had no permission for, escalated to the parent episode with its
    /// result (decider version 15, docs/governance.md#effects-escalate-to-the-parent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalated_effects: Vec<EffectId>,
}

impl Episode {
    /// The highest count of one error class.
    #[must_use]
    pub fn same_error_repeats(&self) -> u32 {
        self.error_classes.values().copied().max().unwrap_or(0)
    }

    /// The first dimension whose usage reached its limit.
    #[must_use]
    pub fn exhausted(&self) -> Option<(&String, &Meter)> {
        self.budget.iter().find(|(_, m)| m.used >= m.limit)
    }
}

/// One version of a domain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainVersion {
    /// From 1.
    pub version: u32,
    /// The writer.
    pub agent: AgentId,
    /// The writer's episode.
    pub episode_id: EpisodeId,
    /// The content.
    pub content: Value,
}

/// Every episode of a run, the domains' versions, and the human-wait clock.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EpisodeTree {
    /// By id.
    pub episodes: BTreeMap<EpisodeId, Episode>,
    /// Each domain's versions, oldest first (append-only).
    pub domains: BTreeMap<String, Vec<DomainVersion>>,
    /// Recorded time the run spent waiting for humans, or on timers whose wait does not
    /// count against wall time (closed waits).
    pub human_wait_ms: i64,
    /// Recorded time the current wait began.
    pub waiting_since: Option<i64>,
    /// Recorded time of the last input.
    pub last_input_ms: i64,
}

impl EpisodeTree {
    /// An episode by id.
    #[must_use]
    pub fn get(&self, id: &EpisodeId) -> Option<&Episode> {
        self.episodes.get(id)
    }

    /// The id the next child gets.
    #[must_use]
    pub fn next_id(&self) -> EpisodeId {
        EpisodeId::numbered(self.episodes.len() + 1)
    }

    /// `id` and its ancestors, root first.
    #[must_use]
    pub fn chain(&self, id: &EpisodeId) -> Vec<&Episode> {
        let mut chain = Vec::new();
        let mut next = self.episodes.get(id);
        while let Some(e) = next {
            chain.push(e);
            if chain.len() > self.episodes.len() {
                break;
            }
            next = e.parent.as_ref().and_then(|p| self.episodes.get(p));
        }
        chain.reverse();
        chain
    }

    /// `id`'s descendants still running, parents before children.
    #[must_use]
    pub fn running_descendants(&self, id: &EpisodeId) -> Vec<EpisodeId> {
        let mut out = Vec::new();
        let mut stack = vec![id.clone()];
        while let Some(at) = stack.pop() {
            let Some(e) = self.episodes.get(&at) else {
                continue;
            };
            for c in e.children.iter().rev() {
                if self
                    .episodes
                    .get(c)
                    .is_some_and(|x| x.phase == EpisodePhase::Running)
                {
                    out.push(c.clone());
                }
                stack.push(c.clone());
            }
        }
        out
    }

    /// How many episodes the run has started (the root included).
    pub(crate) fn count(&self) -> usize {
        self.episodes.len()
    }

    /// Episodes in id order (`ep-2` before `ep-10`).
    #[must_use]
    pub fn in_order(&self) -> Vec<&Episode> {
        // Episode ids order by their number.
        self.episodes.values().collect()
    }

    fn effective_wait(&self, at_ms: i64) -> i64 {
        self.human_wait_ms + self.waiting_since.map_or(0, |w| (at_ms - w).max(0))
    }

    fn charge(&mut self, episode_id: &EpisodeId, tokens: u64, tool_calls: u64, at_ms: i64) {
        // Only a call whose episode and ancestors all still run is charged: a stopped or
        // finished episode is never charged again.
        let chain = self.chain(episode_id);
        if chain.is_empty() || chain.iter().any(|e| e.phase != EpisodePhase::Running) {
            return;
        }
        let ids: Vec<EpisodeId> = chain.iter().map(|e| e.id.clone()).collect();
        let wait = self.effective_wait(at_ms);
        for id in ids {
            let Some(e) = self.episodes.get_mut(&id) else {
                continue;
            };
            let wall =
                u64::try_from(at_ms - e.started_at_ms - (wait - e.wait_at_start_ms)).unwrap_or(0);
            for (dim, add) in [(TOKENS, tokens), (TOOL_CALLS, tool_calls)] {
                if let Some(m) = e.budget.get_mut(dim) {
                    m.used = m.used.saturating_add(add);
                }
            }
            if let Some(m) = e.budget.get_mut(WALL_TIME_MS) {
                m.used = m.used.max(wall);
            }
        }
    }

    fn start_root(&mut self, run: &RunRequested) {
        let b = run.workflow.budget;
        let goal = run
            .workflow
            .goal
            .clone()
            .unwrap_or_else(|| input_summary(&run.input));
        self.last_input_ms = run.at_ms;
        self.episodes.insert(
            EpisodeId::root(),
            Episode {
                id: EpisodeId::root(),
                parent: None,
                depth: 0,
                episode_type: run.workflow.name.clone(),
                agent: run.workflow.entry.clone(),
                goal,
                budget: meters(&[
                    (TOKENS, b.tokens),
                    (TOOL_CALLS, b.tool_calls),
                    (WALL_TIME_MS, b.wall_time_ms),
                ]),
                started_at_ms: run.at_ms,
                ..Episode::default()
            },
        );
    }

    /// A refused action of `episode_id`'s agent counts as a failure of its class (the
    /// `failure_repeats` stop condition, docs/governance.md#stop-conditions), so an agent
    /// that keeps asking for what is refused stops.
    fn count_refusal(&mut self, episode_id: &EpisodeId, class: String) {
        if let Some(e) = self.episodes.get_mut(episode_id) {
            *e.error_classes.entry(class).or_default() += 1;
        }
    }

    /// A child's result (or its stop) reaches its parent's counters.
    fn count_child_result(&mut self, child_id: &EpisodeId, result: &EpisodeResult) {
        let Some(child) = self.episodes.get(child_id) else {
            return;
        };
        let is_verify = child.verifies();
        let is_critique = child.critiques();
        let Some(parent) = child.parent.clone().and_then(|p| self.episodes.get_mut(&p)) else {
            return;
        };
        if result.is_no_delta(parent.last_child_summary.as_deref()) {
            parent.consecutive_no_delta += 1;
        } else {
            parent.consecutive_no_delta = 0;
        }
        parent.last_child_summary = Some(result.summary.clone());
        match result.status {
            EpisodeStatus::Failed => {
                let class = result
                    .error_class
                    .clone()
                    .unwrap_or_else(|| "failed".into());
                *parent.error_classes.entry(class).or_default() += 1;
            }
            EpisodeStatus::Ok if is_verify => {
                parent.verified = true;
                parent.unverified_effects = 0;
            }
            EpisodeStatus::Ok if is_critique => parent.critiqued = true,
            _ => {}
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Episode {
    /// Whether it is a verification child: of the verification class, or for an episode
    /// recorded without a class, of type `verify`.
    #[must_use]
    pub fn verifies(&self) -> bool {
        self.class.map_or(self.episode_type == "verify", |c| {
            c == RecursionClass::Verification
        })
    }

    /// Whether it is a second look: a child of the critique class (decider version 16's
    /// `critique_first` counts only these).
    #[must_use]
    pub fn critiques(&self) -> bool {
        self.class == Some(RecursionClass::Critique)
    }
}

/// A short, deterministic summary of the run's input, as the root episode's goal.
fn input_summary(input: &Value) -> String {
    let text = docket_policies::canonical_json_text(input);
    let mut out: String = text.chars().take(200).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    format!("the run's input: {out}")
}

/// Meters with nothing used.
#[must_use]
pub fn meters(limits: &[(&str, u64)]) -> BTreeMap<String, Meter> {
    limits
        .iter()
        .map(|(k, limit)| {
            (
                (*k).to_owned(),
                Meter {
                    limit: *limit,
                    used: 0,
                },
            )
        })
        .collect()
}

/// The name of a stop condition, as written in bundles and events.
#[must_use]
pub fn condition_name(c: StopCondition) -> &'static str {
    match c {
        StopCondition::BudgetExhausted => "budget_exhausted",
        StopCondition::DepthExceeded => "depth_exceeded",
        StopCondition::NoNewInformation => "no_new_information",
        StopCondition::FailureRepeats => "failure_repeats",
        StopCondition::PolicyBlocks => "policy_blocks",
        StopCondition::SuccessAchieved => "success_achieved",
    }
}

/// Folds the episode side of one event (called by [`RunState::apply`] after its own fold).
pub(super) fn fold(state: &mut RunState, event: &RunEvent) {
    // Whether a timer the run waits on leaves its wait out of wall time (read before the
    // tree is borrowed).
    let timer_wait_uncounted = state.timer_wait_uncounted();
    let tree = &mut state.episodes;
    match event {
        RunEvent::RunRequested(run) => tree.start_root(run),
        RunEvent::AgentResponded(AgentResponded {
            request_id,
            response,
            at_ms,
        }) => {
            tree.last_input_ms = *at_ms;
            if let Some(call) = state.calls.get(request_id) {
                let u = response.usage;
                let tokens = u.input_tokens.saturating_add(u.output_tokens);
                tree.charge(
                    &call.recorded.episode_id,
                    tokens,
                    u64::from(u.tool_calls),
                    *at_ms,
                );
            }
        }
        // A governed tool call counts when it is scheduled (one denied never ran and is
        // not charged).
        RunEvent::ToolCallScheduled(s) => {
            let at_ms = tree.last_input_ms;
            tree.charge(&s.request.episode_id, 0, 1, at_ms);
        }
        RunEvent::AgentCallFailed(AgentCallFailed {
            request_id, at_ms, ..
        }) => {
            tree.last_input_ms = *at_ms;
            if let Some(call) = state.calls.get(request_id) {
                tree.charge(&call.recorded.episode_id, 0, 0, *at_ms);
            }
        }
        RunEvent::Escalated { .. } if tree.waiting_since.is_none() => {
            tree.waiting_since = Some(tree.last_input_ms);
        }
        // A timer whose wait does not count against wall time opens a wait too; its
        // firing closes it once nothing else is waited for.
        RunEvent::TimerSet(set)
            if !set.counts_against_wall_time && tree.waiting_since.is_none() =>
        {
            tree.waiting_since = Some(tree.last_input_ms);
        }
        RunEvent::TimerFired(fired) => {
            tree.last_input_ms = fired.at_ms;
            if !state.tickets.values().any(|t| t.open)
                && !timer_wait_uncounted
                && let Some(since) = tree.waiting_since.take()
            {
                tree.human_wait_ms += (fired.at_ms - since).max(0);
            }
        }
        // Outside events: a wait for one opens a wait as a timer does; its delivery or
        // timeout closes it once nothing else is waited for.
        RunEvent::SignalReceived(received) => tree.last_input_ms = received.at_ms,
        RunEvent::SignalAwaited(awaited)
            if !awaited.counts_against_wall_time && tree.waiting_since.is_none() =>
        {
            tree.waiting_since = Some(tree.last_input_ms);
        }
        RunEvent::SignalDelivered(_) | RunEvent::SignalTimedOut(_) => {
            let now = tree.last_input_ms;
            if !state.tickets.values().any(|t| t.open)
                && !timer_wait_uncounted
                && let Some(since) = tree.waiting_since.take()
            {
                tree.human_wait_ms += (now - since).max(0);
            }
        }
        RunEvent::HumanDecided(HumanDecided {
            ticket,
            approved,
            at_ms,
            ..
        }) => {
            tree.last_input_ms = *at_ms;
            if !state.tickets.values().any(|t| t.open)
                && !timer_wait_uncounted
                && let Some(since) = tree.waiting_since.take()
            {
                tree.human_wait_ms += (*at_ms - since).max(0);
            }
            if let Some(TicketSubject::EpisodeReview { episode_id, .. }) =
                state.tickets.get(ticket).map(|t| &t.subject)
                && *approved
            {
                if let Some(e) = tree.episodes.get_mut(episode_id) {
                    e.phase = EpisodePhase::Finished;
                    if let Some(r) = &mut e.result {
                        r.status = EpisodeStatus::Ok;
                    }
                }
                let result = tree.episodes.get(episode_id).and_then(|e| e.result.clone());
                let verify = tree.episodes.get(episode_id).is_some_and(Episode::verifies);
                let critique = tree
                    .episodes
                    .get(episode_id)
                    .is_some_and(Episode::critiques);
                let parent = tree.episodes.get(episode_id).and_then(|e| e.parent.clone());
                if let (Some(_), Some(p)) = (result, parent)
                    && let Some(p) = tree.episodes.get_mut(&p)
                {
                    if verify {
                        p.verified = true;
                        p.unverified_effects = 0;
                    }
                    if critique {
                        p.critiqued = true;
                    }
                }
            }
        }
        RunEvent::RunCompleted { .. }
        | RunEvent::RunBlocked { .. }
        | RunEvent::RunFailed { .. }
        | RunEvent::RunCancelled(_) => {
            let reason = state.stop_reason.clone();
            for e in tree.episodes.values_mut() {
                if matches!(e.phase, EpisodePhase::Running | EpisodePhase::Review) {
                    e.phase = EpisodePhase::Ended;
                    e.stop_reason.clone_from(&reason);
                }
            }
        }
        RunEvent::EpisodeStarted {
            episode_id,
            parent,
            depth,
            episode_type,
            agent,
            goal,
            budget,
            spawned_by,
            at_ms,
            class,
            ..
        } => {
            let wait = tree.effective_wait(*at_ms);
            if let Some(p) = tree.episodes.get_mut(parent) {
                p.children.push(episode_id.clone());
            }
            tree.episodes.insert(
                episode_id.clone(),
                Episode {
                    id: episode_id.clone(),
                    parent: Some(parent.clone()),
                    depth: *depth,
                    episode_type: episode_type.clone(),
                    agent: agent.clone(),
                    goal: goal.clone(),
                    budget: meters(
                        &budget
                            .iter()
                            .map(|(k, limit)| (k.as_str(), *limit))
                            .collect::<Vec<_>>(),
                    ),
                    started_at_ms: *at_ms,
                    wait_at_start_ms: wait,
                    spawned_by: Some(spawned_by.clone()),
                    class: *class,
                    ..Episode::default()
                },
            );
        }
        RunEvent::EpisodeActionDenied {
            episode_id,
            action,
            decision,
            ..
        } => {
            let class = if &*decision.rule_id == SUMMARY_LINES_RULE {
                "summary_refused".to_owned()
            } else if action == "finish_episode" {
                "verification_missing".to_owned()
            } else {
                format!("{action}_refused")
            };
            tree.count_refusal(episode_id, class);
        }
        // A call refused by an open circuit counts in the episode
        // that made it, so an agent that keeps asking an agent whose circuit is open stops.
        RunEvent::CallDegraded { request_id, .. } => {
            if let Some(call) = state.calls.get(request_id) {
                let episode_id = call.recorded.episode_id.clone();
                tree.count_refusal(&episode_id, "circuit_open".to_owned());
            }
        }
        // A person's refused write is no episode's failure.
        RunEvent::DomainWriteDenied {
            episode_id,
            by: None,
            ..
        } => {
            tree.count_refusal(episode_id, "write_domain_refused".to_owned());
        }
        // Verification first: what an episode applied waits for a verification.
        RunEvent::EffectApplied(e) => {
            if let Some(episode) = state
                .effects
                .get(&e.effect_id)
                .and_then(|r| tree.episodes.get_mut(&r.requested.episode_id))
            {
                episode.unverified_effects = episode.unverified_effects.saturating_add(1);
            }
        }
        RunEvent::EffectSettled(e)
            if e.status == SettledStatus::Verified && e.by != SettledBy::Executor =>
        {
            if let Some(episode) = state
                .effects
                .get(&e.effect_id)
                .and_then(|r| tree.episodes.get_mut(&r.requested.episode_id))
            {
                episode.unverified_effects = episode.unverified_effects.saturating_sub(1);
            }
        }
        // Side effects: a refused effect counts in the episode that asked for it, unless
        // it escalated to the parent (then the episode hands it up with its result).
        RunEvent::EffectRefused(refused) => {
            if let Some(rec) = state.effects.get(&refused.effect_id) {
                let episode_id = rec.requested.episode_id.clone();
                if refused.escalated_to.is_some() {
                    if let Some(e) = tree.episodes.get_mut(&episode_id) {
                        e.escalated_effects.push(refused.effect_id.clone());
                    }
                } else {
                    tree.count_refusal(&episode_id, "effect_refused".to_owned());
                }
            }
        }
        // Governed tools: a refused tool call counts in the episode that asked for it.
        RunEvent::ToolDenied(denied) => {
            tree.count_refusal(&denied.episode_id, "tool_refused".to_owned());
        }
        RunEvent::EpisodeFinished {
            episode_id, result, ..
        } => {
            if let Some(e) = tree.episodes.get_mut(episode_id) {
                e.phase = if result.status == EpisodeStatus::NeedsReview {
                    EpisodePhase::Review
                } else {
                    EpisodePhase::Finished
                };
                e.result = Some(result.clone());
            }
            tree.count_child_result(episode_id, result);
        }
        RunEvent::EpisodeStopped {
            episode_id,
            condition,
            reason,
            ..
        } => {
            let was_running = tree
                .episodes
                .get(episode_id)
                .is_some_and(|e| e.phase == EpisodePhase::Running);
            if let Some(e) = tree.episodes.get_mut(episode_id) {
                e.phase = EpisodePhase::Stopped;
                e.stop_condition = Some(*condition);
                e.stop_reason = Some(reason.clone());
            }
            if was_running && *condition != StopCondition::SuccessAchieved {
                let result = stopped_result(*condition, reason);
                tree.count_child_result(episode_id, &result);
            }
        }
        RunEvent::DomainWritten {
            domain,
            version,
            agent,
            episode_id,
            content,
            by,
            ..
        } => {
            tree.domains
                .entry(domain.clone())
                .or_default()
                .push(DomainVersion {
                    version: *version,
                    agent: agent.clone(),
                    episode_id: episode_id.clone(),
                    content: content.clone(),
                });
            // The single-owner rule is the agents' of an episode; a person writes beside it.
            if let Some(e) = tree.episodes.get_mut(episode_id).filter(|_| by.is_none()) {
                e.writers.insert(domain.clone(), agent.clone());
            }
        }
        _ => {}
    }
}

/// The result a stopped child hands its parent.
#[must_use]
pub fn stopped_result(condition: StopCondition, reason: &str) -> EpisodeResult {
    let name = condition_name(condition);
    let mut r = EpisodeResult::new(EpisodeStatus::Failed, format!("stopped ({name}): {reason}"));
    r.error_class = Some(name.to_owned());
    r
}

impl RunState {
    /// Whether `episode_id` may still act with effects: `Some(deny)` when it (or an
    /// ancestor) is no longer running, has exhausted a budget dimension, or has crossed
    /// `finalize_or_escalate_at_percent` (70%) of one — naming the rule and the numbers;
    /// `None` when it may go on. (The side-effect decider calls this before every effect.)
    #[must_use]
    pub fn episode_gate(
        &self,
        bundle: &PolicyBundle,
        episode_id: &EpisodeId,
    ) -> Option<PolicyDecision> {
        let chain = self.episodes.chain(episode_id);
        let deny = |rule: &str, reason: String| PolicyDecision {
            kind: DecisionKind::Budget,
            verdict: Verdict::Deny,
            rule_id: rule.into(),
            reason: reason.into(),
            bundle_hash: bundle.hash(),
            chain: Vec::new(),
        };
        if chain.is_empty() {
            return Some(deny(
                "episodes.unknown",
                format!("no episode {episode_id} in this run"),
            ));
        }
        for e in chain {
            if e.phase != EpisodePhase::Running {
                return Some(deny(
                    "episodes.not_running",
                    format!("episode {} is {}", e.id, e.phase.as_str()),
                ));
            }
            let d = bundle.decide_budget(&e.budget);
            if !d.is_allowed() {
                return Some(PolicyDecision {
                    verdict: Verdict::Deny,
                    reason: format!("episode {}: {}", e.id, d.reason).into(),
                    ..d
                });
            }
        }
        None
    }
}
