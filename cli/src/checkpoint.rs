//! `docket checkpoint publish --to DIR | --command CMD`: a copy of the heads log's latest
//! signed checkpoint kept where the log's writer cannot rewrite it (a directory, or
//! whatever a witness command keeps it in), which `docket verify --against DIR` then holds
//! the log against (docs/checkpoints.md#publishing-checkpoints).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::Subcommand;
use docket_evidence::{PublishError, Published, SignedCheckpoint};

#[derive(Subcommand)]
pub(crate) enum CheckpointCommand {
    /// Copy the heads log's latest signed checkpoint into DIR.
    ///
    /// Kept as DIR/heads-SIZE.note; a checkpoint already kept at that size is left as it
    /// is, and a different one at the same size is refused (the log was rewritten).
    /// Point DIR at storage the log's writer cannot rewrite (another machine, a WORM
    /// bucket's mount, an auditor's share).
    Publish {
        /// Where to keep it.
        #[arg(
            long,
            value_name = "DIR",
            required_unless_present = "command",
            conflicts_with = "command"
        )]
        to: Option<PathBuf>,
        /// Hand it to a witness instead: a shell command that reads the signed note on
        /// its standard input and exits 0 once it is kept.
        ///
        /// Run with `sh -c`, with DOCKET_CHECKPOINT_SIZE, DOCKET_CHECKPOINT_ORIGIN and
        /// DOCKET_CHECKPOINT_FILE (heads-SIZE.note) set, e.g. to put it in an object
        /// store with object lock, commit it to a repository, or post it to a witness.
        #[arg(long, value_name = "CMD")]
        command: Option<String>,
    },
}

pub(crate) async fn execute(
    command: CheckpointCommand,
    data: &Path,
    out: &mut String,
) -> anyhow::Result<u8> {
    let CheckpointCommand::Publish { to, command } = command;
    let (note, from) = match crate::command::postgres_url() {
        Some(url) => {
            let store = crate::command::open_postgres(
                url,
                "to read its heads checkpoint",
                crate::command::Access::Read,
            )
            .await?;
            let held = store.latest_heads_checkpoint().await.map_err(|e| {
                crate::command::postgres_error(e.into(), "cannot read the heads checkpoint")
            })?;
            (
                held.map(|h| h.note),
                format!("PostgreSQL at {}", store.database()),
            )
        }
        None => {
            let path = docket_evidence::heads_checkpoint_path(data);
            let note = match std::fs::read_to_string(&path) {
                Ok(note) => Some(note),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    return Err(anyhow::Error::new(e).context(format!(
                        "cannot read the heads checkpoint {}",
                        path.display()
                    )));
                }
            };
            (note, data.display().to_string())
        }
    };
    let note = note.ok_or_else(|| {
        anyhow!(
            "{from} has no signed heads checkpoint yet: it is written when a finished run is sealed (`docket keys generate`, then any command that drives runs)"
        )
    })?;
    let checkpoint = SignedCheckpoint::parse(&note)
        .map_err(|e| anyhow!("the heads checkpoint of {from} does not parse: {e}"))?
        .checkpoint;
    let size = checkpoint.size;
    let Some(to) = to else {
        let command = command.unwrap_or_default();
        hand_to_witness(&command, &note, size, &checkpoint.origin).await?;
        let _ = writeln!(
            out,
            "the heads checkpoint at size {size} ({}) handed to `{command}`, which kept it",
            checkpoint.origin
        );
        return Ok(0);
    };
    match docket_evidence::publish_checkpoint(&to, &note) {
        Ok(Published::Written(path)) => {
            let _ = writeln!(
                out,
                "the heads checkpoint at size {size} ({}) kept in {}",
                checkpoint.origin,
                path.display()
            );
        }
        Ok(Published::Already(path)) => {
            let _ = writeln!(
                out,
                "the heads checkpoint at size {size} is already kept in {}",
                path.display()
            );
        }
        Err(e @ PublishError::Differs { .. }) => {
            return Err(anyhow!(
                "{e} (`docket verify --against {}` says where)",
                to.display()
            ));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(0)
}

/// Runs the witness command `command` with `note` on its standard input; an error unless
/// it exits 0. Its output goes to this command's stderr, where its user sees it.
async fn hand_to_witness(command: &str, note: &str, size: u64, origin: &str) -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("DOCKET_CHECKPOINT_SIZE", size.to_string())
        .env("DOCKET_CHECKPOINT_ORIGIN", origin)
        .env("DOCKET_CHECKPOINT_FILE", format!("heads-{size}.note"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .spawn()
        .with_context(|| format!("--command: cannot start `sh -c {command}`"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A witness that exits without reading all of it says so by its status.
        let _ = stdin.write_all(note.as_bytes()).await;
    }
    let status = child
        .wait()
        .await
        .with_context(|| format!("--command: cannot wait for `{command}`"))?;
    if !status.success() {
        return Err(anyhow!(
            "--command `{command}` {}: the heads checkpoint at size {size} is not known to be kept (run it again once the witness is fixed)",
            match status.code() {
                Some(code) => format!("exited with {code}"),
                None => "was killed by a signal".to_owned(),
            }
        ));
    }
    Ok(())
}

/// The notes kept in `dir` (`*.note`, by name), as `docket verify --against` reads them.
pub(crate) fn kept(dir: &Path) -> anyhow::Result<Vec<String>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("--against {}: cannot list the directory", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "note"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(anyhow!(
            "--against {}: no checkpoint (*.note) kept there (`docket checkpoint publish --to {}` keeps one)",
            dir.display(),
            dir.display()
        ));
    }
    paths
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .with_context(|| format!("--against: cannot read {}", p.display()))
        })
        .collect()
}
