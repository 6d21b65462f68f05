//! Capability requests between agents (docs/governance.md#capability-requests) and responsibility
//! locks (docs/governance.md#guardrail-3-responsibility-locks): each agent's `capabilities` and
//! the `[[responsibility_locks]]` section. The capability must be registered to the target, a
//! locked capability may only be obtained from its owner by permitted requesters, and
//! `inputs_json` must satisfy the capability's input schema.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::sort_dedup;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::model::{AgentSpec, BundleSpec, Priority};
use crate::validate::{Checker, Issue};

/// A capability code with its input contract (docs/governance.md#capability-requests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilitySpec {
    /// e.g. `ANL_NPV`.
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Default timeout; the bundle's `defaults.timeout_ms` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// JSON Schema that `inputs_json` must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
}

/// Guardrail 3: a capability that belongs exclusively to one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResponsibilityLock {
    pub id: String,
    pub capability: String,
    pub owner: String,
    /// Agents that may request the capability of its owner; absent means any agent not
    /// listed in `forbidden_requesters`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requesters: Option<Vec<String>>,
    #[serde(default)]
    pub forbidden_requesters: Vec<String>,
    pub reason: String,
}

/// One agent's capabilities (at `p`, the agent's pointer): codes are unique, input
/// schemas are valid JSON Schemas, timeouts are positive.
pub(crate) fn check_agent(c: &mut Checker<'_>, p: &Pointer, a: &AgentSpec) {
    let mut codes = BTreeSet::new();
    for (j, cap) in a.capabilities.iter().enumerate() {
        let cp = p.key("capabilities").index(j);
        if !codes.insert(cap.code.as_str()) {
            c.push(
                cp.key("code"),
                Code::Duplicate,
                format!("capability `{}` is declared twice", cap.code),
            );
        }
        if let Some(schema) = &cap.input_schema {
            c.json_schema(cp.key("input_schema"), schema);
        }
        if cap.timeout_ms == Some(0) {
            c.push(
                cp.key("timeout_ms"),
                Code::InvalidValue,
                "timeout_ms must be positive",
            );
        }
    }
}

/// Responsibility locks: each capability is locked once, only its owner declares it, and
/// no agent is both a requester and a forbidden one.
pub(crate) fn check(c: &mut Checker<'_>) {
    let spec = c.spec;
    // Who declares each capability, in the registry's order: (agent position, the agent,
    // the position of its first capability of that code).
    let mut declared: BTreeMap<&str, Vec<(usize, &AgentSpec, usize)>> = BTreeMap::new();
    for (j, a) in spec.agents.iter().enumerate() {
        for (k, cap) in a.capabilities.iter().enumerate() {
            let list = declared.entry(cap.code.as_str()).or_default();
            if list.last().is_none_or(|(last, _, _)| *last != j) {
                list.push((j, a, k));
            }
        }
    }
    let mut locked = BTreeSet::new();
    for (i, l) in spec.responsibility_locks.iter().enumerate() {
        let p = ptr!["responsibility_locks", i];
        c.agent_ref(p.key("owner"), &l.owner, false);
        if !locked.insert(l.capability.as_str()) {
            c.push(
                p.key("capability"),
                Code::Duplicate,
                format!("capability `{}` is locked twice", l.capability),
            );
        }
        let declarers = declared
            .get(l.capability.as_str())
            .map_or(&[][..], Vec::as_slice);
        if !declarers.iter().any(|(_, a, _)| a.id == l.owner) {
            c.push(
                p.key("capability"),
                Code::UnknownReference,
                format!(
                    "owner `{}` does not declare capability `{}`",
                    l.owner, l.capability
                ),
            );
        }
        for &(j, a, k) in declarers {
            if a.id != l.owner {
                c.push(
                    ptr!["agents", j, "capabilities", k, "code"],
                    Code::Contradiction,
                    format!(
                        "`{}` belongs exclusively to `{}` ({}); `{}` cannot declare it",
                        l.capability, l.owner, l.id, a.id
                    ),
                );
            }
        }
        let forbidden: BTreeSet<&str> = l.forbidden_requesters.iter().map(String::as_str).collect();
        for (j, a) in l.forbidden_requesters.iter().enumerate() {
            c.agent_ref(p.key("forbidden_requesters").index(j), a, false);
            if *a == l.owner {
                c.push(
                    p.key("forbidden_requesters").index(j),
                    Code::Contradiction,
                    "the owner cannot be a forbidden requester",
                );
            }
        }
        for (j, a) in l.requesters.iter().flatten().enumerate() {
            c.agent_ref(p.key("requesters").index(j), a, false);
            if forbidden.contains(a.as_str()) {
                c.push(
                    p.key("requesters").index(j),
                    Code::Contradiction,
                    format!("`{a}` is both a requester and a forbidden requester"),
                );
            }
        }
    }
}

/// The responsibility locks' rule ids.
pub(crate) fn rule_ids(spec: &BundleSpec, ids: &mut Vec<(String, Pointer)>) {
    ids.extend(
        spec.responsibility_locks
            .iter()
            .enumerate()
            .map(|(i, l)| (l.id.clone(), ptr!["responsibility_locks", i, "id"])),
    );
}

/// Normal form: an agent's capabilities sorted by code, locks by id, requester lists sorted.
pub(crate) fn normalize(s: &mut BundleSpec) {
    for a in &mut s.agents {
        a.capabilities.sort_by(|x, y| x.code.cmp(&y.code));
    }
    for l in &mut s.responsibility_locks {
        if let Some(r) = &mut l.requesters {
            sort_dedup(r);
        }
        sort_dedup(&mut l.forbidden_requesters);
    }
    s.responsibility_locks.sort_by(|a, b| a.id.cmp(&b.id));
}

/// Capability input validators by (agent position, code).
pub(crate) type Schemas = BTreeMap<(usize, String), Arc<jsonschema::Validator>>;

/// Compiles every capability's input schema once per bundle.
pub(crate) fn compile(spec: &BundleSpec) -> Result<Schemas, Vec<Issue>> {
    let mut capability_schemas = BTreeMap::new();
    for (i, a) in spec.agents.iter().enumerate() {
        for c in &a.capabilities {
            if let Some(schema) = &c.input_schema {
                let compiled = jsonschema::validator_for(schema).map_err(|e| {
                    vec![Issue {
                        pointer: Pointer::root().key("agents").index(i),
                        code: Code::InvalidValue,
                        message: format!("capability `{}`: not a valid JSON Schema: {e}", c.code),
                    }]
                })?;
                capability_schemas.insert((i, c.code.clone()), Arc::new(compiled));
            }
        }
    }
    Ok(capability_schemas)
}

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
                .map(|e| {
                    let at = e.instance_path().to_string();
                    format!(
                        "{}: {}",
                        crate::rules::contract::schema_place(&at, "inputs"),
                        e
                    )
                })
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_locked_capability_comes_only_from_its_owner_with_valid_inputs() {
        let src = r#"
            bundle = { id = "t" }
            [[agents]]
            id = "owner"
            capabilities = [{ code = "NPV", timeout_ms = 500, input_schema = { type = "object", required = ["rate"] } }]
            [[agents]]
            id = "asker"
            [[agents]]
            id = "banned"
            [[responsibility_locks]]
            id = "lock-npv"
            capability = "NPV"
            owner = "owner"
            forbidden_requesters = ["banned"]
            reason = "valuation belongs to the owner"
        "#;
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        let request = |source: &str, inputs_json: Value| CapabilityRequest {
            source_agent: source.into(),
            target_agent: "owner".into(),
            capability_code: "NPV".into(),
            inputs_json,
            priority: None,
            timeout_ms: None,
        };
        let ok = b.decide_capability(&request("asker", json!({ "rate": 0.1 })));
        assert!(ok.decision.is_allowed(), "{:?}", ok.decision);
        assert_eq!((ok.timeout_ms, ok.priority), (500, Priority::Normal));
        let banned = b.decide_capability(&request("banned", json!({ "rate": 0.1 })));
        assert_eq!(
            (banned.decision.verdict, &*banned.decision.rule_id),
            (Verdict::Deny, "lock-npv")
        );
        let bad = b.decide_capability(&request("asker", json!({})));
        assert_eq!(bad.decision.verdict, Verdict::Deny);
        assert_eq!(bad.input_errors.len(), 1, "{:?}", bad.input_errors);
    }
}
