//! Reaching the database: the URL (with what libpq users write for TLS, `sslrootcert` and
//! `sslmode=verify-ca|verify-full`, understood here, and docket's `statement_timeout`) and
//! TLS through rustls (docs/postgres.md, "TLS"). When TLS is used the server's certificate
//! is always checked against the system's roots and the URL's `sslrootcert`, and must name
//! the host.

use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{Client, Connection, NoTls, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::PgError;

/// How connections are made.
#[derive(Clone)]
pub(crate) enum Tls {
    Off,
    On(MakeRustlsConnect),
}

/// The database a URL names: the driver's configuration, how connections are secured,
/// and its name for messages (never the password).
#[derive(Clone)]
pub(crate) struct Target {
    pub config: tokio_postgres::Config,
    pub tls: Tls,
    pub database: String,
}

/// How long a statement may run when the URL does not say (`statement_timeout`): long
/// enough for any statement docket sends on a sound database, short enough that a lock
/// held by someone else or a stalled server ends in an error naming the setting instead
/// of a command that hangs.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Parses `url`.
pub(crate) fn parse(url: &str) -> Result<Target, PgError> {
    let (url, ca_file, verify, timeout) = libpq_options(url);
    let timeout = match timeout {
        None => DEFAULT_STATEMENT_TIMEOUT,
        Some(text) => statement_timeout(&text)?,
    };
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e: tokio_postgres::Error| PgError::BadUrl { why: e.to_string() })?;
    add_option(
        &mut config,
        &format!("-c statement_timeout={}", timeout.as_millis()),
    );
    let database = name(&config);
    let tls_asked = verify || ca_file.is_some() || config.get_ssl_mode() == SslMode::Require;
    let tls = if tls_asked {
        config.ssl_mode(SslMode::Require);
        let client =
            docket_tls::client_config(ca_file.as_deref()).map_err(|source| PgError::Tls {
                database: database.clone(),
                source,
            })?;
        Tls::On(MakeRustlsConnect::new(client))
    } else {
        // A password over a network in the clear is refused unless asked for by name.
        let remote = config.get_hosts().iter().any(|h| match h {
            Host::Tcp(host) => !is_loopback(host),
            Host::Unix(_) => false,
        });
        let explicit = config.get_ssl_mode() == SslMode::Disable;
        if remote && config.get_password().is_some() && !explicit {
            return Err(PgError::PlainPassword { database });
        }
        config.ssl_mode(SslMode::Disable);
        Tls::Off
    };
    Ok(Target {
        config,
        tls,
        database,
    })
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Adds a server option (`-c NAME=VALUE`) to those the URL gave (`options=`).
pub(crate) fn add_option(config: &mut tokio_postgres::Config, option: &str) {
    let options = match config.get_options() {
        Some(given) if !given.trim().is_empty() => format!("{given} {option}"),
        _ => option.to_owned(),
    };
    config.options(&options);
}

/// `statement_timeout=` of the URL: milliseconds, or a number with `ms`, `s` or `min`
/// (`0` turns the timeout off, as in PostgreSQL).
fn statement_timeout(text: &str) -> Result<Duration, PgError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let millis = match (number.parse::<u64>(), unit.trim()) {
        (Ok(n), "" | "ms") => Some(n),
        (Ok(n), "s") => n.checked_mul(1000),
        (Ok(n), "min") => n.checked_mul(60_000),
        _ => None,
    };
    // PostgreSQL takes at most i32::MAX milliseconds.
    match millis.filter(|&ms| ms <= i32::MAX as u64) {
        Some(ms) => Ok(Duration::from_millis(ms)),
        None => Err(PgError::BadUrl {
            why: format!(
                "statement_timeout={text} is not a duration: give milliseconds, or a number with ms, s or min (0 for none)"
            ),
        }),
    }
}

/// The URL without the options the driver does not know: `sslrootcert`'s file, whether
/// `sslmode` asked to verify (`verify-ca`, `verify-full`: rustls always verifies both),
/// and docket's `statement_timeout`.
fn libpq_options(url: &str) -> (String, Option<PathBuf>, bool, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None, false, None);
    };
    let (mut kept, mut ca, mut verify, mut timeout) = (Vec::new(), None, false, None);
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslrootcert", path)) => ca = Some(PathBuf::from(percent_decoded(path))),
            Some(("sslmode", "verify-ca" | "verify-full")) => verify = true,
            Some(("statement_timeout", value)) => timeout = Some(percent_decoded(value)),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, ca, verify, timeout)
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push(
                    u8::try_from(hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)).unwrap_or(b'?'),
                );
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How messages name the database: `postgres://USER@HOST:PORT/DATABASE`.
fn name(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{}:{port}/{}",
        config.get_user().unwrap_or(""),
        if hosts.is_empty() {
            "localhost".to_owned()
        } else {
            hosts.join(",")
        },
        config.get_dbname().or(config.get_user()).unwrap_or("")
    )
}

impl Target {
    /// A connection whose driver runs on its own task until the client is dropped.
    pub(crate) async fn connect(&self) -> Result<Client, tokio_postgres::Error> {
        match &self.tls {
            Tls::Off => spawned(self.config.connect(NoTls).await?),
            Tls::On(tls) => spawned(self.config.connect(tls.clone()).await?),
        }
    }
}

fn spawned<T>(
    (client, connection): (Client, Connection<Socket, T>),
) -> Result<Client, tokio_postgres::Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "a PostgreSQL connection ended");
        }
    });
    Ok(client)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{DEFAULT_STATEMENT_TIMEOUT, parse, statement_timeout};

    #[test]
    fn the_statement_timeout_is_read_from_the_url_and_sent_to_the_server() {
        let options = |url: &str| {
            parse(url)
                .map(|t| t.config.get_options().map(str::to_owned))
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            options("postgres://ana@%2Ftmp/ledger"),
            Ok(Some(format!(
                "-c statement_timeout={}",
                DEFAULT_STATEMENT_TIMEOUT.as_millis()
            )))
        );
        assert_eq!(
            options(
                "postgres://ana@%2Ftmp/ledger?statement_timeout=250ms&options=-c%20work_mem%3D8MB"
            ),
            Ok(Some("-c work_mem=8MB -c statement_timeout=250".to_owned()))
        );
        assert_eq!(
            statement_timeout("2min").ok(),
            Some(Duration::from_secs(120))
        );
        assert_eq!(statement_timeout("0").ok(), Some(Duration::ZERO));
        assert_eq!(
            options("postgres://ana:hunter2@%2Ftmp/ledger?statement_timeout=soon"),
            Err("the store URL is not a PostgreSQL connection string (statement_timeout=soon is not a duration: give milliseconds, or a number with ms, s or min (0 for none)); expected postgres://USER@HOST[:PORT]/DATABASE".to_owned())
        );
    }
}
