//! Kill switches kept in a small file in the data directory, so `docket kill-switch on`
//! reaches a `docket run` in another process (only one process at a time opens the event
//! log). `DATA/kill-switches.json` holds the engaged switches (who, when, why); it is
//! replaced atomically (temp file, fsync, rename, fsync of the directory) under an
//! exclusive lock on `DATA/kill-switches.lock`, so concurrent flips neither corrupt it nor
//! lose each other. Every flip is also appended to `DATA/kill-switches.history.jsonl` for
//! audits.
//!
//! [`FileKillSwitch::engaged`] reads the file on every call (it runs before each effect
//! execution only). A missing file means no switch was ever engaged; a file that cannot be
//! read or parsed is an error, which the runtime treats as every switch engaged.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{KillSwitchError, KillSwitchFuture, KillSwitchSource};

/// The state file's name in the data directory.
pub const KILL_SWITCH_FILE: &str = "kill-switches.json";
/// The history file's name in the data directory (one JSON flip per line).
pub const KILL_SWITCH_HISTORY_FILE: &str = "kill-switches.history.jsonl";
const LOCK_FILE: &str = "kill-switches.lock";

/// Who engaged a switch, when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Engagement {
    /// Who engaged it.
    pub by: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Why.
    #[serde(default)]
    pub reason: String,
}

/// The content of `kill-switches.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillSwitchState {
    /// Engaged switches (`global` or a lane), sorted.
    pub engaged: BTreeMap<String, Engagement>,
}

/// One flip, as a line of the history file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillSwitchFlip {
    /// `global` or a lane.
    pub switch: String,
    /// Engaged (`true`) or released.
    pub on: bool,
    /// Who flipped it.
    pub by: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Why.
    #[serde(default)]
    pub reason: String,
    /// Whether the flip changed anything (engaging an engaged switch does not).
    pub changed: bool,
}

/// A kill-switch file that could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KillSwitchFileError {
    /// Reading or writing a file failed.
    #[error("kill switches: cannot {during} {path}: {source}")]
    Io {
        /// What was being done (`read`, `replace`...).
        during: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The state file is not a kill-switch state.
    #[error(
        "kill switches: {path} is corrupt ({message}); until it is fixed or removed every \
         switch counts as engaged"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A switch name that is empty or holds whitespace or control characters.
    #[error("kill switches: invalid switch name {name:?} (use `global` or a lane name)")]
    InvalidSwitch {
        /// The name given.
        name: String,
    },
}

/// Whether `name` can name a switch (`global` or a lane): not empty, and no white space or
/// control characters, wherever the switches are kept.
#[must_use]
pub fn is_switch_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The kill switches of one data directory.
#[derive(Debug, Clone)]
pub struct FileKillSwitch {
    dir: PathBuf,
}

impl FileKillSwitch {
    /// The switches kept in `data_dir` (which is created on the first flip).
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: data_dir.into(),
        }
    }

    /// The data directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state file's path.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.dir.join(KILL_SWITCH_FILE)
    }

    /// The history file's path.
    #[must_use]
    pub fn history_path(&self) -> PathBuf {
        self.dir.join(KILL_SWITCH_HISTORY_FILE)
    }

    /// The current state; empty when the file does not exist.
    ///
    /// # Errors
    /// [`KillSwitchFileError::Io`] or [`KillSwitchFileError::Corrupt`].
    pub fn state(&self) -> Result<KillSwitchState, KillSwitchFileError> {
        let path = self.path();
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(KillSwitchState::default());
            }
            Err(source) => {
                return Err(KillSwitchFileError::Io {
                    during: "read",
                    path,
                    source,
                });
            }
        };
        serde_json::from_slice(&text).map_err(|e| KillSwitchFileError::Corrupt {
            path,
            message: e.to_string(),
        })
    }

    /// Every flip so far, oldest first (a torn last line, from a crash mid-append, is
    /// skipped).
    ///
    /// # Errors
    /// [`KillSwitchFileError::Io`], or [`KillSwitchFileError::Corrupt`] for a bad line
    /// before the last.
    pub fn history(&self) -> Result<Vec<KillSwitchFlip>, KillSwitchFileError> {
        let path = self.history_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(KillSwitchFileError::Io {
                    during: "read",
                    path,
                    source,
                });
            }
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut flips = Vec::with_capacity(lines.len());
        for (n, line) in lines.iter().enumerate() {
            match serde_json::from_str(line) {
                Ok(flip) => flips.push(flip),
                Err(_) if n + 1 == lines.len() && !text.ends_with('\n') => {}
                Err(e) => {
                    return Err(KillSwitchFileError::Corrupt {
                        path,
                        message: format!("line {}: {e}", n + 1),
                    });
                }
            }
        }
        Ok(flips)
    }

    /// Engages (`on`) or releases `switch`, recording who, when and why in the state and
    /// the history. Concurrent flips from several processes are serialised by a lock.
    ///
    /// # Errors
    /// [`KillSwitchFileError`]: an invalid name, a corrupt state file (left as it is:
    /// it already stops every effect), or an I/O failure.
    pub fn set(
        &self,
        switch: &str,
        on: bool,
        by: &str,
        reason: &str,
        at_ms: i64,
    ) -> Result<KillSwitchFlip, KillSwitchFileError> {
        if !is_switch_name(switch) {
            return Err(KillSwitchFileError::InvalidSwitch {
                name: switch.to_owned(),
            });
        }
        let io = |during: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source| KillSwitchFileError::Io {
                during,
                path,
                source,
            }
        };
        std::fs::create_dir_all(&self.dir).map_err(io("create", &self.dir))?;
        let lock_path = self.dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io("open", &lock_path))?;
        fs2::FileExt::lock_exclusive(&lock).map_err(io("lock", &lock_path))?;

        let mut state = self.state()?;
        let changed = if on {
            let engagement = Engagement {
                by: by.to_owned(),
                at_ms,
                reason: reason.to_owned(),
            };
            state
                .engaged
                .insert(switch.to_owned(), engagement)
                .is_none()
        } else {
            state.engaged.remove(switch).is_some()
        };
        if changed {
            self.replace(&state)?;
        }
        let flip = KillSwitchFlip {
            switch: switch.to_owned(),
            on,
            by: by.to_owned(),
            at_ms,
            reason: reason.to_owned(),
            changed,
        };
        let history = self.history_path();
        let mut line = serde_json::to_vec(&flip).unwrap_or_default();
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&history)
            .map_err(io("open", &history))?;
        file.write_all(&line).map_err(io("append to", &history))?;
        file.sync_all().map_err(io("sync", &history))?;
        drop(lock); // closing the file releases the lock
        Ok(flip)
    }

    /// Writes `state` to a temp file, syncs it, renames it over the state file and syncs
    /// the directory, so readers see the old state or the new one, never a mix.
    fn replace(&self, state: &KillSwitchState) -> Result<(), KillSwitchFileError> {
        let path = self.path();
        let temp = self.dir.join(format!("{KILL_SWITCH_FILE}.tmp"));
        let mut text = serde_json::to_vec_pretty(state).unwrap_or_default();
        text.push(b'\n');
        let io = |during: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source| KillSwitchFileError::Io {
                during,
                path,
                source,
            }
        };
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
}

impl FileKillSwitch {
    /// The switches engaged now, as [`KillSwitchSource::engaged`] gives them, read at once
    /// (a small file: callers outside an async context read it directly).
    ///
    /// # Errors
    /// [`KillSwitchError`]: the file cannot be read or is corrupt.
    pub fn engaged(&self) -> Result<Vec<String>, KillSwitchError> {
        self.state()
            .map(|state| state.engaged.into_keys().collect())
            .map_err(|e| KillSwitchError {
                location: self.path().display().to_string(),
                message: e.to_string(),
            })
    }
}

impl KillSwitchSource for FileKillSwitch {
    fn engaged(&self) -> KillSwitchFuture<'_> {
        Box::pin(std::future::ready(FileKillSwitch::engaged(self)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_are_kept_in_the_state_and_the_history() {
        let dir = tempfile::tempdir().expect("tempdir");
        let switches = FileKillSwitch::new(dir.path().join("data"));
        assert_eq!(switches.engaged(), Ok(vec![]), "no file: nothing engaged");
        let flip = switches
            .set("api", true, "ops", "bad posts", 10)
            .expect("on");
        assert!(flip.changed);
        switches.set("global", true, "ops", "", 11).expect("on");
        assert!(
            !switches
                .set("api", true, "bob", "", 12)
                .expect("again")
                .changed
        );
        assert_eq!(switches.engaged(), Ok(vec!["api".into(), "global".into()]));
        assert_eq!(switches.state().expect("state").engaged["api"].by, "ops");
        switches.set("api", false, "ops", "fixed", 13).expect("off");
        assert_eq!(switches.engaged(), Ok(vec!["global".into()]));
        let history = switches.history().expect("history");
        let summary: Vec<(String, bool, i64)> = history
            .iter()
            .map(|f| (f.switch.clone(), f.on, f.at_ms))
            .collect();
        assert_eq!(
            summary,
            [
                ("api".into(), true, 10),
                ("global".into(), true, 11),
                ("api".into(), true, 12),
                ("api".into(), false, 13)
            ]
        );
    }

    #[test]
    fn a_corrupt_file_is_an_error_and_is_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let switches = FileKillSwitch::new(dir.path());
        std::fs::write(switches.path(), "{\"engaged\": [").expect("write");
        let err = switches.engaged().expect_err("corrupt");
        assert!(err.message.contains("corrupt"), "{err}");
        assert!(matches!(
            switches.set("api", true, "ops", "", 1),
            Err(KillSwitchFileError::Corrupt { .. })
        ));
        assert_eq!(
            std::fs::read_to_string(switches.path()).expect("read"),
            "{\"engaged\": ["
        );
    }

    #[test]
    fn a_torn_last_history_line_is_skipped_but_a_bad_earlier_one_is_corrupt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let switches = FileKillSwitch::new(dir.path());
        switches.set("api", true, "ops", "", 1).expect("on");
        let mut text = std::fs::read_to_string(switches.history_path()).expect("history");
        std::fs::write(switches.history_path(), format!("{text}{{\"switch\":\"ap")).expect("torn");
        assert_eq!(switches.history().expect("readable").len(), 1);
        text.insert_str(0, "not json\n");
        std::fs::write(switches.history_path(), text).expect("bad");
        assert!(matches!(
            switches.history(),
            Err(KillSwitchFileError::Corrupt { message, .. }) if message.starts_with("line 1")
        ));
    }

    #[test]
    fn bad_switch_names_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let switches = FileKillSwitch::new(dir.path());
        for name in ["", "a b", "x\n"] {
            assert!(matches!(
                switches.set(name, true, "ops", "", 1),
                Err(KillSwitchFileError::InvalidSwitch { .. })
            ));
        }
    }
}
