//! An instance's signing key, kept outside the log (docs/checkpoints.md#keys).
//!
//! The private key, in the signer-key encoding (`PRIVATE+KEY+name+keyid+base64`), is
//! where [`KeyPlace`] says: `<data>/keys/signer.key` (mode 0600) by default, a file of
//! its own elsewhere, or given to the process. Its public half is always
//! `<data>/keys/verifier.key`, where verification finds it. A key replaced leaves its
//! public half in `<data>/keys/retired/`, so the seals it made still verify. Nothing here
//! is ever in `log/`: whoever can read the log cannot sign with it.

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
    /// The key file a [`KeyPlace::File`] names is not there.
    #[error(
        "no signing key at {path}, where the signing key is kept: make one there, or copy the instance's key there"
    )]
    Missing { path: PathBuf },
    /// A key cannot be made where the key is given to the process, or where there is none.
    #[error("{0}")]
    NotHere(&'static str),
    #[error(transparent)]
    Key(#[from] NoteError),
}

/// Where an instance's private signing key is kept (docs/checkpoints.md#keys). Its public
/// half is kept in the data directory whatever the place.
#[derive(Clone, Debug, Default)]
pub enum KeyPlace {
    /// `<data>/keys/signer.key`.
    #[default]
    DataDirectory,
    /// A file of its own, e.g. on a volume the data directory's readers cannot read.
    File(PathBuf),
    /// The key itself, given to the process (from a secret store, through the
    /// environment).
    Given(Box<SignerKey>),
    /// No key: nothing is signed.
    Unsigned,
}

impl KeyPlace {
    /// A place as a setting names it: `none` for [`KeyPlace::Unsigned`], a signer key
    /// (`PRIVATE+KEY+...`) for [`KeyPlace::Given`], anything else a file's path.
    ///
    /// # Errors
    /// [`KeyError::Key`] for a value that begins as a signer key and does not parse; the
    /// key itself is not quoted.
    pub fn parse(value: &str) -> Result<KeyPlace, KeyError> {
        let value = value.trim();
        if value == "none" {
            Ok(KeyPlace::Unsigned)
        } else if value.starts_with("PRIVATE+KEY+") {
            Ok(KeyPlace::Given(Box::new(SignerKey::parse(value)?)))
        } else if value.is_empty() {
            Ok(KeyPlace::DataDirectory)
        } else {
            Ok(KeyPlace::File(PathBuf::from(value)))
        }
    }

    /// The private key's file, for a place that is one.
    #[must_use]
    pub fn file(&self, data: &Path) -> Option<PathBuf> {
        match self {
            KeyPlace::DataDirectory => Some(keys_dir(data).join(SIGNER_FILE)),
            KeyPlace::File(path) => Some(path.clone()),
            KeyPlace::Given(_) | KeyPlace::Unsigned => None,
        }
    }
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
    generate_in(data, &KeyPlace::DataDirectory, name, force)
}

/// Makes a new key named `name` at `place`, its public half in `data`, and returns the
/// public half. An existing key is replaced only with `force`; the public half of the key
/// it replaces moves to `keys/retired/`.
///
/// # Errors
/// [`KeyError::Exists`] without `force` when a key exists; [`KeyError::NotHere`] for a
/// place that holds no file; I/O errors naming the file.
pub fn generate_in(
    data: &Path,
    place: &KeyPlace,
    name: &str,
    force: bool,
) -> Result<VerifierKey, KeyError> {
    let signer_path = match place {
        KeyPlace::Given(_) => {
            return Err(KeyError::NotHere(
                "the signing key is given to this process (DOCKET_SIGNING_KEY holds the key itself): there is no file to make one in",
            ));
        }
        KeyPlace::Unsigned => {
            return Err(KeyError::NotHere(
                "signing is turned off (DOCKET_SIGNING_KEY=none): unset it to make a key",
            ));
        }
        KeyPlace::DataDirectory => keys_dir(data).join(SIGNER_FILE),
        KeyPlace::File(path) => path.clone(),
    };
    let dir = keys_dir(data);
    if !force {
        let held = match signer_in(data, place) {
            Ok(Some(key)) => Some(key.verifier().to_string()),
            Ok(None) | Err(KeyError::Missing { .. }) => None,
            Err(_) => Some("(unreadable)".to_owned()),
        };
        if let Some(key) = held {
            return Err(KeyError::Exists {
                path: signer_path,
                key,
                retired: dir.join(RETIRED_DIR),
            });
        }
    }
    let key = crate::note::generate_key(name)?;
    if let Some(parent) = signer_path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io("create", parent))?;
    }
    write_atomically(
        &signer_path,
        format!("{}\n", key.encode()).as_bytes(),
        0o600,
    )?;
    record_verifier(data, &key.verifier())?;
    Ok(key.verifier())
}

/// Makes the first key of a store just created at `data`, unless `place` already holds
/// one or says not to sign; records the public half of a key given to the process. The
/// public half of a key made, if one was.
///
/// # Errors
/// As [`generate_in`]; [`KeyError::Unreadable`] for a key file there that does not
/// parse.
pub fn first_key(data: &Path, place: &KeyPlace) -> Result<Option<VerifierKey>, KeyError> {
    match place {
        KeyPlace::Unsigned => Ok(None),
        KeyPlace::Given(key) => record_verifier(data, &key.verifier()).map(|_| None),
        KeyPlace::DataDirectory | KeyPlace::File(_) => match signer_in(data, place) {
            Ok(Some(key)) => record_verifier(data, &key.verifier()).map(|_| None),
            Ok(None) | Err(KeyError::Missing { .. }) => {
                generate_in(data, place, &default_name()?, false).map(Some)
            }
            Err(e) => Err(e),
        },
    }
}

/// Makes `key` the current public key of `data` (`keys/verifier.key`), the one it held
/// before moving to `keys/retired/`. Whether anything changed.
///
/// # Errors
/// I/O errors naming the file; [`KeyError::Unreadable`] for a damaged current key.
pub fn record_verifier(data: &Path, key: &VerifierKey) -> Result<bool, KeyError> {
    let dir = keys_dir(data);
    let current = dir.join(VERIFIER_FILE);
    match read_verifier(&current) {
        Ok(Some(old)) if old == *key => return Ok(false),
        Ok(Some(old)) => retire_verifier(data, &old)?,
        Ok(None) => fs::create_dir_all(&dir).map_err(io("create", &dir))?,
        Err(e) => return Err(e),
    }
    write_atomically(&current, format!("{key}\n").as_bytes(), 0o644)?;
    Ok(true)
}

/// Keeps `key` among the retired public keys of `data` (`keys/retired/`): seals it made
/// verify, and it is not the key that signs.
///
/// # Errors
/// I/O errors naming the file.
pub fn retire_verifier(data: &Path, key: &VerifierKey) -> Result<(), KeyError> {
    let retired = keys_dir(data).join(RETIRED_DIR);
    fs::create_dir_all(&retired).map_err(io("create", &retired))?;
    let kept = retired.join(format!("{}+{:08x}.key", sanitize(key.name()), key.id()));
    write_atomically(&kept, format!("{key}\n").as_bytes(), 0o644)
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

/// The signing key of `data`, if it has one in its own directory.
///
/// # Errors
/// [`KeyError::Unreadable`] for a key file that does not parse; I/O errors.
pub fn signer(data: &Path) -> Result<Option<SignerKey>, KeyError> {
    signer_in(data, &KeyPlace::DataDirectory)
}

/// The signing key at `place` (for `data`): `None` when the data directory holds none or
/// signing is off.
///
/// # Errors
/// [`KeyError::Missing`] when a [`KeyPlace::File`] is not there; [`KeyError::Unreadable`]
/// for a key file that does not parse; I/O errors.
pub fn signer_in(data: &Path, place: &KeyPlace) -> Result<Option<SignerKey>, KeyError> {
    let path = match place {
        KeyPlace::Unsigned => return Ok(None),
        KeyPlace::Given(key) => return Ok(Some(SignerKey::clone(key))),
        KeyPlace::DataDirectory => keys_dir(data).join(SIGNER_FILE),
        KeyPlace::File(path) => path.clone(),
    };
    let Some(text) = read_optional(&path)? else {
        return match place {
            KeyPlace::File(_) => Err(KeyError::Missing { path }),
            _ => Ok(None),
        };
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
