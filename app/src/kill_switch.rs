//! The kill switches of the store runs are recorded in (docs/governance.md): for a data
//! directory its file (`kill-switches.json` and its history), for a PostgreSQL store the
//! database's tables, so that a switch flipped from any machine stops the effects of every
//! worker and command recording in that database. The runtime reads them through
//! [`KillSwitchSource`] and knows neither backend; this is where the two meet.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use docket_runtime::{
    Engagement, FileKillSwitch, KillSwitchError, KillSwitchFileError, KillSwitchFlip,
    KillSwitchFuture, KillSwitchSource, KillSwitchState, is_switch_name,
};
use docket_store_postgres::{PgError, PostgresStore, SwitchFlip};

use crate::Store;

/// The kill switches of a PostgreSQL store, read from the database before every effect.
#[derive(Clone)]
pub struct DatabaseKillSwitch {
    store: PostgresStore,
}

impl DatabaseKillSwitch {
    #[must_use]
    pub fn new(store: PostgresStore) -> DatabaseKillSwitch {
        DatabaseKillSwitch { store }
    }

    /// Where the switches are, as messages name it.
    fn location(&self) -> String {
        format!(
            "PostgreSQL at {} (table docket_kill_switches)",
            self.store.database()
        )
    }
}

impl KillSwitchSource for DatabaseKillSwitch {
    fn engaged(&self) -> KillSwitchFuture<'_> {
        Box::pin(async move {
            // An error here (the database down, the table unreadable, a statement timed
            // out) stops every effect: the runtime counts every switch engaged.
            match self.store.kill_switches().await {
                Ok(engaged) => Ok(engaged.into_iter().map(|s| s.switch).collect()),
                Err(e) => Err(KillSwitchError {
                    location: self.location(),
                    message: e.to_string(),
                }),
            }
        })
    }
}

/// The kill switches the runs recorded in `store` obey: the database's for a PostgreSQL
/// store, else the file of the data directory `data`.
#[must_use]
pub fn kill_switch_source(store: &Store, data: &Path) -> Arc<dyn KillSwitchSource> {
    match KillSwitches::of(store, data) {
        KillSwitches::File(f) => Arc::new(f),
        KillSwitches::Database(d) => Arc::new(d),
    }
}

/// The kill switches could not be read or flipped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KillSwitchesError {
    /// The data directory's file.
    #[error(transparent)]
    File(#[from] KillSwitchFileError),
    /// The database.
    #[error("kill switches: {0}")]
    Database(#[from] PgError),
    /// A switch name that is empty or holds white space or control characters.
    #[error("kill switches: invalid switch name {name:?} (use `global` or a lane name)")]
    InvalidSwitch { name: String },
    /// The read or flip of the file was cut short (its thread panicked or the process is
    /// stopping).
    #[error("kill switches: the work on {location} did not finish: {message}")]
    Unfinished { location: String, message: String },
}

/// Runs `work` on the file's switches off the async threads (a flip waits for the file's
/// lock and fsyncs).
async fn on_file<T: Send + 'static>(
    file: &FileKillSwitch,
    work: impl FnOnce(&FileKillSwitch) -> Result<T, KillSwitchFileError> + Send + 'static,
) -> Result<T, KillSwitchesError> {
    let file = file.clone();
    let location = file.path().display().to_string();
    tokio::task::spawn_blocking(move || work(&file))
        .await
        .map_err(|e| KillSwitchesError::Unfinished {
            location,
            message: e.to_string(),
        })?
        .map_err(KillSwitchesError::from)
}

/// The kill switches of a store, to show and flip: where they are is chosen once, by the
/// store.
#[derive(Clone)]
pub enum KillSwitches {
    /// A data directory's file.
    File(FileKillSwitch),
    /// A PostgreSQL store's tables.
    Database(DatabaseKillSwitch),
}

impl KillSwitches {
    /// The switches of `store`: the database's for a PostgreSQL store, else those of the
    /// data directory `data`.
    #[must_use]
    pub fn of(store: &Store, data: &Path) -> KillSwitches {
        match store.postgres() {
            Some(pg) => KillSwitches::database(pg.clone()),
            None => KillSwitches::file(data),
        }
    }

    /// The switches of the PostgreSQL store `store`.
    #[must_use]
    pub fn database(store: PostgresStore) -> KillSwitches {
        KillSwitches::Database(DatabaseKillSwitch::new(store))
    }

    /// The switches of the data directory `data`.
    #[must_use]
    pub fn file(data: &Path) -> KillSwitches {
        KillSwitches::File(FileKillSwitch::new(data))
    }

    /// Where they are kept: the file's path, or the database (without its password).
    #[must_use]
    pub fn location(&self) -> String {
        match self {
            KillSwitches::File(f) => f.path().display().to_string(),
            KillSwitches::Database(d) => d.location(),
        }
    }

    /// The switches engaged now, with who engaged each, when and why.
    ///
    /// # Errors
    /// [`KillSwitchesError`]: the file or the database cannot be read.
    pub async fn state(&self) -> Result<KillSwitchState, KillSwitchesError> {
        match self {
            KillSwitches::File(f) => on_file(f, FileKillSwitch::state).await,
            KillSwitches::Database(d) => {
                let engaged: BTreeMap<String, Engagement> = d
                    .store
                    .kill_switches()
                    .await?
                    .into_iter()
                    .map(|s| {
                        let engagement = Engagement {
                            by: s.by,
                            at_ms: s.at_ms,
                            reason: s.reason,
                        };
                        (s.switch, engagement)
                    })
                    .collect();
                Ok(KillSwitchState { engaged })
            }
        }
    }

    /// Every flip so far, oldest first.
    ///
    /// # Errors
    /// [`KillSwitchesError`]: the file or the database cannot be read.
    pub async fn history(&self) -> Result<Vec<KillSwitchFlip>, KillSwitchesError> {
        match self {
            KillSwitches::File(f) => on_file(f, FileKillSwitch::history).await,
            KillSwitches::Database(d) => Ok(d
                .store
                .kill_switch_history()
                .await?
                .into_iter()
                .map(flip_of)
                .collect()),
        }
    }

    /// Engages (`on`) or releases `switch`, recording who and why (and when: `at_ms` for
    /// a file, the database's clock for a database) in the state and the history, as one
    /// change that concurrent flips do not lose.
    ///
    /// # Errors
    /// [`KillSwitchesError`]: an invalid name, the file or the database.
    pub async fn set(
        &self,
        switch: &str,
        on: bool,
        by: &str,
        reason: &str,
        at_ms: i64,
    ) -> Result<KillSwitchFlip, KillSwitchesError> {
        if !is_switch_name(switch) {
            return Err(KillSwitchesError::InvalidSwitch {
                name: switch.to_owned(),
            });
        }
        match self {
            KillSwitches::File(f) => {
                let (switch, by, reason) = (switch.to_owned(), by.to_owned(), reason.to_owned());
                on_file(f, move |f| f.set(&switch, on, &by, &reason, at_ms)).await
            }
            KillSwitches::Database(d) => {
                let f = d.store.flip_kill_switch(switch, on, by, reason).await?;
                Ok(flip_of(f))
            }
        }
    }
}

/// A flip as the database keeps it, as the runtime and the front ends show it.
fn flip_of(f: SwitchFlip) -> KillSwitchFlip {
    KillSwitchFlip {
        switch: f.switch,
        on: f.on,
        by: f.by,
        at_ms: f.at_ms,
        reason: f.reason,
        changed: f.changed,
    }
}
