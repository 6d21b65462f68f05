//! `docket serve` and `docket token`: the data directory behind the JSON API
//! (docs/api.md), and the bearer tokens that may call it.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use docket_serve::{Role, Server, tokens};

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on; port 0 picks a free one (the line `listening on
    /// http://ADDR` on stdout says which).
    #[arg(long, value_name = "ADDR", default_value = docket_serve::DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// Listen on an address that is not loopback. The API speaks plain HTTP: put a
    /// TLS-terminating reverse proxy in front (docs/api.md#tls).
    #[arg(long)]
    allow_remote: bool,
    /// The directory whose workflow and bundle files requests may name (paths resolve
    /// under it; the data directory, hidden files and other files stay out of reach:
    /// docs/api.md#files-the-api-reads). Default: the directory docket serve starts in.
    #[arg(long, value_name = "DIR", default_value = ".")]
    root: PathBuf,
    /// Most live event streams (`GET /api/runs/RUN/events/stream`) open at once; one more
    /// is answered 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = docket_serve::StreamLimits::DEFAULT_TOTAL as u64, value_parser = clap::value_parser!(u64).range(1..))]
    max_streams: u64,
    /// Most live event streams one token (or its browser sessions) may hold open; one
    /// more is answered 429 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = docket_serve::StreamLimits::DEFAULT_PER_TOKEN as u64, value_parser = clap::value_parser!(u64).range(1..))]
    max_streams_per_token: u64,
}

#[derive(Subcommand)]
pub(crate) enum TokenCommand {
    /// Make a bearer token and print it, once; only its SHA-256 is kept.
    ///
    /// The hash goes to DATA/api/tokens.json, or with a PostgreSQL store to the database,
    /// where every API server over it finds it.
    Create {
        /// What it may do: viewer (reads), operator (also starts, resumes, cancels runs and
        /// flips kill switches), approver (also decides tickets, overrides), admin (all).
        #[arg(long, value_name = "ROLE", value_parser = role)]
        role: Role,
        /// Its name: recorded as who acted (`human.decided` by, `run.cancelled` by, the
        /// request log).
        #[arg(long, value_name = "NAME")]
        name: String,
    },
    /// List the tokens: name, role, when made (never the tokens themselves).
    List,
    /// Revoke a token: requests bearing it are refused from then on.
    Revoke {
        /// The token's name.
        name: String,
    },
}

fn role(text: &str) -> Result<Role, String> {
    text.parse::<Role>().map_err(|e| e.to_string())
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `docket token ...`.
pub(crate) fn token(command: TokenCommand, data: &Path, out: &mut String) -> anyhow::Result<u8> {
    use std::fmt::Write as _;
    match command {
        TokenCommand::Create { role, name } => {
            crate::kill_switch::initialise_store(data)?;
            let token = tokens::create(data, &name, role, now_s())?;
            let _ = writeln!(out, "{token}");
            say!(
                "token `{name}` ({role}) made; it is shown this once, only its hash is kept in {}",
                tokens::tokens_path(data).display()
            );
        }
        TokenCommand::List => {
            for t in tokens::list(data)? {
                let _ = writeln!(
                    out,
                    "{}\t{}\tmade {}",
                    t.name,
                    t.role,
                    crate::words::date_ns(i64::try_from(t.created_s).unwrap_or(0) * 1_000_000_000)
                );
            }
        }
        TokenCommand::Revoke { name } => {
            let t = tokens::revoke(data, &name)?;
            let _ = writeln!(out, "token `{}` ({}) revoked", t.name, t.role);
        }
    }
    Ok(0)
}

/// `docket token ...` with a PostgreSQL store: the tokens every API server over that
/// database accepts (`docket_api_tokens`), never a data directory's file.
pub(crate) async fn token_in_database(
    command: TokenCommand,
    out: &mut String,
) -> anyhow::Result<u8> {
    use std::fmt::Write as _;
    let Some(url) = crate::command::postgres_url() else {
        anyhow::bail!("`docket token` was asked for a PostgreSQL store, but none is named");
    };
    let pg =
        docket_store_postgres::PostgresStore::open(docket_store_postgres::PostgresConfig::new(url))
            .await
            .map_err(|e| {
                crate::command::postgres_error(e, "cannot open the store for its tokens")
            })?;
    let keeper = tokens::TokenStore::Database(pg);
    async {
        match command {
            TokenCommand::Create { role, name } => {
                let token = keeper.create(&name, role, now_s()).await?;
                let _ = writeln!(out, "{token}");
                say!(
                    "token `{name}` ({role}) made; it is shown this once, only its hash is kept in {}",
                    keeper.place()
                );
            }
            TokenCommand::List => {
                for t in keeper.list().await? {
                    let _ = writeln!(
                        out,
                        "{}\t{}\tmade {}",
                        t.name,
                        t.role,
                        crate::words::date_ns(
                            i64::try_from(t.created_s).unwrap_or(0) * 1_000_000_000
                        )
                    );
                }
            }
            TokenCommand::Revoke { name } => {
                let t = keeper.revoke(&name).await?;
                let _ = writeln!(out, "token `{}` ({}) revoked", t.name, t.role);
            }
        }
        anyhow::Ok(0)
    }
    .await
}

/// `docket serve`: takes the writer lock, binds, says where it listens, serves until
/// interrupted (Ctrl-C or SIGTERM).
pub(crate) fn main(args: ServeArgs, data: Option<PathBuf>) -> ExitCode {
    crate::command::run_async(data, |data, _out| {
        Box::pin(async move {
            docket_serve::check_listen(args.listen, args.allow_remote)?;
            // A data directory: its writer lock, held while serving. A PostgreSQL store:
            // any number of servers, none driving runs (workers do: docs/postgres.md).
            let rt = crate::command::open(&data).await?;
            let serving = rt.store().postgres().map_or_else(
                || data.display().to_string(),
                |db| format!("{} (runs driven by workers)", db.database()),
            );
            let server = Server::bind(rt, &data, &args.root, args.listen, args.allow_remote)
                .await?
                .sign_with(crate::command::key_place())
                .limit_streams(docket_serve::StreamLimits {
                    total: usize::try_from(args.max_streams).unwrap_or(usize::MAX),
                    per_token: usize::try_from(args.max_streams_per_token).unwrap_or(usize::MAX),
                });
            let addr = server
                .local_addr()
                .context("cannot read the bound address")?;
            // The readiness line: tests and scripts wait for it.
            {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "listening on http://{addr}");
                let _ = stdout.flush();
            }
            say!(
                "docket serve: {serving} (API at http://{addr}/api, docs/api.md); Ctrl-C stops it"
            );
            server.serve(shutdown()).await?;
            Ok(0)
        })
    })
}

async fn shutdown() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
