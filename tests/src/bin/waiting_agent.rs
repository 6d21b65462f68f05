//! An agent that takes several requests at once on one process (the example kit's
//! `serve_lines_at_once`) and waits in each, standing for a model call:
//! `waiting-agent --at-once N [--wait-ms MS] [--together K]`.
//! - `--wait-ms MS`: each request sleeps MS milliseconds before it is answered.
//! - `--together K`: each request is answered only once K requests are under way at the
//!   same moment on this process (bounded: after a minute it answers anyway, saying so),
//!   which shows that K lines were taken at once.
//!
//! Each answer finishes with `{"code": CAPABILITY_CODE, "together": SEEN}` and names the
//! process in its metadata (`pid`).
#![allow(clippy::print_stderr)]

use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use docket_decider::{Action, AgentRequest, AgentResponse, Confidence};
use serde_json::json;

static WAIT: OnceLock<Duration> = OnceLock::new();
static TOGETHER: OnceLock<usize> = OnceLock::new();
static UNDER_WAY: AtomicUsize = AtomicUsize::new(0);
static MOST: AtomicUsize = AtomicUsize::new(0);

fn answer(request: &AgentRequest) -> AgentResponse {
    let now = UNDER_WAY.fetch_add(1, Ordering::SeqCst) + 1;
    MOST.fetch_max(now, Ordering::SeqCst);
    let together = TOGETHER.get().copied().unwrap_or(1);
    let started = Instant::now();
    while MOST.load(Ordering::SeqCst) < together && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(WAIT.get().copied().unwrap_or_default());
    let seen = MOST.load(Ordering::SeqCst);
    UNDER_WAY.fetch_sub(1, Ordering::SeqCst);
    let mut response = AgentResponse::success(
        request.request_id.clone(),
        Confidence::High,
        vec![Action::Finish {
            output: json!({ "code": request.capability_code, "together": seen }),
        }],
    );
    response
        .metadata
        .insert("pid".to_owned(), json!(std::process::id()));
    response
}

fn main() -> ExitCode {
    let mut at_once = NonZeroUsize::MIN;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (arg.as_str(), value) {
            ("--at-once", Some(n)) => {
                at_once = usize::try_from(n)
                    .ok()
                    .and_then(NonZeroUsize::new)
                    .unwrap_or(NonZeroUsize::MIN);
            }
            ("--wait-ms", Some(ms)) => {
                let _ = WAIT.set(Duration::from_millis(ms));
            }
            ("--together", Some(k)) => {
                let _ = TOGETHER.set(usize::try_from(k).unwrap_or(1));
            }
            _ => {
                eprintln!("waiting-agent: unknown or incomplete argument {arg}");
                return ExitCode::from(2);
            }
        }
    }
    match docket_example_kit::run_at_once(answer, at_once) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("waiting-agent: {e}");
            ExitCode::FAILURE
        }
    }
}
