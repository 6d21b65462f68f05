//! Retry → escalate → block (docs/governance.md#failure-ladder) with a hard stop that needs
//! a human (docs/governance.md#guardrail-1-retry-hard-stop): the `[escalation]` section.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::sort_dedup;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::model::BundleSpec;
use crate::validate::Checker;

/// What the orchestrator does after an agent fails.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum EscalationAction {
    Retry,
    Escalate,
    Block,
}

/// One rung of the ladder: from `after_failures` failures on, take `action`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EscalationStep {
    pub id: String,
    pub after_failures: u32,
    pub action: EscalationAction,
}

/// The failure ladder, retry → escalate → block (docs/governance.md#failure-ladder), whose
/// last rung is the hard stop of docs/governance.md#guardrail-1-retry-hard-stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EscalationPolicy {
    /// Must end in `block`: the hard stop that needs a human.
    #[serde(default = "default_ladder")]
    pub ladder: Vec<EscalationStep>,
    /// Error classes (or error codes) that skip retrying and escalate at once
    /// ("non-recoverable").
    #[serde(default)]
    pub non_retryable_errors: Vec<String>,
    /// Error classes (or error codes) that stop the flow at once, whatever the rung (seed
    /// 000: a validation error stops the flow at its checkpoint). Left out of the
    /// canonical form when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_on_errors: Vec<String>,
    /// An agent's error codes and the class each belongs to, before the built-in classes
    /// (docs/governance.md#error-classes). Left out of the canonical form when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_classes: BTreeMap<String, String>,
}

impl Default for EscalationPolicy {
    fn default() -> Self {
        Self {
            ladder: default_ladder(),
            non_retryable_errors: Vec::new(),
            stop_on_errors: Vec::new(),
            error_classes: BTreeMap::new(),
        }
    }
}

/// The built-in error classes, in the order a code is matched against them
/// (docs/governance.md#error-classes): each with the words of an error code that put it
/// there.
pub const ERROR_CLASSES: &[(&str, &[&str])] = &[
    ("timeout", &["TIMEOUT", "TIMED_OUT"]),
    ("validation_error", &["VALIDATION", "INVALID"]),
    ("boundary_violation", &["BOUNDARY", "POLICY"]),
    ("protocol_error", &["MALFORMED", "OVERSIZED", "PROTOCOL"]),
    ("data_error", &["DATA", "NOT_FOUND", "MISSING"]),
    ("partial_output", &[PARTIAL_OUTPUT_REFUSED]),
];

/// The error code of a PARTIAL answer whose handoff crosses an edge that refuses partial
/// outputs (docs/governance.md#partial-outputs); class `partial_output`.
pub const PARTIAL_OUTPUT_REFUSED: &str = "PARTIAL_OUTPUT_REFUSED";

/// The class of an error code no built-in class matches: seed 000's agent error.
pub const AGENT_ERROR: &str = "agent_error";

/// An error code's class, and the rule that classed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorClass {
    /// The code as the agent or executor gave it (`INPUT_VALIDATION_FAILED`).
    pub code: String,
    /// Its class (`validation_error`).
    pub class: String,
    /// `escalation.error_classes.CODE`, or `escalation.built_in_classes`.
    pub rule_id: String,
}

impl ErrorClass {
    /// A class a list entry names: the class itself, or the code in any case.
    fn named_by(&self, entry: &str) -> bool {
        entry == self.class || entry.eq_ignore_ascii_case(&self.code)
    }

    /// The class of runs recorded before error classes: the code in lower case.
    #[must_use]
    pub fn as_lower_case(code: &str) -> Self {
        Self {
            code: code.to_owned(),
            class: code.to_lowercase(),
            rule_id: "escalation.error_code".to_owned(),
        }
    }
}

fn default_ladder() -> Vec<EscalationStep> {
    vec![
        EscalationStep {
            id: "retry".to_owned(),
            after_failures: 1,
            action: EscalationAction::Retry,
        },
        EscalationStep {
            id: "escalate".to_owned(),
            after_failures: 2,
            action: EscalationAction::Escalate,
        },
        EscalationStep {
            id: "block".to_owned(),
            after_failures: 3,
            action: EscalationAction::Block,
        },
    ]
}

/// Rungs act after distinct, positive failure counts, and the ladder ends in `block`.
pub(crate) fn check(c: &mut Checker<'_>) {
    // The ladder is ordered by `after_failures`, not by how it was written.
    let ladder = &c.spec.escalation.ladder;
    let mut seen = BTreeSet::new();
    for (i, step) in ladder.iter().enumerate() {
        if step.after_failures == 0 {
            c.push(
                ptr!["escalation", "ladder", i, "after_failures"],
                Code::InvalidValue,
                "after_failures must be at least 1",
            );
        }
        if !seen.insert(step.after_failures) {
            c.push(
                ptr!["escalation", "ladder", i, "after_failures"],
                Code::Duplicate,
                format!("two steps act after {} failures", step.after_failures),
            );
        }
    }
    if ladder
        .iter()
        .max_by_key(|s| s.after_failures)
        .map(|s| s.action)
        != Some(EscalationAction::Block)
    {
        c.push(
            ptr!["escalation", "ladder"],
            Code::Contradiction,
            "the ladder must end in `block`: retries cannot go on without a hard stop that needs a human (Guardrail 1)",
        );
    }
}

/// The ladder's rule ids.
pub(crate) fn rule_ids(spec: &BundleSpec, ids: &mut Vec<(String, Pointer)>) {
    ids.extend(
        spec.escalation
            .ladder
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), ptr!["escalation", "ladder", i, "id"])),
    );
}

/// Normal form: the ladder ordered by `after_failures` (not by how it was written), the
/// non-retryable error classes sorted.
pub(crate) fn normalize(s: &mut BundleSpec) {
    s.escalation.ladder.sort_by_key(|x| x.after_failures);
    sort_dedup(&mut s.escalation.non_retryable_errors);
    sort_dedup(&mut s.escalation.stop_on_errors);
}

/// What to do after a failure, and the decision behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EscalationDecision {
    pub decision: PolicyDecision,
    /// `None` when there has been no failure.
    pub action: Option<EscalationAction>,
}

impl PolicyBundle {
    /// The class of an error code: the bundle's `error_classes` entry, else the first
    /// built-in class whose words the code contains, else `agent_error`.
    #[must_use]
    pub fn error_class(&self, code: &str) -> ErrorClass {
        let upper = code.to_ascii_uppercase();
        if let Some((named, class)) = self
            .spec
            .escalation
            .error_classes
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(code))
        {
            return ErrorClass {
                code: code.to_owned(),
                class: class.clone(),
                rule_id: format!("escalation.error_classes.{named}"),
            };
        }
        let class = ERROR_CLASSES
            .iter()
            .find(|(_, words)| words.iter().any(|w| upper.contains(w)))
            .map_or(AGENT_ERROR, |(class, _)| class);
        ErrorClass {
            code: code.to_owned(),
            class: class.to_owned(),
            rule_id: "escalation.built_in_classes".to_owned(),
        }
    }

    /// After `failures` consecutive failures (the last of class `error_class`), what next?
    pub fn decide_escalation(
        &self,
        failures: u32,
        error_class: Option<&ErrorClass>,
    ) -> EscalationDecision {
        let e = &self.spec.escalation;
        let k = DecisionKind::Escalation;
        let Some(step) = e.ladder.iter().rev().find(|s| s.after_failures <= failures) else {
            return EscalationDecision {
                decision: conclude(
                    k,
                    Verdict::Allow,
                    self.hash,
                    "escalation.ladder",
                    "no failure to act on",
                    Vec::new(),
                ),
                action: None,
            };
        };
        let mut chain = vec![RuleStep::new(
            step.id.as_str(),
            StepOutcome::Applied,
            format!("{failures} failure(s)"),
        )];
        let mut action = step.action;
        let mut rule = step.id.clone();
        let listed = |list: &[String]| {
            error_class.is_some_and(|c| list.iter().any(|entry| c.named_by(entry)))
        };
        if let Some(class) = error_class.filter(|_| listed(&e.stop_on_errors)) {
            chain.push(RuleStep::new(
                class.rule_id.as_str(),
                StepOutcome::Applied,
                format!("{} is a {}", class.code, class.class),
            ));
            chain.push(RuleStep::new(
                "escalation.stop_on_errors",
                StepOutcome::Applied,
                format!("a {} stops the flow at once", class.class),
            ));
            return EscalationDecision {
                decision: conclude(
                    k,
                    Verdict::Deny,
                    self.hash,
                    "escalation.stop_on_errors",
                    format!(
                        "{} ({}) stops the flow at once: the workflow stops and needs explicit human intervention",
                        class.class, class.code
                    ),
                    chain,
                ),
                action: Some(EscalationAction::Block),
            };
        }
        if action == EscalationAction::Retry && listed(&e.non_retryable_errors) {
            chain.push(RuleStep::new(
                "escalation.non_retryable_errors",
                StepOutcome::Applied,
                "non-recoverable error class",
            ));
            action = EscalationAction::Escalate;
            rule = "escalation.non_retryable_errors".to_owned();
        }
        let (verdict, reason) = match action {
            EscalationAction::Retry => (
                Verdict::Allow,
                format!("retry with more context (failure {failures})"),
            ),
            EscalationAction::Escalate => (
                Verdict::NeedsApproval,
                format!("escalate to a human (failure {failures})"),
            ),
            EscalationAction::Block => (
                Verdict::Deny,
                format!(
                    "hard stop after {failures} failures: the workflow stops and needs explicit human intervention"
                ),
            ),
        };
        EscalationDecision {
            decision: conclude(k, verdict, self.hash, rule, reason, chain),
            action: Some(action),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ladder_is_retry_escalate_block() {
        let b = PolicyBundle::from_toml_str("bundle = { id = \"t\" }", "t.toml").unwrap();
        let actions: Vec<_> = (1..=4)
            .map(|n| b.decide_escalation(n, None).action)
            .collect();
        use EscalationAction::*;
        assert_eq!(
            actions,
            [Some(Retry), Some(Escalate), Some(Block), Some(Block)]
        );
    }

    #[test]
    fn error_codes_fall_into_classes_the_bundle_can_name() {
        let b = PolicyBundle::from_toml_str(
            "bundle = { id = \"t\" }\n[escalation]\nnon_retryable_errors = [\"validation_error\"]\nstop_on_errors = [\"data_error\"]\nerror_classes = { GEO_SNAPSHOT_STALE = \"data_error\" }\n",
            "t.toml",
        )
        .unwrap();
        let class = |code: &str| b.error_class(code).class;
        assert_eq!(class("INPUT_VALIDATION_FAILED"), "validation_error");
        assert_eq!(class("AGENT_TIMEOUT"), "timeout");
        assert_eq!(class("AGENT_MALFORMED_RESPONSE"), "protocol_error");
        assert_eq!(class("BOUNDARY_VIOLATION"), "boundary_violation");
        assert_eq!(class("AGENT_CRASHED"), "agent_error");
        assert_eq!(class(PARTIAL_OUTPUT_REFUSED), "partial_output");
        assert_eq!(class("geo_snapshot_stale"), "data_error");
        assert_eq!(
            b.error_class("GEO_SNAPSHOT_STALE").rule_id,
            "escalation.error_classes.GEO_SNAPSHOT_STALE"
        );
        use EscalationAction::*;
        let first = |code: &str| {
            b.decide_escalation(1, Some(&b.error_class(code)))
                .action
                .unwrap()
        };
        assert_eq!(first("INPUT_VALIDATION_FAILED"), Escalate);
        assert_eq!(first("GEO_SNAPSHOT_STALE"), Block);
        assert_eq!(first("AGENT_CRASHED"), Retry);
        let stop = b.decide_escalation(1, Some(&b.error_class("GEO_SNAPSHOT_STALE")));
        assert_eq!(&*stop.decision.rule_id, "escalation.stop_on_errors");
        // An entry may name a code as well as a class, in any case.
        let lower = ErrorClass::as_lower_case("AGENT_CRASHED");
        assert!(lower.named_by("agent_crashed") && lower.named_by("AGENT_CRASHED"));
    }

    #[test]
    fn escalation_ladder_must_end_in_block() {
        let s: BundleSpec = toml::from_str(
            "bundle = { id = \"t\" }\n[escalation]\nladder = [{ id = \"r\", after_failures = 1, action = \"retry\" }]\n",
        )
        .unwrap();
        assert!(
            crate::validate::validate(&s)
                .iter()
                .any(|i| i.code == Code::Contradiction)
        );
    }
}
