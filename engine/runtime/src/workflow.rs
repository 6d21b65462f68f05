//! Reading workflow files: the file, the policy bundle it names, and command and input
//! paths made absolute against the workflow's directory. The format itself, and its
//! parsing, are the decider's ([`WorkflowSpec`]); documented for users in `docs/workflow.md`.

use std::path::{Path, PathBuf};

use docket_decider::{ExecutorSpec, WorkflowError, WorkflowSpec};

/// A workflow file that could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowLoadError {
    /// The file could not be read.
    #[error("cannot read workflow file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file's text is not a valid workflow.
    #[error(transparent)]
    Spec(#[from] WorkflowError),
    /// The policy bundle could not be read.
    #[error("cannot read policy bundle {path} named by the workflow: {source}")]
    ReadBundle {
        /// The bundle file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
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
    /// Reads a workflow file and the bundle it names. Command paths containing a `/` are
    /// made absolute against the workflow file's directory; bare names are kept as written.
    ///
    /// # Errors
    /// [`WorkflowLoadError`] naming the file.
    pub fn load(path: &Path) -> Result<Self, WorkflowLoadError> {
        let text = std::fs::read_to_string(path).map_err(|source| WorkflowLoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut spec = WorkflowSpec::parse(&text, path)?;
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
        for agent in spec.agents.values_mut() {
            if let ExecutorSpec::Command { command, .. } = &mut agent.executor {
                if command.contains('/') && Path::new(command.as_str()).is_relative() {
                    *command = dir.join(command.as_str()).to_string_lossy().into_owned();
                }
            }
        }
        for effect in spec.effects.values_mut() {
            if let Some(command) = &mut effect.command {
                if command.contains('/') && Path::new(command.as_str()).is_relative() {
                    *command = dir.join(command.as_str()).to_string_lossy().into_owned();
                }
            }
        }
        // Governed tools: `command` and `mcp` programs, like effects'.
        for tool in spec.tools.values_mut() {
            for program in [&mut tool.command, &mut tool.mcp].into_iter().flatten() {
                if program.contains('/') && Path::new(program.as_str()).is_relative() {
                    *program = dir.join(program.as_str()).to_string_lossy().into_owned();
                }
            }
        }
        if let Some(input) = &mut spec.input {
            *input = dir.join(input.as_str()).to_string_lossy().into_owned();
        }
        let bundle_path = dir.join(&spec.policy);
        let bundle_source = std::fs::read_to_string(&bundle_path).map_err(|source| {
            WorkflowLoadError::ReadBundle {
                path: bundle_path.clone(),
                source,
            }
        })?;
        let bundle_source_name = bundle_path.to_string_lossy().into_owned();
        Ok(Self {
            spec,
            bundle_source,
            bundle_source_name,
        })
    }
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
