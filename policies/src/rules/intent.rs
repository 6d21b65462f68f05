//! Intent classification as a contract (docs/governance.md#intent-classification),
//! `[intent_classification]`: the agent that answers the user's request (the
//! orchestrator) says what it understood (the primary intent, its confidence, the agent
//! and capability it maps to, any secondary intents and their targets), and docket holds
//! the answer to it: the routing must match the classification and name agents the
//! bundle lets it route to; below the confidence threshold the agent must not route but
//! ask a clarifying question.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::ptr;
use crate::rules::handoff::InputKind;
use crate::validate::Checker;

/// The default `confidence_threshold`: below 0.7 the classifying agent asks.
pub const DEFAULT_CONFIDENCE_THRESHOLD: f64 = 0.7;

/// The rule that requires a classification of every answer to the user's request.
pub const INTENT_REQUIRED_RULE: &str = "intent_classification.required";
/// The rule on the agents and capabilities a classification names.
pub const INTENT_TARGETS_RULE: &str = "intent_classification.targets";
/// The rule that each secondary intent names its target.
pub const INTENT_SECONDARY_RULE: &str = "intent_classification.secondary_targets";
/// The rule that below the threshold the agent asks instead of routing.
pub const INTENT_THRESHOLD_RULE: &str = "intent_classification.confidence_threshold";
/// The rule that the answer routes where the classification says.
pub const INTENT_ROUTING_RULE: &str = "intent_classification.routing";

/// `[intent_classification]`: which agent classifies the user's intent, and how its
/// classification is held to its routing (docs/governance.md#intent-classification).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntentClassificationPolicy {
    /// The agent that classifies the user's intent and routes it (the orchestrator). Its
    /// answers to the run's input must carry an `intent` classification.
    pub agent: String,
    /// Below this confidence (0 to 1) the agent must not route but ask a clarifying
    /// question (default 0.7).
    #[serde(default = "default_confidence_threshold")]
    pub confidence_threshold: f64,
    /// Whether every secondary intent must name its target agent (default true).
    #[serde(default = "default_true")]
    pub secondary_targets_required: bool,
}

fn default_confidence_threshold() -> f64 {
    DEFAULT_CONFIDENCE_THRESHOLD
}

fn default_true() -> bool {
    true
}

/// The classifying agent is a declared agent other than the run's caller; the threshold
/// is a number from 0 to 1.
pub(crate) fn check(c: &mut Checker<'_>) {
    let Some(policy) = &c.spec.intent_classification else {
        return;
    };
    let (agent, threshold) = (policy.agent.clone(), policy.confidence_threshold);
    if agent == "external" {
        c.push(
            ptr!["intent_classification", "agent"],
            Code::InvalidValue,
            "`external` is the run's caller and is never called: name the agent that answers its request (the orchestrator)",
        );
    } else {
        c.agent_ref(ptr!["intent_classification", "agent"], &agent, false);
    }
    if !(0.0..=1.0).contains(&threshold) {
        c.push(
            ptr!["intent_classification", "confidence_threshold"],
            Code::InvalidValue,
            format!(
                "confidence_threshold must be from 0 to 1 (a confidence is a fraction), not {threshold}"
            ),
        );
    }
}

/// Where a classification routes: an agent, and the capability it maps the intent to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntentTarget<'a> {
    pub agent: &'a str,
    pub capability: Option<&'a str>,
}

/// A classification, as the classifying agent gave it (the protocol's `intent`).
#[derive(Debug, Clone, PartialEq)]
pub struct IntentClaim<'a> {
    pub primary_intent: &'a str,
    pub confidence: f64,
    pub target: Option<IntentTarget<'a>>,
    pub secondary_intents: Vec<&'a str>,
    pub secondary_targets: Vec<IntentTarget<'a>>,
}

/// What the answer carrying a classification does: the agents it routes work to (its
/// handoffs to agents, with no capability; its capability requests, with the code), and
/// whether it ends with a question to a person.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IntentAnswer<'a> {
    pub routes: Vec<IntentTarget<'a>>,
    pub asks: bool,
}

impl PolicyBundle {
    /// The bundle's `[intent_classification]`, when it has one.
    #[must_use]
    pub fn intent_classification(&self) -> Option<&IntentClassificationPolicy> {
        self.spec.intent_classification.as_ref()
    }

    /// The classifying agent's answer to the user's request, held to its classification
    /// (docs/governance.md#intent-classification): a classification is given; the agents
    /// and capabilities it names exist and the classifier may hand work to each agent;
    /// each secondary intent names its target (when required); below the threshold the
    /// answer routes nowhere and asks a question; at or above it, it routes to the
    /// primary target and to no agent the classification does not name, or, naming no
    /// target, routes nowhere (a limitation acknowledged). `None` when the bundle has no
    /// `[intent_classification]`.
    #[must_use]
    pub fn decide_intent(
        &self,
        classifier: &str,
        claim: Option<&IntentClaim<'_>>,
        answer: &IntentAnswer<'_>,
    ) -> Option<PolicyDecision> {
        let policy = self.intent_classification()?;
        let threshold = policy.confidence_threshold;
        let mut chain = Vec::new();
        let deny = |rule: &str, reason: String, mut chain: Vec<RuleStep>| {
            chain.push(RuleStep::new(rule, StepOutcome::Applied, reason.clone()));
            conclude(
                DecisionKind::IntentClassification,
                Verdict::Deny,
                self.hash,
                rule,
                reason,
                chain,
            )
        };
        let Some(claim) = claim else {
            return Some(deny(
                INTENT_REQUIRED_RULE,
                format!(
                    "{classifier} answered the user's request without classifying its intent (`intent`)"
                ),
                chain,
            ));
        };
        chain.push(RuleStep::new(
            INTENT_REQUIRED_RULE,
            StepOutcome::Applied,
            format!(
                "`{}` at confidence {}",
                claim.primary_intent, claim.confidence
            ),
        ));
        // The targets named: the primary's, then the secondary intents'.
        let named = claim.target.iter().chain(&claim.secondary_targets);
        for target in named.clone() {
            if let Some(problem) = self.intent_target_problem(classifier, target) {
                return Some(deny(INTENT_TARGETS_RULE, problem, chain));
            }
        }
        chain.push(RuleStep::new(
            INTENT_TARGETS_RULE,
            StepOutcome::Applied,
            "every agent named is declared, has the capability named and may be routed to",
        ));
        let (intents, targets) = (claim.secondary_intents.len(), claim.secondary_targets.len());
        if policy.secondary_targets_required && targets < intents {
            return Some(deny(
                INTENT_SECONDARY_RULE,
                format!(
                    "{intents} secondary intent(s) name {targets} target(s): each secondary intent must name its target agent"
                ),
                chain,
            ));
        }
        chain.push(RuleStep::new(
            INTENT_SECONDARY_RULE,
            if intents == 0 || !policy.secondary_targets_required {
                StepOutcome::NotApplicable
            } else {
                StepOutcome::Applied
            },
            format!("{intents} secondary intent(s), {targets} target(s)"),
        ));
        let routed: Vec<&str> = answer.routes.iter().map(|r| r.agent).collect();
        if claim.confidence < threshold {
            let reason = if !routed.is_empty() {
                Some(format!(
                    "{classifier} routes to {} at confidence {}, below the threshold {threshold}: below it, it must ask a clarifying question instead",
                    routed.join(", "),
                    claim.confidence
                ))
            } else if !answer.asks {
                Some(format!(
                    "{classifier}'s confidence {} is below the threshold {threshold} and it asks no clarifying question",
                    claim.confidence
                ))
            } else {
                None
            };
            if let Some(reason) = reason {
                return Some(deny(INTENT_THRESHOLD_RULE, reason, chain));
            }
            let reason = format!(
                "{classifier}'s confidence {} is below the threshold {threshold}: it asks a clarifying question",
                claim.confidence
            );
            chain.push(RuleStep::new(
                INTENT_THRESHOLD_RULE,
                StepOutcome::Applied,
                reason.clone(),
            ));
            return Some(conclude(
                DecisionKind::IntentClassification,
                Verdict::Allow,
                self.hash,
                INTENT_THRESHOLD_RULE,
                reason,
                chain,
            ));
        }
        chain.push(RuleStep::new(
            INTENT_THRESHOLD_RULE,
            StepOutcome::NotApplicable,
            format!(
                "confidence {} is at or above the threshold {threshold}",
                claim.confidence
            ),
        ));
        if let Some(problem) = routing_problem(classifier, claim, answer) {
            return Some(deny(INTENT_ROUTING_RULE, problem, chain));
        }
        let reason = match (&claim.target, routed.is_empty()) {
            (Some(target), false) => format!(
                "{classifier} routes `{}` (confidence {}, threshold {threshold}) to {}",
                claim.primary_intent, claim.confidence, target.agent
            ),
            (Some(_), true) => format!(
                "{classifier} asks the user before routing `{}`",
                claim.primary_intent
            ),
            (None, _) => format!(
                "{classifier} names no target for `{}` and routes nowhere: a limitation acknowledged",
                claim.primary_intent
            ),
        };
        chain.push(RuleStep::new(
            INTENT_ROUTING_RULE,
            StepOutcome::Applied,
            reason.clone(),
        ));
        Some(conclude(
            DecisionKind::IntentClassification,
            Verdict::Allow,
            self.hash,
            INTENT_ROUTING_RULE,
            reason,
            chain,
        ))
    }

    /// What is wrong with a target a classification names, if anything: an agent the
    /// registry does not declare, a capability it does not register, an agent the
    /// classifier may not hand work to.
    fn intent_target_problem(&self, classifier: &str, target: &IntentTarget<'_>) -> Option<String> {
        let Some(spec) = self
            .agent(target.agent)
            .and_then(|i| self.spec.agents.get(i))
        else {
            return Some(format!(
                "the classification names agent `{}`, which the agent registry does not declare",
                target.agent
            ));
        };
        if let Some(code) = target.capability
            && !spec.capabilities.iter().any(|c| c.code == code)
        {
            return Some(format!(
                "the classification names capability `{code}` of {}, which registers no such capability",
                target.agent
            ));
        }
        let handoff = self.decide_handoff(classifier, target.agent, InputKind::Decision);
        (!handoff.decision.is_allowed()).then(|| {
            format!(
                "the classification names {}, and {classifier} may not hand work to it (rule {}: {})",
                target.agent, handoff.decision.rule_id, handoff.decision.reason
            )
        })
    }
}

/// At or above the threshold: how the answer's routing departs from the classification,
/// if it does.
fn routing_problem(
    classifier: &str,
    claim: &IntentClaim<'_>,
    answer: &IntentAnswer<'_>,
) -> Option<String> {
    let Some(target) = &claim.target else {
        return answer.routes.first().map(|r| {
            format!(
                "{classifier} routes to {} but its classification names no target agent",
                r.agent
            )
        });
    };
    if answer.routes.is_empty() {
        return (!answer.asks).then(|| {
            format!(
                "{classifier} classifies `{}` for {} but neither routes to it nor asks the user",
                claim.primary_intent, target.agent
            )
        });
    }
    if !answer.routes.iter().any(|r| r.agent == target.agent) {
        return Some(format!(
            "{classifier} classifies `{}` for {} but routes to {} instead",
            claim.primary_intent,
            target.agent,
            answer
                .routes
                .iter()
                .map(|r| r.agent)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let named = std::iter::once(target).chain(&claim.secondary_targets);
    for route in &answer.routes {
        let mut same_agent = named.clone().filter(|t| t.agent == route.agent).peekable();
        if same_agent.peek().is_none() {
            return Some(format!(
                "{classifier} routes to {}, which its classification does not name",
                route.agent
            ));
        }
        // A capability request must ask for a capability the classification names for
        // that agent (when it names one).
        if let Some(code) = route.capability
            && !same_agent.any(|t| t.capability.is_none_or(|c| c == code))
        {
            return Some(format!(
                "{classifier} asks {} for `{code}`, which its classification does not name for it",
                route.agent
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
bundle = { id = "i" }
[[agents]]
id = "external"
[[agents]]
id = "ORC"
[[agents]]
id = "CST"
capabilities = [{ code = "CST_FRAMEWORK" }]
[[agents]]
id = "DOC"
capabilities = [{ code = "DOC_GENERATE" }]
[[agents]]
id = "AUD"
[interactions]
allowed = [
  { from = "external", to = "ORC" },
  { from = "ORC", to = "CST" },
  { from = "ORC", to = "DOC" },
]
"#;

    fn bundle(section: &str) -> PolicyBundle {
        PolicyBundle::from_toml_str(&format!("{BASE}{section}"), "i.toml")
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn orc() -> PolicyBundle {
        bundle("[intent_classification]\nagent = \"ORC\"\n")
    }

    fn claim(confidence: f64) -> IntentClaim<'static> {
        IntentClaim {
            primary_intent: "business_case",
            confidence,
            target: Some(IntentTarget {
                agent: "CST",
                capability: Some("CST_FRAMEWORK"),
            }),
            secondary_intents: Vec::new(),
            secondary_targets: Vec::new(),
        }
    }

    fn routes(agents: &[&'static str]) -> IntentAnswer<'static> {
        IntentAnswer {
            routes: agents
                .iter()
                .map(|a| IntentTarget {
                    agent: a,
                    capability: None,
                })
                .collect(),
            asks: false,
        }
    }

    fn asks() -> IntentAnswer<'static> {
        IntentAnswer {
            routes: Vec::new(),
            asks: true,
        }
    }

    fn decide(
        b: &PolicyBundle,
        claim: Option<&IntentClaim<'_>>,
        a: &IntentAnswer<'_>,
    ) -> PolicyDecision {
        b.decide_intent("ORC", claim, a)
            .expect("the bundle has the section")
    }

    #[test]
    fn the_section_parses_with_its_defaults_and_is_left_out_of_the_hash_when_absent() {
        let b = orc();
        let p = b.intent_classification().expect("declared");
        assert_eq!(p.agent, "ORC");
        assert!((p.confidence_threshold - DEFAULT_CONFIDENCE_THRESHOLD).abs() < f64::EPSILON);
        assert!(p.secondary_targets_required);
        // Spelling the defaults out is the same bundle.
        let spelled = bundle(
            "[intent_classification]\nagent = \"ORC\"\nconfidence_threshold = 0.7\nsecondary_targets_required = true\n",
        );
        assert_eq!(spelled.hash(), b.hash());
        // Without the section: no decision, and the canonical form has no trace of it.
        let without = bundle("");
        assert!(without.intent_classification().is_none());
        assert_eq!(without.decide_intent("ORC", None, &routes(&["CST"])), None);
        let text = String::from_utf8(without.canonical_bytes()).expect("utf-8");
        assert!(!text.contains("intent_classification"), "{text}");
        assert_ne!(without.hash(), b.hash());
    }

    #[test]
    fn bad_values_are_refused_naming_the_field() {
        for (section, field, words) in [
            ("agent = \"NOBODY\"", "agent", "unknown agent `NOBODY`"),
            (
                "agent = \"external\"",
                "agent",
                "`external` is the run's caller",
            ),
            (
                "agent = \"ORC\"\nconfidence_threshold = 1.5",
                "confidence_threshold",
                "from 0 to 1",
            ),
            (
                "agent = \"ORC\"\nconfidence_threshold = -0.1",
                "confidence_threshold",
                "from 0 to 1",
            ),
            ("confidence_threshold = 0.5", "agent", "agent"),
            ("agent = \"ORC\"\nthreshold = 0.5", "threshold", "threshold"),
        ] {
            let err = PolicyBundle::from_toml_str(
                &format!("{BASE}[intent_classification]\n{section}\n"),
                "i.toml",
            )
            .expect_err(section)
            .to_string();
            assert!(
                err.contains(field) && err.contains(words),
                "{section}: {err}"
            );
        }
    }

    #[test]
    fn a_routing_at_or_above_the_threshold_to_the_named_target_is_allowed() {
        let b = orc();
        for confidence in [0.7, 0.85, 1.0] {
            let d = decide(&b, Some(&claim(confidence)), &routes(&["CST"]));
            assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
            assert_eq!(&*d.rule_id, INTENT_ROUTING_RULE);
            assert_eq!(d.kind, DecisionKind::IntentClassification);
        }
    }

    #[test]
    fn a_routing_below_the_threshold_is_refused_naming_the_threshold() {
        let d = decide(&orc(), Some(&claim(0.4)), &routes(&["CST"]));
        assert_eq!(d.verdict, Verdict::Deny);
        assert_eq!(&*d.rule_id, INTENT_THRESHOLD_RULE);
        assert!(
            d.reason.contains("0.4") && d.reason.contains("threshold 0.7"),
            "{}",
            d.reason
        );
        // Neither routing nor asking is refused too; asking is what is allowed.
        let d = decide(&orc(), Some(&claim(0.4)), &IntentAnswer::default());
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, INTENT_THRESHOLD_RULE)
        );
        let d = decide(&orc(), Some(&claim(0.4)), &asks());
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Allow, INTENT_THRESHOLD_RULE)
        );
        // The bundle's threshold decides.
        let strict =
            bundle("[intent_classification]\nagent = \"ORC\"\nconfidence_threshold = 0.9\n");
        let d = decide(&strict, Some(&claim(0.85)), &routes(&["CST"]));
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, INTENT_THRESHOLD_RULE)
        );
    }

    #[test]
    fn a_missing_classification_is_refused() {
        let d = decide(&orc(), None, &routes(&["CST"]));
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, INTENT_REQUIRED_RULE)
        );
    }

    #[test]
    fn targets_must_exist_have_the_capability_and_be_reachable() {
        let b = orc();
        for (agent, capability, words) in [
            ("NOBODY", None, "does not declare"),
            ("CST", Some("CST_NOPE"), "registers no such capability"),
            ("AUD", None, "may not hand work to it (rule deny_by_default"),
        ] {
            let mut c = claim(0.9);
            c.target = Some(IntentTarget { agent, capability });
            let d = decide(&b, Some(&c), &routes(&[agent]));
            assert_eq!(
                (d.verdict, &*d.rule_id),
                (Verdict::Deny, INTENT_TARGETS_RULE)
            );
            assert!(d.reason.contains(words), "{}", d.reason);
        }
    }

    #[test]
    fn the_routing_must_match_the_classification() {
        let b = orc();
        // Routed elsewhere than the primary target.
        let d = decide(&b, Some(&claim(0.9)), &routes(&["DOC"]));
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, INTENT_ROUTING_RULE)
        );
        // Routed also to an agent the classification does not name.
        let d = decide(&b, Some(&claim(0.9)), &routes(&["CST", "DOC"]));
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, INTENT_ROUTING_RULE)
        );
        // ...which a secondary target names: allowed.
        let mut c = claim(0.9);
        c.secondary_intents = vec!["document_generation"];
        c.secondary_targets = vec![IntentTarget {
            agent: "DOC",
            capability: Some("DOC_GENERATE"),
        }];
        assert!(decide(&b, Some(&c), &routes(&["CST", "DOC"])).is_allowed());
        // A capability request for another capability than the one named.
        let asked = IntentAnswer {
            routes: vec![IntentTarget {
                agent: "CST",
                capability: Some("OTHER"),
            }],
            asks: false,
        };
        let d = decide(&b, Some(&claim(0.9)), &asked);
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, INTENT_ROUTING_RULE)
        );
        // No target, no routing: a limitation acknowledged; no target but a routing: refused.
        let mut none = claim(0.9);
        none.target = None;
        assert!(decide(&b, Some(&none), &IntentAnswer::default()).is_allowed());
        let d = decide(&b, Some(&none), &routes(&["CST"]));
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, INTENT_ROUTING_RULE)
        );
    }

    #[test]
    fn secondary_intents_name_their_targets_when_required() {
        let mut c = claim(0.9);
        c.secondary_intents = vec!["document_generation"];
        let d = decide(&orc(), Some(&c), &routes(&["CST"]));
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, INTENT_SECONDARY_RULE)
        );
        let lax = bundle(
            "[intent_classification]\nagent = \"ORC\"\nsecondary_targets_required = false\n",
        );
        assert!(decide(&lax, Some(&c), &routes(&["CST"])).is_allowed());
        // A secondary target is checked like the primary one.
        c.secondary_targets = vec![IntentTarget {
            agent: "AUD",
            capability: None,
        }];
        let d = decide(&orc(), Some(&c), &routes(&["CST"]));
        assert_eq!(
            (d.verdict, &*d.rule_id),
            (Verdict::Deny, INTENT_TARGETS_RULE)
        );
    }
}
