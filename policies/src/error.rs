//! Errors a bundle can have, each with the file, line and column it comes from.

use std::fmt;

use serde::Serialize;

/// What kind of mistake a diagnostic reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DiagnosticCode {
    /// The text is not valid TOML or JSON.
    Syntax,
    /// A field is missing, unknown or of the wrong type.
    Shape,
    /// An agent, domain, output type or capability that the bundle does not declare.
    UnknownReference,
    /// Two things share an id (or a pair that must be unique).
    Duplicate,
    /// Two rules that cannot both hold.
    Contradiction,
    /// A value above a maximum no bundle may raise.
    HardMaximumExceeded,
    /// An allowed edge that the declared flow order forbids.
    FlowForbidsEdge,
    /// A field path that no payload of the declared output type can contain.
    ImpossibleFieldPath,
    /// A malformed field path, tool pattern or JSON Schema, or an out-of-range value.
    InvalidValue,
    /// How many problems were found beyond those listed.
    MoreProblems,
}

impl fmt::Display for DiagnosticCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Self::Syntax => "syntax error",
            Self::Shape => "wrong shape",
            Self::UnknownReference => "unknown reference",
            Self::Duplicate => "duplicate",
            Self::Contradiction => "contradictory rules",
            Self::HardMaximumExceeded => "hard maximum exceeded",
            Self::FlowForbidsEdge => "flow order forbids edge",
            Self::ImpossibleFieldPath => "impossible field path",
            Self::InvalidValue => "invalid value",
            Self::MoreProblems => "more problems",
        };
        f.write_str(s)
    }
}

/// One problem, located in its source text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The name the caller gave the source (usually its path).
    pub source: String,
    /// 1-based line; 0 when the bundle was built in memory and has no text.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// JSON pointer to the offending value (`/interactions/allowed/2/to`).
    pub pointer: String,
    pub code: DiagnosticCode,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {}",
            self.source, self.line, self.column, self.code, self.message
        )?;
        if !self.pointer.is_empty() {
            write!(f, " (at {})", self.pointer)?;
        }
        Ok(())
    }
}

/// Why a bundle could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// The text could not be parsed or does not have the bundle's shape.
    #[error("{0}")]
    Parse(Diagnostic),
    /// The bundle parsed but breaks one or more rules; every problem found is listed.
    #[error("{}", join(.0))]
    Invalid(Vec<Diagnostic>),
    /// The file name does not say whether it is TOML or JSON.
    #[error("{path}: unknown bundle format (expected a .toml or .json file)")]
    UnknownFormat { path: String },
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl BundleError {
    /// Every diagnostic this error carries (none for I/O and format errors).
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        match self {
            Self::Parse(d) => vec![d.clone()],
            Self::Invalid(ds) => ds.clone(),
            Self::UnknownFormat { .. } | Self::Io { .. } => Vec::new(),
        }
    }
}

fn join(ds: &[Diagnostic]) -> String {
    ds.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}
