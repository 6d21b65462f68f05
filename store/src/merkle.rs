//! RFC 9162 (§2.1) Merkle trees over a stream's events, SHA-256, beside the BLAKE3 chain.
//!
//! The chain proves an event's place only to someone holding every event before it; the
//! tree lets an auditor check one event against a signed root with `log2(n)` hashes
//! (an inclusion proof), and that a later log still contains an earlier one unchanged
//! (a consistency proof), with any RFC 9162 / RFC 6962 library. Leaf `i` is event
//! `seq = i + 1`; its leaf data is the event's record body as written in the log,
//! `canonical body ‖ prev ‖ hash` (store/FORMAT.md, "Merkle tree").
//!
//! The functions here are pure. Where subtree roots come from is the caller's choice
//! ([`Subtrees`]): leaf hashes in memory ([`Leaves`]) or nodes kept by the store.

use std::convert::Infallible;
use std::fmt;

use sha2::{Digest, Sha256};

use crate::event::Event;

/// A SHA-256 node of a Merkle tree: a leaf hash, an interior node or a root.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TreeHash(pub [u8; 32]);

impl TreeHash {
    /// Lower-case hex.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Display for TreeHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for TreeHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TreeHash({})", self.to_hex())
    }
}

/// The root of the tree with no leaves: SHA-256 of nothing.
pub fn empty_root() -> TreeHash {
    TreeHash(Sha256::digest([]).into())
}

/// `SHA-256(0x00 ‖ data)`: the prefix keeps a leaf from ever passing for a node.
pub fn leaf_hash(data: &[u8]) -> TreeHash {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(data);
    TreeHash(hasher.finalize().into())
}

/// `SHA-256(0x01 ‖ left ‖ right)`.
pub fn node_hash(left: &TreeHash, right: &TreeHash) -> TreeHash {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left.0);
    hasher.update(right.0);
    TreeHash(hasher.finalize().into())
}

/// The leaf hash of an event: its record body as the log holds it, `canonical body ‖
/// prev ‖ hash`, so the tree commits to the chain as well as to the content.
pub fn event_leaf_hash(event: &Event) -> TreeHash {
    let body = crate::codec::body_of(event);
    event_leaf_hash_of_body(&body, event)
}

/// [`event_leaf_hash`] when the canonical body is already at hand.
pub(crate) fn event_leaf_hash_of_body(body: &[u8], event: &Event) -> TreeHash {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(body);
    hasher.update(event.prev.0);
    hasher.update(event.hash.0);
    TreeHash(hasher.finalize().into())
}

/// A request no tree can answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("leaf {index} is not in a tree of {size} leaves")]
    LeafOutOfRange { index: u64, size: u64 },
    #[error(
        "a consistency proof goes from a smaller tree to a larger one; asked from {old} to {new} leaves"
    )]
    Shrinking { old: u64, new: u64 },
}

/// Why a proof does not check.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProofFailure {
    #[error(transparent)]
    Request(#[from] TreeError),
    #[error("the proof has {found} hashes; one for a tree of this shape has {expected}")]
    WrongLength { expected: usize, found: usize },
    #[error(
        "the proof leads to root {computed}, not to the root it is checked against ({expected})"
    )]
    RootMismatch {
        expected: TreeHash,
        computed: TreeHash,
    },
    #[error(
        "the proof leads to old root {computed}, not to the old root it is checked against ({expected})"
    )]
    OldRootMismatch {
        expected: TreeHash,
        computed: TreeHash,
    },
}

/// Where the roots of complete, aligned subtrees come from.
pub trait Subtrees {
    type Error: From<TreeError>;
    /// The root of the `2^level` leaves starting at leaf `index << level`.
    fn subtree(&mut self, level: u32, index: u64) -> Result<TreeHash, Self::Error>;
}

/// Leaf hashes in memory: every subtree computed from them.
pub struct Leaves<'a>(pub &'a [TreeHash]);

impl Subtrees for Leaves<'_> {
    type Error = TreeError;
    fn subtree(&mut self, level: u32, index: u64) -> Result<TreeHash, TreeError> {
        let width = 1u64 << level;
        let start = index * width;
        let size = self.0.len() as u64;
        if start + width > size {
            return Err(TreeError::LeafOutOfRange {
                index: start + width - 1,
                size,
            });
        }
        Ok(slice_root(
            &self.0[start as usize..(start + width) as usize],
        ))
    }
}

impl From<Infallible> for TreeError {
    fn from(never: Infallible) -> TreeError {
        match never {}
    }
}

fn slice_root(leaves: &[TreeHash]) -> TreeHash {
    match leaves.len() {
        0 => empty_root(),
        1 => leaves[0],
        n => {
            let k = split(n as u64) as usize;
            node_hash(&slice_root(&leaves[..k]), &slice_root(&leaves[k..]))
        }
    }
}

/// The largest power of two smaller than `n` (`n >= 2`): where RFC 9162 splits a tree.
fn split(n: u64) -> u64 {
    1u64 << (63 - (n - 1).leading_zeros())
}

/// `MTH(D[start:end])`, built from the largest aligned complete subtrees.
fn range_root<S: Subtrees>(source: &mut S, start: u64, end: u64) -> Result<TreeHash, S::Error> {
    let n = end - start;
    if n == 0 {
        return Ok(empty_root());
    }
    if n.is_power_of_two() && start.is_multiple_of(n) {
        let level = n.trailing_zeros();
        return source.subtree(level, start >> level);
    }
    let k = if n == 1 { 1 } else { split(n) };
    let left = range_root(source, start, start + k)?;
    let right = range_root(source, start + k, end)?;
    Ok(node_hash(&left, &right))
}

/// The root of the tree of the first `size` leaves.
pub fn root<S: Subtrees>(source: &mut S, size: u64) -> Result<TreeHash, S::Error> {
    range_root(source, 0, size)
}

/// The audit path of leaf `index` in the tree of `size` leaves (RFC 9162 §2.1.3.1),
/// nearest sibling first.
pub fn inclusion_proof<S: Subtrees>(
    source: &mut S,
    index: u64,
    size: u64,
) -> Result<Vec<TreeHash>, S::Error> {
    if index >= size {
        return Err(TreeError::LeafOutOfRange { index, size }.into());
    }
    let mut path = Vec::new();
    path_of(source, index, 0, size, &mut path)?;
    Ok(path)
}

fn path_of<S: Subtrees>(
    source: &mut S,
    index: u64,
    start: u64,
    end: u64,
    path: &mut Vec<TreeHash>,
) -> Result<(), S::Error> {
    let n = end - start;
    if n <= 1 {
        return Ok(());
    }
    let k = split(n);
    if index < start + k {
        path_of(source, index, start, start + k, path)?;
        path.push(range_root(source, start + k, end)?);
    } else {
        path_of(source, index, start + k, end, path)?;
        path.push(range_root(source, start, start + k)?);
    }
    Ok(())
}

/// The proof that the tree of `old` leaves is a prefix of the tree of `new` leaves
/// (RFC 9162 §2.1.4.1). Empty when `old` is 0 or equals `new`.
pub fn consistency_proof<S: Subtrees>(
    source: &mut S,
    old: u64,
    new: u64,
) -> Result<Vec<TreeHash>, S::Error> {
    if old > new {
        return Err(TreeError::Shrinking { old, new }.into());
    }
    let mut proof = Vec::new();
    if old > 0 && old < new {
        subproof(source, old, 0, new, true, &mut proof)?;
    }
    Ok(proof)
}

fn subproof<S: Subtrees>(
    source: &mut S,
    m: u64,
    start: u64,
    end: u64,
    whole: bool,
    proof: &mut Vec<TreeHash>,
) -> Result<(), S::Error> {
    let n = end - start;
    if m == n {
        if !whole {
            proof.push(range_root(source, start, end)?);
        }
        return Ok(());
    }
    let k = split(n);
    if m <= k {
        subproof(source, m, start, start + k, whole, proof)?;
        proof.push(range_root(source, start + k, end)?);
    } else {
        subproof(source, m - k, start + k, end, false, proof)?;
        proof.push(range_root(source, start, start + k)?);
    }
    Ok(())
}

/// Checks an inclusion proof (RFC 9162 §2.1.3.2).
pub fn verify_inclusion(
    leaf: &TreeHash,
    index: u64,
    size: u64,
    proof: &[TreeHash],
    root: &TreeHash,
) -> Result<(), ProofFailure> {
    if index >= size {
        return Err(TreeError::LeafOutOfRange { index, size }.into());
    }
    let expected = inclusion_length(index, size);
    if proof.len() != expected {
        return Err(ProofFailure::WrongLength {
            expected,
            found: proof.len(),
        });
    }
    let (mut fnode, mut snode) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if fnode & 1 == 1 || fnode == snode {
            r = node_hash(p, &r);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if r != *root {
        return Err(ProofFailure::RootMismatch {
            expected: *root,
            computed: r,
        });
    }
    Ok(())
}

/// How many hashes the audit path of `index` in a tree of `size` has: the verification
/// loop of RFC 9162 §2.1.3.2 run without hashing.
fn inclusion_length(index: u64, size: u64) -> usize {
    let (mut fnode, mut snode, mut len) = (index, size - 1, 0usize);
    while snode > 0 {
        len += 1;
        if fnode & 1 == 1 || fnode == snode {
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        }
        fnode >>= 1;
        snode >>= 1;
    }
    len
}

/// Checks a consistency proof (RFC 9162 §2.1.4.2).
pub fn verify_consistency(
    old: u64,
    new: u64,
    old_root: &TreeHash,
    new_root: &TreeHash,
    proof: &[TreeHash],
) -> Result<(), ProofFailure> {
    if old > new {
        return Err(TreeError::Shrinking { old, new }.into());
    }
    if old == new || old == 0 {
        if !proof.is_empty() {
            return Err(ProofFailure::WrongLength {
                expected: 0,
                found: proof.len(),
            });
        }
        if old == 0 && *old_root != empty_root() {
            return Err(ProofFailure::OldRootMismatch {
                expected: *old_root,
                computed: empty_root(),
            });
        }
        if old == new && old_root != new_root {
            return Err(ProofFailure::RootMismatch {
                expected: *new_root,
                computed: *old_root,
            });
        }
        return Ok(());
    }
    let mut path: Vec<TreeHash> = Vec::with_capacity(proof.len() + 1);
    if old.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let Some((first, rest)) = path.split_first() else {
        return Err(ProofFailure::WrongLength {
            expected: 1,
            found: 0,
        });
    };
    let (mut fnode, mut snode) = (old - 1, new - 1);
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if snode == 0 {
            return Err(ProofFailure::WrongLength {
                expected: proof.len() - rest.len(),
                found: proof.len(),
            });
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(ProofFailure::WrongLength {
            expected: proof.len() + 1,
            found: proof.len(),
        });
    }
    if fr != *old_root {
        return Err(ProofFailure::OldRootMismatch {
            expected: *old_root,
            computed: fr,
        });
    }
    if sr != *new_root {
        return Err(ProofFailure::RootMismatch {
            expected: *new_root,
            computed: sr,
        });
    }
    Ok(())
}

/// A tree built one leaf at a time in `O(log n)` memory: the roots of its complete
/// subtrees, largest first. Verification streams a whole log through it.
#[derive(Clone, Debug, Default)]
pub struct TreeBuilder {
    size: u64,
    /// `(level, root)` of each complete subtree, levels strictly decreasing.
    frontier: Vec<(u32, TreeHash)>,
}

impl TreeBuilder {
    pub fn new() -> TreeBuilder {
        TreeBuilder::default()
    }

    /// Leaves pushed so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Adds the next leaf.
    pub fn push(&mut self, leaf: TreeHash) {
        self.push_reporting(leaf, |_, _, _| {});
    }

    /// Adds the next leaf and reports every complete subtree it closes, as `(level,
    /// index, root)`, leaf first (level 0), so a store can keep the nodes it wants.
    pub fn push_reporting(&mut self, leaf: TreeHash, mut closed: impl FnMut(u32, u64, &TreeHash)) {
        let index = self.size;
        closed(0, index, &leaf);
        let mut level = 0u32;
        let mut hash = leaf;
        while let Some(&(top_level, top)) = self.frontier.last() {
            if top_level != level {
                break;
            }
            self.frontier.pop();
            hash = node_hash(&top, &hash);
            level += 1;
            closed(level, index >> level, &hash);
        }
        self.frontier.push((level, hash));
        self.size += 1;
    }

    /// `(level, root)` of its complete subtrees, largest first: what a store keeps to go on
    /// pushing leaves after a restart.
    pub(crate) fn frontier(&self) -> &[(u32, TreeHash)] {
        &self.frontier
    }

    /// A builder that goes on from a kept frontier; `None` unless the levels are those of
    /// `size` in binary (one subtree per bit set, largest first).
    pub(crate) fn resume(size: u64, frontier: Vec<(u32, TreeHash)>) -> Option<TreeBuilder> {
        let mut bits = size;
        for &(level, _) in frontier.iter().rev() {
            // The smallest bit left must be exactly this level.
            if level >= 64 || bits.trailing_zeros() != level || bits == 0 {
                return None;
            }
            bits &= bits - 1;
        }
        (bits == 0).then_some(TreeBuilder { size, frontier })
    }

    /// The root of the leaves pushed so far.
    pub fn root(&self) -> TreeHash {
        let mut nodes = self.frontier.iter().rev();
        let Some(&(_, mut hash)) = nodes.next() else {
            return empty_root();
        };
        for (_, left) in nodes {
            hash = node_hash(left, &hash);
        }
        hash
    }
}

#[cfg(test)]
mod tests;
