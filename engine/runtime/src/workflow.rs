//! Reading workflow files: the file, the policy bundle it names, and command, working
//! directory, CA file and input paths made absolute against the workflow's directory; and
//! checking a workflow before a run starts ([`check`]). The format itself, and its
//! parsing, are the decider's ([`WorkflowSpec`]); documented for users in
//! `docs/workflow.md`.

mod check;
mod source;

use std::path::{Path, PathBuf};

pub(crate) use check::problems_text;
pub use check::{WorkflowProblem, check_against_bundle, check_executables, check_workflow};
use docket_decider::{ExecutorSpec, WorkflowError, WorkflowSpec};
pub use source::{MAX_SOURCE_BYTES, SourceError, SourceKind, SourceRoot, read_source};

/// A workflow file that could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowLoadError {
    /// The file could not be read (or, through a [`SourceRoot`], may not be).
    #[error(transparent)]
    Read(SourceError),
    /// The file's text is not a valid workflow.
    #[error(transparent)]
    Spec(#[from] WorkflowError),
    /// The policy bundle could not be read.
    #[error("{source} (named by the workflow's `policy`)")]
    ReadBundle {
        /// Why.
        #[source]
        source: SourceError,
    },
    /// The workflow does not fit its bundle or this machine ([`check_workflow`]): a run of
    /// it would stop at its first use of the part named. (`Runtime::start` reports these
    /// as [`crate::RuntimeError::WorkflowRefused`], not knowing the file; the `docket`
    /// command names the file with this.)
    #[error("invalid workflow file {}: {}", path.display(), problems_text(problems))]
    Refused {
        /// The file.
        path: PathBuf,
        /// Each problem, naming its section and what to do.
        problems: Vec<WorkflowProblem>,
    },
}

/// A workflow read from disk with its bundle's source text, ready to start runs.
#[derive(Debug, Clone)]
pub struct Workflow {
    /// The workflow, with relative command paths made absolute.
    pub spec: WorkflowSpec,
    /// The bundle's source text, recorded in the run.
    pub bundle_source: String,
    /// The bundle's file name (its extension picks TOML or JSON).
    pub bundle_source_name: String,
}

impl Workflow {
    /// What this workflow's bundle would scope to nothing off the interaction matrix
    /// (docs/governance.md#content-that-is-not-a-handoff), each named with the bundle's
    /// file: said when a run starts, never refused. Nothing for a bundle that does not
    /// compile, which starting the run refuses with its own error.
    #[must_use]
    pub fn emptied_content(&self) -> Vec<String> {
        let name = &self.bundle_source_name;
        docket_policies::Format::from_name(name)
            .and_then(|format| docket_policies::parse(&self.bundle_source, name, format).ok())
            .map(|b| {
                b.emptied_content()
                    .iter()
                    .map(|e| format!("{name}: {e}"))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Reads a workflow file and the bundle it names.
    ///
    /// Paths are made absolute against the workflow file's directory (its real path), so
    /// a run recorded from the result can be resumed from any directory: a `command`
    /// containing a `/` (bare names are kept as written, and looked up when a process is
    /// started), every `cwd` and `ca_file`, and `input`. Arguments are passed as written:
    /// they are relative to the process's working directory (its `cwd`).
    ///
    /// Whether the workflow can run (its sections against the bundle, its commands and
    /// directories on this machine, [`check_workflow`]) is checked when a run of it
    /// starts ([`crate::Runtime::start`]), before anything is recorded; a caller may check
    /// earlier by calling [`check_workflow`] itself.
    ///
    /// Files are read as [`read_source`] reads them: regular files only, bounded in
    /// size, without blocking.
    ///
    /// # Errors
    /// [`WorkflowLoadError`] naming the file.
    pub fn load(path: &Path) -> Result<Self, WorkflowLoadError> {
        let text = read_source(path, SourceKind::Workflow).map_err(WorkflowLoadError::Read)?;
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        // The file was just read from it, so the directory exists: its real path has no
        // `..` or symbolic links to go stale.
        let dir = std::fs::canonicalize(dir)
            .or_else(|_| std::path::absolute(dir))
            .unwrap_or_else(|_| dir.to_owned());
        Self::from_text(&text, path, &dir, |bundle| {
            read_source(bundle, SourceKind::Bundle).map(|text| (bundle.to_owned(), text))
        })
    }

    /// Reads a workflow file named by a client of `docket serve`, and the bundle it
    /// names, confined to `root` ([`SourceRoot::read`]): a path outside it, into the
    /// data directory, hidden, or not a `.toml` workflow is refused before it is read.
    /// Errors name the path as the client gave it and quote none of the file beyond the
    /// parser's location and words.
    ///
    /// # Errors
    /// [`WorkflowLoadError`] naming the file.
    pub fn load_within(path: &Path, root: &SourceRoot) -> Result<Self, WorkflowLoadError> {
        let (real, text) = root
            .read(path, SourceKind::Workflow)
            .map_err(WorkflowLoadError::Read)?;
        let dir = real.parent().unwrap_or(root.dir()).to_owned();
        Self::from_text(&text, path, &dir, |bundle| {
            root.read(bundle, SourceKind::Bundle)
        })
    }

    /// The workflow of `text` (read from `path`, whose real directory is `dir`), its
    /// bundle read by `read_bundle` (given the bundle's path, it answers the path to
    /// record and the text).
    fn from_text(
        text: &str,
        path: &Path,
        dir: &Path,
        read_bundle: impl FnOnce(&Path) -> Result<(PathBuf, String), SourceError>,
    ) -> Result<Self, WorkflowLoadError> {
        let mut spec = WorkflowSpec::parse(text, path)?;
        for agent in spec.agents.values_mut() {
            if let ExecutorSpec::Command { command, .. } = &mut agent.executor {
                resolve_command(dir, command);
            }
            if let Some(cwd) = &mut agent.cwd {
                *cwd = resolve_dir(dir, cwd);
            }
            resolve_file(dir, &mut agent.ca_file);
        }
        for effect in spec.effects.values_mut() {
            if let Some(command) = &mut effect.command {
                resolve_command(dir, command);
            }
            if let Some(cwd) = &mut effect.cwd {
                *cwd = resolve_dir(dir, cwd);
            }
            resolve_file(dir, &mut effect.ca_file);
        }
        // Governed tools: `command` and `mcp` programs, like effects'.
        for tool in spec.tools.values_mut() {
            for program in [&mut tool.command, &mut tool.mcp].into_iter().flatten() {
                if program.contains('/') && Path::new(program.as_str()).is_relative() {
                    *program = dir.join(program.as_str()).to_string_lossy().into_owned();
                }
            }
            resolve_file(dir, &mut tool.ca_file);
        }
        if let Some(input) = &mut spec.input {
            *input = dir.join(input.as_str()).to_string_lossy().into_owned();
        }
        let (bundle_path, bundle_source) = read_bundle(&dir.join(&spec.policy))
            .map_err(|source| WorkflowLoadError::ReadBundle { source })?;
        let bundle_source_name = bundle_path.to_string_lossy().into_owned();
        Ok(Self {
            spec,
            bundle_source,
            bundle_source_name,
        })
    }
}

/// A `command` containing a `/` made absolute against `dir` (a bare name is looked up on
/// `PATH` when started, so it is kept).
fn resolve_command(dir: &Path, command: &mut String) {
    if command.contains('/') && Path::new(command.as_str()).is_relative() {
        *command = dir.join(command.as_str()).to_string_lossy().into_owned();
    }
}

/// A `ca_file` made absolute against `dir`.
fn resolve_file(dir: &Path, file: &mut Option<String>) {
    if let Some(file) = file {
        *file = resolve_dir(dir, file);
    }
}

/// A directory made absolute against `dir`, without `.` components (`"."` is `dir`).
fn resolve_dir(dir: &Path, relative: &str) -> String {
    let joined = dir.join(relative);
    std::path::absolute(&joined)
        .unwrap_or(joined)
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_workflows_load() {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut loaded = 0;
        for entry in std::fs::read_dir(&examples).expect("examples/") {
            let path = entry.expect("entry").path().join("workflow.toml");
            if path.exists() {
                Workflow::load(&path).unwrap_or_else(|e| panic!("{e}"));
                loaded += 1;
            }
        }
        assert!(loaded >= 1);
    }
}
