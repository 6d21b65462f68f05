//! What every command shares: its exit codes, the data directory, the async runtime it
//! runs on, and the store opened for writing or reading: a data directory (waiting for
//! its writer lock as `--lock-wait` says) or the PostgreSQL database `--store` names.
//!
//! Exit codes (documented in the README): 0 completed (or the command succeeded),
//! 1 failed or an error, 2 bad command-line input (clap), 3 waiting for a human,
//! 4 blocked by policy.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::anyhow;
use docket_app::{Store, StoreLocation};
use docket_decider::RunId;
use docket_evidence::KeyPlace;
use docket_runtime::Runtime;
use docket_store::{EmbeddedStore, EventStore as _, LockHolder, StoreConfig, StoreError};
use docket_store_postgres::{PgError, PostgresConfig, PostgresStore};

/// The run completed.
pub const EXIT_COMPLETED: u8 = 0;
/// The run failed, or the command could not be carried out.
pub const EXIT_FAILED: u8 = 1;
/// The run waits for a human decision (`docket approve`, `docket answer` or `docket deny`).
pub const EXIT_WAITING: u8 = 3;
/// A policy stopped the run.
pub const EXIT_BLOCKED: u8 = 4;

/// The data directory: `--data`, else `$DOCKET_DATA`, else `./.docket`.
pub(crate) fn data_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("DOCKET_DATA").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(".docket"))
}

/// The PostgreSQL database runs are recorded in (`--store URL` or `DOCKET_STORE`), when
/// one is named; set once by `main`. `None`: the data directory holds the log.
pub(crate) static STORE_URL: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// The PostgreSQL URL `--store` or `DOCKET_STORE` gave, if any.
pub(crate) fn postgres_url() -> Option<&'static str> {
    STORE_URL.get().and_then(Option::as_deref)
}

/// `--store`, else `DOCKET_STORE`, with `--data`: the data directory flag commands see
/// and the PostgreSQL URL, if one was given. A `--store` that is not a PostgreSQL URL
/// names the data directory (as `--data` does: both, naming two directories, is an
/// error); `DOCKET_STORE` naming a directory gives way to `--data`.
pub(crate) fn resolve_store(
    store: Option<String>,
    data: Option<PathBuf>,
) -> Result<(Option<PathBuf>, Option<String>), String> {
    let (value, from_flag) = match store {
        Some(value) => (value, true),
        None => match std::env::var_os("DOCKET_STORE").filter(|v| !v.is_empty()) {
            None => return Ok((data, None)),
            Some(value) => match value.into_string() {
                Ok(text) => (text, false),
                // Not UTF-8: not a URL, so a directory.
                Err(path) => return Ok((data.or(Some(PathBuf::from(path))), None)),
            },
        },
    };
    match StoreLocation::parse(&value) {
        StoreLocation::Postgres(url) => Ok((data, Some(url))),
        StoreLocation::Directory(dir) if !from_flag => Ok((data.or(Some(dir)), None)),
        StoreLocation::Directory(dir) => match data {
            Some(other) if other != dir => Err(format!(
                "--store {} and --data {} name two different data directories: give one of them",
                dir.display(),
                other.display()
            )),
            _ => Ok((Some(dir), None)),
        },
    }
}

/// Where the private signing key is kept (`DOCKET_SIGNING_KEY`, else the data
/// directory's `keys/`); set once by `main`.
pub(crate) static KEY_PLACE: std::sync::OnceLock<KeyPlace> = std::sync::OnceLock::new();

/// Where the private signing key is kept.
pub(crate) fn key_place() -> KeyPlace {
    KEY_PLACE.get().cloned().unwrap_or_default()
}

/// `DOCKET_SIGNING_KEY`: `none` (sign nothing), the key itself (`PRIVATE+KEY+...`, e.g.
/// from a secret store), or the path of its file; unset or empty, the data directory's.
/// The error never quotes the value, which may be a key.
pub(crate) fn key_place_from_env() -> Result<KeyPlace, String> {
    match std::env::var_os("DOCKET_SIGNING_KEY") {
        None => Ok(KeyPlace::DataDirectory),
        Some(value) => match value.into_string() {
            Ok(text) => KeyPlace::parse(&text).map_err(|e| format!("DOCKET_SIGNING_KEY: {e}")),
            // Not UTF-8: a path.
            Err(path) => Ok(KeyPlace::File(PathBuf::from(path))),
        },
    }
}

/// How a command uses the PostgreSQL store it opens.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// It records: an empty database is given docket's tables.
    Write,
    /// It only reads: nothing is created or written, and an empty database is an error
    /// saying to create the schema.
    Read,
}

/// Opens the PostgreSQL store at `url`; `doing` says what for, in the error.
pub(crate) async fn open_postgres(
    url: &str,
    doing: &str,
    access: Access,
) -> anyhow::Result<PostgresStore> {
    check_postgres_url(url)?;
    let config = PostgresConfig {
        read_only: access == Access::Read,
        ..PostgresConfig::new(url)
    };
    PostgresStore::open(config)
        .await
        .map_err(|e| postgres_error(e, &format!("cannot open the PostgreSQL store {doing}")))
}

/// A URL that cannot name a database (it does not parse, or names no host or socket
/// directory), said before connecting: never with the URL itself, which may hold a
/// password.
pub(crate) fn check_postgres_url(url: &str) -> anyhow::Result<()> {
    let why = match url.parse::<tokio_postgres::Config>() {
        Err(e) => {
            let mut why = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                why.push_str(": ");
                why.push_str(&c.to_string());
                cause = c.source();
            }
            why
        }
        Ok(c) if c.get_hosts().is_empty() && c.get_hostaddrs().is_empty() => {
            "it names no host or socket directory".to_owned()
        }
        Ok(_) => return Ok(()),
    };
    Err(anyhow!(
        "the store URL is not a PostgreSQL connection string ({why}); expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (a socket directory as the host, percent-encoded: postgres://USER@%2Fvar%2Frun%2Fpostgresql/DATABASE)"
    ))
}

/// A PostgreSQL store's error under `context`, with what to check when no server
/// answered at all.
pub(crate) fn postgres_error(e: StoreError, context: &str) -> anyhow::Error {
    let unreachable = match &e {
        StoreError::Backend { source } => matches!(
            source.downcast_ref::<PgError>(),
            Some(PgError::Database { doing, source, .. })
                if doing == "connecting" && source.as_db_error().is_none()
        ),
        _ => false,
    };
    let empty = matches!(
        &e,
        StoreError::Backend { source } if matches!(source.downcast_ref::<PgError>(), Some(PgError::NoSchema { .. }))
    );
    if unreachable {
        anyhow!(
            "{context}: {e}; is PostgreSQL running there, and does the URL name its host and port (or socket directory)?"
        )
    } else if empty {
        anyhow!(
            "{context}: {e}: create docket's tables first with `docket store init --store URL` (a command that records runs creates them too)"
        )
    } else {
        anyhow::Error::new(e).context(context.to_owned())
    }
}

/// Where `store` keeps its runs, as messages name it: the data directory `data`, or the
/// database (without its password).
pub(crate) fn place(store: &Store, data: &Path) -> String {
    match store.postgres() {
        Some(pg) => format!("PostgreSQL at {}", pg.database()),
        None => format!("the data directory {}", data.display()),
    }
}

/// What a command that needs a data directory's files says when the store is a
/// PostgreSQL database: `what` is not available with it yet, and what to do instead.
pub(crate) fn not_with_postgres(what: &str, instead: &str) -> anyhow::Result<()> {
    if postgres_url().is_some() {
        anyhow::bail!(
            "{what} is not yet available with a PostgreSQL store (--store or DOCKET_STORE): {instead}"
        );
    }
    Ok(())
}

pub(crate) type Pending<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<u8>> + 'a>>;

/// The most worker threads `--threads` or `DOCKET_THREADS` may ask for.
pub(crate) const MAX_THREADS: usize = 1024;

/// The worker threads runs are driven on (`--threads`, `DOCKET_THREADS`, else the
/// machine's available parallelism), set once by `main`.
pub(crate) static THREADS: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();

/// `DOCKET_THREADS`, when set; `None` when not (the machine's parallelism then).
pub(crate) fn threads_from_env() -> Result<Option<usize>, String> {
    match std::env::var("DOCKET_THREADS") {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err("DOCKET_THREADS is not a number of threads".to_owned())
        }
        Ok(text) => match text.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(Some(n)),
            _ => Err(format!(
                "DOCKET_THREADS={text}: not a number of threads from 1 to {MAX_THREADS}"
            )),
        },
    }
}

/// The tokio runtime commands run on, with [`THREADS`] workers; on failure the error is
/// printed and the exit code returned.
pub(crate) fn async_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    let threads = THREADS.get().copied().flatten().unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| {
            say!("error: cannot start the async runtime: {e}");
            ExitCode::from(EXIT_FAILED)
        })
}

/// Runs a command on a tokio runtime, prints its output and maps its result to an exit
/// code.
pub(crate) fn run_async(
    data: Option<PathBuf>,
    command: impl for<'a> FnOnce(PathBuf, &'a mut String) -> Pending<'a>,
) -> ExitCode {
    // Declared before the async runtime, so dropped after it: queued spans are sent
    // outside it, before the process exits.
    let _telemetry = match crate::telemetry::init() {
        Ok(t) => t,
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match async_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let mut out = String::new();
    let result = runtime.block_on(command(data_dir(data), &mut out));
    if let Err(e) = std::io::stdout().lock().write_all(out.as_bytes())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        say!("error: cannot write output: {e}");
        return ExitCode::from(EXIT_FAILED);
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            say!("error: {}", crate::errors::error_text(&e));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// How long a command that records waits for another process that is recording in the
/// same data directory (`--lock-wait`); set once by `main`.
pub(crate) static LOCK_WAIT: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();

/// Said once on stderr when a command has to wait for the writer lock.
fn tell_waiting(dir: &Path, holder: &LockHolder) {
    say!(
        "waiting for {holder}, which is recording in {}: one process records at a time (--lock-wait SECS says how long to wait)",
        dir.display()
    );
}

/// Opens the store to record in it: the PostgreSQL database `--store` names (many
/// processes record in one: no lock), else the data directory `dir` ([`open_embedded`]).
/// Effects check the kill switches of the store: the database's, or the data directory's.
pub(crate) async fn open(dir: &Path) -> anyhow::Result<Runtime<Store>> {
    open_with(dir, true).await
}

/// [`open`], making a new store's signing key only with `first_key` (`docket demo` makes
/// one of its own name).
pub(crate) async fn open_with(dir: &Path, first_key: bool) -> anyhow::Result<Runtime<Store>> {
    let (store, new) = match postgres_url() {
        Some(url) => {
            let db = open_postgres(url, "to record runs", Access::Write).await?;
            let new = db.created_schema();
            (Store::from(db), new)
        }
        None => {
            let new = !EmbeddedStore::exists_in(dir);
            (Store::from(open_directory(dir).await?), new)
        }
    };
    if new && first_key {
        make_first_key(&store, dir).await;
    }
    // Read before every effect execution, so `docket kill-switch on` from another
    // process (another machine, for a PostgreSQL store) stops this run's next effect.
    let switches = docket_app::kill_switch_source(&store, dir);
    let runtime = Runtime::new(store);
    runtime.set_kill_switch(switches);
    Ok(runtime)
}

/// A new store's signing key, made where `DOCKET_SIGNING_KEY` says (unless it says
/// `none`) and said on stderr; a key that cannot be made is a warning: the store works
/// without one, and each seal says why there is none.
pub(crate) async fn make_first_key(store: &Store, dir: &Path) {
    let key_at = key_place();
    match docket_app::first_key(store, dir, &key_at).await {
        Ok(Some(key)) => say!(
            "signing key made for {}: {key} (private half in {}; finished runs are sealed with it: keep this public key elsewhere to check them, docs/checkpoints.md)",
            place(store, dir),
            key_at
                .file(dir)
                .map_or_else(String::new, |p| p.display().to_string())
        ),
        Ok(None) => {}
        Err(e) => say!("warning: no signing key made for the new store: {e}"),
    }
}

/// The data directory's store, opened to record: takes its writer lock, waiting up to
/// `--lock-wait` for another recording process (store/FORMAT.md §10).
async fn open_directory(dir: &Path) -> anyhow::Result<EmbeddedStore> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "cannot open the data directory {}: it is a file, not a directory (give another with --data DIR)",
            dir.display()
        );
    }
    // `docket serve` holds the lock for its lifetime: waiting for it is pointless.
    if let Some(holder) = LockHolder::of(dir).filter(|h| docket_serve::is_server(&h.command)) {
        anyhow::bail!(
            "the data directory {} is served by process {} (`{}`), which records for it while it runs: use its API instead (docs/api.md), e.g. POST /api/runs/RUN/tickets/TICKET/approve",
            dir.display(),
            holder.pid,
            holder.command
        );
    }
    let config = StoreConfig {
        lock_wait: LOCK_WAIT.get().copied().unwrap_or(DEFAULT_LOCK_WAIT),
        on_lock_wait: Some(tell_waiting),
        ..StoreConfig::default()
    };
    let store = match EmbeddedStore::open(dir, config).await {
        Ok(store) => store,
        // `docket serve` holds the lock for its lifetime: what it would record goes
        // through its API (docs/api.md).
        Err(e) if held_by_server(&e) => {
            return Err(anyhow!(
                "{e}. `docket serve` records for this data directory while it runs: use its API instead (docs/api.md), e.g. POST /api/runs/RUN/tickets/TICKET/approve"
            ));
        }
        Err(e @ StoreError::Held { .. }) => {
            return Err(anyhow!(
                "{e}. Try again once it is done (`docket runs` shows what it drives), stop it, or wait longer with --lock-wait SECS"
            ));
        }
        // The index is a cache of the log (store/FORMAT.md §1): what to do is safe.
        Err(e @ StoreError::Index { .. }) => {
            return Err(anyhow!(
                "cannot open the data directory {}: {e}. The index is a cache of the log: move {} aside (or delete it) and run the command again to rebuild it from the log",
                dir.display(),
                dir.join("index").display()
            ));
        }
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("cannot open the data directory {}", dir.display())));
        }
    };
    Ok(store)
}

/// Whether the writer lock is held by `docket serve`.
fn held_by_server(e: &StoreError) -> bool {
    matches!(e, StoreError::Held { holder: Some(h), .. } if docket_serve::is_server(&h.command))
}

/// The default of `--lock-wait`.
pub(crate) const DEFAULT_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens the store to read it: a PostgreSQL database is read as usual (no read-only
/// view: reads are plain reads); a data directory while another process may be
/// recording in it: no lock, nothing created or repaired (store/FORMAT.md §10). A
/// directory that does not exist is an error naming it.
pub(crate) async fn open_read(dir: &Path) -> anyhow::Result<Runtime<Store>> {
    if let Some(url) = postgres_url() {
        return Ok(Runtime::new(Store::from(
            open_postgres(url, "to read runs", Access::Read).await?,
        )));
    }
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "cannot read the data directory {}: it is a file, not a directory (give another with --data DIR)",
            dir.display()
        );
    }
    let store = EmbeddedStore::open_read_only(dir)
        .await
        .map_err(|e| match e {
            StoreError::NoDataDirectory { .. } | StoreError::NotADataDirectory { .. } => {
                anyhow!("{e} (give another with --data DIR or $DOCKET_DATA)")
            }
            other => anyhow::Error::new(other)
                .context(format!("cannot read the data directory {}", dir.display())),
        })?;
    if let Some(damage) = store.view_report().and_then(|r| r.log_damage) {
        let after = if damage.streams_after.is_empty() {
            "runs may lack their later events".to_owned()
        } else {
            format!(
                "these runs have events recorded after it, not shown: {}",
                damage
                    .streams_after
                    .iter()
                    .map(docket_store::StreamId::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        say!(
            "warning: the log is damaged in {} at byte offset {} ({}): nothing after it was read, so {after} (docket verify checks the whole directory)",
            damage.segment.display(),
            damage.offset,
            damage.damage
        );
    }
    Ok(Runtime::new(Store::from(store)))
}

/// [`open_read`] for a command about one run: a missing directory is said as the run
/// missing from it, and a run recorded only after damage to the log as that damage.
pub(crate) async fn open_read_for(dir: &Path, run: &RunId) -> anyhow::Result<Runtime<Store>> {
    if postgres_url().is_some() {
        return open_read(dir).await;
    }
    if !dir.exists() {
        anyhow::bail!(
            "no run {run} in the data directory {}: it does not exist (give another with --data DIR or $DOCKET_DATA)",
            dir.display()
        );
    }
    let rt = open_read(dir).await?;
    if let Some(damage) = rt
        .store()
        .embedded()
        .and_then(EmbeddedStore::view_report)
        .and_then(|r| r.log_damage)
        && let Ok(stream) = docket_store::StreamId::new(run.as_str())
        && damage.streams_after.contains(&stream)
        && matches!(rt.store().head(&stream).await, Ok(None))
    {
        anyhow::bail!(
            "run {run} was recorded after damage to the log in {} at byte offset {} ({}): none of its events can be read (docket verify checks the whole directory)",
            damage.segment.display(),
            damage.offset,
            damage.damage
        );
    }
    Ok(rt)
}

/// Whether a run whose log says it is running is driven by a live process: the holder
/// of the writer lock, if it appended to the run (store/FORMAT.md §10). A PostgreSQL
/// store has no writer lock to tell by: its runs are taken as driven (none is called
/// interrupted).
pub(crate) fn driven(dir: &Path, run: &RunId) -> bool {
    if postgres_url().is_some() {
        return true;
    }
    let Ok(stream) = docket_store::StreamId::new(run.as_str()) else {
        return false;
    };
    LockHolder::of(dir).is_some_and(|h| h.drives(&stream))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::resolve_store;

    #[test]
    fn store_flag_chooses_the_backend_or_names_the_data_directory() {
        let url = "postgres://ana:hunter2@db:5432/ledger";
        assert_eq!(
            resolve_store(Some(url.to_owned()), Some(PathBuf::from("keys"))),
            Ok((Some(PathBuf::from("keys")), Some(url.to_owned())))
        );
        assert_eq!(
            resolve_store(Some("postgresql://db/ledger".to_owned()), None),
            Ok((None, Some("postgresql://db/ledger".to_owned())))
        );
        assert_eq!(
            resolve_store(Some("runs".to_owned()), None),
            Ok((Some(PathBuf::from("runs")), None))
        );
        assert_eq!(
            resolve_store(Some("runs".to_owned()), Some(PathBuf::from("runs"))),
            Ok((Some(PathBuf::from("runs")), None))
        );
        let both = resolve_store(Some("one".to_owned()), Some(PathBuf::from("two")));
        assert!(
            both.as_ref()
                .is_err_and(|e| e.contains("two different data directories")),
            "{both:?}"
        );
    }

    #[test]
    fn a_url_without_a_host_is_refused_without_its_password() {
        let err = super::check_postgres_url("postgres://x:hunter2:z@")
            .expect_err("no host")
            .to_string();
        assert!(
            err.starts_with("the store URL is not a PostgreSQL connection string"),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
        assert!(super::check_postgres_url("postgres://ana:pw@db:5432/ledger").is_ok());
        assert!(super::check_postgres_url("postgres://ana@%2Ftmp%2Fsock/ledger").is_ok());
    }
}
