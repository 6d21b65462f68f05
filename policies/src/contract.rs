//! Data contracts (docs/governance.md#data-contracts) and the circuit breaker, which keeps
//! one failing agent from cascading into others (docs/governance.md#circuit-breaker).

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::rules::handoff::InputKind;

/// Most schema violations listed in a decision.
const MAX_ERRORS: usize = 8;

impl PolicyBundle {
    /// Does `payload` satisfy the versioned output type the edge `from → to` declares?
    /// A mismatch stops the flow. Denied handoffs are denied here too.
    pub fn check_output(
        &self,
        from: &str,
        to: &str,
        input: InputKind,
        payload: &serde_json::Value,
    ) -> PolicyDecision {
        let k = DecisionKind::DataContract;
        let h = self.decide_handoff(from, to, input);
        if h.decision.verdict != Verdict::Allow {
            return PolicyDecision {
                kind: k,
                ..h.decision
            };
        }
        let mut chain = h.decision.chain.clone();
        let Some(type_ref) = h.output_type.as_deref() else {
            return conclude(
                k,
                Verdict::Allow,
                self.hash,
                h.decision.rule_id.clone(),
                format!("{from} → {to} declares no output type"),
                chain,
            );
        };
        let Some((key, validator)) = self.output_schema(type_ref) else {
            // Validation guarantees every reference resolves; stay safe if it did not.
            return conclude(
                k,
                Verdict::Deny,
                self.hash,
                "output_types",
                format!("unknown output type `{type_ref}`"),
                chain,
            );
        };
        let rule = format!("output_types.{key}");
        let mut errors: Vec<String> = validator
            .iter_errors(payload)
            .map(|e| format!("{}: {}", e.instance_path(), e))
            .collect();
        errors.sort();
        errors.truncate(MAX_ERRORS);
        if errors.is_empty() {
            chain.push(RuleStep::new(
                rule.as_str(),
                StepOutcome::Applied,
                "payload matches",
            ));
            return conclude(
                k,
                Verdict::Allow,
                self.hash,
                rule,
                format!("payload satisfies {key}"),
                chain,
            );
        }
        chain.push(RuleStep::new(
            rule.as_str(),
            StepOutcome::Applied,
            "schema mismatch",
        ));
        conclude(
            k,
            Verdict::Deny,
            self.hash,
            rule,
            format!(
                "schema mismatch against {key}, the flow stops: {}",
                errors.join("; ")
            ),
            chain,
        )
    }

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
