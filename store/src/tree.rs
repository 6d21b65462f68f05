//! The Merkle tree the index keeps beside each stream's chain (store/FORMAT.md, "Merkle
//! tree"): tree heads and proofs served from it, and `verify`'s check of it against the
//! events.
//!
//! The index keeps the roots of complete subtrees from level [`NODE_MIN_LEVEL`] up (one per
//! 256 events and their parents) and each stream's frontier; a proof reads those nodes and
//! at most two blocks of 256 events from the log for the levels below, so it costs the same
//! few dozen index reads whatever the stream's length.

use std::collections::BTreeMap;

use crate::api::{ConsistencyProof, InclusionProof, TreeHead};
use crate::error::{ChainBreak, StoreError};
use crate::event::{Hash, StreamId};
use crate::index::{BLOCK_LEAVES, NODE_MIN_LEVEL};
use crate::merkle::{
    Leaves, Subtrees, TreeBuilder, TreeError, TreeHash, leaf_hash, node_hash, root,
};
use crate::proofs::StreamTree;
use crate::reader::{READ_CHUNK, corrupt, for_each_record};
use crate::shared::Shared;
use crate::verify::check_record_leaf;

/// Bytes before an event record's body: its length (4) and tag (1).
const RECORD_HEADER: usize = 5;

/// The leaf hash of a framed event record that `check_record` accepted: the record body as
/// the log holds it, `canonical body ‖ prev ‖ hash`.
pub(crate) fn record_leaf(record: &[u8]) -> TreeHash {
    leaf_hash(record.get(RECORD_HEADER..).unwrap_or_default())
}

/// Events `from..=to` of a stream, checked against the chain as reads are: their leaf
/// hashes and chain hashes, in order.
fn leaves_of(
    shared: &Shared,
    stream: &StreamId,
    no: u64,
    from: u64,
    to: u64,
) -> Result<(Vec<TreeHash>, Vec<Hash>), StoreError> {
    let runs = shared.runs(no, from, to, READ_CHUNK)?;
    let want = (to + 1 - from) as usize;
    let (mut leaves, mut hashes) = (Vec::with_capacity(want), Vec::with_capacity(want));
    let mut prev = None;
    let mut expected = from;
    let mut last = None;
    for_each_record(shared, &runs, (from, to), |seq, pos, bytes| {
        last = Some(pos);
        if seq != expected {
            return Err(corrupt(
                shared,
                pos,
                stream,
                ChainBreak::Missing {
                    expected,
                    found: seq,
                },
            ));
        }
        let (event, leaf) = bytes
            .map_err(|what| ChainBreak::Unreadable { seq, what })
            .and_then(|b| check_record_leaf(stream, seq, prev, b))
            .map_err(|b| corrupt(shared, pos, stream, b))?;
        prev = Some(event.hash);
        expected += 1;
        leaves.push(leaf);
        hashes.push(event.hash);
        Ok(true)
    })?;
    if leaves.len() != want {
        let pos = last.or_else(|| runs.first().map(|r| r.pos));
        return Err(StoreError::Corrupt {
            segment: pos.map_or_else(
                || shared.log_dir.clone(),
                |p| crate::segment::segment_path(&shared.log_dir, p.segment),
            ),
            offset: pos.map_or(0, |p| p.offset),
            damage: Box::new(crate::error::Damage::Chain {
                stream: stream.clone(),
                break_: ChainBreak::HeadMismatch {
                    indexed: to,
                    found: expected - 1,
                },
            }),
            streams_after: Vec::new(),
        });
    }
    Ok((leaves, hashes))
}

/// A stream's tree as the store keeps it: nodes from the index, the levels below from the
/// log, one block of 256 events at a time.
struct StoredTree<'a> {
    shared: &'a Shared,
    stream: &'a StreamId,
    no: u64,
    /// Events the stream held when the request started.
    size: u64,
    /// Leaf hashes and chain hashes of the blocks read so far, by block number.
    blocks: BTreeMap<u64, (Vec<TreeHash>, Vec<Hash>)>,
}

impl StoredTree<'_> {
    fn block(&mut self, block: u64) -> Result<&(Vec<TreeHash>, Vec<Hash>), StoreError> {
        if !self.blocks.contains_key(&block) {
            let from = block * BLOCK_LEAVES + 1;
            let to = ((block + 1) * BLOCK_LEAVES).min(self.size);
            let read = leaves_of(self.shared, self.stream, self.no, from, to)?;
            self.blocks.insert(block, read);
        }
        self.blocks
            .get(&block)
            .ok_or(StoreError::Tree(TreeError::LeafOutOfRange {
                index: block * BLOCK_LEAVES,
                size: self.size,
            }))
    }
}

impl StreamTree for StoredTree<'_> {
    fn leaf(&mut self, index: u64) -> Result<(TreeHash, Hash), StoreError> {
        let size = self.size;
        let (leaves, hashes) = self.block(index / BLOCK_LEAVES)?;
        let at = (index % BLOCK_LEAVES) as usize;
        match (leaves.get(at), hashes.get(at)) {
            (Some(leaf), Some(hash)) => Ok((*leaf, *hash)),
            _ => Err(TreeError::LeafOutOfRange { index, size }.into()),
        }
    }
}

impl Subtrees for StoredTree<'_> {
    type Error = StoreError;

    fn subtree(&mut self, level: u32, index: u64) -> Result<TreeHash, StoreError> {
        let width = 1u64 << level;
        let start = index << level;
        if start + width > self.size {
            return Err(TreeError::LeafOutOfRange {
                index: start + width - 1,
                size: self.size,
            }
            .into());
        }
        if level >= NODE_MIN_LEVEL {
            if let Some(node) = self.shared.index.tree_node(self.no, level, index)? {
                return Ok(node);
            }
            // Not in the index yet: the indexer writes about 100 ms behind the
            // acknowledgements. Built from its halves, down to blocks read from the log.
            let left = self.subtree(level - 1, 2 * index)?;
            let right = self.subtree(level - 1, 2 * index + 1)?;
            return Ok(node_hash(&left, &right));
        }
        let block = start / BLOCK_LEAVES;
        let (leaves, _) = self.block(block)?;
        let at = (start % BLOCK_LEAVES) as usize;
        let slice = leaves
            .get(at..at + width as usize)
            .ok_or(TreeError::LeafOutOfRange {
                index: start + width - 1,
                size: block * BLOCK_LEAVES + leaves.len() as u64,
            })?;
        Ok(root(&mut Leaves(slice), width)?)
    }
}

/// The stream's number and the events it holds now.
fn held(shared: &Shared, stream: &StreamId) -> (Option<u64>, u64) {
    let head = shared.head(stream);
    (head.map(|h| h.no), head.map_or(0, |h| h.seq))
}

/// The stream's tree as the store keeps it, for the proofs of `crate::proofs`.
fn open<'a>(
    shared: &'a Shared,
    stream: &'a StreamId,
    no: Option<u64>,
    held: u64,
) -> impl FnOnce() -> Result<StoredTree<'a>, StoreError> {
    move || {
        let no = no.ok_or(StoreError::Tree(TreeError::LeafOutOfRange {
            index: 0,
            size: 0,
        }))?;
        Ok(StoredTree {
            shared,
            stream,
            no,
            size: held,
            blocks: BTreeMap::new(),
        })
    }
}

pub(crate) fn tree_head(
    shared: &Shared,
    stream: &StreamId,
    size: Option<u64>,
) -> Result<TreeHead, StoreError> {
    let (no, held) = held(shared, stream);
    crate::proofs::tree_head(stream, held, size, open(shared, stream, no, held))
}

pub(crate) fn inclusion(
    shared: &Shared,
    stream: &StreamId,
    seq: u64,
    size: Option<u64>,
) -> Result<InclusionProof, StoreError> {
    let (no, held) = held(shared, stream);
    crate::proofs::inclusion(stream, held, seq, size, open(shared, stream, no, held))
}

pub(crate) fn consistency(
    shared: &Shared,
    stream: &StreamId,
    old: u64,
    new: Option<u64>,
) -> Result<ConsistencyProof, StoreError> {
    let (no, held) = held(shared, stream);
    crate::proofs::consistency(stream, held, old, new, open(shared, stream, no, held))
}

/// `verify`'s check of the tree the index keeps: the events' leaves are pushed as they are
/// verified, and every node they close is compared with the index's.
pub(crate) struct TreeCheck<'a> {
    shared: &'a Shared,
    no: u64,
    built: TreeBuilder,
    /// The stream's tree as far as the index had it when the check started: every node
    /// within it must be kept; nodes beyond it may not be written yet.
    indexed: Option<TreeBuilder>,
}

impl<'a> TreeCheck<'a> {
    pub(crate) fn new(shared: &'a Shared, no: u64) -> Result<TreeCheck<'a>, StoreError> {
        Ok(TreeCheck {
            shared,
            no,
            built: TreeBuilder::new(),
            indexed: shared.index.frontier(no)?,
        })
    }

    /// Pushes the next event's leaf; the first node that differs from the index's, if any.
    pub(crate) fn push(&mut self, leaf: TreeHash) -> Result<Option<ChainBreak>, StoreError> {
        let indexed_size = self.indexed.as_ref().map_or(0, TreeBuilder::size);
        let (index, no) = (&self.shared.index, self.no);
        let mut found = None;
        let mut failed = None;
        self.built.push_reporting(leaf, |level, at, computed| {
            if level < NODE_MIN_LEVEL || found.is_some() || failed.is_some() {
                return;
            }
            match index.tree_node(no, level, at) {
                Err(e) => failed = Some(e),
                Ok(stored) => {
                    let kept_by_now = (at + 1) << level <= indexed_size;
                    let wrong = stored.map_or(kept_by_now, |s| s != *computed);
                    if wrong {
                        found = Some(ChainBreak::TreeNode {
                            level,
                            index: at,
                            stored,
                            computed: *computed,
                        });
                    }
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        if found.is_some() {
            return Ok(found);
        }
        if let Some(indexed) = &self.indexed
            && indexed.size() == self.built.size()
        {
            // The frontier the index goes on from: its low subtrees are kept nowhere else.
            let mut start = 0u64;
            for (kept, computed) in indexed.frontier().iter().zip(self.built.frontier()) {
                if kept != computed {
                    return Ok(Some(ChainBreak::TreeNode {
                        level: computed.0,
                        index: start >> computed.0,
                        stored: Some(kept.1),
                        computed: computed.1,
                    }));
                }
                start += 1u64 << computed.0;
            }
        }
        Ok(None)
    }
}
