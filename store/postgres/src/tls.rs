//! Reaching the database: the URL (with what libpq users write for TLS, `sslrootcert` and
//! `sslmode=verify-ca|verify-full`, understood here) and TLS through rustls
//! (docs/postgres.md, "TLS"). When TLS is used the server's certificate is always checked
//! against the system's roots and the URL's `sslrootcert`, and must name the host.

use std::path::PathBuf;

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

/// Parses `url`.
pub(crate) fn parse(url: &str) -> Result<Target, PgError> {
    let (url, ca_file, verify) = libpq_options(url);
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e: tokio_postgres::Error| PgError::BadUrl { why: e.to_string() })?;
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

/// The URL without the options the driver does not know: `sslrootcert`'s file, and whether
/// `sslmode` asked to verify (`verify-ca`, `verify-full`: rustls always verifies both).
fn libpq_options(url: &str) -> (String, Option<PathBuf>, bool) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None, false);
    };
    let (mut kept, mut ca, mut verify) = (Vec::new(), None, false);
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslrootcert", path)) => ca = Some(PathBuf::from(percent_decoded(path))),
            Some(("sslmode", "verify-ca" | "verify-full")) => verify = true,
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, ca, verify)
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
