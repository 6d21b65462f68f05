//! The schedules of a data directory, in files beside its log: `DATA/schedules.json`
//! holds every schedule (removed ones included), replaced atomically (temp file, fsync,
//! rename, fsync of the directory) under an exclusive lock on `DATA/schedules.lock`, so
//! that `docket schedule` from a terminal and `docket serve` firing them neither corrupt
//! the file nor lose each other's changes; `DATA/schedules.firings.jsonl` has one line per
//! firing, appended and synced.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Firing, Schedule, SchedulesError};

/// The schedules' file name in the data directory.
pub const SCHEDULES_FILE: &str = "schedules.json";
/// The firings' file name in the data directory (one JSON firing per line).
pub const SCHEDULE_FIRINGS_FILE: &str = "schedules.firings.jsonl";
const LOCK_FILE: &str = "schedules.lock";

/// The content of `schedules.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Content {
    schedules: BTreeMap<String, Schedule>,
}

/// A data directory's schedules.
#[derive(Clone, Debug)]
pub struct ScheduleFile {
    dir: PathBuf,
}

fn io(during: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SchedulesError {
    let path = path.to_owned();
    move |source| SchedulesError::Io {
        during,
        path,
        source,
    }
}

impl ScheduleFile {
    /// The schedules of the data directory `dir`.
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> ScheduleFile {
        ScheduleFile { dir: dir.into() }
    }

    /// `DATA/schedules.json`.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.dir.join(SCHEDULES_FILE)
    }

    /// `DATA/schedules.firings.jsonl`.
    #[must_use]
    pub fn firings_path(&self) -> PathBuf {
        self.dir.join(SCHEDULE_FIRINGS_FILE)
    }

    /// Runs `work` off the async threads (it waits for the lock and fsyncs).
    pub(crate) async fn on<T: Send + 'static>(
        &self,
        work: impl FnOnce(&ScheduleFile) -> Result<T, SchedulesError> + Send + 'static,
    ) -> Result<T, SchedulesError> {
        let me = self.clone();
        let location = self.path().display().to_string();
        tokio::task::spawn_blocking(move || work(&me))
            .await
            .map_err(|e| SchedulesError::Unfinished {
                location,
                message: e.to_string(),
            })?
    }

    fn read(&self) -> Result<Content, SchedulesError> {
        let path = self.path();
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Content::default()),
            Err(e) => return Err(io("read", &path)(e)),
        };
        serde_json::from_slice(&text).map_err(|e| SchedulesError::Corrupt {
            path,
            message: e.to_string(),
        })
    }

    /// Holds the lock while `work` changes the content; written when `work` says so.
    fn locked<T>(
        &self,
        work: impl FnOnce(&mut Content) -> Result<(T, bool), SchedulesError>,
    ) -> Result<T, SchedulesError> {
        std::fs::create_dir_all(&self.dir).map_err(io("create", &self.dir))?;
        let lock_path = self.dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io("open", &lock_path))?;
        fs2::FileExt::lock_exclusive(&lock).map_err(io("lock", &lock_path))?;
        let mut content = self.read()?;
        let (answer, write) = work(&mut content)?;
        if write {
            self.write(&content)?;
        }
        drop(lock); // closing the file releases the lock
        Ok(answer)
    }

    /// Writes a temp file, syncs it, renames it over the file and syncs the directory, so
    /// readers see the old schedules or the new ones, never a mix.
    fn write(&self, content: &Content) -> Result<(), SchedulesError> {
        let path = self.path();
        let temp = self.dir.join(format!("{SCHEDULES_FILE}.tmp"));
        let mut text = serde_json::to_vec_pretty(content).map_err(|e| SchedulesError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        text.push(b'\n');
        let mut file = File::create(&temp).map_err(io("create", &temp))?;
        file.write_all(&text).map_err(io("write", &temp))?;
        file.sync_all().map_err(io("sync", &temp))?;
        drop(file);
        std::fs::rename(&temp, &path).map_err(io("replace", &path))?;
        if let Ok(dir) = File::open(&self.dir) {
            dir.sync_all().map_err(io("sync", &self.dir))?;
        }
        Ok(())
    }

    /// Every schedule, by name.
    ///
    /// # Errors
    /// The file cannot be read or is corrupt.
    pub fn list(&self) -> Result<Vec<Schedule>, SchedulesError> {
        Ok(self.read()?.schedules.into_values().collect())
    }

    /// The schedule `name`, if kept.
    ///
    /// # Errors
    /// The file cannot be read or is corrupt.
    pub fn get(&self, name: &str) -> Result<Option<Schedule>, SchedulesError> {
        Ok(self.read()?.schedules.remove(name))
    }

    /// Keeps a new schedule.
    ///
    /// # Errors
    /// [`SchedulesError::Exists`]; the file.
    pub fn add(&self, schedule: Schedule) -> Result<Schedule, SchedulesError> {
        self.locked(|c| {
            if let Some(old) = c.schedules.get(&schedule.name) {
                return Err(SchedulesError::Exists {
                    name: schedule.name.clone(),
                    removed: old.removed.is_some(),
                });
            }
            if c.schedules.len() >= super::MAX_SCHEDULES {
                return Err(SchedulesError::Full {
                    count: c.schedules.len(),
                });
            }
            c.schedules.insert(schedule.name.clone(), schedule.clone());
            Ok((schedule, true))
        })
    }

    /// Writes `schedule` as its next version if it is still at its version; whether it
    /// was.
    ///
    /// # Errors
    /// The file.
    pub fn replace(&self, schedule: &Schedule) -> Result<bool, SchedulesError> {
        self.locked(|c| match c.schedules.get_mut(&schedule.name) {
            Some(kept) if kept.version == schedule.version => {
                *kept = schedule.clone();
                kept.version += 1;
                Ok((true, true))
            }
            _ => Ok((false, false)),
        })
    }

    /// Appends firings and syncs. A firing done again (after a crash between recording it
    /// and moving the schedule on) is appended again and left out when read: appending
    /// reads nothing, so its cost does not grow with the file.
    ///
    /// # Errors
    /// The file.
    pub fn record(&self, firings: &[Firing]) -> Result<(), SchedulesError> {
        let path = self.firings_path();
        let mut lines = Vec::new();
        for f in firings {
            let mut line = serde_json::to_vec(f).map_err(|e| SchedulesError::Corrupt {
                path: path.clone(),
                message: e.to_string(),
            })?;
            line.push(b'\n');
            lines.extend(line);
        }
        self.locked(|_| {
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(io("open", &path))?;
            file.write_all(&lines).map_err(io("append to", &path))?;
            file.sync_all().map_err(io("sync", &path))?;
            Ok(((), false))
        })
    }

    /// The firings of `name` (all when `None`), oldest first, the last `limit`, each
    /// (schedule, instant, outcome) once. A torn last line (a crash while appending) is
    /// left out; a bad line before it is corruption.
    ///
    /// # Errors
    /// The file cannot be read or is corrupt.
    pub fn firings(&self, name: Option<&str>, limit: usize) -> Result<Vec<Firing>, SchedulesError> {
        let path = self.firings_path();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("open", &path)(e)),
        };
        let lines: Vec<String> = std::io::BufReader::new(file)
            .lines()
            .collect::<Result<_, _>>()
            .map_err(io("read", &path))?;
        let mut found = std::collections::VecDeque::new();
        let mut seen: BTreeSet<(String, i64, &'static str)> = BTreeSet::new();
        let last = lines.len().saturating_sub(1);
        for (i, line) in lines.iter().enumerate() {
            let firing: Firing = match serde_json::from_str(line) {
                Ok(f) => f,
                Err(_) if i == last => break,
                Err(e) => {
                    return Err(SchedulesError::Corrupt {
                        path,
                        message: format!("line {}: {e}", i + 1),
                    });
                }
            };
            let key = (
                firing.schedule.clone(),
                firing.due_at_ms,
                firing.outcome.as_str(),
            );
            if name.is_none_or(|n| n == firing.schedule) && seen.insert(key) {
                found.push_back(firing);
                if found.len() > limit {
                    found.pop_front();
                }
            }
        }
        Ok(found.into())
    }
}
