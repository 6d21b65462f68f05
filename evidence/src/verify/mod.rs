//! `docket verify`: everything an auditor can check in a data directory, read-only
//! (docs/checkpoints.md#verify).
//!
//! The log is read with [`docket_store::scan_log`]: no lock, no index, no write, so it
//! works while another process drives a run. For every stream it checks each chain link
//! and hash and every blob; for runs it recomputes the RFC 9162 tree and holds it against
//! the run's seals in the log of run heads; for that log, its chain, its tree against its
//! signed checkpoint, and every seal's signature; and, given an auditor's earlier
//! checkpoint, that the log now is an extension of it, by a consistency proof.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

mod store;
pub use store::{StoreTrust, verify_store};

use docket_decider::{
    COMMITTED_PAYLOAD, CommittedPayload, DisclosureDigest, REFERENCED_PAYLOAD, ReferencedPayload,
    digest_text, disclosure_digest, open_disclosure,
};
use docket_store::merkle::{
    Leaves, TreeBuilder, TreeHash, consistency_proof, leaf_hash, root, verify_consistency,
};
use docket_store::{
    BlobRef, Event, Hash, LogEnd, Payload, ScanError, Scanned, StreamId, blob_hash, event_hash,
    genesis, scan_log,
};
use serde::Serialize;

use crate::checkpoint::{SignedCheckpoint, Subject, heads_origin, run_origin};
use crate::keys::{self, KeyError};
use crate::note::VerifierKey;
use crate::seal::{FINISHING_KINDS, HEADS_STREAM, RunSealed, heads_checkpoint_path, is_run_stream};

/// What to verify and against what.
#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    /// Only this run (its seals and the heads log are still checked); `None`: every run.
    pub run: Option<String>,
    /// A signed checkpoint an auditor kept earlier (the note's text).
    pub checkpoint: Option<String>,
    /// Checkpoints published earlier where the log's writer cannot rewrite them (the
    /// notes' texts, `docket verify --against DIR`): the log must extend every one.
    pub against: Vec<String>,
    /// The keys to trust; `None`: the data directory's own (current and retired).
    pub keys: Option<Vec<VerifierKey>>,
    /// A finished run without a verified seal, or no key at all, is a failure.
    pub require_signed: bool,
}

/// Why nothing could be verified at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error(transparent)]
    Keys(#[from] KeyError),
    #[error("there is no run {run} in {data}")]
    UnknownRun { run: String, data: String },
    #[error("the snapshots beside the log cannot be listed: {0}")]
    Snapshots(docket_store::StoreError),
    /// The store could not be read (a store verified through [`verify_store`]).
    #[error("the store cannot be read: {0}")]
    Store(docket_store::StoreError),
}

/// The first thing wrong with a run, the heads log or the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The event concerned, when one is.
    pub seq: Option<u64>,
    /// What is wrong.
    pub what: String,
    /// Why it matters.
    pub why: String,
}

/// A seal of a run found in the heads log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SealSeen {
    /// Its event in the heads log.
    pub heads_seq: u64,
    pub size: u64,
    /// `name+keyid` of the key whose signature verified, `None` when none could be checked.
    pub signed_by: Option<String>,
    /// The run's signed checkpoint as recorded (a C2SP signed note): what an auditor keeps.
    pub checkpoint: String,
}

/// The verdict on one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunVerdict {
    pub run_id: String,
    pub events: u64,
    /// Its last event finishes it.
    pub finished: bool,
    /// The RFC 9162 root of its events (hex), when its chain is sound.
    pub root: Option<String>,
    pub seals: Vec<SealSeen>,
    /// `sealed`, `sealed-then-grew`, `not-sealed-yet`, `unsigned`, `in-progress`.
    pub seal_state: &'static str,
    /// Snapshot files of the run (store/FORMAT.md §13) found equal to the fold of the
    /// events they summarise; one that is not is the run's problem.
    pub snapshots_checked: u64,
    /// Values of payload encoding 3 erased by `docket shred` (their tombstones checked):
    /// not damage, the log still verifies.
    pub shredded: u64,
    pub problem: Option<Problem>,
}

/// The verdict on the log of run heads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeadsVerdict {
    pub events: u64,
    /// The size its signed checkpoint covers, if there is one.
    pub checkpoint_size: Option<u64>,
    pub checkpoint_signed_by: Option<String>,
    pub problem: Option<Problem>,
}

/// The verdict on an auditor's checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckpointVerdict {
    pub origin: String,
    pub size: u64,
    /// The size of the log it was held against now.
    pub now: u64,
    pub signed_by: Option<String>,
    /// Hashes in the consistency proof from `size` to `now`.
    pub proof_hashes: usize,
    pub problem: Option<Problem>,
}

/// Everything `docket verify` found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verification {
    pub data: String,
    /// `name+keyid` of each key trusted, and where they came from (`given`, `directory`,
    /// `none`).
    pub keys: Vec<String>,
    pub keys_from: &'static str,
    pub runs: Vec<RunVerdict>,
    pub heads: HeadsVerdict,
    pub checkpoint: Option<CheckpointVerdict>,
    /// The verdict on each published checkpoint it was held against, in the order given.
    pub against: Vec<CheckpointVerdict>,
    /// Damage in the log that no crash explains, or a blob that does not hash to its address.
    pub log_problem: Option<Problem>,
    /// The first thing wrong with each of the instance's other streams (`_circuits`).
    pub stream_problems: BTreeMap<String, Problem>,
    /// Things worth knowing that are not failures (a tail being written, a heads
    /// checkpoint behind its log, runs sealed by the next command).
    pub notes: Vec<String>,
}

impl Verification {
    /// Nothing is wrong.
    pub fn is_sound(&self) -> bool {
        self.log_problem.is_none()
            && self.stream_problems.is_empty()
            && self.heads.problem.is_none()
            && self.runs.iter().all(|r| r.problem.is_none())
            && self.checkpoint.as_ref().is_none_or(|c| c.problem.is_none())
            && self.against.iter().all(|c| c.problem.is_none())
    }
}

/// One stream's checks as the scan goes.
#[derive(Default)]
struct StreamCheck {
    /// Events seen (sound or not).
    seen: u64,
    /// Events checked sound, from 1.
    sound: u64,
    prev: Option<Hash>,
    tree: TreeBuilder,
    /// The root at each size whose event finishes a run, and at sizes asked for.
    roots: BTreeMap<u64, TreeHash>,
    /// Every leaf, for streams whose proofs are needed.
    leaves: Option<Vec<TreeHash>>,
    last_kind: String,
    broken: Option<Problem>,
    /// Blobs the events commit to: (sequence, blob, for content an encoding-2 payload
    /// refers to, its JSON pointer).
    blobs: Vec<(u64, BlobRef, Option<String>)>,
    /// Encoding-2 and -3 events whose payload is itself a blob: (sequence, kind, kind
    /// version, blob).
    referring_blobs: Vec<(u64, String, u32, Hash)>,
    /// What encoding-3 payloads commit to: (sequence, pointer, digest).
    committed: Vec<(u64, String, DisclosureDigest)>,
    /// Values found shredded.
    shredded: u64,
    /// Payloads of the heads log's events.
    payloads: Vec<(u64, Payload)>,
}

const CHAIN_WHY: &str =
    "the hash chain no longer links here: this event and every later one cannot be trusted";
const TREE_WHY: &str =
    "the run was changed after it was sealed: its events are not the ones the key signed";
const SIGNATURE_WHY: &str = "the seal was not made with a trusted key: it vouches for nothing, and anyone could have written it";
const BLOB_WHY: &str = "a payload the event commits to is missing or altered";

fn problem(seq: Option<u64>, what: impl Into<String>, why: &str) -> Option<Problem> {
    Some(Problem {
        seq,
        what: what.into(),
        why: why.to_owned(),
    })
}

impl StreamCheck {
    fn push(&mut self, event: &Event, body: &[u8], keep_leaves: bool) {
        self.seen += 1;
        if self.broken.is_some() {
            return;
        }
        let seq = self.sound + 1;
        let expected_prev = self.prev.unwrap_or_else(|| genesis(&event.stream));
        let what = if event.seq != seq {
            Some(format!(
                "event {seq} is missing: the next event recorded is {}",
                event.seq
            ))
        } else if event.prev != expected_prev {
            Some(format!(
                "event {seq} links to {}, but event {} hashes to {expected_prev}",
                event.prev,
                seq - 1
            ))
        } else if event_hash(&event.prev, body) != event.hash {
            Some(format!(
                "event {seq} records hash {} but its content hashes to {}",
                event.hash,
                event_hash(&event.prev, body)
            ))
        } else {
            None
        };
        if let Some(what) = what {
            self.broken = problem(Some(seq), what, CHAIN_WHY);
            return;
        }
        self.sound = seq;
        self.prev = Some(event.hash);
        let mut hasher_input = Vec::with_capacity(body.len() + 64);
        hasher_input.extend_from_slice(body);
        hasher_input.extend_from_slice(&event.prev.0);
        hasher_input.extend_from_slice(&event.hash.0);
        let leaf = leaf_hash(&hasher_input);
        self.tree.push(leaf);
        if keep_leaves || self.leaves.is_some() {
            self.leaves.get_or_insert_with(Vec::new).push(leaf);
        }
        if FINISHING_KINDS.contains(&event.kind.as_str()) {
            self.roots.insert(seq, self.tree.root());
        }
        self.last_kind.clone_from(&event.kind);
        match &event.payload {
            Payload::Blob(blob) => {
                self.blobs.push((seq, *blob, None));
                if matches!(event.kind_version, REFERENCED_PAYLOAD | COMMITTED_PAYLOAD) {
                    // Its references are inside the blob: read after the scan.
                    self.referring_blobs.push((
                        seq,
                        event.kind.clone(),
                        event.kind_version,
                        blob.hash,
                    ));
                }
            }
            Payload::Inline(bytes) if event.kind_version == REFERENCED_PAYLOAD => {
                self.push_refs(seq, &event.kind, bytes);
            }
            Payload::Inline(bytes) if event.kind_version == COMMITTED_PAYLOAD => {
                self.push_commitments(seq, &event.kind, bytes);
            }
            Payload::Inline(_) => {}
        }
    }

    /// Notes what an encoding-3 payload commits to (docs/events.md#values-committed-apart),
    /// to check each disclosure once the log is read.
    fn push_commitments(&mut self, seq: u64, kind: &str, payload: &[u8]) {
        match CommittedPayload::parse(kind, payload) {
            Ok(parsed) => {
                for slot in parsed.slots() {
                    for digest in &slot.digests {
                        self.committed.push((seq, slot.pointer.clone(), *digest));
                    }
                }
            }
            Err(e) => {
                if self.broken.is_none() {
                    self.broken = problem(
                        Some(seq),
                        format!("event {seq}: {e}"),
                        "docket did not write this event: its content cannot be checked",
                    );
                }
            }
        }
    }

    /// Checks every disclosure the run's payloads commit to against the run's disclosure
    /// file: present and hashing to its digest, or shredded (counted, not damage).
    fn check_disclosures(&mut self, data: &Path, stream: &str) -> Result<(), VerifyError> {
        if self.committed.is_empty() || self.broken.is_some() {
            return Ok(());
        }
        let held = docket_store::read_disclosures(data, stream).map_err(ScanError::from)?;
        let mut counted = std::collections::HashSet::new();
        for (seq, pointer, digest) in &self.committed {
            let at = format!(
                "event {seq}: the value at {pointer} (digest {})",
                digest_text(digest)
            );
            let what = match held.get(digest) {
                None => Some(format!(
                    "{at} has no disclosure in disclosures/ (store/FORMAT.md §13)"
                )),
                Some(docket_store::StoredDisclosure::Present(bytes)) => {
                    if disclosure_digest(bytes) != *digest {
                        Some(format!("{at}: its disclosure does not hash to the digest"))
                    } else {
                        open_disclosure(bytes).err().map(|e| format!("{at}: {e}"))
                    }
                }
                Some(docket_store::StoredDisclosure::Shredded(_)) => {
                    if counted.insert(*digest) {
                        self.shredded += 1;
                    }
                    None
                }
            };
            if let Some(what) = what {
                self.broken = problem(
                    Some(*seq),
                    what,
                    "a value the event commits to is missing or altered",
                );
                break;
            }
        }
        Ok(())
    }

    /// Notes the blobs an encoding-2 payload refers to (docs/events.md#content-stored-once),
    /// to check each is present, whole and of its length once the log is read.
    fn push_refs(&mut self, seq: u64, kind: &str, payload: &[u8]) {
        match ReferencedPayload::parse(kind, payload) {
            Ok(parsed) => {
                for r in parsed.refs() {
                    let blob = BlobRef {
                        hash: Hash(r.hash),
                        len: r.len,
                    };
                    self.blobs.push((seq, blob, Some(r.pointer.clone())));
                }
            }
            Err(e) => {
                if self.broken.is_none() {
                    self.broken = problem(
                        Some(seq),
                        format!("event {seq}: {e}"),
                        "docket did not write this event: its content cannot be checked",
                    );
                }
            }
        }
    }
}

/// Reads the payloads of encoding-2 events kept as blobs (larger than the store's blob
/// threshold even with their content referred to) and notes what they refer to: a
/// second pass over the log, only when there are such events.
fn read_referring_blobs(
    data: &Path,
    streams: &mut HashMap<StreamId, StreamCheck>,
) -> Result<(), VerifyError> {
    let wanted: HashMap<Hash, ()> = streams
        .values()
        .flat_map(|c| c.referring_blobs.iter().map(|(_, _, _, h)| (*h, ())))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let mut contents: HashMap<Hash, Vec<u8>> = HashMap::new();
    scan_log(data, |record| {
        if let Scanned::Blob {
            address, content, ..
        } = record
            && wanted.contains_key(&address)
            && blob_hash(content) == address
        {
            contents.insert(address, content.to_vec());
        }
    })?;
    for check in streams.values_mut() {
        for (seq, kind, version, hash) in std::mem::take(&mut check.referring_blobs) {
            // A missing payload blob is reported with the event's other blobs.
            if let Some(bytes) = contents.get(&hash) {
                if version == COMMITTED_PAYLOAD {
                    check.push_commitments(seq, &kind, bytes);
                } else {
                    check.push_refs(seq, &kind, bytes);
                }
            }
        }
    }
    Ok(())
}

/// Verifies the data directory `data`. Reads only; never opens the store.
///
/// # Errors
/// [`VerifyError`] when `data` is not a readable data directory, a key file is damaged,
/// or the run asked for is not there. Everything wrong inside the log is in the report.
pub fn verify(data: &Path, options: &VerifyOptions) -> Result<Verification, VerifyError> {
    let (trusted, keys_from) = match &options.keys {
        Some(keys) => (keys.clone(), "given"),
        None => {
            let keys = keys::verifiers(data)?;
            let from = if keys.is_empty() { "none" } else { "directory" };
            (keys, from)
        }
    };
    let mut notes = Vec::new();
    if options.keys.is_some()
        && let Some(own) = keys::verifier(data)?
        && !trusted.contains(&own)
    {
        notes.push(format!(
            "the data directory's own key {} is not among the keys given: seals it made do not count",
            own.label()
        ));
    }
    // Read before the log: the file is written only after the seals it covers are
    // durable, so a log read afterwards holds at least what it covers.
    let heads_note = std::fs::read_to_string(heads_checkpoint_path(data)).ok();
    let auditor = options
        .checkpoint
        .as_deref()
        .map(|t| Auditor::read(t, &trusted));
    let against: Vec<Auditor> = options
        .against
        .iter()
        .map(|t| Auditor::read(t, &trusted))
        .collect();
    // The streams the checkpoints are about, whose leaves are kept for their proofs.
    let proved = proved_streams(auditor.as_ref(), &against);

    let mut streams: HashMap<StreamId, StreamCheck> = HashMap::new();
    let mut blobs: HashMap<Hash, (u64, bool)> = HashMap::new();
    let mut first_bad_blob = None;
    let summary = scan_log(data, |record| match record {
        Scanned::Event { event, body, .. } => {
            let name = event.stream.as_str();
            let keep = name == HEADS_STREAM || proved.contains(name);
            let check = streams.entry(event.stream.clone()).or_default();
            check.push(&event, body, keep);
            if name == HEADS_STREAM && check.broken.is_none() {
                check.payloads.push((event.seq, event.payload.clone()));
            }
        }
        Scanned::Blob {
            address,
            content,
            at,
        } => {
            let ok = blob_hash(content) == address;
            if !ok && first_bad_blob.is_none() {
                first_bad_blob = Some((address, at));
            }
            blobs.insert(address, (content.len() as u64, ok));
        }
    })?;

    for path in &summary.ignored {
        notes.push(format!(
            "{} is not a segment file (<20 digits>.seg): no part of the log, not read",
            path.display()
        ));
    }
    let log_problem = match &summary.end {
        LogEnd::Clean => None,
        LogEnd::Unfinished {
            segment, offset, ..
        } => {
            notes.push(format!(
                "the log's last batch ({} at byte {offset}) is being written or was torn by a crash: it was never acknowledged, and is not checked",
                segment.display()
            ));
            None
        }
        LogEnd::Damaged {
            segment,
            offset,
            damage,
            streams_after,
        } => problem(
            None,
            format!(
                "{} at byte {offset}: {damage}{}",
                segment.display(),
                if streams_after.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; recorded after it: {}",
                        streams_after
                            .iter()
                            .map(StreamId::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
            "the log is damaged where no crash can tear it: nothing after this point was read",
        ),
    };
    // Runs with events after the damage: each fails, listed even when nothing of it was
    // read before the damage.
    let cut_off: Vec<(StreamId, Problem)> = match &summary.end {
        LogEnd::Damaged {
            segment,
            offset,
            streams_after,
            ..
        } => streams_after
            .iter()
            .map(|id| {
                (
                    id.clone(),
                    Problem {
                        seq: None,
                        what: format!(
                            "events recorded after the damage in {} at byte {offset} could not be read",
                            segment.display()
                        ),
                        why: "the run lacks what was recorded after the damage: its events there are not checked, nor shown".to_owned(),
                    },
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    let log_problem = log_problem.or_else(|| {
        first_bad_blob.and_then(|(address, at)| {
            problem(
                None,
                format!(
                    "the blob recorded in segment {} at byte {} does not hash to its address {address}",
                    at.segment, at.record
                ),
                BLOB_WHY,
            )
        })
    });

    read_referring_blobs(data, &mut streams)?;
    for (id, check) in &mut streams {
        if is_run_stream(id.as_str()) {
            check.check_disclosures(data, id.as_str())?;
        }
    }
    for check in streams.values_mut() {
        if check.broken.is_some() {
            continue;
        }
        check.blobs.sort_by_key(|b| b.0);
        for (seq, blob, pointer) in &check.blobs {
            let what_blob = match pointer {
                None => format!("its payload blob {}", blob.hash),
                Some(p) => format!("the content at {p} (blob {})", blob.hash),
            };
            let what = match blobs.get(&blob.hash) {
                None => Some(format!("{what_blob} is missing")),
                Some((_, false)) => Some(format!("{what_blob} does not hash to its address")),
                Some((len, true)) if *len != blob.len => Some(format!(
                    "{what_blob} holds {len} bytes, the event says {}",
                    blob.len
                )),
                Some(_) => None,
            };
            if let Some(what) = what {
                check.broken = problem(Some(*seq), format!("event {seq}: {what}"), BLOB_WHY);
                break;
            }
        }
    }

    conclude(
        Checked {
            streams,
            cut_off,
            log_problem,
            notes,
        },
        &Trust {
            keys: trusted,
            from: keys_from,
            heads_note: heads_note.as_deref(),
            auditor,
            against,
        },
        options,
        data.display().to_string(),
        Some(data),
    )
}

/// The checks of every stream of a log, read from its files or through its store.
struct Checked {
    streams: HashMap<StreamId, StreamCheck>,
    /// Streams with events past damage in the log, each with its problem.
    cut_off: Vec<(StreamId, Problem)>,
    log_problem: Option<Problem>,
    notes: Vec<String>,
}

/// What seals and checkpoints are checked against.
struct Trust<'a> {
    keys: Vec<VerifierKey>,
    /// `given`, `directory`, `database` or `none`.
    from: &'static str,
    /// The heads log's signed checkpoint, read before the log.
    heads_note: Option<&'a str>,
    /// `--checkpoint`.
    auditor: Option<Auditor>,
    /// `--against`.
    against: Vec<Auditor>,
}

/// A checkpoint kept outside the log, as read, and the stream it is about.
struct Auditor {
    note: Result<SignedCheckpoint, crate::checkpoint::CheckpointError>,
    stream: Option<String>,
}

impl Auditor {
    fn read(text: &str, trusted: &[VerifierKey]) -> Auditor {
        let note = SignedCheckpoint::parse(text);
        let stream = note.as_ref().ok().and_then(|cp| subject_of(cp, trusted));
        Auditor { note, stream }
    }

    /// Whether the log extends it.
    fn verdict(
        &self,
        trusted: &[VerifierKey],
        streams: &HashMap<StreamId, StreamCheck>,
        heads: &StreamCheck,
    ) -> CheckpointVerdict {
        match &self.note {
            Err(e) => CheckpointVerdict {
                origin: String::new(),
                size: 0,
                now: 0,
                signed_by: None,
                proof_hashes: 0,
                problem: problem(
                    None,
                    format!("the checkpoint given does not parse: {e}"),
                    "a checkpoint that is not a signed note vouches for nothing",
                ),
            },
            Ok(cp) => check_auditor_checkpoint(cp, trusted, self.stream.as_deref(), streams, heads),
        }
    }
}

/// The streams kept checkpoints are about.
fn proved_streams(auditor: Option<&Auditor>, against: &[Auditor]) -> BTreeSet<String> {
    auditor
        .into_iter()
        .chain(against)
        .filter_map(|a| a.stream.clone())
        .collect()
}

/// What both readers of a log conclude from its streams' checks: each run's verdict, its
/// seals against the heads log and the keys, the heads checkpoint, an auditor's
/// checkpoint. `snapshots_in` is the data directory whose snapshot files are checked.
fn conclude(
    checked: Checked,
    trust: &Trust<'_>,
    options: &VerifyOptions,
    location: String,
    snapshots_in: Option<&Path>,
) -> Result<Verification, VerifyError> {
    let Checked {
        mut streams,
        cut_off,
        log_problem,
        mut notes,
    } = checked;
    let trusted = &trust.keys;
    let heads_id = StreamId::new(HEADS_STREAM).map_err(ScanError::from)?;
    let heads_check = streams.remove(&heads_id).unwrap_or_default();
    let mut runs: BTreeMap<String, RunVerdict> = BTreeMap::new();
    let mut stream_problems = BTreeMap::new();
    for (id, check) in &streams {
        if is_run_stream(id.as_str()) {
            runs.insert(id.as_str().to_owned(), run_verdict(id.as_str(), check));
        } else if let Some(p) = &check.broken {
            stream_problems.insert(id.as_str().to_owned(), p.clone());
        }
    }
    for (id, p) in cut_off {
        if is_run_stream(id.as_str()) {
            let verdict = runs
                .entry(id.as_str().to_owned())
                .or_insert_with(|| run_verdict(id.as_str(), &StreamCheck::default()));
            verdict.problem.get_or_insert(p);
            verdict.finished = false;
        } else {
            stream_problems.entry(id.as_str().to_owned()).or_insert(p);
        }
    }

    let mut heads = HeadsVerdict {
        events: heads_check.seen,
        checkpoint_size: None,
        checkpoint_signed_by: None,
        problem: heads_check.broken.clone(),
    };
    check_seals(&heads_check, &streams, trusted, &mut runs, &mut heads);
    let heads_leaves = heads_check.leaves.clone().unwrap_or_default();
    check_heads_checkpoint(
        trust.heads_note,
        &heads_leaves,
        trusted,
        &mut heads,
        &mut notes,
    );

    if let Some(run) = &options.run {
        runs.retain(|id, _| id == run);
    }
    let run_blobs: HashMap<StreamId, Vec<Hash>> = streams
        .iter()
        .filter(|(id, _)| runs.contains_key(id.as_str()))
        .map(|(id, c)| (id.clone(), c.blobs.iter().map(|(_, b, _)| b.hash).collect()))
        .collect();
    if let Some(data) = snapshots_in {
        crate::snapshot_check::check_snapshots(data, &mut runs, &run_blobs, &mut notes)?;
    }

    for verdict in runs.values_mut() {
        settle_seal_state(
            verdict,
            !trusted.is_empty(),
            options.require_signed,
            &mut notes,
        );
    }
    if options.require_signed && trusted.is_empty() && heads.problem.is_none() {
        heads.problem = problem(
            None,
            "no key to check seals with: the data directory has none and none was given",
            "--require-signed: without a key nothing proves the runs were not rewritten",
        );
    }

    let checkpoint = trust
        .auditor
        .as_ref()
        .map(|a| a.verdict(trusted, &streams, &heads_check));
    let against = trust
        .against
        .iter()
        .map(|a| a.verdict(trusted, &streams, &heads_check))
        .collect();

    if let Some(run) = &options.run {
        runs.retain(|id, _| id == run);
        if runs.is_empty() {
            return Err(VerifyError::UnknownRun {
                run: run.clone(),
                data: location.clone(),
            });
        }
    }
    Ok(Verification {
        data: location,
        keys: trusted.iter().map(VerifierKey::label).collect(),
        keys_from: trust.from,
        runs: runs.into_values().collect(),
        heads,
        checkpoint,
        against,
        log_problem,
        stream_problems,
        notes,
    })
}

/// The stream an auditor's checkpoint is about, by its origin read against each trusted
/// key's name (or, with no key, the names of its signers).
fn subject_of(cp: &SignedCheckpoint, trusted: &[VerifierKey]) -> Option<String> {
    let names = trusted
        .iter()
        .map(|k| k.name().to_owned())
        .chain(cp.note.signatures().iter().map(|s| s.name.clone()));
    for name in names {
        match cp.checkpoint.subject(&name) {
            Subject::Heads => return Some(HEADS_STREAM.to_owned()),
            Subject::Run(run) => return Some(run),
            Subject::Foreign => {}
        }
    }
    None
}

fn run_verdict(run: &str, check: &StreamCheck) -> RunVerdict {
    RunVerdict {
        run_id: run.to_owned(),
        events: check.seen,
        finished: check.broken.is_none() && FINISHING_KINDS.contains(&check.last_kind.as_str()),
        root: check.broken.is_none().then(|| check.tree.root().to_hex()),
        seals: Vec::new(),
        seal_state: "in-progress",
        snapshots_checked: 0,
        shredded: check.shredded,
        problem: check.broken.clone(),
    }
}

/// Checks each seal of the heads log against its signature and its run's tree.
fn check_seals(
    heads: &StreamCheck,
    streams: &HashMap<StreamId, StreamCheck>,
    trusted: &[VerifierKey],
    runs: &mut BTreeMap<String, RunVerdict>,
    verdict: &mut HeadsVerdict,
) {
    for (heads_seq, payload) in &heads.payloads {
        let heads_seq = *heads_seq;
        let bytes = match payload {
            Payload::Inline(bytes) => bytes,
            Payload::Blob(_) => {
                verdict.problem.get_or_insert_with(|| Problem {
                    seq: Some(heads_seq),
                    what: format!("heads event {heads_seq} keeps its payload in a blob; seals are always inline"),
                    why: "docket did not write this event".to_owned(),
                });
                continue;
            }
        };
        let seal: RunSealed = match serde_json::from_slice(bytes) {
            Ok(seal) => seal,
            Err(e) => {
                verdict.problem.get_or_insert_with(|| Problem {
                    seq: Some(heads_seq),
                    what: format!("heads event {heads_seq} is not a run.sealed record: {e}"),
                    why: "docket did not write this event".to_owned(),
                });
                continue;
            }
        };
        let run = runs
            .entry(seal.run_id.clone())
            .or_insert_with(|| RunVerdict {
                run_id: seal.run_id.clone(),
                events: 0,
                finished: false,
                root: None,
                seals: Vec::new(),
                seal_state: "in-progress",
                snapshots_checked: 0,
                shredded: 0,
                problem: None,
            });
        let (signed_by, fault) = judge_seal(&seal, heads_seq, trusted, streams);
        run.seals.push(SealSeen {
            heads_seq,
            size: seal.size,
            signed_by,
            checkpoint: seal.checkpoint.clone(),
        });
        if let Some(fault) = fault
            && run.problem.is_none()
        {
            run.problem = Some(fault);
        }
    }
}

/// The key that signed a seal, and the first thing wrong with it.
fn judge_seal(
    seal: &RunSealed,
    heads_seq: u64,
    trusted: &[VerifierKey],
    streams: &HashMap<StreamId, StreamCheck>,
) -> (Option<String>, Option<Problem>) {
    let at = format!("its seal (heads event {heads_seq}, size {})", seal.size);
    let signed = match SignedCheckpoint::parse(&seal.checkpoint) {
        Ok(cp) => cp,
        Err(e) => {
            return (
                None,
                problem(
                    Some(seal.size),
                    format!("{at} is not a signed checkpoint: {e}"),
                    SIGNATURE_WHY,
                ),
            );
        }
    };
    let mut signed_by = None;
    if !trusted.is_empty() {
        match signed.signed_by(trusted) {
            Ok(key) => {
                signed_by = Some(key.label());
                let expected = run_origin(key.name(), &seal.run_id);
                if signed.checkpoint.origin != expected {
                    return (
                        signed_by,
                        problem(
                            Some(seal.size),
                            format!(
                                "{at} is signed for origin {}, not {expected}",
                                signed.checkpoint.origin
                            ),
                            "the signature vouches for another run: this run has no seal",
                        ),
                    );
                }
            }
            Err(e) => {
                return (
                    None,
                    problem(Some(seal.size), format!("{at}: {e}"), SIGNATURE_WHY),
                );
            }
        }
    }
    let cp = &signed.checkpoint;
    let Some(check) = StreamId::new(seal.run_id.as_str())
        .ok()
        .and_then(|id| streams.get(&id))
    else {
        return (
            signed_by,
            problem(
                None,
                format!("{at}: the log holds no event of this run"),
                "a sealed run was removed from the log",
            ),
        );
    };
    if check.broken.is_some() && check.sound < cp.size {
        // The chain problem is reported first; the tree cannot be recomputed past it.
        return (signed_by, None);
    }
    match check.roots.get(&cp.size) {
        Some(root) if *root == cp.root => {
            if cp.size != seal.size || cp.root.to_hex() != seal.root {
                return (
                    signed_by,
                    problem(
                        Some(seal.size),
                        format!(
                            "{at} records size {} root {}, but its signed checkpoint says size {} root {}",
                            seal.size, seal.root, cp.size, cp.root
                        ),
                        "the log of run heads was rewritten: its record no longer matches what was signed",
                    ),
                );
            }
            (signed_by, None)
        }
        Some(root) => (
            signed_by,
            problem(
                Some(cp.size),
                format!(
                    "its tree of {} events no longer matches its signed checkpoint (heads event {heads_seq}): the log gives root {root}, the key signed {}",
                    cp.size, cp.root
                ),
                TREE_WHY,
            ),
        ),
        None if check.sound < cp.size => (
            signed_by,
            problem(
                Some(check.sound + 1),
                format!(
                    "the run has {} events, but its signed checkpoint (heads event {heads_seq}) covers {}: events were removed",
                    check.sound, cp.size
                ),
                TREE_WHY,
            ),
        ),
        None => (
            signed_by,
            problem(
                Some(cp.size),
                format!(
                    "its tree of {} events no longer matches its signed checkpoint (heads event {heads_seq}): event {} no longer finishes the run",
                    cp.size, cp.size
                ),
                TREE_WHY,
            ),
        ),
    }
}

fn check_heads_checkpoint(
    note: Option<&str>,
    leaves: &[TreeHash],
    trusted: &[VerifierKey],
    heads: &mut HeadsVerdict,
    notes: &mut Vec<String>,
) {
    let len = leaves.len() as u64;
    let Some(note) = note else {
        if heads.events > 0 {
            notes.push(
                "the log of run heads has no signed checkpoint yet (docket writes it with the next seal)"
                    .to_owned(),
            );
        }
        return;
    };
    let fail = |what: String, why: &str| problem(None, format!("heads checkpoint: {what}"), why);
    let signed = match SignedCheckpoint::parse(note) {
        Ok(cp) => cp,
        Err(e) => {
            heads.problem.get_or_insert_with(|| Problem {
                seq: None,
                what: format!("heads checkpoint: {e}"),
                why: "the checkpoint file is damaged".to_owned(),
            });
            return;
        }
    };
    let cp = &signed.checkpoint;
    heads.checkpoint_size = Some(cp.size);
    let mut fault = None;
    if trusted.is_empty() {
        notes.push("no key to check the heads checkpoint's signature with".to_owned());
    } else {
        match signed.signed_by(trusted) {
            Ok(key) => {
                heads.checkpoint_signed_by = Some(key.label());
                if cp.origin != heads_origin(key.name()) {
                    fault = fail(
                        format!(
                            "its origin is {}, not {}",
                            cp.origin,
                            heads_origin(key.name())
                        ),
                        SIGNATURE_WHY,
                    );
                }
            }
            Err(e) => fault = fail(e.to_string(), SIGNATURE_WHY),
        }
    }
    if fault.is_none() && heads.problem.is_none() {
        if cp.size > len {
            fault = fail(
                format!(
                    "it covers {} seals, the log of run heads holds {len}",
                    cp.size
                ),
                "seals were removed from the log of run heads",
            );
        } else {
            let now = root(&mut Leaves(leaves), cp.size).unwrap_or(TreeHash([0; 32]));
            if now != cp.root {
                fault = fail(
                    format!(
                        "the log of run heads no longer matches it: its first {} seals give root {now}, the key signed {}",
                        cp.size, cp.root
                    ),
                    "the log of run heads was rewritten after it was signed",
                );
            } else if cp.size < len {
                notes.push(format!(
                    "the heads checkpoint covers {} of {len} seals (the next command that drives runs brings it up to date)",
                    cp.size
                ));
            }
        }
    }
    if let Some(fault) = fault {
        heads.problem.get_or_insert(fault);
    }
}

fn settle_seal_state(
    run: &mut RunVerdict,
    have_key: bool,
    require_signed: bool,
    notes: &mut Vec<String>,
) {
    let last_seal = run.seals.iter().map(|s| s.size).max();
    let verified_at_end = run
        .seals
        .iter()
        .any(|s| s.size == run.events && s.signed_by.is_some());
    run.seal_state = match last_seal {
        Some(size) if size == run.events && have_key => "sealed",
        Some(_) if !have_key => "unsigned",
        Some(_) if run.finished => "not-sealed-yet",
        Some(_) => "sealed-then-grew",
        None if run.finished && have_key => "not-sealed-yet",
        None if run.finished => "unsigned",
        None => "in-progress",
    };
    if run.seal_state == "not-sealed-yet" {
        notes.push(format!(
            "run {} finished but is not sealed at its {} events yet (the next command that drives runs seals it)",
            run.run_id, run.events
        ));
    }
    if require_signed && run.finished && !verified_at_end && run.problem.is_none() {
        run.problem = problem(
            None,
            format!(
                "finished with {} events but has no verified seal at that size",
                run.events
            ),
            "--require-signed: nothing signed vouches for this run's events",
        );
    }
}

fn check_auditor_checkpoint(
    signed: &SignedCheckpoint,
    trusted: &[VerifierKey],
    stream: Option<&str>,
    streams: &HashMap<StreamId, StreamCheck>,
    heads: &StreamCheck,
) -> CheckpointVerdict {
    let cp = &signed.checkpoint;
    let mut verdict = CheckpointVerdict {
        origin: cp.origin.clone(),
        size: cp.size,
        now: 0,
        signed_by: None,
        proof_hashes: 0,
        problem: None,
    };
    let fail = |what: String, why: &str| problem(None, what, why);
    let key = match signed.signed_by(trusted) {
        Ok(key) => key,
        Err(e) => {
            verdict.problem = fail(
                format!("its signature does not verify with a trusted key: {e}"),
                SIGNATURE_WHY,
            );
            return verdict;
        }
    };
    verdict.signed_by = Some(key.label());
    // One origin rule: the name of the key that signed it, then `/heads` or `/run/<run id>`
    // (docs/checkpoints.md#sealing); another trusted key's name is no origin of this key's.
    let own = match cp.subject(key.name()) {
        Subject::Heads => Some(HEADS_STREAM.to_owned()),
        Subject::Run(run) => Some(run),
        Subject::Foreign => None,
    };
    if stream.is_some() && own.as_deref() != stream {
        verdict.problem = fail(
            format!(
                "its origin {} is neither {} nor {}: the name of the key that signed it ({}), then the heads log or a run",
                cp.origin,
                heads_origin(key.name()),
                run_origin(key.name(), "<run id>"),
                key.label()
            ),
            "it is a checkpoint of another log",
        );
        return verdict;
    }
    let check = match stream {
        Some(HEADS_STREAM) => Some(heads),
        Some(run) => StreamId::new(run).ok().and_then(|id| streams.get(&id)),
        None => {
            verdict.problem = fail(
                format!(
                    "its origin {} is neither this instance's heads log nor one of its runs",
                    cp.origin
                ),
                "it is a checkpoint of another log",
            );
            return verdict;
        }
    };
    let leaves = check.and_then(|c| c.leaves.as_deref()).unwrap_or_default();
    let now = leaves.len() as u64;
    verdict.now = now;
    if cp.size > now {
        verdict.problem = fail(
            format!(
                "it covers {} events; the log holds {now} checkable ones",
                cp.size
            ),
            "the log is not an extension of your checkpoint: events you saw are gone or no longer check",
        );
        return verdict;
    }
    let old_root = root(&mut Leaves(leaves), cp.size).unwrap_or(TreeHash([0; 32]));
    if old_root != cp.root {
        verdict.problem = fail(
            format!(
                "the log's first {} events give root {old_root}; your checkpoint says {}",
                cp.size, cp.root
            ),
            "the log is not an extension of your checkpoint: what you saw was rewritten",
        );
        return verdict;
    }
    let new_root = root(&mut Leaves(leaves), now).unwrap_or(TreeHash([0; 32]));
    match consistency_proof(&mut Leaves(leaves), cp.size, now)
        .map_err(|e| e.to_string())
        .and_then(|proof| {
            verify_consistency(cp.size, now, &cp.root, &new_root, &proof)
                .map(|()| proof.len())
                .map_err(|e| e.to_string())
        }) {
        Ok(hashes) => verdict.proof_hashes = hashes,
        Err(e) => {
            verdict.problem = fail(
                format!(
                    "the consistency proof from {} to {now} does not check: {e}",
                    cp.size
                ),
                "the log is not an extension of your checkpoint",
            );
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use docket_store::{EmbeddedStore, EventStore, NewEvent, StoreConfig, WallTime};

    use super::*;

    fn event(payload: Vec<u8>) -> NewEvent {
        NewEvent {
            kind: "note".to_owned(),
            kind_version: 1,
            recorded_at: WallTime(1),
            policy: None,
            payload,
        }
    }

    /// Replaces the first `from` in the log with `to` (same length) and fixes the CRC of
    /// the frame holding it, leaving every hash as it was.
    fn rewrite(data: &Path, from: &[u8], to: &[u8]) {
        let path = data.join("log").join(format!("{:020}.seg", 1));
        let mut bytes = std::fs::read(&path).unwrap();
        let pos = bytes.windows(from.len()).position(|w| w == from).unwrap();
        bytes[pos..pos + to.len()].copy_from_slice(to);
        let mut frame = 32;
        loop {
            let len = u32::from_le_bytes(bytes[frame + 4..frame + 8].try_into().unwrap()) as usize;
            if pos < frame + 12 + len {
                let crc = crc32fast::hash(&bytes[frame + 12..frame + 12 + len]);
                bytes[frame + 8..frame + 12].copy_from_slice(&crc.to_le_bytes());
                break;
            }
            frame += 12 + len;
        }
        std::fs::write(&path, &bytes).unwrap();
    }

    #[tokio::test]
    async fn a_changed_event_breaks_the_chain_and_a_changed_blob_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        {
            // Uncompressed, so that the rewrite below finds the bytes it changes.
            let config = StoreConfig {
                compress: false,
                ..StoreConfig::default()
            };
            let store = EmbeddedStore::open(data, config).await.unwrap();
            let a = StreamId::new("run-a").unwrap();
            let b = StreamId::new("run-b").unwrap();
            store
                .append(
                    &a,
                    0,
                    vec![event(b"first".to_vec()), event(b"second".to_vec())],
                )
                .await
                .unwrap();
            store
                .append(&b, 0, vec![event(vec![b'x'; 70_000])])
                .await
                .unwrap();
        }
        let sound = verify(data, &VerifyOptions::default()).unwrap();
        assert!(sound.is_sound(), "{sound:?}");
        assert_eq!(sound.keys_from, "none");
        assert!(sound.runs.iter().all(|r| r.seal_state == "in-progress"));

        rewrite(data, b"second", b"SECOND");
        rewrite(data, &[b'x'; 8], &[b'y'; 8]);
        let report = verify(data, &VerifyOptions::default()).unwrap();
        assert!(!report.is_sound());
        let a = &report.runs[0];
        let p = a.problem.as_ref().unwrap();
        assert_eq!((a.run_id.as_str(), p.seq), ("run-a", Some(2)));
        assert!(p.what.contains("records hash"), "{p:?}");
        let b = &report.runs[1];
        let p = b.problem.as_ref().unwrap();
        assert_eq!((b.run_id.as_str(), p.seq), ("run-b", Some(1)));
        assert!(p.what.contains("does not hash to its address"), "{p:?}");
        assert!(report.log_problem.is_some(), "{report:?}");
    }
}
