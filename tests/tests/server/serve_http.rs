//! `docket serve` as HTTP says it should behave, through raw TCP (issue 28 rows 9, 10, 11, 12,
//! 13 and 16; docs/api.md): live event streams limited per token and in all; `HEAD` as
//! `GET` without a body; a refused request whose body was not read says
//! `Connection: close`, one whose body was read keeps the connection; requests larger than
//! the API takes answered 413/431 in JSON however they are sent; a cursor that is not one
//! refused; the server's own I/O failures are 5xx naming the file; the request log is
//! private; each route's documented example body is read by the route.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use docket_serve::Role;
use docket_serve::routes::ROUTES;
use docket_tests::{docket_on as docket, exit_code as code};
use serde_json::{Value, json};

use crate::served::{Answer, Served};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

/// A finished one-agent run `run` in `data`, recorded before the server starts.
fn finished_run(dir: &Path, data: &Path, run: &str) {
    let wf: PathBuf = docket_tests::one_agent_workflow(
        dir,
        "http",
        &format!("{run}-wf"),
        TEST_AGENT,
        &["finish"],
    );
    let out = docket(data, &["run", wf.to_str().expect("utf-8"), "--run-id", run]);
    assert_eq!(code(&out), 0, "{out:?}");
}

/// Opens `GET /api/runs/{run}/events/stream` as `token`: the status line, and the
/// connection (held open while the caller keeps it).
fn open_stream(server: &Served, run: &str, token: &str) -> (String, TcpStream) {
    let mut s = server.connect();
    write!(
        s,
        "GET /api/runs/{run}/events/stream HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .expect("send");
    let mut reader = BufReader::new(s.try_clone().expect("clone"));
    let mut status = String::new();
    reader.read_line(&mut status).expect("a status line");
    (status, s)
}

/// Row 9: a token holds at most `--max-streams-per-token` streams (429), the server at
/// most `--max-streams` (503), each refused in JSON with Retry-After; a stream closed frees
/// its place.
#[test]
fn live_event_streams_are_limited_per_token_and_in_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    finished_run(dir.path(), &data, "done-1");
    let server = Served::start_with(
        &data,
        &["--max-streams", "3", "--max-streams-per-token", "2"],
    );
    let viewer = server.token(Role::Viewer).to_owned();
    let (first, held) = open_stream(&server, "done-1", &viewer);
    assert!(first.contains(" 200 "), "{first}");
    let (second, _second) = open_stream(&server, "done-1", &viewer);
    assert!(second.contains(" 200 "), "{second}");

    let refused = server.request("GET", "/api/runs/done-1/events/stream", Some(&viewer), None);
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.error().0, "too_many_streams", "{refused:?}");
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("viewer-user") && m.contains("--max-streams-per-token")),
        "{refused:?}"
    );

    let (third, _third) = open_stream(&server, "done-1", server.token(Role::Operator));
    assert!(third.contains(" 200 "), "{third}");
    let busy = server.request(
        "GET",
        "/api/runs/done-1/events/stream",
        Some(server.token(Role::Admin)),
        None,
    );
    assert_eq!(busy.status, 503, "{busy:?}");
    assert_eq!(busy.error().0, "busy", "{busy:?}");
    assert!(busy.header("retry-after").is_some(), "{busy:?}");
    // Other routes are not limited by streams.
    let runs = server.request("GET", "/api/runs", Some(&viewer), None);
    assert_eq!(runs.status, 200, "{runs:?}");

    // A stream whose client went away frees its place (noticed at the latest when the
    // stream next writes: its keep-alive comment).
    drop(held);
    let start = Instant::now();
    loop {
        let (status, _again) = open_stream(&server, "done-1", &viewer);
        if status.contains(" 200 ") {
            break;
        }
        assert!(status.contains(" 429 "), "{status}");
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the closed stream's place was never freed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Row 12: `HEAD` answers as `GET` without a body; on a route without `GET`, 405 with
/// `Allow`.
#[test]
fn head_answers_as_get_without_a_body() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    finished_run(dir.path(), &data, "done-1");
    let server = Served::start(&data);
    let viewer = Some(server.token(Role::Viewer));
    for path in [
        "/api/runs",
        "/api/runs/done-1",
        "/api/openapi.json",
        "/api/kill-switches",
    ] {
        let got = server.request("GET", path, viewer, None);
        let head = server.request("HEAD", path, viewer, None);
        assert_eq!(got.status, 200, "GET {path}: {got:?}");
        assert_eq!(head.status, 200, "HEAD {path}: {head:?}");
        assert_eq!(head.body, json!(""), "HEAD {path} sent a body");
        assert_eq!(
            head.header("content-type"),
            got.header("content-type"),
            "HEAD {path}"
        );
    }
    let head = server.request("HEAD", "/api/runs/no-such-run", viewer, None);
    assert_eq!(head.status, 404, "{head:?}");
    let head = server.request("HEAD", "/api/runs", None, None);
    assert_eq!(head.status, 401, "{head:?}");
    let head = server.request("HEAD", "/api/runs/done-1/cancel", viewer, None);
    assert_eq!(head.status, 405, "{head:?}");
    assert!(
        head.header("allow").is_some_and(|a| a.contains("POST")),
        "{head:?}"
    );
    // HEAD reads, so the request log does not list it.
    let log = server.request(
        "GET",
        "/api/requests",
        Some(server.token(Role::Admin)),
        None,
    );
    assert!(
        log.body["requests"]
            .as_array()
            .expect("requests")
            .iter()
            .all(|r| r["method"] != "HEAD"),
        "{log:?}"
    );
}

/// Row 11: a request refused before its body arrived is answered with
/// `Connection: close` (the server will not read the rest); a request whose body was read
/// keeps its connection for the next one.
#[test]
fn a_refused_request_whose_body_was_not_read_says_connection_close() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = Served::start(&data);
    let body = json!({ "reason": "why not" }).to_string();
    for (who, status) in [
        (Some(server.token(Role::Viewer)), 403),
        (Some("dkt_not-a-token"), 401),
    ] {
        let mut s = server.connect();
        let auth = who
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        // The headers only: the body is still to come when the answer is sent.
        write!(
            s,
            "POST /api/kill-switches/lane-x/engage HTTP/1.1\r\nHost: test\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .expect("send");
        let answer = Answer::read_one(&mut s);
        assert_eq!(answer.status, status, "{answer:?}");
        assert_eq!(
            answer.header("connection"),
            Some("close"),
            "{status} before the body: {answer:?}"
        );
        // The server closes the connection, as it said.
        s.write_all(body.as_bytes()).expect("the body");
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    }

    // Read, a request's body leaves the connection open: two requests on one connection.
    let mut s = server.connect();
    let operator = server.token(Role::Operator);
    for _ in 0..2 {
        write!(
            s,
            "POST /api/runs/no-such-run/cancel HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {operator}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let answer = Answer::read_one(&mut s);
        assert_eq!(answer.status, 404, "{answer:?}");
        assert_ne!(answer.header("connection"), Some("close"), "{answer:?}");
    }
}

/// Row 16: a body over 4 MiB is a 413 in JSON whether its `Content-Length` says so or
/// it comes in chunks; so are headers too many or too large (431) and a URI too long
/// (414).
#[test]
fn requests_larger_than_the_api_takes_are_refused_in_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = Served::start(&data);
    let operator = server.token(Role::Operator);
    let check = |answer: &Answer, status: u16, at: &str| {
        assert_eq!(answer.status, status, "{answer:?}");
        assert_eq!(
            answer.header("content-type"),
            Some("application/json"),
            "{answer:?}"
        );
        assert_eq!(answer.error(), ("too_large", at), "{answer:?}");
    };
    let reason = format!("{{\"reason\": \"{}\"}}", "x".repeat(3 << 20));
    // 3 MiB: within the limit, read whole (the run does not exist).
    let mut s = server.connect();
    write!(
        s,
        "POST /api/runs/no-such-run/cancel HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAuthorization: Bearer {operator}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{reason}",
        reason.len()
    )
    .expect("send");
    let answer = Answer::read_one(&mut s);
    assert_eq!(answer.status, 404, "{answer:?}");

    // 5 MiB, said by its Content-Length (nothing sent after the headers).
    let mut s = server.connect();
    write!(
        s,
        "POST /api/runs/no-such-run/cancel HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {operator}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        5 << 20
    )
    .expect("send");
    check(&Answer::read_one(&mut s), 413, "body");

    // 5 MiB in chunks.
    let mut s = server.connect();
    write!(
        s,
        "POST /api/runs/no-such-run/cancel HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAuthorization: Bearer {operator}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .expect("send");
    // Sent from another thread while this one reads: the server answers once 4 MiB have
    // come and closes, and a client still writing would lose the answer to the reset.
    let mut writer = s.try_clone().expect("clone");
    let sending = std::thread::spawn(move || {
        let chunk = "x".repeat(1 << 20);
        for _ in 0..5 {
            if write!(writer, "{:x}\r\n{chunk}\r\n", chunk.len()).is_err() {
                return;
            }
        }
        let _ = write!(writer, "0\r\n\r\n");
    });
    check(&Answer::read_one(&mut s), 413, "body");
    let _ = sending.join();

    // Headers: too many, too large.
    let many: String = (0..150).map(|i| format!("X-Extra-{i}: {i}\r\n")).collect();
    let mut s = server.connect();
    write!(
        s,
        "GET /api/runs HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{many}\r\n"
    )
    .expect("send");
    check(&Answer::read_one(&mut s), 431, "header");
    let mut s = server.connect();
    write!(
        s,
        "GET /api/runs HTTP/1.1\r\nHost: test\r\nConnection: close\r\nX-Large: {}\r\n\r\n",
        "y".repeat(80 << 10)
    )
    .expect("send");
    check(&Answer::read_one(&mut s), 431, "header");
    let long = format!("/api/runs?workflow={}", "z".repeat(10 << 10));
    let answer = server.request("GET", &long, Some(operator), None);
    check(&answer, 414, "uri");
}

/// Row 16: a `cursor` that is not the `next_cursor` of a page is refused, naming it,
/// instead of silently answering the first page.
#[test]
fn a_cursor_that_is_not_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    finished_run(dir.path(), &data, "run-a");
    finished_run(dir.path(), &data, "run-b");
    let server = Served::start(&data);
    let viewer = Some(server.token(Role::Viewer));
    let first = server.request("GET", "/api/runs?limit=1", viewer, None);
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.body["runs"][0]["run_id"], "run-a", "{first:?}");
    let next = first.body["next_cursor"].as_str().expect("a next page");
    let second = server.request(
        "GET",
        &format!("/api/runs?limit=1&cursor={next}"),
        viewer,
        None,
    );
    assert_eq!(second.body["runs"][0]["run_id"], "run-b", "{second:?}");
    for garbage in ["%21%21garbage", "no-such-run", "%20"] {
        let answer = server.request("GET", &format!("/api/runs?cursor={garbage}"), viewer, None);
        assert_eq!(answer.status, 400, "cursor={garbage}: {answer:?}");
        assert_eq!(
            answer.error(),
            ("bad_request", "query.cursor"),
            "{answer:?}"
        );
    }
}

/// Rows 13 and 10: a kill switch whose file the server cannot write is the server's
/// failure (5xx), naming the file, never the client's (400). The switches' lock file is a
/// directory here: opening it for writing fails whoever the server runs as.
#[test]
fn a_kill_switch_the_server_cannot_write_is_a_server_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = Served::start(&data);
    let lock = data.join("kill-switches.lock");
    std::fs::create_dir_all(&lock).expect("a directory where the lock file goes");
    let answer = server.request(
        "POST",
        "/api/kill-switches/global/engage",
        Some(server.token(Role::Operator)),
        Some(&json!({ "reason": "stop everything" })),
    );
    assert!((500..600).contains(&answer.status), "{answer:?}");
    let (code, at) = answer.error();
    assert_eq!(code, "internal", "{answer:?}");
    assert!(
        at.starts_with("file ") && at.ends_with("kill-switches.lock"),
        "{answer:?}"
    );
    // A name that is not a switch is still the request's fault.
    std::fs::remove_dir(&lock).expect("the directory removed");
    let answer = server.request(
        "POST",
        "/api/kill-switches/a%20b/engage",
        Some(server.token(Role::Operator)),
        Some(&json!({ "reason": "x" })),
    );
    assert_eq!(answer.status, 400, "{answer:?}");
}

/// Row 16: the request log names who did what: readable by the server's user only.
#[cfg(unix)]
#[test]
fn the_request_log_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = Served::start(&data);
    let answer = server.request(
        "POST",
        "/api/runs/no-such-run/cancel",
        Some(server.token(Role::Operator)),
        Some(&json!({ "reason": "x" })),
    );
    assert_eq!(answer.status, 404);
    let log = data.join("api").join(docket_serve::REQUESTS_FILE);
    let mode = std::fs::metadata(&log)
        .expect("the log")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}

/// Row 16: every route's documented example body, and the same with only its required
/// fields, is read by the route: whatever it answers, it is not the body's shape refused
/// (`where: body`). A field of the wrong type is.
#[test]
fn every_documented_body_is_read_by_its_route() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = Served::start(&data);
    let admin = Some(server.token(Role::Admin));
    let (status, openapi) = {
        let a = server.request("GET", "/api/openapi.json", admin, None);
        (a.status, a.body)
    };
    assert_eq!(status, 200);
    for route in ROUTES.iter().filter(|r| !r.body.is_empty()) {
        let path = route
            .path
            .replace("{run}", "no-such-run")
            .replace("{ticket}", "ticket-1")
            .replace("{switch}", "lane-x")
            .replace("{name}", "no-such-schedule");
        let documented = &openapi["paths"][route.path][route.method.to_lowercase()]["requestBody"]
            ["content"]["application/json"];
        let example = documented["example"].clone();
        assert!(
            example.is_object(),
            "{} {}: {documented}",
            route.method,
            route.path
        );
        // Fields of which one is given (a schedule's cron or interval) may be left out
        // of the example but one.
        let names: Vec<&str> = route
            .body
            .iter()
            .map(|(n, _, _, _)| *n)
            .filter(|n| !route.at_least_one.contains(n) || example.get(*n).is_some())
            .collect();
        let mut keys: Vec<&str> = example
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        keys.sort_unstable();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(
            keys, sorted,
            "{} {}: the example shows every field",
            route.method, route.path
        );
        let required: Value = route
            .body
            .iter()
            .filter(|(_, required, _, _)| *required)
            .map(|(n, _, _, _)| ((*n).to_owned(), example[*n].clone()))
            .collect::<serde_json::Map<_, _>>()
            .into();
        let mut bodies = vec![example.clone()];
        if required.as_object().is_some_and(|o| !o.is_empty()) && route.at_least_one.is_empty() {
            bodies.push(required);
        }
        for body in &bodies {
            let answer = server.request(route.method, &path, admin, Some(body));
            assert!(
                !(answer.status == 400 && answer.error().1 == "body"),
                "{} {path} refused its documented body {body}: {answer:?}",
                route.method
            );
        }
        // A text field given a number: refused, as the description says.
        if let Some((name, _, _, _)) = route
            .body
            .iter()
            .find(|(_, _, kind, _)| matches!(kind, docket_serve::routes::Kind::Said))
        {
            let mut wrong = example.clone();
            wrong[*name] = json!(5);
            let answer = server.request(route.method, &path, admin, Some(&wrong));
            assert_eq!(
                answer.status, 400,
                "{} {path} with {wrong}: {answer:?}",
                route.method
            );
        }
    }
}

/// Row 10: a full disk refuses a new run 507 naming the file, and once space is free the
/// same server records and completes runs again, without a restart; the directory
/// verifies.
#[cfg(target_os = "linux")]
#[test]
#[allow(clippy::print_stderr)]
fn after_a_full_disk_is_freed_the_server_records_again_without_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let workflow =
        docket_tests::one_agent_workflow(dir.path(), "disk", "disk", TEST_AGENT, &["finish"]);
    let Some((server, disk)) = crate::served::on_a_small_disk(dir.path(), 8 << 20) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set, and a user and mount namespace (unshare) cannot be made here"
        );
        eprintln!("skipped: unshare cannot make a user and mount namespace here");
        return;
    };
    let operator = Some(server.token(Role::Operator));
    // Inputs that do not compress, so that a few runs need more than the space left in
    // the log's preallocated runway.
    let mut rng = docket_tests::SeededRng(10);
    let start = |run: &str, rng: &mut docket_tests::SeededRng| {
        let pad: String = (0..(256 << 10) / 16)
            .map(|_| format!("{:016x}", rng.next_u64()))
            .collect();
        server.request(
            "POST",
            "/api/runs",
            operator,
            Some(&json!({
                "workflow": workflow.file_name().and_then(|n| n.to_str()),
                "run_id": run,
                "input": { "task": "x", "pad": pad },
            })),
        )
    };
    let accepted = |answer: &Answer| answer.status == 200 || answer.status == 202;
    let answer = start("before", &mut rng);
    assert!(accepted(&answer), "{answer:?}");

    // Fill the disk, then start runs until one is refused for want of space.
    let filler = disk.join("filler");
    let mut file = std::fs::File::create(&filler).expect("the filler");
    let chunk = vec![0u8; 64 << 10];
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => panic!("filling the disk: {e}"),
        }
    }
    let mut started = vec!["before".to_owned()];
    let refused = (0..40)
        .find_map(|n| {
            let run = format!("full-{n}");
            let answer = start(&run, &mut rng);
            if accepted(&answer) {
                started.push(run);
                None
            } else {
                Some((run, answer))
            }
        })
        .expect("a run refused within 40 runs of 256 KiB on a full disk");
    let (refused_run, answer) = refused;
    eprintln!("{} runs accepted, then {answer:?}", started.len());
    assert_eq!(answer.status, 507, "{answer:?}");
    let (kind, at) = answer.error();
    assert!(
        !kind.is_empty() && at.starts_with("file ") && at.contains("/data/"),
        "{answer:?}"
    );

    // The refused run was either never recorded, or the answer says it was and it is
    // there, stopped, for a resume.
    let recorded = answer.body["error"]["recorded"].as_str().map(str::to_owned);
    let status_of = |run: &str| {
        server.request(
            "GET",
            &format!("/api/runs/{run}"),
            Some(server.token(Role::Viewer)),
            None,
        )
    };
    match &recorded {
        Some(run) => {
            assert_eq!(run, &refused_run, "{answer:?}");
            assert!(
                answer.body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("resume")),
                "{answer:?}"
            );
            let seen = status_of(run);
            assert_eq!(seen.status, 200, "{seen:?}");
            started.push(refused_run.clone());
        }
        None => assert_eq!(status_of(&refused_run).status, 404),
    }

    // Free it: the same server records again. A run the full disk stopped is resumed;
    // every run accepted, or said to be recorded, completes.
    drop(file);
    std::fs::remove_file(&filler).expect("the filler removed");
    let answer = start("after", &mut rng);
    assert!(accepted(&answer), "{answer:?}");
    started.push("after".to_owned());
    let deadline = Instant::now() + Duration::from_secs(60);
    for run in &started {
        loop {
            let seen = status_of(run);
            assert_eq!(seen.status, 200, "{seen:?}");
            if seen.body["status"] == "completed" {
                break;
            }
            if seen.body["interrupted"] == true {
                let resumed =
                    server.request("POST", &format!("/api/runs/{run}/resume"), operator, None);
                assert!(accepted(&resumed), "{resumed:?}");
            }
            assert!(Instant::now() < deadline, "run {run} stayed {seen:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // The directory verifies, read beside the running server.
    let out = docket(&disk.join("data"), &["verify", "--all"]);
    assert_eq!(code(&out), 0, "{out:?}");
}
