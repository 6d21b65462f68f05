//! Tree heads and proofs of a stream, whatever backend holds its tree: the checks of what
//! was asked against what the stream holds, and the proofs built from a [`StreamTree`].

use crate::api::{ConsistencyProof, InclusionProof, TreeHead};
use crate::error::{OutsideTree, StoreError};
use crate::event::{Hash, StreamId};
use crate::merkle::{
    Leaves, Subtrees, TreeError, TreeHash, consistency_proof, empty_root, inclusion_proof, root,
};

/// A stream's Merkle tree as a backend holds it: the roots of its subtrees, and each leaf
/// with the chain hash of its event.
pub trait StreamTree: Subtrees<Error = StoreError> {
    /// The leaf hash and chain hash of leaf `index` (event `index + 1`).
    fn leaf(&mut self, index: u64) -> Result<(TreeHash, Hash), StoreError>;
}

/// A tree whose leaves and chain hashes are all in memory, in order from event 1.
pub struct MemoryTree {
    pub leaves: Vec<TreeHash>,
    pub hashes: Vec<Hash>,
}

impl Subtrees for MemoryTree {
    type Error = StoreError;

    fn subtree(&mut self, level: u32, index: u64) -> Result<TreeHash, StoreError> {
        Ok(Leaves(&self.leaves).subtree(level, index)?)
    }
}

impl StreamTree for MemoryTree {
    fn leaf(&mut self, index: u64) -> Result<(TreeHash, Hash), StoreError> {
        let at = usize::try_from(index).unwrap_or(usize::MAX);
        match (self.leaves.get(at), self.hashes.get(at)) {
            (Some(leaf), Some(hash)) => Ok((*leaf, *hash)),
            _ => Err(TreeError::LeafOutOfRange {
                index,
                size: self.leaves.len() as u64,
            }
            .into()),
        }
    }
}

/// The size asked for (`None`: all of it), checked against the `held` events.
fn sized(stream: &StreamId, held: u64, size: Option<u64>) -> Result<u64, StoreError> {
    let size = size.unwrap_or(held);
    if size > held {
        return Err(StoreError::OutsideTree {
            stream: stream.clone(),
            problem: OutsideTree::TreeBeyondStream { size, head: held },
        });
    }
    Ok(size)
}

/// The tree head over the first `size` of the stream's `held` events; `open` gives the
/// stream's tree, asked for only when the stream has events.
pub fn tree_head<T: StreamTree>(
    stream: &StreamId,
    held: u64,
    size: Option<u64>,
    open: impl FnOnce() -> Result<T, StoreError>,
) -> Result<TreeHead, StoreError> {
    let size = sized(stream, held, size)?;
    let root = if size > 0 {
        root(&mut open()?, size)?
    } else {
        empty_root()
    };
    Ok(TreeHead { size, root })
}

/// The inclusion proof of event `seq` in the tree of `size` of the stream's `held` events.
pub fn inclusion<T: StreamTree>(
    stream: &StreamId,
    held: u64,
    seq: u64,
    size: Option<u64>,
    open: impl FnOnce() -> Result<T, StoreError>,
) -> Result<InclusionProof, StoreError> {
    let size = sized(stream, held, size)?;
    let outside = |problem| StoreError::OutsideTree {
        stream: stream.clone(),
        problem,
    };
    if seq == 0 {
        return Err(outside(OutsideTree::EventZero));
    }
    if seq > size {
        return Err(outside(OutsideTree::EventBeyondTree { seq, size }));
    }
    let mut t = open()?;
    let path = inclusion_proof(&mut t, seq - 1, size)?;
    let root = root(&mut t, size)?;
    let (leaf, event_hash) = t.leaf(seq - 1)?;
    Ok(InclusionProof {
        stream: stream.clone(),
        seq,
        event_hash,
        leaf,
        tree: TreeHead { size, root },
        path,
    })
}

/// The consistency proof from the tree of `old` events to the tree of `new` (`None`: all
/// `held`).
pub fn consistency<T: StreamTree>(
    stream: &StreamId,
    held: u64,
    old: u64,
    new: Option<u64>,
    open: impl FnOnce() -> Result<T, StoreError>,
) -> Result<ConsistencyProof, StoreError> {
    let asked_new = new;
    let new = sized(stream, held, new)?;
    if old > new {
        let problem = match asked_new {
            Some(_) => OutsideTree::Shrinking { old, new },
            None => OutsideTree::TreeBeyondStream {
                size: old,
                head: held,
            },
        };
        return Err(StoreError::OutsideTree {
            stream: stream.clone(),
            problem,
        });
    }
    let empty = TreeHead {
        size: 0,
        root: empty_root(),
    };
    if new == 0 {
        return Ok(ConsistencyProof {
            stream: stream.clone(),
            old: empty,
            new: empty,
            path: Vec::new(),
        });
    }
    let mut t = open()?;
    let path = consistency_proof(&mut t, old, new)?;
    let old_root = if old == 0 {
        empty_root()
    } else {
        root(&mut t, old)?
    };
    let new_root = root(&mut t, new)?;
    Ok(ConsistencyProof {
        stream: stream.clone(),
        old: TreeHead {
            size: old,
            root: old_root,
        },
        new: TreeHead {
            size: new,
            root: new_root,
        },
        path,
    })
}
