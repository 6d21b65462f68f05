//! Bearer tokens and their roles (docs/api.md#tokens-and-roles).
//!
//! `<data>/api/tokens.json` holds one entry per token: its name, role, when it was made and
//! the SHA-256 of the token (hex); never the token itself, which `docket token create`
//! prints once. The file is outside the log, like the signing key (`<data>/keys/`), and
//! mode 0600. With a PostgreSQL store the table `docket_api_tokens` holds the same, for
//! every server over the database ([`TokenStore`] chooses). The server reads the tokens on
//! every request, so a revoked token stops working at once, without a restart.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The folder of the API's own files in a data directory (tokens, request log).
pub const API_DIR: &str = "api";
/// The token file in [`API_DIR`].
pub const TOKENS_FILE: &str = "tokens.json";

/// What a token may do. Viewer reads; operator also starts, resumes and cancels runs and
/// flips kill switches; approver also decides tickets and overrides blocks; admin does
/// everything, the API's request log included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads runs, events, policies, kill switches, exports.
    Viewer,
    /// Starts, resumes and cancels runs; engages and releases kill switches.
    Operator,
    /// Approves, denies and answers tickets; overrides blocks.
    Approver,
    /// Everything.
    Admin,
}

impl Role {
    /// Every role, least first.
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Operator, Role::Approver, Role::Admin];

    /// The role's name, as `--role` takes it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Operator => "operator",
            Self::Approver => "approver",
            Self::Admin => "admin",
        }
    }

    /// Whether a token of this role may call a route that needs `needed`: viewer routes
    /// are open to every role, the others to their own role and admin.
    #[must_use]
    pub fn allows(self, needed: Role) -> bool {
        self == Role::Admin || needed == Role::Viewer || self == needed
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = TokenError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| TokenError::UnknownRole(s.to_owned()))
    }
}

/// One token as the file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenEntry {
    /// Its name: what `human.decided` and the request log record as who acted.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// SHA-256 of the token text, hex.
    pub sha256: String,
    /// When it was made, seconds since the Unix epoch.
    pub created_s: u64,
}

/// Who made a request: the name and role of its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's name.
    pub name: String,
    /// The token's role.
    pub role: Role,
}

/// Why a token cannot be made, listed, revoked or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// `--role` names no role.
    #[error("`{0}` is not a role (viewer, operator, approver or admin)")]
    UnknownRole(String),
    /// A name that cannot be recorded as who acted.
    #[error(
        "`{0}` cannot name a token: use letters, digits, '.', '_', '-' and '@' (1 to 64 characters)"
    )]
    BadName(String),
    /// `create` with a name in use.
    #[error("a token named `{0}` exists already (revoke it first: docket token revoke {0})")]
    Exists(String),
    /// `revoke` of a name not in the file.
    #[error("no token named `{name}` in {path}")]
    Unknown {
        /// The name.
        name: String,
        /// The token file.
        path: PathBuf,
    },
    /// The file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The token file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The file is not what `docket token` writes.
    #[error("{path} is not a token file docket wrote: {message}")]
    Corrupt {
        /// The token file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The operating system gave no random bytes.
    #[error("cannot make a token: no randomness from the operating system ({0})")]
    Random(String),
    /// `revoke` of a name the database does not hold.
    #[error("no token named `{name}` in PostgreSQL at {database}")]
    UnknownInDatabase {
        /// The name.
        name: String,
        /// The database, without its password.
        database: String,
    },
    /// A row of `docket_api_tokens` names no role (changed outside docket).
    #[error("PostgreSQL at {database}: token `{name}` has role `{role}`, which is not a role")]
    BadRole {
        /// The database, without its password.
        database: String,
        /// The token's name.
        name: String,
        /// What the row holds.
        role: String,
    },
    /// The database cannot be read or written.
    #[error(transparent)]
    Database(#[from] docket_store_postgres::PgError),
}

/// Where tokens are kept: the data directory's token file, or the database when the store
/// is PostgreSQL, so that every API server over one database accepts the same tokens
/// (docs/postgres.md, "Serving"). The one place that chooses; everything
/// that makes, lists, revokes or checks a token goes through it.
#[derive(Clone)]
pub enum TokenStore {
    /// `<data>/api/tokens.json`.
    File(PathBuf),
    /// `docket_api_tokens`.
    Database(docket_store_postgres::PostgresStore),
}

impl TokenStore {
    /// Where the tokens are, in messages.
    #[must_use]
    pub fn place(&self) -> String {
        match self {
            Self::File(data) => tokens_path(data).display().to_string(),
            Self::Database(pg) => format!("PostgreSQL at {}", pg.database()),
        }
    }

    /// Makes a token named `name` with `role` and returns its text (the only time it is
    /// seen); only its SHA-256 is kept.
    ///
    /// # Errors
    /// [`TokenError`]: a bad or taken name, the file or database unusable.
    pub async fn create(&self, name: &str, role: Role, now_s: u64) -> Result<String, TokenError> {
        match self {
            Self::File(data) => create(data, name, role, now_s),
            Self::Database(pg) => {
                check_name(name)?;
                let token = new_token()?;
                let row = docket_store_postgres::ApiTokenRow {
                    name: name.to_owned(),
                    role: role.as_str().to_owned(),
                    sha256: token_hash(&token),
                    created_s: now_s,
                };
                if pg.api_token_create(&row).await? {
                    Ok(token)
                } else {
                    Err(TokenError::Exists(name.to_owned()))
                }
            }
        }
    }

    /// Every token, by name (never the tokens themselves).
    ///
    /// # Errors
    /// [`TokenError`]: the file or database unreadable.
    pub async fn list(&self) -> Result<Vec<TokenEntry>, TokenError> {
        match self {
            Self::File(data) => list(data),
            Self::Database(pg) => pg
                .api_tokens()
                .await?
                .into_iter()
                .map(|row| entry(pg, row))
                .collect(),
        }
    }

    /// Removes the token named `name`: requests (and browser sessions) bearing it are
    /// refused from then on.
    ///
    /// # Errors
    /// [`TokenError::Unknown`] or [`TokenError::UnknownInDatabase`] when there is none.
    pub async fn revoke(&self, name: &str) -> Result<TokenEntry, TokenError> {
        match self {
            Self::File(data) => revoke(data, name),
            Self::Database(pg) => match pg.api_token_revoke(name).await? {
                Some(row) => entry(pg, row),
                None => Err(TokenError::UnknownInDatabase {
                    name: name.to_owned(),
                    database: pg.database().to_owned(),
                }),
            },
        }
    }

    /// The principal of the token whose SHA-256 is `hash`, if it is still kept.
    ///
    /// # Errors
    /// [`TokenError`]: the file or database unreadable.
    pub async fn authenticate_hash(&self, hash: &str) -> Result<Option<Principal>, TokenError> {
        match self {
            Self::File(data) => authenticate_hash(data, hash),
            Self::Database(pg) => match pg.api_token_by_hash(hash).await? {
                Some(row) => principal_of(pg, row).map(Some),
                None => Ok(None),
            },
        }
    }
}

/// The principal of a token row of the database.
pub(crate) fn principal_of(
    pg: &docket_store_postgres::PostgresStore,
    row: docket_store_postgres::ApiTokenRow,
) -> Result<Principal, TokenError> {
    let e = entry(pg, row)?;
    Ok(Principal {
        name: e.name,
        role: e.role,
    })
}

fn entry(
    pg: &docket_store_postgres::PostgresStore,
    row: docket_store_postgres::ApiTokenRow,
) -> Result<TokenEntry, TokenError> {
    let role = row.role.parse::<Role>().map_err(|_| TokenError::BadRole {
        database: pg.database().to_owned(),
        name: row.name.clone(),
        role: row.role.clone(),
    })?;
    Ok(TokenEntry {
        name: row.name,
        role,
        sha256: row.sha256,
        created_s: row.created_s,
    })
}

/// A new token's text: `dkt_` and 32 random bytes in hex.
fn new_token() -> Result<String, TokenError> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| TokenError::Random(e.to_string()))?;
    Ok(format!(
        "dkt_{}",
        secret
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    ))
}

/// The token file of the data directory `data`.
#[must_use]
pub fn tokens_path(data: &Path) -> PathBuf {
    data.join(API_DIR).join(TOKENS_FILE)
}

/// The tokens of `data` (none when it has no token file).
///
/// # Errors
/// [`TokenError::Io`] or [`TokenError::Corrupt`].
pub fn list(data: &Path) -> Result<Vec<TokenEntry>, TokenError> {
    let path = tokens_path(data);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(TokenError::Io { path, source }),
    };
    serde_json::from_str(&text).map_err(|e| TokenError::Corrupt {
        path,
        message: e.to_string(),
    })
}

fn save(data: &Path, entries: &[TokenEntry]) -> Result<(), TokenError> {
    let path = tokens_path(data);
    let io = |source| TokenError::Io {
        path: path.clone(),
        source,
    };
    let dir = data.join(API_DIR);
    std::fs::create_dir_all(&dir).map_err(io)?;
    let text = serde_json::to_string_pretty(entries).map_err(|e| TokenError::Corrupt {
        path: path.clone(),
        message: e.to_string(),
    })?;
    // Written aside and renamed: a reader sees the old file or the new one, whole.
    let tmp = dir.join(format!("{TOKENS_FILE}.tmp"));
    write_private(&tmp, text.as_bytes()).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)
}

fn check_name(name: &str) -> Result<(), TokenError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
    if ok {
        Ok(())
    } else {
        Err(TokenError::BadName(name.to_owned()))
    }
}

/// SHA-256 of a token, hex.
#[must_use]
pub fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Makes a token named `name` with `role`, records its hash, and returns the token (the
/// only time it is seen).
///
/// # Errors
/// [`TokenError`]: a bad or taken name, the file unreadable or unwritable.
pub fn create(data: &Path, name: &str, role: Role, now_s: u64) -> Result<String, TokenError> {
    check_name(name)?;
    let mut entries = list(data)?;
    if entries.iter().any(|e| e.name == name) {
        return Err(TokenError::Exists(name.to_owned()));
    }
    let token = new_token()?;
    entries.push(TokenEntry {
        name: name.to_owned(),
        role,
        sha256: token_hash(&token),
        created_s: now_s,
    });
    save(data, &entries)?;
    Ok(token)
}

/// Removes the token named `name`: requests bearing it are refused from then on.
///
/// # Errors
/// [`TokenError::Unknown`] when there is none; [`TokenError::Io`] and
/// [`TokenError::Corrupt`].
pub fn revoke(data: &Path, name: &str) -> Result<TokenEntry, TokenError> {
    let mut entries = list(data)?;
    let Some(at) = entries.iter().position(|e| e.name == name) else {
        return Err(TokenError::Unknown {
            name: name.to_owned(),
            path: tokens_path(data),
        });
    };
    let removed = entries.remove(at);
    save(data, &entries)?;
    Ok(removed)
}

/// The principal a bearer token stands for, if the file has it.
///
/// # Errors
/// [`TokenError::Io`] and [`TokenError::Corrupt`].
pub fn authenticate(data: &Path, token: &str) -> Result<Option<Principal>, TokenError> {
    authenticate_hash(data, &token_hash(token))
}

/// The principal of the token whose SHA-256 is `hash` (a browser session keeps the hash,
/// never the token), if the file still has it.
///
/// # Errors
/// [`TokenError::Io`] and [`TokenError::Corrupt`].
pub fn authenticate_hash(data: &Path, hash: &str) -> Result<Option<Principal>, TokenError> {
    Ok(list(data)?
        .into_iter()
        .find(|e| constant_time_eq(e.sha256.as_bytes(), hash.as_bytes()))
        .map(|e| Principal {
            name: e.name,
            role: e.role,
        }))
}

/// Compares without stopping at the first difference (the hashes are public-length hex).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_stored_hashed_and_stops_working_when_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let token = create(dir.path(), "ana", Role::Approver, 1).unwrap();
        let file = std::fs::read_to_string(tokens_path(dir.path())).unwrap();
        assert!(!file.contains(&token), "the token itself is never stored");
        assert!(file.contains(&token_hash(&token)));
        let who = authenticate(dir.path(), &token).unwrap().unwrap();
        assert_eq!((who.name.as_str(), who.role), ("ana", Role::Approver));
        assert!(authenticate(dir.path(), "dkt_0").unwrap().is_none());
        assert!(matches!(
            create(dir.path(), "ana", Role::Viewer, 2),
            Err(TokenError::Exists(_))
        ));
        revoke(dir.path(), "ana").unwrap();
        assert!(authenticate(dir.path(), &token).unwrap().is_none());
        assert!(matches!(
            revoke(dir.path(), "ana"),
            Err(TokenError::Unknown { .. })
        ));
        assert!(matches!(
            create(dir.path(), "a b", Role::Viewer, 2),
            Err(TokenError::BadName(_))
        ));
    }

    #[test]
    fn roles_allow_what_the_docs_say() {
        use Role::*;
        let table = [
            (Viewer, [true, false, false, false]),
            (Operator, [true, true, false, false]),
            (Approver, [true, false, true, false]),
            (Admin, [true, true, true, true]),
        ];
        for (role, allowed) in table {
            for (needed, ok) in Role::ALL.into_iter().zip(allowed) {
                assert_eq!(role.allows(needed), ok, "{role} on a {needed} route");
            }
        }
    }
}
