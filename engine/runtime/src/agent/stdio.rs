//! Agents as child processes speaking JSON lines: one request line in on stdin, one
//! response line out on stdout. The process is kept between calls, started again when it
//! has died, and killed when a call times out or goes wrong mid-response. Its stderr is
//! kept (the last few KiB) to explain a crash.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::{
    AgentCallError, AgentExecutor, CallFuture, DEFAULT_MAX_RESPONSE_BYTES, ExitReport,
    accept_response, call_span, log_outcome,
};
use docket_decider::{AgentRequest, AgentResponse};

/// The default number of stderr bytes kept for diagnostics.
pub const DEFAULT_STDERR_TAIL_BYTES: usize = 8 * 1024;

/// How long a crashed process's stderr is given to reach its end after the process
/// exited (a grandchild may still hold it open); only the diagnostic tail depends on it.
const STDERR_DRAIN_LIMIT: Duration = Duration::from_millis(500);

/// How to start an agent process.
#[derive(Debug, Clone)]
pub struct StdioConfig {
    /// The program to run.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Extra environment variables (the engine's environment is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// The working directory; the engine's when `None`.
    pub current_dir: Option<PathBuf>,
    /// The largest response line accepted, in bytes (default 1 MiB).
    pub max_response_bytes: usize,
    /// How many of the last stderr bytes are kept (default 8 KiB).
    pub stderr_tail_bytes: usize,
}

impl StdioConfig {
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

    /// Sets the response size limit.
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

/// An agent behind a child process's stdin and stdout. Calls to one executor are served
/// one at a time (the protocol has one request in flight per process).
pub struct StdioExecutor {
    config: StdioConfig,
    process: Mutex<Option<AgentProcess>>,
    starts: AtomicU64,
}

/// A running child process speaking JSON lines (an agent, or an effect executor: see
/// `crate::effect::command`, which shares this plumbing).
pub(crate) struct AgentProcess {
    pub(crate) child: Child,
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: BufReader<ChildStdout>,
    stderr: StderrTail,
    /// Set while a request is written but its response not fully read: if the caller gave
    /// up on the call (dropped its future), the process's output is out of step with the
    /// requests and it must not be reused.
    pub(crate) in_flight: bool,
}

/// What reading one response line produced.
pub(crate) enum LineRead {
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

impl StdioExecutor {
    /// An executor that starts the process on its first call.
    #[must_use]
    pub fn new(config: StdioConfig) -> Self {
        Self {
            config,
            process: Mutex::new(None),
            starts: AtomicU64::new(0),
        }
    }

    /// How many times the process has been started (1 after the first call, more after
    /// restarts).
    #[must_use]
    pub fn start_count(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
    }

    /// Kills the process, if one is running. The next call starts a new one.
    pub async fn shutdown(&self) {
        if let Some(process) = self.process.lock().await.take() {
            process.kill().await;
        }
    }

    async fn call_locked(&self, request: &AgentRequest) -> Result<AgentResponse, AgentCallError> {
        let mut line = serde_json::to_vec(request)
            .map_err(|err| AgentCallError::io("encoding the request", err.into()))?;
        line.push(b'\n');

        // The deadline includes time spent queued behind other calls to this agent: the
        // request's timeout is the longest the caller waits, whatever the reason.
        let deadline = Instant::now() + Duration::from_millis(request.timeout_ms);
        let timeout = || AgentCallError::Timeout {
            timeout_ms: request.timeout_ms,
        };
        let Ok(mut slot) = tokio::time::timeout_at(deadline, self.process.lock()).await else {
            return Err(timeout());
        };
        match tokio::time::timeout_at(deadline, self.exchange(&mut slot, request, &line)).await {
            Ok(outcome) => outcome,
            Err(_elapsed) => {
                if let Some(process) = slot.take() {
                    tracing::warn!(
                        timeout_ms = request.timeout_ms,
                        "agent timed out; killing its process"
                    );
                    process.kill().await;
                }
                Err(timeout())
            }
        }
    }

    /// Writes the request and reads the response, starting the process if needed.
    async fn exchange(
        &self,
        slot: &mut Option<AgentProcess>,
        request: &AgentRequest,
        line: &[u8],
    ) -> Result<AgentResponse, AgentCallError> {
        let limit = self.config.max_response_bytes;
        let mut reused = self.ensure_running(slot).await?;
        loop {
            if write_line(slot, line).await.is_err() {
                if reused {
                    // The process died after the last call, before taking this request:
                    // start a new one and send the request again, once.
                    tracing::info!(
                        "agent process was gone when the request was written; restarting"
                    );
                    self.restart(slot).await?;
                    reused = false;
                    continue;
                }
                return Err(crashed(slot).await);
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
                    accept_response(request, &bytes)
                }
                Ok(LineRead::Ended { partial }) => {
                    let crash = crashed(slot).await;
                    let clean_exit = matches!(&crash, AgentCallError::Crashed { exit, .. } if exit.code == Some(0));
                    if reused && partial == 0 && clean_exit {
                        // A process that exits cleanly after answering (a one-shot agent)
                        // can be caught between its answer and its exit: it wrote nothing
                        // for this request, so send it to a new process, once.
                        tracing::info!(
                            "agent process exited cleanly after its last answer; restarting"
                        );
                        self.restart(slot).await?;
                        reused = false;
                        continue;
                    }
                    Err(crash)
                }
                Ok(LineRead::TooLong { received }) => {
                    // The rest of the line may be arbitrarily long: stop reading and start
                    // a fresh process next time instead of draining it.
                    if let Some(process) = slot.take() {
                        process.kill().await;
                    }
                    Err(AgentCallError::Oversized { limit, received })
                }
                Err(err) => {
                    if let Some(process) = slot.take() {
                        process.kill().await;
                    }
                    Err(AgentCallError::io("reading the agent's stdout", err))
                }
            };
        }
    }

    async fn restart(&self, slot: &mut Option<AgentProcess>) -> Result<(), AgentCallError> {
        if let Some(process) = slot.take() {
            process.kill().await;
        }
        *slot = Some(self.spawn()?);
        Ok(())
    }

    /// Makes sure a live, in-step process is in `slot`; returns whether it was already
    /// running (rather than started now).
    async fn ensure_running(
        &self,
        slot: &mut Option<AgentProcess>,
    ) -> Result<bool, AgentCallError> {
        if let Some(process) = slot.as_mut() {
            match process.child.try_wait() {
                Ok(None) if !process.in_flight => return Ok(true),
                Ok(None) => {
                    tracing::warn!(
                        "previous call was abandoned mid-response; restarting the agent"
                    );
                }
                Ok(Some(status)) => {
                    tracing::info!(exit = %ExitReport::from_status(status), "agent process exited between calls; restarting");
                }
                Err(err) => {
                    tracing::warn!(error = %err, "cannot query the agent process; restarting");
                }
            }
            if let Some(process) = slot.take() {
                process.kill().await;
            }
        }
        *slot = Some(self.spawn()?);
        Ok(false)
    }

    fn spawn(&self) -> Result<AgentProcess, AgentCallError> {
        let process = AgentProcess::spawn(&self.config).map_err(|err| {
            AgentCallError::io(format!("starting {}", self.config.program.display()), err)
        })?;
        self.starts.fetch_add(1, Ordering::Relaxed);
        Ok(process)
    }
}

impl AgentExecutor for StdioExecutor {
    fn call<'a>(&'a self, request: &'a AgentRequest) -> CallFuture<'a> {
        let span = call_span("stdio", request);
        Box::pin(
            async move {
                let outcome = self.call_locked(request).await;
                log_outcome(&outcome);
                outcome
            }
            .instrument(span),
        )
    }
}

async fn write_line(slot: &mut Option<AgentProcess>, line: &[u8]) -> std::io::Result<()> {
    let Some(process) = slot.as_mut() else {
        return Err(std::io::ErrorKind::NotConnected.into());
    };
    process.write_line(line).await
}

/// Reads one non-blank line, holding at most `limit` bytes of it (plus one read buffer).
pub(crate) async fn read_line(
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

/// The process ended (or stopped reading) before answering: collect how it ended and what
/// it last said on stderr.
async fn crashed(slot: &mut Option<AgentProcess>) -> AgentCallError {
    let Some(process) = slot.take() else {
        return AgentCallError::Crashed {
            exit: ExitReport {
                code: None,
                signal: None,
            },
            stderr_tail: String::new(),
        };
    };
    let (exit, stderr_tail) = process.ended().await;
    AgentCallError::Crashed { exit, stderr_tail }
}

impl AgentProcess {
    /// Starts the process described by `config`, with piped stdin, stdout and stderr.
    pub(crate) fn spawn(config: &StdioConfig) -> std::io::Result<Self> {
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
    pub(crate) async fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.in_flight = true;
        self.stdin.write_all(line).await?;
        self.stdin.flush().await
    }

    /// Waits for a process that stopped answering to end; how it ended and its stderr tail.
    pub(crate) async fn ended(self) -> (ExitReport, String) {
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
            Err(_) => ExitReport {
                code: None,
                signal: None,
            },
        };
        (exit, stderr.finish().await)
    }

    pub(crate) async fn kill(mut self) {
        if let Err(err) = self.child.kill().await {
            tracing::warn!(error = %err, "could not kill the agent process");
        }
        self.stderr.reader.abort();
    }
}

/// The last bytes a process wrote to stderr, collected by a background task so a chatty
/// agent never blocks on a full pipe.
struct StderrTail {
    tail: Arc<StdMutex<VecDeque<u8>>>,
    reader: JoinHandle<()>,
}

impl StderrTail {
    fn start(mut stderr: tokio::process::ChildStderr, capacity: usize) -> Self {
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
    async fn finish(mut self) -> String {
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
