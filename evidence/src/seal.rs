//! Sealing finished runs: each one's final checkpoint, signed, appended to the instance's
//! log of run heads (the `_heads` stream), and that log's own signed checkpoint kept in
//! `<data>/checkpoints/heads.note` ([`seal_finished`]) or, for a store that keeps it
//! itself (a PostgreSQL database), handed to the caller ([`seal_runs`])
//! (docs/checkpoints.md#sealing).
//!
//! Sealing is idempotent and catches up: every run whose last event finishes it
//! (`run.completed`, `run.failed`, `run.blocked`) and that has no seal at its current size
//! is sealed, so a crash between finishing and sealing is healed the next time. A blocked
//! run that a person overrides grows again; when it finishes again it gets a second seal
//! at its new size.

use std::path::{Path, PathBuf};

use docket_store::merkle::{TreeBuilder, event_leaf_hash};
use docket_store::{Event, EventStore, NewEvent, Payload, StoreError, StreamId, WallTime};
use futures::StreamExt as _;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{Checkpoint, CheckpointError, SignedCheckpoint, heads_origin, run_origin};
use crate::keys::{KeyError, write_atomically};
use crate::note::SignerKey;

/// The stream holding one `run.sealed` event per seal: the instance's log of run heads.
/// Run ids start with a letter or digit, so no run can take this name.
pub const HEADS_STREAM: &str = "_heads";
/// The kind of the events of [`HEADS_STREAM`].
pub const SEALED_KIND: &str = "run.sealed";
/// The version of [`RunSealed`]'s encoding.
pub const SEALED_VERSION: u32 = 1;
/// The last event kinds that finish a run (as the decider records them).
pub const FINISHING_KINDS: [&str; 3] = ["run.completed", "run.failed", "run.blocked"];

/// The payload of a `run.sealed` event (JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSealed {
    /// The run (its stream id).
    pub run_id: String,
    /// Its event count when sealed: the checkpoint's tree size.
    pub size: u64,
    /// The RFC 9162 root of its first `size` events, lower-case hex.
    pub root: String,
    /// The BLAKE3 chain hash of event `size`, lower-case hex.
    pub last_hash: String,
    /// The run's checkpoint (origin `<instance>/run/<run id>`) as a signed note.
    pub checkpoint: String,
}

/// Where `data`'s heads checkpoint is kept.
pub fn heads_checkpoint_path(data: &Path) -> PathBuf {
    data.join("checkpoints").join("heads.note")
}

/// Why sealing stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    #[error("sealing finished runs: {0}")]
    Store(#[from] StoreError),
    #[error("the log of run heads ({HEADS_STREAM}), event {seq}: {why}")]
    Heads { seq: u64, why: String },
    #[error("sealing finished runs: {0}")]
    Checkpoint(#[from] CheckpointError),
    #[error("writing the heads checkpoint: {0}")]
    File(#[from] KeyError),
}

/// What a call to [`seal_finished`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SealReport {
    /// Runs sealed now, with the size each was sealed at.
    pub sealed: Vec<(String, u64)>,
    /// Events in the heads log afterwards.
    pub heads_size: u64,
    /// The heads log's checkpoint at `heads_size` (unsigned), when the log holds a seal:
    /// what to sign and keep beside the log.
    pub heads: Option<Checkpoint>,
    /// Whether the heads checkpoint file was (re)written.
    pub checkpoint_written: bool,
}

/// Whether a stream is a run's (runs ids start with a letter or digit; the instance's
/// own streams, `_circuits` and `_heads`, with `_`).
pub fn is_run_stream(stream: &str) -> bool {
    !stream.starts_with('_')
}

async fn payload_of<S: EventStore>(store: &S, event: &Event) -> Result<Vec<u8>, SealError> {
    match &event.payload {
        Payload::Inline(bytes) => Ok(bytes.clone()),
        Payload::Blob(blob) => store
            .get_blob(&blob.hash)
            .await?
            .ok_or_else(|| SealError::Heads {
                seq: event.seq,
                why: format!("its payload blob {} is missing", blob.hash),
            }),
    }
}

/// The seals of `run` in the log of run heads, oldest first.
///
/// # Errors
/// [`SealError`]: the store, or a heads event that is not a `run.sealed` record.
pub async fn seals_of<S: EventStore>(store: &S, run: &str) -> Result<Vec<RunSealed>, SealError> {
    let heads = StreamId::new(HEADS_STREAM)?;
    let heads_len = store.head(&heads).await?.map_or(0, |h| h.seq);
    let mut reader = Box::pin(store.read(&heads, 1..=heads_len));
    let mut seals = Vec::new();
    while let Some(event) = reader.next().await {
        let event = event?;
        let bytes = payload_of(store, &event).await?;
        let seal: RunSealed = serde_json::from_slice(&bytes).map_err(|e| SealError::Heads {
            seq: event.seq,
            why: format!("its payload is not a run.sealed record: {e}"),
        })?;
        if seal.run_id == run {
            seals.push(seal);
        }
    }
    Ok(seals)
}

/// Seals every finished run of `store` not sealed at its current size with `key`, and
/// keeps the heads log's signed checkpoint in `data` (`checkpoints/heads.note`).
///
/// # Errors
/// [`SealError`]: the store, the heads log, signing or the checkpoint file.
pub async fn seal_finished<S: EventStore>(
    store: &S,
    data: &Path,
    key: &SignerKey,
    now: WallTime,
) -> Result<SealReport, SealError> {
    let mut report = seal_runs(store, key, now).await?;
    if let Some(heads) = &report.heads {
        report.checkpoint_written = write_heads_checkpoint(data, key, heads)?;
    }
    Ok(report)
}

/// Seals every finished run of `store` not sealed at its current size, with `key`, and
/// says the heads log's checkpoint ([`SealReport::heads`]) for the caller to sign and keep
/// where its store keeps it. Call it after anything that drives runs.
///
/// # Errors
/// [`SealError`]: the store, an unreadable heads event.
pub async fn seal_runs<S: EventStore>(
    store: &S,
    key: &SignerKey,
    now: WallTime,
) -> Result<SealReport, SealError> {
    let heads = StreamId::new(HEADS_STREAM)?;
    let mut tree = TreeBuilder::new();
    let mut sealed_at: std::collections::BTreeMap<String, u64> = Default::default();
    let heads_len = store.head(&heads).await?.map_or(0, |h| h.seq);
    let mut reader = Box::pin(store.read(&heads, 1..=heads_len));
    while let Some(event) = reader.next().await {
        let event = event?;
        tree.push(event_leaf_hash(&event));
        let bytes = payload_of(store, &event).await?;
        let seal: RunSealed = serde_json::from_slice(&bytes).map_err(|e| SealError::Heads {
            seq: event.seq,
            why: format!("its payload is not a run.sealed record: {e}"),
        })?;
        let size = sealed_at.entry(seal.run_id).or_default();
        *size = (*size).max(seal.size);
    }
    drop(reader);

    let mut new_events = Vec::new();
    let mut report = SealReport::default();
    for head in store.streams().await? {
        let run = head.stream.as_str();
        if !is_run_stream(run) || sealed_at.get(run).is_some_and(|&s| s >= head.seq) {
            continue;
        }
        let mut last = Box::pin(store.read(&head.stream, head.seq..=head.seq));
        let finishes = match last.next().await {
            Some(event) => FINISHING_KINDS.contains(&event?.kind.as_str()),
            None => false,
        };
        if !finishes {
            continue;
        }
        let mut run_tree = TreeBuilder::new();
        let mut last_hash = None;
        let mut events = Box::pin(store.read(&head.stream, 1..=head.seq));
        while let Some(event) = events.next().await {
            let event = event?;
            run_tree.push(event_leaf_hash(&event));
            last_hash = Some(event.hash);
        }
        let root = run_tree.root();
        let checkpoint = Checkpoint::new(run_origin(key.name(), run), run_tree.size(), root);
        let seal = RunSealed {
            run_id: run.to_owned(),
            size: run_tree.size(),
            root: root.to_hex(),
            last_hash: last_hash.map(|h| h.to_hex()).unwrap_or_default(),
            checkpoint: checkpoint.sign(key)?,
        };
        report.sealed.push((run.to_owned(), seal.size));
        new_events.push(NewEvent {
            kind: SEALED_KIND.to_owned(),
            kind_version: SEALED_VERSION,
            recorded_at: now,
            policy: None,
            payload: serde_json::to_vec(&seal).unwrap_or_default(),
        });
    }
    let mut heads_size = heads_len;
    if !new_events.is_empty() {
        let appended = store.append(&heads, heads_len, new_events).await?;
        let mut reader = Box::pin(store.read(&heads, appended.first_seq..=appended.last_seq()));
        while let Some(event) = reader.next().await {
            tree.push(event_leaf_hash(&event?));
        }
        heads_size = appended.last_seq();
    }
    report.heads_size = heads_size;
    if heads_size > 0 {
        report.heads = Some(Checkpoint::new(
            heads_origin(key.name()),
            heads_size,
            tree.root(),
        ));
    }
    Ok(report)
}

/// Writes the heads checkpoint unless the file already holds this one, signed by `key`.
fn write_heads_checkpoint(
    data: &Path,
    key: &SignerKey,
    checkpoint: &Checkpoint,
) -> Result<bool, SealError> {
    let path = heads_checkpoint_path(data);
    if let Ok(text) = std::fs::read_to_string(&path)
        && let Ok(held) = SignedCheckpoint::parse(&text)
        && held.checkpoint == *checkpoint
        && held.note.verify(&key.verifier()).is_ok()
    {
        return Ok(false);
    }
    let note = checkpoint.sign(key)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| KeyError::Io {
            op: "create",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    write_atomically(&path, note.as_bytes(), 0o644)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use docket_store::{EmbeddedStore, StoreConfig};

    use super::*;
    use crate::verify::{VerifyOptions, verify};

    fn event(kind: &str) -> NewEvent {
        NewEvent {
            kind: kind.to_owned(),
            kind_version: 1,
            recorded_at: WallTime(1),
            policy: None,
            payload: b"{}".to_vec(),
        }
    }

    fn state_of(data: &Path, run: &str) -> (&'static str, Vec<u64>) {
        let report = verify(data, &VerifyOptions::default()).unwrap();
        assert!(report.is_sound(), "{report:?}");
        let r = report.runs.iter().find(|r| r.run_id == run).unwrap();
        (r.seal_state, r.seals.iter().map(|s| s.size).collect())
    }

    #[tokio::test]
    async fn sealing_is_idempotent_catches_up_and_reseals_a_run_that_grew() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let store = EmbeddedStore::open(data, StoreConfig::default())
            .await
            .unwrap();
        let key = SignerKey::from_seed("inst", [5; 32]).unwrap();
        std::fs::create_dir_all(crate::keys::keys_dir(data)).unwrap();
        std::fs::write(
            crate::keys::keys_dir(data).join("verifier.key"),
            format!("{}\n", key.verifier()),
        )
        .unwrap();
        let run = StreamId::new("run-1").unwrap();
        let going = StreamId::new("run-2").unwrap();
        store
            .append(&run, 0, vec![event("run.requested"), event("run.blocked")])
            .await
            .unwrap();
        store
            .append(&going, 0, vec![event("run.requested")])
            .await
            .unwrap();
        let first = seal_finished(&store, data, &key, WallTime(2))
            .await
            .unwrap();
        assert_eq!(first.sealed, vec![("run-1".to_owned(), 2)]);
        assert!(first.checkpoint_written);
        assert_eq!(state_of(data, "run-1"), ("sealed", vec![2]));
        assert_eq!(state_of(data, "run-2").0, "in-progress");
        // Nothing new: nothing appended, the checkpoint file left as it is.
        let again = seal_finished(&store, data, &key, WallTime(3))
            .await
            .unwrap();
        assert_eq!(again.sealed, vec![]);
        assert!(!again.checkpoint_written);
        assert_eq!(again.heads_size, 1);
        // A crash after the append but before the checkpoint file: healed next time.
        std::fs::remove_file(heads_checkpoint_path(data)).unwrap();
        assert!(
            seal_finished(&store, data, &key, WallTime(4))
                .await
                .unwrap()
                .checkpoint_written
        );
        // Overridden, it grows; finished again, it is sealed again at its new size.
        store
            .append(&run, 2, vec![event("human.overrode")])
            .await
            .unwrap();
        assert_eq!(state_of(data, "run-1"), ("sealed-then-grew", vec![2]));
        store
            .append(&run, 3, vec![event("run.completed")])
            .await
            .unwrap();
        assert_eq!(state_of(data, "run-1"), ("not-sealed-yet", vec![2]));
        let grown = seal_finished(&store, data, &key, WallTime(5))
            .await
            .unwrap();
        assert_eq!(grown.sealed, vec![("run-1".to_owned(), 4)]);
        assert_eq!(state_of(data, "run-1"), ("sealed", vec![2, 4]));
        // --require-signed: the running run is fine, a finished unsealed one is not.
        store
            .append(&going, 1, vec![event("run.failed")])
            .await
            .unwrap();
        let strict = VerifyOptions {
            require_signed: true,
            ..VerifyOptions::default()
        };
        let report = verify(data, &strict).unwrap();
        let r2 = report.runs.iter().find(|r| r.run_id == "run-2").unwrap();
        assert!(r2.problem.is_some(), "{report:?}");
        assert!(!report.is_sound());
    }
}
