//! `docket verify`'s check of run snapshots (docs/checkpoints.md#verify): each snapshot
//! file beside the log (store/FORMAT.md §12) against the state folded from the events it
//! summarises. Read-only like the rest of verify: the files are read, never repaired.
//!
//! Two passes over the log, only when some sound run has snapshots: the first keeps the
//! content of the blobs those runs' events refer to, the second decodes their events,
//! folds them, and compares the fold with each snapshot at its sequence.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use docket_decider::{REFERENCED_PAYLOAD, ReferencedPayload, RunEvent, RunState, SnapshotError};
use docket_store::{
    Hash, Payload, Scanned, SnapshotFile, StreamId, blob_hash, read_snapshot_file, scan_log,
    snapshot_files,
};

use crate::verify::{Problem, RunVerdict, VerifyError};

/// Why a snapshot that does not match matters.
const SNAPSHOT_WHY: &str = "a resume or status that starts from this snapshot would start from a state the log does not give; delete the file (the log is untouched and the next drive writes another)";

/// One run whose snapshots are checked, as the second pass folds it.
struct Folding {
    state: RunState,
    /// Its snapshot files, by sequence, still to compare.
    files: BTreeMap<u64, SnapshotFile>,
    /// The first mismatch.
    problem: Option<Problem>,
    checked: u64,
}

/// Checks the snapshot files of every run in `runs` whose chain is sound (a broken chain
/// is reported already, and its fold would mean nothing): the first mismatch of each run
/// becomes its problem, and `snapshots_checked` counts the ones that matched. `blobs` gives
/// the blobs each run's events refer to (whole payloads and referred content).
pub(crate) fn check_snapshots(
    data: &Path,
    runs: &mut BTreeMap<String, RunVerdict>,
    blobs: &HashMap<StreamId, Vec<Hash>>,
    notes: &mut Vec<String>,
) -> Result<(), VerifyError> {
    let mut folding: HashMap<StreamId, Folding> = HashMap::new();
    for file in snapshot_files(data).map_err(VerifyError::Snapshots)? {
        let Some(verdict) = runs.get(file.stream.as_str()) else {
            notes.push(format!(
                "snapshot {} belongs to no run in the log: not checked",
                file.path.display()
            ));
            continue;
        };
        if verdict.problem.is_some() {
            continue;
        }
        folding
            .entry(file.stream.clone())
            .or_insert_with(|| Folding {
                state: RunState::default(),
                files: BTreeMap::new(),
                problem: None,
                checked: 0,
            })
            .files
            .insert(file.seq, file);
    }
    if folding.is_empty() {
        return Ok(());
    }
    let wanted: HashSet<Hash> = folding
        .keys()
        .filter_map(|s| blobs.get(s))
        .flatten()
        .copied()
        .collect();
    let mut contents: HashMap<Hash, Vec<u8>> = HashMap::new();
    if !wanted.is_empty() {
        scan_log(data, |record| {
            if let Scanned::Blob {
                address, content, ..
            } = record
                && wanted.contains(&address)
                && blob_hash(content) == address
            {
                contents.insert(address, content.to_vec());
            }
        })?;
    }
    scan_log(data, |record| {
        let Scanned::Event { event, .. } = record else {
            return;
        };
        let Some(run) = folding.get_mut(&event.stream) else {
            return;
        };
        let Some((&last, _)) = run.files.last_key_value() else {
            return;
        };
        if run.problem.is_some() || event.seq > last {
            return;
        }
        match decode(&event.kind, event.kind_version, &event.payload, &contents) {
            Ok(decoded) => run.state.apply(&decoded),
            Err(why) => {
                run.problem = Some(Problem {
                    seq: Some(event.seq),
                    what: format!(
                        "event {}: cannot be decoded to check the snapshots after it: {why}",
                        event.seq
                    ),
                    why: "docket did not write this event as its build reads it".to_owned(),
                });
                return;
            }
        }
        if let Some(file) = run.files.get(&event.seq) {
            match compare(file, &event.hash, &run.state) {
                Ok(()) => run.checked += 1,
                Err(Compared::Mismatch(what)) => {
                    run.problem = Some(Problem {
                        seq: Some(event.seq),
                        what,
                        why: SNAPSHOT_WHY.to_owned(),
                    });
                }
                Err(Compared::Note(note)) => notes.push(note),
            }
        }
    })?;
    for (stream, run) in folding {
        let Some(verdict) = runs.get_mut(stream.as_str()) else {
            continue;
        };
        verdict.snapshots_checked = run.checked;
        if run.problem.is_none()
            && let Some(beyond) = run.files.range(verdict.events + 1..).next()
        {
            verdict.problem = Some(Problem {
                seq: Some(*beyond.0),
                what: format!(
                    "snapshot {} claims event {}, and the run has {} events",
                    beyond.1.path.display(),
                    beyond.0,
                    verdict.events
                ),
                why: SNAPSHOT_WHY.to_owned(),
            });
        }
        if verdict.problem.is_none() {
            verdict.problem = run.problem;
        }
    }
    Ok(())
}

/// What comparing one snapshot found other than a match.
enum Compared {
    /// Damage: the snapshot is not the fold of its events.
    Mismatch(String),
    /// Not checkable by this build (another snapshot format or decider version): ignored
    /// by resume as well.
    Note(String),
}

/// Whether the snapshot in `file` is the state `folded` at the event whose hash is
/// `event_hash`.
fn compare(file: &SnapshotFile, event_hash: &Hash, folded: &RunState) -> Result<(), Compared> {
    let at = file.seq;
    let stored = read_snapshot_file(&file.path, Some((&file.stream, at))).map_err(|e| {
        Compared::Mismatch(format!("snapshot at event {at} of {}: {e}", file.stream))
    })?;
    if stored.event_hash != *event_hash {
        return Err(Compared::Mismatch(format!(
            "snapshot at event {at} of {} is tied to event hash {}, and the log's event {at} hashes to {event_hash}",
            file.stream, stored.event_hash
        )));
    }
    match RunState::decode_snapshot(&stored.state) {
        Ok(state) if state == *folded => Ok(()),
        Ok(_) => Err(Compared::Mismatch(format!(
            "snapshot at event {at} of {} does not equal the state folded from events 1 to {at}",
            file.stream
        ))),
        Err(e @ (SnapshotError::OtherFormat { .. } | SnapshotError::OtherDecider { .. })) => {
            Err(Compared::Note(format!(
                "snapshot at event {at} of {} was written by another build ({e}): not checked, and resume folds the log instead",
                file.stream
            )))
        }
        Err(e) => Err(Compared::Mismatch(format!(
            "snapshot at event {at} of {}: {e}",
            file.stream
        ))),
    }
}

/// An event decoded as the runtime reads it: a payload kept as a blob fetched, and the
/// content an encoding-2 payload refers to put back in place.
fn decode(
    kind: &str,
    kind_version: u32,
    payload: &Payload,
    blobs: &HashMap<Hash, Vec<u8>>,
) -> Result<RunEvent, String> {
    let bytes: &[u8] = match payload {
        Payload::Inline(bytes) => bytes,
        Payload::Blob(blob) => blobs
            .get(&blob.hash)
            .ok_or_else(|| format!("its payload blob {} is missing", blob.hash))?,
    };
    if kind_version != REFERENCED_PAYLOAD {
        return RunEvent::decode(kind, bytes).map_err(|e| e.to_string());
    }
    let parsed = ReferencedPayload::parse(kind, bytes).map_err(|e| e.to_string())?;
    let plain = parsed
        .resolve(|r| blobs.get(&Hash(r.hash)).cloned())
        .map_err(|e| e.to_string())?;
    RunEvent::decode(kind, &docket_policies::canonical_json_bytes(&plain))
        .map_err(|e| e.to_string())
}
