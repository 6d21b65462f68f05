//! Reading the files a workflow consists of: the workflow file, the policy bundle it
//! names and its default input. Every such file is read the same way, bounded and without
//! blocking: only a regular file, at most [`MAX_SOURCE_BYTES`], opened so that a FIFO or a
//! device never stalls the reader. A [`SourceRoot`] confines the paths a client of
//! `docket serve` names to one directory (docs/api.md#files-the-api-reads).

use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

/// The largest workflow, bundle or input file read, in bytes: the API's largest request
/// body, so that a file costs no more than a request could.
pub const MAX_SOURCE_BYTES: u64 = 4 * 1024 * 1024;

/// What a source file is to its reader: named in errors, and each kind has the endings
/// the API accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A workflow file (`.toml`).
    Workflow,
    /// A policy bundle (`.toml` or `.json`).
    Bundle,
    /// A run's input (`.json`).
    Input,
}

impl SourceKind {
    fn endings(self) -> &'static [&'static str] {
        match self {
            Self::Workflow => &["toml"],
            Self::Bundle => &["toml", "json"],
            Self::Input => &["json"],
        }
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Workflow => "workflow file",
            Self::Bundle => "policy bundle",
            Self::Input => "input file",
        })
    }
}

/// A source file that was not read. No variant carries any of the file's content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The path leads outside the directory a [`SourceRoot`] confines reads to.
    #[error("{kind} {path}: outside the server's directory {root}; name a file under it")]
    Outside {
        /// What the file was to be.
        kind: SourceKind,
        /// The path as given.
        path: PathBuf,
        /// The directory.
        root: PathBuf,
    },
    /// The path leads into a directory the root keeps out of reach (the data directory:
    /// its keys, tokens and request log).
    #[error("{kind} {path}: inside the data directory, whose files the API does not read")]
    Withheld {
        /// What the file was to be.
        kind: SourceKind,
        /// The path as given.
        path: PathBuf,
    },
    /// A hidden file or a file in a hidden folder (a name starting with `.`), or a name
    /// without an ending the kind accepts.
    #[error("{kind} {path}: {why}")]
    NotAccepted {
        /// What the file was to be.
        kind: SourceKind,
        /// The path as given.
        path: PathBuf,
        /// Why, in words.
        why: String,
    },
    /// Not a regular file (a directory, a FIFO, a device, a socket).
    #[error("{kind} {path}: not a regular file (it is {what})")]
    NotRegular {
        /// What the file was to be.
        kind: SourceKind,
        /// The path as given.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// Larger than [`MAX_SOURCE_BYTES`].
    #[error("{kind} {path}: larger than {limit} bytes")]
    TooLarge {
        /// What the file was to be.
        kind: SourceKind,
        /// The path as given.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// Not UTF-8 text.
    #[error("{kind} {path}: not UTF-8 text")]
    NotText {
        /// What the file was to be.
        kind: SourceKind,
        /// The path as given.
        path: PathBuf,
    },
    /// The file could not be opened or read.
    #[error("cannot read {kind} {path}: {source}")]
    Io {
        /// What the file was to be.
        kind: SourceKind,
        /// The path as given.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl SourceError {
    /// The path the error is about, as it was given.
    #[must_use]
    pub fn path(&self) -> &Path {
        match self {
            Self::Outside { path, .. }
            | Self::Withheld { path, .. }
            | Self::NotAccepted { path, .. }
            | Self::NotRegular { path, .. }
            | Self::TooLarge { path, .. }
            | Self::NotText { path, .. }
            | Self::Io { path, .. } => path,
        }
    }

    /// Whether the error is the server's (a file it could not read for a reason of its
    /// own machine) rather than the request's (a path that names nothing it may read: no
    /// such file, not allowed, a NUL byte, a name too long, a file where a folder should
    /// be).
    #[must_use]
    pub fn is_io(&self) -> bool {
        use std::io::ErrorKind::{
            InvalidFilename, InvalidInput, IsADirectory, NotADirectory, NotFound, PermissionDenied,
        };
        matches!(self, Self::Io { source, .. } if !matches!(
            source.kind(),
            NotFound | PermissionDenied | InvalidInput | InvalidFilename | NotADirectory
                | IsADirectory
        ))
    }
}

/// The directory the paths of API requests are confined to (`docket serve --root`), with
/// the folders inside it that stay out of reach (the data directory). Paths are resolved
/// against it, symbolic links followed and the result checked to lie under it; hidden
/// names (`.env`, `.git/`) and files without the kind's ending are refused.
#[derive(Debug, Clone)]
pub struct SourceRoot {
    root: PathBuf,
    withheld: Vec<PathBuf>,
}

impl SourceRoot {
    /// The root `dir`, keeping `withheld` (folders, typically the data directory) out of
    /// reach even when they lie under it.
    ///
    /// # Errors
    /// The directory cannot be resolved (it does not exist).
    pub fn new(dir: &Path, withheld: &[&Path]) -> std::io::Result<Self> {
        let root = std::fs::canonicalize(dir)?;
        let withheld = withheld
            .iter()
            .map(|w| std::fs::canonicalize(w).or_else(|_| std::path::absolute(w)))
            .collect::<std::io::Result<_>>()?;
        Ok(Self { root, withheld })
    }

    /// The directory, resolved.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// Where `path` (relative to the root, or absolute) really is, when the root lets it
    /// be read as a `kind`: under the root, not withheld, no hidden name, the kind's
    /// ending. The path is checked as written before anything of the file system is
    /// asked, so a path outside says nothing of what exists there.
    ///
    /// # Errors
    /// [`SourceError`] naming the path as given.
    pub fn resolve(&self, path: &Path, kind: SourceKind) -> Result<PathBuf, SourceError> {
        let joined = self.root.join(path);
        let outside = || SourceError::Outside {
            kind,
            path: path.to_owned(),
            root: self.root.clone(),
        };
        if !lexically_normal(&joined).starts_with(&self.root) {
            return Err(outside());
        }
        let real = std::fs::canonicalize(&joined).map_err(|source| SourceError::Io {
            kind,
            path: path.to_owned(),
            source,
        })?;
        let inside = real.strip_prefix(&self.root).map_err(|_| outside())?;
        if self.withheld.iter().any(|w| real.starts_with(w)) {
            return Err(SourceError::Withheld {
                kind,
                path: path.to_owned(),
            });
        }
        let not_accepted = |why: String| SourceError::NotAccepted {
            kind,
            path: path.to_owned(),
            why,
        };
        if inside
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
        {
            return Err(not_accepted(
                "a hidden name (starting with `.`): the API reads no hidden file or folder"
                    .to_owned(),
            ));
        }
        let ending = real.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !kind.endings().contains(&ending) {
            return Err(not_accepted(format!(
                "the API reads a {kind} only from a file ending in .{}",
                kind.endings().join(" or .")
            )));
        }
        Ok(real)
    }

    /// Reads `path` as a `kind` when [`SourceRoot::resolve`] lets it, as [`read_source`]
    /// reads. Returns the file's real path and its text.
    ///
    /// # Errors
    /// [`SourceError`] naming the path as given.
    pub fn read(&self, path: &Path, kind: SourceKind) -> Result<(PathBuf, String), SourceError> {
        let real = self.resolve(path, kind)?;
        let text = read_source(&real, kind).map_err(|e| e.named(path))?;
        Ok((real, text))
    }
}

/// Reads a workflow, bundle or input file: only a regular file, at most
/// [`MAX_SOURCE_BYTES`], opened without blocking (a FIFO answers at once).
///
/// # Errors
/// [`SourceError`] naming `path`.
pub fn read_source(path: &Path, kind: SourceKind) -> Result<String, SourceError> {
    let io = |source| SourceError::Io {
        kind,
        path: path.to_owned(),
        source,
    };
    let not_regular = |meta: &std::fs::Metadata| {
        (!meta.is_file()).then(|| SourceError::NotRegular {
            kind,
            path: path.to_owned(),
            what: file_type_words(meta),
        })
    };
    // Asked before opening, so a FIFO or a device is never opened at all.
    if let Some(e) = not_regular(&std::fs::metadata(path).map_err(io)?) {
        return Err(e);
    }
    let file = open_nonblocking(path).map_err(io)?;
    // Asked again of what was opened: the path may have been replaced in between.
    let meta = file.metadata().map_err(io)?;
    if let Some(e) = not_regular(&meta) {
        return Err(e);
    }
    let too_large = || SourceError::TooLarge {
        kind,
        path: path.to_owned(),
        limit: MAX_SOURCE_BYTES,
    };
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|_| SourceError::NotText {
        kind,
        path: path.to_owned(),
    })
}

impl SourceError {
    /// The same error, naming `path` (the path as the client gave it) instead of the
    /// resolved one.
    fn named(self, given: &Path) -> Self {
        let path = given.to_owned();
        match self {
            Self::Outside { kind, root, .. } => Self::Outside { kind, path, root },
            Self::Withheld { kind, .. } => Self::Withheld { kind, path },
            Self::NotAccepted { kind, why, .. } => Self::NotAccepted { kind, path, why },
            Self::NotRegular { kind, what, .. } => Self::NotRegular { kind, path, what },
            Self::TooLarge { kind, limit, .. } => Self::TooLarge { kind, path, limit },
            Self::NotText { kind, .. } => Self::NotText { kind, path },
            Self::Io { kind, source, .. } => Self::Io { kind, path, source },
        }
    }
}

#[cfg(target_os = "linux")]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits().cast_signed())
        .open(path)
}

#[cfg(not(target_os = "linux"))]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

fn file_type_words(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// `path` without `.` and `..` components, as written (no file system access): `..`
/// removes the component before it.
fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, SourceRoot) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        std::fs::create_dir(dir.path().join("flows")).unwrap();
        std::fs::write(dir.path().join("flows/a.toml"), "name = \"a\"\n").unwrap();
        std::fs::write(dir.path().join("data/signer.key"), "SECRET").unwrap();
        std::fs::write(dir.path().join("data/w.toml"), "SECRET = 1").unwrap();
        let root = SourceRoot::new(dir.path(), &[&dir.path().join("data")]).unwrap();
        (dir, root)
    }

    #[test]
    fn a_file_under_the_root_is_read() {
        let (_dir, root) = root();
        let (_, text) = root
            .read(Path::new("flows/a.toml"), SourceKind::Workflow)
            .unwrap();
        assert_eq!(text, "name = \"a\"\n");
    }

    #[test]
    fn paths_outside_the_root_are_refused_before_the_file_system_is_asked() {
        let (dir, root) = root();
        for path in [
            "../outside.toml",
            "flows/../../outside.toml",
            "/etc/passwd",
            "/no/such/dir/x.toml",
        ] {
            let e = root
                .read(Path::new(path), SourceKind::Workflow)
                .unwrap_err();
            assert!(matches!(e, SourceError::Outside { .. }), "{path}: {e}");
            assert!(
                e.to_string()
                    .contains(&dir.path().canonicalize().unwrap().display().to_string())
            );
        }
    }

    #[test]
    fn a_symbolic_link_out_of_the_root_is_refused() {
        let (dir, root) = root();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.toml"), "x = 1").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("flows/link")).unwrap();
        let e = root
            .read(Path::new("flows/link/secret.toml"), SourceKind::Workflow)
            .unwrap_err();
        assert!(matches!(e, SourceError::Outside { .. }), "{e}");
    }

    #[test]
    fn the_data_directory_hidden_names_and_other_endings_are_withheld() {
        let (dir, root) = root();
        std::fs::write(dir.path().join(".env"), "KEY = 'x'").unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config.toml"), "KEY = 'x'").unwrap();
        let withheld = root
            .read(Path::new("data/w.toml"), SourceKind::Workflow)
            .unwrap_err();
        assert!(
            matches!(withheld, SourceError::Withheld { .. }),
            "{withheld}"
        );
        let key = root
            .read(Path::new("data/signer.key"), SourceKind::Workflow)
            .unwrap_err();
        assert!(matches!(key, SourceError::Withheld { .. }), "{key}");
        for hidden in [".env", ".git/config.toml"] {
            let e = root
                .read(Path::new(hidden), SourceKind::Bundle)
                .unwrap_err();
            assert!(matches!(e, SourceError::NotAccepted { .. }), "{e}");
        }
        let e = root
            .read(Path::new("flows/a.toml"), SourceKind::Input)
            .unwrap_err();
        assert!(e.to_string().contains(".json"), "{e}");
    }

    #[test]
    fn a_fifo_a_device_and_a_directory_are_refused_at_once() {
        let (dir, root) = root();
        let fifo = dir.path().join("flows/f.toml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let e = root
            .read(Path::new("flows/f.toml"), SourceKind::Workflow)
            .unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_source(Path::new("/dev/zero"), SourceKind::Workflow).unwrap_err();
        assert!(e.to_string().contains("a device"), "{e}");
        let e = read_source(dir.path(), SourceKind::Workflow).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
    }

    #[test]
    fn a_file_over_the_limit_is_refused_and_no_error_quotes_content() {
        let (dir, root) = root();
        let big = dir.path().join("flows/big.toml");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_SOURCE_BYTES + 1).unwrap();
        let e = root
            .read(Path::new("flows/big.toml"), SourceKind::Workflow)
            .unwrap_err();
        assert!(matches!(e, SourceError::TooLarge { .. }), "{e}");
        let e = root
            .read(Path::new("data/signer.key"), SourceKind::Workflow)
            .unwrap_err();
        assert!(!e.to_string().contains("SECRET"), "{e}");
    }
}
