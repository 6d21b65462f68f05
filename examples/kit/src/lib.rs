//! The stdio loop every example agent runs: one request line in, one response line out
//! (docs/agent-protocol.md, "JSON lines over stdin/stdout").

use std::io::{BufRead, Write};

use docket_protocol::{AgentRequest, AgentResponse};

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Reading stdin or writing stdout failed.
    #[error("I/O error on stdin/stdout: {0}")]
    Io(std::io::Error),
    /// A request line was not a request (docket never sends one; stop rather than guess).
    #[error("a line on stdin is not an agent request: {0}")]
    BadRequest(serde_json::Error),
}

/// Answers every request line of `input` on `output` until `input` ends. Blank lines are
/// skipped.
///
/// # Errors
/// [`ServeError`] on I/O failure or a line that is not a request.
pub fn serve_lines(
    input: impl BufRead,
    mut output: impl Write,
    handle: fn(&AgentRequest) -> AgentResponse,
) -> Result<(), ServeError> {
    for line in input.lines() {
        let line = line.map_err(ServeError::Io)?;
        if line.trim().is_empty() {
            continue;
        }
        let request: AgentRequest = serde_json::from_str(&line).map_err(ServeError::BadRequest)?;
        let response = handle(&request);
        serde_json::to_writer(&mut output, &response).map_err(|err| ServeError::Io(err.into()))?;
        output.write_all(b"\n").map_err(ServeError::Io)?;
        output.flush().map_err(ServeError::Io)?;
    }
    Ok(())
}

/// Answers the request lines of `input` on `output` as [`serve_lines`] does, but with
/// up to `at_once` requests handled at the same time on as many threads, each response
/// written whole as soon as it is ready, in whatever order they finish: for an agent run
/// with `requests_per_process = at_once` in the workflow
/// (docs/agent-protocol.md#several-requests-at-once), whose requests wait on something
/// slow (a model). docket matches each response to its request by `request_id`.
///
/// # Errors
/// [`ServeError`] on I/O failure or a line that is not a request; requests already
/// being handled are answered first.
pub fn serve_lines_at_once(
    input: impl BufRead,
    output: impl Write + Send,
    handle: fn(&AgentRequest) -> AgentResponse,
    at_once: std::num::NonZeroUsize,
) -> Result<(), ServeError> {
    let output = std::sync::Mutex::new(output);
    let (requests, queue) = std::sync::mpsc::sync_channel::<AgentRequest>(at_once.get());
    let queue = std::sync::Mutex::new(queue);
    std::thread::scope(|threads| {
        let workers: Vec<_> = (0..at_once.get())
            .map(|_| {
                threads.spawn(|| -> Result<(), ServeError> {
                    loop {
                        let next = queue
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .recv();
                        let Ok(request) = next else {
                            return Ok(());
                        };
                        let mut line = serde_json::to_vec(&handle(&request))
                            .map_err(|err| ServeError::Io(err.into()))?;
                        line.push(b'\n');
                        let mut out = output
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        out.write_all(&line).map_err(ServeError::Io)?;
                        out.flush().map_err(ServeError::Io)?;
                    }
                })
            })
            .collect();
        let read = (|| {
            for line in input.lines() {
                let line = line.map_err(ServeError::Io)?;
                if line.trim().is_empty() {
                    continue;
                }
                let request: AgentRequest =
                    serde_json::from_str(&line).map_err(ServeError::BadRequest)?;
                if requests.send(request).is_err() {
                    break;
                }
            }
            Ok(())
        })();
        drop(requests);
        let mut result = read;
        for worker in workers {
            let done = worker.join().unwrap_or_else(|_| {
                Err(ServeError::Io(std::io::Error::other(
                    "a request handler panicked",
                )))
            });
            result = result.and(done);
        }
        result
    })
}

/// Serves stdin and stdout until stdin ends, with up to `at_once` requests handled at the
/// same time ([`serve_lines_at_once`]).
///
/// # Errors
/// [`ServeError`]; the binary reports it on stderr, which docket keeps for diagnosis.
pub fn run_at_once(
    handle: fn(&AgentRequest) -> AgentResponse,
    at_once: std::num::NonZeroUsize,
) -> Result<(), ServeError> {
    serve_lines_at_once(std::io::stdin().lock(), std::io::stdout(), handle, at_once)
}

/// Serves stdin and stdout until stdin ends.
///
/// # Errors
/// [`ServeError`]; the binary reports it on stderr, which docket keeps for diagnosis.
pub fn run(handle: fn(&AgentRequest) -> AgentResponse) -> Result<(), ServeError> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    serve_lines(stdin.lock(), stdout.lock(), handle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_decider::{ValidateResponse, parse_response};
    use docket_protocol::{Action, Confidence};
    use serde_json::json;

    fn echo(request: &AgentRequest) -> AgentResponse {
        AgentResponse::success(
            request.request_id.clone(),
            Confidence::High,
            vec![Action::Finish {
                output: json!(request.capability_code),
            }],
        )
    }

    #[test]
    fn requests_handled_at_once_are_each_answered_once_by_their_id() {
        let requests: Vec<AgentRequest> = (0..50)
            .map(|i| AgentRequest::new(format!("r{i}"), "a", "b", format!("CODE_{i}")))
            .collect();
        let input: String = requests
            .iter()
            .map(|r| serde_json::to_string(r).expect("serialises") + "\n")
            .collect();
        let mut output = Vec::new();
        serve_lines_at_once(
            input.as_bytes(),
            &mut output,
            echo,
            std::num::NonZeroUsize::new(8).expect("eight"),
        )
        .expect("serves");
        let mut answered: Vec<(String, String)> = output
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                let r = parse_response(l).expect("a whole response per line");
                let code = match &r.actions[..] {
                    [Action::Finish { output }] => output.as_str().unwrap_or_default().to_owned(),
                    other => panic!("{other:?}"),
                };
                (r.request_id.to_string(), code)
            })
            .collect();
        answered.sort();
        let mut expected: Vec<(String, String)> = (0..50)
            .map(|i| (format!("r{i}"), format!("CODE_{i}")))
            .collect();
        expected.sort();
        assert_eq!(answered, expected);
    }

    #[test]
    fn answers_each_request_line_with_one_response_line() {
        let r1 = AgentRequest::new("r1", "a", "b", "ONE_X");
        let r2 = AgentRequest::new("r2", "a", "b", "TWO_X");
        let input = format!(
            "{}\n\n{}\n",
            serde_json::to_string(&r1).expect("serialises"),
            serde_json::to_string(&r2).expect("serialises")
        );
        let mut output = Vec::new();
        serve_lines(input.as_bytes(), &mut output, echo).expect("serves");
        let lines: Vec<&[u8]> = output
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 2);
        let first = parse_response(lines[0]).expect("a response");
        let second = parse_response(lines[1]).expect("a response");
        assert_eq!(first.validate_for(&r1), Ok(()));
        assert_eq!(second.validate_for(&r2), Ok(()));
    }

    #[test]
    fn a_line_that_is_not_a_request_stops_serving() {
        let mut output = Vec::new();
        let result = serve_lines("not json\n".as_bytes(), &mut output, echo);
        assert!(matches!(result, Err(ServeError::BadRequest(_))));
        assert!(output.is_empty());
    }
}
