//! The compiled, indexed form of a validated bundle: agent ids interned, every handoff
//! verdict precomputed in a dense table, tool patterns and capability schemas parsed once.
//! Built once per bundle; every decision afterwards is a pure lookup or a short walk.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::canonical::{self, BundleHash};
use crate::model::BundleSpec;
use crate::rules::{capability, contract, handoff, scope};
use crate::toolpattern::ToolPattern;
use crate::validate::{self, Issue};

/// Agent id → position, looked up on every decision and never iterated, so its order
/// cannot reach a decision; hashing keeps the lookup off the handoff path's profile.
#[expect(
    clippy::disallowed_types,
    reason = "looked up only, never iterated: no order can reach a decision"
)]
pub(crate) type AgentIndex = std::collections::HashMap<Arc<str>, usize>;

/// A compiled tool pattern with the rule it comes from.
#[derive(Debug, Clone)]
pub(crate) struct PatternRule {
    pub id: Arc<str>,
    pub pattern: ToolPattern,
    pub text: Arc<str>,
    pub reason: Arc<str>,
}

/// A validated, normalised, hashed and indexed policy bundle. Immutable.
pub struct PolicyBundle {
    pub(crate) spec: BundleSpec,
    pub(crate) hash: BundleHash,
    pub(crate) agent_ids: Vec<Arc<str>>,
    /// Lookup only (never iterated), so its order cannot leak into a decision.
    pub(crate) index: AgentIndex,
    /// Every handoff verdict, precomputed.
    pub(crate) handoffs: handoff::Verdicts,
    /// Handoff rule index by (from, to) pattern, `*` included.
    pub(crate) handoff_rules: BTreeMap<(String, String), usize>,
    /// Capability input validators by (agent position, code).
    pub(crate) capability_schemas: capability::Schemas,
    /// Output-type validators by `id@version`.
    pub(crate) output_schemas: contract::Schemas,
    pub(crate) deny_patterns: Vec<PatternRule>,
    pub(crate) review_patterns: Vec<PatternRule>,
    pub(crate) allowed_tools: Vec<Vec<ToolPattern>>,
    pub(crate) must_not_tools: Vec<Vec<(Arc<str>, ToolPattern)>>,
}

impl std::fmt::Debug for PolicyBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyBundle")
            .field("id", &self.spec.bundle.id)
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

fn patterns(rules: &[crate::model::ToolPatternRule]) -> Vec<PatternRule> {
    rules
        .iter()
        .filter_map(|r| {
            ToolPattern::parse(&r.pattern)
                .ok()
                .map(|pattern| PatternRule {
                    id: r.id.as_str().into(),
                    pattern,
                    text: r.pattern.as_str().into(),
                    reason: r.reason.as_str().into(),
                })
        })
        .collect()
}

impl PolicyBundle {
    /// Validates, normalises, hashes and compiles a parsed bundle.
    pub fn from_spec(spec: BundleSpec) -> Result<Self, Vec<Issue>> {
        let issues = validate::validate(&spec);
        if !issues.is_empty() {
            return Err(issues);
        }
        let spec = canonical::normalize(spec);
        let hash = canonical::hash(&spec);
        let agent_ids: Vec<Arc<str>> = spec
            .agents
            .iter()
            .map(|a| Arc::from(a.id.as_str()))
            .collect();
        let index = agent_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i))
            .collect();
        let handoffs = handoff::Verdicts::compile(&spec, hash, &agent_ids);
        let handoff_rules = scope::index_rules(&spec);
        let capability_schemas = capability::compile(&spec)?;
        let output_schemas = contract::compile(&spec)?;
        let allowed_tools = spec
            .agents
            .iter()
            .map(|a| {
                a.allowed_tools
                    .iter()
                    .filter_map(|p| ToolPattern::parse(p).ok())
                    .collect()
            })
            .collect();
        let must_not_tools = spec
            .agents
            .iter()
            .map(|a| {
                a.must_not_tools
                    .iter()
                    .filter_map(|p| {
                        ToolPattern::parse(p)
                            .ok()
                            .map(|t| (Arc::from(p.as_str()), t))
                    })
                    .collect()
            })
            .collect();
        Ok(Self {
            deny_patterns: patterns(&spec.deny_patterns),
            review_patterns: patterns(&spec.review_patterns),
            spec,
            hash,
            agent_ids,
            index,
            handoffs,
            handoff_rules,
            capability_schemas,
            output_schemas,
            allowed_tools,
            must_not_tools,
        })
    }

    /// The bundle's hash: the identity recorded with every decision.
    pub fn hash(&self) -> BundleHash {
        self.hash
    }

    /// The normalised bundle (defaults filled, order-free lists sorted).
    pub fn spec(&self) -> &BundleSpec {
        &self.spec
    }

    /// The canonical bytes the hash is computed over.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        canonical::encode(&self.spec)
    }

    /// Agent ids in canonical (sorted) order.
    pub fn agent_ids(&self) -> impl Iterator<Item = &str> {
        self.agent_ids.iter().map(|a| &**a)
    }

    pub(crate) fn agent(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }
}
