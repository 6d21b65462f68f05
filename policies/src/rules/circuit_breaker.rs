//! The circuit breaker (docs/governance.md#circuit-breaker), `defaults.circuit_breaker`:
//! it keeps one failing agent from cascading into others by refusing calls to it once
//! too many of its recent calls failed, letting one probe through after a while.

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
    /// The share of an agent's calls answered within `window_ms` that failed, in percent,
    /// at which its circuit opens (decider version 13). Left out of the canonical form at
    /// its default.
    #[serde(
        default = "default_failure_rate_percent",
        skip_serializing_if = "is_default_failure_rate_percent"
    )]
    pub failure_rate_percent: u32,
    /// How far back the calls counted go, from the moment the breaker is read.
    #[serde(
        default = "default_window_ms",
        skip_serializing_if = "is_default_window_ms"
    )]
    pub window_ms: u64,
    /// Fewer calls than this within the window never open the circuit, whatever failed.
    #[serde(
        default = "default_minimum_calls",
        skip_serializing_if = "is_default_minimum_calls"
    )]
    pub minimum_calls: u32,
    /// Consecutive failures after which the circuit opens, for runs recorded by decider
    /// version 12 (which counted failures in a row).
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
            failure_rate_percent: default_failure_rate_percent(),
            window_ms: default_window_ms(),
            minimum_calls: default_minimum_calls(),
            failure_threshold: default_failure_threshold(),
            probe_interval_ms: default_probe_interval_ms(),
            on_open: OnOpen::Degrade,
        }
    }
}

fn default_failure_threshold() -> u32 {
    5
}

fn default_failure_rate_percent() -> u32 {
    50
}

// serde's `skip_serializing_if` passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_default_failure_rate_percent(v: &u32) -> bool {
    *v == default_failure_rate_percent()
}

fn default_window_ms() -> u64 {
    600_000
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_default_window_ms(v: &u64) -> bool {
    *v == default_window_ms()
}

fn default_minimum_calls() -> u32 {
    5
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_default_minimum_calls(v: &u32) -> bool {
    *v == default_minimum_calls()
}

fn default_probe_interval_ms() -> u64 {
    60_000
}

/// The threshold counts failures, so it is at least 1; a rate is a percentage above 0; a
/// window and a minimum that count nothing would open the circuit on no evidence.
pub(crate) fn check(c: &mut Checker<'_>) {
    let cb = &c.spec.defaults.circuit_breaker;
    let mut problems = Vec::new();
    if cb.failure_threshold == 0 {
        problems.push(("failure_threshold", "failure_threshold must be at least 1"));
    }
    if !(1..=100).contains(&cb.failure_rate_percent) {
        problems.push((
            "failure_rate_percent",
            "failure_rate_percent must be from 1 to 100",
        ));
    }
    if cb.window_ms == 0 {
        problems.push(("window_ms", "window_ms must be positive"));
    }
    if cb.minimum_calls == 0 {
        problems.push(("minimum_calls", "minimum_calls must be at least 1"));
    }
    for (field, message) in problems {
        c.push(
            ptr!["defaults", "circuit_breaker", field],
            Code::InvalidValue,
            message,
        );
    }
}

/// What the breaker read says, for [`PolicyBundle::circuit_decision`]: whether the
/// circuit is open, the words for closed, and what follows "circuit open for `AGENT`".
struct Reading {
    reached: bool,
    closed: String,
    open: String,
}

impl PolicyBundle {
    /// Circuit breaker for calls to `target` (runs of decider version 12): open after
    /// `failure_threshold` consecutive failures; after `probe_interval_ms` one probe is let
    /// through. The elapsed time is an input (recorded by the caller), never read from a
    /// clock here.
    pub fn decide_circuit(
        &self,
        target: &str,
        consecutive_failures: u32,
        ms_since_last_failure: u64,
    ) -> PolicyDecision {
        let threshold = self.spec.defaults.circuit_breaker.failure_threshold;
        self.circuit_decision(
            target,
            &Reading {
                reached: consecutive_failures >= threshold,
                closed: format!("circuit closed: {consecutive_failures} of {threshold} failures"),
                open: format!(" after {consecutive_failures} failures"),
            },
            ms_since_last_failure,
        )
    }

    /// Circuit breaker for calls to `target` by failure rate (decider version 13): open
    /// when at least `minimum_calls` of its calls were answered within `window_ms` and at
    /// least `failure_rate_percent` of them failed; after `probe_interval_ms` since the last
    /// failure or probe, one probe is let through. The counts and the elapsed time are
    /// inputs (recorded by the caller), never read from a clock here.
    pub fn decide_circuit_rate(
        &self,
        target: &str,
        (calls, failures): (u32, u32),
        ms_since_last_attempt: u64,
    ) -> PolicyDecision {
        let cb = &self.spec.defaults.circuit_breaker;
        let window_s = cb.window_ms / 1000;
        let reached = calls >= cb.minimum_calls
            && u64::from(failures) * 100 >= u64::from(cb.failure_rate_percent) * u64::from(calls);
        self.circuit_decision(
            target,
            &Reading {
                reached,
                closed: format!(
                    "circuit closed: {failures} of {calls} calls failed in the last {window_s} s \
                     (it opens at {}% of at least {})",
                    cb.failure_rate_percent, cb.minimum_calls
                ),
                open: format!(": {failures} of {calls} calls failed in the last {window_s} s"),
            },
            ms_since_last_attempt,
        )
    }

    /// Unknown agent, closed, half-open once the probe interval passed, else open.
    fn circuit_decision(
        &self,
        target: &str,
        reading: &Reading,
        ms_since_last_attempt: u64,
    ) -> PolicyDecision {
        let k = DecisionKind::CircuitBreaker;
        let rule = "defaults.circuit_breaker";
        let (verdict, rule, reason) = if self.agent(target).is_none() {
            (
                Verdict::Deny,
                "agents.unknown",
                format!("unknown agent `{target}`"),
            )
        } else if !reading.reached {
            (Verdict::Allow, rule, reading.closed.clone())
        } else if ms_since_last_attempt >= self.spec.defaults.circuit_breaker.probe_interval_ms {
            (
                Verdict::Allow,
                rule,
                format!("circuit half-open: one probe request to `{target}`"),
            )
        } else {
            (
                Verdict::Deny,
                rule,
                format!(
                    "circuit open for `{target}`{}: return a graceful degradation response",
                    reading.open
                ),
            )
        };
        conclude(k, verdict, self.hash, rule, reason, Vec::new())
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

    #[test]
    fn opens_at_the_failure_rate_over_enough_calls_and_lets_a_probe_through_later() {
        let src = "bundle = { id = \"t\" }\nagents = [{ id = \"a\" }]\n[defaults.circuit_breaker]\n\
                   failure_rate_percent = 50\nminimum_calls = 4\nprobe_interval_ms = 1000\n";
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        // Too few calls, whatever failed.
        assert_eq!(
            b.decide_circuit_rate("a", (3, 3), 0).verdict,
            Verdict::Allow
        );
        // Below the rate: 1 of 4, then 49 of 100.
        assert_eq!(
            b.decide_circuit_rate("a", (4, 1), 0).verdict,
            Verdict::Allow
        );
        assert_eq!(
            b.decide_circuit_rate("a", (100, 49), 0).verdict,
            Verdict::Allow
        );
        // At the rate: open, then half-open once the probe interval passed.
        let open = b.decide_circuit_rate("a", (4, 2), 999);
        assert_eq!(open.verdict, Verdict::Deny);
        assert!(
            open.reason
                .contains("2 of 4 calls failed in the last 600 s"),
            "{}",
            open.reason
        );
        assert_eq!(
            b.decide_circuit_rate("a", (4, 2), 1000).verdict,
            Verdict::Allow
        );
        assert_eq!(
            &*b.decide_circuit_rate("ghost", (9, 9), 0).rule_id,
            "agents.unknown"
        );
    }

    /// The rate's settings at their defaults are left out of the canonical form, so
    /// bundles written before them keep their hashes; each is checked where it is written.
    #[test]
    fn the_rate_settings_keep_the_hash_at_their_defaults_and_are_checked() {
        let plain = "bundle = { id = \"t\" }\nagents = [{ id = \"a\" }]\n";
        let hash = |src: &str| PolicyBundle::from_toml_str(src, "t.toml").unwrap().hash();
        let defaults = format!(
            "{plain}[defaults.circuit_breaker]\nfailure_rate_percent = 50\nwindow_ms = 600000\nminimum_calls = 5\n"
        );
        assert_eq!(hash(plain), hash(&defaults));
        assert_ne!(
            hash(plain),
            hash(&format!(
                "{plain}[defaults.circuit_breaker]\nminimum_calls = 2\n"
            ))
        );
        for (line, says) in [
            (
                "failure_rate_percent = 0",
                "failure_rate_percent must be from 1 to 100",
            ),
            (
                "failure_rate_percent = 101",
                "failure_rate_percent must be from 1 to 100",
            ),
            ("window_ms = 0", "window_ms must be positive"),
            ("minimum_calls = 0", "minimum_calls must be at least 1"),
        ] {
            let err = PolicyBundle::from_toml_str(
                &format!("{plain}[defaults.circuit_breaker]\n{line}\n"),
                "t.toml",
            )
            .expect_err(line)
            .to_string();
            assert!(
                err.contains(says) && err.contains("t.toml:4:"),
                "{line}: {err}"
            );
        }
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
