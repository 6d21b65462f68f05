//! Sealing the runs that finished (docs/checkpoints.md): after anything that drives runs,
//! each finished run not sealed at its current size is signed with the data directory's
//! key, when it has one. The heads log's signed checkpoint is kept where the store keeps
//! its runs: a data directory's file, or a PostgreSQL database's table, with the public
//! halves of the keys that signed, so any machine can check the seals
//! (docs/postgres.md#signed-seals).

use std::path::Path;

use docket_evidence::{KeyError, SealError, SignerKey};
use docket_store::WallTime;
use docket_store_postgres::{PgError, PostgresStore};

use crate::Store;

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
    /// The runs were sealed, but the database did not take the keys or the heads
    /// checkpoint; the next drive tries again.
    #[error("finished runs sealed, but the heads checkpoint not kept ({0})")]
    Database(#[source] PgError),
}

/// Seals every finished run of `store` not sealed at its current size, when `data` has a
/// signing key (nothing to do without one).
///
/// # Errors
/// [`Unsealed`]: the key could not be read, or sealing failed.
pub async fn seal_finished(store: &Store, data: &Path) -> Result<(), Unsealed> {
    let key = match docket_evidence::signer(data) {
        Ok(Some(key)) => key,
        Ok(None) => return Ok(()),
        Err(e) => return Err(Unsealed::Key(e)),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    match store.postgres() {
        None => docket_evidence::seal_finished(store, data, &key, WallTime(now))
            .await
            .map(|_| ())
            .map_err(Unsealed::Seal),
        Some(db) => seal_in_database(store, db, data, &key, WallTime(now)).await,
    }
}

/// Seals in a PostgreSQL store: the seals go to its heads log like any event; the heads
/// checkpoint and the public halves of the data directory's keys go to its tables, which
/// `docket verify --store` checks the seals against.
async fn seal_in_database(
    store: &Store,
    db: &PostgresStore,
    data: &Path,
    key: &SignerKey,
    now: WallTime,
) -> Result<(), Unsealed> {
    let report = docket_evidence::seal_runs(store, key, now)
        .await
        .map_err(Unsealed::Seal)?;
    let Some(heads) = report.heads else {
        return Ok(());
    };
    // Nothing sealed now and the database's checkpoint already covers the log: the usual
    // case after a drive, one small query.
    if report.sealed.is_empty()
        && db
            .latest_heads_checkpoint()
            .await
            .map_err(Unsealed::Database)?
            .is_some_and(|held| held.size >= heads.size)
    {
        return Ok(());
    }
    let keys = docket_evidence::verifiers(data).map_err(Unsealed::Key)?;
    let current = key.verifier().to_string();
    let retired: Vec<String> = keys
        .iter()
        .map(ToString::to_string)
        .filter(|k| *k != current)
        .collect();
    db.record_keys(&current, &retired)
        .await
        .map_err(Unsealed::Database)?;
    let note = heads
        .sign(key)
        .map_err(|e| Unsealed::Seal(SealError::from(e)))?;
    db.put_heads_checkpoint(heads.size, &note)
        .await
        .map_err(Unsealed::Database)?;
    Ok(())
}
