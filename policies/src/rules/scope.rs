//! Context scoping (docs/governance.md#handoff-modes,
//! docs/governance.md#handoff-rules-and-blocked-fields), the `[multi_agent_handoffs]`
//! section and each agent's `context_requirements`: which fields of a payload cross a
//! handoff, and in what form.
//!
//! Resolution, highest precedence first: the rule for the exact pair, `FROM → *`,
//! `* → TO`, `* → *`, the receiving agent's `context_requirements`, the system default.
//! The mode, the allow-list and the translation each come from the first level that sets
//! them. Blocked fields are the union over every level that matches: a blocked field is
//! never passed, whatever else allows it. Then: select (full / scoped / minimal), remove
//! blocked fields, translate (extract, summarise to a token budget, recast role:
//! `translate.rs`), and cap at the receiver's `max_context_tokens`: from decider version
//! 13 ([`ScopingRules::Delivered`]) one summary to the smaller budget, measured as
//! delivered, and the audit computed from what was delivered
//! (docs/governance.md#the-handoff-audit).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::sort_dedup;
use crate::compiled::PolicyBundle;
use crate::decision::{DecisionKind, PolicyDecision, RuleStep, StepOutcome, Verdict, conclude};
use crate::error::DiagnosticCode as Code;
use crate::fieldpath::{self, leaves, remove, select};
use crate::locate::{Pointer, ptr};
use crate::model::{AgentSpec, BundleSpec};
use crate::rules::capability::ResponsibilityLock;
use crate::rules::context_parts::{ContentPart, ContextParts, PriorOutputs};
use crate::rules::handoff::{HandoffDecision, InputKind};
use crate::validate::Checker;
use crate::{tokens, translate};

/// Senders of content that are no agent of the bundle, which a handoff rule may name as
/// `from_agent_id` without declaring them: `human`, a person's answers, decisions and
/// approval reasons, `tools`, the results of the tools docket runs for an agent, and
/// `events`, outside events delivered to an agent that waits for them
/// (docs/governance.md#handoff-rules-and-blocked-fields). Their content crosses the same
/// gate as an agent's, scoped for the pair `human → AGENT`, `tools → AGENT` or
/// `events → AGENT`.
pub const CONTENT_SOURCES: [&str; 3] = ["human", "tools", "events"];

/// Whether `id` is one of the [`CONTENT_SOURCES`].
#[must_use]
pub fn is_content_source(id: &str) -> bool {
    CONTENT_SOURCES.contains(&id)
}

/// The `multi_agent_handoffs` section: what context crosses a handoff
/// (docs/governance.md#handoff-modes, docs/governance.md#handoff-rules-and-blocked-fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffPolicy {
    #[serde(default)]
    pub default_handoff_mode: HandoffMode,
    #[serde(default = "yes")]
    pub enable_conversation_translation: bool,
    #[serde(default = "yes")]
    pub audit_all_handoffs: bool,
    /// Top-level fields that minimal mode passes ("essential metadata and trigger").
    #[serde(default = "default_minimal_fields")]
    pub minimal_context_fields: Vec<String>,
    /// Fields never passed on any handoff.
    #[serde(default)]
    pub blocked_context_fields: Vec<String>,
    #[serde(default)]
    pub agent_handoff_rules: Vec<HandoffRule>,
    /// How conflicting outputs of a parallel fan-out are resolved: prefer the output of
    /// higher confidence (a tie goes to a human), or present both to a human
    /// (docs/governance.md#escalation-and-tickets). Either way the conflict is recorded and
    /// the losing output archived, never hidden or deleted. Left out of the canonical form
    /// when default, so existing bundle hashes do not change.
    #[serde(default, skip_serializing_if = "ConflictResolution::is_default")]
    pub conflict_resolution: ConflictResolution,
    /// Authority settles a conflict first: when the conflicting outputs come from agents
    /// of different `authority`, the highest level's output is kept (`higher_authority`)
    /// and the lower ones archived; between peers `conflict_resolution` decides
    /// (docs/governance.md#authority-between-agents). Default false, so bundles without it
    /// keep their behaviour; left out of the canonical form when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub authority_settles_conflicts: bool,
    /// A fan-out whose branch fails past retrying goes on with the other branches'
    /// outputs, the gap recorded (`fanout.branch_failed`) and told to the receivers
    /// (docs/governance.md#partial-results); false, the failure goes up the ladder and
    /// stops the run as any failure. Left out of the canonical form when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fan_out_partial: bool,
    /// Which parts of the run reach a handoff's receiver, bundle-wide
    /// (docs/governance.md#context-parts); a handoff rule's own `context_parts` come
    /// first. Left out of the canonical form when empty.
    #[serde(default, skip_serializing_if = "ContextParts::is_empty")]
    pub context_parts: ContextParts,
}

impl Default for HandoffPolicy {
    fn default() -> Self {
        Self {
            default_handoff_mode: HandoffMode::Scoped,
            enable_conversation_translation: true,
            audit_all_handoffs: true,
            minimal_context_fields: default_minimal_fields(),
            blocked_context_fields: Vec::new(),
            agent_handoff_rules: Vec::new(),
            conflict_resolution: ConflictResolution::default(),
            authority_settles_conflicts: false,
            fan_out_partial: false,
            context_parts: ContextParts::default(),
        }
    }
}

fn default_minimal_fields() -> Vec<String> {
    vec!["trigger".to_owned(), "metadata".to_owned()]
}

fn yes() -> bool {
    true
}

/// How much context a handoff carries (docs/governance.md#handoff-modes).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HandoffMode {
    Full,
    #[default]
    Scoped,
    Minimal,
}

/// One per-pair handoff rule; `*` is a wildcard for either side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffRule {
    pub id: String,
    /// The sender: an agent, `*`, or a sender that is no agent, `human` (a person's
    /// answers and decisions) or `tools` (the results of tools docket runs).
    pub from_agent_id: String,
    /// The receiver: an agent or `*`.
    pub to_agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_mode: Option<HandoffMode>,
    /// Nested field paths (`a.b.c`) passed in scoped mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_context_fields: Option<Vec<String>>,
    #[serde(default)]
    pub blocked_context_fields: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_translation: Option<ConversationTranslation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default = "yes")]
    pub audit_enabled: bool,
    /// Which parts of the run reach this pair's receiver (docs/governance.md#context-parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_parts: Option<ContextParts>,
}

/// A receiving agent's own context defaults, `context_requirements`
/// (docs/governance.md#handoff-rules-and-blocked-fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextRequirements {
    #[serde(default)]
    pub requires_prior_outputs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_context_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_scope: Option<HandoffMode>,
    /// Default mode for handoffs this agent receives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_mode: Option<HandoffMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_translation: Option<ConversationTranslation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_context_fields: Option<Vec<String>>,
    #[serde(default)]
    pub blocked_context_fields: Vec<String>,
}

/// Conversation translation (docs/governance.md#translation-and-token-budgets). Filtering of
/// blocked fields always applies and needs no switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationTranslation {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Condense the scoped context to `max_tokens` (deterministic, no LLM).
    #[serde(default, alias = "summarize_prior_outputs")]
    pub summarize: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Pull only these nested fields out of the scoped context.
    #[serde(default)]
    pub extract_fields: Vec<String>,
    /// Present the output as a message of this role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recast_role: Option<MessageRole>,
    /// Recast agent outputs as a message (as `system` unless `recast_role` says otherwise).
    #[serde(default)]
    pub recast_agent_outputs: bool,
}

/// Message role an output can be recast into (docs/governance.md#translation-and-token-budgets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    System,
    User,
    Assistant,
}

/// How conflicting outputs of parallel branches are resolved
/// (docs/governance.md#escalation-and-tickets).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ConflictResolution {
    /// The output with the higher `confidence_level` wins; equal confidence goes to a human.
    #[default]
    PreferHigherConfidence,
    /// Always ask a human which output wins.
    Human,
}

impl ConflictResolution {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// The section's checks: field paths parse, minimal mode passes no prior outputs, no two
/// rules govern one pair, no rule contradicts itself, and every allowed or blocked field is
/// one the declared output types can carry.
pub(crate) fn check(c: &mut Checker<'_>) {
    let types = EdgeTypes::new(c.spec);
    handoff_rules(c, &types);
    receiver_field_paths(c, &types);
}

/// One agent's `context_requirements` (at `p`, the agent's pointer): the agents it names
/// exist, its field paths parse, its budgets are positive.
pub(crate) fn check_receiver(c: &mut Checker<'_>, p: &Pointer, a: &AgentSpec) {
    if let Some(ctx) = &a.context_requirements {
        let cp = p.key("context_requirements");
        for (j, other) in ctx.requires_prior_outputs.iter().enumerate() {
            c.agent_ref(cp.key("requires_prior_outputs").index(j), other, false);
        }
        if let Some(allowed) = &ctx.allowed_context_fields {
            c.field_paths(&cp.key("allowed_context_fields"), allowed);
        }
        c.field_paths(
            &cp.key("blocked_context_fields"),
            &ctx.blocked_context_fields,
        );
        if let Some(t) = &ctx.conversation_translation {
            translation(
                c,
                cp.key("conversation_translation"),
                t,
                ctx.max_context_tokens.is_some(),
            );
        }
        if ctx.max_context_tokens == Some(0) {
            c.push(
                cp.key("max_context_tokens"),
                Code::InvalidValue,
                "max_context_tokens must be positive",
            );
        }
    }
}

/// The section itself: its field lists and its per-pair rules.
fn handoff_rules(c: &mut Checker<'_>, types: &EdgeTypes<'_>) {
    let spec = c.spec;
    let h = &spec.multi_agent_handoffs;
    let base = ptr!["multi_agent_handoffs"];
    c.field_paths(
        &base.key("minimal_context_fields"),
        &h.minimal_context_fields,
    );
    c.field_paths(
        &base.key("blocked_context_fields"),
        &h.blocked_context_fields,
    );
    for (i, f) in h.minimal_context_fields.iter().enumerate() {
        if f == "prior_outputs" || f.starts_with("prior_outputs.") {
            c.push(
                base.key("minimal_context_fields").index(i),
                Code::Contradiction,
                "minimal mode passes no prior outputs",
            );
        }
    }
    let mut pairs = BTreeMap::new();
    for (i, r) in h.agent_handoff_rules.iter().enumerate() {
        let p = base.key("agent_handoff_rules").index(i);
        c.source_ref(p.key("from_agent_id"), &r.from_agent_id);
        c.receiver_ref(p.key("to_agent_id"), &r.to_agent_id);
        if let Some(prev) = pairs.insert(
            (r.from_agent_id.as_str(), r.to_agent_id.as_str()),
            r.id.as_str(),
        ) {
            c.push(
                p.key("to_agent_id"),
                Code::Duplicate,
                format!(
                    "rules `{prev}` and `{}` both govern {} → {}; precedence would be ambiguous",
                    r.id, r.from_agent_id, r.to_agent_id
                ),
            );
        }
        let allowed = r.allowed_context_fields.as_deref().unwrap_or_default();
        c.field_paths(&p.key("allowed_context_fields"), allowed);
        c.field_paths(&p.key("blocked_context_fields"), &r.blocked_context_fields);
        for (j, f) in allowed.iter().enumerate() {
            if r.blocked_context_fields.contains(f) {
                c.push(
                    p.key("allowed_context_fields").index(j),
                    Code::Contradiction,
                    format!("field `{f}` is both allowed and blocked by this rule"),
                );
            }
        }
        match (r.handoff_mode, &r.allowed_context_fields) {
            (Some(HandoffMode::Minimal), Some(_)) => c.push(
                p.key("allowed_context_fields"),
                Code::Contradiction,
                "minimal mode passes no fields beyond the trigger metadata",
            ),
            (Some(HandoffMode::Full), Some(_)) => c.push(
                p.key("allowed_context_fields"),
                Code::Contradiction,
                "full mode passes every field; an allow-list contradicts it",
            ),
            _ => {}
        }
        if let Some(t) = &r.conversation_translation {
            translation(c, p.key("conversation_translation"), t, false);
        }
        // A field the declared output type can never contain is a typo waiting to leak.
        if r.from_agent_id != "*" {
            let schemas = types.schemas(&r.from_agent_id, &r.to_agent_id);
            if !schemas.is_empty() {
                let lists = [
                    ("allowed_context_fields", allowed),
                    (
                        "blocked_context_fields",
                        r.blocked_context_fields.as_slice(),
                    ),
                ];
                impossible_paths(
                    c,
                    &schemas,
                    &lists,
                    |field, j| p.key(field).index(j),
                    |path| {
                        format!(
                            "no output of `{}` can contain `{path}` (not in its output type's schema)",
                            r.from_agent_id
                        )
                    },
                );
            }
        }
    }
}

fn translation(
    c: &mut Checker<'_>,
    p: Pointer,
    t: &ConversationTranslation,
    fallback_budget: bool,
) {
    c.field_paths(&p.key("extract_fields"), &t.extract_fields);
    if t.summarize && t.max_tokens.is_none() && !fallback_budget {
        c.push(
            p.key("summarize"),
            Code::InvalidValue,
            "summarize needs max_tokens (the token budget to summarize to)",
        );
    }
    if t.max_tokens == Some(0) {
        c.push(
            p.key("max_tokens"),
            Code::InvalidValue,
            "max_tokens must be positive",
        );
    }
}

/// Output-type schemas a handoff rule's fields are drawn from.
/// Each well-formed field path of `lists` that none of `schemas` admits: a field the
/// declared output types can never contain is a typo waiting to leak. Located by `at`
/// (list name, index), described by `problem`.
fn impossible_paths(
    c: &mut Checker<'_>,
    schemas: &[&Value],
    lists: &[(&str, &[String])],
    at: impl Fn(&str, usize) -> Pointer,
    problem: impl Fn(&str) -> String,
) {
    for (field, list) in lists {
        for (j, path) in list.iter().enumerate() {
            let Ok(segs) = fieldpath::parse(path) else {
                continue;
            };
            if !schemas.iter().any(|s| fieldpath::schema_admits(s, &segs)) {
                c.push(at(field, j), Code::ImpossibleFieldPath, problem(path));
            }
        }
    }
}

/// The output types the matrix's edges (allowed and context) carry, indexed by sender
/// and by pair, each resolved to its schema (the latest version when the edge names none),
/// so that the checks of every handoff rule and receiver together read each edge a few
/// times, not once per rule.
struct EdgeTypes<'a> {
    /// Each edge's output type by (from, to): `None` when it names none, else the
    /// schema of the type it names, if declared.
    by_pair: BTreeMap<(&'a str, &'a str), Vec<Option<Option<&'a Value>>>>,
    /// The receivers each sender has an edge to.
    by_from: BTreeMap<&'a str, BTreeSet<&'a str>>,
    /// The senders each receiver has an edge from.
    by_to: BTreeMap<&'a str, BTreeSet<&'a str>>,
}

impl<'a> EdgeTypes<'a> {
    fn new(spec: &'a BundleSpec) -> Self {
        let mut types: BTreeMap<&str, BTreeMap<u32, &Value>> = BTreeMap::new();
        for t in &spec.output_types {
            types
                .entry(t.id.as_str())
                .or_default()
                .insert(t.version, &t.schema);
        }
        let schema = |r: &str| {
            let (id, version) = match r.split_once('@') {
                Some((id, v)) => (id, v.parse::<u32>().ok()),
                None => (r, None),
            };
            let versions = types.get(id)?;
            match version {
                Some(v) => versions.get(&v).copied(),
                None => versions.values().next_back().copied(),
            }
        };
        let m = &spec.interactions;
        let edges = m
            .allowed
            .iter()
            .map(|e| (&e.from, &e.to, &e.output_type))
            .chain(m.context.iter().map(|e| (&e.from, &e.to, &e.output_type)));
        let mut out = Self {
            by_pair: BTreeMap::new(),
            by_from: BTreeMap::new(),
            by_to: BTreeMap::new(),
        };
        for (from, to, output_type) in edges {
            out.by_pair
                .entry((from.as_str(), to.as_str()))
                .or_default()
                .push(output_type.as_deref().map(schema));
            out.by_from
                .entry(from.as_str())
                .or_default()
                .insert(to.as_str());
            out.by_to
                .entry(to.as_str())
                .or_default()
                .insert(from.as_str());
        }
        out
    }

    /// The output type of every edge of `from → to` (`to` may be `*`), as in `by_pair`.
    fn edges(&self, from: &str, to: &str) -> Vec<Option<Option<&'a Value>>> {
        let mut out = Vec::new();
        let mut add = |t: &str| {
            if let Some(list) = self.by_pair.get(&(from, t)) {
                out.extend(list.iter().copied());
            }
        };
        if to == "*" {
            for t in self.by_from.get(from).into_iter().flatten() {
                add(t);
            }
        } else {
            add(to);
        }
        out
    }

    /// The distinct output-type schemas a handoff rule's fields are drawn from.
    fn schemas(&self, from: &str, to: &str) -> Vec<&'a Value> {
        let mut out: Vec<&Value> = self
            .edges(from, to)
            .into_iter()
            .flatten()
            .flatten()
            .collect();
        out.sort_by_key(|v| std::ptr::from_ref(*v));
        out.dedup_by_key(|v| std::ptr::from_ref(*v));
        out
    }
}

/// A receiver's own allow/block lists must name fields some incoming edge can carry,
/// when every incoming edge declares its output type.
fn receiver_field_paths(c: &mut Checker<'_>, types: &EdgeTypes<'_>) {
    let spec = c.spec;
    for (i, a) in spec.agents.iter().enumerate() {
        let Some(ctx) = &a.context_requirements else {
            continue;
        };
        let senders = types.by_to.get(a.id.as_str());
        let incoming: Vec<Option<Option<&Value>>> = senders
            .into_iter()
            .flatten()
            .flat_map(|from| types.edges(from, &a.id))
            .collect();
        // An edge that names no output type could carry anything.
        if incoming.is_empty() || incoming.iter().any(Option::is_none) {
            continue;
        }
        let mut schemas: Vec<&Value> = incoming.into_iter().flatten().flatten().collect();
        schemas.sort_by_key(|v| std::ptr::from_ref(*v));
        schemas.dedup_by_key(|v| std::ptr::from_ref(*v));
        let allowed = ctx.allowed_context_fields.as_deref().unwrap_or_default();
        let lists = [
            ("allowed_context_fields", allowed),
            (
                "blocked_context_fields",
                ctx.blocked_context_fields.as_slice(),
            ),
        ];
        impossible_paths(
            c,
            &schemas,
            &lists,
            |field, j| ptr!["agents", i, "context_requirements", field, j],
            |path| {
                format!(
                    "no handoff into `{}` can carry `{path}` (not in any incoming output type)",
                    a.id
                )
            },
        );
    }
}

/// The rule ids of the per-pair handoff rules.
pub(crate) fn rule_ids(spec: &BundleSpec, ids: &mut Vec<(String, Pointer)>) {
    ids.extend(
        spec.multi_agent_handoffs
            .agent_handoff_rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                (
                    r.id.clone(),
                    ptr!["multi_agent_handoffs", "agent_handoff_rules", i, "id"],
                )
            }),
    );
}

/// Normal form: field lists and the agents a receiver names are sorted, handoff rules by
/// id (precedence comes from the pair a rule names, not from its place in the list).
pub(crate) fn normalize(s: &mut BundleSpec) {
    for a in &mut s.agents {
        if let Some(c) = &mut a.context_requirements {
            sort_dedup(&mut c.requires_prior_outputs);
            sort_dedup(&mut c.blocked_context_fields);
            if let Some(f) = &mut c.allowed_context_fields {
                sort_dedup(f);
            }
            if let Some(t) = &mut c.conversation_translation {
                normalize_translation(t);
            }
        }
    }
    let h = &mut s.multi_agent_handoffs;
    sort_dedup(&mut h.minimal_context_fields);
    sort_dedup(&mut h.blocked_context_fields);
    for r in &mut h.agent_handoff_rules {
        if let Some(f) = &mut r.allowed_context_fields {
            sort_dedup(f);
        }
        sort_dedup(&mut r.blocked_context_fields);
        if let Some(t) = &mut r.conversation_translation {
            normalize_translation(t);
        }
        if let Some(PriorOutputs::Agents(list)) = r
            .context_parts
            .as_mut()
            .and_then(|p| p.prior_outputs.as_mut())
        {
            sort_dedup(list);
        }
    }
    if let Some(PriorOutputs::Agents(list)) = &mut h.context_parts.prior_outputs {
        sort_dedup(list);
    }
    h.agent_handoff_rules.sort_by(|a, b| a.id.cmp(&b.id));
}

fn normalize_translation(t: &mut ConversationTranslation) {
    sort_dedup(&mut t.extract_fields);
}

/// Handoff rule index by (from, to) pattern, `*` included, into `agent_handoff_rules`.
pub(crate) fn index_rules(spec: &BundleSpec) -> BTreeMap<(String, String), usize> {
    spec.multi_agent_handoffs
        .agent_handoff_rules
        .iter()
        .enumerate()
        .map(|(i, r)| ((r.from_agent_id.clone(), r.to_agent_id.clone()), i))
        .collect()
}

/// The context before scoping, as the handoff audit records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextBefore {
    pub prior_outputs_count: usize,
    pub total_tokens: usize,
}

/// The context after scoping, as the handoff audit records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextAfter {
    pub prior_outputs_count: usize,
    pub total_tokens: usize,
    /// Leaf field paths that crossed the handoff: under [`ScopingRules::Delivered`], the
    /// payload's leaf paths whose value the receiver got (after selection, blocked fields,
    /// extraction and summarising); under [`ScopingRules::Baseline`], those left after
    /// selection and blocked fields (before any translation).
    pub fields_included: Vec<String>,
    /// Leaf field paths of the payload that did not.
    pub fields_excluded: Vec<String>,
}

/// How a handoff's context is translated and its audit computed: the rules of the decider
/// version that recorded the run (docs/events.md#decider-versions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ScopingRules {
    /// Decider version 12: the fields of the audit are those left after selection and
    /// blocked fields, before translation; a payload key named `prior_outputs` is what
    /// the prior-output counts count; a summary is made only of a context over its budget
    /// and measured before it is recast; the receiver's `max_context_tokens` is applied
    /// after translation, as a second summary.
    Baseline,
    /// From decider version 13: the audit is computed from what the receiver got;
    /// a prior output (`prior:TYPE`) counts as one before scoping and as one after when
    /// something of it crossed; `summarize = true` always delivers a summary, within its
    /// budget and the receiver's `max_context_tokens` as delivered (recast included), and
    /// a summary that kept no line says so (`summary.empty`).
    #[default]
    Delivered,
}

/// What summarising delivered, in the audit of a handoff whose context was summarised
/// (from decider version 13: [`ScopingRules::Delivered`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryAudit {
    /// The budget the summary was made to: the least of the translation's `max_tokens`
    /// and the receiver's `max_context_tokens` that apply. What the receiver got, recast
    /// included, is within it.
    pub max_tokens: usize,
    /// The summary's `path: value` lines: kept, and left out.
    pub lines_kept: usize,
    pub lines_omitted: usize,
    /// No line was kept (none fitted the budget, or the context had none): the receiver
    /// got a summary without content (`summary` `""`), or `null` when not even that
    /// fitted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty: bool,
}

/// The audit record of one scoping decision (the `audit` of `handoff.allowed`,
/// docs/events.md; the engine adds session id and timestamp when it records it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffAudit {
    pub from_agent_id: String,
    pub to_agent_id: String,
    pub handoff_mode: HandoffMode,
    pub context_before_scoping: ContextBefore,
    pub context_after_scoping: ContextAfter,
    pub conversation_translation_applied: bool,
    pub governance_rule_id: Arc<str>,
    pub audit_enabled: bool,
    /// Every field of a non-empty payload was removed: the receiver got nothing of it.
    /// Set by the engine (from decider version 2), which flags such handoffs in the run's
    /// summary; absent when false, so audits recorded before it are unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub every_field_removed: bool,
    /// What summarising delivered, when the context was summarised (from decider version
    /// 13); absent otherwise, so audits recorded before it are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryAudit>,
}

/// What crosses a handoff, why, and the audit record of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopedContext {
    pub decision: PolicyDecision,
    /// The context the receiving agent gets (`null` when the handoff is denied).
    pub context: Value,
    pub audit: HandoffAudit,
}

/// Why a valid bundle is refused for new runs: see [`PolicyBundle::admission_problems`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdmissionProblem {
    /// An allowed handoff would pass nothing.
    EmptyScope(EmptyScope),
    /// Audit switched off where docket records every handoff anyway.
    AuditOff {
        /// The setting, as the bundle names it.
        setting: String,
    },
}

impl std::fmt::Display for AdmissionProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::EmptyScope(e) => e.fmt(f),
            Self::AuditOff { setting } => write!(
                f,
                "{setting} is false, but docket records every handoff with its audit in the \
                 run's log and cannot turn that off; remove the setting (or set it to true)"
            ),
        }
    }
}

/// An allowed handoff that would pass nothing: see [`PolicyBundle::empty_scopes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmptyScope {
    pub from: String,
    pub to: String,
    /// The rule that makes the pair scoped (`multi_agent_handoffs.default_handoff_mode`
    /// when no rule sets a mode).
    pub rule_id: String,
}

impl std::fmt::Display for EmptyScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = if self.rule_id == "multi_agent_handoffs.default_handoff_mode" {
            "the default handoff mode `scoped` applies to it".to_owned()
        } else {
            format!("rule `{}` scopes it", self.rule_id)
        };
        write!(
            f,
            "{} → {} would receive an empty payload: {why} and no rule lists \
             allowed_context_fields for it; set `default_handoff_mode = \"full\"` in \
             [multi_agent_handoffs] (blocked fields are still removed) or list the fields \
             that may cross",
            self.from, self.to
        )
    }
}

/// Content that would arrive empty by a pair that is no edge of the interaction matrix:
/// see [`PolicyBundle::emptied_content`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmptiedContent {
    /// Who sends it: the capability's agent, `human` or `tools`.
    pub from: String,
    /// The agents it would reach empty (one for a capability's answer).
    pub to: Vec<String>,
    /// What it is.
    pub content: EmptiedKind,
    /// The rule that scopes the pair (`multi_agent_handoffs.default_handoff_mode` when no
    /// rule sets a mode).
    pub rule_id: String,
}

/// What crosses a pair that is no edge of the interaction matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmptiedKind {
    /// The answers to capability requests, returning to the agent that asked.
    CapabilityAnswer {
        /// The capabilities the asker may request.
        codes: Vec<String>,
    },
    /// A person's answers to questions, decisions and approval reasons.
    PersonsAnswer,
    /// The results of the tools docket runs for the agent.
    ToolResult,
}

impl EmptiedKind {
    /// The content kind in the user's words, as `output_type` names it in the log.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::CapabilityAnswer { codes } => format!(
                "answers to capability requests ({})",
                codes
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::PersonsAnswer => {
                "a person's answers and decisions (`human_answer`, `decisions`)".to_owned()
            }
            Self::ToolResult => "the results of tools docket runs (`tool_result`)".to_owned(),
        }
    }
}

impl std::fmt::Display for EmptiedContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = if self.rule_id == "multi_agent_handoffs.default_handoff_mode" {
            "the default handoff mode `scoped` applies".to_owned()
        } else {
            format!("rule `{}` scopes it", self.rule_id)
        };
        let (pairs, to) = match self.to.as_slice() {
            [one] => (format!("{} → {one}", self.from), format!("\"{one}\"")),
            many => (
                many.iter()
                    .map(|t| format!("{} → {t}", self.from))
                    .collect::<Vec<_>>()
                    .join(", "),
                "\"*\" (or one rule per agent)".to_owned(),
            ),
        };
        write!(
            f,
            "{pairs}: {} would arrive empty: the pair is no edge of the interaction matrix, \
             {why} and no rule lists allowed_context_fields for it; add a handoff rule with \
             from_agent_id = \"{}\", to_agent_id = {to} and allowed_context_fields (or \
             handoff_mode = \"full\")",
            self.content.describe(),
            self.from,
        )
    }
}

/// One precedence level that matched the pair.
struct Level<'a> {
    rule_id: String,
    mode: Option<HandoffMode>,
    allowed: Option<&'a [String]>,
    blocked: &'a [String],
    translation: Option<&'a ConversationTranslation>,
    audit_enabled: bool,
}

/// Scoping under one set of [`ScopingRules`]: [`PolicyBundle::scoping`]. The bundle's own
/// `scope_*` methods scope under the latest rules; the decider scopes under the rules of
/// the decider version that recorded the run, so that a recorded run replays.
#[derive(Debug, Clone, Copy)]
pub struct Scoper<'a> {
    bundle: &'a PolicyBundle,
    rules: ScopingRules,
}

impl PolicyBundle {
    /// This bundle's scoping under `rules`.
    #[must_use]
    pub fn scoping(&self, rules: ScopingRules) -> Scoper<'_> {
        Scoper {
            bundle: self,
            rules,
        }
    }

    /// Scopes `payload` for the handoff `from → to`. Denied handoffs pass nothing.
    pub fn scope_context(
        &self,
        from: &str,
        to: &str,
        input: InputKind,
        payload: &Value,
    ) -> ScopedContext {
        self.scoping(ScopingRules::default())
            .scope_context(from, to, input, payload)
    }

    /// The agents whose latest outputs `agent` requires
    /// (`context_requirements.requires_prior_outputs`), in the bundle's order.
    #[must_use]
    pub fn required_prior_outputs(&self, agent: &str) -> &[String] {
        self.agent(agent)
            .and_then(|i| self.spec.agents.get(i))
            .and_then(|a| a.context_requirements.as_ref())
            .map_or(&[], |c| c.requires_prior_outputs.as_slice())
    }

    /// Scopes a prior output of `from` that `to` requires: [`Scoper::scope_prior_output`]
    /// under the latest rules.
    #[must_use]
    pub fn scope_prior_output(
        &self,
        from: &str,
        to: &str,
        payload: &Value,
        authority: &PolicyDecision,
    ) -> ScopedContext {
        self.scoping(ScopingRules::default())
            .scope_prior_output(from, to, payload, authority)
    }

    /// Scopes content that crosses by another rule than a handoff:
    /// [`Scoper::scope_authorised`] under the latest rules.
    #[must_use]
    pub fn scope_authorised(
        &self,
        from: &str,
        to: &str,
        payload: &Value,
        authority: &PolicyDecision,
    ) -> ScopedContext {
        self.scoping(ScopingRules::default())
            .scope_authorised(from, to, payload, authority)
    }

    /// [`Self::scope_authorised`] in `mode` when one is given: [`Scoper::scope_authorised_in`]
    /// under the latest rules.
    #[must_use]
    pub fn scope_authorised_in(
        &self,
        from: &str,
        to: &str,
        payload: &Value,
        authority: &PolicyDecision,
        mode: Option<HandoffMode>,
    ) -> ScopedContext {
        self.scoping(ScopingRules::default())
            .scope_authorised_in(from, to, payload, authority, mode)
    }
}

/// What one crossing carries, for the prior-output counts of its audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carries {
    /// A handoff's payload, or content crossing by another rule.
    Content,
    /// A prior output (`prior:TYPE`).
    PriorOutput,
}

impl Scoper<'_> {
    /// Scopes `payload` for the handoff `from → to`. Denied handoffs pass nothing.
    #[must_use]
    pub fn scope_context(
        &self,
        from: &str,
        to: &str,
        input: InputKind,
        payload: &Value,
    ) -> ScopedContext {
        let handoff = self.bundle.decide_handoff(from, to, input);
        self.scope_under(from, to, payload, handoff, None, Carries::Content)
    }

    /// Scopes a prior output of `from` that `to` requires
    /// (`context_requirements.requires_prior_outputs`): as [`Self::scope_authorised`],
    /// in the receiver's `context_scope` mode when it sets one.
    #[must_use]
    pub fn scope_prior_output(
        &self,
        from: &str,
        to: &str,
        payload: &Value,
        authority: &PolicyDecision,
    ) -> ScopedContext {
        let bundle = self.bundle;
        let mode = bundle
            .agent(to)
            .and_then(|i| bundle.spec.agents.get(i))
            .and_then(|a| a.context_requirements.as_ref())
            .and_then(|c| c.context_scope);
        let handoff = HandoffDecision {
            decision: PolicyDecision {
                verdict: Verdict::Allow,
                ..authority.clone()
            },
            input: InputKind::Context,
            output_type: None,
            flow: crate::rules::flow::FlowRelation::Unrelated,
        };
        self.scope_under(from, to, payload, handoff, mode, Carries::PriorOutput)
    }

    /// Scopes `payload` for `from → to` where another rule, not an interaction-matrix
    /// edge, lets content cross: a capability's answer returning to the agent that asked,
    /// a spawn's inputs reaching the child, a child's result reaching its parent, a
    /// domain version reaching a reader. The pair's scoping applies as for a handoff
    /// (mode, allow-list, blocked fields, translation, the receiver's token budget); the
    /// chain starts with `authority`, the decision that let it cross.
    #[must_use]
    pub fn scope_authorised(
        &self,
        from: &str,
        to: &str,
        payload: &Value,
        authority: &PolicyDecision,
    ) -> ScopedContext {
        self.scope_authorised_in(from, to, payload, authority, None)
    }

    /// [`Self::scope_authorised`] in `mode` when one is given (a context part set to
    /// `full`: every field but the blocked ones).
    #[must_use]
    pub fn scope_authorised_in(
        &self,
        from: &str,
        to: &str,
        payload: &Value,
        authority: &PolicyDecision,
        mode: Option<HandoffMode>,
    ) -> ScopedContext {
        let handoff = HandoffDecision {
            decision: PolicyDecision {
                verdict: Verdict::Allow,
                ..authority.clone()
            },
            input: InputKind::Decision,
            output_type: None,
            flow: crate::rules::flow::FlowRelation::Unrelated,
        };
        self.scope_under(from, to, payload, handoff, mode, Carries::Content)
    }

    /// Scoping under an allowed `handoff`; `mode_override` (a receiver's `context_scope`
    /// for its required prior outputs) replaces the mode the levels would choose.
    fn scope_under(
        &self,
        from: &str,
        to: &str,
        payload: &Value,
        handoff: HandoffDecision,
        mode_override: Option<HandoffMode>,
        carries: Carries,
    ) -> ScopedContext {
        let bundle = self.bundle;
        let delivered_rules = self.rules == ScopingRules::Delivered;
        let h = &bundle.spec.multi_agent_handoffs;
        // BPE counting dominates scoping: count each distinct text once (the context
        // handed on is often the payload itself, byte for byte).
        let before_text = tokens::render(payload);
        let before = ContextBefore {
            prior_outputs_count: if delivered_rules {
                usize::from(carries == Carries::PriorOutput)
            } else {
                prior_outputs(payload)
            },
            total_tokens: tokens::count_text(&before_text),
        };
        let before_tokens = before.total_tokens;
        let count = |context: &Value| {
            if context == payload {
                before_tokens
            } else {
                tokens::count_text(&tokens::render(context))
            }
        };
        let all_leaves = leaves(payload);
        let levels = bundle.levels(from, to);
        let mut chain = handoff.decision.chain.clone();
        if handoff.decision.verdict != Verdict::Allow {
            let audit = HandoffAudit {
                from_agent_id: from.to_owned(),
                to_agent_id: to.to_owned(),
                handoff_mode: HandoffMode::Minimal,
                context_before_scoping: before,
                context_after_scoping: ContextAfter {
                    prior_outputs_count: 0,
                    total_tokens: 0,
                    fields_included: Vec::new(),
                    fields_excluded: all_leaves,
                },
                conversation_translation_applied: false,
                governance_rule_id: handoff.decision.rule_id.clone(),
                audit_enabled: true,
                every_field_removed: false,
                summary: None,
            };
            let decision = PolicyDecision {
                kind: DecisionKind::ContextScope,
                ..handoff.decision
            };
            return ScopedContext {
                decision,
                context: Value::Null,
                audit,
            };
        }

        // Mode, allow-list and translation: first level that sets each.
        let mode_level = levels.iter().find(|l| l.mode.is_some());
        let mode = mode_override
            .or(mode_level.and_then(|l| l.mode))
            .unwrap_or(h.default_handoff_mode);
        let governing = if mode_override.is_some() {
            format!("agents.{to}.context_requirements.context_scope")
        } else {
            mode_level.map_or_else(
                || "multi_agent_handoffs.default_handoff_mode".to_owned(),
                |l| l.rule_id.clone(),
            )
        };
        for l in &levels {
            let outcome = if l.rule_id == governing {
                StepOutcome::Applied
            } else {
                StepOutcome::Overridden
            };
            chain.push(RuleStep::new(l.rule_id.as_str(), outcome, level_note(l)));
        }
        if mode_override.is_some() {
            chain.push(RuleStep::new(
                governing.as_str(),
                StepOutcome::Applied,
                format!("mode {} for required prior outputs", mode_name(mode)),
            ));
        } else if mode_level.is_none() {
            chain.push(RuleStep::new(
                governing.as_str(),
                StepOutcome::Applied,
                format!("system default mode {mode:?}"),
            ));
        }
        let allowed: &[String] = levels.iter().find_map(|l| l.allowed).unwrap_or_default();
        let mut blocked: Vec<&str> = levels
            .iter()
            .flat_map(|l| l.blocked.iter().map(String::as_str))
            .collect();
        blocked.extend(h.blocked_context_fields.iter().map(String::as_str));
        blocked.sort_unstable();
        blocked.dedup();
        if !h.blocked_context_fields.is_empty() {
            chain.push(RuleStep::new(
                "multi_agent_handoffs.blocked_context_fields",
                StepOutcome::Applied,
                "fields blocked on every handoff",
            ));
        }

        let selected = match mode {
            HandoffMode::Full => payload.clone(),
            HandoffMode::Scoped => select(payload, allowed),
            HandoffMode::Minimal => select(payload, &h.minimal_context_fields),
        };
        let filtered = remove(selected, &blocked);

        // Translation: the first level that configures one, if translation is enabled.
        let translation = if h.enable_conversation_translation {
            levels
                .iter()
                .find_map(|l| l.translation.map(|t| (l.rule_id.clone(), t)))
        } else {
            None
        };
        let translation = translation.filter(|(_, t)| t.enabled);
        let receiver_budget = bundle
            .agent(to)
            .and_then(|i| bundle.spec.agents.get(i))
            .and_then(|a| a.context_requirements.as_ref())
            .and_then(|c| c.max_context_tokens);
        let step = Translated {
            from,
            to,
            payload,
            all_leaves: &all_leaves,
            blocked: &blocked,
            translation,
            receiver_budget,
        };
        let t = if delivered_rules {
            step.as_delivered(filtered, &mut chain, count)
        } else {
            step.as_baseline(filtered, &mut chain, count)
        };

        let after = ContextAfter {
            prior_outputs_count: if delivered_rules {
                // Something of it crossed: one of its fields, or, for a value that is
                // no object (a string, a number), the value itself.
                let crossed = if !all_leaves.is_empty() {
                    !t.included.is_empty()
                } else if payload.is_object() {
                    false
                } else {
                    match &t.summary {
                        Some(s) => !s.empty,
                        None => !t.context.is_null(),
                    }
                };
                usize::from(carries == Carries::PriorOutput && crossed)
            } else {
                prior_outputs(&t.context)
            },
            total_tokens: t.tokens,
            fields_included: t.included,
            fields_excluded: t.excluded,
        };
        let audit_enabled = h.audit_all_handoffs || levels.iter().all(|l| l.audit_enabled);
        let emptied = match &t.summary {
            Some(s) if s.empty => format!(", summarised to nothing within {} tokens", s.max_tokens),
            _ => String::new(),
        };
        let reason = format!(
            "{from} → {to} in {} mode: {} field(s) passed, {} excluded, {} → {} tokens{emptied}",
            mode_name(mode),
            after.fields_included.len(),
            after.fields_excluded.len(),
            before.total_tokens,
            after.total_tokens
        );
        let rule_id: Arc<str> = Arc::from(governing.as_str());
        let audit = HandoffAudit {
            from_agent_id: from.to_owned(),
            to_agent_id: to.to_owned(),
            handoff_mode: mode,
            context_before_scoping: before,
            context_after_scoping: after,
            conversation_translation_applied: t.translated,
            governance_rule_id: rule_id.clone(),
            audit_enabled,
            every_field_removed: false,
            summary: t.summary,
        };
        let decision = conclude(
            DecisionKind::ContextScope,
            Verdict::Allow,
            bundle.hash,
            rule_id,
            reason,
            chain,
        );
        ScopedContext {
            decision,
            context: t.context,
            audit,
        }
    }
}

/// The translation of a scoped context and the receiver's token budget.
struct Translated<'a> {
    from: &'a str,
    to: &'a str,
    payload: &'a Value,
    all_leaves: &'a [String],
    blocked: &'a [&'a str],
    translation: Option<(String, &'a ConversationTranslation)>,
    receiver_budget: Option<u32>,
}

/// What the receiver gets, and the audit's account of it.
struct Outcome {
    context: Value,
    tokens: usize,
    included: Vec<String>,
    excluded: Vec<String>,
    translated: bool,
    summary: Option<SummaryAudit>,
}

impl Translated<'_> {
    /// Decider version 12: fields counted before translation; summarise only over the
    /// budget, then recast; the receiver's cap applied to the result.
    fn as_baseline(
        &self,
        filtered: Value,
        chain: &mut Vec<RuleStep>,
        count: impl Fn(&Value) -> usize,
    ) -> Outcome {
        // Most handoffs pass the payload whole: then nothing is excluded.
        let (included, excluded) = if filtered == *self.payload {
            (self.all_leaves.to_vec(), Vec::new())
        } else {
            let included = leaves(&filtered);
            let kept: BTreeSet<&String> = included.iter().collect();
            let excluded: Vec<String> = self
                .all_leaves
                .iter()
                .filter(|p| !kept.contains(p))
                .cloned()
                .collect();
            (included, excluded)
        };
        let mut context = filtered;
        let mut translated = false;
        if let Some((rule, t)) = &self.translation {
            if !t.extract_fields.is_empty() {
                context = remove(select(&context, &t.extract_fields), self.blocked);
            }
            if t.summarize {
                let budget = t.max_tokens.or(self.receiver_budget).unwrap_or(u32::MAX) as usize;
                context = translate::summarize(&context, budget);
            }
            let role = t
                .recast_role
                .or(t.recast_agent_outputs.then_some(MessageRole::System));
            if let Some(role) = role {
                context = translate::recast(context, role, self.from);
            }
            translated = true;
            chain.push(RuleStep::new(
                rule.as_str(),
                StepOutcome::Applied,
                "conversation translation",
            ));
        }
        let mut context_tokens = count(&context);
        if let Some(max) = self.receiver_budget
            && context_tokens > max as usize
        {
            context = translate::summarize(&context, max as usize);
            context_tokens = count(&context);
            translated = true;
            chain.push(RuleStep::new(
                format!("agents.{}.context_requirements.max_context_tokens", self.to),
                StepOutcome::Applied,
                format!("summarised to {max} tokens"),
            ));
        }
        Outcome {
            context,
            tokens: context_tokens,
            included,
            excluded,
            translated,
            summary: None,
        }
    }

    /// From decider version 13: extract; then summarise once, to the least budget that
    /// applies (the translation's when it asks for a summary, the receiver's
    /// `max_context_tokens` when what it would get is over it), measured as delivered,
    /// recast included; then recast. The fields are counted from what was delivered.
    fn as_delivered(
        &self,
        filtered: Value,
        chain: &mut Vec<RuleStep>,
        count: impl Fn(&Value) -> usize,
    ) -> Outcome {
        let mut content = filtered;
        let mut translated = false;
        let mut role = None;
        let mut asked: Option<usize> = None;
        if let Some((rule, t)) = &self.translation {
            if !t.extract_fields.is_empty() {
                content = remove(select(&content, &t.extract_fields), self.blocked);
            }
            if t.summarize {
                asked = Some(t.max_tokens.or(self.receiver_budget).unwrap_or(u32::MAX) as usize);
            }
            role = t
                .recast_role
                .or(t.recast_agent_outputs.then_some(MessageRole::System));
            translated = true;
            chain.push(RuleStep::new(
                rule.as_str(),
                StepOutcome::Applied,
                "conversation translation",
            ));
        }
        let from = self.from;
        let wrap = |v: Value| match role {
            Some(role) => translate::recast(v, role, from),
            None => v,
        };
        let whole = wrap(content.clone());
        let whole_tokens = count(&whole);
        let cap = self.receiver_budget.map(|m| m as usize);
        // The receiver's cap binds when it is below the summary's own budget, or when
        // what it would get whole is over it.
        let capped = cap.filter(|&c| match asked {
            Some(a) => c < a,
            None => whole_tokens > c,
        });
        let budget = match (asked, capped) {
            (_, Some(c)) => Some(c),
            (Some(a), None) => Some(a),
            (None, None) => None,
        };
        let Some(budget) = budget else {
            let included = self.delivered_fields(&content);
            let excluded = self.excluded(&included);
            return Outcome {
                context: whole,
                tokens: whole_tokens,
                included,
                excluded,
                translated,
                summary: None,
            };
        };
        let cap_rule = format!("agents.{}.context_requirements.max_context_tokens", self.to);
        if let Some(c) = capped {
            translated = true;
            chain.push(RuleStep::new(
                cap_rule.as_str(),
                StepOutcome::Applied,
                format!("summarised to {c} tokens"),
            ));
        }
        // The rule whose budget the summary was made to.
        let budget_rule = match (&self.translation, capped) {
            (Some((rule, _)), None) => rule.clone(),
            _ => cap_rule,
        };
        let made = translate::summarize_within(&content, budget, wrap);
        let included = self.summarised_fields(&made.kept);
        let excluded = self.excluded(&included);
        let tokens = count(&made.value);
        let empty = made.kept.is_empty();
        if empty {
            chain.push(RuleStep::new(
                budget_rule,
                StepOutcome::Applied,
                if made.value.is_null() {
                    format!("not even an empty summary fits {budget} tokens: nothing delivered")
                } else {
                    format!("no line fits {budget} tokens: an empty summary delivered")
                },
            ));
        }
        Outcome {
            context: made.value,
            tokens,
            included,
            excluded,
            translated,
            summary: Some(SummaryAudit {
                max_tokens: budget,
                lines_kept: made.kept.len(),
                lines_omitted: made.omitted,
                empty,
            }),
        }
    }

    /// The payload's leaf paths that are leaves of `content` too (an object emptied by
    /// removing its fields is no field of the payload that crossed).
    fn delivered_fields(&self, content: &Value) -> Vec<String> {
        // Most handoffs pass the payload whole.
        if content == self.payload {
            return self.all_leaves.to_vec();
        }
        let got: BTreeSet<String> = leaves(content).into_iter().collect();
        self.all_leaves
            .iter()
            .filter(|p| got.contains(*p))
            .cloned()
            .collect()
    }

    /// The payload's leaf paths some kept summary line holds a value of: the line's path
    /// without its array indices is the leaf's, or lies under it (an array of arrays is one
    /// leaf of the payload, several lines of the summary).
    fn summarised_fields(&self, kept: &[String]) -> Vec<String> {
        let lines: BTreeSet<String> = kept.iter().map(|p| without_indices(p)).collect();
        self.all_leaves
            .iter()
            .filter(|leaf| {
                lines.iter().any(|line| {
                    line == *leaf
                        || line
                            .strip_prefix(leaf.as_str())
                            .is_some_and(|rest| rest.starts_with('.'))
                })
            })
            .cloned()
            .collect()
    }

    fn excluded(&self, included: &[String]) -> Vec<String> {
        let kept: BTreeSet<&String> = included.iter().collect();
        self.all_leaves
            .iter()
            .filter(|p| !kept.contains(p))
            .cloned()
            .collect()
    }
}

/// A summary line's path with its array indices (`[0]`) left out: `items[0].id` →
/// `items.id`.
fn without_indices(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut depth = 0usize;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

impl PolicyBundle {
    /// What a valid bundle states that docket will not run under: handoffs whose every
    /// payload would arrive empty ([`Self::empty_scopes`]) and audit switched off (every
    /// handoff is recorded in the run's log whatever the bundle says, so a bundle that
    /// asks for less would be misread). Refused for new runs and by `docket policy
    /// check`; not validation errors, so runs already recorded under such a bundle replay
    /// (docs/governance.md#handoff-modes).
    #[must_use]
    pub fn admission_problems(&self) -> Vec<AdmissionProblem> {
        let h = &self.spec.multi_agent_handoffs;
        let mut out: Vec<AdmissionProblem> = self
            .empty_scopes()
            .into_iter()
            .map(AdmissionProblem::EmptyScope)
            .collect();
        if !h.audit_all_handoffs {
            out.push(AdmissionProblem::AuditOff {
                setting: "multi_agent_handoffs.audit_all_handoffs".to_owned(),
            });
        }
        for r in h.agent_handoff_rules.iter().filter(|r| !r.audit_enabled) {
            out.push(AdmissionProblem::AuditOff {
                setting: format!("agent_handoff_rules `{}`: audit_enabled", r.id),
            });
        }
        out
    }

    /// Allowed handoffs whose every payload would arrive empty: scoped (by a rule or the
    /// default mode) with no rule listing `allowed_context_fields`. A bundle with one is
    /// refused for new runs and by `docket policy check` (docs/governance.md#handoff-modes):
    /// an agent that silently receives `{}` is worse than a refusal. (Not a validation
    /// error, so that runs recorded under such a bundle still replay.)
    #[must_use]
    pub fn empty_scopes(&self) -> Vec<EmptyScope> {
        let mut out = Vec::new();
        for edge in &self.spec.interactions.allowed {
            if let Some(rule_id) = self.scoped_to_nothing(&edge.from, &edge.to) {
                out.push(EmptyScope {
                    from: edge.from.clone(),
                    to: edge.to.clone(),
                    rule_id,
                });
            }
        }
        out
    }

    /// The rule that scopes `from → to` (`multi_agent_handoffs.default_handoff_mode` when
    /// none sets a mode) when the pair is scoped and no level lists
    /// `allowed_context_fields` for it: every payload crossing it arrives as `{}`.
    fn scoped_to_nothing(&self, from: &str, to: &str) -> Option<String> {
        let h = &self.spec.multi_agent_handoffs;
        let levels = self.levels(from, to);
        let mode_level = levels.iter().find(|l| l.mode.is_some());
        let mode = mode_level
            .and_then(|l| l.mode)
            .unwrap_or(h.default_handoff_mode);
        let allowed = levels.iter().find_map(|l| l.allowed);
        (mode == HandoffMode::Scoped && allowed.is_none_or(<[String]>::is_empty)).then(|| {
            mode_level.map_or_else(
                || "multi_agent_handoffs.default_handoff_mode".to_owned(),
                |l| l.rule_id.clone(),
            )
        })
    }

    /// Content that reaches an agent by a pair that is no edge of the interaction matrix,
    /// and that the bundle scopes to nothing, so that it would arrive as `{}`: a
    /// capability's answer (the capability's agent → the agent that asked, where the
    /// matrix has only the asking edge), a person's answers and decisions (`human → agent`,
    /// to every agent a handoff can reach), and the results of tools docket runs for an
    /// agent that may use tools (`tools → agent`, unless `context_parts.observations` is
    /// `full`). Warnings, not admission problems: `docket policy check` and `docket run`
    /// say them, naming the rule to add (docs/governance.md#content-that-is-not-a-handoff).
    #[must_use]
    pub fn emptied_content(&self) -> Vec<EmptiedContent> {
        let spec = &self.spec;
        let edges = &spec.interactions.allowed;
        let pairs: BTreeSet<(&str, &str)> = edges
            .iter()
            .map(|e| (e.from.as_str(), e.to.as_str()))
            .collect();
        let is_edge = |from: &str, to: &str| pairs.contains(&(from, to));
        let mut locks: BTreeMap<&str, Vec<&ResponsibilityLock>> = BTreeMap::new();
        for l in &spec.responsibility_locks {
            locks.entry(l.capability.as_str()).or_default().push(l);
        }
        let mut out = Vec::new();
        // Answers to capability requests, for each asking edge whose return is no edge
        // (`external` hands the run its input; it asks for no capability).
        for ask in edges.iter().filter(|e| e.from != "external") {
            let Some(owner) = self.agent(&ask.to).and_then(|i| spec.agents.get(i)) else {
                continue;
            };
            if owner.capabilities.is_empty() || is_edge(&ask.to, &ask.from) {
                continue;
            }
            let Some(rule_id) = self.scoped_to_nothing(&ask.to, &ask.from) else {
                continue;
            };
            let codes: Vec<String> = owner
                .capabilities
                .iter()
                .filter(|c| {
                    let locks = locks.get(c.code.as_str()).map_or(&[][..], Vec::as_slice);
                    may_request(locks, &ask.from, &ask.to)
                })
                .map(|c| c.code.clone())
                .collect();
            if !codes.is_empty() {
                out.push(EmptiedContent {
                    from: ask.to.clone(),
                    to: vec![ask.from.clone()],
                    content: EmptiedKind::CapabilityAnswer { codes },
                    rule_id,
                });
            }
        }
        // A person's answers, and tools' results, grouped by the rule that empties them.
        let reachable: BTreeSet<&str> = edges
            .iter()
            .map(|e| e.to.as_str())
            .filter(|to| self.agent(to).is_some() && *to != "external")
            .filter(|to| !is_content_source(to))
            .collect();
        let full = |p: &ContextParts| p.observations == Some(ContentPart::Full);
        // Receivers some handoff rule gives full observations (`*`: every receiver).
        let observations_full_for: BTreeSet<&str> = spec
            .multi_agent_handoffs
            .agent_handoff_rules
            .iter()
            .filter(|r| r.context_parts.as_ref().is_some_and(full))
            .map(|r| r.to_agent_id.as_str())
            .collect();
        let observations_full = |to: &str| {
            full(&spec.multi_agent_handoffs.context_parts)
                || observations_full_for.contains(to)
                || observations_full_for.contains("*")
        };
        for (source, kind) in [
            ("human", EmptiedKind::PersonsAnswer),
            ("tools", EmptiedKind::ToolResult),
        ] {
            let mut by_rule: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for to in &reachable {
                let uses = match kind {
                    EmptiedKind::ToolResult => {
                        let uses_tools = self
                            .agent(to)
                            .and_then(|i| spec.agents.get(i))
                            .is_some_and(|a| !a.allowed_tools.is_empty());
                        uses_tools && !observations_full(to)
                    }
                    _ => true,
                };
                if !uses || is_edge(source, to) {
                    continue;
                }
                if let Some(rule_id) = self.scoped_to_nothing(source, to) {
                    by_rule.entry(rule_id).or_default().push((*to).to_owned());
                }
            }
            for (rule_id, to) in by_rule {
                out.push(EmptiedContent {
                    from: source.to_owned(),
                    to,
                    content: kind.clone(),
                    rule_id,
                });
            }
        }
        out
    }

    fn levels(&self, from: &str, to: &str) -> Vec<Level<'_>> {
        let rules = &self.spec.multi_agent_handoffs.agent_handoff_rules;
        let mut out = Vec::new();
        for key in [(from, to), (from, "*"), ("*", to), ("*", "*")] {
            let idx = self
                .handoff_rules
                .get(&(key.0.to_owned(), key.1.to_owned()));
            if let Some(r) = idx.and_then(|i| rules.get(*i)) {
                out.push(Level {
                    rule_id: r.id.clone(),
                    mode: r.handoff_mode,
                    allowed: r.allowed_context_fields.as_deref(),
                    blocked: &r.blocked_context_fields,
                    translation: r.conversation_translation.as_ref(),
                    audit_enabled: r.audit_enabled,
                });
            }
        }
        let receiver = self.agent(to).and_then(|i| self.spec.agents.get(i));
        if let Some(c) = receiver.and_then(|a| a.context_requirements.as_ref()) {
            out.push(Level {
                rule_id: format!("agents.{to}.context_requirements"),
                mode: c.handoff_mode,
                allowed: c.allowed_context_fields.as_deref(),
                blocked: &c.blocked_context_fields,
                translation: c.conversation_translation.as_ref(),
                audit_enabled: true,
            });
        }
        out
    }
}

/// Whether none of `locks` (those of one capability, in normal form: their lists sorted)
/// keeps the capability of `target` from `asker`.
fn may_request(locks: &[&ResponsibilityLock], asker: &str, target: &str) -> bool {
    let names = |list: &[String]| list.binary_search_by(|a| a.as_str().cmp(asker)).is_ok();
    locks.iter().all(|l| {
        l.owner == target
            && !names(&l.forbidden_requesters)
            && (asker == l.owner || l.requesters.as_deref().is_none_or(names))
    })
}

fn level_note(l: &Level<'_>) -> String {
    let mut parts = Vec::new();
    if let Some(m) = l.mode {
        parts.push(format!("mode {}", mode_name(m)));
    }
    if let Some(a) = l.allowed {
        parts.push(format!("allows [{}]", a.join(", ")));
    }
    if !l.blocked.is_empty() {
        parts.push(format!(
            "blocks [{}] (blocked fields apply at every level)",
            l.blocked.join(", ")
        ));
    }
    if l.translation.is_some() {
        parts.push("translation".to_owned());
    }
    if parts.is_empty() {
        "matches, sets nothing".to_owned()
    } else {
        parts.join("; ")
    }
}

fn mode_name(m: HandoffMode) -> &'static str {
    match m {
        HandoffMode::Full => "full",
        HandoffMode::Scoped => "scoped",
        HandoffMode::Minimal => "minimal",
    }
}

fn prior_outputs(v: &Value) -> usize {
    match v.get("prior_outputs") {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use crate::compiled::PolicyBundle;

    use super::*;

    #[test]
    fn empty_scopes_name_each_pair_that_would_pass_nothing_and_its_rule() {
        let bundle = |handoffs: &str| {
            PolicyBundle::from_toml_str(
                &format!(
                    "bundle = {{ id = \"t\" }}\n[[agents]]\nid = \"a\"\n[[agents]]\nid = \"b\"\n\
                     [[agents]]\nid = \"c\"\n[interactions]\nallowed = [{{ from = \"a\", to = \"b\" }}, \
                     {{ from = \"b\", to = \"c\" }}]\n{handoffs}"
                ),
                "t.toml",
            )
            .unwrap()
        };
        let pairs = |b: &PolicyBundle| -> Vec<(String, String, String)> {
            b.empty_scopes()
                .into_iter()
                .map(|e| (e.from, e.to, e.rule_id))
                .collect()
        };
        // Nothing set: the default mode scopes both pairs to nothing.
        let default = "multi_agent_handoffs.default_handoff_mode".to_owned();
        assert_eq!(
            pairs(&bundle("")),
            [
                ("a".into(), "b".into(), default.clone()),
                ("b".into(), "c".into(), default)
            ]
        );
        // Full by default; one rule scopes b → c with nothing allowed.
        let full = "[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\n";
        assert!(pairs(&bundle(full)).is_empty());
        let rule = "[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"bc\"\nfrom_agent_id = \"b\"\nto_agent_id = \"c\"\nhandoff_mode = \"scoped\"\n";
        assert_eq!(
            pairs(&bundle(&format!("{full}{rule}"))),
            [("b".into(), "c".into(), "bc".into())]
        );
        // The same rule with an allow-list passes something.
        let listed = format!("{full}{rule}allowed_context_fields = [\"x\"]\n");
        assert!(pairs(&bundle(&listed)).is_empty());
    }

    /// external → orc → anl → (none back), scoped by default with an allow-list on each
    /// edge; orc may use tools and asks anl for `npv`; `extra` appended.
    fn off_the_matrix(extra: &str) -> Result<PolicyBundle, crate::BundleError> {
        let rule = |id: &str, from: &str, to: &str, more: &str| {
            format!(
                "[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"{id}\"\n\
                 from_agent_id = \"{from}\"\nto_agent_id = \"{to}\"\n{more}\n"
            )
        };
        let listed = "allowed_context_fields = [\"x\"]";
        PolicyBundle::from_toml_str(
            &format!(
                "bundle = {{ id = \"t\" }}\n[[agents]]\nid = \"external\"\n[[agents]]\nid = \"orc\"\n\
                 allowed_tools = [\"Read\"]\n[[agents]]\nid = \"anl\"\n\
                 capabilities = [{{ code = \"npv\" }}]\n\
                 [interactions]\nallowed = [{{ from = \"external\", to = \"orc\" }}, \
                 {{ from = \"orc\", to = \"anl\" }}, {{ from = \"orc\", to = \"external\" }}]\n\
                 [multi_agent_handoffs]\ndefault_handoff_mode = \"scoped\"\n{}{}{}{extra}",
                rule("in", "external", "orc", listed),
                rule("ask", "orc", "anl", listed),
                rule("out", "orc", "external", listed),
            ),
            "t.toml",
        )
    }

    #[test]
    fn content_off_the_matrix_that_would_arrive_empty_is_named_with_the_rule_to_add() {
        let bundle = off_the_matrix("").unwrap();
        assert!(
            bundle.admission_problems().is_empty(),
            "every edge passes something"
        );
        let found = bundle.emptied_content();
        let default = "multi_agent_handoffs.default_handoff_mode".to_owned();
        assert_eq!(
            found,
            [
                EmptiedContent {
                    from: "anl".into(),
                    to: vec!["orc".into()],
                    content: EmptiedKind::CapabilityAnswer {
                        codes: vec!["npv".into()]
                    },
                    rule_id: default.clone(),
                },
                EmptiedContent {
                    from: "human".into(),
                    to: vec!["anl".into(), "orc".into()],
                    content: EmptiedKind::PersonsAnswer,
                    rule_id: default.clone(),
                },
                EmptiedContent {
                    from: "tools".into(),
                    to: vec!["orc".into()],
                    content: EmptiedKind::ToolResult,
                    rule_id: default,
                },
            ]
        );
        let said = found[0].to_string();
        for words in [
            "anl → orc: answers to capability requests (`npv`) would arrive empty",
            "no edge of the interaction matrix",
            "from_agent_id = \"anl\", to_agent_id = \"orc\"",
        ] {
            assert!(said.contains(words), "{said}");
        }
        let said = found[1].to_string();
        assert!(
            said.starts_with("human → anl, human → orc: a person's answers"),
            "{said}"
        );
        assert!(
            said.contains("from_agent_id = \"human\", to_agent_id = \"*\""),
            "{said}"
        );

        // The rules the findings ask for silence them.
        let fixed = off_the_matrix(
            "[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"answers\"\nfrom_agent_id = \"anl\"\n\
             to_agent_id = \"orc\"\nallowed_context_fields = [\"npv\"]\n\
             [[multi_agent_handoffs.agent_handoff_rules]]\nid = \"people\"\nfrom_agent_id = \"human\"\n\
             to_agent_id = \"*\"\nhandoff_mode = \"full\"\n\
             [[multi_agent_handoffs.agent_handoff_rules]]\nid = \"observations\"\nfrom_agent_id = \"tools\"\n\
             to_agent_id = \"orc\"\nhandoff_mode = \"full\"\n",
        )
        .unwrap();
        assert_eq!(fixed.emptied_content(), []);
        // A capability a lock keeps from the asker sends it no answer.
        let locked = off_the_matrix(
            "[[responsibility_locks]]\nid = \"l\"\ncapability = \"npv\"\nowner = \"anl\"\n\
             forbidden_requesters = [\"orc\"]\nreason = \"r\"\n",
        )
        .unwrap();
        assert!(
            !locked
                .emptied_content()
                .iter()
                .any(|e| matches!(e.content, EmptiedKind::CapabilityAnswer { .. }))
        );
    }

    #[test]
    fn a_rule_may_name_the_person_or_tools_as_its_sender_but_not_as_receiver() {
        let rule = |from: &str, to: &str| {
            format!(
                "[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"r\"\nfrom_agent_id = \"{from}\"\n\
                 to_agent_id = \"{to}\"\nhandoff_mode = \"full\"\n"
            )
        };
        let person = off_the_matrix(&rule("human", "orc")).unwrap();
        assert_eq!(
            person
                .spec()
                .multi_agent_handoffs
                .agent_handoff_rules
                .iter()
                .filter(|r| r.from_agent_id == "human")
                .count(),
            1
        );
        off_the_matrix(&rule("tools", "*")).unwrap();
        let typo = off_the_matrix(&rule("humna", "orc")).expect_err("not a sender");
        let said = typo.to_string();
        assert!(said.contains("unknown agent `humna`"), "{said}");
        assert!(said.contains("name `human`"), "{said}");
        assert!(
            said.contains("agent_handoff_rules/3/from_agent_id") || said.contains("t.toml:"),
            "{said}"
        );
        let backwards = off_the_matrix(&rule("orc", "human")).expect_err("not a receiver");
        let said = backwards.to_string();
        assert!(
            said.contains("`human` sends content but never receives it"),
            "{said}"
        );
    }

    #[test]
    fn audit_switched_off_is_refused_for_new_runs_with_the_setting_named() {
        let src = "bundle = { id = \"t\" }\n[[agents]]\nid = \"a\"\n[[agents]]\nid = \"b\"\n\
                   [multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\naudit_all_handoffs = false\n\
                   [[multi_agent_handoffs.agent_handoff_rules]]\nid = \"quiet\"\nfrom_agent_id = \"a\"\n\
                   to_agent_id = \"b\"\naudit_enabled = false\n";
        let bundle = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        let problems: Vec<String> = bundle
            .admission_problems()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("multi_agent_handoffs.audit_all_handoffs is false"));
        assert!(problems[1].starts_with("agent_handoff_rules `quiet`: audit_enabled is false"));
        assert!(problems[1].contains("records every handoff"));
    }

    #[test]
    fn the_receivers_max_context_tokens_caps_what_it_gets() {
        let src = "bundle = { id = \"t\" }\n[[agents]]\nid = \"a\"\n[[agents]]\nid = \"b\"\n\
                   [agents.context_requirements]\nmax_context_tokens = 40\n\
                   [interactions]\nallowed = [{ from = \"a\", to = \"b\" }]\n\
                   [multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\n";
        let bundle = PolicyBundle::from_toml_str(src, "t.toml").unwrap();
        let long = "the quick brown fox jumps over the lazy dog ".repeat(40);
        let payload = serde_json::json!({ "notes": long, "id": 7 });
        let scoped = bundle.scope_context("a", "b", InputKind::Decision, &payload);
        let audit = &scoped.audit;
        assert!(
            audit.context_before_scoping.total_tokens > 40 * 5,
            "{audit:?}"
        );
        assert!(audit.context_after_scoping.total_tokens <= 40, "{audit:?}");
        assert!(audit.conversation_translation_applied);
        assert!(
            scoped
                .decision
                .chain
                .iter()
                .any(|step| &*step.rule_id == "agents.b.context_requirements.max_context_tokens")
        );
        // Under the cap, nothing is summarised.
        let small = serde_json::json!({ "id": 7 });
        let scoped = bundle.scope_context("a", "b", InputKind::Decision, &small);
        assert_eq!(scoped.context, small);
    }

    #[test]
    fn defaults_to_higher_confidence_and_keeps_the_hash() {
        let plain = PolicyBundle::from_toml_str("bundle = { id = \"t\" }", "t.toml").unwrap();
        let explicit = PolicyBundle::from_toml_str(
            "bundle = { id = \"t\" }\n[multi_agent_handoffs]\nconflict_resolution = \"prefer_higher_confidence\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(
            plain.spec().multi_agent_handoffs.conflict_resolution,
            ConflictResolution::PreferHigherConfidence
        );
        assert_eq!(plain.hash(), explicit.hash());
    }

    #[test]
    fn human_is_accepted_and_unknown_values_are_rejected_with_a_location() {
        let human = PolicyBundle::from_toml_str(
            "bundle = { id = \"t\" }\n[multi_agent_handoffs]\nconflict_resolution = \"human\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(
            human.spec().multi_agent_handoffs.conflict_resolution,
            ConflictResolution::Human
        );
        let err = PolicyBundle::from_toml_str(
            "bundle = { id = \"t\" }\n[multi_agent_handoffs]\nconflict_resolution = \"coin_flip\"\n",
            "t.toml",
        )
        .expect_err("not a resolution");
        assert!(err.to_string().contains("coin_flip"), "{err}");
    }

    #[test]
    fn receiver_fields_must_fit_some_incoming_output_type() {
        let s: BundleSpec = toml::from_str(
            r#"
            bundle = { id = "t" }
            agents = [{ id = "a" }, { id = "b", context_requirements = { allowed_context_fields = ["score", "scroe"] } }]
            output_types = [{ id = "o", schema = { type = "object", properties = { score = { type = "number" } }, additionalProperties = false } }]
            interactions.allowed = [{ from = "a", to = "b", output_type = "o" }]
            "#,
        )
        .unwrap();
        let issues = crate::validate::validate(&s);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(
            issues[0].pointer.to_string(),
            "/agents/1/context_requirements/allowed_context_fields/1"
        );
    }

    #[test]
    fn fan_out_partial_defaults_to_false_and_keeps_the_hash() {
        let plain = PolicyBundle::from_toml_str("bundle = { id = \"t\" }", "t.toml").unwrap();
        let explicit = PolicyBundle::from_toml_str(
            "bundle = { id = \"t\" }\n[multi_agent_handoffs]\nfan_out_partial = false\n",
            "t.toml",
        )
        .unwrap();
        assert!(!plain.spec().multi_agent_handoffs.fan_out_partial);
        assert_eq!(plain.hash(), explicit.hash());
        let on = PolicyBundle::from_toml_str(
            "bundle = { id = \"t\" }\n[multi_agent_handoffs]\nfan_out_partial = true\n",
            "t.toml",
        )
        .unwrap();
        assert!(on.spec().multi_agent_handoffs.fan_out_partial);
        assert_ne!(plain.hash(), on.hash());
    }
}
