//! Shared support for docket's integration tests.
//!
//! The tests themselves live in `tests/tests/*.rs`, one file per capability, and use
//! only the public API of the docket crates and the `docket` binary.

use std::path::PathBuf;

/// The workspace's root directory.
#[must_use]
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The code block that follows the marker `<!-- example: NAME -->` in a Markdown text, so
/// tests can check that documented examples are real.
#[must_use]
pub fn doc_example(markdown: &str, name: &str) -> Option<String> {
    let marker = format!("<!-- example: {name} -->");
    let after_marker = &markdown[markdown.find(&marker)? + marker.len()..];
    let fence_start = after_marker.find("```")?;
    let after_fence = &after_marker[fence_start + 3..];
    let body_start = after_fence.find('\n')? + 1;
    let body = &after_fence[body_start..];
    let body_end = body.find("```")?;
    Some(body[..body_end].to_owned())
}

/// `docs/agent-protocol.md`.
#[must_use]
pub fn agent_protocol_doc() -> String {
    std::fs::read_to_string(workspace_root().join("docs/agent-protocol.md")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_block_after_its_marker() {
        let text = "intro\n<!-- example: a -->\n```json\n{\"x\": 1}\n```\n<!-- example: b -->\n```\nB\n```\n";
        assert_eq!(doc_example(text, "a").as_deref(), Some("{\"x\": 1}\n"));
        assert_eq!(doc_example(text, "b").as_deref(), Some("B\n"));
        assert_eq!(doc_example(text, "c"), None);
    }
}
