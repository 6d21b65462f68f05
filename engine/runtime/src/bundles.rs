//! Bundle versions (docs/governance.md#bundle-versions): the data directory's registry of
//! policy bundles, and the handoff-rule operations of the governance API over it.
//!
//! The registry is the `_bundles` stream (a name no run id can take), one
//! `bundle.registered` event per version: the bundle's name (`bundle.id`), its version
//! number under that name (1, 2, ...), its hash, who registered it and why, the version it
//! replaces, and its source text, written once as a blob the event refers to by hash.
//! Versions are appended, never changed. A new run of a workflow whose bundle's name has
//! versions runs under the latest one ([`Runtime::start`]); a run keeps the bundle its
//! `run.requested` recorded, so runs going on and resumes never change bundle.
//!
//! Replacing a bundle's handoff rules (seed 001 Task 8's `PUT`) checks the new list as any
//! bundle, registers the result as the next version, and answers with its diff and the
//! new bundle; the recorded runs of that bundle ([`Runtime::runs_of_bundle`]) are what the
//! application layer (`docket-app`) re-decides to say which the change would have decided
//! otherwise.

use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use docket_decider::{RunEvent, RunId};
use docket_policies::{
    AdmissionProblem, BundleDiff, BundleError, Format, HandoffRuleSet, PairRules, PolicyBundle,
    RulesError,
};
use docket_store::{EventStore, Hash, NewEvent, StoreError, StreamId, blob_hash};

use crate::drive::{Runtime, RuntimeError};
use crate::workflow::Workflow;

/// The stream holding the registry, one per data directory.
pub const BUNDLES_STREAM: &str = "_bundles";

/// The kind of the registry's one event.
const REGISTERED: &str = "bundle.registered";

/// One registered version of a bundle: the payload of `bundle.registered`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleVersion {
    /// The bundle's name (its `bundle.id`).
    pub bundle: String,
    /// Its version under that name, from 1.
    pub version: u32,
    /// The bundle hash (policies/HASHING.md).
    pub hash: String,
    /// The name its source is recorded under in runs (its extension says TOML or JSON).
    pub source_name: String,
    /// The blob holding its source text (BLAKE3, hex).
    pub source_blob: String,
    /// The version it replaces (`None` for the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<u32>,
    /// Who registered it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// A registered version with its source and compiled bundle.
#[derive(Debug, Clone)]
pub struct RegisteredBundle {
    pub version: BundleVersion,
    pub source: String,
    pub bundle: Arc<PolicyBundle>,
}

/// A workflow set to run under the latest registered version of its bundle's name.
#[derive(Debug, Clone)]
pub struct LatestBundle {
    /// The workflow, its bundle source that version's.
    pub workflow: Workflow,
    /// The version.
    pub version: BundleVersion,
    /// The hash of the bundle the workflow's own file holds (the version's when equal).
    pub file_hash: String,
}

/// A registered bundle's handoff rules (`GET /api/governance/handoff-rules`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegisteredRules {
    /// The version they are read from.
    pub version: u32,
    #[serde(flatten)]
    pub rules: HandoffRuleSet,
}

/// The rules deciding one pair in a registered bundle
/// (`GET /api/governance/handoff-rules/{from_agent}/{to_agent}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegisteredPairRules {
    pub bundle: String,
    pub version: u32,
    pub hash: String,
    #[serde(flatten)]
    pub pair: PairRules,
}

/// A replacement of the handoff rules, registered as the bundle's next version.
#[derive(Debug)]
pub struct RulesRegistered {
    /// The new version.
    pub registered: BundleVersion,
    /// What changed from the version it replaces, per pair and per rule.
    pub diff: BundleDiff,
    /// The new version's bundle.
    pub bundle: PolicyBundle,
    /// Its source text (JSON).
    pub source: String,
}

/// Why the registry could not answer or record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The event log failed.
    #[error("event log: {0}")]
    Store(#[from] StoreError),
    /// The runtime failed reading a run.
    #[error(transparent)]
    Runtime(#[from] Box<RuntimeError>),
    /// An event of the registry docket cannot read.
    #[error("bundle registry (stream {BUNDLES_STREAM}), event {seq}: {message}")]
    Unreadable { seq: u64, message: String },
    /// Who or why is missing.
    #[error("registering a bundle version needs {missing}")]
    Unexplained { missing: &'static str },
    /// No version is registered (under that name).
    #[error("{}", no_versions(name.as_deref(), known))]
    NoVersions {
        name: Option<String>,
        known: Vec<String>,
    },
    /// Several bundles are registered and none was named.
    #[error("several bundles are registered ({}): say which", names.join(", "))]
    WhichBundle { names: Vec<String> },
    /// No such version.
    #[error("bundle `{bundle}` has no version {version} (its latest is {latest})")]
    UnknownVersion {
        bundle: String,
        version: u32,
        latest: u32,
    },
    /// The bundle is the latest version already.
    #[error(
        "nothing to register: bundle `{bundle}` version {version} has this hash already ({hash})"
    )]
    Unchanged {
        bundle: String,
        version: u32,
        hash: String,
    },
    /// Another version was registered meanwhile.
    #[error(
        "another version of a bundle was registered meanwhile; nothing was recorded: read the \
         versions again and retry"
    )]
    Conflict,
    /// The bundle given is not valid.
    #[error(transparent)]
    Invalid(#[from] BundleError),
    /// The bundle is valid but new runs would refuse it.
    #[error("{bundle}: new runs would refuse it: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NotAdmitted {
        bundle: String,
        problems: Vec<AdmissionProblem>,
    },
    /// A handoff-rule request that cannot be answered (an unknown agent, invalid rules).
    #[error(transparent)]
    Rules(#[from] RulesError),
}

impl RegistryError {
    /// The problems of a refused replacement, each naming its rule and field (for an API's
    /// structured answer); empty for any other error.
    #[must_use]
    pub fn rule_problems(&self) -> &[docket_policies::RuleProblem] {
        match self {
            Self::Rules(RulesError::Refused { problems }) => problems,
            _ => &[],
        }
    }
}

fn no_versions(name: Option<&str>, known: &[String]) -> String {
    match name {
        Some(name) if known.is_empty() => {
            format!("no version of bundle `{name}` is registered in this data directory")
        }
        Some(name) => format!(
            "no version of bundle `{name}` is registered in this data directory (registered: {})",
            known.join(", ")
        ),
        None => "no bundle is registered in this data directory".to_owned(),
    }
}

impl From<RuntimeError> for RegistryError {
    fn from(e: RuntimeError) -> Self {
        Self::Runtime(Box::new(e))
    }
}

fn stream() -> Result<StreamId, RegistryError> {
    Ok(StreamId::new(BUNDLES_STREAM)?)
}

/// Every version recorded, in order, with the stream's version.
async fn read_all<S: EventStore>(store: &S) -> Result<(u64, Vec<BundleVersion>), RegistryError> {
    let stream = stream()?;
    let Some(head) = store.head(&stream).await? else {
        return Ok((0, Vec::new()));
    };
    let mut out = Vec::new();
    let mut reader = Box::pin(store.read(&stream, 1..=head.seq));
    while let Some(event) = reader.next().await {
        let event = event?;
        let bad = |message: String| RegistryError::Unreadable {
            seq: event.seq,
            message,
        };
        if event.kind != REGISTERED {
            return Err(bad(format!("unknown kind {:?}", event.kind)));
        }
        let bytes = crate::drive::payload_bytes(store, &event).await?;
        let v: BundleVersion = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        out.push(v);
    }
    Ok((head.seq, out))
}

/// The names registered, in order of first registration.
fn names(versions: &[BundleVersion]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for v in versions {
        if !names.contains(&v.bundle) {
            names.push(v.bundle.clone());
        }
    }
    names
}

/// The name meant: `name`, else the only one registered.
fn resolve(name: Option<&str>, versions: &[BundleVersion]) -> Result<String, RegistryError> {
    let known = names(versions);
    match name {
        Some(n) if known.iter().any(|k| k == n) => Ok(n.to_owned()),
        Some(n) => Err(RegistryError::NoVersions {
            name: Some(n.to_owned()),
            known,
        }),
        None => match known.as_slice() {
            [] => Err(RegistryError::NoVersions { name: None, known }),
            [one] => Ok(one.clone()),
            _ => Err(RegistryError::WhichBundle { names: known }),
        },
    }
}

fn compile(source: &str, name: &str) -> Result<PolicyBundle, BundleError> {
    let format = Format::from_name(name).unwrap_or(Format::Toml);
    docket_policies::parse(source, name, format)
}

impl<S: EventStore + 'static> Runtime<S> {
    /// Every registered bundle version, in the order registered. Reads only.
    ///
    /// # Errors
    /// [`RegistryError::Store`] or [`RegistryError::Unreadable`].
    pub async fn bundle_versions(&self) -> Result<Vec<BundleVersion>, RegistryError> {
        Ok(read_all(self.store()).await?.1)
    }

    /// Version `version` (the latest when `None`) of the bundle named `name` (the only one
    /// registered when `None`), with its source and compiled bundle.
    ///
    /// # Errors
    /// [`RegistryError`]: none registered, an unknown name or version, an unreadable one.
    pub(crate) async fn registered_bundle(
        &self,
        name: Option<&str>,
        version: Option<u32>,
    ) -> Result<RegisteredBundle, RegistryError> {
        let (_, versions) = read_all(self.store()).await?;
        self.load_version(&versions, name, version).await
    }

    async fn load_version(
        &self,
        versions: &[BundleVersion],
        name: Option<&str>,
        version: Option<u32>,
    ) -> Result<RegisteredBundle, RegistryError> {
        let name = resolve(name, versions)?;
        let mine: Vec<&BundleVersion> = versions.iter().filter(|v| v.bundle == name).collect();
        let latest = mine.last().map_or(0, |v| v.version);
        let chosen = match version {
            None => mine.last().copied(),
            Some(n) => mine.iter().find(|v| v.version == n).copied(),
        };
        let Some(chosen) = chosen else {
            return Err(RegistryError::UnknownVersion {
                bundle: name,
                version: version.unwrap_or(0),
                latest,
            });
        };
        let unreadable = |message: String| RegistryError::Unreadable {
            seq: 0,
            message: format!("{} version {}: {message}", chosen.bundle, chosen.version),
        };
        let blob = Hash::from_hex(&chosen.source_blob)
            .ok_or_else(|| unreadable(format!("bad blob hash {}", chosen.source_blob)))?;
        let bytes = self.store().get_blob(&blob).await?.ok_or_else(|| {
            unreadable(format!(
                "its source (blob {}) is missing",
                chosen.source_blob
            ))
        })?;
        let source = String::from_utf8(bytes).map_err(|e| unreadable(e.to_string()))?;
        let bundle = self.compiled(&source, &chosen.source_name)?;
        Ok(RegisteredBundle {
            version: chosen.clone(),
            source,
            bundle,
        })
    }

    /// Registers `source` (named `source_name`: its extension says TOML or JSON) as the
    /// next version of the bundle it declares, recorded with `by` and `reason`. Refused
    /// when invalid, when new runs would refuse it, or when it is the latest version
    /// already.
    ///
    /// # Errors
    /// [`RegistryError`].
    pub async fn register_bundle(
        &self,
        source: &str,
        source_name: &str,
        by: &str,
        reason: &str,
    ) -> Result<BundleVersion, RegistryError> {
        let bundle = compile(source, source_name)?;
        let problems = bundle.admission_problems();
        if !problems.is_empty() {
            return Err(RegistryError::NotAdmitted {
                bundle: source_name.to_owned(),
                problems,
            });
        }
        let (at, versions) = read_all(self.store()).await?;
        self.append_version(at, &versions, &bundle, source, source_name, by, reason)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn append_version(
        &self,
        at: u64,
        versions: &[BundleVersion],
        bundle: &PolicyBundle,
        source: &str,
        source_name: &str,
        by: &str,
        reason: &str,
    ) -> Result<BundleVersion, RegistryError> {
        for (value, missing) in [(by, "who registers it"), (reason, "why")] {
            if value.trim().is_empty() {
                return Err(RegistryError::Unexplained { missing });
            }
        }
        let name = bundle.spec().bundle.id.clone();
        let latest = versions.iter().rev().find(|v| v.bundle == name);
        let hash = bundle.hash().to_hex();
        if let Some(l) = latest
            && l.hash == hash
        {
            return Err(RegistryError::Unchanged {
                bundle: name,
                version: l.version,
                hash,
            });
        }
        let number = latest.map_or(1, |l| l.version + 1);
        // The name runs record: the bundle and version, in the source's own format.
        let ext = match Format::from_name(source_name) {
            Some(Format::Json) => "json",
            _ => "toml",
        };
        let version = BundleVersion {
            bundle: name.clone(),
            version: number,
            hash,
            source_name: format!("{name}@{number}.{ext}"),
            source_blob: blob_hash(source.as_bytes()).to_hex(),
            replaces: latest.map(|l| l.version),
            by: by.to_owned(),
            reason: reason.to_owned(),
            at_ms: self.now_ms(),
        };
        let event = NewEvent {
            kind: REGISTERED.to_owned(),
            kind_version: 1,
            recorded_at: self.wall_time(),
            policy: None,
            payload: docket_policies::canonical_json_bytes(&version),
        };
        match self
            .store()
            .append_with_blobs(
                &stream()?,
                at,
                vec![event],
                vec![source.as_bytes().to_vec()],
            )
            .await
        {
            Ok(_) => {
                tracing::info!(bundle = %name, version = number, by, "bundle version registered");
                Ok(version)
            }
            Err(StoreError::Conflict { .. }) => Err(RegistryError::Conflict),
            Err(e) => Err(e.into()),
        }
    }

    /// `workflow` with its bundle replaced by the latest registered version of the same
    /// name, and that version; `None` when the name has no version (the workflow's own
    /// file is used). [`Runtime::start`] calls it for every new run.
    ///
    /// # Errors
    /// [`RegistryError`] for an unreadable registry or a workflow bundle that does not parse.
    pub async fn with_latest_bundle(
        &self,
        workflow: &Workflow,
    ) -> Result<Option<LatestBundle>, RegistryError> {
        let (_, versions) = read_all(self.store()).await?;
        if versions.is_empty() {
            return Ok(None);
        }
        let own = self.compiled(&workflow.bundle_source, &workflow.bundle_source_name)?;
        let name = own.spec().bundle.id.as_str();
        if !versions.iter().any(|v| v.bundle == name) {
            return Ok(None);
        }
        let latest = self.load_version(&versions, Some(name), None).await?;
        let mut chosen = workflow.clone();
        chosen.bundle_source = latest.source;
        chosen.bundle_source_name = latest.version.source_name.clone();
        Ok(Some(LatestBundle {
            workflow: chosen,
            version: latest.version,
            file_hash: own.hash().to_hex(),
        }))
    }

    /// The handoff rules of a registered bundle's latest version (`name`: the only one
    /// registered when `None`).
    ///
    /// # Errors
    /// [`RegistryError`].
    pub async fn handoff_rules(
        &self,
        name: Option<&str>,
    ) -> Result<RegisteredRules, RegistryError> {
        let b = self.registered_bundle(name, None).await?;
        Ok(RegisteredRules {
            version: b.version.version,
            rules: b.bundle.handoff_rule_set(),
        })
    }

    /// The rules deciding `from → to` in a registered bundle's latest version, with the
    /// decision they give.
    ///
    /// # Errors
    /// [`RegistryError`]; [`RegistryError::Rules`] for an agent the bundle does not declare.
    pub async fn pair_rules(
        &self,
        name: Option<&str>,
        from: &str,
        to: &str,
    ) -> Result<RegisteredPairRules, RegistryError> {
        let b = self.registered_bundle(name, None).await?;
        let pair = b.bundle.pair_rules(from, to)?;
        Ok(RegisteredPairRules {
            bundle: b.version.bundle,
            version: b.version.version,
            hash: b.version.hash,
            pair,
        })
    }

    /// Replaces the handoff rules of a registered bundle's latest version by `rules` (a
    /// JSON list in the governance API's shape), registers the result as its next version
    /// (by `by`, for `reason`), and says what changed.
    ///
    /// # Errors
    /// [`RegistryError::Rules`] naming each rule and field that is wrong, and the
    /// registry's errors.
    pub async fn replace_handoff_rules(
        &self,
        name: Option<&str>,
        rules: &Value,
        by: &str,
        reason: &str,
    ) -> Result<RulesRegistered, RegistryError> {
        let (at, versions) = read_all(self.store()).await?;
        let base = self.load_version(&versions, name, None).await?;
        let next = base.version.version + 1;
        let bundle = &base.version.bundle;
        let replacement = base
            .bundle
            .replace_handoff_rules(rules, &format!("{bundle}@{next}.json"))?;
        let registered = self
            .append_version(
                at,
                &versions,
                &replacement.bundle,
                &replacement.source,
                "rules.json",
                by,
                reason,
            )
            .await?;
        Ok(RulesRegistered {
            registered,
            diff: replacement.diff,
            bundle: replacement.bundle,
            source: replacement.source,
        })
    }

    /// Every recorded run of the bundle named `name`, with its events, in id order: what
    /// a what-if of a new version of that bundle re-decides.
    ///
    /// # Errors
    /// [`RegistryError`] when the run list or a run's log cannot be read.
    pub async fn runs_of_bundle(
        &self,
        name: &str,
    ) -> Result<Vec<(RunId, Vec<RunEvent>)>, RegistryError> {
        let mut runs: Vec<(RunId, Vec<RunEvent>)> = Vec::new();
        for summary in self.run_summaries().await? {
            let events: Vec<RunEvent> = self
                .events(&summary.run_id)
                .await?
                .into_iter()
                .map(|e| e.event)
                .collect();
            let Some(RunEvent::RunRequested(run)) = events.first() else {
                continue;
            };
            // Only runs of this bundle: another bundle's agents are other agents.
            let recorded = self.compiled(&run.bundle_source, &run.bundle_source_name);
            if recorded.is_ok_and(|b| b.spec().bundle.id == name) {
                runs.push((summary.run_id, events));
            }
        }
        Ok(runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_store::{EmbeddedStore, StoreConfig};

    const V1: &str = r#"
bundle = { id = "small" }
agents = [{ id = "external" }, { id = "worker" }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

    #[tokio::test]
    async fn versions_are_appended_with_who_and_why_and_never_rewritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
            .await
            .expect("store");
        let rt = Runtime::new(store);
        assert!(matches!(
            rt.registered_bundle(None, None).await,
            Err(RegistryError::NoVersions { name: None, .. })
        ));
        let e = rt.register_bundle(V1, "small.toml", "ana", " ").await;
        assert!(
            matches!(e, Err(RegistryError::Unexplained { missing: "why" })),
            "{e:?}"
        );

        let v1 = rt
            .register_bundle(V1, "small.toml", "ana", "first")
            .await
            .expect("registered");
        assert_eq!(
            (v1.bundle.as_str(), v1.version, v1.replaces),
            ("small", 1, None)
        );
        assert_eq!(v1.source_name, "small@1.toml");
        // The same bundle again: nothing to register.
        let e = rt.register_bundle(V1, "again.toml", "bo", "again").await;
        assert!(
            matches!(e, Err(RegistryError::Unchanged { version: 1, .. })),
            "{e:?}"
        );

        let rules = serde_json::json!([
            {"id": "w", "from_agent_id": "worker", "to_agent_id": "external", "blocked_context_fields": ["secret"]}
        ]);
        let replaced = rt
            .replace_handoff_rules(None, &rules, "bo", "no secrets out")
            .await
            .expect("replaced");
        assert_eq!(
            (replaced.registered.version, replaced.registered.replaces),
            (2, Some(1))
        );
        assert!(rt.runs_of_bundle("small").await.expect("runs").is_empty());
        // Version 1 reads back as registered, its source from its blob.
        let read = rt
            .registered_bundle(Some("small"), Some(1))
            .await
            .expect("v1");
        assert_eq!((read.version, read.source.as_str()), (v1.clone(), V1));
        let latest = rt.registered_bundle(None, None).await.expect("latest");
        assert_eq!(latest.version, replaced.registered);
        assert_eq!(latest.bundle.hash().to_hex(), replaced.registered.hash);
        let e = rt.registered_bundle(Some("small"), Some(9)).await;
        assert!(
            matches!(e, Err(RegistryError::UnknownVersion { latest: 2, .. })),
            "{e:?}"
        );

        // Registering from a stale read of the registry: refused, nothing recorded.
        let (_, versions) = read_all(rt.store()).await.expect("read");
        let bundle = compile(V1, "small.toml").expect("compiles");
        let e = rt
            .append_version(1, &versions, &bundle, V1, "small.toml", "cy", "stale")
            .await;
        assert!(matches!(e, Err(RegistryError::Conflict)), "{e:?}");
        assert_eq!(rt.bundle_versions().await.expect("versions").len(), 2);
    }
}
