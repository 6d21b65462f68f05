//! A `docket serve` started for a test, and HTTP spoken to it by hand over TCP: what the
//! server tests share.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use docket_serve::Role;
use docket_tests::{docket_on as docket, exit_code as code, stdout_text as stdout};
use serde_json::Value;

/// A `docket serve` on an ephemeral port, killed when dropped; a token per role, named
/// `ROLE-user`.
pub(crate) struct Served {
    child: Child,
    pub(crate) addr: SocketAddr,
    tokens: Vec<(Role, String)>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// A server over `data` with a token per role.
    pub(crate) fn start(data: &Path) -> Self {
        Self::start_with(data, &[])
    }

    /// [`Served::start`] with more arguments for `docket serve`. With `--store URL` among
    /// them, the tokens are made in that store (where a server over a PostgreSQL store
    /// reads them).
    pub(crate) fn start_with(data: &Path, args: &[&str]) -> Self {
        let store: Vec<&str> = args
            .windows(2)
            .find(|pair| pair[0] == "--store")
            .map(<[&str]>::to_vec)
            .unwrap_or_default();
        let tokens = Role::ALL
            .into_iter()
            .map(|role| {
                let name = format!("{role}-user");
                let mut create = vec!["token", "create", "--role", role.as_str(), "--name", &name];
                create.extend(&store);
                let out = docket(data, &create);
                assert_eq!(code(&out), 0, "{out:?}");
                (role, stdout(&out).trim().to_owned())
            })
            .collect();
        Self::spawn(data, args, tokens)
    }

    /// Another server over the same `data` (and `args`), taking the same tokens: two API
    /// servers over one PostgreSQL store.
    pub(crate) fn beside(&self, data: &Path, args: &[&str]) -> Self {
        Self::spawn(data, args, self.tokens.clone())
    }

    fn spawn(data: &Path, args: &[&str], tokens: Vec<(Role, String)>) -> Self {
        let mut child = Command::new(docket_tests::docket_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .args(args)
            // Relative paths in bodies resolve in the test's directory, not the workspace.
            .current_dir(data.parent().expect("the data directory's parent"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("docket serve starts");
        let addr = docket_tests::serve_address(&mut child);
        Self {
            child,
            addr,
            tokens,
        }
    }

    pub(crate) fn token(&self, role: Role) -> &str {
        &self
            .tokens
            .iter()
            .find(|(r, _)| *r == role)
            .expect("a token")
            .1
    }

    pub(crate) fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        s
    }

    /// One request on a new connection (closed after it): the answer's status, headers
    /// (lower-case names) and body (JSON, or a string when it is not).
    pub(crate) fn request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Answer {
        let body = body.map(Value::to_string).unwrap_or_default();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let mut s = self.connect();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).expect("read");
        Answer::parse(&raw)
    }

    /// `METHOD path` with `headers` (each ending in CRLF) and no body: the status and
    /// headers, and the body when it has a length (an event stream's is not read).
    pub(crate) fn with_headers(&self, method: &str, path: &str, headers: &str) -> Answer {
        let mut s = self.connect();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: test\r\n{headers}Content-Length: 0\r\n\r\n"
        )
        .expect("send");
        Answer::read_one(&mut s)
    }

    /// [`Served::request`] as its status and body.
    pub(crate) fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let answer = self.request(method, path, token, body);
        (answer.status, answer.body)
    }

    /// Reads server-sent events of `run` until one of kind `until` (included), from the
    /// start or after `last_event_id`: (id, kind, data) each.
    pub(crate) fn sse(
        &self,
        run: &str,
        last_event_id: Option<u64>,
        until: &str,
    ) -> Vec<(u64, String, Value)> {
        let mut s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let resume = last_event_id
            .map(|id| format!("Last-Event-ID: {id}\r\n"))
            .unwrap_or_default();
        write!(
            s,
            "GET /api/runs/{run}/events/stream HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\nAuthorization: Bearer {}\r\n{resume}\r\n",
            self.token(Role::Viewer)
        )
        .expect("send");
        let mut lines = BufReader::new(s).lines();
        let status = lines.next().expect("a status line").expect("read");
        assert!(status.contains(" 200 "), "{status}");
        let (mut id, mut kind) = (0, String::new());
        let mut seen = Vec::new();
        // Chunk sizes of the transfer encoding come between the lines and are skipped: an
        // event's lines are `field: value`.
        for line in lines {
            let line = line.expect("an event line before the timeout");
            if let Some(v) = line.strip_prefix("id: ") {
                id = v.parse().expect("a sequence id");
            } else if let Some(v) = line.strip_prefix("event: ") {
                kind = v.to_owned();
            } else if let Some(v) = line.strip_prefix("data: ") {
                seen.push((
                    id,
                    kind.clone(),
                    serde_json::from_str(v).expect("JSON data"),
                ));
                if kind == until {
                    return seen;
                }
            }
        }
        panic!("the stream ended before a {until} event: {seen:?}");
    }

    /// Polls the run until `done` holds of it, for at most a minute.
    pub(crate) fn until(&self, run: &str, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let (status, body) = self.call(
                "GET",
                &format!("/api/runs/{run}"),
                Some(self.token(Role::Viewer)),
                None,
            );
            assert_eq!(status, 200, "{body}");
            if done(&body) {
                return body;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "run {run} stayed {body}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A `docket serve` whose data directory is on a tmpfs of `size` bytes of its own (a mount
/// namespace made by `unshare`, no privilege needed where user namespaces are allowed),
/// with an operator's and a viewer's token; `None` where the namespace cannot be made.
/// The tmpfs is reached from here through `/proc/PID/root`.
pub(crate) fn on_a_small_disk(dir: &Path, size: u64) -> Option<(Served, PathBuf)> {
    let disk = dir.join("disk");
    std::fs::create_dir_all(&disk).expect("the mount point");
    let probe = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "true"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        return None;
    }
    // Inside the namespace: the tmpfs, the tokens (written into it), then the server.
    let script = r#"set -e
mount -t tmpfs -o "size=$1" tmpfs "$2"
bin="$3"; data="$2/data"
"$bin" token create --data "$data" --role operator --name operator-user > "$2/operator.token"
"$bin" token create --data "$data" --role viewer --name viewer-user > "$2/viewer.token"
exec "$bin" serve --listen 127.0.0.1:0 --data "$data""#;
    let mut child = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(size.to_string())
        .arg(&disk)
        .arg(docket_tests::docket_bin())
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("unshare starts");
    let addr = docket_tests::serve_address(&mut child);
    // `unshare` and `sh` exec: the child's pid is the server's.
    let seen = PathBuf::from(format!("/proc/{}/root", child.id())).join(
        disk.strip_prefix("/")
            .expect("an absolute temporary directory"),
    );
    let token = |role: &str| {
        std::fs::read_to_string(seen.join(format!("{role}.token")))
            .expect("a token written in the namespace")
            .trim()
            .to_owned()
    };
    let tokens = vec![
        (Role::Operator, token("operator")),
        (Role::Viewer, token("viewer")),
    ];
    Some((
        Served {
            child,
            addr,
            tokens,
        },
        seen,
    ))
}

/// An HTTP answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Value,
}

impl Answer {
    /// Parses a whole answer (a `Content-Length` body, or none).
    pub(crate) fn parse(raw: &[u8]) -> Self {
        let text = String::from_utf8_lossy(raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {text}"));
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Self {
            status,
            headers,
            body: serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned())),
        }
    }

    /// Reads one answer with a `Content-Length` body from `s`, leaving the connection open.
    pub(crate) fn read_one(s: &mut TcpStream) -> Self {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            let n = s.read(&mut byte).expect("an answer before the timeout");
            assert!(
                n == 1,
                "the connection closed mid-answer: {:?}",
                String::from_utf8_lossy(&head)
            );
            head.push(byte[0]);
        }
        let mut answer = Self::parse(&head);
        let length: usize = answer
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        s.read_exact(&mut body).expect("the body");
        answer.body = serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
        answer
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn error(&self) -> (&str, &str) {
        (
            self.body["error"]["code"].as_str().unwrap_or_default(),
            self.body["error"]["where"].as_str().unwrap_or_default(),
        )
    }
}
