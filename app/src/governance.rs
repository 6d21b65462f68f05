//! What a bundle change affects (docs/governance.md#bundle-versions): a replacement of a
//! registered bundle's handoff rules, registered by the runtime, and the recorded runs of
//! that bundle it would have decided otherwise, re-decided by replay's what-if.

use docket_policies::{BundleDiff, PolicyBundle};
use docket_replay::Affected;
use docket_runtime::{BundleVersion, RegistryError, Runtime};
use docket_store::EventStore;
use serde::Serialize;
use serde_json::Value;

/// A replacement of the handoff rules, registered (`PUT /api/governance/handoff-rules`,
/// `docket policy set-rules`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RulesReplaced {
    /// The new version.
    pub registered: BundleVersion,
    /// What changed from the version it replaces, per pair and per rule.
    pub diff: BundleDiff,
    /// The recorded runs of this bundle the change would have decided otherwise.
    pub affected: Affected,
}

/// Why a replacement was not registered, or its effect not said.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplaceError {
    /// The registry refused or failed (the version is not registered).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A recorded run could not be re-decided (the version is registered).
    #[error("run {run}: {message}")]
    Replay {
        /// The run.
        run: String,
        /// Why.
        message: String,
    },
}

/// Replaces the handoff rules of a registered bundle's latest version by `rules` (a JSON
/// list in the governance API's shape), registers the result as its next version (by
/// `by`, for `reason`), and says what changed and which recorded runs of the bundle it
/// would have decided otherwise.
///
/// # Errors
/// [`ReplaceError::Registry`] as [`Runtime::replace_handoff_rules`] (nothing registered);
/// [`ReplaceError::Replay`] for a recorded run that could not be re-decided.
pub async fn replace_handoff_rules<S: EventStore + 'static>(
    runtime: &Runtime<S>,
    name: Option<&str>,
    rules: &Value,
    by: &str,
    reason: &str,
) -> Result<RulesReplaced, ReplaceError> {
    let replaced = runtime
        .replace_handoff_rules(name, rules, by, reason)
        .await?;
    let affected = affected_runs(
        runtime,
        &replaced.registered.bundle,
        &replaced.bundle,
        &replaced.source,
        &replaced.registered.source_name,
    )
    .await?;
    Ok(RulesReplaced {
        registered: replaced.registered,
        diff: replaced.diff,
        affected,
    })
}

/// What-if of every recorded run of the bundle named `name` under `bundle` (source text
/// `source`, named `source_name`).
///
/// # Errors
/// [`ReplaceError::Registry`] when the runs cannot be read, [`ReplaceError::Replay`] for
/// a run that cannot be re-decided.
pub async fn affected_runs<S: EventStore + 'static>(
    runtime: &Runtime<S>,
    name: &str,
    bundle: &PolicyBundle,
    source: &str,
    source_name: &str,
) -> Result<Affected, ReplaceError> {
    let runs = runtime.runs_of_bundle(name).await?;
    docket_replay::affected_runs(
        runs.iter()
            .map(|(id, events)| (id.as_str(), events.as_slice())),
        bundle,
        source,
        source_name,
    )
    .map_err(|(run, e)| ReplaceError::Replay {
        run,
        message: e.to_string(),
    })
}
