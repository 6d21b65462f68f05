#![allow(clippy::panic, clippy::print_stderr)]

//! A private PostgreSQL cluster for a test binary: `initdb` in a temporary directory, a
//! unix socket in it and no TCP port (a TLS cluster listens on 127.0.0.1 too), a database
//! per test. A watchdog process stops the server and removes the directory when the test
//! binary exits, however it exits.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The cluster's superuser.
const USER: &str = "docket";
/// The port in the socket's name (no TCP listener is opened).
const PORT: u16 = 5432;

/// A running private cluster.
pub struct TestCluster {
    dir: PathBuf,
    /// The TCP port a TLS cluster listens on (at 127.0.0.1), else none.
    tcp: Option<u16>,
    /// The server's options, to start it again with them.
    options: std::sync::Mutex<String>,
    bin: PathBuf,
    /// The OS user the server runs as, when this process is root (PostgreSQL refuses root).
    run_as: Option<String>,
    next: AtomicU64,
}

/// One test's database in the cluster.
pub struct TestDatabase {
    pub url: String,
    pub name: String,
}

/// Whether CI runs these tests (`CI` set and not `0`/`false`): then a missing PostgreSQL is
/// a failure, not a skip.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// PostgreSQL's server programs: `DOCKET_PG_BIN`, Debian's newest, or `PATH`.
fn find_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKET_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
}

fn run(what: &str, command: &mut Command) {
    let out = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("could not run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestCluster {
    /// The test binary's cluster, started on first use; `None` (having said once how to
    /// run these tests) when PostgreSQL is not installed and CI is not set.
    pub fn shared() -> Option<&'static TestCluster> {
        static CLUSTER: OnceLock<Option<TestCluster>> = OnceLock::new();
        CLUSTER
            .get_or_init(|| match find_bin() {
                Some(bin) => Some(TestCluster::start(bin, false, None)),
                None if in_ci() => panic!(
                    "CI is set but PostgreSQL's server programs (initdb, pg_ctl) are not installed: \
                     install Debian's postgresql (as .ci/run does) or set DOCKET_PG_BIN"
                ),
                None => {
                    eprintln!(
                        "skipping the PostgreSQL tests: initdb and pg_ctl were not found; install \
                         Debian's postgresql (or set DOCKET_PG_BIN to their directory) to run them"
                    );
                    None
                }
            })
            .as_ref()
    }

    /// A cluster of its own, for a test that stops or restarts its server.
    pub fn private() -> Option<TestCluster> {
        match find_bin() {
            Some(bin) => Some(TestCluster::start(bin, false, None)),
            None if in_ci() => {
                panic!("CI is set but PostgreSQL's server programs are not installed")
            }
            None => None,
        }
    }

    /// A cluster of its own that syncs its WAL on commit as a production server does (the
    /// shared one does not, for speed), for benchmarks; `None` as for [`TestCluster::shared`].
    pub fn durable() -> Option<TestCluster> {
        match find_bin() {
            Some(bin) => Some(TestCluster::start(bin, true, None)),
            None if in_ci() => {
                panic!("CI is set but PostgreSQL's server programs are not installed")
            }
            None => {
                eprintln!("skipping: PostgreSQL's server programs (initdb, pg_ctl) were not found");
                None
            }
        }
    }

    /// A cluster of its own that accepts TLS on a TCP port of 127.0.0.1, with the server
    /// certificate and key given in PEM (the certificate should name `localhost`).
    pub fn with_tls(cert_pem: &str, key_pem: &str) -> Option<TestCluster> {
        let bin = match find_bin() {
            Some(bin) => bin,
            None if in_ci() => {
                panic!("CI is set but PostgreSQL's server programs are not installed")
            }
            None => return None,
        };
        Some(TestCluster::start(bin, false, Some((cert_pem, key_pem))))
    }

    fn start(bin: PathBuf, durable: bool, tls: Option<(&str, &str)>) -> TestCluster {
        let dir = tempfile::Builder::new()
            .prefix("docket-pg-")
            .tempdir()
            .unwrap_or_else(|e| panic!("no temporary directory for PostgreSQL: {e}"))
            .keep();
        let root = std::env::var("USER").is_ok_and(|u| u == "root") || is_root(&dir);
        let run_as = root.then(|| "postgres".to_owned());
        if let Some(user) = &run_as {
            run(
                "chown of the cluster's directory",
                Command::new("chown").arg(user).arg(&dir),
            );
        }
        let data = dir.join("data");
        let tcp = tls.map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .unwrap_or_else(|e| panic!("no free port for PostgreSQL: {e}"))
        });
        let cluster = TestCluster {
            dir,
            tcp,
            options: std::sync::Mutex::new(String::new()),
            bin,
            run_as,
            next: AtomicU64::new(0),
        };
        run(
            "initdb",
            &mut cluster.command(
                "initdb",
                &[
                    "-D",
                    path(&data),
                    "-U",
                    USER,
                    "--auth=trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ],
            ),
        );
        let mut options = format!(
            "-k {} -c max_connections=200{}",
            path(&cluster.dir),
            if durable {
                ""
            } else {
                " -c fsync=off -c full_page_writes=off"
            }
        );
        match (tls, cluster.tcp) {
            (Some((cert, key)), Some(port)) => {
                let cert_file = cluster.dir.join("server.crt");
                let key_file = cluster.dir.join("server.key");
                std::fs::write(&cert_file, cert)
                    .unwrap_or_else(|e| panic!("writing the certificate: {e}"));
                std::fs::write(&key_file, key).unwrap_or_else(|e| panic!("writing the key: {e}"));
                {
                    use std::os::unix::fs::PermissionsExt;
                    let _ =
                        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600));
                }
                if let Some(user) = &cluster.run_as {
                    run(
                        "chown of the server's key",
                        Command::new("chown")
                            .arg(user)
                            .arg(&cert_file)
                            .arg(&key_file),
                    );
                }
                options.push_str(&format!(
                    " -p {port} -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                    path(&cert_file),
                    path(&key_file)
                ));
            }
            _ => options.push_str(&format!(" -p {PORT} -c listen_addresses=''")),
        }
        cluster.watchdog(&data);
        *cluster
            .options
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = options.clone();
        run(
            "pg_ctl start",
            &mut cluster.command(
                "pg_ctl",
                &[
                    "start",
                    "-w",
                    "-D",
                    path(&data),
                    "-l",
                    path(&cluster.dir.join("server.log")),
                    "-o",
                    &options,
                ],
            ),
        );
        cluster
    }

    /// Stops the server at once (as a crash would: `-m immediate`) and starts it again;
    /// connections are lost, committed transactions are not.
    pub fn restart(&self) {
        self.pg_ctl("restart", &["-m", "immediate"]);
    }

    /// Stops the server at once (as a crash would), leaving it down until [`Self::resume`]:
    /// what a docket process meets when its database is gone.
    pub fn stop(&self) {
        self.pg_ctl("stop", &["-m", "immediate"]);
    }

    /// Starts again a server [`Self::stop`] stopped.
    pub fn resume(&self) {
        self.pg_ctl("start", &[]);
    }

    fn pg_ctl(&self, action: &str, extra: &[&str]) {
        let data = self.dir.join("data");
        let options = self
            .options
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let log = self.dir.join("server.log");
        let mut args = vec![action, "-w"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-D", path(&data)]);
        if action != "stop" {
            args.extend_from_slice(&["-l", path(&log), "-o", &options]);
        }
        run(
            &format!("pg_ctl {action}"),
            &mut self.command("pg_ctl", &args),
        );
    }

    /// A program of the cluster's, run as the server's user.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let exe = self.bin.join(program);
        match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(exe).args(args);
                c
            }
            None => {
                let mut c = Command::new(exe);
                c.args(args);
                c
            }
        }
    }

    /// Stops the server and removes the directory once this process is gone.
    fn watchdog(&self, data: &Path) {
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} stop -m immediate -D '{data}' >/dev/null 2>&1; rm -rf '{dir}'",
            pid = std::process::id(),
            stop = match &self.run_as {
                Some(user) => format!("runuser -u {user} -- '{}'", path(&self.bin.join("pg_ctl"))),
                None => format!("'{}'", path(&self.bin.join("pg_ctl"))),
            },
            data = path(data),
            dir = path(&self.dir),
        );
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if let Err(e) = spawned {
            panic!("could not start the cluster's watchdog: {e}");
        }
    }

    /// A new, empty database for one test.
    pub fn database(&self) -> TestDatabase {
        let name = format!("t{}", self.next.fetch_add(1, Ordering::SeqCst));
        let port = self.tcp.unwrap_or(PORT).to_string();
        run(
            "createdb",
            &mut self.command(
                "createdb",
                &["-h", path(&self.dir), "-p", &port, "-U", USER, &name],
            ),
        );
        let url = match self.tcp {
            Some(port) => format!("postgres://{USER}@localhost:{port}/{name}"),
            None => format!(
                "postgres://{USER}@{}:{PORT}/{name}",
                percent(path(&self.dir))
            ),
        };
        TestDatabase { url, name }
    }
}

fn path(p: &Path) -> &str {
    p.to_str()
        .unwrap_or_else(|| panic!("{} is not UTF-8", p.display()))
}

/// Whether files this process creates are owned by root.
fn is_root(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).is_ok_and(|m| m.uid() == 0)
}

/// A socket directory as the host of a URL.
fn percent(p: &str) -> String {
    p.bytes()
        .map(|b| match b {
            b'/' => "%2F".to_owned(),
            b if b.is_ascii_alphanumeric() || b"-._~".contains(&b) => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}
