//! Sealing the runs that finished (docs/checkpoints.md): after anything that drives runs,
//! each finished run not sealed at its current size is signed with the data directory's
//! key, when it has one.

use std::path::Path;

use docket_evidence::{KeyError, SealError};
use docket_store::{EventStore, WallTime};

/// Why the finished runs were not sealed. Not fatal to what drove them: the next drive
/// seals them.
#[derive(Debug, thiserror::Error)]
pub enum Unsealed {
    /// The data directory's signing key could not be read.
    #[error("finished runs not sealed: {0}")]
    Key(#[source] KeyError),
    /// Sealing failed (the store, the heads checkpoint file); the next drive tries again.
    #[error("finished runs not sealed ({0})")]
    Seal(#[source] SealError),
}

/// Seals every finished run of `store` not sealed at its current size, when `data` has a
/// signing key (nothing to do without one).
///
/// # Errors
/// [`Unsealed`]: the key could not be read, or sealing failed.
pub async fn seal_finished<S: EventStore>(store: &S, data: &Path) -> Result<(), Unsealed> {
    let key = match docket_evidence::signer(data) {
        Ok(Some(key)) => key,
        Ok(None) => return Ok(()),
        Err(e) => return Err(Unsealed::Key(e)),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    docket_evidence::seal_finished(store, data, &key, WallTime(now))
        .await
        .map(|_| ())
        .map_err(Unsealed::Seal)
}
