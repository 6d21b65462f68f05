//! The compiled, indexed form of a validated bundle: agent ids interned, the interaction
//! matrix indexed by agent position, tool patterns and capability schemas parsed once.
//! Built once per bundle; every decision afterwards is a pure lookup or a short walk. Each
//! index is built by its rule's file under `rules/`; here is one field and one line each.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::canonical::{self, BundleHash};
use crate::model::BundleSpec;
use crate::rules::{capability, contract, handoff, scope, tools};
use crate::validate::{self, Issue};

/// Agent id → position, looked up on every decision and never iterated, so its order
/// cannot reach a decision; hashing keeps the lookup off the handoff path's profile.
#[expect(
    clippy::disallowed_types,
    reason = "looked up only, never iterated: no order can reach a decision"
)]
pub(crate) type AgentIndex = std::collections::HashMap<Arc<str>, usize>;

/// A validated, normalised, hashed and indexed policy bundle. Immutable.
pub struct PolicyBundle {
    pub(crate) spec: BundleSpec,
    pub(crate) hash: BundleHash,
    pub(crate) agent_ids: Vec<Arc<str>>,
    /// Lookup only (never iterated), so its order cannot leak into a decision.
    pub(crate) index: AgentIndex,
    /// The interaction matrix, indexed for deciding any pair.
    pub(crate) handoffs: handoff::Verdicts,
    /// Handoff rule index by (from, to) pattern, `*` included.
    pub(crate) handoff_rules: BTreeMap<(String, String), usize>,
    /// Capability input validators by (agent position, code).
    pub(crate) capability_schemas: capability::Schemas,
    /// Output-type validators by `id@version`.
    pub(crate) output_schemas: contract::Schemas,
    /// Tool patterns, parsed.
    pub(crate) tools: tools::Patterns,
}

impl std::fmt::Debug for PolicyBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyBundle")
            .field("id", &self.spec.bundle.id)
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
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
        let index: AgentIndex = agent_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i))
            .collect();
        let handoffs = handoff::Verdicts::compile(&spec, &index);
        let handoff_rules = scope::index_rules(&spec);
        let capability_schemas = capability::compile(&spec)?;
        let output_schemas = contract::compile(&spec)?;
        let tools = tools::Patterns::compile(&spec);
        Ok(Self {
            spec,
            hash,
            agent_ids,
            index,
            handoffs,
            handoff_rules,
            capability_schemas,
            output_schemas,
            tools,
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
