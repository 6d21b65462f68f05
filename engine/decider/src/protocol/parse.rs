//! Turning the bytes an agent sent into an [`AgentResponse`], or into a description of what
//! is wrong with them and where.

use docket_protocol::AgentResponse;

/// How many bytes of a bad response are quoted in the error.
const EXCERPT_BYTES: usize = 160;

/// Bytes that are not a well-formed response: not JSON, trailing data, a missing or
/// unknown field, a wrong type, an unknown action type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed response at `{path}`: {message}; the response began with {excerpt:?}")]
pub struct MalformedResponse {
    /// Where in the JSON document the problem is (`.` for the top level, otherwise a path
    /// such as `actions[1]`).
    pub path: String,
    /// What is wrong, with the line and column in the text.
    pub message: String,
    /// The first bytes of the response (lossily decoded), to recognise stray output such
    /// as a log line printed to stdout.
    pub excerpt: String,
}

/// Parses one response document. Whitespace around the document is allowed; anything else
/// after it is not.
///
/// # Errors
/// [`MalformedResponse`] naming the path and the problem.
pub fn parse_response(bytes: &[u8]) -> Result<AgentResponse, MalformedResponse> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let parsed = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|err| malformed(bytes, err.path().to_string(), err.inner().to_string()))?;
    deserializer
        .end()
        .map_err(|err| malformed(bytes, ".".to_owned(), err.to_string()))?;
    Ok(parsed)
}

fn malformed(bytes: &[u8], path: String, message: String) -> MalformedResponse {
    let end = bytes.len().min(EXCERPT_BYTES);
    MalformedResponse {
        path,
        message,
        excerpt: String::from_utf8_lossy(&bytes[..end]).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_document_parses() {
        let response =
            parse_response(br#" {"request_id":"r1","status":"ERROR","error_message":"x"} "#)
                .expect("parses");
        assert_eq!(response.request_id, "r1");
    }

    #[test]
    fn garbage_is_reported_with_an_excerpt() {
        let err = parse_response(b"INFO starting up").expect_err("not JSON");
        assert_eq!(err.path, ".");
        assert!(err.message.contains("line 1 column 1"), "{}", err.message);
        assert_eq!(err.excerpt, "INFO starting up");
    }

    #[test]
    fn trailing_data_is_rejected() {
        let err = parse_response(br#"{"request_id":"r1","status":"TIMEOUT"} extra"#)
            .expect_err("trailing data");
        assert!(err.message.contains("trailing"), "{}", err.message);
    }

    #[test]
    fn the_path_names_the_bad_action() {
        let err = parse_response(
            br#"{"request_id":"r1","status":"SUCCESS","confidence_level":"HIGH",
                "actions":[{"type":"finish","output":1},{"type":"launch_rockets"}]}"#,
        )
        .expect_err("unknown action");
        assert_eq!(err.path, "actions[1].type");
        assert!(err.message.contains("launch_rockets"), "{}", err.message);
    }

    #[test]
    fn a_wrong_enum_value_names_the_field() {
        let err = parse_response(br#"{"request_id":"r1","status":"DONE"}"#)
            .expect_err("DONE is not a status");
        assert_eq!(err.path, "status");
        assert!(err.message.contains("DONE"), "{}", err.message);
    }

    #[test]
    fn excerpt_is_bounded() {
        let long = vec![b'x'; 10_000];
        let err = parse_response(&long).expect_err("not JSON");
        assert_eq!(err.excerpt.len(), EXCERPT_BYTES);
    }
}
