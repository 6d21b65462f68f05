//! Context parts (docs/governance.md#context-parts): what of the run, beyond the handoff's
//! own payload, reaches the agent a handoff calls. Four parts, after seed 001's: the
//! original input, prior outputs, observations (tool results) and agent identity (which
//! agents worked before). Set bundle-wide as `[multi_agent_handoffs.context_parts]` and
//! per handoff rule as its `context_parts`; each part comes from the first level that
//! sets it, in the precedence of the handoff rules (the exact pair, `FROM → *`, `* → TO`,
//! `* → *`), then the bundle-wide setting, then the built-in default, which is what docket
//! did before the setting existed. Blocked fields are removed whatever a part says.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::compiled::PolicyBundle;
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::model::BundleSpec;
use crate::rules::scope::HandoffMode;
use crate::validate::Checker;

/// The four context parts; each left out takes the next level's setting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextParts {
    /// The run's original input (`context.handoff.original_request`): `scoped` (as the
    /// pair's handoff rules scope it; the default), `full` (every field but blocked ones),
    /// or `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_input: Option<ContentPart>,
    /// Prior outputs as read-only context inputs (`prior:TYPE`): `required` (those the
    /// receiver's `requires_prior_outputs` names; the default), `all` (the latest outputs
    /// of every agent that delivered one), `none`, or a list of agents (theirs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_outputs: Option<PriorOutputs>,
    /// Observations: the results of the tools the receiver asks docket to run
    /// (`tool_result`): `scoped` (as the pair `tools → agent` scopes them; the default),
    /// `full` (every field but blocked ones), or `none` (the outcome's status without
    /// its `result`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observations: Option<ContentPart>,
    /// Which agents worked before (`context.handoff.prior_agents`): `show` (the default)
    /// or `hide`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_identity: Option<AgentIdentity>,
}

impl ContextParts {
    /// Nothing set.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// How much of a content part crosses.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ContentPart {
    /// As the pair's handoff rules scope it.
    #[default]
    Scoped,
    /// Every field but the blocked ones.
    Full,
    /// Nothing of it.
    None,
}

impl ContentPart {
    /// The scoping mode that replaces the pair's, if any (`full`).
    #[must_use]
    pub fn mode(self) -> Option<HandoffMode> {
        (self == Self::Full).then_some(HandoffMode::Full)
    }

    /// The word the bundle uses.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scoped => "scoped",
            Self::Full => "full",
            Self::None => "none",
        }
    }
}

/// Which prior outputs cross: a keyword or the agents whose outputs do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum PriorOutputs {
    /// `required`, `all` or `none`.
    Which(PriorOutputsWhich),
    /// These agents' latest outputs only.
    Agents(Vec<String>),
}

impl Default for PriorOutputs {
    fn default() -> Self {
        Self::Which(PriorOutputsWhich::Required)
    }
}

impl PriorOutputs {
    /// Whether `agent`'s outputs cross, given the receiver's required ones.
    #[must_use]
    pub fn admits(&self, agent: &str, required: &[String]) -> bool {
        match self {
            Self::Which(PriorOutputsWhich::Required) => required.iter().any(|r| r == agent),
            Self::Which(PriorOutputsWhich::All) => true,
            Self::Which(PriorOutputsWhich::None) => false,
            Self::Agents(list) => list.iter().any(|a| a == agent),
        }
    }

    /// As the bundle writes it.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Which(PriorOutputsWhich::Required) => "required".to_owned(),
            Self::Which(PriorOutputsWhich::All) => "all".to_owned(),
            Self::Which(PriorOutputsWhich::None) => "none".to_owned(),
            Self::Agents(list) => format!("[{}]", list.join(", ")),
        }
    }
}

/// The keywords of [`PriorOutputs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PriorOutputsWhich {
    /// Those the receiver's `context_requirements.requires_prior_outputs` names.
    Required,
    /// Every agent's latest outputs.
    All,
    /// None.
    None,
}

/// Whether the receiver is told which agents worked before.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AgentIdentity {
    #[default]
    Show,
    Hide,
}

/// One part as decided for a pair, with the rule that set it (`default` when none did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartSetting<T> {
    pub value: T,
    pub rule_id: String,
}

/// The context parts decided for the receiver of a handoff `from → to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextPartsDecision {
    pub original_input: PartSetting<ContentPart>,
    pub prior_outputs: PartSetting<PriorOutputs>,
    pub observations: PartSetting<ContentPart>,
    pub agent_identity: PartSetting<AgentIdentity>,
}

impl ContextPartsDecision {
    /// Each part that differs from the built-in default, as `(part, value, rule)`: what an
    /// audit records.
    #[must_use]
    pub fn departures(&self) -> Vec<(&'static str, String, &str)> {
        let mut out = Vec::new();
        if self.original_input.value != ContentPart::Scoped {
            out.push((
                "original_input",
                self.original_input.value.as_str().to_owned(),
                self.original_input.rule_id.as_str(),
            ));
        }
        if self.prior_outputs.value != PriorOutputs::default() {
            out.push((
                "prior_outputs",
                self.prior_outputs.value.describe(),
                self.prior_outputs.rule_id.as_str(),
            ));
        }
        if self.observations.value != ContentPart::Scoped {
            out.push((
                "observations",
                self.observations.value.as_str().to_owned(),
                self.observations.rule_id.as_str(),
            ));
        }
        if self.agent_identity.value != AgentIdentity::Show {
            out.push((
                "agent_identity",
                "hide".to_owned(),
                self.agent_identity.rule_id.as_str(),
            ));
        }
        out
    }
}

/// The rule id a bundle-wide setting is named by.
pub const BUNDLE_CONTEXT_PARTS: &str = "multi_agent_handoffs.context_parts";

impl PolicyBundle {
    /// The context parts for the receiver of `from → to`: each from the first handoff rule
    /// (exact pair, `FROM → *`, `* → TO`, `* → *`) that sets it, else the bundle-wide
    /// setting, else the default.
    #[must_use]
    pub fn decide_context_parts(&self, from: &str, to: &str) -> ContextPartsDecision {
        let h = &self.spec.multi_agent_handoffs;
        let mut levels: Vec<(String, &ContextParts)> = Vec::new();
        for key in [(from, to), (from, "*"), ("*", to), ("*", "*")] {
            let idx = self
                .handoff_rules
                .get(&(key.0.to_owned(), key.1.to_owned()));
            if let Some(r) = idx.and_then(|i| h.agent_handoff_rules.get(*i))
                && let Some(parts) = &r.context_parts
            {
                levels.push((r.id.clone(), parts));
            }
        }
        levels.push((BUNDLE_CONTEXT_PARTS.to_owned(), &h.context_parts));
        fn first<T: Clone + Default>(
            levels: &[(String, &ContextParts)],
            get: impl Fn(&ContextParts) -> Option<&T>,
        ) -> PartSetting<T> {
            levels
                .iter()
                .find_map(|(id, p)| {
                    get(p).map(|v| PartSetting {
                        value: v.clone(),
                        rule_id: id.clone(),
                    })
                })
                .unwrap_or_else(|| PartSetting {
                    value: T::default(),
                    rule_id: "default".to_owned(),
                })
        }
        ContextPartsDecision {
            original_input: first(&levels, |p| p.original_input.as_ref()),
            prior_outputs: first(&levels, |p| p.prior_outputs.as_ref()),
            observations: first(&levels, |p| p.observations.as_ref()),
            agent_identity: first(&levels, |p| p.agent_identity.as_ref()),
        }
    }
}

/// The bundle-wide setting and every rule's: agents named in a prior-outputs list exist,
/// a list is not empty, and no setting contradicts itself or a receiver's requirements.
pub(crate) fn check(c: &mut Checker<'_>) {
    let spec = c.spec;
    let h = &spec.multi_agent_handoffs;
    let required = Required::new(spec);
    check_parts(
        c,
        spec,
        &required,
        &ptr!["multi_agent_handoffs", "context_parts"],
        &h.context_parts,
        "*",
    );
    for (i, r) in h.agent_handoff_rules.iter().enumerate() {
        if let Some(parts) = &r.context_parts {
            let p = ptr![
                "multi_agent_handoffs",
                "agent_handoff_rules",
                i,
                "context_parts"
            ];
            check_parts(c, spec, &required, &p, parts, &r.to_agent_id);
        }
    }
}

/// The registry's prior-output requirements, indexed both ways.
struct Required<'a> {
    /// Agent positions by id.
    by_id: BTreeMap<&'a str, Vec<usize>>,
    /// The positions of the agents that require each agent's outputs.
    by_output: BTreeMap<&'a str, Vec<usize>>,
}

impl<'a> Required<'a> {
    fn new(spec: &'a BundleSpec) -> Self {
        let mut out = Self {
            by_id: BTreeMap::new(),
            by_output: BTreeMap::new(),
        };
        for (i, a) in spec.agents.iter().enumerate() {
            out.by_id.entry(a.id.as_str()).or_default().push(i);
            for r in a
                .context_requirements
                .iter()
                .flat_map(|c| &c.requires_prior_outputs)
            {
                out.by_output.entry(r.as_str()).or_default().push(i);
            }
        }
        out
    }
}

/// One setting at `p`, which applies to handoffs into `to` (`*`: any agent).
fn check_parts(
    c: &mut Checker<'_>,
    spec: &BundleSpec,
    required: &Required<'_>,
    p: &Pointer,
    parts: &ContextParts,
    to: &str,
) {
    let Some(prior) = &parts.prior_outputs else {
        return;
    };
    let at = p.key("prior_outputs");
    if let PriorOutputs::Agents(list) = prior {
        if list.is_empty() {
            c.push(
                at.clone(),
                Code::Contradiction,
                "an empty list passes no prior outputs: write \"none\"",
            );
        }
        for (j, agent) in list.iter().enumerate() {
            c.agent_ref(at.index(j), agent, false);
        }
    }
    // A receiver that requires prior outputs this setting hides could never get them.
    let shown: Option<BTreeSet<&str>> = match prior {
        // Every required output crosses.
        PriorOutputs::Which(PriorOutputsWhich::Required | PriorOutputsWhich::All) => {
            return check_identity(c, p, parts, prior);
        }
        PriorOutputs::Which(PriorOutputsWhich::None) => None,
        PriorOutputs::Agents(list) => Some(list.iter().map(String::as_str).collect()),
    };
    let hides = |r: &str| shown.as_ref().is_none_or(|s| !s.contains(r));
    // The receivers concerned, in the registry's order: the one named, or (for `*`) each
    // that requires an output this setting hides, found from the outputs' side so that
    // the work follows what is hidden rather than every receiver.
    let receivers: BTreeSet<usize> = if to == "*" {
        required
            .by_output
            .iter()
            .filter(|(output, _)| hides(output))
            .flat_map(|(_, receivers)| receivers.iter().copied())
            .collect()
    } else {
        required
            .by_id
            .get(to)
            .into_iter()
            .flatten()
            .copied()
            .collect()
    };
    for a in receivers.into_iter().filter_map(|i| spec.agents.get(i)) {
        let hidden: Vec<&str> = a
            .context_requirements
            .as_ref()
            .map_or(&[][..], |r| r.requires_prior_outputs.as_slice())
            .iter()
            .map(String::as_str)
            .filter(|r| hides(r))
            .collect();
        if !hidden.is_empty() {
            c.push(
                at.clone(),
                Code::Contradiction,
                format!(
                    "prior_outputs = {} hides the outputs of {} that agent `{}` requires \
                     (agents.{}.context_requirements.requires_prior_outputs)",
                    prior.describe(),
                    hidden.join(", "),
                    a.id,
                    a.id
                ),
            );
        }
    }
    check_identity(c, p, parts, prior);
}

/// `agent_identity = "hide"` cannot go with a setting whose prior outputs name agents.
fn check_identity(c: &mut Checker<'_>, p: &Pointer, parts: &ContextParts, prior: &PriorOutputs) {
    let names_agents = matches!(
        prior,
        PriorOutputs::Which(PriorOutputsWhich::All) | PriorOutputs::Agents(_)
    );
    if parts.agent_identity == Some(AgentIdentity::Hide) && names_agents {
        c.push(
            p.key("agent_identity"),
            Code::Contradiction,
            format!(
                "agent_identity = \"hide\" contradicts prior_outputs = {}: each prior output \
                 names the agent that produced it",
                prior.describe()
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
bundle = { id = "parts" }
agents = [
  { id = "external" }, { id = "orch" }, { id = "a" },
  { id = "b", context_requirements = { requires_prior_outputs = ["a"] } },
]
[interactions]
allowed = [{ from = "external", to = "orch" }, { from = "orch", to = "a" }, { from = "a", to = "b" }, { from = "b", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

    fn bundle(extra: &str) -> Result<PolicyBundle, String> {
        PolicyBundle::from_toml_str(&format!("{BASE}{extra}"), "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn parts_come_from_the_first_level_that_sets_them() {
        let b = bundle(
            r#"
[multi_agent_handoffs.context_parts]
agent_identity = "hide"
original_input = "none"
[[multi_agent_handoffs.agent_handoff_rules]]
id = "orch-to-a"
from_agent_id = "orch"
to_agent_id = "a"
context_parts = { original_input = "full", prior_outputs = "none" }
"#,
        )
        .expect("valid");
        let d = b.decide_context_parts("orch", "a");
        assert_eq!(
            (d.original_input.value, d.original_input.rule_id.as_str()),
            (ContentPart::Full, "orch-to-a")
        );
        assert_eq!(
            d.prior_outputs.value,
            PriorOutputs::Which(PriorOutputsWhich::None)
        );
        assert_eq!(
            (d.agent_identity.value, d.agent_identity.rule_id.as_str()),
            (AgentIdentity::Hide, BUNDLE_CONTEXT_PARTS)
        );
        assert_eq!(
            (d.observations.value, d.observations.rule_id.as_str()),
            (ContentPart::Scoped, "default")
        );
        // Another pair only sees the bundle-wide setting.
        let d = b.decide_context_parts("a", "b");
        assert_eq!(d.original_input.value, ContentPart::None);
        assert_eq!(d.departures().len(), 2);
        // No setting: today's behaviour, nothing departs.
        let plain = bundle("").expect("valid");
        assert!(
            plain
                .decide_context_parts("orch", "a")
                .departures()
                .is_empty()
        );
    }

    #[test]
    fn unknown_agents_empty_lists_and_contradictions_are_errors_naming_the_key() {
        let err = bundle(
            r#"
[[multi_agent_handoffs.agent_handoff_rules]]
id = "orch-to-a"
from_agent_id = "orch"
to_agent_id = "a"
context_parts = { prior_outputs = ["orch", "nobody"] }
"#,
        )
        .expect_err("unknown agent");
        assert!(
            err.contains(
                "/multi_agent_handoffs/agent_handoff_rules/0/context_parts/prior_outputs/1"
            ) && err.contains("unknown agent `nobody`"),
            "{err}"
        );
        let err = bundle("[multi_agent_handoffs.context_parts]\nprior_outputs = []\n")
            .expect_err("empty list");
        assert!(
            err.contains("/multi_agent_handoffs/context_parts/prior_outputs")
                && err.contains("none"),
            "{err}"
        );
        // b requires a's outputs: a bundle-wide `none` hides them from it.
        let err = bundle("[multi_agent_handoffs.context_parts]\nprior_outputs = \"none\"\n")
            .expect_err("contradiction");
        assert!(
            err.contains("/multi_agent_handoffs/context_parts/prior_outputs")
                && err.contains("agent `b` requires"),
            "{err}"
        );
        let err = bundle(
            "[multi_agent_handoffs.context_parts]\nprior_outputs = \"all\"\nagent_identity = \"hide\"\n",
        )
        .expect_err("contradiction");
        assert!(
            err.contains("/multi_agent_handoffs/context_parts/agent_identity"),
            "{err}"
        );
        let err = bundle("[multi_agent_handoffs.context_parts]\nobservations = \"some\"\n")
            .expect_err("unknown value");
        assert!(
            err.contains("observations") || err.contains("some"),
            "{err}"
        );
    }
}
