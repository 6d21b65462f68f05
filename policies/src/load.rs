//! Reading a bundle from a file: the only I/O in this crate, kept out of decision code.

use std::path::Path;

use crate::compiled::PolicyBundle;
use crate::error::BundleError;
use crate::parse::{self, Format};

/// Reads and parses the bundle at `path` (`.toml` or `.json`).
#[expect(
    clippy::disallowed_methods,
    reason = "the crate's one file read, for the CLI and runtime; no decision calls it"
)]
pub fn load_file(path: &Path) -> Result<PolicyBundle, BundleError> {
    let name = path.display().to_string();
    let format = Format::from_name(&name)
        .ok_or_else(|| BundleError::UnknownFormat { path: name.clone() })?;
    let src = std::fs::read_to_string(path).map_err(|source| BundleError::Io {
        path: name.clone(),
        source,
    })?;
    parse::parse(&src, &name, format)
}
