//! Side effects (seed 004 §1, §6, §8): kill switch first, then a policy for the effect's
//! kind and lane (none means deny), the agent's permission, the idempotency key, the
//! attempt cap per key, the dry run, and human approval.

use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};

/// The kill switch that stops every lane.
pub const GLOBAL_KILL_SWITCH: &str = "global";

/// A side effect an agent asks to execute, with what has happened so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideEffectRequest {
    pub agent: String,
    pub kind: String,
    pub lane: String,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// A dry run of this effect passed.
    #[serde(default)]
    pub dry_run_passed: bool,
    /// A human approved this execution (also overrides the attempt cap, seed 004 §8.2).
    #[serde(default)]
    pub human_approved: bool,
    /// Which attempt this is for the idempotency key, from 1.
    pub attempt: u32,
    /// Kill switches engaged right now: `global` or lane names.
    #[serde(default)]
    pub engaged_kill_switches: Vec<String>,
}

impl PolicyBundle {
    /// May this side effect execute now?
    pub fn decide_side_effect(&self, req: &SideEffectRequest) -> PolicyDecision {
        let k = DecisionKind::SideEffect;
        let deny = |rule: &str, reason: String, chain| {
            conclude(k, Verdict::Deny, self.hash, rule, reason, chain)
        };
        let mut chain = Vec::new();
        let policy = self
            .spec
            .side_effects
            .iter()
            .find(|p| p.kind == req.kind && p.lane == req.lane)
            .or_else(|| {
                self.spec
                    .side_effects
                    .iter()
                    .find(|p| p.kind == req.kind && p.lane == "*")
            });
        let switch = policy
            .and_then(|p| p.kill_switch_lane.clone())
            .unwrap_or_else(|| req.lane.clone());
        for s in [GLOBAL_KILL_SWITCH, switch.as_str()] {
            if req.engaged_kill_switches.iter().any(|e| e == s) {
                let rule = format!("kill_switch.{s}");
                chain.push(RuleStep::new(
                    rule.as_str(),
                    StepOutcome::Applied,
                    "engaged",
                ));
                return deny(
                    &rule,
                    format!("kill switch `{s}` is engaged: every side effect in its lanes stops"),
                    chain,
                );
            }
        }
        let Some(p) = policy else {
            return deny(
                "deny_by_default",
                format!(
                    "no side-effect policy for `{}` in lane `{}`: no side effect without a policy decision",
                    req.kind, req.lane
                ),
                chain,
            );
        };
        let pid = p.id.as_str();
        let Some(agent) = self.agent(&req.agent).and_then(|i| self.spec.agents.get(i)) else {
            return deny(
                "agents.unknown",
                format!("unknown agent `{}`", req.agent),
                chain,
            );
        };
        if !agent.side_effects.contains(&req.kind) {
            let rule = format!("agents.{}.side_effects", req.agent);
            return deny(
                &rule,
                format!(
                    "`{}` has no permission for `{}` side effects (read-only by default; escalate to the parent)",
                    req.agent, req.kind
                ),
                chain,
            );
        }
        chain.push(RuleStep::new(
            pid,
            StepOutcome::Applied,
            format!("policy for {} in lane {}", p.kind, p.lane),
        ));
        if p.idempotency_key_required && req.idempotency_key.as_deref().is_none_or(str::is_empty) {
            return deny(pid, "an idempotency key is required".to_owned(), chain);
        }
        if req.attempt > p.retry_cap {
            if !req.human_approved {
                let reason = format!(
                    "attempt {} exceeds retry_cap {} for this idempotency key; only a human may override",
                    req.attempt, p.retry_cap
                );
                return conclude(k, Verdict::NeedsApproval, self.hash, pid, reason, chain);
            }
            chain.push(RuleStep::new(
                pid,
                StepOutcome::Overridden,
                "retry cap overridden by a human",
            ));
        }
        if p.dry_run_required && !req.dry_run_passed {
            return deny(
                pid,
                "a passing dry run is required before execution".to_owned(),
                chain,
            );
        }
        if p.human_approval_required && !req.human_approved {
            return conclude(
                k,
                Verdict::NeedsApproval,
                self.hash,
                pid,
                format!("`{}` in lane `{}` needs human approval", p.kind, p.lane),
                chain,
            );
        }
        conclude(
            k,
            Verdict::Allow,
            self.hash,
            pid,
            format!(
                "`{}` may execute `{}` in lane `{}`",
                req.agent, p.kind, p.lane
            ),
            chain,
        )
    }
}
