//! Capability requests between agents (docs/governance.md#capability-requests) and responsibility
//! locks (docs/governance.md#guardrail-3-responsibility-locks): the capability must be registered
//! to the target, a locked capability may only be obtained from its owner by permitted requesters,
//! and `inputs_json` must satisfy the capability's input schema.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::model::Priority;

/// The request fields that policy looks at (docs/agent-protocol.md#the-request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapabilityRequest {
    pub source_agent: String,
    pub target_agent: String,
    pub capability_code: String,
    #[serde(default)]
    pub inputs_json: Value,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The verdict plus the effective request defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityDecision {
    pub decision: PolicyDecision,
    pub timeout_ms: u64,
    pub priority: Priority,
    /// Schema violations of `inputs_json`, as `pointer: message`, sorted.
    pub input_errors: Vec<String>,
}

/// Most schema violations listed in a decision.
const MAX_INPUT_ERRORS: usize = 8;

impl PolicyBundle {
    /// May `source_agent` obtain `capability_code` from `target_agent` with these inputs?
    pub fn decide_capability(&self, req: &CapabilityRequest) -> CapabilityDecision {
        let k = DecisionKind::Capability;
        let d = &self.spec.defaults;
        let priority = req.priority.unwrap_or(d.priority);
        let target = self
            .agent(&req.target_agent)
            .and_then(|i| self.spec.agents.get(i).map(|a| (i, a)));
        let cap = target.and_then(|(_, a)| {
            a.capabilities
                .iter()
                .find(|c| c.code == req.capability_code)
        });
        let timeout_ms = req
            .timeout_ms
            .or(cap.and_then(|c| c.timeout_ms))
            .unwrap_or(d.timeout_ms);
        let out = |decision, input_errors| CapabilityDecision {
            decision,
            timeout_ms,
            priority,
            input_errors,
        };
        let (src, code) = (req.source_agent.as_str(), req.capability_code.as_str());
        let mut chain = Vec::new();

        for who in [src, req.target_agent.as_str()] {
            if self.agent(who).is_none() {
                return out(
                    conclude(
                        k,
                        Verdict::Deny,
                        self.hash,
                        "agents.unknown",
                        format!("unknown agent `{who}`"),
                        chain,
                    ),
                    Vec::new(),
                );
            }
        }
        if let Some(lock) = self
            .spec
            .responsibility_locks
            .iter()
            .find(|l| l.capability == code)
        {
            let lid = lock.id.as_str();
            let forbidden = lock.forbidden_requesters.iter().any(|a| a == src);
            let not_listed = src != lock.owner
                && lock
                    .requesters
                    .as_ref()
                    .is_some_and(|r| !r.iter().any(|a| a == src));
            if forbidden || not_listed {
                chain.push(RuleStep::new(
                    lid,
                    StepOutcome::Applied,
                    format!("`{code}` belongs exclusively to `{}`", lock.owner),
                ));
                return out(
                    conclude(
                        k,
                        Verdict::Deny,
                        self.hash,
                        lid,
                        format!("{src} may not obtain `{code}`: {}", lock.reason),
                        chain,
                    ),
                    Vec::new(),
                );
            }
            if req.target_agent != lock.owner {
                chain.push(RuleStep::new(lid, StepOutcome::Applied, "wrong target"));
                return out(
                    conclude(
                        k,
                        Verdict::Deny,
                        self.hash,
                        lid,
                        format!(
                            "`{code}` belongs exclusively to `{}`, not `{}`",
                            lock.owner, req.target_agent
                        ),
                        chain,
                    ),
                    Vec::new(),
                );
            }
            chain.push(RuleStep::new(
                lid,
                StepOutcome::NotApplicable,
                format!("`{src}` may request `{code}` of its owner"),
            ));
        }
        let cap_rule = format!("agents.{}.capabilities.{code}", req.target_agent);
        if cap.is_none() {
            return out(
                conclude(
                    k,
                    Verdict::Deny,
                    self.hash,
                    "deny_by_default",
                    format!(
                        "`{code}` is not a capability registered to `{}`",
                        req.target_agent
                    ),
                    chain,
                ),
                Vec::new(),
            );
        }
        if let Some(v) =
            target.and_then(|(i, _)| self.capability_schemas.get(&(i, code.to_owned())))
        {
            let mut errors: Vec<String> = v
                .iter_errors(&req.inputs_json)
                .map(|e| format!("{}: {}", e.instance_path(), e))
                .collect();
            errors.sort();
            errors.truncate(MAX_INPUT_ERRORS);
            if !errors.is_empty() {
                chain.push(RuleStep::new(
                    format!("{cap_rule}.input_schema"),
                    StepOutcome::Applied,
                    "inputs_json does not match",
                ));
                let reason = format!("INPUT_VALIDATION_FAILED: {}", errors.join("; "));
                return out(
                    conclude(
                        k,
                        Verdict::Deny,
                        self.hash,
                        format!("{cap_rule}.input_schema"),
                        reason,
                        chain,
                    ),
                    errors,
                );
            }
            chain.push(RuleStep::new(
                format!("{cap_rule}.input_schema"),
                StepOutcome::Applied,
                "inputs_json matches",
            ));
        }
        chain.push(RuleStep::new(
            cap_rule.as_str(),
            StepOutcome::Applied,
            "registered capability",
        ));
        out(
            conclude(
                k,
                Verdict::Allow,
                self.hash,
                cap_rule,
                format!("{src} may request `{code}` of {}", req.target_agent),
                chain,
            ),
            Vec::new(),
        )
    }
}
