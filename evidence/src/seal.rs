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

use std::collections::BTreeMap;
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
    let mut report = seal_runs(store, key, now, &mut HeadsLog::default(), None).await?;
    keep_heads_checkpoint(&mut report, data, key)?;
    Ok(report)
}

/// Writes the heads checkpoint of `report` to `data`'s file (`checkpoints/heads.note`)
/// unless the file already holds it; notes in `report` whether it wrote.
///
/// # Errors
/// [`SealError`]: signing or the file.
pub fn keep_heads_checkpoint(
    report: &mut SealReport,
    data: &Path,
    key: &SignerKey,
) -> Result<(), SealError> {
    if let Some(heads) = &report.heads {
        report.checkpoint_written = write_heads_checkpoint(data, key, heads)?;
    }
    Ok(())
}

/// The log of run heads as a process last read it: how far, its tree, and the largest
/// size each run was sealed at. Kept between seals, so that each reads only the seals
/// appended since (by this process or another).
#[derive(Clone, Debug, Default)]
pub struct HeadsLog {
    len: u64,
    tree: TreeBuilder,
    sealed_at: BTreeMap<String, u64>,
}

impl HeadsLog {
    /// Reads the seals appended since the last read.
    async fn catch_up<S: EventStore>(
        &mut self,
        store: &S,
        heads: &StreamId,
    ) -> Result<(), SealError> {
        let len = store.head(heads).await?.map_or(0, |h| h.seq);
        if len < self.len {
            // Not the log this was read from: read it whole.
            *self = HeadsLog::default();
        }
        if len == self.len {
            return Ok(());
        }
        let mut reader = Box::pin(store.read(heads, self.len + 1..=len));
        while let Some(event) = reader.next().await {
            let event = event?;
            let bytes = payload_of(store, &event).await?;
            let seal: RunSealed = serde_json::from_slice(&bytes).map_err(|e| SealError::Heads {
                seq: event.seq,
                why: format!("its payload is not a run.sealed record: {e}"),
            })?;
            self.tree.push(event_leaf_hash(&event));
            let size = self.sealed_at.entry(seal.run_id).or_default();
            *size = (*size).max(seal.size);
            self.len = event.seq;
        }
        Ok(())
    }
}

/// Seals every finished run of `store` (or of `runs` only) not sealed at its current
/// size, with `key`, and says the heads log's checkpoint ([`SealReport::heads`]) for the
/// caller to sign and keep where its store keeps it. `heads` is the heads log as last
/// read, brought up to date here. Call it after anything that drives runs; `runs` after a
/// drive of known runs, once a whole pass has caught up with what earlier processes left.
///
/// # Errors
/// [`SealError`]: the store, an unreadable heads event.
pub async fn seal_runs<S: EventStore>(
    store: &S,
    key: &SignerKey,
    now: WallTime,
    heads: &mut HeadsLog,
    runs: Option<&[StreamId]>,
) -> Result<SealReport, SealError> {
    let heads_id = StreamId::new(HEADS_STREAM)?;
    heads.catch_up(store, &heads_id).await?;
    let candidates = match runs {
        None => store.streams().await?,
        Some(runs) => {
            let mut held = Vec::with_capacity(runs.len());
            for run in runs {
                if let Some(head) = store.head(run).await? {
                    held.push(head);
                }
            }
            held
        }
    };

    let mut new_events = Vec::new();
    let mut report = SealReport::default();
    for head in candidates {
        let run = head.stream.as_str();
        if !is_run_stream(run) || heads.sealed_at.get(run).is_some_and(|&s| s >= head.seq) {
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
    if !new_events.is_empty() {
        // Appended at the length read: a seal appended meanwhile by another process is a
        // conflict, and the next seal reads it and seals what is left.
        store.append(&heads_id, heads.len, new_events).await?;
        heads.catch_up(store, &heads_id).await?;
    }
    report.heads_size = heads.len;
    if heads.len > 0 {
        report.heads = Some(Checkpoint::new(
            heads_origin(key.name()),
            heads.len,
            heads.tree.root(),
        ));
    }
    Ok(report)
}

/// What [`publish_checkpoint`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Published {
    /// The checkpoint was written to this file.
    Written(PathBuf),
    /// This file already held the same checkpoint.
    Already(PathBuf),
}

/// Why a checkpoint was not published.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The note is not a signed checkpoint.
    #[error("the checkpoint to publish does not parse: {0}")]
    Malformed(#[source] CheckpointError),
    /// A different checkpoint is kept at the same size: the log was rewritten since.
    #[error(
        "{path} holds another checkpoint at size {size} than the one signed now: the heads log was rewritten since it was kept; nothing was replaced"
    )]
    Differs { path: PathBuf, size: u64 },
    /// The directory or the file.
    #[error(transparent)]
    File(#[from] KeyError),
}

/// Keeps the signed checkpoint `note` in `dir` as `heads-SIZE.note` (created with the
/// directory if need be, atomically), where the log's writer cannot rewrite it
/// (docs/checkpoints.md#publishing-checkpoints). A different checkpoint already kept at
/// that size is never replaced.
///
/// # Errors
/// [`PublishError`]: a note that does not parse, a different one kept, the file system.
pub fn publish_checkpoint(dir: &Path, note: &str) -> Result<Published, PublishError> {
    let size = SignedCheckpoint::parse(note)
        .map_err(PublishError::Malformed)?
        .checkpoint
        .size;
    let path = dir.join(format!("heads-{size}.note"));
    match std::fs::read_to_string(&path) {
        Ok(kept) if kept == note => return Ok(Published::Already(path)),
        Ok(_) => return Err(PublishError::Differs { path, size }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(KeyError::Io {
                op: "read",
                path,
                source,
            }
            .into());
        }
    }
    std::fs::create_dir_all(dir).map_err(|source| KeyError::Io {
        op: "create",
        path: dir.to_path_buf(),
        source,
    })?;
    write_atomically(&path, note.as_bytes(), 0o644)?;
    Ok(Published::Written(path))
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

    /// Two processes sealing one store, each with the heads log as it last read it: one
    /// seals only the run it drove; the other, which read the log before, reads that seal
    /// before sealing and seals the rest; the heads checkpoint each ends with is the one a
    /// fresh read of the whole log gives.
    #[tokio::test]
    async fn seals_of_two_processes_read_only_what_was_sealed_since() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let store = EmbeddedStore::open(data, StoreConfig::default())
            .await
            .unwrap();
        let key = SignerKey::from_seed("inst", [6; 32]).unwrap();
        let (a, b) = (
            StreamId::new("run-a").unwrap(),
            StreamId::new("run-b").unwrap(),
        );
        for run in [&a, &b] {
            store
                .append(run, 0, vec![event("run.requested"), event("run.completed")])
                .await
                .unwrap();
        }
        let (mut one, mut two) = (HeadsLog::default(), HeadsLog::default());
        // `two` has read the (empty) heads log before `one` seals.
        let nothing = seal_runs(&store, &key, WallTime(2), &mut two, Some(&[])).await;
        assert_eq!(nothing.unwrap().sealed, vec![]);
        let only_a = seal_runs(
            &store,
            &key,
            WallTime(3),
            &mut one,
            Some(std::slice::from_ref(&a)),
        )
        .await
        .unwrap();
        assert_eq!(only_a.sealed, vec![("run-a".to_owned(), 2)]);
        assert_eq!(only_a.heads_size, 1);
        // `two` catches up before it seals: run-a is not sealed twice.
        let rest = seal_runs(&store, &key, WallTime(4), &mut two, None)
            .await
            .unwrap();
        assert_eq!(rest.sealed, vec![("run-b".to_owned(), 2)]);
        // `one` reads the seal `two` appended, and seals nothing again.
        let after = seal_runs(&store, &key, WallTime(5), &mut one, Some(&[a, b]))
            .await
            .unwrap();
        assert_eq!(after.sealed, vec![]);
        let fresh = seal_runs(&store, &key, WallTime(6), &mut HeadsLog::default(), None)
            .await
            .unwrap();
        assert_eq!(fresh.sealed, vec![]);
        assert_eq!(fresh.heads_size, 2);
        assert_eq!(after.heads, fresh.heads);
        assert_eq!(rest.heads, fresh.heads);
    }
}
