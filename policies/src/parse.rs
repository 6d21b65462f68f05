//! From text to a [`PolicyBundle`]: parse TOML or JSON, validate, and locate every
//! problem at a line and column of the source. No I/O: the caller hands in the text and a
//! name for it (usually its path); `load` reads files.

use crate::compiled::PolicyBundle;
use crate::error::{BundleError, Diagnostic, DiagnosticCode};
use crate::locate;
use crate::model::BundleSpec;

/// The two spellings of a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

impl Format {
    /// The format a file name's extension names, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".toml") {
            Some(Self::Toml)
        } else if lower.ends_with(".json") {
            Some(Self::Json)
        } else {
            None
        }
    }
}

/// Parses the text into the bundle model (shape only; no semantic checks).
pub fn parse_spec(src: &str, source_name: &str, format: Format) -> Result<BundleSpec, BundleError> {
    let diag = |line, column, code, message: String| Diagnostic {
        source: source_name.to_owned(),
        line,
        column,
        pointer: String::new(),
        code,
        message,
    };
    match format {
        Format::Toml => toml::from_str(src).map_err(|e| {
            let (line, column) = e.span().map_or((1, 1), |s| locate::line_col(src, s.start));
            let code = if toml::de::DeTable::parse(src).is_err() {
                DiagnosticCode::Syntax
            } else {
                DiagnosticCode::Shape
            };
            BundleError::Parse(diag(line, column, code, e.message().trim().to_owned()))
        }),
        Format::Json => serde_json::from_str(src).map_err(|e| {
            let code = if e.classify() == serde_json::error::Category::Data {
                DiagnosticCode::Shape
            } else {
                DiagnosticCode::Syntax
            };
            let full = e.to_string();
            let message = full
                .rsplit_once(" at line ")
                .map_or(full.as_str(), |(m, _)| m)
                .to_owned();
            BundleError::Parse(diag(e.line().max(1), e.column().max(1), code, message))
        }),
    }
}

/// Parses, validates and compiles a bundle; errors carry `source_name:line:column`.
pub fn parse(src: &str, source_name: &str, format: Format) -> Result<PolicyBundle, BundleError> {
    let spec = parse_spec(src, source_name, format)?;
    PolicyBundle::from_spec(spec).map_err(|issues| {
        // The source is read once for every problem: its lines, and for TOML its spans.
        let lines = locate::Lines::new(src);
        let toml = match format {
            Format::Toml => toml::de::DeTable::parse(src).ok(),
            Format::Json => None,
        };
        let mut more = None;
        let mut located: Vec<Diagnostic> = Vec::with_capacity(issues.len());
        for i in issues {
            let (line, column) = if i.code == DiagnosticCode::MoreProblems {
                (0, 0)
            } else {
                let offset = match &toml {
                    Some(doc) => locate::toml_offset_in(doc, &i.pointer),
                    None if format == Format::Json => locate::json_offset(src, &i.pointer),
                    None => 0,
                };
                lines.line_col(offset)
            };
            let d = Diagnostic {
                source: source_name.to_owned(),
                line,
                column,
                pointer: i.pointer.to_string(),
                code: i.code,
                message: i.message,
            };
            if d.code == DiagnosticCode::MoreProblems {
                more = Some(d);
            } else {
                located.push(d);
            }
        }
        located.sort_by_key(|d| (d.line, d.column));
        // How many more were found comes last, after those listed.
        located.extend(more);
        BundleError::Invalid(located)
    })
}

impl PolicyBundle {
    /// Parses a TOML bundle; `source_name` names it in error messages.
    pub fn from_toml_str(src: &str, source_name: &str) -> Result<Self, BundleError> {
        parse(src, source_name, Format::Toml)
    }

    /// Parses a JSON bundle; `source_name` names it in error messages.
    pub fn from_json_str(src: &str, source_name: &str) -> Result<Self, BundleError> {
        parse(src, source_name, Format::Json)
    }
}
