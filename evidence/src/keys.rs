//! The data directory's signing key, kept outside the log (docs/checkpoints.md#keys).
//!
//! `<data>/keys/signer.key` holds the private key in the signer-key encoding
//! (`PRIVATE+KEY+name+keyid+base64`), mode 0600; `<data>/keys/verifier.key` its public
//! half. A key replaced with `--force` leaves its public half in `<data>/keys/retired/`,
//! so the seals it made still verify. Nothing here is ever in `log/`: whoever can read
//! the log cannot sign with it.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use crate::note::{NoteError, SignerKey, VerifierKey};

const KEYS_DIR: &str = "keys";
const SIGNER_FILE: &str = "signer.key";
const VERIFIER_FILE: &str = "verifier.key";
const RETIRED_DIR: &str = "retired";

/// Why a key cannot be made or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    #[error(
        "{path} already holds a signing key ({key}); replacing it needs --force (the seals it made stay checkable with its public key, kept in {retired})"
    )]
    Exists {
        path: PathBuf,
        key: String,
        retired: PathBuf,
    },
    #[error("{path}: {source}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: NoteError,
    },
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Key(#[from] NoteError),
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> KeyError {
    let path = path.to_path_buf();
    move |source| KeyError::Io { op, path, source }
}

/// Where the key files of data directory `data` live.
pub fn keys_dir(data: &Path) -> PathBuf {
    data.join(KEYS_DIR)
}

/// Makes a new key named `name` for `data` and returns its public half. An existing key
/// is replaced only with `force`; its public half then moves to `keys/retired/`.
///
/// # Errors
/// [`KeyError::Exists`] without `force` when a key exists; I/O errors naming the file.
pub fn generate(data: &Path, name: &str, force: bool) -> Result<VerifierKey, KeyError> {
    let dir = keys_dir(data);
    let signer_path = dir.join(SIGNER_FILE);
    let retired = dir.join(RETIRED_DIR);
    if let Some(old) = read_verifier(&dir.join(VERIFIER_FILE))? {
        if !force {
            return Err(KeyError::Exists {
                path: signer_path,
                key: old.to_string(),
                retired,
            });
        }
        fs::create_dir_all(&retired).map_err(io("create", &retired))?;
        let kept = retired.join(format!("{}+{:08x}.key", sanitize(old.name()), old.id()));
        write_atomically(&kept, format!("{old}\n").as_bytes(), 0o644)?;
    } else if signer_path.exists() && !force {
        return Err(KeyError::Exists {
            path: signer_path,
            key: "(unreadable)".to_owned(),
            retired,
        });
    }
    let key = crate::note::generate_key(name)?;
    fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    write_atomically(
        &signer_path,
        format!("{}\n", key.encode()).as_bytes(),
        0o600,
    )?;
    write_atomically(
        &dir.join(VERIFIER_FILE),
        format!("{}\n", key.verifier()).as_bytes(),
        0o644,
    )?;
    Ok(key.verifier())
}

/// A name unique to this instance, for a key made without one: the host's name (when it
/// can be read) and 8 random hex digits, e.g. `build-7/docket-3f2a9c1b`.
///
/// # Errors
/// [`KeyError::Key`] when the operating system gives no randomness.
pub fn default_name() -> Result<String, KeyError> {
    let mut suffix = [0u8; 4];
    getrandom::fill(&mut suffix).map_err(|e| {
        NoteError::MalformedKey(format!("the operating system gave no randomness: {e}"))
    })?;
    let hex: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    let host = fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect();
    Ok(if host.is_empty() {
        format!("docket-{hex}")
    } else {
        format!("{host}/docket-{hex}")
    })
}

/// A key name as a file name: anything but letters, digits, `.`, `-` and `_` becomes `_`.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The signing key of `data`, if it has one.
///
/// # Errors
/// [`KeyError::Unreadable`] for a key file that does not parse; I/O errors.
pub fn signer(data: &Path) -> Result<Option<SignerKey>, KeyError> {
    let path = keys_dir(data).join(SIGNER_FILE);
    let Some(text) = read_optional(&path)? else {
        return Ok(None);
    };
    SignerKey::parse(text.trim_end())
        .map(Some)
        .map_err(|source| KeyError::Unreadable { path, source })
}

/// The public key of `data`'s current signing key, if it has one.
///
/// # Errors
/// [`KeyError::Unreadable`], I/O errors.
pub fn verifier(data: &Path) -> Result<Option<VerifierKey>, KeyError> {
    read_verifier(&keys_dir(data).join(VERIFIER_FILE))
}

/// Every public key `data` has signed with: the current one first, then retired ones.
///
/// # Errors
/// [`KeyError::Unreadable`], I/O errors.
pub fn verifiers(data: &Path) -> Result<Vec<VerifierKey>, KeyError> {
    let mut keys: Vec<VerifierKey> = verifier(data)?.into_iter().collect();
    let retired = keys_dir(data).join(RETIRED_DIR);
    let entries = match fs::read_dir(&retired) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(keys),
        Err(e) => return Err(io("list", &retired)(e)),
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if let Some(key) = read_verifier(&path)? {
            keys.push(key);
        }
    }
    Ok(keys)
}

fn read_verifier(path: &Path) -> Result<Option<VerifierKey>, KeyError> {
    let Some(text) = read_optional(path)? else {
        return Ok(None);
    };
    VerifierKey::parse(text.trim_end())
        .map(Some)
        .map_err(|source| KeyError::Unreadable {
            path: path.to_path_buf(),
            source,
        })
}

fn read_optional(path: &Path) -> Result<Option<String>, KeyError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("read", path)(e)),
    }
}

/// Writes `bytes` to `path` through a temporary file created with `mode`, synced, then
/// renamed over it and the directory synced: a reader sees the old file or the new one.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> Result<(), KeyError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
    ));
    let _ = fs::remove_file(&tmp);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io("create", &tmp))?;
    file.write_all(bytes).map_err(io("write", &tmp))?;
    file.sync_all().map_err(io("sync", &tmp))?;
    drop(file);
    fs::rename(&tmp, path).map_err(io("rename into place", path))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("sync", dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn generate_keeps_the_private_key_private_and_refuses_to_overwrite() {
        let data = tempfile::tempdir().unwrap();
        let first = generate(data.path(), "inst", false).unwrap();
        let mode = fs::metadata(keys_dir(data.path()).join(SIGNER_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(signer(data.path()).unwrap().unwrap().verifier(), first);
        assert!(matches!(
            generate(data.path(), "inst", false),
            Err(KeyError::Exists { .. })
        ));
        assert_eq!(verifier(data.path()).unwrap(), Some(first.clone()));
        let second = generate(data.path(), "inst", true).unwrap();
        assert_ne!(first, second);
        assert_eq!(verifiers(data.path()).unwrap(), vec![second, first]);
    }

    #[test]
    fn no_key_is_none_and_a_damaged_key_names_its_file() {
        let data = tempfile::tempdir().unwrap();
        assert!(signer(data.path()).unwrap().is_none());
        assert!(verifiers(data.path()).unwrap().is_empty());
        fs::create_dir_all(keys_dir(data.path())).unwrap();
        fs::write(keys_dir(data.path()).join(SIGNER_FILE), "garbage\n").unwrap();
        let err = signer(data.path()).unwrap_err().to_string();
        assert!(err.contains("signer.key"), "{err}");
    }
}
