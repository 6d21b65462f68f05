//! Handoff rules as data (docs/governance.md#handoff-rules-as-data): a bundle's
//! `multi_agent_handoffs.agent_handoff_rules` listed in the shape the governance API uses,
//! the rules that decide one agent pair with the decision they give, and a replacement of
//! the whole list that is checked like any bundle before it becomes a new bundle.
//!
//! Nothing here stores anything: a replacement returns the new bundle and its source text;
//! recording it as a version is the runtime's (`_bundles`, docs/governance.md#bundle-versions).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::BundleHash;
use crate::compiled::PolicyBundle;
use crate::decision::PolicyDecision;
use crate::diff::{BundleDiff, diff};
use crate::error::{BundleError, DiagnosticCode};
use crate::parse::{Format, parse};
use crate::rules::handoff::{HandoffDecision, InputKind};
use crate::rules::scope::{AdmissionProblem, ContextRequirements, HandoffMode, HandoffRule};

/// Where the rules live in a bundle, as a JSON pointer.
const RULES_POINTER: &str = "/multi_agent_handoffs/agent_handoff_rules/";

/// A bundle's handoff rules (`GET /api/governance/handoff-rules`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffRuleSet {
    /// The bundle's name (`bundle.id`).
    pub bundle: String,
    /// The hash of the bundle the rules are read from.
    pub hash: BundleHash,
    /// The mode of a pair no rule sets one for (read-only here).
    pub default_handoff_mode: HandoffMode,
    /// Fields removed on every handoff, whatever the rules say (read-only here).
    pub blocked_context_fields: Vec<String>,
    /// The per-pair rules, by id.
    pub rules: Vec<HandoffRule>,
}

/// At which precedence level a rule matches a pair (highest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precedence {
    /// `FROM → TO`.
    Pair,
    /// `FROM → *`.
    FromAgent,
    /// `* → TO`.
    ToAgent,
    /// `* → *`.
    AnyPair,
}

/// One rule matching a pair, and what it decides for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchedRule {
    pub precedence: Precedence,
    /// The settings this rule decides for the pair (`handoff_mode`,
    /// `allowed_context_fields`, `conversation_translation`: the first matching level that
    /// sets each wins; `blocked_context_fields` of every matching level apply).
    pub decides: Vec<String>,
    pub rule: HandoffRule,
}

/// The rules deciding one pair (`GET /api/governance/handoff-rules/{from}/{to}`), with the
/// decision `docket policy explain` gives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairRules {
    pub from_agent_id: String,
    pub to_agent_id: String,
    /// Matching rules, highest precedence first.
    pub rules: Vec<MatchedRule>,
    /// The receiving agent's own `context_requirements`, the level below every rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver_defaults: Option<ContextRequirements>,
    /// The mode the pair's handoffs are scoped in.
    pub handoff_mode: HandoffMode,
    /// The rule (or setting) that sets that mode.
    pub governing_rule_id: String,
    /// May `from` hand work to `to` (the interaction matrix), with its rule chain.
    pub handoff: HandoffDecision,
    /// How context crossing it is scoped: the chain of levels consulted.
    pub scoping: PolicyDecision,
}

/// One problem with a replacement, naming the rule (by its place in the list given, from
/// 1, and its id) and the field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleProblem {
    /// Place of the rule in the list given, from 1 (`None`: not about one rule).
    pub rule: Option<usize>,
    /// The rule's id, when it has one.
    pub rule_id: Option<String>,
    /// The field, e.g. `allowed_context_fields[0]` (`None`: the rule as a whole).
    pub field: Option<String>,
    pub code: DiagnosticCode,
    pub message: String,
}

impl fmt::Display for RuleProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.rule, &self.rule_id) {
            (Some(n), Some(id)) => write!(f, "rule {n} (`{id}`)")?,
            (Some(n), None) => write!(f, "rule {n}")?,
            (None, _) => f.write_str("handoff rules")?,
        }
        if let Some(field) = &self.field {
            write!(f, ", field `{field}`")?;
        }
        write!(f, ": {}: {}", self.code, self.message)
    }
}

/// Why a request about handoff rules cannot be answered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RulesError {
    /// An agent the bundle does not declare.
    #[error("the bundle {bundle} declares no agent `{agent}` ({side}); its agents: {known}")]
    UnknownAgent {
        bundle: String,
        /// `from` or `to`.
        side: &'static str,
        agent: String,
        known: String,
    },
    /// The replacement is not a list of rules.
    #[error("handoff rules must be a JSON list of rules (or an object with `rules`), got {got}")]
    NotAList { got: &'static str },
    /// The replacement breaks the bundle's rules; every problem is listed.
    #[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Refused { problems: Vec<RuleProblem> },
}

/// A checked replacement of a bundle's handoff rules.
#[derive(Debug)]
pub struct Replacement {
    /// The new bundle.
    pub bundle: PolicyBundle,
    /// Its source text (JSON), to record.
    pub source: String,
    /// What changed, per agent pair and per rule (`docket policy diff`).
    pub diff: BundleDiff,
}

impl PolicyBundle {
    /// The bundle's handoff rules, in the governance API's shape.
    #[must_use]
    pub fn handoff_rule_set(&self) -> HandoffRuleSet {
        let h = &self.spec.multi_agent_handoffs;
        HandoffRuleSet {
            bundle: self.spec.bundle.id.clone(),
            hash: self.hash,
            default_handoff_mode: h.default_handoff_mode,
            blocked_context_fields: h.blocked_context_fields.clone(),
            rules: h.agent_handoff_rules.clone(),
        }
    }

    /// The rules deciding `from → to`, highest precedence first, with the handoff decision
    /// and the scoping chain `docket policy explain` prints.
    ///
    /// # Errors
    /// [`RulesError::UnknownAgent`] when either agent is not declared.
    pub fn pair_rules(&self, from: &str, to: &str) -> Result<PairRules, RulesError> {
        for (side, agent) in [("from", from), ("to", to)] {
            let source = side == "from" && crate::rules::scope::is_content_source(agent);
            if self.agent(agent).is_none() && !source {
                return Err(RulesError::UnknownAgent {
                    bundle: self.spec.bundle.id.clone(),
                    side,
                    agent: agent.to_owned(),
                    known: self.agent_ids().collect::<Vec<_>>().join(", "),
                });
            }
        }
        let all = &self.spec.multi_agent_handoffs.agent_handoff_rules;
        let mut rules: Vec<MatchedRule> = Vec::new();
        for (precedence, key) in [
            (Precedence::Pair, (from, to)),
            (Precedence::FromAgent, (from, "*")),
            (Precedence::ToAgent, ("*", to)),
            (Precedence::AnyPair, ("*", "*")),
        ] {
            let found = self
                .handoff_rules
                .get(&(key.0.to_owned(), key.1.to_owned()))
                .and_then(|i| all.get(*i));
            if let Some(r) = found {
                let mut decides = Vec::new();
                let first = |pick: fn(&HandoffRule) -> bool| {
                    !rules.iter().any(|m: &MatchedRule| pick(&m.rule))
                };
                if r.handoff_mode.is_some() && first(|r| r.handoff_mode.is_some()) {
                    decides.push("handoff_mode".to_owned());
                }
                if r.allowed_context_fields.is_some()
                    && first(|r| r.allowed_context_fields.is_some())
                {
                    decides.push("allowed_context_fields".to_owned());
                }
                if r.conversation_translation.is_some()
                    && first(|r| r.conversation_translation.is_some())
                {
                    decides.push("conversation_translation".to_owned());
                }
                if !r.blocked_context_fields.is_empty() {
                    decides.push("blocked_context_fields".to_owned());
                }
                rules.push(MatchedRule {
                    precedence,
                    decides,
                    rule: r.clone(),
                });
            }
        }
        let receiver_defaults = self
            .agent(to)
            .and_then(|i| self.spec.agents.get(i))
            .and_then(|a| a.context_requirements.clone());
        let handoff = self.decide_handoff(from, to, InputKind::Decision);
        // Scoping an empty payload walks every level without depending on content.
        let scoped = self.scope_authorised(
            from,
            to,
            &Value::Object(serde_json::Map::new()),
            &handoff.decision,
        );
        Ok(PairRules {
            from_agent_id: from.to_owned(),
            to_agent_id: to.to_owned(),
            rules,
            receiver_defaults,
            handoff_mode: scoped.audit.handoff_mode,
            governing_rule_id: scoped.audit.governance_rule_id.to_string(),
            handoff,
            scoping: scoped.decision,
        })
    }

    /// This bundle with its handoff rules replaced by `rules` (a JSON list in the API's
    /// shape, or the object [`Self::handoff_rule_set`] returns), checked as any bundle is
    /// and refused for what new runs would refuse. A rule without an `id` gets
    /// `handoff:FROM->TO`. The new bundle's source is JSON, named `name`.
    ///
    /// # Errors
    /// [`RulesError::NotAList`], or [`RulesError::Refused`] with every problem, each
    /// naming the rule and field.
    pub fn replace_handoff_rules(
        &self,
        rules: &Value,
        name: &str,
    ) -> Result<Replacement, RulesError> {
        let list = match rules {
            Value::Array(list) => list,
            Value::Object(o) => match o.get("rules") {
                Some(Value::Array(list)) => {
                    self.read_only_settings_kept(o)?;
                    list
                }
                _ => {
                    return Err(RulesError::NotAList {
                        got: "an object without `rules`",
                    });
                }
            },
            other => {
                return Err(RulesError::NotAList {
                    got: json_kind(other),
                });
            }
        };
        let mut parsed = Vec::with_capacity(list.len());
        // The place in `list` of each rule of `parsed`.
        let mut places = Vec::with_capacity(list.len());
        let mut problems = Vec::new();
        for (i, raw) in list.iter().enumerate() {
            let mut raw = raw.clone();
            if let Value::Object(o) = &mut raw
                && !o.contains_key("id")
                && let (Some(Value::String(f)), Some(Value::String(t))) =
                    (o.get("from_agent_id"), o.get("to_agent_id"))
            {
                let id = format!("handoff:{f}->{t}");
                o.insert("id".to_owned(), Value::String(id));
            }
            let id = raw.get("id").and_then(Value::as_str).map(str::to_owned);
            match serde_path_to_error::deserialize::<_, HandoffRule>(raw) {
                Ok(rule) => {
                    parsed.push(rule);
                    places.push(i);
                }
                Err(e) => {
                    let path = e.path().to_string();
                    problems.push(RuleProblem {
                        rule: Some(i + 1),
                        rule_id: id,
                        field: (path != ".").then_some(path),
                        code: DiagnosticCode::Shape,
                        message: e.into_inner().to_string(),
                    });
                }
            }
        }
        // The well-shaped rules are checked too, so that one answer lists every problem.
        let ids: Vec<(usize, String)> = places
            .iter()
            .zip(&parsed)
            .map(|(i, r)| (*i, r.id.clone()))
            .collect();
        let mut spec = self.spec.clone();
        spec.multi_agent_handoffs.agent_handoff_rules = parsed;
        let refuse = |mut found: Vec<RuleProblem>, mut shape: Vec<RuleProblem>| {
            shape.append(&mut found);
            shape.sort_by_key(|p| p.rule.unwrap_or(0));
            RulesError::Refused { problems: shape }
        };
        let source = serde_json::to_string_pretty(&spec).map_err(|e| {
            refuse(
                vec![whole(DiagnosticCode::Shape, e.to_string())],
                problems.clone(),
            )
        })?;
        let bundle = match parse(&source, name, Format::Json) {
            Ok(bundle) => bundle,
            Err(e) => return Err(refuse(located(&e, &ids), problems)),
        };
        let refused: Vec<RuleProblem> = bundle
            .admission_problems()
            .iter()
            .map(|p| admission(p, &ids))
            .collect();
        if !refused.is_empty() || !problems.is_empty() {
            return Err(refuse(refused, problems));
        }
        let diff = diff(self, &bundle);
        Ok(Replacement {
            bundle,
            source,
            diff,
        })
    }

    /// The listing's read-only settings, sent back with `rules`, must be the bundle's own:
    /// a replacement changes the rules only.
    fn read_only_settings_kept(
        &self,
        o: &serde_json::Map<String, Value>,
    ) -> Result<(), RulesError> {
        let h = &self.spec.multi_agent_handoffs;
        let own = [
            (
                "default_handoff_mode",
                serde_json::to_value(h.default_handoff_mode).unwrap_or(Value::Null),
            ),
            (
                "blocked_context_fields",
                serde_json::to_value(&h.blocked_context_fields).unwrap_or(Value::Null),
            ),
        ];
        let problems: Vec<RuleProblem> = own
            .into_iter()
            .filter(|(key, value)| o.get(*key).is_some_and(|v| v != value))
            .map(|(key, value)| RuleProblem {
                rule: None,
                rule_id: None,
                field: Some(key.to_owned()),
                code: DiagnosticCode::InvalidValue,
                message: format!(
                    "a replacement changes the rules only; `{key}` is the bundle's ({value}): \
                     change it in the bundle file and register that"
                ),
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(RulesError::Refused { problems })
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn whole(code: DiagnosticCode, message: String) -> RuleProblem {
    RuleProblem {
        rule: None,
        rule_id: None,
        field: None,
        code,
        message,
    }
}

/// Each diagnostic of the new bundle, named by rule and field when it points into the rules.
/// `ids`: each checked rule's place in the list given, and its id.
fn located(e: &BundleError, ids: &[(usize, String)]) -> Vec<RuleProblem> {
    e.diagnostics()
        .into_iter()
        .map(|d| {
            let Some(rest) = d.pointer.strip_prefix(RULES_POINTER) else {
                let field = (!d.pointer.is_empty()).then(|| d.pointer.clone());
                return RuleProblem {
                    field,
                    ..whole(d.code, d.message)
                };
            };
            let mut segments = rest.split('/');
            let checked = segments
                .next()
                .and_then(|s| s.parse::<usize>().ok())
                .and_then(|i| ids.get(i));
            let mut field = String::new();
            for s in segments {
                if s.parse::<usize>().is_ok() {
                    field.push_str(&format!("[{s}]"));
                } else {
                    if !field.is_empty() {
                        field.push('.');
                    }
                    field.push_str(&s.replace("~1", "/").replace("~0", "~"));
                }
            }
            RuleProblem {
                rule: checked.map(|(i, _)| i + 1),
                rule_id: checked.map(|(_, id)| id.clone()),
                field: (!field.is_empty()).then_some(field),
                code: d.code,
                message: d.message,
            }
        })
        .collect()
}

/// What new runs would refuse, named by the rule it comes from.
fn admission(p: &AdmissionProblem, ids: &[(usize, String)]) -> RuleProblem {
    let (found, field) = match p {
        AdmissionProblem::EmptyScope(e) => (
            ids.iter().find(|(_, id)| *id == e.rule_id),
            "allowed_context_fields",
        ),
        AdmissionProblem::AuditOff { setting } => (
            ids.iter()
                .find(|(_, id)| setting.contains(&format!("`{id}`"))),
            "audit_enabled",
        ),
    };
    RuleProblem {
        rule: found.map(|(i, _)| i + 1),
        rule_id: found.map(|(_, id)| id.clone()),
        field: found.map(|_| field.to_owned()),
        code: DiagnosticCode::Contradiction,
        message: p.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::decision::Verdict;
    use crate::diff::RuleChangeKind;

    const BUNDLE: &str = r#"
bundle = { id = "claims" }
agents = [{ id = "external" }, { id = "intake" }, { id = "fraud" }, { id = "recommendation" }]
[interactions]
allowed = [
  { from = "external", to = "intake" },
  { from = "intake", to = "fraud" },
  { from = "fraud", to = "recommendation" },
]
[multi_agent_handoffs]
default_handoff_mode = "full"
blocked_context_fields = ["ssn"]
[[multi_agent_handoffs.agent_handoff_rules]]
id = "fraud-to-recommendation"
from_agent_id = "fraud"
to_agent_id = "recommendation"
handoff_mode = "scoped"
allowed_context_fields = ["fraud_score", "risk_level"]
[[multi_agent_handoffs.agent_handoff_rules]]
id = "fraud-to-any"
from_agent_id = "fraud"
to_agent_id = "*"
handoff_mode = "minimal"
blocked_context_fields = ["internal_notes"]
[[multi_agent_handoffs.agent_handoff_rules]]
id = "any-to-recommendation"
from_agent_id = "*"
to_agent_id = "recommendation"
conversation_translation = { summarize = true, max_tokens = 100 }
"#;

    fn bundle() -> PolicyBundle {
        PolicyBundle::from_toml_str(BUNDLE, "claims.toml").expect("valid")
    }

    fn rules_json(b: &PolicyBundle) -> Value {
        serde_json::to_value(b.handoff_rule_set()).expect("JSON")
    }

    #[test]
    fn the_listing_is_the_seed_shape_and_replacing_with_it_changes_nothing() {
        let b = bundle();
        let listed = rules_json(&b);
        assert_eq!(listed["bundle"], "claims");
        assert_eq!(listed["default_handoff_mode"], "full");
        assert_eq!(listed["blocked_context_fields"], json!(["ssn"]));
        let first = &listed["rules"][0];
        assert_eq!(first["id"], "any-to-recommendation");
        assert_eq!(first["from_agent_id"], "*");
        assert_eq!(first["audit_enabled"], true);
        // The listing (or its list) sent back is the same bundle: same hash, no diff.
        for sent in [listed.clone(), listed["rules"].clone()] {
            let r = b
                .replace_handoff_rules(&sent, "claims@2.json")
                .expect("valid");
            assert_eq!(r.bundle.hash(), b.hash());
            assert!(r.diff.is_empty(), "{:?}", r.diff);
        }
    }

    #[test]
    fn a_pair_lists_its_rules_by_precedence_with_what_each_decides() {
        let b = bundle();
        let p = b
            .pair_rules("fraud", "recommendation")
            .expect("known agents");
        let got: Vec<(Precedence, &str, Vec<&str>)> = p
            .rules
            .iter()
            .map(|m| {
                (
                    m.precedence,
                    m.rule.id.as_str(),
                    m.decides.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    Precedence::Pair,
                    "fraud-to-recommendation",
                    vec!["handoff_mode", "allowed_context_fields"]
                ),
                (
                    Precedence::FromAgent,
                    "fraud-to-any",
                    vec!["blocked_context_fields"]
                ),
                (
                    Precedence::ToAgent,
                    "any-to-recommendation",
                    vec!["conversation_translation"]
                ),
            ]
        );
        assert_eq!(p.handoff_mode, HandoffMode::Scoped);
        assert_eq!(p.governing_rule_id, "fraud-to-recommendation");
        assert_eq!(p.handoff.decision.verdict, Verdict::Allow);
        // The same decision `policy explain` gives.
        assert_eq!(
            p.handoff,
            b.decide_handoff("fraud", "recommendation", InputKind::Decision)
        );
        // A pair no rule names: the default mode governs; a pair the matrix forbids.
        let p = b.pair_rules("intake", "fraud").expect("known agents");
        assert!(p.rules.is_empty());
        assert_eq!(
            p.governing_rule_id,
            "multi_agent_handoffs.default_handoff_mode"
        );
        let p = b
            .pair_rules("recommendation", "intake")
            .expect("known agents");
        assert_eq!(p.handoff.decision.verdict, Verdict::Deny);
        let e = b.pair_rules("fraud", "nobody").unwrap_err();
        assert!(e.to_string().contains("no agent `nobody` (to)"), "{e}");
        // A person sends content without being an agent; it never receives any.
        let p = b
            .pair_rules("human", "intake")
            .expect("a sender that is no agent");
        assert_eq!(p.from_agent_id, "human");
        let e = b.pair_rules("intake", "human").unwrap_err();
        assert!(e.to_string().contains("no agent `human` (to)"), "{e}");
    }

    #[test]
    fn a_replacement_is_checked_and_diffed_and_every_problem_names_its_rule_and_field() {
        let b = bundle();
        // Tighten: recommendation gets the score only; a rule without an id gets one.
        let tightened = json!([
            {"id": "fraud-to-recommendation", "from_agent_id": "fraud", "to_agent_id": "recommendation",
             "handoff_mode": "scoped", "allowed_context_fields": ["fraud_score"]},
            {"from_agent_id": "intake", "to_agent_id": "*", "handoff_mode": "full"}
        ]);
        let r = b
            .replace_handoff_rules(&tightened, "claims@2.json")
            .expect("valid");
        assert_ne!(r.bundle.hash(), b.hash());
        let changes: Vec<(&str, RuleChangeKind)> = r
            .diff
            .rules
            .iter()
            .map(|c| (c.id.as_str(), c.change))
            .collect();
        assert_eq!(
            changes,
            [
                ("any-to-recommendation", RuleChangeKind::Removed),
                ("fraud-to-any", RuleChangeKind::Removed),
                ("fraud-to-recommendation", RuleChangeKind::Changed),
                ("handoff:intake->*", RuleChangeKind::Added),
            ]
        );
        // The rest of the bundle is untouched: the new source parses to the same agents.
        assert_eq!(
            r.bundle.agent_ids().collect::<Vec<_>>(),
            b.agent_ids().collect::<Vec<_>>()
        );

        let bad = json!([
            {"from_agent_id": "fraud", "to_agent_id": "recommendation", "handoff_mode": "partial"},
            {"id": "r2", "from_agent_id": "fraud", "to_agent_id": "recommendation",
             "blocked_context_fields": ["a..b"]},
            {"id": "r3", "from_agent_id": "intake", "to_agent_id": "fraud", "audit_enabled": false},
        ]);
        let Err(RulesError::Refused { problems }) = b.replace_handoff_rules(&bad, "x.json") else {
            panic!("refused");
        };
        let got: Vec<(Option<usize>, Option<&str>, Option<&str>)> = problems
            .iter()
            .map(|p| (p.rule, p.rule_id.as_deref(), p.field.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    Some(1),
                    Some("handoff:fraud->recommendation"),
                    Some("handoff_mode")
                ),
                (Some(2), Some("r2"), Some("blocked_context_fields[0]")),
            ],
            "{problems:#?}"
        );
        // Valid, but new runs would refuse it: audit off, and a scoped pair passing nothing.
        let refused = json!([
            {"id": "r3", "from_agent_id": "intake", "to_agent_id": "fraud", "audit_enabled": false},
            {"id": "r4", "from_agent_id": "fraud", "to_agent_id": "recommendation", "handoff_mode": "scoped"},
        ]);
        let Err(RulesError::Refused { problems }) = b.replace_handoff_rules(&refused, "x.json")
        else {
            panic!("refused");
        };
        let got: Vec<(Option<&str>, Option<&str>)> = problems
            .iter()
            .map(|p| (p.rule_id.as_deref(), p.field.as_deref()))
            .collect();
        assert!(
            got.contains(&(Some("r3"), Some("audit_enabled"))),
            "{got:?}"
        );
        assert!(
            got.contains(&(Some("r4"), Some("allowed_context_fields"))),
            "{got:?}"
        );
        // Read-only settings sent back changed, and what is not a list.
        let mut listed = rules_json(&b);
        listed["default_handoff_mode"] = json!("minimal");
        let e = b.replace_handoff_rules(&listed, "x.json").unwrap_err();
        assert!(e.to_string().contains("`default_handoff_mode`"), "{e}");
        let e = b.replace_handoff_rules(&json!(3), "x.json").unwrap_err();
        assert!(e.to_string().contains("got a number"), "{e}");
    }
}
