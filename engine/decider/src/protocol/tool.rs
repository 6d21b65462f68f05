//! Governed tools (docs/agent-protocol.md#tools-call_tool, docs/workflow.md#tools): how a
//! workflow declares a tool's executor (`[tools.NAME]`), the text a call is matched
//! against the bundle's tool patterns with, and the check of a tool executor's answer
//! against its call (the request and answer themselves are `docket_protocol`'s).
//!
//! A tool is reached by `name`: the section `[tools.NAME]`, or, for a section fronting an
//! MCP server (`mcp = "program"`), `SECTION:TOOL`, the server's tool `TOOL`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use docket_protocol::{ToolAnswer, ToolRequest};

/// The default time one tool call may take when `[tools.NAME]` gives no `timeout_ms`.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 30_000;

/// One `[tools.NAME]` section: exactly one of `command` (a program speaking the tool
/// protocol as JSON lines), `http`, `in_process = true` or `mcp` (a program that is an MCP
/// server over stdio); `args` and `env` go with `command` and `mcp`. Flat, so a misspelt
/// key is rejected by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// A program answering tool calls as JSON lines on stdin/stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// A program that is an MCP server speaking over its stdin/stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<String>,
    /// Arguments of `command` or `mcp`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra environment variables of `command` or `mcp`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// An HTTP endpoint (`http://host:port/path`) every call is POSTed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// `true`: an executor registered in code with the runtime (embedding, tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_process: Option<bool>,
    /// How long one call may take; default 30 000 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// A PEM file of CA certificates trusted, besides the system's roots, for an
    /// `https://` `http` endpoint; relative to the workflow file (made absolute when
    /// loaded). Left out of the record when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// The environment variable whose value the `http` endpoint is sent as a bearer token
    /// (`Authorization: Bearer VALUE`), read when each request is made: the name is
    /// recorded, the value never. Left out of the record when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_env: Option<String>,
    /// Headers sent to the `http` endpoint, by header name, each naming the environment
    /// variable its value is read from when each request is made (the names are recorded,
    /// the values never). Left out of the record when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers_env: BTreeMap<String, String>,
    /// The tool changes nothing (or doing it twice is the same as once): a call found
    /// started without a recorded result when a run resumes is run again. Otherwise the
    /// asking agent is told it failed (`TOOL_INTERRUPTED`). Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

impl ToolSpec {
    /// The call timeout in force.
    #[must_use]
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_TOOL_TIMEOUT_MS)
    }

    /// What is wrong with the section, if anything.
    pub(crate) fn problem(&self) -> Option<String> {
        let declared = [
            self.command.is_some(),
            self.mcp.is_some(),
            self.http.is_some(),
            self.in_process.is_some(),
        ]
        .into_iter()
        .filter(|d| *d)
        .count();
        if declared != 1 {
            return Some(format!(
                "needs exactly one of `command`, `mcp`, `http` or `in_process = true` ({declared} given)"
            ));
        }
        if self.command.as_deref() == Some("") || self.mcp.as_deref() == Some("") {
            return Some("the program is empty".to_owned());
        }
        if self.in_process == Some(false) {
            return Some(
                "`in_process` must be true (or give `command`, `mcp` or `http`)".to_owned(),
            );
        }
        if (self.http.is_some() || self.in_process.is_some())
            && (!self.args.is_empty() || !self.env.is_empty())
        {
            return Some("`args` and `env` go with `command` or `mcp` only".to_owned());
        }
        if let Some(problem) = crate::events::workflow::http_problem(
            self.http.as_deref(),
            self.ca_file.as_deref(),
            self.bearer_env.as_deref(),
            &self.headers_env,
        ) {
            return Some(problem);
        }
        if self.timeout_ms == Some(0) {
            return Some("`timeout_ms` must be positive".to_owned());
        }
        None
    }
}

/// Which section serves the tool `name`, and the name its executor knows it by: the
/// section `[tools.NAME]` itself, else `SECTION:TOOL` for an `mcp` section (the server's
/// tool `TOOL`). `None` when no section serves it.
#[must_use]
pub fn resolve_tool<'a>(
    tools: &'a BTreeMap<String, ToolSpec>,
    name: &'a str,
) -> Option<(&'a str, &'a ToolSpec, &'a str)> {
    if let Some((section, spec)) = tools.get_key_value(name) {
        return Some((section, spec, name));
    }
    let (section, tool) = name.split_once(':')?;
    let (section, spec) = tools.get_key_value(section)?;
    (spec.mcp.is_some() && !tool.is_empty()).then_some((section.as_str(), spec, tool))
}

/// The text a call is matched against tool patterns with: `name(ARGUMENTS)`, where
/// ARGUMENTS is the string itself when `arguments` is a JSON string, nothing when it is
/// null, and otherwise its JSON text with keys sorted and no whitespace (so
/// `fs:write_file(*"path":"/etc/*)` matches a write under `/etc`).
#[must_use]
pub fn tool_invocation(name: &str, arguments: &Value) -> String {
    let text = match arguments {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => docket_policies::canonical_json_text(other),
    };
    format!("{name}({text})")
}

/// Why an answer is not a usable answer to a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolAnswerError {
    /// Not a JSON answer of the protocol's shape (the message names where).
    #[error("{0}")]
    Malformed(String),
    /// The tool's own error answer.
    #[error("{code}: {message}")]
    Refused {
        /// Its code.
        code: String,
        /// Its message.
        message: String,
    },
}

/// Checks an answer's bytes against the call: the tool's result, or why not.
///
/// # Errors
/// [`ToolAnswerError`]: malformed (naming the JSON path or the mismatch), or the tool's
/// own error.
pub fn accept_tool_answer(request: &ToolRequest, bytes: &[u8]) -> Result<Value, ToolAnswerError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let answer: ToolAnswer = serde_path_to_error::deserialize(de).map_err(|e| {
        ToolAnswerError::Malformed(format!(
            "answer is not a tool answer at `{}`: {}",
            e.path(),
            e.inner()
        ))
    })?;
    if answer.tool_call_id != request.tool_call_id {
        return Err(ToolAnswerError::Malformed(format!(
            "answer is for tool call {:?}, expected {:?}",
            answer.tool_call_id.as_str(),
            request.tool_call_id.as_str()
        )));
    }
    match (answer.result, answer.error) {
        (Some(result), None) => Ok(result),
        (None, Some(e)) => Err(ToolAnswerError::Refused {
            code: e.code,
            message: e.message,
        }),
        (Some(_), Some(_)) => Err(ToolAnswerError::Malformed(
            "answer has both `result` and `error`".to_owned(),
        )),
        (None, None) => Err(ToolAnswerError::Malformed(
            "answer has neither `result` nor `error`".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request() -> ToolRequest {
        ToolRequest {
            run_id: "run-1".into(),
            episode_id: "ep-1".into(),
            tool_call_id: "run-1/tool-1".into(),
            agent: "worker".into(),
            tool: "search".into(),
            arguments: json!({"q": "x"}),
            timeout_ms: 100,
        }
    }

    #[test]
    fn invocations_are_the_text_patterns_match() {
        assert_eq!(
            tool_invocation("Bash", &json!("rm -rf /")),
            "Bash(rm -rf /)"
        );
        assert_eq!(tool_invocation("t", &Value::Null), "t()");
        assert_eq!(
            tool_invocation("fs:write", &json!({"z": 1, "path": "/etc/x"})),
            r#"fs:write({"path":"/etc/x","z":1})"#
        );
    }

    #[test]
    fn names_resolve_to_a_section_or_an_mcp_servers_tool() {
        let mut tools = BTreeMap::new();
        tools.insert(
            "search".to_owned(),
            ToolSpec {
                command: Some("s".into()),
                ..ToolSpec::default()
            },
        );
        tools.insert(
            "fs".to_owned(),
            ToolSpec {
                mcp: Some("m".into()),
                ..ToolSpec::default()
            },
        );
        assert_eq!(
            resolve_tool(&tools, "search").map(|r| (r.0, r.2)),
            Some(("search", "search"))
        );
        assert_eq!(
            resolve_tool(&tools, "fs:read").map(|r| (r.0, r.2)),
            Some(("fs", "read"))
        );
        assert!(
            resolve_tool(&tools, "search:x").is_none(),
            "only mcp sections have tools"
        );
        assert!(resolve_tool(&tools, "fs:").is_none());
        assert!(resolve_tool(&tools, "other").is_none());
    }

    #[test]
    fn answers_are_checked_against_the_call() {
        let r = request();
        assert_eq!(
            accept_tool_answer(&r, br#"{"tool_call_id":"run-1/tool-1","result":{"n":1}}"#),
            Ok(json!({"n": 1}))
        );
        assert!(matches!(
            accept_tool_answer(&r, br#"{"tool_call_id":"run-1/tool-1","error":{"code":"NOPE","message":"m"}}"#),
            Err(ToolAnswerError::Refused { code, .. }) if code == "NOPE"
        ));
        for bad in [
            &br#"{"tool_call_id":"run-1/tool-2","result":1}"#[..],
            br#"{"tool_call_id":"run-1/tool-1"}"#,
            br#"{"tool_call_id":"run-1/tool-1","result":1,"extra":2}"#,
            b"not json",
        ] {
            assert!(matches!(
                accept_tool_answer(&r, bad),
                Err(ToolAnswerError::Malformed(_))
            ));
        }
    }
}
