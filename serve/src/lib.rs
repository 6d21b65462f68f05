//! `docket serve`: the data directory's one long-lived writer, behind a JSON API
//! (docs/api.md).
//!
//! The server takes the data directory's writer lock when it starts and holds it until it
//! stops (store/FORMAT.md §10): runs it starts or continues are driven in its process, and
//! a `docket run`, `approve`... from a terminal meanwhile is refused with an error naming
//! the server and saying to use the API. Reads go through the same store, whose index is
//! current with every write it makes; other processes read the directory through
//! read-only views as usual (`docket status`, `runs`, `verify`).
//!
//! Every `/api` route checks a bearer token ([`tokens`]) against the role
//! [`routes::ROUTES`] names; every mutating request is recorded with its principal in the
//! run's events where it touches a run (`human.decided` `by`, `run.cancelled` `by`), in the
//! kill switches' history for a flip, and in the API's request log
//! (`<data>/api/requests.jsonl`, or the database's `docket_api_requests` over a PostgreSQL
//! store: [`access`]) in every case. The web UI ([`ASSETS`], under `/`) holds
//! no data: it calls the same API from the browser.

// A library reports every failure as an error value; it never aborts its caller.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod access;
mod api;
mod error;
mod export;
mod http;
mod limits;
mod listings;
mod requests;
pub mod routes;
mod session;
mod streams;
pub mod tokens;
mod ui;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use docket_app::Store;
use docket_runtime::{Runtime, SourceRoot};

pub use error::ApiError;
pub use requests::REQUESTS_FILE;
pub use session::{COOKIE as SESSION_COOKIE, SESSION_TTL};
pub use streams::StreamLimits;
pub use tokens::{Principal, Role, TokenEntry, TokenError, TokenStore};
pub use ui::{ASSETS, Asset};

/// The subcommand's word, as it appears in the writer lock's holder file: a CLI writer
/// refused by a server says to use the API ([`is_server`]).
pub const SERVE_COMMAND: &str = "serve";

/// The default address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7700";

/// Whether a writer lock holder's command line is `docket serve`.
#[must_use]
pub fn is_server(command: &str) -> bool {
    let mut words = command.split_whitespace();
    words.next();
    // Global options (`--data DIR`, `--lock-wait SECS`) may come first.
    let mut skip = false;
    for w in words {
        if skip {
            skip = false;
        } else if w == "--data" || w == "--lock-wait" {
            skip = true;
        } else if w.starts_with('-') {
        } else {
            return w == SERVE_COMMAND;
        }
    }
    false
}

/// Refuses an address that is not loopback unless `allow_remote` (docs/api.md#tls):
/// checked before anything is opened.
///
/// # Errors
/// [`ServeError::Remote`].
pub fn check_listen(addr: SocketAddr, allow_remote: bool) -> Result<(), ServeError> {
    if addr.ip().is_loopback() || allow_remote {
        Ok(())
    } else {
        Err(ServeError::Remote(addr))
    }
}

/// Why the server cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A non-loopback address without `--allow-remote`.
    #[error(
        "--listen {0}: not a loopback address; the API would be reachable from the network without TLS. Put a TLS-terminating reverse proxy in front (docs/api.md#tls) and pass --allow-remote"
    )]
    Remote(SocketAddr),
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("serving failed: {0}")]
    Serve(std::io::Error),
    /// The directory files are read from (`--root`) cannot be resolved.
    #[error("--root {path}: {source}")]
    Root {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The request log cannot be opened.
    #[error("cannot open the API's request log {path}: {source}")]
    RequestLog {
        /// Its path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What the handlers share.
pub(crate) struct AppState {
    pub(crate) rt: Runtime<Store>,
    /// The same runtime, sealing the runs that finished after it drives, when the data
    /// directory has a signing key, as each `docket` command that drives runs does
    /// (docs/checkpoints.md).
    pub(crate) app: docket_app::App,
    pub(crate) data: PathBuf,
    /// Where the files requests name are read from.
    pub(crate) sources: SourceRoot,
    /// The tokens, browser sessions and request log: files and memory over a data
    /// directory, the database over a PostgreSQL store.
    pub(crate) access: access::Access,
    pub(crate) driving: api::Driving,
    /// The runs waiting on timers, driven again when due (a drive ends at a timer not yet
    /// due: [`Runtime::set_timers_elsewhere`]).
    pub(crate) timers: docket_app::DueTimers,
    /// The runtime the runs are driven on (the one `Server::bind` was called on); the API
    /// itself is served on threads of its own ([`Server::serve`]).
    pub(crate) drives: tokio::runtime::Handle,
    /// The event streams open, against their limits.
    pub(crate) streams: streams::Streams,
    /// Turns true when the server stops: event streams end on it.
    pub(crate) stopping: tokio::sync::watch::Sender<bool>,
}

/// Says in the server's log that finished runs were not sealed (the next drive tries
/// again).
fn unsealed(e: &docket_app::Unsealed) {
    match e {
        docket_app::Unsealed::Key(_) => tracing::warn!("{e}"),
        docket_app::Unsealed::Seal(_) | docket_app::Unsealed::Database(_) => {
            tracing::warn!("{e}; the next drive tries again");
        }
    }
}

/// A bound server, not yet serving: its address is known (bind port 0 to have one
/// chosen), so a caller can say where it listens before it serves.
pub struct Server {
    listener: tokio::net::TcpListener,
    state: AppState,
}

impl Server {
    /// Binds `addr` for the data directory opened by `rt` (which holds its writer lock).
    /// The workflow and bundle files requests name are read from under `root`, never from
    /// the data directory (docs/api.md#files-the-api-reads).
    ///
    /// # Errors
    /// [`ServeError`]: a remote address without `allow_remote`, an address in use, a root
    /// that is not a directory.
    pub async fn bind(
        rt: Runtime<Store>,
        data: &Path,
        root: &Path,
        addr: SocketAddr,
        allow_remote: bool,
    ) -> Result<Self, ServeError> {
        check_listen(addr, allow_remote)?;
        let sources = SourceRoot::new(root, &[data]).map_err(|source| ServeError::Root {
            path: root.to_owned(),
            source,
        })?;
        let access = access::Access::open(rt.store(), data)?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        // The run list, read while the server starts taking requests: from then on every
        // batch the server appends keeps it current (the runtime's `run_list.rs`).
        let loading = rt.clone();
        tokio::spawn(async move {
            if let Err(e) = loading.load_run_list().await {
                tracing::warn!(
                    "the run list could not be loaded ({e}); the first listing tries again"
                );
            }
        });
        // Runs waiting on timers are kept as entries of `timers`, not as sleeping drives.
        rt.set_timers_elsewhere();
        let state = AppState {
            app: docket_app::App::new(
                rt.clone(),
                data,
                docket_evidence::KeyPlace::default(),
                unsealed,
            ),
            rt,
            data: data.to_owned(),
            sources,
            access,
            driving: api::Driving::default(),
            timers: docket_app::DueTimers::default(),
            drives: tokio::runtime::Handle::current(),
            streams: streams::Streams::new(StreamLimits::default()),
            stopping: tokio::sync::watch::Sender::new(false),
        };
        Ok(Self { listener, state })
    }

    /// Seals finished runs with the key at `key` (default: the data directory's).
    #[must_use]
    pub fn sign_with(mut self, key: docket_evidence::KeyPlace) -> Self {
        self.state.app =
            docket_app::App::new(self.state.rt.clone(), &self.state.data, key, unsealed);
        self
    }

    /// Sets how many event streams may be open, in all and per token (default
    /// [`StreamLimits::default`]).
    #[must_use]
    pub fn limit_streams(mut self, limits: StreamLimits) -> Self {
        self.state.streams = streams::Streams::new(limits);
        self
    }

    /// Where it listens.
    ///
    /// # Errors
    /// The socket's error.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The router it serves: every route, the role check and the request log, to be
    /// called in-process (tower's `oneshot`) without a connection, as the fuzzing harness
    /// does.
    pub fn router(self) -> Router {
        router(Arc::new(self.state))
    }

    /// Serves until `shutdown` completes.
    ///
    /// Requests and event streams are served on threads of their own
    /// ([`API_THREADS`], named `docket-api`), apart from the runtime the runs are driven on:
    /// however many runs that runtime has queued, a request or a stream's next event waits
    /// only behind other requests, not behind every run's next step.
    ///
    /// # Errors
    /// [`ServeError::Serve`].
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let listener = self.listener.into_std().map_err(ServeError::Serve)?;
        let api = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(API_THREADS)
            .max_blocking_threads(API_BLOCKING_THREADS)
            .thread_name("docket-api")
            .enable_all()
            .build()
            .map_err(ServeError::Serve)?;
        let handle = api.handle().clone();
        let _api = ApiRuntime(Some(api));
        let stopping = self.state.stopping.clone();
        let state = Arc::new(self.state);
        state.drives.spawn(api::fire_timers(state.clone()));
        state.drives.spawn(api::fire_schedules(state.clone()));
        let app = router(state);
        let served = handle.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            http::serve(listener, app, shutdown, stopping).await
        });
        match served.await {
            Ok(result) => result.map_err(ServeError::Serve),
            Err(e) => Err(ServeError::Serve(std::io::Error::other(format!(
                "the API's runtime stopped: {e}"
            )))),
        }
    }
}

/// Worker threads serving the API and its event streams, apart from the runs' runtime.
pub const API_THREADS: usize = 2;

/// Threads the API's blocking work (reads of the log, kill switch files) may use at once:
/// a burst of new streams queues its reads here instead of starting a thread each.
pub const API_BLOCKING_THREADS: usize = 16;

/// The API's runtime, shut down without waiting when dropped: [`Server::serve`] is
/// async, and a runtime dropped from async code would block its caller's thread (tokio
/// refuses that with a panic).
struct ApiRuntime(Option<tokio::runtime::Runtime>);

impl Drop for ApiRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

fn router(state: Arc<AppState>) -> Router {
    let api = api::routes()
        .route(
            "/api/session",
            axum::routing::post(session::open).delete(session::close),
        )
        .route("/api/tickets", axum::routing::get(listings::tickets))
        .route("/api/workflows", axum::routing::get(listings::workflows))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authorize,
        ))
        .with_state(state);
    Router::new()
        // The web UI (docs/api.md#the-web-ui); the API is under /api.
        .route("/", axum::routing::get(ui::index))
        .route("/assets/{file}", axum::routing::get(ui::asset))
        .merge(api)
        .fallback(|| async {
            ApiError::not_found("no such route (GET /api/openapi.json lists them)")
        })
        .method_not_allowed_fallback(|request: Request| async move {
            let allowed = request
                .extensions()
                .get::<MatchedPath>()
                .map(|path| routes::methods(path.as_str()))
                .unwrap_or_default();
            if allowed.is_empty() {
                ApiError::method_not_allowed(
                    "this route does not take this method (GET /api/openapi.json lists them)",
                )
                .into_response()
            } else {
                method_not_allowed(&allowed)
            }
        })
        .layer(axum::extract::DefaultBodyLimit::max(limits::MAX_BODY))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            limits::MAX_BODY,
        ))
        .layer(axum::middleware::from_fn(limits::check_size))
        .layer(axum::middleware::from_fn(limits::close_if_unread))
}

/// Checks the bearer token against the route's role; records a mutating request with its
/// principal once it is answered.
async fn authorize(
    State(state): State<Arc<AppState>>,
    matched: MatchedPath,
    mut request: Request,
    next: Next,
) -> Response {
    let method = request.method().as_str().to_owned();
    // HEAD is GET without the body (axum answers it with the GET route's handler).
    let as_method = if method == "HEAD" { "GET" } else { &method };
    let Some(route) = routes::find(as_method, matched.as_str()) else {
        let allowed = routes::methods(matched.as_str());
        if !allowed.is_empty() {
            return method_not_allowed(&allowed);
        }
        // A route the table lacks is a bug of this crate: refuse rather than leave it open.
        return ApiError::internal(format!(
            "{method} {} has no role in the route table",
            matched.as_str()
        ))
        .into_response();
    };
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let principal = match token {
        Some(token) => match state.access.authenticate(token).await {
            Ok(Some(p)) => p,
            Ok(None) => {
                return ApiError::unauthenticated("unknown or revoked token")
                    .at("header.authorization")
                    .into_response();
            }
            // Tokens that cannot be read refuse the request (503 or 500), never pass it.
            Err(e) => return e.answer().into_response(),
        },
        // A browser's EventSource or link sends no header: the routes the table marks
        // take the session cookie instead (docs/api.md#sessions-for-the-browser).
        None => match if route.session {
            session::principal(&state, request.headers()).await
        } else {
            None
        } {
            Some(Ok(p)) => p,
            Some(Err(e)) => return e.into_response(),
            None => {
                return ApiError::unauthenticated(if route.session {
                    "this route needs a bearer token (Authorization: Bearer TOKEN; docket token create makes one) or a browser session (POST /api/session)"
                } else {
                    "this route needs a bearer token (Authorization: Bearer TOKEN; docket token create makes one)"
                })
                .at("header.authorization")
                .into_response();
            }
        },
    };
    let path = request.uri().path().to_owned();
    let response = if principal.role.allows(route.role) {
        request.extensions_mut().insert(principal.clone());
        next.run(request).await
    } else {
        ApiError::forbidden(format!(
            "{method} {} needs the {} role; token `{}` is {}",
            route.path, route.role, principal.name, principal.role
        ))
        .into_response()
    };
    if as_method != "GET" {
        state
            .access
            .record(&principal, &method, &path, response.status().as_u16())
            .await;
    }
    response
}

/// 405 for a route that takes other methods, with `Allow` naming them (`HEAD` with `GET`).
fn method_not_allowed(allowed: &[&str]) -> Response {
    let mut methods: Vec<&str> = allowed.to_vec();
    if methods.contains(&"GET") {
        methods.push("HEAD");
    }
    let allow = methods.join(", ");
    let mut response = ApiError::method_not_allowed(format!(
        "this route takes {allow} (GET /api/openapi.json lists them)"
    ))
    .into_response();
    if let Ok(value) = header::HeaderValue::from_str(&allow) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::is_server;
    use super::{Role, Server, tokens};
    use std::io::{Read as _, Write as _};

    /// `METHOD path` with a JSON `body` on a new connection, within 30 s; the whole answer.
    fn request(
        addr: std::net::SocketAddr,
        token: &str,
        method: &str,
        path: &str,
        body: &str,
    ) -> String {
        let mut s = std::net::TcpStream::connect(addr).expect("connects");
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .expect("timeout");
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("writes");
        let mut answer = String::new();
        s.read_to_string(&mut answer)
            .expect("an answer within 30 s");
        answer
    }

    /// `GET path`, as [`request`] does.
    fn get(addr: std::net::SocketAddr, token: &str, path: &str) -> String {
        request(addr, token, "GET", path, "")
    }

    /// A server over `rt` and `dir` on an ephemeral loopback port, served on the current
    /// runtime; its address.
    async fn serving(
        rt: docket_runtime::Runtime<docket_app::Store>,
        dir: &std::path::Path,
    ) -> std::net::SocketAddr {
        let server = Server::bind(rt, dir, dir, "127.0.0.1:0".parse().expect("addr"), false)
            .await
            .expect("binds");
        let addr = server.local_addr().expect("addr");
        tokio::spawn(server.serve(std::future::pending()));
        addr
    }

    #[test]
    fn the_api_answers_while_every_worker_of_the_runs_runtime_is_busy() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The runs' runtime, with one worker.
        let runs = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let addr = runs.block_on(async {
            let store =
                docket_store::EmbeddedStore::open(dir.path(), docket_store::StoreConfig::default())
                    .await
                    .expect("store");
            serving(
                docket_runtime::Runtime::new(docket_app::Store::from(store)),
                dir.path(),
            )
            .await
        });
        // After the store is made: it refuses to be made in a directory holding other files.
        let token = tokens::create(dir.path(), "t", Role::Admin, 0).expect("token");
        assert!(get(addr, &token, "/api/openapi.json").starts_with("HTTP/1.1 200"));
        // The runs' only worker is taken until the API has answered again.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (taken, worker_taken) = std::sync::mpsc::channel::<()>();
        runs.spawn(async move {
            let _ = taken.send(());
            let _ = held.recv();
        });
        worker_taken.recv().expect("the worker is taken");
        let answer = get(addr, &token, "/api/openapi.json");
        let _ = release.send(());
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }

    /// A run waiting for a human in a new store at `dir` with fault plan `faults`: the
    /// runtime, and the file operations the store made so far.
    async fn waiting_run(
        dir: &std::path::Path,
        faults: std::sync::Arc<docket_store::FaultPlan>,
    ) -> (docket_runtime::Runtime<docket_app::Store>, u64) {
        use docket_decider::{Action, AgentRequest, AgentResponse, Confidence, WorkflowSpec};
        let config = docket_store::StoreConfig {
            faults: Some(faults.clone()),
            ..docket_store::StoreConfig::default()
        };
        let store = docket_store::EmbeddedStore::open(dir, config)
            .await
            .expect("store");
        let rt = docket_runtime::Runtime::new(docket_app::Store::from(store));
        rt.register_agent(
            "worker",
            std::sync::Arc::new(docket_runtime::InProcessExecutor::new(
                |r: &AgentRequest| {
                    AgentResponse::success(
                        r.request_id.clone(),
                        Confidence::High,
                        vec![
                            Action::Escalate {
                                reason: "a human signs off".into(),
                                choices: Vec::new(),
                            },
                            Action::Finish {
                                output: serde_json::json!({ "done": true }),
                            },
                        ],
                    )
                },
            )),
        );
        let bundle = "bundle = { id = \"b\" }\nagents = [{ id = \"external\" }, { id = \"worker\" }]\n[interactions]\nallowed = [{ from = \"external\", to = \"worker\" }, { from = \"worker\", to = \"external\" }]\n[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\n";
        let wf = docket_runtime::Workflow {
            spec: WorkflowSpec::parse(
                "name = \"w\"\npolicy = \"b.toml\"\nentry = \"worker\"\n[agents.worker]\nin_process = true\n",
                std::path::Path::new("w.workflow.toml"),
            )
            .expect("workflow"),
            bundle_source: bundle.into(),
            bundle_source_name: "b.toml".into(),
        };
        rt.start(
            &wf,
            serde_json::json!({}),
            Some(String::from("held-1").into()),
        )
        .await
        .expect("the run starts");
        (rt, faults.ops_seen())
    }

    /// A failure of the log's files is the server's: 5xx naming the file, never a 400;
    /// and nothing of it is kept: the run reads as it was.
    #[test]
    fn a_failed_write_of_the_log_is_a_server_error_naming_the_file() {
        let runs = tokio::runtime::Runtime::new().expect("runtime");
        // The same steps in a store without faults count the file operations before the
        // cancel's append, so that the faulty store fails exactly that one.
        let counted = tempfile::tempdir().expect("tempdir");
        let (_, before) =
            runs.block_on(waiting_run(counted.path(), docket_store::FaultPlan::new()));
        let dir = tempfile::tempdir().expect("tempdir");
        let addr = runs.block_on(async {
            let (rt, seen) =
                waiting_run(dir.path(), docket_store::FaultPlan::fail_op(before)).await;
            assert_eq!(seen, before, "the same steps, the same operations");
            serving(rt, dir.path()).await
        });
        let token = tokens::create(dir.path(), "t", Role::Admin, 0).expect("token");
        let answer = request(
            addr,
            &token,
            "POST",
            "/api/runs/held-1/cancel",
            r#"{"reason":"no longer needed"}"#,
        );
        assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
        let json: serde_json::Value =
            serde_json::from_str(answer.split_once("\r\n\r\n").map_or("", |(_, b)| b))
                .expect("a JSON error");
        assert_eq!(json["error"]["code"], "internal", "{json}");
        let at = json["error"]["where"].as_str().unwrap_or_default();
        assert!(at.starts_with("file ") && at.contains("log"), "{json}");
        let state = get(addr, &token, "/api/runs/held-1");
        assert!(state.starts_with("HTTP/1.1 200"), "{state}");
        assert!(state.contains("\"waiting_for_human\""), "{state}");
    }

    #[test]
    fn a_server_is_told_from_its_command_line() {
        assert!(is_server("/usr/bin/docket serve --listen 127.0.0.1:0"));
        assert!(is_server(
            "docket --data /d --lock-wait 3 serve --allow-remote"
        ));
        assert!(!is_server("docket run serve.toml"));
        assert!(!is_server("docket --data serve run w.toml"));
        assert!(!is_server("docket"));
    }
}
