//! `docket keys generate | show`: the data directory's Ed25519 signing key, kept in
//! `<data>/keys/` outside the log (docs/checkpoints.md#keys).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, anyhow};
use clap::Subcommand;
use docket_store::{EmbeddedStore, StoreConfig};

#[derive(Subcommand)]
pub(crate) enum KeysCommand {
    /// Make the data directory's signing key (Ed25519).
    ///
    /// From then on every finished run is sealed: its signed checkpoint goes into the log of run heads. The private key
    /// is `<data>/keys/signer.key` (mode 0600), never in the log.
    Generate {
        /// The key's name, the prefix of every checkpoint origin (no '+', no spaces;
        /// e.g. example.com/docket). Default: this host's name and a random suffix.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Replace an existing key. Its public half is kept in `<data>/keys/retired/`,
        /// so the seals it made still verify.
        #[arg(long)]
        force: bool,
    },
    /// Print the public verifier key, the one an auditor keeps.
    ///
    /// C2SP signed-note form (name+keyid+base64 key), the one an auditor keeps to check seals and checkpoints (`docket verify --key`).
    Show,
}

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

pub(crate) fn execute(command: KeysCommand, data: &Path, out: &mut String) -> anyhow::Result<u8> {
    match command {
        KeysCommand::Generate { name, force } => {
            let name = match name {
                Some(name) => {
                    docket_evidence::check_key_name(&name)
                        .map_err(|why| anyhow!("--name {name}: {why}"))?;
                    name
                }
                None => docket_evidence::default_key_name()?,
            };
            ensure_store(data)?;
            let key = docket_evidence::generate_key(data, &name, force)?;
            outln!(out, "{key}");
            outln!(
                out,
                "signing key: {} (keep it private; seals of finished runs are signed with it)",
                docket_evidence::keys_dir(data).join("signer.key").display()
            );
            Ok(0)
        }
        KeysCommand::Show => {
            let key = docket_evidence::verifier(data)?.ok_or_else(|| {
                anyhow!(
                    "the data directory {} has no key: make one with `docket keys generate`",
                    data.display()
                )
            })?;
            outln!(out, "{key}");
            Ok(0)
        }
    }
}

/// A key in a directory that holds no store yet would make the store refuse it (a
/// non-empty directory without its marker), so the store is created first.
fn ensure_store(data: &Path) -> anyhow::Result<()> {
    if data.join("DOCKET-STORE").exists() {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        EmbeddedStore::open(data, StoreConfig::default())
            .await
            .with_context(|| format!("cannot create the data directory {}", data.display()))
            .map(drop)
    })
}
