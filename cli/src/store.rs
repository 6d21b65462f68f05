//! `docket store init | migrate`: a PostgreSQL store's schema created or brought to this
//! docket's version (docs/postgres.md); `docket store copy`: every run of one store into
//! another. A data directory needs neither: it is created by
//! the first command that records in it, and its format is upgraded as it is opened.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use clap::Subcommand;
use docket_app::{KeysAt, Store, StoreLocation, copy_keys, copy_store};
use docket_store::{EmbeddedStore, StoreConfig};
use docket_store_postgres::{PostgresConfig, PostgresStore, SCHEMA_VERSION, SchemaState};

/// `docket store`.
#[derive(Subcommand)]
pub(crate) enum StoreCommand {
    /// Create docket's tables in the PostgreSQL database `--store URL` names.
    ///
    /// In a database that already holds them, the same as `migrate`: nothing is
    /// recreated, and what this docket lacks is applied.
    Init,
    /// Bring the PostgreSQL database's schema to this docket's version.
    ///
    /// Says the version found and the versions applied; a database already at this
    /// version is left as it is ("nothing to apply"). A database migrated by a newer
    /// docket is refused.
    Migrate,
    /// Copy every run of one store into another, byte for byte.
    ///
    /// Each event is appended to the target from its recorded fields and its hash checked
    /// against the source's; blobs, disclosures (erased ones as tombstones) and run
    /// summaries go with the runs. Run it again after an interruption: what the target
    /// holds whole is passed over. Both stores verify afterwards with the same Merkle
    /// roots (docs/postgres.md#moving-between-backends).
    Copy {
        /// The store copied from: a data directory or a postgres:// URL (read only).
        #[arg(long, value_name = "DIR|URL")]
        from: String,
        /// The store copied into: a data directory (made if need be) or a postgres:// URL.
        #[arg(long, value_name = "DIR|URL")]
        to: String,
    },
}

/// Runs `docket store ...` on the async runtime, against the `--store` URL.
pub(crate) fn main(command: StoreCommand, data: Option<std::path::PathBuf>) -> ExitCode {
    crate::command::run_async(data, |data, out| {
        Box::pin(async move { execute(&command, &data, out).await })
    })
}

/// Opens one side of a copy: a data directory read-only (the source) or to record in
/// (the target), or a PostgreSQL database.
async fn open_side(place: &str, target: bool) -> anyhow::Result<Store> {
    Ok(match StoreLocation::parse(place) {
        StoreLocation::Postgres(url) => {
            crate::command::check_postgres_url(&url)?;
            let side = if target { "the target" } else { "the source" };
            // The source is only read: nothing is created or written in it.
            let config = PostgresConfig {
                read_only: !target,
                ..PostgresConfig::new(url)
            };
            Store::Postgres(
                PostgresStore::open(config).await.map_err(|e| {
                    crate::command::postgres_error(e, &format!("cannot open {side}"))
                })?,
            )
        }
        StoreLocation::Directory(dir) if target => Store::Embedded(
            EmbeddedStore::open(&dir, StoreConfig::default())
                .await
                .with_context(|| format!("cannot open the data directory {}", dir.display()))?,
        ),
        StoreLocation::Directory(dir) => Store::Embedded(
            EmbeddedStore::open_read_only(&dir)
                .await
                .with_context(|| format!("cannot read the data directory {}", dir.display()))?,
        ),
    })
}

/// Where the store at `place` keeps the public halves of its keys.
fn keys_at<'a>(store: &'a Store, place: &'a str) -> KeysAt<'a> {
    match store.postgres() {
        Some(db) => KeysAt::Database(db),
        None => KeysAt::Directory(std::path::Path::new(place)),
    }
}

async fn copy(from: &str, to: &str, out: &mut String) -> anyhow::Result<u8> {
    if StoreLocation::parse(from) == StoreLocation::parse(to) {
        return Err(anyhow!("--from and --to name the same store"));
    }
    let source = open_side(from, false).await?;
    let target = open_side(to, true).await?;
    let copied = copy_store(&source, &target, |head| {
        say!("copied {} ({} events)", head.stream, head.seq);
    })
    .await?;
    let keys = copy_keys(keys_at(&source, from), keys_at(&target, to)).await?;
    let _ = writeln!(
        out,
        "{} streams copied (runs and the instance's own logs: {} events, {} blobs, {} disclosures); {} already there; {keys} public key{} that sealed them",
        copied.streams,
        copied.events,
        copied.blobs,
        copied.disclosures,
        copied.already,
        if keys == 1 { "" } else { "s" }
    );
    target.close().await;
    Ok(0)
}

async fn execute(
    command: &StoreCommand,
    data: &std::path::Path,
    out: &mut String,
) -> anyhow::Result<u8> {
    let name = match command {
        StoreCommand::Init => "init",
        StoreCommand::Migrate => "migrate",
        StoreCommand::Copy { from, to } => return copy(from, to, out).await,
    };
    let Some(url) = crate::command::postgres_url() else {
        return Err(anyhow!(
            "`docket store {name}` is for PostgreSQL stores: give one with --store postgres://USER@HOST[:PORT]/DATABASE (or DOCKET_STORE); a data directory needs no schema (it is made by the first command that records in it)"
        ));
    };
    let doing = match command {
        StoreCommand::Init => "cannot create the schema of the PostgreSQL store",
        StoreCommand::Migrate | StoreCommand::Copy { .. } => {
            "cannot migrate the schema of the PostgreSQL store"
        }
    };
    crate::command::check_postgres_url(url)?;
    let (before, applied) = PostgresStore::migrate(url)
        .await
        .map_err(|e| crate::command::postgres_error(e, doing))?;
    if before == SchemaState::Empty && !applied.is_empty() {
        // A new store: its signing key, as the first command that records in a new data
        // directory makes one.
        let store = crate::command::open_postgres(
            url,
            "to record its signing key",
            crate::command::Access::Write,
        )
        .await?;
        crate::command::make_first_key(&Store::Postgres(store), data).await;
    }
    let found = match before {
        SchemaState::Empty => "no docket schema found".to_owned(),
        SchemaState::At(version) => format!("schema at version {version}"),
    };
    if applied.is_empty() {
        let _ = writeln!(out, "{found}; nothing to apply");
    } else {
        let versions: Vec<String> = applied.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            out,
            "{found}; applied version{} {}; schema now at version {}",
            if applied.len() == 1 { "" } else { "s" },
            versions.join(", "),
            applied.last().copied().unwrap_or(SCHEMA_VERSION)
        );
    }
    Ok(0)
}
