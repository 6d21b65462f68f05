//! The interaction matrix (docs/governance.md#interaction-matrix), the `[interactions]`
//! section: may `from` hand off to `to`? Explicit forbidden edges first, then allowed edges,
//! then what the flow order forbids (skip, reverse, circular: `flow.rs`), then deny by
//! default. Read-only context edges (Guardrail 2) are a separate kind of input that never
//! counts as a decision input. A pair is decided when asked, from indexes of the matrix built
//! once per bundle (a bundle of n agents has n² pairs, far more than it has edges).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::{BundleHash, sort_dedup};
use crate::compiled::{AgentIndex, PolicyBundle};
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::locate::{Pointer, ptr};
use crate::model::BundleSpec;
use crate::rules::flow::{self, FlowIndex, FlowRelation};
use crate::validate::Checker;

/// The rule id of a pair that no edge allows and nothing forbids.
pub const DENY_BY_DEFAULT: &str = "deny_by_default";

/// The interaction matrix (docs/governance.md#interaction-matrix).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InteractionMatrix {
    /// Declared flow order; an agent may appear more than once (e.g. a checkpoint at entry
    /// and exit). Skip, reverse and circular handoffs are derived from it as forbidden.
    #[serde(default)]
    pub flow_order: Vec<String>,
    /// The run follows `flow_order` one position at a time: from each position only the
    /// next agent of the order, so an agent listed twice (a checkpoint at entry and exit)
    /// has one way out at each of its positions
    /// (docs/governance.md#sequential-flow). Left out of the canonical form when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sequential_flow: bool,
    #[serde(default)]
    pub allowed: Vec<AllowedEdge>,
    /// Read-only, non-decisive context edges (Guardrail 2).
    #[serde(default)]
    pub context: Vec<ContextEdge>,
    #[serde(default)]
    pub forbidden: Vec<ForbiddenEdge>,
    /// Whether an agent's PARTIAL answer may cross an allowed edge, unless the edge says
    /// otherwise (`accept_partial`): seed 000's pipeline refuses partial outputs, seed 003
    /// allows them (docs/governance.md#partial-outputs). Left out of the canonical form
    /// at its default, `accept`.
    #[serde(default, skip_serializing_if = "PartialOutputs::is_default")]
    pub partial_outputs: PartialOutputs,
}

/// Whether PARTIAL answers cross the interaction matrix's allowed edges.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PartialOutputs {
    /// A PARTIAL answer's handoffs go on like a SUCCESS's.
    #[default]
    Accept,
    /// A PARTIAL answer whose handoff crosses the edge fails the answering agent
    /// (`PARTIAL_OUTPUT_REFUSED`).
    Refuse,
}

impl PartialOutputs {
    #[must_use]
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// A decisive handoff that is allowed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllowedEdge {
    /// Defaults to `allow:FROM->TO`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub from: String,
    pub to: String,
    /// `id` or `id@version` of an output type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// Whether a PARTIAL answer may cross this edge; unset, the matrix's
    /// `partial_outputs` decides (docs/governance.md#partial-outputs). Left out of the
    /// canonical form when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_partial: Option<bool>,
}

/// A read-only context edge: the receiver may consult, never decide from, this input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextEdge {
    /// Defaults to `context:FROM->TO`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub from: String,
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_type: Option<String>,
    /// What the receiver may use it for (e.g. impact estimation).
    #[serde(default)]
    pub permitted_uses: Vec<String>,
}

/// A forbidden handoff with its reason; `*` matches any agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForbiddenEdge {
    /// Defaults to `forbid:FROM->TO`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub from: String,
    pub to: String,
    pub reason: String,
}

/// An edge's explicit id, or the one derived from its kind and pair.
pub fn edge_id(id: &Option<String>, kind: &str, from: &str, to: &str) -> String {
    id.clone().unwrap_or_else(|| format!("{kind}:{from}->{to}"))
}

/// The matrix's checks: every agent and output type it names is declared, no pair is
/// listed twice, no allowed edge is also forbidden or contradicts the flow order, and
/// every forbidden edge says why.
pub(crate) fn check(c: &mut Checker<'_>) {
    let spec = c.spec;
    let m = &spec.interactions;
    for (i, a) in m.flow_order.iter().enumerate() {
        c.agent_ref(ptr!["interactions", "flow_order", i], a, false);
    }
    if m.sequential_flow {
        flow::check_sequential(c, m);
    }
    let flow_index = FlowIndex::new(&m.flow_order);
    // The first forbidden edge of each pattern pair, for the allowed edges' contradictions.
    let mut forbidding: BTreeMap<(&str, &str), (usize, &ForbiddenEdge)> = BTreeMap::new();
    for (j, f) in m.forbidden.iter().enumerate() {
        forbidding
            .entry((f.from.as_str(), f.to.as_str()))
            .or_insert((j, f));
    }
    let mut decisive = BTreeSet::new();
    for (i, e) in m.allowed.iter().enumerate() {
        let p = ptr!["interactions", "allowed", i];
        c.agent_ref(p.key("from"), &e.from, false);
        c.agent_ref(p.key("to"), &e.to, false);
        if let Some(t) = &e.output_type {
            c.output_type_ref(p.key("output_type"), t);
        }
        if !decisive.insert((e.from.as_str(), e.to.as_str())) {
            c.push(
                p.clone(),
                Code::Duplicate,
                format!("edge {} → {} is allowed twice", e.from, e.to),
            );
        }
        flow::check_allowed_edge(c, &p, &m.flow_order, &flow_index, e);
        let patterns = [
            (e.from.as_str(), e.to.as_str()),
            (e.from.as_str(), "*"),
            ("*", e.to.as_str()),
            ("*", "*"),
        ];
        if let Some(&(j, f)) = patterns
            .iter()
            .filter_map(|k| forbidding.get(k))
            .min_by_key(|(j, _)| *j)
        {
            c.push(
                p.clone(),
                Code::Contradiction,
                format!("edge {} → {} is both allowed and forbidden (by /interactions/forbidden/{j}: {})", e.from, e.to, f.reason),
            );
        }
    }
    let mut context = BTreeSet::new();
    for (i, e) in m.context.iter().enumerate() {
        let p = ptr!["interactions", "context", i];
        c.agent_ref(p.key("from"), &e.from, false);
        c.agent_ref(p.key("to"), &e.to, false);
        if let Some(t) = &e.output_type {
            c.output_type_ref(p.key("output_type"), t);
        }
        if !context.insert((e.from.as_str(), e.to.as_str())) {
            c.push(
                p.clone(),
                Code::Duplicate,
                format!("context edge {} → {} is declared twice", e.from, e.to),
            );
        }
        if decisive.contains(&(e.from.as_str(), e.to.as_str())) {
            c.push(
                p.clone(),
                Code::Contradiction,
                format!(
                    "{} → {} is declared both decisive (allowed) and read-only context",
                    e.from, e.to
                ),
            );
        }
    }
    let mut forbidden = BTreeSet::new();
    for (i, e) in m.forbidden.iter().enumerate() {
        let p = ptr!["interactions", "forbidden", i];
        c.agent_ref(p.key("from"), &e.from, true);
        c.agent_ref(p.key("to"), &e.to, true);
        if !forbidden.insert((e.from.as_str(), e.to.as_str())) {
            c.push(
                p.clone(),
                Code::Duplicate,
                format!("edge {} → {} is forbidden twice", e.from, e.to),
            );
        }
        if e.reason.trim().is_empty() {
            c.push(
                p.key("reason"),
                Code::InvalidValue,
                "a forbidden edge needs a reason",
            );
        }
    }
}
/// The matrix's rule ids: every edge's, explicit or derived.
pub(crate) fn rule_ids(spec: &BundleSpec, ids: &mut Vec<(String, Pointer)>) {
    let m = &spec.interactions;
    ids.extend(m.allowed.iter().enumerate().map(|(i, e)| {
        (
            edge_id(&e.id, "allow", &e.from, &e.to),
            ptr!["interactions", "allowed", i],
        )
    }));
    ids.extend(m.context.iter().enumerate().map(|(i, e)| {
        (
            edge_id(&e.id, "context", &e.from, &e.to),
            ptr!["interactions", "context", i],
        )
    }));
    ids.extend(m.forbidden.iter().enumerate().map(|(i, e)| {
        (
            edge_id(&e.id, "forbid", &e.from, &e.to),
            ptr!["interactions", "forbidden", i],
        )
    }));
}

/// Normal form: every edge carries its id (derived when not written), edges are sorted by
/// id, a context edge's uses are sorted; `flow_order` keeps its order (the order is the rule).
pub(crate) fn normalize(s: &mut BundleSpec) {
    let m = &mut s.interactions;
    for e in &mut m.allowed {
        e.id = Some(edge_id(&e.id, "allow", &e.from, &e.to));
    }
    for e in &mut m.context {
        e.id = Some(edge_id(&e.id, "context", &e.from, &e.to));
        sort_dedup(&mut e.permitted_uses);
    }
    for e in &mut m.forbidden {
        e.id = Some(edge_id(&e.id, "forbid", &e.from, &e.to));
    }
    m.allowed.sort_by(|a, b| a.id.cmp(&b.id));
    m.context.sort_by(|a, b| a.id.cmp(&b.id));
    m.forbidden.sort_by(|a, b| a.id.cmp(&b.id));
}

/// Whether the receiver may decide from the handed-off input, or only consult it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// Used for prioritisation, ranking, decisions (e.g. Reasoning → Strategy).
    Decision,
    /// Read-only, non-decisive reference (e.g. Intelligence → Strategy).
    Context,
}

/// A handoff decision, with the edge's output type when one is declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffDecision {
    pub decision: PolicyDecision,
    pub input: InputKind,
    pub output_type: Option<Arc<str>>,
    pub flow: FlowRelation,
}

/// The matrix indexed by agent position (agents in canonical order), so that deciding a
/// pair is a few lookups: its allowed and context edge, the forbidden edges that cover it
/// (exact, then `from → *`, `* → to`, `* → *`), and where each agent stands in the flow
/// order. Built in time linear in the matrix (times a logarithm), whatever the number of
/// pairs.
pub(crate) struct Verdicts {
    /// Allowed edge by (from, to), into `interactions.allowed`.
    allowed: BTreeMap<(usize, usize), usize>,
    /// Context edge by (from, to), into `interactions.context`.
    context: BTreeMap<(usize, usize), usize>,
    /// Forbidden edge by (from, to) pattern, `None` for `*`, into `interactions.forbidden`.
    forbidden: BTreeMap<(Option<usize>, Option<usize>), usize>,
    flow: FlowIndex,
}

impl Verdicts {
    pub(crate) fn compile(spec: &BundleSpec, index: &AgentIndex) -> Self {
        let m = &spec.interactions;
        let at = |id: &str| index.get(id).copied();
        let pattern = |id: &str| {
            if id == "*" {
                Some(None)
            } else {
                at(id).map(Some)
            }
        };
        let mut allowed = BTreeMap::new();
        for (i, e) in m.allowed.iter().enumerate() {
            if let (Some(f), Some(t)) = (at(&e.from), at(&e.to)) {
                allowed.entry((f, t)).or_insert(i);
            }
        }
        let mut context = BTreeMap::new();
        for (i, e) in m.context.iter().enumerate() {
            if let (Some(f), Some(t)) = (at(&e.from), at(&e.to)) {
                context.entry((f, t)).or_insert(i);
            }
        }
        let mut forbidden = BTreeMap::new();
        for (i, e) in m.forbidden.iter().enumerate() {
            if let (Some(f), Some(t)) = (pattern(&e.from), pattern(&e.to)) {
                forbidden.entry((f, t)).or_insert(i);
            }
        }
        Self {
            allowed,
            context,
            forbidden,
            flow: FlowIndex::new(&m.flow_order),
        }
    }
}

/// Decides one pair from the (normalised) spec; used to fill the compiled table.
fn compute(
    spec: &BundleSpec,
    hash: BundleHash,
    verdicts: &Verdicts,
    (f, t): (usize, usize),
    (from, to): (&str, &str),
    input: InputKind,
) -> HandoffDecision {
    let m = &spec.interactions;
    let rel = verdicts.flow.relation(&m.flow_order, from, to);
    let mut chain = Vec::new();
    let done = |verdict, rule_id: String, reason: String, chain, output_type: Option<&String>| {
        HandoffDecision {
            decision: conclude(DecisionKind::Handoff, verdict, hash, rule_id, reason, chain),
            input,
            output_type: output_type.map(|s| Arc::from(s.as_str())),
            flow: rel.clone(),
        }
    };
    if input == InputKind::Context {
        if let Some(e) = verdicts
            .context
            .get(&(f, t))
            .and_then(|&i| m.context.get(i))
        {
            let id = edge_id(&e.id, "context", from, to);
            let uses = if e.permitted_uses.is_empty() {
                String::new()
            } else {
                format!(" (may be used for: {})", e.permitted_uses.join(", "))
            };
            let reason = format!(
                "{from} → {to} is read-only context: non-decisive, {to} must not derive priorities, rankings or decisions from it{uses}"
            );
            chain.push(RuleStep::new(
                id.as_str(),
                StepOutcome::Applied,
                "read-only context edge",
            ));
            return done(Verdict::Allow, id, reason, chain, e.output_type.as_ref());
        }
        chain.push(RuleStep::new(
            "interactions.context",
            StepOutcome::NotApplicable,
            format!("no context edge {from} → {to}"),
        ));
    }
    // Exact forbidden edges first, then wildcards: the most specific reason wins.
    let forbidden: Vec<&ForbiddenEdge> = [
        (Some(f), Some(t)),
        (Some(f), None),
        (None, Some(t)),
        (None, None),
    ]
    .iter()
    .filter_map(|k| verdicts.forbidden.get(k).and_then(|&i| m.forbidden.get(i)))
    .collect();
    if let Some(f) = forbidden.first() {
        let id = edge_id(&f.id, "forbid", &f.from, &f.to);
        chain.push(RuleStep::new(
            id.as_str(),
            StepOutcome::Applied,
            "forbidden edge",
        ));
        for other in forbidden.iter().skip(1) {
            chain.push(RuleStep::new(
                edge_id(&other.id, "forbid", &other.from, &other.to),
                StepOutcome::Overridden,
                "less specific forbidden edge",
            ));
        }
        return done(Verdict::Deny, id, f.reason.clone(), chain, None);
    }
    chain.push(RuleStep::new(
        "interactions.forbidden",
        StepOutcome::NotApplicable,
        format!("no forbidden edge matches {from} → {to}"),
    ));
    if let Some(e) = verdicts
        .allowed
        .get(&(f, t))
        .and_then(|&i| m.allowed.get(i))
    {
        let id = edge_id(&e.id, "allow", from, to);
        let trigger = e
            .trigger
            .as_deref()
            .map(|t| format!(" when: {t}"))
            .unwrap_or_default();
        let carries = e
            .output_type
            .as_deref()
            .map(|t| format!(", carrying {t}"))
            .unwrap_or_default();
        chain.push(RuleStep::new(
            id.as_str(),
            StepOutcome::Applied,
            "allowed edge",
        ));
        let what = if input == InputKind::Context {
            "allowed decisive edge (context included)"
        } else {
            "allowed"
        };
        return done(
            Verdict::Allow,
            id,
            format!("{from} → {to} {what}{carries}{trigger}"),
            chain,
            e.output_type.as_ref(),
        );
    }
    chain.push(RuleStep::new(
        "interactions.allowed",
        StepOutcome::NotApplicable,
        format!("no allowed edge {from} → {to}"),
    ));
    if let Some(reason) = flow::reason(&rel, from, to) {
        let id = match rel {
            FlowRelation::Skip { .. } => "flow_order.skip",
            FlowRelation::Circular => "flow_order.circular",
            _ => "flow_order.reverse",
        };
        chain.push(RuleStep::new(
            id,
            StepOutcome::Applied,
            "derived from the declared flow order",
        ));
        return done(Verdict::Deny, id.to_owned(), reason, chain, None);
    }
    chain.push(RuleStep::new(
        DENY_BY_DEFAULT,
        StepOutcome::Applied,
        "every pair not allowed is denied",
    ));
    done(
        Verdict::Deny,
        DENY_BY_DEFAULT.to_owned(),
        format!("no allowed edge from {from} to {to} (deny by default)"),
        chain,
        None,
    )
}

impl PolicyBundle {
    /// The rule that refuses a PARTIAL answer's handoff from `from` to `to`, if any: the
    /// allowed edge's own `accept_partial = false`, else `interactions.partial_outputs =
    /// "refuse"` (docs/governance.md#partial-outputs). `None`: the answer may cross.
    #[must_use]
    pub fn partial_refused_by(&self, from: &str, to: &str) -> Option<String> {
        let m = &self.spec.interactions;
        let edge = m.allowed.iter().find(|e| e.from == from && e.to == to);
        match edge.and_then(|e| e.accept_partial.map(|a| (e, a))) {
            Some((_, true)) => None,
            Some((e, false)) => Some(edge_id(&e.id, "allow", &e.from, &e.to)),
            None => (m.partial_outputs == PartialOutputs::Refuse)
                .then(|| "interactions.partial_outputs".to_owned()),
        }
    }

    /// May `from` hand work (or, with [`InputKind::Context`], read-only context) to `to`?
    pub fn decide_handoff(&self, from: &str, to: &str, input: InputKind) -> HandoffDecision {
        match (self.agent(from), self.agent(to)) {
            (Some(f), Some(t)) => compute(
                &self.spec,
                self.hash,
                &self.handoffs,
                (f, t),
                (from, to),
                input,
            ),
            _ => self.unknown_agent(from, to, input),
        }
    }

    fn unknown_agent(&self, from: &str, to: &str, input: InputKind) -> HandoffDecision {
        let who = if self.agent(from).is_none() { from } else { to };
        let chain = vec![RuleStep::new(
            "agents",
            StepOutcome::Applied,
            format!("`{who}` is not in the agent registry"),
        )];
        HandoffDecision {
            decision: conclude(
                DecisionKind::Handoff,
                Verdict::Deny,
                self.hash,
                "agents.unknown",
                format!("unknown agent `{who}`"),
                chain,
            ),
            input,
            output_type: None,
            flow: FlowRelation::Unrelated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> PolicyBundle {
        let src = r#"
            bundle = { id = "t" }
            agents = [{ id = "a" }, { id = "b" }, { id = "c" }]
            [interactions]
            flow_order = ["a", "b", "c"]
            allowed = [{ from = "a", to = "b", output_type = "o" }, { from = "b", to = "c" }]
            context = [{ from = "a", to = "c" }]
            forbidden = [{ from = "*", to = "a", reason = "a is the entry" }]
            [[output_types]]
            id = "o"
            schema = { type = "object" }
        "#;
        PolicyBundle::from_toml_str(src, "t.toml").unwrap()
    }

    #[test]
    fn order_of_precedence_forbidden_allowed_flow_default() {
        let b = bundle();
        let d = b.decide_handoff("c", "a", InputKind::Decision).decision;
        assert_eq!(
            (d.verdict, &*d.rule_id, &*d.reason),
            (Verdict::Deny, "forbid:*->a", "a is the entry")
        );
        let h = b.decide_handoff("a", "b", InputKind::Decision);
        assert_eq!(
            (h.decision.verdict, h.output_type.as_deref()),
            (Verdict::Allow, Some("o"))
        );
        assert_eq!(
            &*b.decide_handoff("a", "c", InputKind::Decision)
                .decision
                .rule_id,
            "flow_order.skip"
        );
        assert_eq!(
            &*b.decide_handoff("c", "b", InputKind::Decision)
                .decision
                .rule_id,
            "flow_order.circular"
        );
        assert_eq!(
            &*b.decide_handoff("a", "ghost", InputKind::Decision)
                .decision
                .rule_id,
            "agents.unknown"
        );
    }

    #[test]
    fn context_edges_are_a_separate_non_decisive_kind() {
        let b = bundle();
        assert_eq!(
            b.decide_handoff("a", "c", InputKind::Context)
                .decision
                .verdict,
            Verdict::Allow
        );
        assert_eq!(
            b.decide_handoff("a", "c", InputKind::Decision)
                .decision
                .verdict,
            Verdict::Deny
        );
        // A decisive edge also carries context.
        assert_eq!(
            b.decide_handoff("b", "c", InputKind::Context)
                .decision
                .verdict,
            Verdict::Allow
        );
    }

    #[test]
    fn reports_unknown_agent_in_an_edge() {
        let s: BundleSpec = toml::from_str(
            r#"
            bundle = { id = "t" }
            agents = [{ id = "a" }]
            [interactions]
            allowed = [{ from = "a", to = "ghost" }]
            "#,
        )
        .unwrap();
        let issues = crate::validate::validate(&s);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].code, Code::UnknownReference);
        assert_eq!(issues[0].pointer.to_string(), "/interactions/allowed/0/to");
    }

    #[test]
    fn partial_outputs_default_to_accept_and_keep_the_hash() {
        let plain = bundle();
        assert_eq!(plain.partial_refused_by("a", "b"), None);
        let src = |extra: &str| {
            format!(
                r#"
            bundle = {{ id = "t" }}
            agents = [{{ id = "a" }}, {{ id = "b" }}, {{ id = "c" }}]
            [interactions]
            flow_order = ["a", "b", "c"]
            {extra}
            allowed = [{{ from = "a", to = "b", output_type = "o" }}, {{ from = "b", to = "c" }}]
            context = [{{ from = "a", to = "c" }}]
            forbidden = [{{ from = "*", to = "a", reason = "a is the entry" }}]
            [[output_types]]
            id = "o"
            schema = {{ type = "object" }}
        "#
            )
        };
        let explicit =
            PolicyBundle::from_toml_str(&src("partial_outputs = \"accept\""), "t.toml").unwrap();
        assert_eq!(plain.hash(), explicit.hash());
        let refusing =
            PolicyBundle::from_toml_str(&src("partial_outputs = \"refuse\""), "t.toml").unwrap();
        assert_ne!(plain.hash(), refusing.hash());
        let err = PolicyBundle::from_toml_str(&src("partial_outputs = \"maybe\""), "t.toml")
            .expect_err("not a setting");
        assert!(err.to_string().contains("maybe"), "{err}");
    }

    #[test]
    fn an_edge_setting_wins_over_the_matrix_default() {
        let src = r#"
            bundle = { id = "t" }
            agents = [{ id = "a" }, { id = "b" }, { id = "c" }]
            [interactions]
            flow_order = ["a", "b", "c"]
            partial_outputs = "refuse"
            allowed = [{ from = "a", to = "b", accept_partial = true }, { from = "b", to = "c" }]
        "#;
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        assert_eq!(b.partial_refused_by("a", "b"), None);
        assert_eq!(
            b.partial_refused_by("b", "c").as_deref(),
            Some("interactions.partial_outputs")
        );
        let src = r#"
            bundle = { id = "t" }
            agents = [{ id = "a" }, { id = "b" }]
            [interactions]
            allowed = [{ id = "ab", from = "a", to = "b", accept_partial = false }]
        "#;
        let b = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        assert_eq!(b.partial_refused_by("a", "b").as_deref(), Some("ab"));
        assert_eq!(b.partial_refused_by("b", "a"), None);
    }
}
