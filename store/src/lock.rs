//! One writer per data directory, said clearly (store/FORMAT.md §10).
//!
//! A writer holds an exclusive `flock` on `writer.lock` for as long as its store is open,
//! and names itself in `writer.holder`: its pid, its command line, when it took the lock,
//! then one line per stream it appended to since. The kernel releases the lock when the
//! process dies, however it dies, so a lock that nobody holds is never stale; the holder
//! file is only believed while its lock is held. Readers never take the lock to read the
//! log: they look at it only to say who writes and which runs are being driven.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{StoreError, io_err};
use crate::event::StreamId;

/// The file a writer locks. Never removed: removing it while a writer waits on it would
/// let a third process lock a new file of the same name.
pub(crate) const LOCK_FILE: &str = "writer.lock";
/// Who holds the lock: written by the holder once it has it.
pub(crate) const HOLDER_FILE: &str = "writer.holder";

/// How often a waiting writer tries the lock again.
const RETRY: Duration = Duration::from_millis(20);

/// The process holding a data directory's writer lock, as it described itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockHolder {
    pub pid: u32,
    /// Its command line (arguments joined by spaces).
    pub command: String,
    /// When it took the lock, in seconds since the Unix epoch.
    pub since_s: u64,
    /// The streams it appended to since it took the lock (the runs it drives).
    pub streams: std::collections::BTreeSet<StreamId>,
}

impl LockHolder {
    /// Who holds the writer lock of the data directory `dir` right now, if anyone: reads
    /// the holder file only while the lock is held (a dead holder's lock is released by
    /// the kernel). Creates nothing; a directory without the lock file has no writer.
    #[must_use]
    pub fn of(dir: &Path) -> Option<LockHolder> {
        let file = File::open(dir.join(LOCK_FILE)).ok()?;
        // fs2's (std's own file locks are newer than the workspace's MSRV).
        match fs2::FileExt::try_lock_shared(&file) {
            // Nobody holds it: a holder file left there is a dead writer's.
            Ok(()) => {
                let _ = fs2::FileExt::unlock(&file);
                None
            }
            Err(e) if contended(&e) => Some(read_holder(dir).unwrap_or(LockHolder {
                pid: 0,
                command: String::new(),
                since_s: 0,
                streams: std::collections::BTreeSet::new(),
            })),
            Err(_) => None,
        }
    }

    /// Whether this holder appended to `stream` since it took the lock.
    #[must_use]
    pub fn drives(&self, stream: &StreamId) -> bool {
        self.streams.contains(stream)
    }
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pid == 0 {
            return write!(f, "another process (it has not named itself yet)");
        }
        write!(f, "process {}", self.pid)?;
        if !self.command.is_empty() {
            write!(f, " (`{}`)", self.command)?;
        }
        Ok(())
    }
}

/// Whether a `try_lock` failed because another holds the lock.
fn contended(e: &std::io::Error) -> bool {
    e.kind() == fs2::lock_contended_error().kind()
}

/// Parses the holder file; `None` when it is missing or not written through yet.
fn read_holder(dir: &Path) -> Option<LockHolder> {
    let text = std::fs::read_to_string(dir.join(HOLDER_FILE)).ok()?;
    let mut holder = LockHolder {
        pid: 0,
        command: String::new(),
        since_s: 0,
        streams: std::collections::BTreeSet::new(),
    };
    // Only whole lines: the holder appends a line per new stream while others read.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    for line in complete.lines() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "pid" => holder.pid = value.parse().ok()?,
            "command" => value.clone_into(&mut holder.command),
            "since" => holder.since_s = value.parse().unwrap_or(0),
            "stream" => {
                if let Ok(stream) = StreamId::new(value) {
                    holder.streams.insert(stream);
                }
            }
            _ => {}
        }
    }
    (holder.pid != 0).then_some(holder)
}

/// A held writer lock: released when dropped (the file is closed) or when the process ends.
pub(crate) struct WriterLock {
    _lock: File,
    holder: std::sync::Mutex<Holding>,
}

struct Holding {
    file: File,
    path: PathBuf,
    /// Checked on every append: a fast hasher (stream ids are not attacker-chosen keys).
    noted: std::collections::HashSet<StreamId, foldhash::fast::RandomState>,
}

impl WriterLock {
    /// Takes the writer lock of `dir` (creating the directory and the lock file if need
    /// be), waiting up to `wait` for another writer to let go; `on_wait` is told who it
    /// waits for, once, when it has to.
    pub(crate) fn acquire(
        dir: &Path,
        wait: Duration,
        on_wait: Option<fn(&Path, &LockHolder)>,
    ) -> Result<WriterLock, StoreError> {
        std::fs::create_dir_all(dir).map_err(io_err("creating store directory", dir))?;
        let path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("opening the writer lock", &path))?;
        let start = Instant::now();
        let mut told = false;
        // A reader asking who writes holds the lock shared for an instant: only a lock
        // still held on the next try is a writer worth naming.
        let mut contended_tries = 0;
        loop {
            match fs2::FileExt::try_lock_exclusive(&lock) {
                Ok(()) => break,
                Err(e) if contended(&e) => {
                    let holder = read_holder(dir);
                    if start.elapsed() >= wait {
                        return Err(StoreError::Held {
                            path: dir.to_path_buf(),
                            holder,
                            waited: start.elapsed(),
                        });
                    }
                    contended_tries += 1;
                    if !told
                        && contended_tries > 1
                        && let (Some(tell), Some(h)) = (on_wait, &holder)
                    {
                        tell(dir, h);
                        told = true;
                    }
                    std::thread::sleep(RETRY);
                }
                Err(e) => {
                    return Err(io_err("locking the writer lock", &path)(e));
                }
            }
        }
        let holder_path = dir.join(HOLDER_FILE);
        let mut file = File::create(&holder_path)
            .map_err(io_err("writing the writer's name to", &holder_path))?;
        let command = std::env::args()
            .map(|a| a.replace(['\n', '\r'], " "))
            .collect::<Vec<_>>()
            .join(" ");
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // The pid line last: a reader believes the file once it names a pid.
        writeln!(
            file,
            "command {command}\nsince {since}\npid {}",
            std::process::id()
        )
        .map_err(io_err("writing the writer's name to", &holder_path))?;
        Ok(WriterLock {
            _lock: lock,
            holder: std::sync::Mutex::new(Holding {
                file,
                path: holder_path,
                noted: std::collections::HashSet::default(),
            }),
        })
    }

    /// Notes in the holder file that this writer appends to `stream` (once per stream), so
    /// that readers can tell a run being driven from one whose driver died. Advisory: a
    /// failure to write it is ignored (readers then call the run interrupted).
    pub(crate) fn note(&self, stream: &StreamId) {
        let mut h = crate::shared::lock(&self.holder);
        if h.noted.contains(stream) {
            return;
        }
        // One `write` of a whole line: readers see it whole or not at all.
        let line = format!("stream {stream}\n");
        if let Err(e) = h.file.write_all(line.as_bytes()) {
            tracing::debug!(path = %h.path.display(), error = %e, "cannot note a stream in the holder file");
        }
        h.noted.insert(stream.clone());
    }
}

/// Whether `name` (a file in the data directory) belongs to the writer lock: a directory
/// holding only these is still empty as far as creating a store goes.
pub(crate) fn is_lock_file(name: &std::ffi::OsStr) -> bool {
    name == LOCK_FILE || name == HOLDER_FILE
}
