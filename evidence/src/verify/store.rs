//! `docket verify` over a store that is not a data directory (a PostgreSQL database): the
//! store checks each stream's chain, hashes, blobs and stored leaves itself
//! ([`EventStore::verify`]); the sound events are then read through it to recompute each
//! run's tree, and everything a data directory's verification concludes from there is
//! concluded the same way ([`super::conclude`]): seals against their signatures and their
//! runs' trees, the heads log against its signed checkpoint, an auditor's checkpoint by a
//! consistency proof.

use std::collections::HashMap;

use docket_store::merkle::event_leaf_hash;
use docket_store::{Event, EventStore, StreamId};
use futures::StreamExt as _;

use super::{
    Auditor, CHAIN_WHY, Checked, StreamCheck, Trust, Verification, VerifyError, VerifyOptions,
    conclude, problem, proved_streams,
};
use crate::note::VerifierKey;
use crate::seal::{FINISHING_KINDS, HEADS_STREAM};

/// The keys and checkpoint a store's verification trusts.
#[derive(Clone, Debug)]
pub struct StoreTrust {
    /// The keys seals must be signed with.
    pub keys: Vec<VerifierKey>,
    /// Where they came from: `given` (`--key`), `database`, or `none`.
    pub from: &'static str,
    /// The heads log's signed checkpoint as the store keeps it, read before the log (it
    /// is written only after the seals it covers are durable).
    pub heads_note: Option<String>,
}

/// Verifies every stream of `store` (named `location` in reports and errors), or only
/// `options.run` and the heads log.
///
/// # Errors
/// [`VerifyError`]: the store cannot be read, or the run asked for is not in it.
/// Everything wrong inside a stream is in the report.
pub async fn verify_store<S: EventStore>(
    store: &S,
    location: &str,
    trust: StoreTrust,
    options: &VerifyOptions,
) -> Result<Verification, VerifyError> {
    let auditor = options
        .checkpoint
        .as_deref()
        .map(|t| Auditor::read(t, &trust.keys));
    let against: Vec<Auditor> = options
        .against
        .iter()
        .map(|t| Auditor::read(t, &trust.keys))
        .collect();
    let proved = proved_streams(auditor.as_ref(), &against);
    let heads = store.streams().await.map_err(VerifyError::Store)?;
    let mut streams: HashMap<StreamId, StreamCheck> = HashMap::new();
    for head in heads {
        let name = head.stream.as_str();
        let wanted = options.run.as_deref().is_none_or(|run| run == name)
            || name == HEADS_STREAM
            || proved.contains(name);
        if !wanted {
            continue;
        }
        let keep = name == HEADS_STREAM || proved.contains(name);
        let report = store
            .verify(&head.stream)
            .await
            .map_err(VerifyError::Store)?;
        let mut check = StreamCheck::default();
        if report.verified > 0 {
            let mut events = Box::pin(store.read(&head.stream, 1..=report.verified));
            while let Some(event) = events.next().await {
                check.push_sound(&event.map_err(VerifyError::Store)?, keep);
            }
        }
        if let Some(broken) = report.first_break {
            check.seen = head.seq.max(check.seen);
            check.broken = problem(
                Some(check.sound + 1),
                format!("event {}: {broken}", check.sound + 1),
                CHAIN_WHY,
            );
        }
        streams.insert(head.stream, check);
    }
    let heads_note = trust.heads_note.clone();
    conclude(
        Checked {
            streams,
            cut_off: Vec::new(),
            log_problem: None,
            notes: Vec::new(),
        },
        &Trust {
            keys: trust.keys,
            from: trust.from,
            heads_note: heads_note.as_deref(),
            auditor,
            against,
        },
        options,
        location.to_owned(),
        None,
    )
}

impl StreamCheck {
    /// Takes an event the store verified (its chain link, hash, blobs and leaf): the tree,
    /// the roots where it finishes the run, and the heads log's payloads.
    fn push_sound(&mut self, event: &Event, keep_leaves: bool) {
        self.seen += 1;
        self.sound = event.seq;
        self.prev = Some(event.hash);
        let leaf = event_leaf_hash(event);
        self.tree.push(leaf);
        if keep_leaves {
            self.leaves.get_or_insert_with(Vec::new).push(leaf);
        }
        if FINISHING_KINDS.contains(&event.kind.as_str()) {
            self.roots.insert(event.seq, self.tree.root());
        }
        self.last_kind.clone_from(&event.kind);
        if event.stream.as_str() == HEADS_STREAM {
            self.payloads.push((event.seq, event.payload.clone()));
        }
    }
}
