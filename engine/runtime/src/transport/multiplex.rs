//! A child process that takes several JSON lines at once (`requests_per_process` above
//! 1, docs/agent-protocol.md#several-requests-at-once): lines are written as they come,
//! and each answer line is handed to the exchange whose `request_id` it names, in
//! whatever order the process answers. One reader task per process reads its stdout; a
//! line that names no exchange under way, an oversized line or the end of stdout ends
//! the process and fails every exchange under way, and the next exchange starts a new
//! one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};

use tokio::io::AsyncWriteExt as _;
use tokio::process::ChildStdin;
use tokio::sync::{Mutex, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::process::{LineRead, Process, read_line};
use super::{CommandConfig, ExitReport, Interrupted, TransportError};

/// How many bytes of a line that names no exchange are kept to say what it was.
const EXCERPT_BYTES: usize = 80;

/// How long a process whose stdout closed is given to exit by itself.
const EXIT_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// What an exchange under way is told when its answer comes, or when the process ends.
type Answer = Result<Vec<u8>, Failure>;

/// Why the process stopped answering, as each exchange under way is told it.
#[derive(Debug, Clone)]
enum Failure {
    Ended {
        exit: ExitReport,
        stderr_tail: String,
        during: Ended,
    },
    LineTooLong {
        limit: usize,
        received: u64,
    },
    Stdout(std::io::ErrorKind, String),
}

#[derive(Debug, Clone)]
enum Ended {
    Reading {
        partial: usize,
    },
    OutOfStep {
        named: Option<String>,
        excerpt: String,
    },
}

impl From<Failure> for TransportError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Ended {
                exit,
                stderr_tail,
                during,
            } => Self::Ended {
                exit,
                stderr_tail,
                during: match during {
                    Ended::Reading { partial } => Interrupted::Reading { partial },
                    Ended::OutOfStep { named, excerpt } => {
                        Interrupted::OutOfStep { named, excerpt }
                    }
                },
            },
            Failure::LineTooLong { limit, received } => Self::LineTooLong { limit, received },
            Failure::Stdout(kind, message) => Self::Stdout(std::io::Error::new(kind, message)),
        }
    }
}

/// One running process: its stdin, the exchanges waiting for answers, its reader.
struct Live {
    stdin: Mutex<ChildStdin>,
    waiting: Arc<StdMutex<Waiting>>,
    reader: JoinHandle<()>,
}

/// The exchanges under way on one process, by request id; `ended` once the process
/// stopped answering (later exchanges start a new process).
#[derive(Default)]
struct Waiting {
    by_id: HashMap<String, oneshot::Sender<Answer>>,
    ended: bool,
}

impl Drop for Live {
    fn drop(&mut self) {
        // The reader owns the child (killed on drop with it).
        self.reader.abort();
    }
}

/// A process taking several lines at once, started on the first exchange and kept.
pub(crate) struct MultiplexTransport {
    config: CommandConfig,
    live: Mutex<Option<Arc<Live>>>,
    starts: AtomicU64,
}

impl MultiplexTransport {
    pub(crate) fn new(config: CommandConfig) -> Self {
        Self {
            config,
            live: Mutex::new(None),
            starts: AtomicU64::new(0),
        }
    }

    pub(crate) fn start_count(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
    }

    pub(crate) async fn shutdown(&self) {
        self.live.lock().await.take();
    }

    /// Writes `line`, the request `request_id`, and waits for the answer line naming
    /// it, all before `deadline`. `check` says what the answer means and whether the
    /// process is still in step; one out of step is ended (every exchange under way on it
    /// fails) and the next exchange starts a new one. An exchange that gives up at its
    /// deadline leaves the process running for the others; its late answer is dropped.
    ///
    /// # Errors
    /// [`TransportError::TimedOut`], [`TransportError::CannotStart`],
    /// [`TransportError::Ended`], [`TransportError::LineTooLong`] or
    /// [`TransportError::Stdout`].
    pub(crate) async fn exchange_checked<T>(
        &self,
        line: &[u8],
        request_id: &str,
        deadline: Instant,
        check: impl FnOnce(Vec<u8>) -> (T, bool),
    ) -> Result<T, TransportError> {
        let (live, answer) = tokio::time::timeout_at(deadline, self.send(line, request_id))
            .await
            .map_err(|_| TransportError::TimedOut)??;
        let answered = tokio::time::timeout_at(deadline, answer).await;
        let answer = match answered {
            Err(_elapsed) => {
                lock(&live.waiting).by_id.remove(request_id);
                return Err(TransportError::TimedOut);
            }
            Ok(Err(_dropped)) => {
                return Err(TransportError::Ended {
                    exit: ExitReport::UNKNOWN,
                    stderr_tail: String::new(),
                    during: Interrupted::Reading { partial: 0 },
                });
            }
            Ok(Ok(answer)) => answer.map_err(TransportError::from)?,
        };
        let (checked, in_step) = check(answer);
        if !in_step {
            tracing::warn!(
                program = %self.config.program.display(),
                "the answer broke the protocol; ending the process (a new one serves the next line)"
            );
            let mut slot = self.live.lock().await;
            if slot.as_ref().is_some_and(|l| Arc::ptr_eq(l, &live)) {
                slot.take();
            }
        }
        Ok(checked)
    }

    /// Registers the exchange and writes its line, starting a process when none runs
    /// (or the last one ended).
    async fn send(
        &self,
        line: &[u8],
        request_id: &str,
    ) -> Result<(Arc<Live>, oneshot::Receiver<Answer>), TransportError> {
        let live = {
            let mut slot = self.live.lock().await;
            match slot.as_ref() {
                Some(live) if !lock(&live.waiting).ended => live.clone(),
                _ => {
                    let live = Arc::new(self.start()?);
                    *slot = Some(live.clone());
                    live
                }
            }
        };
        let (tx, rx) = oneshot::channel();
        lock(&live.waiting).by_id.insert(request_id.to_owned(), tx);
        let written = {
            let mut stdin = live.stdin.lock().await;
            match stdin.write_all(line).await {
                Ok(()) => stdin.flush().await,
                Err(e) => Err(e),
            }
        };
        if let Err(err) = written {
            lock(&live.waiting).by_id.remove(request_id);
            return Err(TransportError::Ended {
                exit: ExitReport::UNKNOWN,
                stderr_tail: String::new(),
                during: Interrupted::Writing(err),
            });
        }
        Ok((live, rx))
    }

    fn start(&self) -> Result<Live, TransportError> {
        let process = Process::start(&self.config, &self.starts)?;
        let Process {
            child,
            stdin,
            stdout,
            stderr,
            ..
        } = process;
        let waiting = Arc::new(StdMutex::new(Waiting::default()));
        let reader = tokio::spawn(read_answers(
            child,
            stdout,
            stderr,
            waiting.clone(),
            self.config.max_response_bytes,
        ));
        Ok(Live {
            stdin: Mutex::new(stdin),
            waiting,
            reader,
        })
    }
}

/// Reads answer lines and hands each to the exchange it names, until the process stops
/// answering in step; then ends it and tells every exchange still waiting why.
async fn read_answers(
    mut child: tokio::process::Child,
    mut stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
    stderr: super::process::StderrTail,
    waiting: Arc<StdMutex<Waiting>>,
    limit: usize,
) {
    let failure = loop {
        match read_line(&mut stdout, limit).await {
            Ok(LineRead::Line(bytes)) => {
                let named = request_id_of(&bytes);
                let sender = named
                    .as_ref()
                    .and_then(|id| lock(&waiting).by_id.remove(id));
                match sender {
                    Some(sender) => {
                        let _ = sender.send(Ok(bytes));
                    }
                    None => {
                        let excerpt =
                            String::from_utf8_lossy(bytes.get(..EXCERPT_BYTES).unwrap_or(&bytes))
                                .into_owned();
                        let _ = child.kill().await;
                        break Failure::Ended {
                            exit: exit_of(&mut child).await,
                            stderr_tail: stderr.finish().await,
                            during: Ended::OutOfStep { named, excerpt },
                        };
                    }
                }
            }
            Ok(LineRead::Ended { partial }) => {
                break Failure::Ended {
                    exit: exit_of(&mut child).await,
                    stderr_tail: stderr.finish().await,
                    during: Ended::Reading { partial },
                };
            }
            Ok(LineRead::TooLong { received }) => {
                let _ = child.kill().await;
                stderr.reader.abort();
                break Failure::LineTooLong { limit, received };
            }
            Err(err) => {
                let _ = child.kill().await;
                stderr.reader.abort();
                break Failure::Stdout(err.kind(), err.to_string());
            }
        }
    };
    let mut waiting = lock(&waiting);
    waiting.ended = true;
    for (_, sender) in waiting.by_id.drain() {
        let _ = sender.send(Err(failure.clone()));
    }
}

/// How the process ended: given a moment to exit by itself once its stdout closed (its
/// exit code is then its own), else killed.
async fn exit_of(child: &mut tokio::process::Child) -> ExitReport {
    let waited = tokio::time::timeout(EXIT_WAIT, child.wait()).await;
    let status = match waited {
        Ok(status) => status,
        Err(_still_running) => {
            let _ = child.start_kill();
            child.wait().await
        }
    };
    status.map_or(ExitReport::UNKNOWN, ExitReport::from_status)
}

/// The `request_id` an answer line names, read without parsing the rest of it.
fn request_id_of(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        request_id: String,
    }
    serde_json::from_slice::<Named>(line)
        .ok()
        .map(|n| n.request_id)
}

fn lock(waiting: &StdMutex<Waiting>) -> std::sync::MutexGuard<'_, Waiting> {
    waiting.lock().unwrap_or_else(PoisonError::into_inner)
}
