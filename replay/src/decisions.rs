//! What one recorded event decided, read the same way for every kind of decision
//! (handoffs, capability requests, spawns, effects, tool calls, limits, stop conditions,
//! tickets, the run's end), so what-if can class any two of them against each other and
//! name what would not have happened (docs/replay.md#what-if).

use serde::Serialize;

use docket_decider::{RunEvent, TicketSubject, condition_name};
use docket_policies::{DecisionKind, HandoffAudit, PolicyDecision, StopCondition, Verdict};

/// The kind of decision an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionArea {
    /// Content crossing from one agent to another (a handoff, or content crossing by
    /// another rule: spawn inputs, a child's result, a domain read...).
    Handoff,
    /// An agent's request for another agent's capability.
    Capability,
    /// A spawned child episode.
    Spawn,
    /// A side effect: its policy decision, dry run, approval, refusal, execution.
    Effect,
    /// A governed tool call (`call_tool`).
    ToolCall,
    /// A limit: an episode's budget, the recursion limits, the retry ladder.
    Limit,
    /// One of the other stop conditions of an episode.
    StopCondition,
    /// A question, review or conflict put to a human.
    Escalation,
    /// A write to a domain.
    DomainWrite,
    /// A risk classifier's verdict.
    Risk,
    /// An agent's circuit breaker.
    Circuit,
    /// A call scheduled for an agent.
    Call,
    /// The run's end: completed, blocked or failed.
    Run,
    /// An outside event: kept or refused, delivered to an agent waiting for it.
    Signal,
    /// The classifying agent's intent classification, held to its routing.
    Intent,
}

impl DecisionArea {
    /// Its name as `--json` prints it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Handoff => "handoff",
            Self::Capability => "capability",
            Self::Spawn => "spawn",
            Self::Effect => "effect",
            Self::ToolCall => "tool_call",
            Self::Limit => "limit",
            Self::StopCondition => "stop_condition",
            Self::Escalation => "escalation",
            Self::DomainWrite => "domain_write",
            Self::Risk => "risk",
            Self::Circuit => "circuit",
            Self::Call => "call",
            Self::Run => "run",
            Self::Signal => "signal",
            Self::Intent => "intent",
        }
    }
}

/// How far a decision let things go, in increasing strictness: what-if classes a change
/// stricter when the outcome rises, looser when it falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Allowed, done, finished.
    Allowed,
    /// Allowed once its dry run passes (a side effect).
    DryRunFirst,
    /// Waits for a human.
    NeedsApproval,
    /// Denied, refused, stopped, blocked or failed.
    Denied,
}

impl Outcome {
    /// In words.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::DryRunFirst => "dry run first",
            Self::NeedsApproval => "needs approval",
            Self::Denied => "denied",
        }
    }

    fn of(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Allow => Self::Allowed,
            Verdict::NeedsApproval => Self::NeedsApproval,
            Verdict::Deny => Self::Denied,
        }
    }
}

/// What one event decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reading {
    pub(crate) area: DecisionArea,
    /// In words (`handoff reasoning → strategy (gaps)`, `episode ep-1 stopped: ...`).
    pub(crate) what: String,
    pub(crate) outcome: Outcome,
    /// The deciding rule; empty when the event names none (a call, an admission).
    pub(crate) rule: String,
}

fn reading(area: DecisionArea, what: String, outcome: Outcome, rule: &str) -> Reading {
    Reading {
        area,
        what,
        outcome,
        rule: rule.to_owned(),
    }
}

/// The area a policy decision of `kind` belongs to.
fn area_of(kind: DecisionKind) -> DecisionArea {
    match kind {
        DecisionKind::Capability => DecisionArea::Capability,
        DecisionKind::Spawn => DecisionArea::Spawn,
        DecisionKind::Budget | DecisionKind::Escalation => DecisionArea::Limit,
        DecisionKind::SideEffect => DecisionArea::Effect,
        DecisionKind::ToolCall => DecisionArea::ToolCall,
        DecisionKind::DomainWrite => DecisionArea::DomainWrite,
        DecisionKind::CircuitBreaker => DecisionArea::Circuit,
        DecisionKind::Override => DecisionArea::Escalation,
        DecisionKind::Signal => DecisionArea::Signal,
        DecisionKind::IntentClassification => DecisionArea::Intent,
        _ => DecisionArea::Handoff,
    }
}

/// The area of a limit that stopped or refused something (budgets and depth), else
/// `otherwise`.
fn limit_or(condition: StopCondition, otherwise: DecisionArea) -> DecisionArea {
    match condition {
        StopCondition::BudgetExhausted | StopCondition::DepthExceeded => DecisionArea::Limit,
        _ => otherwise,
    }
}

/// Whether a refused spawn was refused by a recursion limit: the number of children or
/// of episodes (their reasons as `decide_spawn` words them), or the budget rules
/// (`recursion.budget.*`). Depth is told by its stop condition.
fn recursion_limit(decision: &PolicyDecision) -> bool {
    decision.rule_id.starts_with("recursion.budget.")
        || decision.reason.starts_with("max_children ")
        || decision.reason.starts_with("max_total_episodes ")
}

/// The rule a handoff was decided by, and the one that scoped it when that is another
/// rule and it played a part: it withheld fields of the payload or translated it. A
/// scoping rule under which everything crossed as sent is not named.
pub(crate) fn handoff_rule(decision: &PolicyDecision, audit: &HandoffAudit) -> String {
    let scoping = &audit.governance_rule_id;
    let played_a_part = !audit.context_after_scoping.fields_excluded.is_empty()
        || audit.conversation_translation_applied
        || audit.every_field_removed;
    if decision.rule_id == *scoping || !played_a_part {
        decision.rule_id.to_string()
    } else {
        format!("{}; scoped by {scoping}", decision.rule_id)
    }
}

/// What `event` decided; `None` for a recorded input other than an effect's execution,
/// and for steps that decide nothing of their own (held outputs, a verifier's call...).
pub(crate) fn read(event: &RunEvent) -> Option<Reading> {
    use DecisionArea as A;
    Some(match event {
        RunEvent::HandoffAllowed {
            from,
            to,
            output_type,
            decision,
            contract,
            audit,
            ..
        } => {
            let area = if decision.kind == DecisionKind::Capability
                || contract.kind == DecisionKind::Capability
            {
                A::Capability
            } else {
                A::Handoff
            };
            reading(
                area,
                format!("handoff {from} → {to} ({output_type})"),
                Outcome::Allowed,
                &handoff_rule(decision, audit),
            )
        }
        RunEvent::HandoffDenied {
            from,
            to,
            output_type,
            decision,
            ..
        } => reading(
            A::Handoff,
            format!("handoff {from} → {to} ({output_type})"),
            Outcome::Denied,
            &decision.rule_id,
        ),
        RunEvent::PolicyDecided { subject, decision } => {
            let area = area_of(decision.kind);
            let what = match area {
                A::Capability => format!("capability request by {subject}"),
                A::ToolCall => format!("tool call {subject}"),
                A::Effect => format!("effect {subject}"),
                A::Limit if decision.kind == DecisionKind::Escalation => {
                    format!("retry ladder for {subject}")
                }
                A::Limit => format!("budget gate for {subject}: {}", decision.reason),
                A::Circuit => format!("circuit breaker for {subject}"),
                A::Signal => format!("outside event {subject}"),
                A::Intent => format!("intent classification of {subject}"),
                _ => format!("{} decision on {subject}", kind_name(decision.kind)),
            };
            reading(area, what, Outcome::of(decision.verdict), &decision.rule_id)
        }
        RunEvent::EpisodeStarted {
            episode_id,
            parent,
            episode_type,
            agent,
            decision,
            ..
        } => reading(
            A::Spawn,
            format!("spawn of {agent} ({episode_type}) under {parent} as {episode_id}"),
            Outcome::Allowed,
            &decision.rule_id,
        ),
        RunEvent::EpisodeActionDenied {
            episode_id,
            agent,
            action,
            decision,
            condition,
            ..
        } => {
            let area = if action == "spawn" && recursion_limit(decision) {
                A::Limit
            } else if action == "spawn" {
                limit_or(*condition, A::Spawn)
            } else {
                limit_or(*condition, A::StopCondition)
            };
            reading(
                area,
                format!(
                    "{agent}'s {action} in {episode_id} ({})",
                    condition_name(*condition)
                ),
                Outcome::Denied,
                &decision.rule_id,
            )
        }
        RunEvent::EpisodeStopped {
            episode_id,
            condition,
            rule_id,
            reason,
            ..
        } => reading(
            limit_or(*condition, A::StopCondition),
            format!(
                "episode {episode_id} stopped: {} ({reason})",
                condition_name(*condition)
            ),
            if *condition == StopCondition::SuccessAchieved {
                Outcome::Allowed
            } else {
                Outcome::Denied
            },
            rule_id,
        ),
        RunEvent::EffectAdmitted(e) => reading(
            A::Effect,
            format!("effect {} admitted", e.effect_id),
            if e.dry_run {
                Outcome::DryRunFirst
            } else {
                Outcome::Allowed
            },
            "",
        ),
        RunEvent::EffectRefused(e) => reading(
            A::Effect,
            format!("effect {} refused ({})", e.effect_id, e.reason),
            Outcome::Denied,
            &e.rule_id,
        ),
        RunEvent::EffectReady(e) => reading(
            A::Effect,
            format!("effect {} ready to execute", e.effect_id),
            Outcome::Allowed,
            "",
        ),
        RunEvent::EffectStarted(e) => reading(
            A::Effect,
            format!("effect {} executed", e.effect_id),
            Outcome::Allowed,
            "",
        ),
        RunEvent::EffectApplied(e) => reading(
            A::Effect,
            format!("effect {} applied", e.effect_id),
            Outcome::Allowed,
            "",
        ),
        RunEvent::EffectDeduplicated(e) => reading(
            A::Effect,
            format!("effect {} deduplicated (receipt of {})", e.effect_id, e.of),
            Outcome::Allowed,
            "",
        ),
        RunEvent::Escalated {
            ticket,
            subject,
            reason,
        } => {
            let (area, what) = match subject {
                TicketSubject::Effect { effect_id, .. } => (
                    A::Effect,
                    format!("effect {effect_id} waits for a human ({ticket})"),
                ),
                TicketSubject::Retry { request_id } => (
                    A::Limit,
                    format!("retries of {request_id} exhausted: a human decides ({ticket})"),
                ),
                _ => (A::Escalation, format!("{ticket}: {reason}")),
            };
            reading(area, what, Outcome::NeedsApproval, "")
        }
        RunEvent::ToolCallScheduled(t) => reading(
            A::ToolCall,
            format!("tool call {} ({})", t.tool_call_id, t.name),
            Outcome::Allowed,
            "",
        ),
        RunEvent::ToolDenied(t) => reading(
            A::ToolCall,
            format!("tool call {} ({}) by {}", t.tool_call_id, t.name, t.agent),
            Outcome::Denied,
            &t.rule_id,
        ),
        RunEvent::AgentCallScheduled { request, .. } => reading(
            A::Call,
            format!("call to {} ({})", request.target_agent, request.request_id),
            Outcome::Allowed,
            "",
        ),
        RunEvent::CallDegraded {
            request_id, agent, ..
        } => reading(
            A::Circuit,
            format!("call to {agent} ({request_id}) degraded: its circuit is open"),
            Outcome::Denied,
            "",
        ),
        RunEvent::DomainWritten {
            domain,
            version,
            agent,
            decision,
            ..
        } => reading(
            A::DomainWrite,
            format!("{agent} writes {domain} v{version}"),
            Outcome::Allowed,
            &decision.rule_id,
        ),
        RunEvent::DomainWriteDenied {
            domain,
            agent,
            decision,
            ..
        } => reading(
            A::DomainWrite,
            format!("{agent} writes {domain}"),
            Outcome::Denied,
            &decision.rule_id,
        ),
        RunEvent::RiskClassified {
            request_id,
            classifier,
            verdict,
            ..
        } => reading(
            A::Risk,
            format!("{classifier}'s verdict on {request_id}"),
            match verdict {
                docket_decider::RiskVerdict::Safe => Outcome::Allowed,
                docket_decider::RiskVerdict::ReviewRequired => Outcome::NeedsApproval,
                docket_decider::RiskVerdict::Dangerous => Outcome::Denied,
            },
            "",
        ),
        RunEvent::SignalRefused(s) => reading(
            A::Signal,
            format!("outside event {} ({})", s.signal_id, s.name),
            Outcome::Denied,
            "",
        ),
        RunEvent::SignalDelivered(s) => reading(
            A::Signal,
            format!(
                "outside event {} ({}) delivered to {}",
                s.signal_id, s.name, s.agent
            ),
            Outcome::Allowed,
            "",
        ),
        RunEvent::RunCompleted { .. } => {
            reading(A::Run, "run completed".to_owned(), Outcome::Allowed, "")
        }
        RunEvent::RunBlocked {
            rule_id, reason, ..
        } => reading(
            A::Run,
            format!("run blocked ({reason})"),
            Outcome::Denied,
            rule_id,
        ),
        RunEvent::RunFailed { reason } => reading(
            A::Run,
            format!("run failed ({reason})"),
            Outcome::Denied,
            "",
        ),
        _ => return None,
    })
}

/// A decision kind as recorded (`capability`, `tool_call`...).
fn kind_name(kind: DecisionKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
