//! What recursion is for (docs/governance.md#recursion-classes), the `[recursion.classes]`
//! section: the four classes of child episode (retrieval, critique, repair, verification),
//! the child types of each, and the triggers a spawn of each may name. A spawn of a
//! classed child type names its trigger; once an episode has applied a side effect,
//! verification comes before repair.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict};
use crate::error::DiagnosticCode as Code;
use crate::locate::ptr;
use crate::validate::Checker;

/// The rule a spawn of repair recursion breaks while an episode's side effects are
/// unverified.
pub const VERIFICATION_FIRST: &str = "recursion.classes.verification_first";

/// What a child episode is for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RecursionClass {
    /// Build capsules, locate facts, gather examples, fetch tool capabilities.
    Retrieval,
    /// Review an output against rubrics (tone, policy, platform specs).
    Critique,
    /// Fix a failed step (selector drift, an error, an invalid payload).
    Repair,
    /// Confirm what a side effect did (visible, metadata right, no duplicate).
    Verification,
}

impl RecursionClass {
    /// Every class, in the order the section lists them.
    pub const ALL: [Self; 4] = [
        Self::Retrieval,
        Self::Critique,
        Self::Repair,
        Self::Verification,
    ];

    /// The class's name in the bundle and in events.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retrieval => "retrieval",
            Self::Critique => "critique",
            Self::Repair => "repair",
            Self::Verification => "verification",
        }
    }
}

/// One class: its child types and the triggers a spawn of it may name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassRule {
    /// The child types of this class.
    #[serde(default)]
    pub child_types: Vec<String>,
    /// The triggers a spawn of this class may name.
    #[serde(default)]
    pub triggers: Vec<String>,
}

fn rule(child_types: &[&str], triggers: &[&str]) -> ClassRule {
    ClassRule {
        child_types: child_types.iter().map(|t| (*t).to_owned()).collect(),
        triggers: triggers.iter().map(|t| (*t).to_owned()).collect(),
    }
}

fn default_retrieval() -> ClassRule {
    rule(
        &["retrieve", "summarize", "tool_probe"],
        &[
            "missing_capsule",
            "missing_capability_confirmation",
            "missing_template_refs",
        ],
    )
}

fn default_critique() -> ClassRule {
    rule(&["critique"], &["rubric_failure", "high_stakes_review"])
}

fn default_repair() -> ClassRule {
    rule(
        &["rewrite", "repair"],
        &["retryable_error", "browser_drift", "payload_invalid"],
    )
}

fn default_verification() -> ClassRule {
    rule(
        &["verify"],
        &[
            "side_effect_attempted",
            "visibility_uncertain",
            "duplicate_risk",
        ],
    )
}

/// `[recursion.classes]`: each class's child types and triggers, the defaults those of
/// docs/governance.md#recursion-classes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecursionClasses {
    #[serde(default = "default_retrieval")]
    pub retrieval: ClassRule,
    #[serde(default = "default_critique")]
    pub critique: ClassRule,
    #[serde(default = "default_repair")]
    pub repair: ClassRule,
    #[serde(default = "default_verification")]
    pub verification: ClassRule,
}

impl Default for RecursionClasses {
    fn default() -> Self {
        Self {
            retrieval: default_retrieval(),
            critique: default_critique(),
            repair: default_repair(),
            verification: default_verification(),
        }
    }
}

impl RecursionClasses {
    /// Whether the section is as docket defines it (left out of the canonical form).
    #[must_use]
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The rule of `class`.
    #[must_use]
    pub fn rule(&self, class: RecursionClass) -> &ClassRule {
        match class {
            RecursionClass::Retrieval => &self.retrieval,
            RecursionClass::Critique => &self.critique,
            RecursionClass::Repair => &self.repair,
            RecursionClass::Verification => &self.verification,
        }
    }

    /// The class of `child_type`, if one lists it.
    #[must_use]
    pub fn class_of(&self, child_type: &str) -> Option<RecursionClass> {
        RecursionClass::ALL
            .into_iter()
            .find(|c| self.rule(*c).child_types.iter().any(|t| t == child_type))
    }
}

/// No child type is of two classes, and every class that has child types has triggers.
pub(crate) fn check(c: &mut Checker<'_>) {
    let classes = &c.spec.recursion.classes;
    let mut seen: BTreeMap<&str, RecursionClass> = BTreeMap::new();
    for class in RecursionClass::ALL {
        let r = classes.rule(class);
        let p = ptr!["recursion", "classes", class.as_str()];
        for (i, t) in r.child_types.iter().enumerate() {
            if let Some(prev) = seen.insert(t.as_str(), class) {
                c.push(
                    p.key("child_types").index(i),
                    Code::Duplicate,
                    format!(
                        "child type `{t}` is of both {} and {} recursion",
                        prev.as_str(),
                        class.as_str()
                    ),
                );
            }
        }
        if !r.child_types.is_empty() && r.triggers.is_empty() {
            c.push(
                p.key("triggers"),
                Code::InvalidValue,
                format!(
                    "{} recursion has child types but no trigger a spawn of them could name",
                    class.as_str()
                ),
            );
        }
    }
}

/// How a spawn stands with its class (docs/governance.md#recursion-classes).
#[derive(Debug, Clone, PartialEq)]
pub enum ClassDecision {
    /// The child type has no class: nothing to check.
    Unclassed,
    /// Of `class`, with a trigger it allows.
    Allowed(RecursionClass),
    /// Refused: no trigger, one the class does not allow, or repair before verification.
    Denied(PolicyDecision),
}

impl PolicyBundle {
    /// The class of a spawn of `child_type` naming `trigger`, from an episode that has
    /// `unverified_effects` side effects applied and not yet verified: a classed spawn
    /// must name one of its class's triggers, and repair waits until those effects are
    /// verified (verification first).
    #[must_use]
    pub fn decide_spawn_class(
        &self,
        child_type: &str,
        trigger: Option<&str>,
        unverified_effects: u32,
    ) -> ClassDecision {
        let classes = &self.spec.recursion.classes;
        let Some(class) = classes.class_of(child_type) else {
            return ClassDecision::Unclassed;
        };
        let rule_id = format!("recursion.classes.{}", class.as_str());
        let allowed = &classes.rule(class).triggers;
        let deny = |rule_id: &str, reason: String| {
            ClassDecision::Denied(PolicyDecision {
                kind: DecisionKind::Spawn,
                verdict: Verdict::Deny,
                rule_id: rule_id.into(),
                reason: reason.clone().into(),
                bundle_hash: self.hash(),
                chain: vec![RuleStep::new(rule_id, StepOutcome::Applied, reason)],
            })
        };
        let Some(trigger) = trigger else {
            return deny(
                &format!("{rule_id}.triggers"),
                format!(
                    "a `{child_type}` child is {} recursion: its spawn must name its trigger ({})",
                    class.as_str(),
                    allowed.join(", ")
                ),
            );
        };
        if !allowed.iter().any(|t| t == trigger) {
            return deny(
                &format!("{rule_id}.triggers"),
                format!(
                    "`{trigger}` is no trigger of {} recursion (a `{child_type}` child): it takes {}",
                    class.as_str(),
                    allowed.join(", ")
                ),
            );
        }
        if class == RecursionClass::Repair && unverified_effects > 0 {
            return deny(
                VERIFICATION_FIRST,
                format!(
                    "the episode applied {unverified_effects} side effect(s) not yet verified: verification comes before repair (spawn a {} child first)",
                    classes
                        .verification
                        .child_types
                        .first()
                        .map_or("verification", String::as_str)
                ),
            );
        }
        ClassDecision::Allowed(class)
    }

    /// The class of `child_type`, if the bundle gives it one.
    #[must_use]
    pub fn recursion_class(&self, child_type: &str) -> Option<RecursionClass> {
        self.spec.recursion.classes.class_of(child_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(extra: &str) -> Result<PolicyBundle, crate::BundleError> {
        PolicyBundle::from_toml_str(
            &format!("bundle = {{ id = \"c\" }}\nagents = [{{ id = \"a\" }}]\n{extra}"),
            "c.toml",
        )
    }

    #[test]
    fn the_defaults_keep_the_hash_and_class_the_well_known_types() {
        let plain = bundle("").expect("valid");
        let spelt = bundle("[recursion.classes.verification]\nchild_types = [\"verify\"]\ntriggers = [\"side_effect_attempted\", \"visibility_uncertain\", \"duplicate_risk\"]\n").expect("valid");
        assert_eq!(plain.hash(), spelt.hash());
        assert_eq!(
            plain.recursion_class("verify"),
            Some(RecursionClass::Verification)
        );
        assert_eq!(
            plain.recursion_class("rewrite"),
            Some(RecursionClass::Repair)
        );
        assert_eq!(plain.recursion_class("publish"), None);
    }

    #[test]
    fn a_classed_spawn_names_an_allowed_trigger_and_repair_waits_for_verification() {
        let b = bundle("").expect("valid");
        let denied = |d: ClassDecision| match d {
            ClassDecision::Denied(d) => (d.rule_id.to_string(), d.reason.to_string()),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            b.decide_spawn_class("publish", None, 3),
            ClassDecision::Unclassed
        );
        let (rule, reason) = denied(b.decide_spawn_class("verify", None, 0));
        assert_eq!(rule, "recursion.classes.verification.triggers");
        assert!(reason.contains("must name its trigger"), "{reason}");
        let (rule, reason) = denied(b.decide_spawn_class("verify", Some("rubric_failure"), 0));
        assert_eq!(rule, "recursion.classes.verification.triggers");
        assert!(
            reason.contains("`rubric_failure` is no trigger"),
            "{reason}"
        );
        assert_eq!(
            b.decide_spawn_class("verify", Some("side_effect_attempted"), 2),
            ClassDecision::Allowed(RecursionClass::Verification)
        );
        assert_eq!(
            b.decide_spawn_class("rewrite", Some("payload_invalid"), 0),
            ClassDecision::Allowed(RecursionClass::Repair)
        );
        let (rule, reason) = denied(b.decide_spawn_class("rewrite", Some("payload_invalid"), 1));
        assert_eq!(rule, VERIFICATION_FIRST);
        assert!(reason.contains("spawn a verify child first"), "{reason}");
    }

    #[test]
    fn a_type_of_two_classes_or_a_class_without_triggers_is_named() {
        let err = bundle("[recursion.classes.critique]\nchild_types = [\"verify\"]\ntriggers = [\"rubric_failure\"]\n")
            .expect_err("verify is of two classes")
            .to_string();
        assert!(
            err.contains("/recursion/classes/verification/child_types/0"),
            "{err}"
        );
        assert!(err.contains("child type `verify` is of both"), "{err}");
        let err = bundle("[recursion.classes.repair]\nchild_types = [\"fix\"]\n")
            .expect_err("no triggers")
            .to_string();
        assert!(
            err.contains("repair recursion has child types but no trigger"),
            "{err}"
        );
    }
}
