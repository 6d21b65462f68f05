//! Sealing the runs that finished (docs/checkpoints.md): after anything that drives runs,
//! each finished run not sealed at its current size is signed with the instance's key
//! (where its [`KeyPlace`] says), when it has one. The heads log's signed checkpoint is
//! kept where the store keeps its runs: a data directory's file, or a PostgreSQL
//! database's table, with the public halves of the keys that signed, so any machine can
//! check the seals (docs/postgres.md#signed-seals).

use std::path::Path;

use docket_evidence::{HeadsLog, KeyError, KeyPlace, SealError, SignerKey, VerifierKey};
use docket_store::{StreamId, WallTime};
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

/// What a process's seals remember between them: the heads log as last read (so a seal
/// reads only what was sealed since), and the key whose public half it last recorded (in
/// the data directory, or the database: once per process and key, not per seal).
#[derive(Default)]
pub(crate) struct Sealing {
    /// `None` before the first seal, which looks at every run.
    heads: Option<HeadsLog>,
    recorded_key: Option<String>,
}

/// Seals every finished run of `store` not sealed at its current size, when `place` holds
/// a signing key for `data` (nothing to do without one). The first seal of `sealing` looks
/// at every run, to catch up with what earlier processes left unsealed; later ones, given
/// `run`, at that run only.
///
/// # Errors
/// [`Unsealed`]: the key could not be read, or sealing failed.
pub(crate) async fn seal(
    store: &Store,
    data: &Path,
    place: &KeyPlace,
    sealing: &mut Sealing,
    run: Option<&StreamId>,
) -> Result<(), Unsealed> {
    let key = match docket_evidence::signer_in(data, place) {
        Ok(Some(key)) => key,
        Ok(None) => return Ok(()),
        Err(e) => return Err(Unsealed::Key(e)),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let runs = match (&sealing.heads, run) {
        (Some(_), Some(run)) => Some(std::slice::from_ref(run)),
        _ => None,
    };
    let log = sealing.heads.get_or_insert_with(HeadsLog::default);
    let mut report = docket_evidence::seal_runs(store, &key, WallTime(now), log, runs)
        .await
        .map_err(Unsealed::Seal)?;
    match store.postgres() {
        None => {
            // A key kept elsewhere has its public half beside the log, where `docket
            // verify` trusts it.
            let current = key.verifier().to_string();
            if sealing.recorded_key.as_deref() != Some(current.as_str()) {
                docket_evidence::record_verifier(data, &key.verifier()).map_err(Unsealed::Key)?;
                sealing.recorded_key = Some(current);
            }
            docket_evidence::keep_heads_checkpoint(&mut report, data, &key).map_err(Unsealed::Seal)
        }
        Some(db) => keep_in_database(db, data, &key, &report, &mut sealing.recorded_key).await,
    }
}

/// Keeps the heads checkpoint of a PostgreSQL store in its table, with the public halves
/// of the data directory's keys, which `docket verify --store` checks the seals against.
async fn keep_in_database(
    db: &PostgresStore,
    data: &Path,
    key: &SignerKey,
    report: &docket_evidence::SealReport,
    recorded_key: &mut Option<String>,
) -> Result<(), Unsealed> {
    let Some(heads) = &report.heads else {
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
    let current = key.verifier().to_string();
    if recorded_key.as_deref() != Some(current.as_str()) {
        let retired: Vec<String> = docket_evidence::verifiers(data)
            .map_err(Unsealed::Key)?
            .iter()
            .map(ToString::to_string)
            .filter(|k| *k != current)
            .collect();
        db.record_keys(Some(&current), &retired)
            .await
            .map_err(Unsealed::Database)?;
        *recorded_key = Some(current);
    }
    let note = heads
        .sign(key)
        .map_err(|e| Unsealed::Seal(SealError::from(e)))?;
    db.put_heads_checkpoint(heads.size, &note)
        .await
        .map_err(Unsealed::Database)?;
    Ok(())
}

/// Makes the first signing key of a store just created, where `place` says (unless it
/// says not to sign or already holds a key), and records its public half where the store
/// keeps them: the data directory `data`, and a PostgreSQL store's table too. The public
/// half of a key made, if one was.
///
/// # Errors
/// [`Unsealed::Key`] when the key cannot be made or read; [`Unsealed::Database`] when the
/// database does not take its public half.
pub async fn first_key(
    store: &Store,
    data: &Path,
    place: &KeyPlace,
) -> Result<Option<VerifierKey>, Unsealed> {
    let made = docket_evidence::first_key(data, place).map_err(Unsealed::Key)?;
    if let Some(db) = store.postgres()
        && let Some(key) = docket_evidence::signer_in(data, place).map_err(Unsealed::Key)?
    {
        db.record_keys(Some(&key.verifier().to_string()), &[])
            .await
            .map_err(Unsealed::Database)?;
    }
    Ok(made)
}
