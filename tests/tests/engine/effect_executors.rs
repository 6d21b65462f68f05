//! Effect executors against the contract (dry run, execute at most once per idempotency
//! key, verify), in-process, as a command speaking JSON lines (the `effect-ledger` test
//! binary, which keeps its own ledger file) and over HTTP; their failures (timeouts,
//! crashes and restarts, malformed and oversized answers, HTTP error statuses); the
//! workflow's `[effects]` sections; and the kill-switch file, through the API and through
//! `docket kill-switch`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use docket_decider::WorkflowSpec;
use docket_decider::{DryRunReport, EffectCallError, EffectReceipt, EffectRequest, Verification};
use docket_decider::{EffectAnswer, EffectCall, EffectOp};
use docket_runtime::CommandConfig;
use docket_runtime::{
    CommandEffectExecutor, EffectExecutor, EffectExecutors, FileKillSwitch, HttpEffectExecutor,
    InProcessEffectExecutor, KillSwitchSource,
};
use docket_tests::docket_bin;
use serde_json::{Value, json};

const LEDGER_BIN: &str = env!("CARGO_BIN_EXE_effect-ledger");

fn request(key: &str) -> EffectRequest {
    EffectRequest {
        run_id: "run-1".into(),
        episode_id: "ep-1".into(),
        effect_id: format!("run-1/effect-{key}").into(),
        kind: "publish".into(),
        lane: "api".into(),
        idempotency_key: key.into(),
        params: json!({ "text": format!("hello {key}") }),
        attempt: 1,
        timeout_ms: 5_000,
        fence: None,
        target: None,
    }
}

/// The contract every executor keeps: a dry run changes nothing, `execute` applies a key
/// once (a second call returns the first receipt), `verify` tells applied from not.
/// `applied` counts the applications of a key in the executor's own records.
async fn keeps_the_contract(executor: &dyn EffectExecutor, applied: &dyn Fn(&str) -> usize) {
    assert!(executor.supports_dry_run());
    let report = executor.dry_run(&request("k1")).await.expect("dry run");
    assert!(report.ok, "{report:?}");
    assert_eq!(applied("k1"), 0, "a dry run applies nothing");
    assert_eq!(
        executor.verify(&request("k1")).await,
        Ok(Verification::NotApplied)
    );
    let first = executor.execute(&request("k1")).await.expect("execute");
    let mut again = request("k1");
    again.attempt = 2;
    let second = executor.execute(&again).await.expect("execute again");
    assert_eq!(first, second, "the same key gets the first receipt");
    assert_eq!(applied("k1"), 1, "applied once");
    assert_eq!(
        executor.verify(&request("k1")).await,
        Ok(Verification::Applied {
            result: first.result.clone()
        })
    );
    assert_eq!(
        executor.verify(&request("k2")).await,
        Ok(Verification::NotApplied),
        "another key is not applied"
    );
}

/// An in-memory ledger serving the contract, for the in-process and HTTP executors.
#[derive(Default, Clone)]
struct MemoryLedger(Arc<Mutex<BTreeMap<String, (Value, usize)>>>);

impl MemoryLedger {
    fn applied(&self, key: &str) -> usize {
        self.0
            .lock()
            .expect("ledger")
            .get(key)
            .map_or(0, |(_, n)| *n)
    }

    fn execute(&self, request: &EffectRequest) -> EffectReceipt {
        let mut ledger = self.0.lock().expect("ledger");
        let entry = ledger
            .entry(request.idempotency_key.clone())
            .or_insert_with(|| {
                (
                    json!({ "post_id": format!("post-{}", request.idempotency_key) }),
                    0,
                )
            });
        if entry.1 == 0 {
            entry.1 = 1;
        }
        EffectReceipt {
            result: entry.0.clone(),
            drift: None,
        }
    }

    fn verify(&self, request: &EffectRequest) -> Verification {
        match self.0.lock().expect("ledger").get(&request.idempotency_key) {
            Some((result, n)) if *n > 0 => Verification::Applied {
                result: result.clone(),
            },
            _ => Verification::NotApplied,
        }
    }

    fn dry_run(request: &EffectRequest) -> DryRunReport {
        DryRunReport {
            ok: request.params.get("text").is_some(),
            preview: request.params.clone(),
            message: None,
        }
    }
}

mod in_process {
    use super::*;

    #[tokio::test]
    async fn closures_keep_the_contract() {
        let ledger = MemoryLedger::default();
        let (e, v) = (ledger.clone(), ledger.clone());
        let executor =
            InProcessEffectExecutor::from_fns(move |r| Ok(e.execute(r)), move |r| Ok(v.verify(r)))
                .with_dry_run(|r| Ok(MemoryLedger::dry_run(r)));
        let executor: Arc<dyn EffectExecutor> = Arc::new(executor);
        keeps_the_contract(executor.as_ref(), &|k| ledger.applied(k)).await;
    }
}

mod command {
    use super::*;

    struct Ledger {
        _dir: tempfile::TempDir,
        file: PathBuf,
        calls: PathBuf,
    }

    impl Ledger {
        fn new() -> Self {
            let dir = tempfile::tempdir().expect("tempdir");
            Self {
                file: dir.path().join("ledger.tsv"),
                calls: dir.path().join("calls.tsv"),
                _dir: dir,
            }
        }

        fn config(&self) -> CommandConfig {
            CommandConfig::new(LEDGER_BIN)
                .args(["--ledger", self.file.to_str().expect("utf-8")])
                .env("EFFECT_LEDGER_CALLS", &self.calls)
        }

        fn executor(&self, env: &[(&str, &str)]) -> CommandEffectExecutor {
            let mut config = self.config();
            for (k, v) in env {
                config = config.env(k, v);
            }
            CommandEffectExecutor::new(config)
        }

        fn lines(&self) -> Vec<String> {
            std::fs::read_to_string(&self.file)
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect()
        }

        fn applied(&self, key: &str) -> usize {
            self.lines()
                .iter()
                .filter(|l| l.split('\t').next() == Some(key))
                .count()
        }

        fn calls(&self) -> Vec<String> {
            std::fs::read_to_string(&self.calls)
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect()
        }
    }

    #[tokio::test]
    async fn the_ledger_executor_keeps_the_contract_in_one_process() {
        let ledger = Ledger::new();
        let executor = ledger.executor(&[]);
        keeps_the_contract(&executor, &|k| ledger.applied(k)).await;
        assert_eq!(
            executor.start_count(),
            1,
            "the process is kept between calls"
        );
        assert_eq!(
            ledger.lines(),
            ["k1\t{\"post_id\":\"post-k1\",\"text\":\"hello k1\"}"]
        );
        assert_eq!(
            ledger.calls(),
            [
                "dry_run\tk1\tok",
                "verify\tk1\tnot_applied",
                "execute\tk1\tapplied",
                "execute\tk1\tduplicate",
                "verify\tk1\tapplied",
                "verify\tk2\tnot_applied"
            ]
        );
    }

    /// docs/effect-protocol.md, "Fences": the late `execute` of a worker that lost its run
    /// (fence 1) reaches the executor after the new holder verified under fence 2. Two
    /// executor processes over one ledger, as two workers' are.
    #[tokio::test]
    async fn a_call_under_an_older_fence_is_refused_once_a_newer_one_was_seen() {
        let ledger = Ledger::new();
        let (stale, holder) = (ledger.executor(&[]), ledger.executor(&[]));
        let under = |fence| {
            let mut r = request("k1");
            r.fence = Some(fence);
            r
        };
        assert_eq!(holder.verify(&under(2)).await, Ok(Verification::NotApplied));
        let refused = stale.execute(&under(1)).await.expect_err("fenced");
        assert_eq!(refused.code(), "FENCED");
        assert_eq!(ledger.applied("k1"), 0, "the late call applied nothing");
        holder.execute(&under(2)).await.expect("applies");
        // A call without a fence (a store with one writer) is not fenced; its key is applied.
        let receipt = stale.execute(&request("k1")).await.expect("answers");
        assert_eq!(receipt.result["post_id"], "post-k1");
        assert_eq!(ledger.applied("k1"), 1);
        assert_eq!(
            ledger.calls(),
            [
                "verify\tk1\tnot_applied",
                "execute\tk1\tfenced",
                "execute\tk1\tapplied",
                "execute\tk1\tduplicate"
            ]
        );
    }

    #[tokio::test]
    async fn a_dry_run_reports_bad_params_without_failing() {
        let ledger = Ledger::new();
        let executor = ledger.executor(&[]);
        let mut bad = request("k1");
        bad.params = json!({ "txt": 1 });
        let report = executor.dry_run(&bad).await.expect("answers");
        assert!(!report.ok);
        assert!(report.message.is_some_and(|m| m.contains("text")));
    }

    #[tokio::test]
    async fn a_refused_execute_is_a_failure_with_the_executors_code() {
        let ledger = Ledger::new();
        let executor = ledger.executor(&[("EFFECT_LEDGER_FAIL_EXECUTE", "1")]);
        let err = executor.execute(&request("k1")).await.expect_err("fails");
        assert_eq!(err.code(), "LEDGER_INJECTED_FAILURE");
        assert_eq!(ledger.applied("k1"), 0);
        // The second execute of the same process goes through.
        executor.execute(&request("k1")).await.expect("applies");
        assert_eq!(ledger.applied("k1"), 1);
    }

    #[tokio::test]
    async fn a_hung_call_times_out_kills_the_process_and_the_next_call_restarts_it() {
        let ledger = Ledger::new();
        let executor = ledger.executor(&[("EFFECT_LEDGER_HANG", "execute")]);
        let mut hung = request("k1");
        hung.timeout_ms = 300;
        let err = executor.execute(&hung).await.expect_err("hangs");
        assert_eq!(
            err,
            EffectCallError::Timeout {
                effect_id: "run-1/effect-k1".into(),
                timeout_ms: 300
            }
        );
        assert_eq!(
            executor.verify(&request("k1")).await,
            Ok(Verification::NotApplied)
        );
        assert_eq!(
            executor.start_count(),
            2,
            "killed at the timeout, started again"
        );
    }

    #[tokio::test]
    async fn a_crash_after_applying_is_unavailable_and_verify_finds_the_effect() {
        let ledger = Ledger::new();
        let executor = ledger.executor(&[
            ("EFFECT_LEDGER_CRASH_EXECUTE", "1"),
            ("EFFECT_LEDGER_CRASH_AFTER_APPEND", "1"),
        ]);
        let err = executor.execute(&request("k1")).await.expect_err("crashes");
        let EffectCallError::Unavailable { message, .. } = &err else {
            panic!("{err:?}");
        };
        assert!(message.contains("exit code 3"), "{message}");
        assert!(
            message.contains("crashing after the append of k1"),
            "{message}"
        );
        assert!(
            matches!(
                executor.verify(&request("k1")).await,
                Ok(Verification::Applied { .. })
            ),
            "the restarted process reads the ledger"
        );
        assert_eq!(executor.start_count(), 2);
        assert_eq!(ledger.applied("k1"), 1);
    }

    #[tokio::test]
    async fn a_crash_before_applying_leaves_the_key_not_applied() {
        let ledger = Ledger::new();
        let executor = ledger.executor(&[("EFFECT_LEDGER_CRASH_EXECUTE", "1")]);
        let err = executor.execute(&request("k1")).await.expect_err("crashes");
        assert_eq!(err.code(), "EFFECT_UNAVAILABLE");
        assert_eq!(
            executor.verify(&request("k1")).await,
            Ok(Verification::NotApplied)
        );
        assert_eq!(ledger.applied("k1"), 0);
    }

    fn malformed(err: &EffectCallError) -> &str {
        match err {
            EffectCallError::Malformed { message, .. } => message,
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn malformed_answers_say_what_was_wrong() {
        let ledger = Ledger::new();
        let executor = ledger.executor(&[("EFFECT_LEDGER_ANSWER", "garbage")]);
        let err = executor.verify(&request("k1")).await.expect_err("garbage");
        assert!(malformed(&err).contains("not JSON"), "{err}");

        let executor = ledger.executor(&[("EFFECT_LEDGER_ANSWER", "wrong_id")]);
        let err = executor.verify(&request("k1")).await.expect_err("wrong id");
        assert!(malformed(&err).contains("\"someone-else\""), "{err}");
    }

    #[tokio::test]
    async fn an_oversized_answer_is_malformed_and_the_process_is_replaced() {
        let ledger = Ledger::new();
        let config = ledger
            .config()
            .env("EFFECT_LEDGER_ANSWER", "oversized")
            .max_response_bytes(64 * 1024);
        let executor = CommandEffectExecutor::new(config);
        let err = executor.dry_run(&request("k1")).await.expect_err("too big");
        assert!(
            malformed(&err).contains("exceeds the limit of 65536 bytes"),
            "{err}"
        );
        let _ = executor.dry_run(&request("k1")).await;
        assert_eq!(
            executor.start_count(),
            2,
            "never reads the rest of the line"
        );
    }

    #[tokio::test]
    async fn a_missing_program_is_unavailable() {
        let executor = CommandEffectExecutor::new(CommandConfig::new("/nonexistent/effect-exec"));
        let err = executor.execute(&request("k1")).await.expect_err("missing");
        assert!(
            matches!(&err, EffectCallError::Unavailable { message, .. } if message.contains("cannot start")),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn the_workflow_declares_the_executor_and_it_is_built_once() {
        let ledger = Ledger::new();
        let text = format!(
            "name = \"w\"\npolicy = \"p.toml\"\nentry = \"a\"\n[agents.a]\nin_process = true\n\
             [effects.publish]\ncommand = {:?}\nargs = [\"--ledger\", {:?}]\ntimeout_ms = 250\n",
            LEDGER_BIN,
            ledger.file.to_str().expect("utf-8")
        );
        let workflow = WorkflowSpec::parse(&text, Path::new("w.toml")).expect("parses");
        let executors = EffectExecutors::default();
        let first = executors.get(&workflow, "publish").expect("declared");
        let second = executors.get(&workflow, "publish").expect("declared");
        assert!(Arc::ptr_eq(&first, &second), "built once, cached");
        first.execute(&request("k9")).await.expect("applies");
        assert_eq!(ledger.applied("k9"), 1);
        assert!(matches!(
            executors.get(&workflow, "dm"),
            Err(EffectCallError::NoExecutor { kind }) if kind == "dm"
        ));

        // The section's timeout replaces the request's.
        let hanging = format!("{text}env = {{ EFFECT_LEDGER_HANG = \"verify\" }}\n");
        let workflow = WorkflowSpec::parse(&hanging, Path::new("w.toml")).expect("parses");
        let executor = EffectExecutors::default()
            .get(&workflow, "publish")
            .expect("declared");
        assert!(matches!(
            executor.verify(&request("k9")).await,
            Err(EffectCallError::Timeout {
                timeout_ms: 250,
                ..
            })
        ));

        // A registered executor comes first.
        let executors = EffectExecutors::default();
        let registered: Arc<dyn EffectExecutor> = Arc::new(InProcessEffectExecutor::from_fns(
            |_| {
                Ok(EffectReceipt {
                    result: json!("in-process"),
                    drift: None,
                })
            },
            |_| Ok(Verification::NotApplied),
        ));
        executors.register("publish", registered.clone());
        assert!(Arc::ptr_eq(
            &executors.get(&workflow, "publish").expect("registered"),
            &registered
        ));
    }
}

mod http {
    use super::*;
    use std::convert::Infallible;
    use std::net::SocketAddr;
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper::{Request, Response, StatusCode};
    use hyper_util::rt::TokioIo;
    use tokio::net::TcpListener;
    use tokio::task::JoinHandle;

    /// An HTTP effect service on 127.0.0.1 over a [`MemoryLedger`]; its path picks a
    /// fault. Stops when dropped.
    struct Service {
        addr: SocketAddr,
        ledger: MemoryLedger,
        accept_loop: JoinHandle<()>,
    }

    impl Drop for Service {
        fn drop(&mut self) {
            self.accept_loop.abort();
        }
    }

    impl Service {
        async fn start() -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("address");
            let ledger = MemoryLedger::default();
            let served = ledger.clone();
            let accept_loop = tokio::spawn(async move {
                for _ in 0..64 {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let ledger = served.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |r| handle(ledger.clone(), r));
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
            Self {
                addr,
                ledger,
                accept_loop,
            }
        }

        fn executor(&self, path: &str) -> HttpEffectExecutor {
            HttpEffectExecutor::new(&format!("http://{}{path}", self.addr)).expect("valid URL")
        }
    }

    fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(body.into()));
        *response.status_mut() = status;
        response
    }

    async fn handle(
        ledger: MemoryLedger,
        request: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        let path = request.uri().path().to_owned();
        let body = request
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let Ok(call) = serde_json::from_slice::<EffectCall>(&body) else {
            return Ok(reply(StatusCode::BAD_REQUEST, "not an effect call"));
        };
        let r = &call.request;
        let id = r.effect_id.clone();
        let text = match path.as_str() {
            "/rejects" => return Ok(reply(StatusCode::UNPROCESSABLE_ENTITY, "bad params")),
            "/broken" => return Ok(reply(StatusCode::INTERNAL_SERVER_ERROR, "boom")),
            "/slow" => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                String::new()
            }
            "/huge" => format!(
                "{{\"effect_id\":{id:?},\"result\":{{\"ok\":true,\"preview\":\"{}\"}}}}",
                "x".repeat(200_000)
            ),
            "/garbage" => "<html>".to_owned(),
            _ => match call.op {
                EffectOp::DryRun => {
                    serde_json::to_string(&EffectAnswer::ok(id, MemoryLedger::dry_run(r)))
                }
                EffectOp::Execute => {
                    serde_json::to_string(&EffectAnswer::ok(id, ledger.execute(r)))
                }
                EffectOp::Verify => serde_json::to_string(&EffectAnswer::ok(id, ledger.verify(r))),
            }
            .unwrap_or_default(),
        };
        Ok(reply(StatusCode::OK, text))
    }

    #[tokio::test]
    async fn an_http_service_keeps_the_contract() {
        let service = Service::start().await;
        let executor = service.executor("/effects");
        keeps_the_contract(&executor, &|k| service.ledger.applied(k)).await;
    }

    #[tokio::test]
    async fn http_error_statuses_timeouts_and_bad_bodies() {
        let service = Service::start().await;
        let err = service
            .executor("/rejects")
            .execute(&request("k1"))
            .await
            .expect_err("422");
        assert!(
            matches!(&err, EffectCallError::Failed { code, message, .. }
                if code == "EFFECT_HTTP_422" && message.contains("bad params")),
            "a 4xx is a refusal: {err:?}"
        );
        let err = service
            .executor("/broken")
            .execute(&request("k1"))
            .await
            .expect_err("500");
        assert!(
            matches!(&err, EffectCallError::Unavailable { message, .. } if message.contains("HTTP 500")),
            "a 5xx may have applied, so it is not a failure: {err:?}"
        );
        let mut quick = request("k1");
        quick.timeout_ms = 200;
        assert!(matches!(
            service.executor("/slow").verify(&quick).await,
            Err(EffectCallError::Timeout {
                timeout_ms: 200,
                ..
            })
        ));
        let err = service
            .executor("/huge")
            .max_response_bytes(64 * 1024)
            .dry_run(&request("k1"))
            .await
            .expect_err("huge");
        assert!(
            matches!(&err, EffectCallError::Malformed { message, .. } if message.contains("exceeds the limit")),
            "{err:?}"
        );
        let err = service
            .executor("/garbage")
            .verify(&request("k1"))
            .await
            .expect_err("garbage");
        assert!(
            matches!(&err, EffectCallError::Malformed { message, .. } if message.contains("not JSON")),
            "{err:?}"
        );
        assert_eq!(service.ledger.applied("k1"), 0);
    }
}

mod kill_switch {
    use super::*;

    #[test]
    fn lanes_and_the_global_switch_are_engaged_and_released() {
        let dir = tempfile::tempdir().expect("tempdir");
        let switches = FileKillSwitch::new(dir.path());
        let source: &dyn KillSwitchSource = &switches;
        let read = || futures::executor::block_on(source.engaged());
        assert_eq!(read(), Ok(vec![]));
        switches
            .set("browser", true, "ops", "captcha storm", 1)
            .expect("on");
        assert_eq!(read(), Ok(vec!["browser".to_owned()]));
        switches
            .set("global", true, "ops", "incident", 2)
            .expect("on");
        assert_eq!(read(), Ok(vec!["browser".to_owned(), "global".to_owned()]));
        switches.set("browser", false, "ops", "", 3).expect("off");
        switches.set("global", false, "ops", "", 4).expect("off");
        assert_eq!(read(), Ok(vec![]));
        assert_eq!(switches.history().expect("history").len(), 4);
    }

    #[test]
    fn a_corrupt_file_counts_as_an_error_so_every_switch_is_engaged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let switches = FileKillSwitch::new(dir.path());
        std::fs::write(switches.path(), b"{\"engaged\": {\"api\": 3}}").expect("write");
        let err = switches.engaged().expect_err("corrupt");
        assert!(err.location.ends_with("kill-switches.json"), "{err}");
        assert!(
            err.message.contains("every switch counts as engaged"),
            "{err}"
        );
    }

    #[test]
    fn concurrent_writers_neither_corrupt_the_file_nor_lose_flips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let switches = FileKillSwitch::new(dir.path());
                std::thread::spawn(move || {
                    for i in 0..10 {
                        // Each thread ends with its lane engaged.
                        let on = i % 2 == 1;
                        switches
                            .set(&format!("lane{t}"), on, "t", "", i)
                            .expect("flip");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("writer");
        }
        let switches = FileKillSwitch::new(dir.path());
        let engaged = switches.engaged().expect("readable");
        assert_eq!(
            engaged,
            (0..8).map(|t| format!("lane{t}")).collect::<Vec<_>>()
        );
        assert_eq!(switches.history().expect("history").len(), 80);
    }

    fn docket(data: &Path, args: &[&str]) -> std::process::Output {
        Command::new(docket_bin())
            .args(args)
            .arg("--data")
            .arg(data)
            .output()
            .expect("docket runs")
    }

    #[test]
    fn docket_kill_switch_on_off_and_status() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let out = docket(&data, &["kill-switch", "status"]);
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "no kill switch engaged\n"
        );

        let out = docket(
            &data,
            &[
                "kill-switch",
                "on",
                "--lane",
                "api",
                "--by",
                "ops",
                "--reason",
                "bad posts",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "kill switch api engaged (by ops)\n"
        );
        let out = docket(&data, &["kill-switch", "on", "--by", "ops"]);
        assert!(out.status.success());
        assert_eq!(
            FileKillSwitch::new(&data).engaged(),
            Ok(vec!["api".to_owned(), "global".to_owned()])
        );

        let out = docket(&data, &["kill-switch", "status", "--json", "--history"]);
        assert!(out.status.success());
        let status: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(status["engaged"]["api"]["by"], "ops");
        assert_eq!(status["engaged"]["api"]["reason"], "bad posts");
        assert_eq!(status["history"].as_array().map(Vec::len), Some(2));

        let out = docket(
            &data,
            &["kill-switch", "off", "--lane", "api", "--by", "ops"],
        );
        assert!(out.status.success());
        assert_eq!(
            FileKillSwitch::new(&data).engaged(),
            Ok(vec!["global".to_owned()])
        );

        // Several processes at once: every flip lands.
        let children: Vec<_> = (0..6)
            .map(|i| {
                Command::new(docket_bin())
                    .args(["kill-switch", "on", "--lane", &format!("l{i}"), "--data"])
                    .arg(&data)
                    .spawn()
                    .expect("spawn docket")
            })
            .collect();
        for child in children {
            assert!(child.wait_with_output().expect("wait").status.success());
        }
        assert_eq!(FileKillSwitch::new(&data).engaged().map(|e| e.len()), Ok(7));

        let out = docket(&data, &["kill-switch", "on", "--lane", "a b"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("invalid switch name"));

        std::fs::write(data.join("kill-switches.json"), "garbage").expect("write");
        let out = docket(&data, &["kill-switch", "status"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("every switch counts as engaged"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

mod doc {
    use super::*;
    use docket_decider::accept_effect_answer as accept_answer;
    use docket_tests::{doc_example, workspace_root};

    #[test]
    fn the_documented_call_and_answers_are_what_docket_sends_and_accepts() {
        let doc = std::fs::read_to_string(workspace_root().join("docs/effect-protocol.md"))
            .expect("docs/effect-protocol.md");
        let call: EffectCall =
            serde_json::from_str(&doc_example(&doc, "call").expect("call example"))
                .expect("the call parses");
        assert_eq!(call.op, EffectOp::Execute);
        let request = &call.request;
        let answer = |name: &str| doc_example(&doc, name).expect(name).into_bytes();
        let report: DryRunReport =
            accept_answer(request, EffectOp::DryRun, &answer("dry_run_answer")).expect("dry run");
        assert!(report.ok);
        let receipt: EffectReceipt =
            accept_answer(request, EffectOp::Execute, &answer("execute_answer")).expect("receipt");
        assert_eq!(receipt.result["post_id"], "1789");
        let verification: Verification =
            accept_answer(request, EffectOp::Verify, &answer("verify_answer")).expect("verify");
        assert!(matches!(verification, Verification::Applied { .. }));
        // Browser lanes: a receipt with drift evidence of the documented form, and the
        // error that reports unstable selectors.
        let receipt: EffectReceipt = accept_answer(
            request,
            EffectOp::Execute,
            &answer("browser_execute_answer"),
        )
        .expect("browser receipt");
        let drift = receipt.drift.expect("drift evidence");
        assert_eq!(drift.problem(), None, "{drift:?}");
        let err = accept_answer::<EffectReceipt>(
            request,
            EffectOp::Execute,
            &answer("unstable_selectors_answer"),
        )
        .expect_err("an error answer");
        assert_eq!(err.code(), docket_decider::UNSTABLE_SELECTORS);
    }

    #[test]
    fn the_checked_in_effect_schema_is_the_one_the_types_generate() {
        let path = workspace_root().join("docs/effect-protocol.schema.json");
        // After a change to the protocol types, DOCKET_BLESS_SCHEMA=1 rewrites the file.
        if std::env::var_os("DOCKET_BLESS_SCHEMA").is_some() {
            std::fs::write(&path, docket_decider::effect_protocol_schema_pretty())
                .expect("write the schema");
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        // As JSON values: key order follows serde_json's `preserve_order`.
        let parse = |text: &str| serde_json::from_str::<Value>(text).ok();
        assert!(
            parse(&checked_in).is_some()
                && parse(&checked_in) == parse(&docket_decider::effect_protocol_schema_pretty()),
            "{} is stale: run `DOCKET_BLESS_SCHEMA=1 cargo test -p docket-tests schema`",
            path.display()
        );
        let defs = &parse(&checked_in).unwrap_or_default()["$defs"];
        for name in ["EffectCall", "EffectOp", "EffectRequest", "Verification"] {
            assert!(defs[name].is_object(), "the schema defines {name}");
        }
    }
}

/// `docket run` reads the data directory's kill-switch file before executing an effect.
mod run_reads_the_kill_switch {
    use super::*;
    use docket_store_postgres::{TestCluster, TestDatabase};

    const AGENT: &str = env!("CARGO_BIN_EXE_effect-agent");

    const BUNDLE: &str = r#"
bundle = { id = "kill" }
[[agents]]
id = "external"
[[agents]]
id = "publisher"
side_effects = ["publish"]
[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = false
[interactions]
allowed = [{ from = "external", to = "publisher" }, { from = "publisher", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

    /// Runs the one-publish workflow in `data`; the run's output and its
    /// `effect.kill_switch_checked` payloads.
    fn run(root: &Path, data: &Path, run: &str) -> (Value, Vec<Value>) {
        run_with(root, data, run, 1, "")
    }

    /// Like [`run`], with `count` publishes and extra `[effects.publish]` lines.
    fn run_with(
        root: &Path,
        data: &Path,
        run: &str,
        count: u32,
        effect_extra: &str,
    ) -> (Value, Vec<Value>) {
        run_in(root, data, &[], run, count, effect_extra)
    }

    /// Like [`run_with`], recorded in the store `store` names (`--store URL`, or nothing
    /// for the data directory).
    fn run_in(
        root: &Path,
        data: &Path,
        store: &[&str],
        run: &str,
        count: u32,
        effect_extra: &str,
    ) -> (Value, Vec<Value>) {
        std::fs::write(root.join("bundle.toml"), BUNDLE).expect("bundle");
        std::fs::write(root.join("input.json"), "{}").expect("input");
        let workflow = root.join("workflow.toml");
        std::fs::write(
            &workflow,
            format!(
                "name = \"kill\"\npolicy = \"bundle.toml\"\nentry = \"publisher\"\ninput = \"input.json\"\n\
                 [agents.publisher]\ncommand = {AGENT:?}\nargs = [\"--prefix\", \"{run}\", \"--count\", \"{count}\", \"--lane\", \"api\"]\n\
                 [effects.publish]\ncommand = {LEDGER_BIN:?}\nargs = [\"--ledger\", {:?}]\n{effect_extra}\n",
                root.join("ledger.tsv")
            ),
        )
        .expect("workflow");
        let out = Command::new(docket_bin())
            .args([
                "run",
                workflow.to_str().expect("utf-8"),
                "--run-id",
                run,
                "--data",
            ])
            .arg(data)
            .args(store)
            .env_remove("DOCKET_STORE")
            .output()
            .expect("docket run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = Command::new(docket_bin())
            .args(["events", run, "--json", "--data"])
            .arg(data)
            .args(store)
            .env_remove("DOCKET_STORE")
            .output()
            .expect("docket events");
        let mut output = Value::Null;
        let mut checked = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let e: Value = serde_json::from_str(line).expect("JSON");
            match e["kind"].as_str() {
                Some("run.completed") => output = e["payload"]["output"].clone(),
                Some("effect.kill_switch_checked") => checked.push(e["payload"].clone()),
                _ => {}
            }
        }
        (output, checked)
    }

    #[test]
    fn an_engaged_lane_refuses_the_effect_and_a_released_one_lets_it_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let switches = FileKillSwitch::new(&data);
        // Through the binary first: engaging a switch in a fresh data directory must not
        // keep the first `docket run` out of it.
        let out = Command::new(docket_bin())
            .args([
                "kill-switch",
                "on",
                "--lane",
                "api",
                "--by",
                "ops",
                "--data",
            ])
            .arg(&data)
            .output()
            .expect("docket kill-switch");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (output, checked) = run(dir.path(), &data, "r1");
        assert_eq!(output["results"][0]["status"], "refused", "{output}");
        assert_eq!(checked.len(), 1);
        assert_eq!(checked[0]["engaged"], json!(["api"]));
        assert!(
            std::fs::read_to_string(dir.path().join("ledger.tsv"))
                .unwrap_or_default()
                .is_empty()
        );

        switches
            .set("api", false, "ops", "resolved", 2)
            .expect("off");
        let (output, checked) = run(dir.path(), &data, "r2");
        assert_eq!(output["results"][0]["status"], "applied", "{output}");
        assert_eq!(checked[0]["engaged"], json!([]));

        // An unreadable file stops effects, and the run's log says why.
        std::fs::write(switches.path(), "{").expect("corrupt");
        let (output, checked) = run(dir.path(), &data, "r3");
        assert_eq!(output["results"][0]["status"], "refused", "{output}");
        assert_eq!(checked[0]["engaged"], json!(["api", "global"]));
        assert!(
            checked[0]["error"]
                .as_str()
                .is_some_and(|e| e.contains("corrupt")),
            "{}",
            checked[0]
        );
    }

    #[test]
    fn a_switch_engaged_by_another_process_mid_run_stops_the_next_effect() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        // The executor engages the api lane through `docket kill-switch` right after
        // applying the first publish, while `docket run` holds the data directory.
        let engage = serde_json::to_string(&json!([
            docket_bin(),
            "kill-switch",
            "on",
            "--lane",
            "api",
            "--by",
            "operator",
            "--data",
            data
        ]))
        .expect("json");
        let extra = format!("env = {{ EFFECT_LEDGER_ON_EXECUTE = {engage:?} }}");
        let (output, checked) = run_with(dir.path(), &data, "mid", 2, &extra);
        let statuses: Vec<&Value> = output["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| &r["status"])
            .collect();
        assert_eq!(statuses, [&json!("applied"), &json!("refused")], "{output}");
        assert_eq!(checked[0]["engaged"], json!([]));
        assert_eq!(checked[1]["engaged"], json!(["api"]));
        let ledger = std::fs::read_to_string(dir.path().join("ledger.tsv")).expect("ledger");
        assert_eq!(ledger.lines().count(), 1, "only the first publish applied");
        let history = FileKillSwitch::new(&data).history().expect("history");
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].by, "operator");
    }

    /// The database as messages name it: `postgres://USER@SOCKET_DIR:PORT/NAME`.
    fn named(db: &TestDatabase) -> String {
        let host = db.url.split('@').nth(1).and_then(|h| h.split(':').next());
        format!(
            "postgres://docket@{}:5432/{}",
            host.expect("a socket directory").replace("%2F", "/"),
            db.name
        )
    }

    /// `docket kill-switch ARGS --store URL`, from a process whose data directory is
    /// another: the switches are the database's, whatever the data directory.
    fn switch(url: &str, root: &Path, args: &[&str]) -> std::process::Output {
        Command::new(docket_bin())
            .arg("kill-switch")
            .args(args)
            .args(["--store", url, "--data"])
            .arg(root.join("elsewhere"))
            .env_remove("DOCKET_STORE")
            .output()
            .expect("docket kill-switch")
    }

    #[test]
    fn on_postgres_the_databases_switches_stop_the_effects_of_every_process() {
        let Some(cluster) = TestCluster::shared() else {
            return;
        };
        let db = cluster.database();
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let store = ["--store", db.url.as_str()];
        let out = switch(
            &db.url,
            dir.path(),
            &[
                "on",
                "--lane",
                "api",
                "--by",
                "ops",
                "--reason",
                "bad posts",
            ],
        );
        assert_eq!(
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned()
            ),
            (Some(0), "kill switch api engaged (by ops)\n".to_owned()),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (output, checked) = run_in(dir.path(), &data, &store, "p1", 1, "");
        assert_eq!(output["results"][0]["status"], "refused", "{output}");
        assert_eq!(checked.len(), 1);
        assert_eq!(checked[0]["engaged"], json!(["api"]));
        assert!(
            !data.join("kill-switches.json").exists()
                && !dir.path().join("elsewhere/kill-switches.json").exists(),
            "no data directory holds the switches"
        );

        let out = switch(
            &db.url,
            dir.path(),
            &["off", "--lane", "api", "--by", "ana"],
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "kill switch api released (by ana)\n"
        );
        let (output, checked) = run_in(dir.path(), &data, &store, "p2", 1, "");
        assert_eq!(output["results"][0]["status"], "applied", "{output}");
        assert_eq!(checked[0]["engaged"], json!([]));

        // Engaged from another process while the run goes on: its next effect stops.
        let engage = serde_json::to_string(&json!([
            docket_bin(),
            "kill-switch",
            "on",
            "--lane",
            "api",
            "--by",
            "operator",
            "--store",
            db.url,
            "--data",
            dir.path().join("elsewhere")
        ]))
        .expect("json");
        let extra = format!("env = {{ EFFECT_LEDGER_ON_EXECUTE = {engage:?} }}");
        let (output, checked) = run_in(dir.path(), &data, &store, "p3", 2, &extra);
        let statuses: Vec<&Value> = output["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| &r["status"])
            .collect();
        assert_eq!(statuses, [&json!("applied"), &json!("refused")], "{output}");
        assert_eq!(checked[1]["engaged"], json!(["api"]));

        // Every flip is in the database's history, with who, when, why and what changed.
        let out = switch(&db.url, dir.path(), &["status", "--json", "--history"]);
        let mut status: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let mut last = 0;
        for flip in status["history"].as_array_mut().expect("history") {
            let ms = flip["at_ms"].as_i64().expect("a time");
            assert!(ms >= last, "in the order taken");
            last = ms;
            flip["at_ms"] = json!(0);
        }
        assert_eq!(status["engaged"]["api"]["at_ms"], json!(last));
        status["engaged"]["api"]["at_ms"] = json!(0);
        assert_eq!(
            status,
            json!({
                "database": format!("PostgreSQL at {} (table docket_kill_switches)", named(&db)),
                "engaged": { "api": { "by": "operator", "at_ms": 0, "reason": "" } },
                "history": [
                    { "switch": "api", "on": true, "by": "ops", "at_ms": 0, "reason": "bad posts", "changed": true },
                    { "switch": "api", "on": false, "by": "ana", "at_ms": 0, "reason": "", "changed": true },
                    { "switch": "api", "on": true, "by": "operator", "at_ms": 0, "reason": "", "changed": true },
                ]
            })
        );

        // A table that cannot be read stops every effect, and the run's log says why.
        let out = switch(
            &db.url,
            dir.path(),
            &["off", "--lane", "api", "--by", "ana"],
        );
        assert!(out.status.success());
        tokio::runtime::Runtime::new()
            .expect("runtime")
            .block_on(async {
                let (client, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
                    .await
                    .expect("connect");
                tokio::spawn(connection);
                client
                    .batch_execute("ALTER TABLE docket_kill_switches RENAME TO hidden")
                    .await
                    .expect("rename");
            });
        let (output, checked) = run_in(dir.path(), &data, &store, "p4", 1, "");
        assert_eq!(output["results"][0]["status"], "refused", "{output}");
        assert_eq!(checked[0]["engaged"], json!(["api", "global"]));
        assert_eq!(
            checked[0]["error"],
            json!(format!(
                "cannot read the kill switches at PostgreSQL at {db} (table docket_kill_switches): PostgreSQL at {db}, while reading the kill switches: relation \"docket_kill_switches\" does not exist (SQLSTATE 42P01)",
                db = named(&db)
            ))
        );
    }
}
