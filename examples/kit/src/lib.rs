//! The stdio loop every example agent runs: one request line in, one response line out
//! (docs/agent-protocol.md, "JSON lines over stdin/stdout").

use std::io::{BufRead, Write};

use docket_decider::{AgentRequest, AgentResponse};

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
    use docket_decider::{Action, Confidence, parse_response};
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
