//! `docket store init | migrate`: a PostgreSQL store's schema created or brought to this
//! docket's version (docs/postgres.md). A data directory needs neither: it is created by
//! the first command that records in it, and its format is upgraded as it is opened.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::anyhow;
use clap::Subcommand;
use docket_store_postgres::{PostgresStore, SCHEMA_VERSION, SchemaState};

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
}

/// Runs `docket store ...` on the async runtime, against the `--store` URL.
pub(crate) fn main(command: StoreCommand) -> ExitCode {
    crate::command::run_async(None, |_, out| {
        Box::pin(async move { execute(&command, out).await })
    })
}

async fn execute(command: &StoreCommand, out: &mut String) -> anyhow::Result<u8> {
    let name = match command {
        StoreCommand::Init => "init",
        StoreCommand::Migrate => "migrate",
    };
    let Some(url) = crate::command::postgres_url() else {
        return Err(anyhow!(
            "`docket store {name}` is for PostgreSQL stores: give one with --store postgres://USER@HOST[:PORT]/DATABASE (or DOCKET_STORE); a data directory needs no schema (it is made by the first command that records in it)"
        ));
    };
    let doing = match command {
        StoreCommand::Init => "cannot create the schema of the PostgreSQL store",
        StoreCommand::Migrate => "cannot migrate the schema of the PostgreSQL store",
    };
    crate::command::check_postgres_url(url)?;
    let (before, applied) = PostgresStore::migrate(url)
        .await
        .map_err(|e| crate::command::postgres_error(e, doing))?;
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
