//! C2SP tlog-checkpoints (<https://c2sp.org/tlog-checkpoint>): the text a key signs to
//! vouch for a Merkle tree, `origin\nsize\nbase64(root)\n`, then optional extension lines.
//!
//! docket signs one per finished run (origin `<instance>/run/<run id>`) and one for the
//! instance's log of run heads (origin `<instance>/heads`); docs/checkpoints.md.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use docket_store::merkle::TreeHash;

use crate::note::{NoteError, SignedNote, SignerKey, VerifierKey};

/// What is wrong with a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    #[error(transparent)]
    Note(#[from] NoteError),
    #[error("malformed checkpoint: {0}")]
    Malformed(String),
}

/// The origin of a run's checkpoints: the instance's key name, `/run/`, the run id.
pub fn run_origin(instance: &str, run: &str) -> String {
    format!("{instance}/run/{run}")
}

/// The origin of the checkpoints of an instance's log of run heads.
pub fn heads_origin(instance: &str) -> String {
    format!("{instance}/heads")
}

/// What a checkpoint vouches for, once its origin is read against the instance's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    Run(String),
    Heads,
    /// Another log's origin (not this instance's).
    Foreign,
}

/// A tree head with its origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root: TreeHash,
    /// Lines after the root; docket writes none and ignores any.
    pub extensions: Vec<String>,
}

impl Checkpoint {
    pub fn new(origin: String, size: u64, root: TreeHash) -> Checkpoint {
        Checkpoint {
            origin,
            size,
            root,
            extensions: Vec::new(),
        }
    }

    /// The checkpoint body, the text that is signed.
    pub fn body(&self) -> String {
        let mut text = format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            B64.encode(self.root.0)
        );
        for line in &self.extensions {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    /// Parses a checkpoint body strictly: a non-empty origin, a decimal size without
    /// leading zeros, a standard-base64 32-byte root, then non-empty extension lines.
    ///
    /// # Errors
    /// [`CheckpointError::Malformed`] naming the line.
    pub fn parse(text: &str) -> Result<Checkpoint, CheckpointError> {
        let bad = |why: String| CheckpointError::Malformed(why);
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| bad("the body does not end with a newline".to_owned()))?;
        let mut lines = body.split('\n');
        let origin = lines.next().unwrap_or_default();
        if origin.is_empty() {
            return Err(bad("line 1, the origin, is empty".to_owned()));
        }
        let size_text = lines
            .next()
            .ok_or_else(|| bad("line 2, the tree size, is missing".to_owned()))?;
        let canonical = size_text == "0"
            || (!size_text.is_empty()
                && !size_text.starts_with('0')
                && size_text.bytes().all(|b| b.is_ascii_digit()));
        let size = size_text
            .parse::<u64>()
            .ok()
            .filter(|_| canonical)
            .ok_or_else(|| {
                bad(format!(
                    "line 2, the tree size {size_text:?}, is not a decimal number without leading zeros"
                ))
            })?;
        let root_text = lines
            .next()
            .ok_or_else(|| bad("line 3, the root hash, is missing".to_owned()))?;
        let root = B64
            .decode(root_text)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| {
                bad(format!(
                    "line 3, the root hash {root_text:?}, is not 32 bytes in standard base64"
                ))
            })?;
        let mut extensions = Vec::new();
        for (i, line) in lines.enumerate() {
            if line.is_empty() {
                return Err(bad(format!("line {} is empty", i + 4)));
            }
            extensions.push(line.to_owned());
        }
        Ok(Checkpoint {
            origin: origin.to_owned(),
            size,
            root: TreeHash(root),
            extensions,
        })
    }

    /// What this checkpoint is about, for an instance named `instance`.
    pub fn subject(&self, instance: &str) -> Subject {
        if self.origin == heads_origin(instance) {
            return Subject::Heads;
        }
        match self.origin.strip_prefix(&format!("{instance}/run/")) {
            Some(run) if !run.is_empty() => Subject::Run(run.to_owned()),
            _ => Subject::Foreign,
        }
    }

    /// The signed note of this checkpoint.
    ///
    /// # Errors
    /// [`CheckpointError::Note`] when the body is not a valid note text (an origin with a
    /// control character).
    pub fn sign(&self, key: &SignerKey) -> Result<String, CheckpointError> {
        Ok(key.sign(&self.body())?)
    }
}

/// A signed checkpoint as read from a note: its checkpoint and the note, signatures not
/// yet checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedCheckpoint {
    pub checkpoint: Checkpoint,
    pub note: SignedNote,
}

impl SignedCheckpoint {
    /// Parses a signed note holding a checkpoint.
    ///
    /// # Errors
    /// [`CheckpointError`] for a malformed note or body.
    pub fn parse(note: &str) -> Result<SignedCheckpoint, CheckpointError> {
        let note = SignedNote::parse(note)?;
        let checkpoint = Checkpoint::parse(note.text())?;
        Ok(SignedCheckpoint { checkpoint, note })
    }

    /// The key among `keys` that signed it.
    ///
    /// # Errors
    /// The first key's error when none verifies (an invalid signature before a missing one).
    pub fn signed_by<'k>(&self, keys: &'k [VerifierKey]) -> Result<&'k VerifierKey, NoteError> {
        let mut first_error = None;
        for key in keys {
            match self.note.verify(key) {
                Ok(()) => return Ok(key),
                Err(e @ NoteError::InvalidSignature { .. }) => return Err(e),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| NoteError::NotSignedBy {
            key: "(no key to check it with)".to_owned(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::SignerKey;

    #[test]
    fn bodies_round_trip_and_parse_strictly() {
        let cp = Checkpoint::new(run_origin("example.com/d", "run-1"), 7, TreeHash([3; 32]));
        let body = cp.body();
        assert_eq!(
            body,
            "example.com/d/run/run-1\n7\nAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=\n"
        );
        assert_eq!(Checkpoint::parse(&body).unwrap(), cp);
        assert_eq!(cp.subject("example.com/d"), Subject::Run("run-1".into()));
        assert_eq!(cp.subject("other"), Subject::Foreign);
        let heads = Checkpoint::new(heads_origin("i"), 0, TreeHash([0; 32]));
        assert_eq!(heads.subject("i"), Subject::Heads);
        let root = "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=";
        for bad in [
            format!("o\n7\n{root}"),
            format!("\n7\n{root}\n"),
            format!("o\n07\n{root}\n"),
            format!("o\n-1\n{root}\n"),
            format!("o\n7\n{}\n", &root[..20]),
            format!("o\n7\n{root}\n\n"),
            "o\n7\n".to_owned(),
        ] {
            assert!(Checkpoint::parse(&bad).is_err(), "accepted {bad:?}");
        }
        let with_ext = Checkpoint::parse(&format!("o\n0\n{root}\nextra\n")).unwrap();
        assert_eq!(with_ext.extensions, vec!["extra".to_owned()]);
    }

    #[test]
    fn signed_checkpoints_verify_with_their_key_only() {
        let key = SignerKey::from_seed("inst", [7; 32]).unwrap();
        let other = SignerKey::from_seed("inst", [8; 32]).unwrap();
        let cp = Checkpoint::new(heads_origin("inst"), 2, TreeHash([1; 32]));
        let note = cp.sign(&key).unwrap();
        let signed = SignedCheckpoint::parse(&note).unwrap();
        assert_eq!(signed.checkpoint, cp);
        let keys = [other.verifier(), key.verifier()];
        assert_eq!(signed.signed_by(&keys).unwrap(), &key.verifier());
        assert!(signed.signed_by(&keys[..1]).is_err());
        let forged = note.replace("\n2\n", "\n3\n");
        assert!(matches!(
            SignedCheckpoint::parse(&forged).unwrap().signed_by(&keys),
            Err(NoteError::InvalidSignature { .. })
        ));
    }
}
