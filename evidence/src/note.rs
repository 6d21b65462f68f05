//! C2SP signed notes (<https://c2sp.org/signed-note>) with Ed25519 keys, in the key and
//! note encodings of Go's `golang.org/x/mod/sumdb/note`, so any tool that checks Go
//! checksum-database or transparency-log checkpoints checks docket's (docs/checkpoints.md).
//!
//! A note is UTF-8 text ending in a newline, a blank line, then signature lines
//! `— <key name> <base64(key id ‖ signature)>`. The key id is the first 4 bytes of
//! `SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key)`; `0x01` names Ed25519. Parsing is strict: any
//! deviation is a [`NoteError`] saying what.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

/// The algorithm byte of an Ed25519 key in C2SP signed-note keys.
const ALG_ED25519: u8 = 0x01;
/// Go refuses notes with more signatures than this; so do we.
const MAX_SIGNATURES: usize = 100;
/// The signature line prefix: an em dash and a space.
const SIG_PREFIX: &str = "\u{2014} ";

/// What is wrong with a key, a note or a signature.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoteError {
    #[error("malformed key: {0}")]
    MalformedKey(String),
    #[error("malformed note: {0}")]
    MalformedNote(String),
    #[error("the note has no signature by key {key}")]
    NotSignedBy { key: String },
    #[error("invalid signature for key {key}: the note's text is not what the key signed")]
    InvalidSignature { key: String },
}

/// A key name: non-empty UTF-8 with no `+` and no white space (it is a field of the key
/// encodings and of signature lines).
pub fn check_key_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the key name is empty".to_owned());
    }
    if let Some(c) = name.chars().find(|c| *c == '+' || c.is_whitespace()) {
        return Err(format!(
            "the key name {name:?} contains {c:?}; a name holds no '+' and no white space"
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(format!(
            "the key name {name:?} contains a control character"
        ));
    }
    Ok(())
}

/// `SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key)[0..4]`, big-endian.
fn key_id(name: &str, public: &[u8; 32]) -> u32 {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update(b"\n");
    hasher.update([ALG_ED25519]);
    hasher.update(public);
    let digest = hasher.finalize();
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// A public key that checks signatures: `name+hexkeyid+base64(0x01 ‖ public key)`.
#[derive(Clone, PartialEq, Eq)]
pub struct VerifierKey {
    name: String,
    id: u32,
    key: VerifyingKey,
}

impl VerifierKey {
    /// Parses the verifier-key encoding, checking the key id against the key.
    ///
    /// # Errors
    /// [`NoteError::MalformedKey`] saying which part is wrong.
    pub fn parse(text: &str) -> Result<VerifierKey, NoteError> {
        let bad = |why: String| NoteError::MalformedKey(why);
        let mut parts = text.splitn(3, '+');
        let (Some(name), Some(id_hex), Some(key_b64)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad(format!(
                "{text:?} is not a verifier key (name+keyid+base64 key)"
            )));
        };
        check_key_name(name).map_err(bad)?;
        let id = parse_key_id(id_hex).map_err(bad)?;
        let bytes = B64
            .decode(key_b64)
            .map_err(|e| bad(format!("the key of {name} is not standard base64: {e}")))?;
        let public = ed25519_public(&bytes).map_err(bad)?;
        let key = VerifyingKey::from_bytes(&public)
            .map_err(|_| bad(format!("the key of {name} is not an Ed25519 public key")))?;
        if key_id(name, &public) != id {
            return Err(bad(format!(
                "the key id {id_hex} of {name} does not match its key (it should be {:08x})",
                key_id(name, &public)
            )));
        }
        Ok(VerifierKey {
            name: name.to_owned(),
            id,
            key,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The 4-byte key id, as in signature lines.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// `name+keyid`, how errors and reports name a key.
    pub fn label(&self) -> String {
        format!("{}+{:08x}", self.name, self.id)
    }

    fn verifies(&self, text: &[u8], signature: &[u8]) -> bool {
        let Ok(signature) = <[u8; 64]>::try_from(signature) else {
            return false;
        };
        let signature = ed25519_dalek::Signature::from_bytes(&signature);
        self.key.verify_strict(text, &signature).is_ok()
    }
}

impl fmt::Display for VerifierKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut bytes = vec![ALG_ED25519];
        bytes.extend_from_slice(self.key.as_bytes());
        write!(f, "{}+{:08x}+{}", self.name, self.id, B64.encode(bytes))
    }
}

impl fmt::Debug for VerifierKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VerifierKey({self})")
    }
}

/// A private key that signs notes: `PRIVATE+KEY+name+hexkeyid+base64(0x01 ‖ seed)`.
/// Its `Debug` shows only the public half.
#[derive(Clone)]
pub struct SignerKey {
    name: String,
    id: u32,
    key: SigningKey,
}

impl SignerKey {
    /// A new key named `name` from a 32-byte Ed25519 seed.
    ///
    /// # Errors
    /// [`NoteError::MalformedKey`] for a name the encodings cannot carry.
    pub fn from_seed(name: &str, seed: [u8; 32]) -> Result<SignerKey, NoteError> {
        check_key_name(name).map_err(NoteError::MalformedKey)?;
        let key = SigningKey::from_bytes(&seed);
        let id = key_id(name, key.verifying_key().as_bytes());
        Ok(SignerKey {
            name: name.to_owned(),
            id,
            key,
        })
    }

    /// Parses the signer-key encoding, checking the key id against the key.
    ///
    /// # Errors
    /// [`NoteError::MalformedKey`] saying which part is wrong (never the key itself).
    pub fn parse(text: &str) -> Result<SignerKey, NoteError> {
        let bad = |why: String| NoteError::MalformedKey(why);
        let rest = text.strip_prefix("PRIVATE+KEY+").ok_or_else(|| {
            bad("a signer key starts with PRIVATE+KEY+ (this is not a private key file)".into())
        })?;
        let mut parts = rest.splitn(3, '+');
        let (Some(name), Some(id_hex), Some(key_b64)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad(
                "a signer key is PRIVATE+KEY+name+keyid+base64 key".to_owned()
            ));
        };
        check_key_name(name).map_err(bad)?;
        let id = parse_key_id(id_hex).map_err(bad)?;
        let bytes = B64
            .decode(key_b64)
            .map_err(|_| bad(format!("the private key of {name} is not standard base64")))?;
        let seed = ed25519_public(&bytes).map_err(|_| {
            bad(format!(
                "the private key of {name} is not 0x01 and a 32-byte Ed25519 seed"
            ))
        })?;
        let signer = SignerKey::from_seed(name, seed)?;
        if signer.id != id {
            return Err(bad(format!(
                "the key id {id_hex} of {name} does not match its key"
            )));
        }
        Ok(signer)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The public half.
    pub fn verifier(&self) -> VerifierKey {
        VerifierKey {
            name: self.name.clone(),
            id: self.id,
            key: self.key.verifying_key(),
        }
    }

    /// The signer-key encoding (secret: written only to the key file).
    pub fn encode(&self) -> String {
        let mut bytes = vec![ALG_ED25519];
        bytes.extend_from_slice(&self.key.to_bytes());
        format!(
            "PRIVATE+KEY+{}+{:08x}+{}",
            self.name,
            self.id,
            B64.encode(bytes)
        )
    }

    /// Signs `text` (which must be a valid note text) as a note with this key's one
    /// signature line.
    ///
    /// # Errors
    /// [`NoteError::MalformedNote`] when `text` is not a valid note text.
    pub fn sign(&self, text: &str) -> Result<String, NoteError> {
        check_text(text)?;
        let signature = self.key.sign(text.as_bytes());
        let mut blob = self.id.to_be_bytes().to_vec();
        blob.extend_from_slice(&signature.to_bytes());
        Ok(format!(
            "{text}\n{SIG_PREFIX}{} {}\n",
            self.name,
            B64.encode(blob)
        ))
    }
}

impl fmt::Debug for SignerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SignerKey(public {})", self.verifier())
    }
}

fn parse_key_id(hex: &str) -> Result<u32, String> {
    if hex.len() != 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("the key id {hex:?} is not 8 hex digits"));
    }
    u32::from_str_radix(hex, 16).map_err(|e| e.to_string())
}

/// `0x01 ‖ 32 bytes` → the 32 bytes.
fn ed25519_public(bytes: &[u8]) -> Result<[u8; 32], String> {
    match bytes.split_first() {
        Some((&ALG_ED25519, rest)) => <[u8; 32]>::try_from(rest)
            .map_err(|_| format!("an Ed25519 key is 32 bytes, this one {}", rest.len())),
        Some((alg, _)) => Err(format!("algorithm byte {alg:#04x} is not Ed25519 (0x01)")),
        None => Err("the key is empty".to_owned()),
    }
}

/// A note's text: non-empty UTF-8 ending in a newline, with no control character but
/// newlines (Go's `note.Open` rules).
fn check_text(text: &str) -> Result<(), NoteError> {
    if !text.ends_with('\n') {
        return Err(NoteError::MalformedNote(
            "the text does not end with a newline".to_owned(),
        ));
    }
    if let Some((line, _)) = text
        .split('\n')
        .enumerate()
        .find(|(_, l)| l.chars().any(|c| c.is_control()))
    {
        return Err(NoteError::MalformedNote(format!(
            "line {} of the text holds a control character",
            line + 1
        )));
    }
    Ok(())
}

/// One signature line of a note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteSignature {
    pub name: String,
    pub key_id: u32,
    /// The Ed25519 signature (the bytes after the key id).
    pub signature: Vec<u8>,
}

/// A note split into its text and signature lines; nothing checked cryptographically yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedNote {
    text: String,
    signatures: Vec<NoteSignature>,
}

impl SignedNote {
    /// Splits a note strictly: the text is everything up to the last blank line, every
    /// line after it a well-formed signature line, the whole ending in a newline.
    ///
    /// # Errors
    /// [`NoteError::MalformedNote`] saying what is wrong.
    pub fn parse(note: &str) -> Result<SignedNote, NoteError> {
        let bad = |why: &str| NoteError::MalformedNote(why.to_owned());
        if note.chars().any(|c| c.is_control() && c != '\n') {
            return Err(bad("it holds a control character"));
        }
        let Some(split) = note.rfind("\n\n") else {
            return Err(bad("no blank line separates the text from the signatures"));
        };
        let text = &note[..=split];
        let sigs = &note[split + 2..];
        check_text(text)?;
        if !sigs.ends_with('\n') {
            return Err(bad("the last signature line does not end with a newline"));
        }
        let mut signatures = Vec::new();
        for (i, line) in sigs[..sigs.len() - 1].split('\n').enumerate() {
            let what =
                |why: &str| NoteError::MalformedNote(format!("signature line {}: {why}", i + 1));
            let rest = line
                .strip_prefix(SIG_PREFIX)
                .ok_or_else(|| what("it does not start with an em dash (—) and a space"))?;
            let (name, blob) = rest
                .split_once(' ')
                .ok_or_else(|| what("it is not `— name signature`"))?;
            check_key_name(name).map_err(|e| what(&e))?;
            let bytes = B64
                .decode(blob)
                .map_err(|_| what("the signature is not standard base64"))?;
            if bytes.len() < 5 {
                return Err(what("the signature is shorter than a key id and one byte"));
            }
            signatures.push(NoteSignature {
                name: name.to_owned(),
                key_id: u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
                signature: bytes[4..].to_vec(),
            });
        }
        if signatures.is_empty() {
            return Err(bad("it has no signature line"));
        }
        if signatures.len() > MAX_SIGNATURES {
            return Err(bad("it has more than 100 signature lines"));
        }
        Ok(SignedNote {
            text: text.to_owned(),
            signatures,
        })
    }

    /// The signed text.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn signatures(&self) -> &[NoteSignature] {
        &self.signatures
    }

    /// Checks the signature by `key` (matched by name and key id; others are ignored, as
    /// C2SP allows cosignatures).
    ///
    /// # Errors
    /// [`NoteError::NotSignedBy`] when no line is by `key`, [`NoteError::InvalidSignature`]
    /// when one is and does not verify.
    pub fn verify(&self, key: &VerifierKey) -> Result<(), NoteError> {
        let mut found = false;
        for s in self
            .signatures
            .iter()
            .filter(|s| s.name == key.name && s.key_id == key.id)
        {
            found = true;
            if !key.verifies(self.text.as_bytes(), &s.signature) {
                return Err(NoteError::InvalidSignature { key: key.label() });
            }
        }
        if found {
            Ok(())
        } else {
            Err(NoteError::NotSignedBy { key: key.label() })
        }
    }
}

/// Generates a key from the operating system's randomness.
///
/// # Errors
/// [`NoteError::MalformedKey`] for a bad name, or when no randomness is available.
pub fn generate_key(name: &str) -> Result<SignerKey, NoteError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| {
        NoteError::MalformedKey(format!("the operating system gave no randomness: {e}"))
    })?;
    SignerKey::from_seed(name, seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    // golang.org/x/mod/sumdb/note, note_test.go: the published key pair and note.
    const VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    const SKEY: &str =
        "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    const TEXT: &str = "If you think cryptography is the answer to your problem,\n\
                        then you don't know what your problem is.\n";
    const PETER_SIG: &str = "\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
    const ENOCH_KEY: &str = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop";
    const ENOCH_SIG: &str = "\u{2014} EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n";

    #[test]
    fn go_vectors_sign_byte_for_byte() {
        let signer = SignerKey::parse(SKEY).unwrap();
        assert_eq!(signer.verifier().to_string(), VKEY);
        assert_eq!(signer.encode(), SKEY);
        let note = signer.sign(TEXT).unwrap();
        assert_eq!(note, format!("{TEXT}\n{PETER_SIG}"));
    }

    #[test]
    fn go_vectors_verify_and_cosignatures_are_ignored() {
        let peter = VerifierKey::parse(VKEY).unwrap();
        let enoch = VerifierKey::parse(ENOCH_KEY).unwrap();
        let note = SignedNote::parse(&format!("{TEXT}\n{PETER_SIG}{ENOCH_SIG}")).unwrap();
        assert_eq!(note.text(), TEXT);
        assert_eq!(note.signatures().len(), 2);
        note.verify(&peter).unwrap();
        note.verify(&enoch).unwrap();
        let only_peter = SignedNote::parse(&format!("{TEXT}\n{PETER_SIG}")).unwrap();
        assert_eq!(
            only_peter.verify(&enoch),
            Err(NoteError::NotSignedBy {
                key: "EnochRoot+af0cfe78".into()
            })
        );
        // Go's "invalid signature" case: four bytes spliced into the signature.
        let spliced = format!("{TEXT}\n{}ABCD{}", &PETER_SIG[..60], &PETER_SIG[60..]);
        assert!(matches!(
            SignedNote::parse(&spliced).unwrap().verify(&peter),
            Err(NoteError::InvalidSignature { .. })
        ));
        // A changed text fails.
        let changed = format!("{TEXT}\n{PETER_SIG}").replace("cryptography", "cryptographY");
        assert!(matches!(
            SignedNote::parse(&changed).unwrap().verify(&peter),
            Err(NoteError::InvalidSignature { .. })
        ));
    }

    #[test]
    fn go_malformed_notes_are_refused() {
        let bad = [
            TEXT.to_owned(),
            format!("{TEXT}\n"),
            format!("{TEXT}\n{}", &PETER_SIG[..PETER_SIG.len() - 1]),
            format!("\u{1}{TEXT}\n{PETER_SIG}"),
            format!(
                "{TEXT}\n\u{2014} Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="
            ),
            format!("{TEXT}\n{PETER_SIG}Unexpected line.\n"),
            format!("{TEXT}\n{}", PETER_SIG.repeat(101)),
        ];
        for note in bad {
            assert!(
                matches!(SignedNote::parse(&note), Err(NoteError::MalformedNote(_))),
                "accepted {note:?}"
            );
        }
    }

    #[test]
    fn go_mangled_keys_are_refused() {
        assert!(VerifierKey::parse(VKEY).is_ok());
        let b = VKEY.as_bytes();
        for i in 0..=b.len() {
            for j in i + 1..=b.len() {
                if i != 0 || j != b.len() {
                    let part = String::from_utf8_lossy(&b[i..j]);
                    assert!(VerifierKey::parse(&part).is_err(), "accepted {part:?}");
                }
            }
        }
        for i in 0..b.len() {
            let mut m = b.to_vec();
            m[i] = m[i].wrapping_add(1);
            let m = String::from_utf8_lossy(&m);
            assert!(VerifierKey::parse(&m).is_err(), "accepted {m:?}");
        }
        // Wrong key length, and an unknown algorithm, each with an adjusted key id.
        assert!(
            VerifierKey::parse(
                "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY=="
            )
            .is_err()
        );
        assert!(
            VerifierKey::parse(
                "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
            )
            .is_err()
        );
        let s = SKEY.as_bytes();
        for i in 0..s.len() {
            let mut m = s.to_vec();
            m[i] = m[i].wrapping_add(1);
            let m = String::from_utf8_lossy(&m);
            assert!(SignerKey::parse(&m).is_err(), "accepted {m:?}");
        }
    }

    #[test]
    fn generated_keys_round_trip() {
        let signer = generate_key("example.com/docket-1").unwrap();
        let again = SignerKey::parse(&signer.encode()).unwrap();
        assert_eq!(again.verifier(), signer.verifier());
        let verifier = VerifierKey::parse(&signer.verifier().to_string()).unwrap();
        let note = signer.sign("origin\n1\nroot\n").unwrap();
        SignedNote::parse(&note).unwrap().verify(&verifier).unwrap();
        let other = generate_key("example.com/docket-1").unwrap();
        assert!(matches!(
            SignedNote::parse(&note).unwrap().verify(&other.verifier()),
            Err(NoteError::NotSignedBy { .. })
        ));
        assert!(generate_key("has space").is_err());
        assert!(generate_key("has+plus").is_err());
        assert!(signer.sign("no newline").is_err());
        assert!(!format!("{signer:?}").contains("PRIVATE"));
    }
}
