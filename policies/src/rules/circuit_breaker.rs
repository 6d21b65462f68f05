//! The circuit breaker (docs/governance.md#circuit-breaker), `defaults.circuit_breaker`:
//! it keeps one failing agent from cascading into others by refusing calls to it after
//! repeated failures, letting one probe through after a while.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::ptr;
use crate::validate::Checker;

/// The circuit breaker: stop routing to an agent after repeated failures
/// (docs/governance.md#circuit-breaker).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CircuitBreaker {
    /// Consecutive failures after which the circuit opens.
    #[serde(default = "default_failure_threshold")]
    pub failure_threshold: u32,
    /// How long the circuit stays open before one probe request is let through.
    #[serde(default = "default_probe_interval_ms")]
    pub probe_interval_ms: u64,
    /// What a call refused by an open circuit gets (decider version 6): `degrade` (the
    /// default: a capability's asker is told `capability_failed`, a handoff's call waits
    /// for a human) or `block` (the run is blocked, as before). Left out of the canonical
    /// form at its default.
    #[serde(default, skip_serializing_if = "OnOpen::is_degrade")]
    pub on_open: OnOpen,
}

/// What a call refused by an open circuit gets (docs/governance.md#circuit-breaker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnOpen {
    /// A graceful degradation response: the asker of a capability gets
    /// `capability_failed` (error class `circuit_open`); any other call waits for a human,
    /// who may retry it once the circuit lets a probe through.
    #[default]
    Degrade,
    /// The run is blocked (rule `defaults.circuit_breaker`, error type `circuit_open`).
    Block,
}

impl OnOpen {
    /// The default, left out of the canonical form.
    #[must_use]
    pub fn is_degrade(&self) -> bool {
        *self == Self::Degrade
    }
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        Self {
            failure_threshold: default_failure_threshold(),
            probe_interval_ms: default_probe_interval_ms(),
            on_open: OnOpen::Degrade,
        }
    }
}

fn default_failure_threshold() -> u32 {
    5
}

fn default_probe_interval_ms() -> u64 {
    60_000
}

/// The threshold counts failures, so it is at least 1.
pub(crate) fn check(c: &mut Checker<'_>) {
    if c.spec.defaults.circuit_breaker.failure_threshold == 0 {
        c.push(
            ptr!["defaults", "circuit_breaker", "failure_threshold"],
            Code::InvalidValue,
            "failure_threshold must be at least 1",
        );
    }
}

impl PolicyBundle {
    /// Circuit breaker for calls to `target`: open after `failure_threshold` consecutive
    /// failures; after `probe_interval_ms` one probe is let through. The elapsed time is an
    /// input (recorded by the caller), never read from a clock here.
    pub fn decide_circuit(
        &self,
        target: &str,
        consecutive_failures: u32,
        ms_since_last_failure: u64,
    ) -> PolicyDecision {
        let k = DecisionKind::CircuitBreaker;
        let cb = &self.spec.defaults.circuit_breaker;
        let rule = "defaults.circuit_breaker";
        if self.agent(target).is_none() {
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                "agents.unknown",
                format!("unknown agent `{target}`"),
                Vec::new(),
            );
        }
        if consecutive_failures < cb.failure_threshold {
            return conclude(
                k,
                Verdict::Allow,
                self.hash,
                rule,
                format!(
                    "circuit closed: {consecutive_failures} of {} failures",
                    cb.failure_threshold
                ),
                Vec::new(),
            );
        }
        if ms_since_last_failure >= cb.probe_interval_ms {
            return conclude(
                k,
                Verdict::Allow,
                self.hash,
                rule,
                format!("circuit half-open: one probe request to `{target}`"),
                Vec::new(),
            );
        }
        conclude(
            k,
            Verdict::Deny,
            self.hash,
            rule,
            format!(
                "circuit open for `{target}` after {consecutive_failures} failures: return a graceful degradation response"
            ),
            Vec::new(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_at_the_threshold_and_lets_a_probe_through_later() {
        let src = "bundle = { id = \"t\" }\nagents = [{ id = \"a\" }]\n[defaults.circuit_breaker]\nfailure_threshold = 2\nprobe_interval_ms = 1000\n";
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        assert_eq!(b.decide_circuit("a", 1, 0).verdict, Verdict::Allow);
        assert_eq!(b.decide_circuit("a", 2, 999).verdict, Verdict::Deny);
        assert_eq!(b.decide_circuit("a", 2, 1000).verdict, Verdict::Allow);
        assert_eq!(&*b.decide_circuit("ghost", 0, 0).rule_id, "agents.unknown");
    }

    /// `on_open` at its default is left out of the canonical form, so bundles written
    /// before it existed keep their hashes; `block` is a different bundle.
    #[test]
    fn on_open_at_its_default_keeps_the_hash() {
        let plain = "bundle = { id = \"t\" }\nagents = [{ id = \"a\" }]\n";
        let hash = |src: &str| PolicyBundle::from_toml_str(src, "t.toml").unwrap().hash();
        let degrade = format!("{plain}[defaults.circuit_breaker]\non_open = \"degrade\"\n");
        let block = format!("{plain}[defaults.circuit_breaker]\non_open = \"block\"\n");
        assert_eq!(hash(plain), hash(&degrade));
        assert_ne!(hash(plain), hash(&block));
        let b = PolicyBundle::from_toml_str(&block, "t.toml").unwrap();
        assert_eq!(b.spec().defaults.circuit_breaker.on_open, OnOpen::Block);
        let err = PolicyBundle::from_toml_str(
            &format!("{plain}[defaults.circuit_breaker]\non_open = \"wait\"\n"),
            "t.toml",
        )
        .expect_err("an unknown choice")
        .to_string();
        assert!(err.contains("t.toml:4:"), "{err}");
    }

    #[test]
    fn a_zero_threshold_is_rejected_where_it_is_written() {
        let err = PolicyBundle::from_toml_str(
            "bundle = { id = \"t\" }\n[defaults.circuit_breaker]\nfailure_threshold = 0\n",
            "t.toml",
        )
        .expect_err("a zero threshold")
        .to_string();
        assert!(
            err.contains("failure_threshold must be at least 1"),
            "{err}"
        );
        assert!(err.contains("t.toml:3:"), "{err}");
    }
}
