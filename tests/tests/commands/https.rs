//! HTTP agents and tool executors over `https://` (docs/workflow.md#http-endpoints),
//! through the `docket` binary: a TLS server on 127.0.0.1 whose certificate a CA made per
//! test signs; the workflow's `ca_file` trusts that CA, and without it the certificate is
//! refused as not trusted. Credentials come from environment variables the workflow
//! names: the value reaches the server and appears in no recorded event and no output; a
//! variable that is not set fails the call naming it, and the run goes on once it is set.
//! The OTLP export reaches an `https://` collector the same way, with the standard
//! `OTEL_EXPORTER_OTLP_CERTIFICATE` and `OTEL_EXPORTER_OTLP_HEADERS`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use docket_tests::{docket_bin, exit_code, run_events, stdout_text};
use http_body_util::{BodyExt as _, Full};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use serde_json::{Value, json};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::PrivateKeyDer;

const TOOL_AGENT: &str = env!("CARGO_BIN_EXE_tool-agent");

/// A CA (its certificate as PEM) and a certificate it signed for `localhost` and
/// 127.0.0.1, with its key.
struct Pki {
    ca_pem: String,
    server: rustls::ServerConfig,
}

fn pki() -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "docket test CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("CA key")).expect("CA");
    let key = KeyPair::generate().expect("server key");
    let cert = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("server parameters")
        .signed_by(&key, &ca)
        .expect("server certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], PrivateKeyDer::from(key))
        .expect("server configuration");
    Pki {
        ca_pem: ca.pem(),
        server,
    }
}

/// A request the server received: its path and the headers named in `WATCHED`.
type Received = (String, Vec<(String, String)>);

/// What the server received, in order.
type Seen = Arc<Mutex<Vec<Received>>>;

const WATCHED: [&str; 2] = ["authorization", "x-api-key"];

/// An HTTPS server on 127.0.0.1 answering `/agent` as an agent that finishes with
/// `{"answer": "over tls"}`, `/tool` as a tool executor whose result is
/// `{"looked_up": ARGUMENTS}` and `/v1/traces` as an OTLP collector. It serves on a thread of its own and accepts a bounded
/// number of connections (a handshake the client refuses ends its connection).
fn serve(config: rustls::ServerConfig) -> (SocketAddr, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    listener.set_nonblocking(true).expect("non-blocking");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
            for _ in 0..64 {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let kept = kept.clone();
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |request| {
                        let kept = kept.clone();
                        async move { Ok::<_, std::convert::Infallible>(answer(request, &kept).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    (addr, seen)
}

async fn answer(
    request: hyper::Request<hyper::body::Incoming>,
    seen: &Mutex<Vec<Received>>,
) -> hyper::Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let headers = WATCHED
        .iter()
        .filter_map(|name| {
            let value = request.headers().get(*name)?.to_str().ok()?;
            Some(((*name).to_owned(), value.to_owned()))
        })
        .collect();
    seen.lock().expect("lock").push((path.clone(), headers));
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let call: Value = serde_json::from_slice(&body).unwrap_or_default();
    let answer = match path.as_str() {
        "/agent" => json!({
            "request_id": call["request_id"],
            "status": "SUCCESS",
            "confidence_level": "HIGH",
            "actions": [{"type": "finish", "output": {"answer": "over tls"}}],
        }),
        "/tool" => json!({
            "tool_call_id": call["tool_call_id"],
            "result": {"looked_up": call["arguments"]},
        }),
        // An OTLP export: an empty answer is a full success.
        "/v1/traces" => return hyper::Response::new(Full::new(Bytes::new())),
        _ => json!("no such endpoint"),
    };
    hyper::Response::new(Full::new(Bytes::from(answer.to_string())))
}

const BUNDLE: &str = r#"
bundle = { id = "tls" }
agents = [{ id = "external" }, { id = "worker", allowed_tools = ["lookup(*)"] }]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// One test's server and directory: a CA and the TLS server its certificate serves, and a
/// directory holding the workflow's files and the data directory.
struct Site {
    pki: Pki,
    addr: SocketAddr,
    seen: Seen,
    dir: tempfile::TempDir,
    data: PathBuf,
}

impl Site {
    fn new() -> Self {
        let pki = pki();
        let (addr, seen) = serve(pki.server.clone());
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        Self {
            pki,
            addr,
            seen,
            dir,
            data,
        }
    }

    /// Writes the workflow ([`workflow`]) and runs it as `run`, with `more` arguments and
    /// environment variables `vars` set and `unset` removed.
    fn run(
        &self,
        (worker, extra): (&str, &str),
        run: &str,
        more: &[&str],
        (vars, unset): (&[(&str, &str)], &[&str]),
    ) -> Output {
        let path = workflow(self.dir.path(), &self.pki, worker, extra);
        let mut args = vec!["run", path.to_str().expect("utf-8"), "--run-id", run];
        args.extend_from_slice(more);
        docket(&self.data, &args, vars, unset)
    }

    /// The requests the server was sent so far: path and headers of interest.
    fn seen(&self) -> Vec<Received> {
        self.seen.lock().expect("lock").clone()
    }
}

/// Writes the bundle, the input, the test CA as `ca.pem` and a workflow whose `worker`
/// section is `worker`, followed by `extra`, into `dir`; returns the workflow's path.
fn workflow(dir: &Path, pki: &Pki, worker: &str, extra: &str) -> PathBuf {
    std::fs::write(dir.join("policy.toml"), BUNDLE).expect("bundle");
    std::fs::write(dir.join("input.json"), r#"{"task": "x"}"#).expect("input");
    std::fs::write(dir.join("ca.pem"), &pki.ca_pem).expect("CA file");
    let path = dir.join("workflow.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"tls\"\npolicy = \"policy.toml\"\nentry = \"worker\"\n\
             input = \"input.json\"\n[agents.worker]\n{worker}\n{extra}"
        ),
    )
    .expect("workflow");
    path
}

/// `docket ARGS --data DATA` with environment variables `vars` set and `unset` removed.
fn docket(data: &Path, args: &[&str], vars: &[(&str, &str)], unset: &[&str]) -> Output {
    let mut command = Command::new(docket_bin());
    command.args(args).arg("--data").arg(data);
    for (name, value) in vars {
        command.env(name, value);
    }
    for name in unset {
        command.env_remove(name);
    }
    command.output().expect("docket runs")
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        stdout_text(out),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every recorded event of the run, as the JSON text `docket events --json` prints.
fn events_text(data: &Path, run: &str) -> String {
    run_events(data, run)
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The error messages of the run's failed agent calls.
fn call_failures(data: &Path, run: &str) -> Vec<String> {
    run_events(data, run)
        .iter()
        .filter(|e| e["kind"] == "agent.call_failed")
        .map(|e| e["payload"].to_string())
        .collect()
}

/// A token no event or output could hold by chance.
fn token(what: &str) -> String {
    format!("{what}-{}-{:x}", std::process::id(), rand_ish())
}

fn rand_ish() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

#[test]
fn an_https_agent_trusted_through_ca_file_gets_the_bearer_token_and_no_event_holds_it() {
    let site = Site::new();
    let secret = token("agent-token");
    let agent = format!(
        "http = \"https://{}/agent\"\nca_file = \"ca.pem\"\n\
         bearer_env = \"DOCKET_TEST_AGENT_TOKEN\"",
        site.addr
    );
    let vars = [("DOCKET_TEST_AGENT_TOKEN", secret.as_str())];
    let out = site.run((&agent, ""), "tls", &[], (&vars, &[]));
    assert_eq!(exit_code(&out), 0, "{}", said(&out));

    let seen = site.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].1,
        vec![("authorization".to_owned(), format!("Bearer {secret}"))]
    );
    let events = events_text(&site.data, "tls");
    assert!(events.contains("\"over tls\""), "the answer is recorded");
    assert!(
        events.contains("DOCKET_TEST_AGENT_TOKEN"),
        "the variable's name is recorded with the workflow"
    );
    assert!(!events.contains(&secret), "the token is in an event");
    assert!(!said(&out).contains(&secret), "docket printed the token");
}

#[test]
fn without_the_ca_file_the_servers_certificate_is_not_trusted() {
    let site = Site::new();
    let agent = format!("http = \"https://{}/agent\"", site.addr);
    let out = site.run((&agent, ""), "untrusted", &[], (&[], &[]));
    assert_ne!(exit_code(&out), 0, "{}", said(&out));
    let failures = call_failures(&site.data, "untrusted");
    assert!(!failures.is_empty(), "{}", said(&out));
    for failure in &failures {
        assert!(
            failure.contains("the server's certificate is not trusted"),
            "{failure}"
        );
    }
    assert!(site.seen().is_empty(), "no request was sent");
}

#[test]
fn an_unset_token_variable_fails_the_call_naming_it_and_the_run_resumes_once_set() {
    let site = Site::new();
    let agent = format!(
        "http = \"https://{}/agent\"\nca_file = \"ca.pem\"\n\
         bearer_env = \"DOCKET_TEST_UNSET_TOKEN\"",
        site.addr
    );
    let out = site.run(
        (&agent, ""),
        "unset",
        &[],
        (&[], &["DOCKET_TEST_UNSET_TOKEN"]),
    );
    assert_ne!(exit_code(&out), 0, "{}", said(&out));
    let failures = call_failures(&site.data, "unset");
    assert!(!failures.is_empty(), "{}", said(&out));
    for failure in &failures {
        assert!(
            failure.contains(
                "environment variable DOCKET_TEST_UNSET_TOKEN (named by `bearer_env`) is not set"
            ),
            "{failure}"
        );
    }
    assert!(site.seen().is_empty(), "nothing was sent");

    // The failures wait for a human; approving with the variable set retries the call.
    let secret = token("late-token");
    let out = docket(
        &site.data,
        &[
            "approve",
            "unset",
            "ticket-1",
            "--by",
            "ops",
            "--reason",
            "token set",
        ],
        &[("DOCKET_TEST_UNSET_TOKEN", &secret)],
        &[],
    );
    assert_eq!(exit_code(&out), 0, "{}", said(&out));
    let status = docket(&site.data, &["status", "unset"], &[], &[]);
    assert!(
        stdout_text(&status).contains("completed"),
        "{}",
        said(&status)
    );
    assert_eq!(
        site.seen(),
        vec![(
            "/agent".to_owned(),
            vec![("authorization".to_owned(), format!("Bearer {secret}"))]
        )]
    );
    assert!(!events_text(&site.data, "unset").contains(&secret));
}

#[test]
fn an_https_tool_executor_gets_its_header_from_the_environment() {
    let site = Site::new();
    let secret = token("tool-key");
    let agent = format!(
        "command = {TOOL_AGENT:?}\nargs = [\"--tool\", \"lookup\", \"--arguments\", \
         \"{{\\\"q\\\": 1}}\"]"
    );
    let tool = format!(
        "[tools.lookup]\nhttp = \"https://localhost:{}/tool\"\nca_file = \"ca.pem\"\n\
         headers_env = {{ X-Api-Key = \"DOCKET_TEST_TOOL_KEY\" }}\n",
        site.addr.port()
    );
    let vars = [("DOCKET_TEST_TOOL_KEY", secret.as_str())];
    let out = site.run((&agent, &tool), "tool", &[], (&vars, &[]));
    assert_eq!(exit_code(&out), 0, "{}", said(&out));
    assert_eq!(
        site.seen(),
        vec![(
            "/tool".to_owned(),
            vec![("x-api-key".to_owned(), secret.clone())]
        )]
    );
    let events = events_text(&site.data, "tool");
    assert!(events.contains("looked_up"), "the result is recorded");
    assert!(!events.contains(&secret), "the key is in an event");
    assert!(!said(&out).contains(&secret), "docket printed the key");
}

#[test]
fn the_otlp_export_reaches_an_https_collector_with_its_ca_and_headers() {
    let site = Site::new();
    let secret = token("otlp-key");
    let agent = format!(
        "http = \"https://{}/agent\"\nca_file = \"ca.pem\"",
        site.addr
    );
    let ca = site.dir.path().join("ca.pem");
    let collector = format!("https://localhost:{}", site.addr.port());
    let headers = format!("x-api-key={secret}");
    let vars = [
        (
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
            ca.to_str().expect("utf-8"),
        ),
        ("OTEL_EXPORTER_OTLP_HEADERS", headers.as_str()),
    ];
    let out = site.run(
        (&agent, ""),
        "traced",
        &["--otlp", &collector],
        (&vars, &[]),
    );
    assert_eq!(exit_code(&out), 0, "{}", said(&out));
    assert!(!said(&out).contains("not all sent"), "{}", said(&out));
    let seen = site.seen();
    let exports: Vec<_> = seen.iter().filter(|(p, _)| p == "/v1/traces").collect();
    assert!(!exports.is_empty(), "{seen:?}");
    for (_, headers) in exports {
        assert_eq!(headers, &vec![("x-api-key".to_owned(), secret.clone())]);
    }
    assert!(!said(&out).contains(&secret), "docket printed the header");
}
