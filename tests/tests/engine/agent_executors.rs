//! The agent executors against real agents: the `test-agent` binary as a command, an HTTP
//! server on 127.0.0.1, and the Python example agent when `python3` is available.

use std::sync::Arc;

use docket_decider::{Action, AgentRequest, AgentResponse, ResponseStatus};
use docket_runtime::{AgentCallError, AgentExecutor, CommandConfig, CommandExecutor, HttpExecutor};
use serde_json::{Value, json};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");
const WAITING_AGENT: &str = env!("CARGO_BIN_EXE_waiting-agent");

fn test_agent(args: &[&str]) -> CommandExecutor {
    CommandExecutor::new(CommandConfig::new(TEST_AGENT).args(args.iter().copied()))
}

/// A request whose capability_code picks the test agent's behaviour.
fn request(id: &str, behaviour: &str) -> AgentRequest {
    AgentRequest::new(id, "external", "test-agent", behaviour)
        .in_run("run-1", "ep-1", "corr-1")
        .with_timeout_ms(20_000)
}

/// The test agent's pid and how many requests its process has served.
fn process_of(response: &AgentResponse) -> (u64, u64) {
    let pid = response.metadata.get("pid").and_then(Value::as_u64);
    let served = response.metadata.get("served").and_then(Value::as_u64);
    (pid.unwrap_or(0), served.unwrap_or(0))
}

fn finish_output(response: &AgentResponse) -> &Value {
    match response.actions.last() {
        Some(Action::Finish { output }) => output,
        other => panic!("expected a finish action, got {other:?}"),
    }
}

mod command {
    use super::*;

    #[tokio::test]
    async fn answers_and_keeps_the_process_between_calls() {
        let agent = test_agent(&[]);
        let first = agent.call(&request("r1", "echo")).await.expect("answers");
        let second = agent.call(&request("r2", "echo")).await.expect("answers");
        assert_eq!(first.request_id, "r1");
        assert_eq!(second.request_id, "r2");
        let (pid1, served1) = process_of(&first);
        let (pid2, served2) = process_of(&second);
        assert_eq!(pid1, pid2, "same process");
        assert_eq!((served1, served2), (1, 2));
        assert_eq!(agent.start_count(), 1);
        agent.shutdown().await;
    }

    /// `processes = 2`: calls under way at once are served by two processes, the third
    /// waits for one of them; calls one after another keep to the first process.
    #[tokio::test]
    async fn a_pool_serves_overlapping_calls_on_its_processes_and_no_more() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gate = dir.path().join("gate");
        let gate_arg = gate.to_str().expect("utf-8");
        let agent = Arc::new(CommandExecutor::pooled(
            CommandConfig::new(TEST_AGENT).args(["--gate", gate_arg]),
            std::num::NonZeroUsize::new(2).expect("two"),
            std::num::NonZeroUsize::MIN,
        ));
        let calls: Vec<_> = (1..=3)
            .map(|i| {
                let agent = agent.clone();
                tokio::spawn(async move { agent.call(&request(&format!("r{i}"), "echo")).await })
            })
            .collect();
        // Both processes are started while the gate holds every answer back.
        let started = std::time::Instant::now();
        while agent.processes_started() < 2 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "two processes within a minute"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        std::fs::write(&gate, b"").expect("open the gate");
        let mut pids = std::collections::BTreeMap::new();
        for call in calls {
            let response = call.await.expect("joined").expect("answers");
            let (pid, _) = process_of(&response);
            *pids.entry(pid).or_insert(0) += 1;
        }
        assert_eq!(pids.len(), 2, "{pids:?}");
        assert_eq!(pids.values().copied().max(), Some(2), "{pids:?}");
        assert_eq!(agent.processes_started(), 2);
        assert_eq!(agent.start_count(), 2);
        // One after another: the first process each time.
        let a = agent.call(&request("r4", "echo")).await.expect("answers");
        let b = agent.call(&request("r5", "echo")).await.expect("answers");
        assert_eq!(process_of(&a).0, process_of(&b).0);
        assert_eq!(agent.start_count(), 2);
        agent.shutdown().await;
    }

    /// `requests_per_process = 4`: four calls are under way on one process at once (the
    /// agent answers only once it holds four), each answered by its own response,
    /// matched by request id whatever order they come back in.
    #[tokio::test]
    async fn one_process_takes_several_requests_at_once_and_each_gets_its_answer() {
        let agent = Arc::new(CommandExecutor::pooled(
            CommandConfig::new(WAITING_AGENT).args(["--at-once", "4", "--together", "4"]),
            std::num::NonZeroUsize::MIN,
            std::num::NonZeroUsize::new(4).expect("four"),
        ));
        let calls: Vec<_> = (1..=4)
            .map(|i| {
                let agent = agent.clone();
                tokio::spawn(async move {
                    let request = request(&format!("r{i}"), &format!("CODE_{i}"));
                    (i, agent.call(&request).await)
                })
            })
            .collect();
        let mut pids = std::collections::BTreeSet::new();
        for call in calls {
            let (i, answered) = call.await.expect("joined");
            let response = answered.expect("answers");
            assert_eq!(response.request_id, format!("r{i}").as_str());
            let output = finish_output(&response);
            assert_eq!(output["code"], format!("CODE_{i}"));
            assert_eq!(
                output["together"], 4,
                "four were under way at once: {output}"
            );
            pids.insert(process_of(&response).0);
        }
        assert_eq!(pids.len(), 1, "one process: {pids:?}");
        assert_eq!(agent.start_count(), 1);
        agent.shutdown().await;
    }

    /// A process taking several requests that answers a request that is not under way
    /// is ended, every call waiting on it fails, and the next call starts a new one.
    #[tokio::test]
    async fn an_answer_to_no_request_under_way_ends_the_process_and_the_next_call_starts_anew() {
        let agent = CommandExecutor::pooled(
            CommandConfig::new(TEST_AGENT),
            std::num::NonZeroUsize::MIN,
            std::num::NonZeroUsize::new(4).expect("four"),
        );
        let err = agent
            .call(&request("r1", "wrong_id"))
            .await
            .expect_err("an answer to another request");
        assert_eq!(err.code(), "AGENT_REQUEST_ID_MISMATCH", "{err}");
        let answer = agent.call(&request("r2", "echo")).await.expect("answers");
        assert_eq!(answer.request_id, "r2");
        assert_eq!(agent.start_count(), 2);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn decision_and_context_inputs_arrive_labelled_and_apart() {
        let agent = test_agent(&[]);
        let sent = request("r1", "echo")
            .with_decision_input("reasoning", "gaps", json!({"gaps": [{"id": "g1"}]}))
            .with_context_input("intelligence", "geo_scores", json!({"acme": 0.25}));
        let response = agent.call(&sent).await.expect("answers");
        let output = finish_output(&response);
        assert_eq!(
            output["decision_inputs"],
            json!([{"source_agent": "reasoning", "output_type": "gaps",
                    "payload": {"gaps": [{"id": "g1"}]}}])
        );
        assert_eq!(
            output["context_inputs"],
            json!([{"source_agent": "intelligence", "output_type": "geo_scores",
                    "payload": {"acme": 0.25}}])
        );
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn a_hanging_agent_times_out_is_killed_and_restarted() {
        let agent = test_agent(&[]);
        let before = agent.call(&request("r1", "echo")).await.expect("answers");
        let err = agent
            .call(&request("r2", "hang").with_timeout_ms(300))
            .await
            .expect_err("hangs");
        assert!(
            matches!(err, AgentCallError::Timeout { timeout_ms: 300 }),
            "{err:?}"
        );
        assert_eq!(err.code(), "AGENT_TIMEOUT");
        let after = agent.call(&request("r3", "echo")).await.expect("answers");
        assert_ne!(process_of(&before).0, process_of(&after).0, "a new process");
        assert_eq!(process_of(&after).1, 1);
        assert_eq!(agent.start_count(), 2);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn a_crash_mid_call_reports_exit_and_stderr_then_restarts() {
        let agent = test_agent(&[]);
        let err = agent
            .call(&request("r1", "crash"))
            .await
            .expect_err("crashes");
        match &err {
            AgentCallError::Crashed { exit, stderr_tail } => {
                assert_eq!(exit.code, Some(3));
                assert!(
                    stderr_tail.contains("crashing on purpose while handling r1"),
                    "{stderr_tail:?}"
                );
            }
            other => panic!("expected Crashed, got {other:?}"),
        }
        assert!(err.to_string().contains("exit code 3"), "{err}");
        let after = agent.call(&request("r2", "echo")).await.expect("answers");
        assert_eq!(process_of(&after).1, 1, "served by a fresh process");
        assert_eq!(agent.start_count(), 2);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn the_stderr_tail_is_bounded_and_keeps_the_end() {
        let agent = test_agent(&[]);
        let err = agent
            .call(&request("r1", "noisy_crash"))
            .await
            .expect_err("crashes");
        let AgentCallError::Crashed { stderr_tail, .. } = err else {
            panic!("expected Crashed, got {err:?}");
        };
        assert!(stderr_tail.len() <= 8 * 1024, "{} bytes", stderr_tail.len());
        assert!(
            stderr_tail.contains("noise noise"),
            "the noise is in the tail"
        );
        assert!(
            stderr_tail
                .trim_end()
                .ends_with("crashing on purpose while handling r1"),
            "{:?}",
            &stderr_tail[stderr_tail.len().saturating_sub(100)..]
        );
    }

    #[tokio::test]
    async fn an_agent_that_cannot_start_is_a_crash_with_its_stderr() {
        let agent = test_agent(&["crash_on_start"]);
        let err = agent
            .call(&request("r1", "default"))
            .await
            .expect_err("exits at once");
        match err {
            AgentCallError::Crashed { exit, stderr_tail } => {
                assert_eq!(exit.code, Some(7));
                assert!(stderr_tail.contains("refusing to start"), "{stderr_tail:?}");
            }
            other => panic!("expected Crashed, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_missing_program_is_an_io_error_naming_it() {
        let agent = CommandExecutor::new(CommandConfig::new("/nonexistent/docket-agent"));
        let err = agent
            .call(&request("r1", "echo"))
            .await
            .expect_err("no such program");
        assert!(matches!(err, AgentCallError::Io { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("starting /nonexistent/docket-agent"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn garbage_is_malformed_and_the_process_is_restarted() {
        let agent = test_agent(&[]);
        let err = agent
            .call(&request("r1", "garbage"))
            .await
            .expect_err("not JSON");
        match &err {
            AgentCallError::Malformed(malformed) => {
                assert_eq!(malformed.excerpt, "this is not json");
                assert!(
                    malformed.message.contains("at line 1 column"),
                    "{malformed}"
                );
            }
            other => panic!("expected Malformed, got {other:?}"),
        }
        assert_eq!(err.code(), "AGENT_MALFORMED_RESPONSE");
        // A line that is not a response leaves the process out of step with the
        // requests (a stray banner would shift every later answer by one): the next call
        // is served by a fresh process.
        let after = agent.call(&request("r2", "echo")).await.expect("answers");
        assert_eq!(
            process_of(&after).1,
            1,
            "a fresh process served the next call"
        );
        assert_eq!(agent.start_count(), 2);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn a_banner_line_is_one_failed_call_not_every_later_one() {
        // The first process ever started prints a banner before answering: the first call
        // reads it as its response. Kept, the process would answer the second call with
        // the answer to the first (a request_id mismatch), and so on for every call.
        let marker = tempfile::tempdir().expect("tempdir");
        let marker = marker.path().join("banner-printed");
        let marker = marker.to_str().expect("utf-8");
        let agent = test_agent(&["--banner-once", marker]);
        let err = agent
            .call(&request("r1", "echo"))
            .await
            .expect_err("the banner is not a response");
        assert_eq!(err.code(), "AGENT_MALFORMED_RESPONSE", "{err}");
        let after = agent
            .call(&request("r2", "echo"))
            .await
            .expect("answers r2");
        assert_eq!(after.request_id, "r2");
        assert_eq!(process_of(&after).1, 1);
        assert_eq!(agent.start_count(), 2);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn an_oversized_line_is_refused_at_the_limit_and_the_agent_restarted() {
        let limit = 64 * 1024;
        let agent = CommandExecutor::new(
            CommandConfig::new(TEST_AGENT)
                .args(["--size", "2097152"])
                .max_response_bytes(limit),
        );
        let err = agent
            .call(&request("r1", "oversized"))
            .await
            .expect_err("too big");
        match err {
            AgentCallError::Oversized {
                limit: reported,
                received,
                ..
            } => {
                assert_eq!(reported, limit);
                assert!(received > limit as u64, "{received}");
                // Reading stops within one read buffer past the limit.
                assert!(received <= (limit + 64 * 1024) as u64, "{received}");
            }
            other => panic!("expected Oversized, got {other:?}"),
        }
        let after = agent.call(&request("r2", "echo")).await.expect("answers");
        assert_eq!(process_of(&after).1, 1, "a fresh process");
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn a_response_just_under_the_limit_is_accepted() {
        let limit = 64 * 1024;
        let agent = CommandExecutor::new(
            CommandConfig::new(TEST_AGENT)
                .args(["--size", &limit.to_string()])
                .max_response_bytes(limit),
        );
        let response = agent
            .call(&request("r1", "oversized"))
            .await
            .expect("exactly at the limit is fine");
        assert_eq!(response.status, ResponseStatus::Success);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn an_endless_line_is_oversized_not_a_timeout() {
        let agent =
            CommandExecutor::new(CommandConfig::new(TEST_AGENT).max_response_bytes(256 * 1024));
        let err = agent
            .call(&request("r1", "flood"))
            .await
            .expect_err("never ends its line");
        assert!(matches!(err, AgentCallError::Oversized { .. }), "{err:?}");
        assert!(agent.call(&request("r2", "echo")).await.is_ok());
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn a_wrong_request_id_is_a_mismatch() {
        let agent = test_agent(&[]);
        let err = agent
            .call(&request("r1", "wrong_id"))
            .await
            .expect_err("wrong id");
        assert!(
            matches!(&err, AgentCallError::RequestIdMismatch { expected, actual }
                if expected == "r1" && actual == "r1-other"),
            "{err:?}"
        );
        // The process answered another request than the one asked: restarted.
        let after = agent.call(&request("r2", "echo")).await.expect("answers");
        assert_eq!(
            process_of(&after).1,
            1,
            "a fresh process served the next call"
        );
        assert_eq!(agent.start_count(), 2);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn a_protocol_violation_names_the_field() {
        let agent = test_agent(&[]);
        let err = agent
            .call(&request("r1", "invalid"))
            .await
            .expect_err("no confidence");
        match &err {
            AgentCallError::Invalid(violation) => {
                assert_eq!(violation.field, "confidence_level");
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
        assert!(
            err.to_string()
                .contains("confidence_level: required when status is SUCCESS"),
            "{err}"
        );
        // A well-formed response to the request asked, breaking a rule: the process is in
        // step and kept.
        let after = agent.call(&request("r2", "echo")).await.expect("answers");
        assert_eq!(process_of(&after).1, 2, "the same process served both");
        assert_eq!(agent.start_count(), 1);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn a_process_that_exited_between_calls_is_restarted_transparently() {
        let agent = test_agent(&[]);
        agent
            .call(&request("r1", "exit_after_answer"))
            .await
            .expect("answers, then exits");
        let after = agent.call(&request("r2", "echo")).await.expect("answers");
        assert_eq!(process_of(&after).1, 1, "a fresh process");
        assert_eq!(agent.start_count(), 2);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn a_one_shot_agent_that_exits_after_each_answer_serves_every_call() {
        let agent = test_agent(&["exit_after_answer"]);
        for id in ["r1", "r2", "r3"] {
            let response = agent.call(&request(id, "default")).await.expect("answers");
            assert_eq!(response.request_id, id);
            assert_eq!(
                process_of(&response).1,
                1,
                "each answer from a fresh process"
            );
        }
        assert_eq!(agent.start_count(), 3);
    }

    #[tokio::test]
    async fn the_configured_environment_and_directory_reach_the_agent() {
        let dir = tempfile::tempdir().expect("temp dir");
        let agent = CommandExecutor::new(
            CommandConfig::new(TEST_AGENT)
                .env("DOCKET_TEST_VALUE", "from-the-workflow")
                .current_dir(dir.path()),
        );
        let response = agent
            .call(&request("r1", "environment"))
            .await
            .expect("answers");
        let output = finish_output(&response);
        assert_eq!(output["value"], "from-the-workflow");
        let cwd = std::fs::canonicalize(output["cwd"].as_str().expect("a path")).expect("exists");
        assert_eq!(cwd, std::fs::canonicalize(dir.path()).expect("exists"));
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn the_stderr_tail_size_is_configurable() {
        let agent = CommandExecutor::new(CommandConfig::new(TEST_AGENT).stderr_tail_bytes(64));
        let err = agent
            .call(&request("r1", "noisy_crash"))
            .await
            .expect_err("crashes");
        let AgentCallError::Crashed { stderr_tail, .. } = err else {
            panic!("expected Crashed, got {err:?}");
        };
        assert!(stderr_tail.len() <= 64, "{} bytes", stderr_tail.len());
        assert!(stderr_tail.ends_with("handling r1\n"), "{stderr_tail:?}");
    }

    #[tokio::test]
    async fn blank_lines_before_the_response_are_skipped() {
        let agent = test_agent(&[]);
        let response = agent
            .call(&request("r1", "blank_lines"))
            .await
            .expect("answers");
        assert_eq!(response.request_id, "r1");
        let next = agent.call(&request("r2", "echo")).await.expect("in step");
        assert_eq!(next.request_id, "r2");
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn concurrent_calls_each_get_their_own_response() {
        let agent: Arc<dyn AgentExecutor> = Arc::new(test_agent(&[]));
        let calls = (0..8).map(|i| {
            let agent = Arc::clone(&agent);
            tokio::spawn(async move {
                let sent = request(&format!("r{i}"), "echo");
                agent
                    .call(&sent)
                    .await
                    .map(|r| (sent.request_id, r.request_id))
            })
        });
        for call in calls {
            let (sent, got) = call.await.expect("task").expect("answers");
            assert_eq!(sent, got);
        }
    }

    #[tokio::test]
    async fn time_queued_behind_another_call_counts_against_the_timeout() {
        let agent = Arc::new(test_agent(&[]));
        let hanging = {
            let agent = Arc::clone(&agent);
            tokio::spawn(async move {
                agent
                    .call(&request("r1", "hang").with_timeout_ms(2_000))
                    .await
                    .map(|_| ())
            })
        };
        // Wait until the hanging call holds the process (it has started it).
        while agent.start_count() == 0 {
            tokio::task::yield_now().await;
        }
        let queued = agent
            .call(&request("r2", "echo").with_timeout_ms(100))
            .await
            .expect_err("queued behind a call that hangs for 2 s");
        assert!(
            matches!(queued, AgentCallError::Timeout { timeout_ms: 100 }),
            "{queued:?}"
        );
        let first = hanging.await.expect("task").expect_err("hangs");
        assert!(
            matches!(first, AgentCallError::Timeout { timeout_ms: 2_000 }),
            "{first:?}"
        );
        // The queued call's timeout did not disturb the process; the hanging one's did.
        assert_eq!(agent.start_count(), 1);
        let after = agent.call(&request("r3", "echo")).await.expect("answers");
        assert_eq!(process_of(&after).1, 1);
        assert_eq!(agent.start_count(), 2);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn an_abandoned_call_does_not_leak_its_answer_into_the_next() {
        let agent = test_agent(&[]);
        // The caller gives up on a slow call; whatever the process was doing, the next
        // call must get the answer to its own request.
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            agent.call(&request("r1", "hang")),
        )
        .await;
        let response = agent.call(&request("r2", "echo")).await.expect("answers");
        assert_eq!(response.request_id, "r2");
        agent.shutdown().await;
    }
}

mod http {
    use super::*;
    use std::convert::Infallible;
    use std::net::SocketAddr;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper::{Request, Response, StatusCode};
    use hyper_util::rt::TokioIo;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;
    use tokio::task::JoinHandle;

    /// An HTTP agent on 127.0.0.1; its path picks the behaviour. Stops when dropped.
    struct TestServer {
        addr: SocketAddr,
        accept_loop: JoinHandle<()>,
    }

    impl Drop for TestServer {
        fn drop(&mut self) {
            self.accept_loop.abort();
        }
    }

    impl TestServer {
        async fn start() -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("address");
            let accept_loop = tokio::spawn(async move {
                // Bounded: the tests make a handful of connections.
                for _ in 0..64 {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    tokio::spawn(async move {
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service_fn(handle))
                            .await;
                    });
                }
            });
            Self { addr, accept_loop }
        }

        fn executor(&self, path: &str) -> HttpExecutor {
            HttpExecutor::new(&format!("http://{}{path}", self.addr)).expect("valid URL")
        }
    }

    async fn handle(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        let path = request.uri().path().to_owned();
        let body = request
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let Ok(agent_request) = serde_json::from_slice::<AgentRequest>(&body) else {
            return Ok(reply(
                StatusCode::BAD_REQUEST,
                "not an agent request".into(),
            ));
        };
        let id = agent_request.request_id.clone();
        let ok = |id: &str| {
            json!({"request_id": id, "status": "SUCCESS", "confidence_level": "MEDIUM",
                   "actions": [{"type": "finish",
                                "output": {"capability_code": agent_request.capability_code}}]})
            .to_string()
        };
        Ok(match path.as_str() {
            "/echo" => reply(StatusCode::OK, ok(&id)),
            "/overloaded" => reply(StatusCode::SERVICE_UNAVAILABLE, "agent overloaded".into()),
            "/hang" => std::future::pending().await,
            "/big" => reply(StatusCode::OK, "x".repeat(2 * 1024 * 1024)),
            "/garbage" => reply(StatusCode::OK, "<html>oops</html>".into()),
            "/wrong-id" => reply(StatusCode::OK, ok("someone-else")),
            _ => reply(StatusCode::NOT_FOUND, "no such agent".into()),
        })
    }

    fn reply(status: StatusCode, body: String) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response
    }

    #[tokio::test]
    async fn posts_the_request_and_reads_the_response() {
        let server = TestServer::start().await;
        let agent = server.executor("/echo");
        for id in ["r1", "r2"] {
            let response = agent
                .call(&request(id, "GEO_SCORE"))
                .await
                .expect("answers");
            assert_eq!(response.request_id, id);
            assert_eq!(
                finish_output(&response),
                &json!({"capability_code": "GEO_SCORE"})
            );
        }
    }

    #[tokio::test]
    async fn a_non_2xx_status_is_reported_with_the_body() {
        let server = TestServer::start().await;
        let err = server
            .executor("/overloaded")
            .call(&request("r1", "x"))
            .await
            .expect_err("503");
        assert!(
            matches!(&err, AgentCallError::HttpStatus { status: 503, body_excerpt }
                if body_excerpt == "agent overloaded"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_slow_agent_times_out() {
        let server = TestServer::start().await;
        let err = server
            .executor("/hang")
            .call(&request("r1", "x").with_timeout_ms(200))
            .await
            .expect_err("never answers");
        assert!(
            matches!(err, AgentCallError::Timeout { timeout_ms: 200 }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_body_over_the_declared_limit_is_oversized() {
        let server = TestServer::start().await;
        let err = server
            .executor("/big")
            .max_response_bytes(1024)
            .call(&request("r1", "x"))
            .await
            .expect_err("too big");
        assert!(
            matches!(
                err,
                AgentCallError::Oversized {
                    limit: 1024,
                    received: 2_097_152,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_chunked_body_is_cut_off_at_the_limit() {
        // A raw HTTP/1.1 answer with no Content-Length: the executor must count as it reads.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let server = tokio::spawn(async move {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut head = [0_u8; 4096];
            let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut head).await;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                .await;
            let chunk = format!("{:x}\r\n{}\r\n", 4096, "y".repeat(4096));
            for _ in 0..64 {
                if stream.write_all(chunk.as_bytes()).await.is_err() {
                    return;
                }
            }
            let _ = stream.write_all(b"0\r\n\r\n").await;
        });
        let agent = HttpExecutor::new(&format!("http://{addr}/agent"))
            .expect("valid URL")
            .max_response_bytes(10_000);
        let err = agent.call(&request("r1", "x")).await.expect_err("too big");
        match err {
            AgentCallError::Oversized {
                limit, received, ..
            } => {
                assert_eq!(limit, 10_000);
                assert!(received > 10_000 && received < 64 * 4096, "{received}");
            }
            other => panic!("expected Oversized, got {other:?}"),
        }
        server.abort();
    }

    #[tokio::test]
    async fn garbage_and_wrong_ids_are_errors() {
        let server = TestServer::start().await;
        let err = server
            .executor("/garbage")
            .call(&request("r1", "x"))
            .await
            .expect_err("HTML");
        assert!(
            matches!(&err, AgentCallError::Malformed(m) if m.excerpt == "<html>oops</html>"),
            "{err:?}"
        );
        let err = server
            .executor("/wrong-id")
            .call(&request("r1", "x"))
            .await
            .expect_err("wrong id");
        assert!(
            matches!(err, AgentCallError::RequestIdMismatch { .. }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_an_io_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        drop(listener);
        let agent = HttpExecutor::new(&format!("http://{addr}/agent")).expect("valid URL");
        let err = agent
            .call(&request("r1", "x").with_timeout_ms(2_000))
            .await
            .expect_err("nothing listens");
        assert!(matches!(err, AgentCallError::Io { .. }), "{err:?}");
        assert!(err.to_string().contains("POSTing to http://"), "{err}");
    }
}

/// The Python agents of docs/agent-protocol.md, run when `python3` is on PATH.
mod python {
    use super::*;
    use docket_decider::parse_response;
    use docket_tests::{agent_protocol_doc, doc_example, workspace_root};

    fn python3_available() -> bool {
        let found = std::process::Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success());
        if !found {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("note: python3 is not on PATH; skipping the Python agent test");
            }
        }
        found
    }

    /// The request and response docs/agent-protocol.md shows for the example agent.
    fn documented_exchange() -> (AgentRequest, AgentResponse) {
        let doc = agent_protocol_doc();
        let request: AgentRequest =
            serde_json::from_str(&doc_example(&doc, "request").expect("request example"))
                .expect("request parses");
        let documented = parse_response(
            doc_example(&doc, "response")
                .expect("response example")
                .as_bytes(),
        )
        .expect("response parses");
        (request, documented)
    }

    fn python_agent(script: &std::path::Path) -> CommandExecutor {
        CommandExecutor::new(CommandConfig::new("python3").args([script.as_os_str()]))
    }

    #[tokio::test]
    async fn the_example_agent_answers_the_documented_request_as_documented() {
        if !python3_available() {
            return;
        }
        let (request, documented) = documented_exchange();

        let agent = python_agent(&workspace_root().join("examples/python-agent/agent.py"));
        let response = agent.call(&request).await.expect("the agent answers");
        assert_eq!(response, documented);

        // An unknown capability is the agent's own ERROR answer, not a call failure, and
        // the same process serves it.
        let mut other = request.clone();
        other.request_id = "req-7f3b".into();
        other.capability_code = "TRANSLATE".into();
        let response = agent.call(&other).await.expect("the agent answers");
        assert_eq!(response.status, ResponseStatus::Error);
        assert_eq!(
            response.error_code.as_deref(),
            Some("INPUT_UNKNOWN_CAPABILITY")
        );

        // A snapshot without answer text makes the result PARTIAL, with a warning.
        let mut partial = request.clone();
        partial.request_id = "req-7f3c".into();
        std::sync::Arc::make_mut(&mut partial.decision_inputs[0].payload)["snapshots"][1]["answer"] =
            json!("");
        let response = agent.call(&partial).await.expect("the agent answers");
        assert_eq!(response.status, ResponseStatus::Partial);
        assert_eq!(response.warnings, ["1 snapshot(s) had no answer text"]);
        assert_eq!(agent.start_count(), 1);
        agent.shutdown().await;
    }

    /// `agent.py --at-once 4` with `requests_per_process = 4`: eight requests at once
    /// on one process, each answered as the documented request is, under its own id.
    #[tokio::test]
    async fn the_example_agent_takes_several_requests_at_once() {
        if !python3_available() {
            return;
        }
        let (request, documented) = documented_exchange();
        let script = workspace_root().join("examples/python-agent/agent.py");
        let agent = Arc::new(CommandExecutor::pooled(
            CommandConfig::new("python3").args([
                script.as_os_str(),
                "--at-once".as_ref(),
                "4".as_ref(),
            ]),
            std::num::NonZeroUsize::MIN,
            std::num::NonZeroUsize::new(4).expect("four"),
        ));
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let agent = agent.clone();
                let mut request = request.clone();
                request.request_id = format!("req-at-once-{i}").into();
                tokio::spawn(
                    async move { (request.request_id.clone(), agent.call(&request).await) },
                )
            })
            .collect();
        for call in calls {
            let (id, answered) = call.await.expect("joined");
            let mut response = answered.expect("the agent answers");
            assert_eq!(response.request_id, id);
            response.request_id = documented.request_id.clone();
            assert_eq!(response, documented);
        }
        assert_eq!(agent.start_count(), 1);
        agent.shutdown().await;
    }

    #[tokio::test]
    async fn the_documented_minimal_agent_runs() {
        if !python3_available() {
            return;
        }
        let source = doc_example(&agent_protocol_doc(), "python").expect("python example");
        let dir = tempfile::tempdir().expect("temp dir");
        let script = dir.path().join("agent.py");
        std::fs::write(&script, source).expect("write the agent");
        let agent = python_agent(&script);
        let sent = request("r1", "ANYTHING")
            .with_decision_input("reasoning", "gaps", json!({}))
            .with_context_input("intelligence", "geo_scores", json!({}));
        let response = agent.call(&sent).await.expect("the agent answers");
        assert_eq!(
            finish_output(&response),
            &json!({"inputs_from": ["reasoning"]})
        );
        agent.shutdown().await;
    }
}
