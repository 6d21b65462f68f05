//! A child process speaking JSON lines: one line in on its stdin, one answer line out on
//! its stdout. The process is kept between exchanges, one exchange in flight at a time;
//! it is started again when it has died, and killed at the deadline or when its answer
//! grows past the limit. Its stderr is read all along and its last few KiB kept, to
//! explain a crash.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{DEFAULT_MAX_RESPONSE_BYTES, Interrupted, TransportError};

/// The default number of stderr bytes kept for diagnostics.
const DEFAULT_STDERR_TAIL_BYTES: usize = 8 * 1024;

/// How long a crashed process's stderr is given to reach its end after the process
/// exited (a grandchild may still hold it open); only the diagnostic tail depends on it.
const STDERR_DRAIN_LIMIT: Duration = Duration::from_millis(500);

/// Where a workflow's `command` is started from: a path with a `/` as written; a bare
/// name next to the running executable when such a file exists there, else as given (so
/// the OS looks it up on `PATH`).
#[must_use]
pub fn resolve_program(command: &str) -> PathBuf {
    if command.contains('/') {
        return PathBuf::from(command);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(PathBuf::from))
    {
        let candidate = dir.join(format!("{command}{}", std::env::consts::EXE_SUFFIX));
        if candidate.is_file() {
            return candidate;
        }
    }
    PathBuf::from(command)
}

/// How to start a child process speaking JSON lines: an agent or an effect executor
/// declared with `command` in the workflow file.
#[derive(Debug, Clone)]
pub struct CommandConfig {
    /// The program to run.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Extra environment variables (the engine's environment is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// The working directory; the engine's when `None`.
    pub current_dir: Option<PathBuf>,
    /// The largest answer line accepted, in bytes (default 1 MiB).
    pub max_response_bytes: usize,
    /// How many of the last stderr bytes are kept (default 8 KiB).
    pub stderr_tail_bytes: usize,
}

impl CommandConfig {
    /// Runs `program` with no arguments and the default limits.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            current_dir: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            stderr_tail_bytes: DEFAULT_STDERR_TAIL_BYTES,
        }
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds an environment variable.
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Sets the working directory.
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Sets the answer size limit.
    #[must_use]
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.max_response_bytes = limit;
        self
    }

    /// Sets how many of the last stderr bytes are kept.
    #[must_use]
    pub fn stderr_tail_bytes(mut self, bytes: usize) -> Self {
        self.stderr_tail_bytes = bytes;
        self
    }
}

/// How a child process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitReport {
    /// The exit code, if it exited normally.
    pub code: Option<i32>,
    /// The signal that ended it, on Unix.
    pub signal: Option<i32>,
}

impl ExitReport {
    pub(super) const UNKNOWN: Self = Self {
        code: None,
        signal: None,
    };

    pub(super) fn from_status(status: std::process::ExitStatus) -> Self {
        #[cfg(unix)]
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        #[cfg(not(unix))]
        let signal = None;
        Self {
            code: status.code(),
            signal,
        }
    }
}

impl fmt::Display for ExitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(signal)) => write!(f, "killed by signal {signal}"),
            (None, None) => f.write_str("exit status unknown"),
        }
    }
}

/// A child process behind its stdin and stdout, started on the first exchange and kept.
/// Exchanges are served one at a time (one line in flight per process).
pub(crate) struct ProcessTransport {
    config: CommandConfig,
    retry_clean_exit: bool,
    process: Mutex<Option<Process>>,
    starts: AtomicU64,
}

impl ProcessTransport {
    /// A transport that starts the process on its first exchange.
    pub(crate) fn new(config: CommandConfig) -> Self {
        Self {
            config,
            retry_clean_exit: false,
            process: Mutex::new(None),
            starts: AtomicU64::new(0),
        }
    }

    /// Whether a kept process that exits cleanly (status 0) without writing anything for
    /// the line gets the line again on a new process, once (default: no). For a program
    /// that answers one line and exits, caught between its answer and its exit.
    pub(crate) fn retry_clean_exit(mut self, retry: bool) -> Self {
        self.retry_clean_exit = retry;
        self
    }

    /// How many times the process has been started (1 after the first exchange, more
    /// after restarts).
    pub(crate) fn start_count(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
    }

    /// Kills the process, if one is running. The next exchange starts a new one.
    pub(crate) async fn shutdown(&self) {
        if let Some(process) = self.process.lock().await.take() {
            process.kill().await;
        }
    }

    /// Writes `line` (one JSON document and its `\n`) and reads one non-blank answer line,
    /// starting the process if needed, all before `deadline`, which includes time queued
    /// behind other exchanges. A write to a process that died since the last exchange is
    /// sent again to a new process, once: it cannot have acted on the line.
    ///
    /// The answer line is handed to `check` while the process is still held: `check` says
    /// what the answer means and whether the process is still in step with the lines (`false` after an answer that is not the protocol's, such as a
    /// stray banner line, or an answer to another line). A process out of step is killed
    /// before any other exchange can use it, and the next exchange starts a new one: kept,
    /// it would answer every later line with the answer to the line before.
    ///
    /// # Errors
    /// [`TransportError::TimedOut`], [`TransportError::CannotStart`],
    /// [`TransportError::Ended`], [`TransportError::LineTooLong`] or
    /// [`TransportError::Stdout`]. The process is killed at the deadline and after a
    /// broken exchange, and started again on the next.
    pub(crate) async fn exchange_checked<T>(
        &self,
        line: &[u8],
        deadline: Instant,
        check: impl FnOnce(Vec<u8>) -> (T, bool),
    ) -> Result<T, TransportError> {
        let Ok(mut slot) = tokio::time::timeout_at(deadline, self.process.lock()).await else {
            return Err(TransportError::TimedOut);
        };
        let exchanged =
            tokio::time::timeout_at(deadline, self.exchange_locked(&mut slot, line)).await;
        match exchanged {
            Ok(Ok(answer)) => {
                let (checked, in_step) = check(answer);
                if !in_step {
                    tracing::warn!(
                        program = %self.config.program.display(),
                        "the answer broke the protocol; killing the process (a new one \
                         serves the next line)"
                    );
                    kill(&mut slot).await;
                }
                Ok(checked)
            }
            Ok(Err(err)) => Err(err),
            Err(_elapsed) => {
                if let Some(process) = slot.take() {
                    tracing::warn!(
                        program = %self.config.program.display(),
                        "no answer before the deadline; killing the process"
                    );
                    process.kill().await;
                }
                Err(TransportError::TimedOut)
            }
        }
    }

    async fn exchange_locked(
        &self,
        slot: &mut Option<Process>,
        line: &[u8],
    ) -> Result<Vec<u8>, TransportError> {
        let limit = self.config.max_response_bytes;
        let mut reused = self.ensure_running(slot).await?;
        loop {
            let written = match slot.as_mut() {
                Some(process) => process.write_line(line).await,
                None => Err(std::io::ErrorKind::NotConnected.into()),
            };
            if let Err(err) = written {
                if reused {
                    // The process died after the last exchange, before taking this line:
                    // start a new one and send the line again, once.
                    tracing::info!("the process was gone when the line was written; restarting");
                    self.restart(slot).await?;
                    reused = false;
                    continue;
                }
                return Err(ended(slot, Interrupted::Writing(err)).await);
            }
            let read = match slot.as_mut() {
                Some(process) => read_line(&mut process.stdout, limit).await,
                None => Ok(LineRead::Ended { partial: 0 }),
            };
            return match read {
                Ok(LineRead::Line(bytes)) => {
                    if let Some(process) = slot.as_mut() {
                        process.in_flight = false;
                    }
                    Ok(bytes)
                }
                Ok(LineRead::Ended { partial }) => {
                    let ended = ended(slot, Interrupted::Reading { partial }).await;
                    let clean_exit = matches!(
                        &ended,
                        TransportError::Ended { exit, .. } if exit.code == Some(0)
                    );
                    if self.retry_clean_exit && reused && partial == 0 && clean_exit {
                        // A process that exits cleanly after answering (a one-shot program)
                        // can be caught between its answer and its exit: it wrote nothing
                        // for this line, so send it to a new process, once.
                        tracing::info!(
                            "the process exited cleanly after its last answer; restarting"
                        );
                        self.restart(slot).await?;
                        reused = false;
                        continue;
                    }
                    Err(ended)
                }
                Ok(LineRead::TooLong { received }) => {
                    // The rest of the line may be arbitrarily long: stop reading and start
                    // a fresh process next time instead of draining it.
                    kill(slot).await;
                    Err(TransportError::LineTooLong { limit, received })
                }
                Err(err) => {
                    kill(slot).await;
                    Err(TransportError::Stdout(err))
                }
            };
        }
    }

    async fn restart(&self, slot: &mut Option<Process>) -> Result<(), TransportError> {
        kill(slot).await;
        *slot = Some(self.spawn()?);
        Ok(())
    }

    /// Makes sure a live, in-step process is in `slot`; returns whether it was already
    /// running (rather than started now).
    async fn ensure_running(&self, slot: &mut Option<Process>) -> Result<bool, TransportError> {
        if let Some(process) = slot.as_mut() {
            match process.child.try_wait() {
                Ok(None) if !process.in_flight => return Ok(true),
                Ok(None) => {
                    tracing::warn!(
                        "the previous exchange was abandoned mid-answer; restarting the process"
                    );
                }
                Ok(Some(status)) => {
                    tracing::info!(
                        exit = %ExitReport::from_status(status),
                        "the process exited between exchanges; restarting"
                    );
                }
                Err(err) => {
                    tracing::warn!(error = %err, "cannot query the process; restarting");
                }
            }
        }
        self.restart(slot).await?;
        Ok(false)
    }

    fn spawn(&self) -> Result<Process, TransportError> {
        Process::start(&self.config, &self.starts)
    }
}

/// A running child process with piped stdin, stdout and stderr.
pub(super) struct Process {
    pub(super) child: Child,
    pub(super) stdin: ChildStdin,
    pub(super) stdout: BufReader<ChildStdout>,
    pub(super) stderr: StderrTail,
    /// Set while a line is written but its answer not fully read: if the caller gave up
    /// on the exchange (dropped its future), the process's output is out of step with the
    /// lines and it must not be reused.
    in_flight: bool,
}

impl Process {
    /// Starts the process described by `config` for an executor, counting the start in
    /// `starts`; a program that cannot be started is named.
    pub(super) fn start(
        config: &CommandConfig,
        starts: &AtomicU64,
    ) -> Result<Self, TransportError> {
        let process = Self::spawn(config).map_err(|source| TransportError::CannotStart {
            program: config.program.clone(),
            source,
        })?;
        starts.fetch_add(1, Ordering::Relaxed);
        Ok(process)
    }

    /// Starts the process described by `config`.
    pub(super) fn spawn(config: &CommandConfig) -> std::io::Result<Self> {
        let mut command = Command::new(&config.program);
        command
            .args(&config.args)
            .envs(config.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &config.current_dir {
            command.current_dir(dir);
        }
        let mut child = command.spawn()?;
        let missing = || std::io::Error::other("a pipe was not set up");
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let stderr = child.stderr.take().ok_or_else(missing)?;
        tracing::info!(pid = child.id(), program = %config.program.display(), "process started");
        Ok(Self {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            stderr: StderrTail::start(stderr, config.stderr_tail_bytes),
            in_flight: false,
        })
    }

    /// Writes one line, marking the process in flight until its answer is read.
    async fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.in_flight = true;
        self.stdin.write_all(line).await?;
        self.stdin.flush().await
    }

    /// Waits for a process that stopped answering to end; how it ended and its stderr tail.
    async fn ended(self) -> (ExitReport, String) {
        let Self {
            mut child,
            stdin,
            stderr,
            ..
        } = self;
        // Closing stdin lets a process that is still alive (it closed stdout only) see EOF.
        drop(stdin);
        let exit = match child.wait().await {
            Ok(status) => ExitReport::from_status(status),
            Err(_) => ExitReport::UNKNOWN,
        };
        (exit, stderr.finish().await)
    }

    async fn kill(mut self) {
        if let Err(err) = self.child.kill().await {
            tracing::warn!(error = %err, "could not kill the process");
        }
        self.stderr.reader.abort();
    }
}

/// Kills the process in `slot`, if any.
async fn kill(slot: &mut Option<Process>) {
    if let Some(process) = slot.take() {
        process.kill().await;
    }
}

/// The process ended (or stopped reading) before answering: how it ended and what it last
/// said on stderr.
async fn ended(slot: &mut Option<Process>, during: Interrupted) -> TransportError {
    let (exit, stderr_tail) = match slot.take() {
        Some(process) => process.ended().await,
        None => (ExitReport::UNKNOWN, String::new()),
    };
    TransportError::Ended {
        exit,
        stderr_tail,
        during,
    }
}

/// What reading one answer line produced.
pub(super) enum LineRead {
    Line(Vec<u8>),
    /// stdout ended, after `partial` bytes of an unfinished line.
    Ended {
        partial: usize,
    },
    /// The line grew past the limit; `received` bytes had arrived.
    TooLong {
        received: u64,
    },
}

/// Reads one non-blank line, holding at most `limit` bytes of it (plus one read buffer).
pub(super) async fn read_line(
    stdout: &mut BufReader<ChildStdout>,
    limit: usize,
) -> std::io::Result<LineRead> {
    let mut line = Vec::new();
    loop {
        let buffer = stdout.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(LineRead::Ended {
                partial: line.len(),
            });
        }
        let (chunk, newline) = match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => (&buffer[..end], true),
            None => (buffer, false),
        };
        if line.len() + chunk.len() > limit {
            let received = (line.len() + chunk.len()) as u64;
            return Ok(LineRead::TooLong { received });
        }
        line.extend_from_slice(chunk);
        let used = chunk.len() + usize::from(newline);
        stdout.consume(used);
        if newline {
            if line.iter().all(u8::is_ascii_whitespace) {
                line.clear();
                continue;
            }
            return Ok(LineRead::Line(line));
        }
    }
}

/// The last bytes a process wrote to stderr, collected by a background task so a chatty
/// process never blocks on a full pipe.
pub(super) struct StderrTail {
    tail: Arc<StdMutex<VecDeque<u8>>>,
    pub(super) reader: JoinHandle<()>,
}

impl StderrTail {
    fn start(mut stderr: ChildStderr, capacity: usize) -> Self {
        let tail = Arc::new(StdMutex::new(VecDeque::with_capacity(capacity)));
        let writer = Arc::clone(&tail);
        let reader = tokio::spawn(async move {
            let mut chunk = [0_u8; 4096];
            while let Ok(read) = stderr.read(&mut chunk).await {
                if read == 0 {
                    break;
                }
                let mut tail = writer.lock().unwrap_or_else(PoisonError::into_inner);
                tail.extend(&chunk[..read]);
                let excess = tail.len().saturating_sub(capacity);
                tail.drain(..excess);
            }
        });
        Self { tail, reader }
    }

    /// Waits (briefly) for stderr to end, then returns its tail.
    pub(super) async fn finish(mut self) -> String {
        if tokio::time::timeout(STDERR_DRAIN_LIMIT, &mut self.reader)
            .await
            .is_err()
        {
            self.reader.abort();
        }
        let tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        let (front, back) = tail.as_slices();
        let mut bytes = Vec::with_capacity(tail.len());
        bytes.extend_from_slice(front);
        bytes.extend_from_slice(back);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
