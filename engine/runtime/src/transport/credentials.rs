//! What an HTTP executor sends besides the document: a bearer token and headers whose
//! values are read from environment variables when each request is made. The workflow
//! (recorded in the run's log) names the variables; their values are never recorded,
//! logged, traced or printed: they live in a [`Secret`] and in header values marked
//! sensitive, and no error quotes them.

use std::fmt;
use std::path::{Path, PathBuf};

use hyper::header::{AUTHORIZATION, HeaderName, HeaderValue};

/// How an HTTP executor reaches its endpoint beyond the URL: the CA file its server
/// certificate may be signed by, and the credentials it sends, by the names of the
/// environment variables holding them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpOptions {
    ca_file: Option<PathBuf>,
    bearer_env: Option<String>,
    headers_env: Vec<(String, String)>,
}

impl HttpOptions {
    /// No CA file besides the system's roots, no credentials.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts the certificates of the PEM file `path` as roots, besides the system's
    /// (`https://` URLs only).
    #[must_use]
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// Sends `Authorization: Bearer VALUE`, VALUE being environment variable `variable`'s
    /// when each request is made.
    #[must_use]
    pub fn bearer_env(mut self, variable: impl Into<String>) -> Self {
        self.bearer_env = Some(variable.into());
        self
    }

    /// Sends header `name` with environment variable `variable`'s value, read when each
    /// request is made.
    #[must_use]
    pub fn header_env(mut self, name: impl Into<String>, variable: impl Into<String>) -> Self {
        self.headers_env.push((name.into(), variable.into()));
        self
    }

    /// The options of a workflow section's `ca_file`, `bearer_env` and `headers_env`.
    pub(crate) fn from_section(
        ca_file: Option<&str>,
        bearer_env: Option<&str>,
        headers_env: &std::collections::BTreeMap<String, String>,
    ) -> Self {
        Self {
            ca_file: ca_file.map(PathBuf::from),
            bearer_env: bearer_env.map(str::to_owned),
            headers_env: headers_env
                .iter()
                .map(|(name, variable)| (name.clone(), variable.clone()))
                .collect(),
        }
    }

    /// The CA file, if one is configured.
    pub(crate) fn ca_file_path(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    /// Whether requests carry credentials.
    pub(crate) fn sends_credentials(&self) -> bool {
        self.bearer_env.is_some() || !self.headers_env.is_empty()
    }

    /// The credentials, their header names checked.
    pub(crate) fn credentials(&self) -> Result<Credentials, InvalidHeaderName> {
        let mut headers = Vec::with_capacity(self.headers_env.len());
        for (name, variable) in &self.headers_env {
            let header =
                HeaderName::from_bytes(name.as_bytes()).map_err(|source| InvalidHeaderName {
                    name: name.clone(),
                    source,
                })?;
            headers.push((header, variable.clone()));
        }
        Ok(Credentials {
            bearer_env: self.bearer_env.clone(),
            headers_env: headers,
        })
    }
}

/// A header name in `headers_env` that HTTP does not allow.
#[derive(Debug, thiserror::Error)]
#[error("`headers_env` names {name:?}, which is not an HTTP header name")]
pub struct InvalidHeaderName {
    /// The name as given.
    pub name: String,
    /// Why.
    #[source]
    pub source: hyper::header::InvalidHeaderName,
}

/// The credentials of an executor, by the variables holding them.
#[derive(Debug, Default)]
pub(crate) struct Credentials {
    bearer_env: Option<String>,
    headers_env: Vec<(HeaderName, String)>,
}

impl Credentials {
    /// The headers to send, their values read from the environment now and marked
    /// sensitive.
    ///
    /// # Errors
    /// [`CredentialError`] naming the variable that is unset, empty or unusable.
    pub(crate) fn headers(&self) -> Result<Vec<(HeaderName, HeaderValue)>, CredentialError> {
        let mut headers = Vec::with_capacity(self.headers_env.len() + 1);
        if let Some(variable) = &self.bearer_env {
            let token = Secret::from_env(variable, "bearer_env")?;
            let value = token.header_value("Bearer ", variable, "bearer_env")?;
            headers.push((AUTHORIZATION, value));
        }
        for (name, variable) in &self.headers_env {
            let setting = format!("headers_env.{name}");
            let secret = Secret::from_env(variable, &setting)?;
            headers.push((name.clone(), secret.header_value("", variable, &setting)?));
        }
        Ok(headers)
    }
}

/// A credential read from the environment. Its `Debug` prints `<redacted>`; it has no
/// `Display`.
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Secret {
    /// Environment variable `variable`'s value (named by `setting` in errors).
    fn from_env(variable: &str, setting: &str) -> Result<Self, CredentialError> {
        match std::env::var(variable) {
            Ok(value) if !value.is_empty() => Ok(Self(value)),
            Ok(_) | Err(std::env::VarError::NotPresent) => Err(CredentialError::Unset {
                variable: variable.to_owned(),
                setting: setting.to_owned(),
            }),
            // The value itself (which the error carries) is dropped here.
            Err(std::env::VarError::NotUnicode(_)) => Err(CredentialError::NotUnicode {
                variable: variable.to_owned(),
                setting: setting.to_owned(),
            }),
        }
    }

    /// `prefix` and the secret as a header value marked sensitive.
    fn header_value(
        &self,
        prefix: &str,
        variable: &str,
        setting: &str,
    ) -> Result<HeaderValue, CredentialError> {
        let mut value = HeaderValue::try_from(format!("{prefix}{}", self.0)).map_err(|source| {
            CredentialError::NotAHeaderValue {
                variable: variable.to_owned(),
                setting: setting.to_owned(),
                source,
            }
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// A credential that could not be read from the environment when a request was made.
/// Errors name the variable and the workflow setting naming it, never the value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    /// The variable is not set, or is empty.
    #[error("environment variable {variable} (named by `{setting}`) is not set or is empty")]
    Unset {
        /// The variable.
        variable: String,
        /// The setting naming it: `bearer_env`, `headers_env.X-Api-Key`.
        setting: String,
    },
    /// The variable's value is not Unicode.
    #[error("environment variable {variable} (named by `{setting}`) is not valid Unicode")]
    NotUnicode {
        /// The variable.
        variable: String,
        /// The setting naming it.
        setting: String,
    },
    /// The variable's value cannot be an HTTP header's (a control character, a line
    /// break).
    #[error(
        "environment variable {variable} (named by `{setting}`) holds characters an HTTP \
         header cannot carry"
    )]
    NotAHeaderValue {
        /// The variable.
        variable: String,
        /// The setting naming it.
        setting: String,
        /// Why (the value is not in it).
        #[source]
        source: hyper::header::InvalidHeaderValue,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints_its_value() {
        let secret = Secret("s3cr3t-token".to_owned());
        assert_eq!(format!("{secret:?}"), "<redacted>");
        let value = secret
            .header_value("Bearer ", "VAR", "bearer_env")
            .expect("a header value");
        assert!(!format!("{value:?}").contains("s3cr3t"));
    }

    #[test]
    fn a_missing_variable_is_named_and_an_invalid_header_name_refused() {
        let credentials = HttpOptions::new()
            .bearer_env("DOCKET_TEST_SURELY_UNSET_TOKEN_VARIABLE")
            .credentials()
            .expect("no header names");
        let err = credentials.headers().expect_err("unset");
        assert_eq!(
            err.to_string(),
            "environment variable DOCKET_TEST_SURELY_UNSET_TOKEN_VARIABLE (named by \
             `bearer_env`) is not set or is empty"
        );
        assert!(
            HttpOptions::new()
                .header_env("X Api Key", "V")
                .credentials()
                .is_err()
        );
    }
}
