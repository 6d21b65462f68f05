//! Tool-call patterns (docs/governance.md#tools): `Read`, `Bash(git *)`, `Bash(rm -rf *)`.
//! A pattern without parentheses matches every call of that tool; the part in parentheses
//! is an anchored glob where `*` matches any run of characters.

/// A parsed pattern or tool call: the tool's name and its optional argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPattern {
    pub tool: String,
    pub argument: Option<String>,
}

impl ToolPattern {
    /// Parses `Tool` or `Tool(argument)`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (tool, argument) = match text.find('(') {
            None => (text, None),
            Some(open) => {
                let Some(inner) = text.get(open + 1..).and_then(|r| r.strip_suffix(')')) else {
                    return Err(format!(
                        "tool pattern `{text}` opens `(` but does not end with `)`"
                    ));
                };
                (text.get(..open).unwrap_or_default(), Some(inner.to_owned()))
            }
        };
        if tool.is_empty()
            || !tool
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == ':' || c == '*')
        {
            return Err(format!(
                "tool pattern `{text}` needs a tool name of letters, digits, `_`, `-` or `:`"
            ));
        }
        Ok(Self {
            tool: tool.to_owned(),
            argument,
        })
    }

    /// Whether this pattern covers `call` (itself parsed with [`ToolPattern::parse`]).
    pub fn matches(&self, call: &ToolPattern) -> bool {
        if !glob(&self.tool, &call.tool) {
            return false;
        }
        match (&self.argument, &call.argument) {
            (None, _) => true,
            (Some(p), Some(a)) => glob(p, a),
            (Some(p), None) => glob(p, ""),
        }
    }
}

/// Anchored glob where `*` matches any (possibly empty) run of characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, c: &str) -> bool {
        ToolPattern::parse(p)
            .unwrap()
            .matches(&ToolPattern::parse(c).unwrap())
    }

    #[test]
    fn rm_rf_pattern_matches_only_rm_rf() {
        assert!(m("Bash(rm -rf *)", "Bash(rm -rf /)"));
        assert!(m("Bash(rm -rf *)", "Bash(rm -rf build/ target/)"));
        assert!(!m("Bash(rm -rf *)", "Bash(rm -r build)"));
        assert!(!m("Bash(rm -rf *)", "Read(rm -rf x)"));
        assert!(m("Bash", "Bash(ls)"));
        assert!(m("Bash(git *)", "Bash(git status)"));
        assert!(!m("Bash(git *)", "Bash(gitk)"));
    }

    #[test]
    fn malformed_patterns_are_rejected() {
        assert!(ToolPattern::parse("Bash(rm").is_err());
        assert!(ToolPattern::parse("(x)").is_err());
        assert!(ToolPattern::parse("").is_err());
    }
}
