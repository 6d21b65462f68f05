//! `docket keys generate | show`: the instance's Ed25519 signing key, kept outside the
//! log: in `<data>/keys/`, or where `DOCKET_SIGNING_KEY` says (docs/checkpoints.md#keys).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, anyhow};
use clap::Subcommand;
use docket_evidence::KeyPlace;
use docket_store::{EmbeddedStore, StoreConfig};

#[derive(Subcommand)]
pub(crate) enum KeysCommand {
    /// Make the data directory's signing key (Ed25519).
    ///
    /// A new store gets one when it is created; this makes one for a store that has none,
    /// or replaces it (--force). Every finished run is sealed with it: its signed
    /// checkpoint goes into the log of run heads. The private key is
    /// `<data>/keys/signer.key` (mode 0600), or the file DOCKET_SIGNING_KEY names, never
    /// in the log.
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

pub(crate) async fn execute(
    command: KeysCommand,
    data: &Path,
    out: &mut String,
) -> anyhow::Result<u8> {
    let place = crate::command::key_place();
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
            let database = match crate::command::postgres_url() {
                Some(url) => Some(
                    crate::command::open_postgres(
                        url,
                        "to record the key's public half",
                        crate::command::Access::Write,
                    )
                    .await?,
                ),
                None => {
                    ensure_store(data).await?;
                    None
                }
            };
            let key = docket_evidence::generate_key_in(data, &place, &name, force)?;
            if let Some(db) = &database {
                let retired: Vec<String> = docket_evidence::verifiers(data)?
                    .iter()
                    .map(ToString::to_string)
                    .filter(|k| *k != key.to_string())
                    .collect();
                db.record_keys(Some(&key.to_string()), &retired)
                    .await
                    .map_err(|e| {
                        crate::command::postgres_error(
                            e.into(),
                            "the key was made, but its public half not recorded in the database (the next seal records it)",
                        )
                    })?;
            }
            outln!(out, "{key}");
            outln!(
                out,
                "signing key: {} (keep it private; seals of finished runs are signed with it)",
                place
                    .file(data)
                    .map_or_else(String::new, |p| p.display().to_string())
            );
            Ok(0)
        }
        KeysCommand::Show => {
            let key = match docket_evidence::signer_in(data, &place)? {
                Some(key) if !matches!(place, KeyPlace::DataDirectory) => Some(key.verifier()),
                _ => docket_evidence::verifier(data)?,
            };
            let key = key.ok_or_else(|| match place {
                KeyPlace::Unsigned => anyhow!(
                    "signing is turned off (DOCKET_SIGNING_KEY=none): there is no key to show"
                ),
                _ => anyhow!(
                    "the data directory {} has no key: make one with `docket keys generate`",
                    data.display()
                ),
            })?;
            outln!(out, "{key}");
            Ok(0)
        }
    }
}

/// A key in a directory that holds no store yet would make the store refuse it (a
/// non-empty directory without its marker), so the store is created first.
async fn ensure_store(data: &Path) -> anyhow::Result<()> {
    if EmbeddedStore::exists_in(data) {
        return Ok(());
    }
    EmbeddedStore::open(data, StoreConfig::default())
        .await
        .with_context(|| format!("cannot create the data directory {}", data.display()))
        .map(drop)
}
