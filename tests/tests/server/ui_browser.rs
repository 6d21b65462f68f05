//! The web UI of `docket serve` (issue 17 points 4 and 7; docs/api.md#the-web-ui).
//!
//! Without a browser: every embedded asset is served with its content type and a content
//! security policy, and no page references anything off the server; the session cookie
//! of `POST /api/session` opens a run's event stream and exports and nothing else, and
//! a wrong or absent credential on the stream is a 401.
//!
//! In headless Chromium (Debian's `chromium`, driven through the DevTools protocol): a
//! person signs in with an approver token, approves a waiting run from the inbox with the
//! keyboard, while a second tab signed in as a viewer watches the run's page; that page
//! shows the run complete as the events arrive over server-sent events, and the log read
//! through the API has the approval by the token's name. Another denies a ticket: without
//! a reason the page refuses it and nothing is decided; with one the run stops, blocked.
//! An operator writes a domain from the run's page: in a role the bundle does not let write
//! it the page says why and nothing is recorded; in the editor's role the version appears
//! on the page and in the log, redacted as the domain says.
//! Without Chromium the browser tests say they were skipped and pass, unless `CI` is set.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::browser::{self, chromium_present, token};
use docket_serve::ASSETS;
use docket_tests::{docket_on as docket, exit_code as code};
use headless_chrome::Tab;
use serde_json::{Value, json};

const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");
/// How long any one condition in the browser is waited for.
const BOUND: Duration = Duration::from_secs(60);

/// A `docket serve` on an ephemeral port (in `cwd`), killed when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a request answered: status, headers (lower-case names) and body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| Value::String(self.body.clone()))
    }
}

impl Served {
    fn start(data: &Path, cwd: &Path) -> Self {
        let (child, addr) = docket_tests::start_serve(data, Some(cwd));
        Self { child, addr }
    }

    /// One request with the extra header lines `headers` (each ending in `\r\n`). A
    /// server-sent event stream is read up to its headers only.
    fn call(&self, method: &str, path: &str, headers: &str, body: Option<&Value>) -> Answer {
        let mut s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let body = body.map(Value::to_string).unwrap_or_default();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut reader = BufReader::new(s);
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("a header line");
            if line.trim_end().is_empty() {
                break;
            }
            head.push(line.trim_end().to_owned());
        }
        let status = head
            .first()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {head:?}"));
        let headers: Vec<(String, String)> = head[1..]
            .iter()
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_lowercase(), v.trim().to_owned()))
            .collect();
        let streaming = headers
            .iter()
            .any(|(n, v)| n == "content-type" && v.starts_with("text/event-stream"));
        let mut body = String::new();
        if !streaming {
            reader.read_to_string(&mut body).expect("the body");
            // Chunked bodies (the exports): the chunk sizes are left in; tests here look
            // at JSON bodies, which come whole with a length.
        }
        Answer {
            status,
            headers,
            body,
        }
    }

    fn bearer(&self, method: &str, path: &str, token: &str, body: Option<&Value>) -> Answer {
        self.call(
            method,
            path,
            &format!("Authorization: Bearer {token}\r\n"),
            body,
        )
    }

    /// Polls the run until `done` holds of it, for at most [`BOUND`].
    fn until(&self, run: &str, token: &str, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let answer = self.bearer("GET", &format!("/api/runs/{run}"), token, None);
            assert_eq!(answer.status, 200, "{}", answer.body);
            let body = answer.json();
            if done(&body) {
                return body;
            }
            assert!(start.elapsed() < BOUND, "run {run} stayed {body}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A one-agent workflow whose agent holds its remaining actions for a person's review,
/// then finishes once approved.
fn asking_workflow(dir: &Path) -> PathBuf {
    docket_tests::one_agent_workflow(dir, "ui", "asks", TEST_AGENT, &["escalate_then_finish"])
}

#[test]
fn every_asset_is_served_with_its_type_and_no_page_reaches_off_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Served::start(&dir.path().join("data"), dir.path());
    assert!(ASSETS.len() >= 5, "the UI's files");
    for asset in ASSETS {
        // No token: the pages hold no data.
        let answer = server.call("GET", asset.path, "", None);
        assert_eq!(answer.status, 200, "{}", asset.path);
        assert_eq!(
            answer.header("content-type"),
            Some(asset.content_type),
            "{}",
            asset.path
        );
        let expected = match asset.path {
            p if p.ends_with(".js") => "text/javascript; charset=utf-8",
            p if p.ends_with(".css") => "text/css; charset=utf-8",
            p if p.ends_with(".svg") => "image/svg+xml",
            _ => "text/html; charset=utf-8",
        };
        assert_eq!(asset.content_type, expected, "{}", asset.path);
        assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
        let csp = answer
            .header("content-security-policy")
            .unwrap_or_else(|| panic!("{} has no content security policy", asset.path));
        assert!(
            csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"),
            "{csp}"
        );
        assert_eq!(answer.body, asset.body, "{} is served whole", asset.path);
        // Nothing off the server: no absolute or protocol-relative URL, bar the SVG
        // namespace (a name, never fetched).
        let text = asset
            .body
            .replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        for needle in ["http://", "https://", "\"//", "'//", "(//", "@import"] {
            assert!(
                !text.contains(needle),
                "{} references `{needle}`: a network URL",
                asset.path
            );
        }
    }
    // Every file the page and its modules name is one of the assets.
    let served: Vec<&str> = ASSETS.iter().map(|a| a.path).collect();
    for asset in ASSETS {
        for (open, close) in [("src=\"", '"'), ("href=\"/", '"'), ("from './", '\'')] {
            for part in asset.body.split(open).skip(1) {
                let name = &part[..part.find(close).expect("a closing quote")];
                let path = match open {
                    "href=\"/" => format!("/{name}"),
                    "from './" => format!("/assets/{name}"),
                    _ => name.to_owned(),
                };
                assert!(
                    served.contains(&path.as_str()),
                    "{} names {path}, which is not served",
                    asset.path
                );
            }
        }
    }
    let answer = server.call("GET", "/assets/nope.js", "", None);
    assert_eq!(answer.status, 404);
    assert_eq!(answer.json()["error"]["where"], "path");
}

#[test]
fn the_session_cookie_opens_the_stream_and_exports_and_nothing_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let viewer = token(&data, "viewer", "vic");
    let admin = token(&data, "admin", "root");
    let wf = asking_workflow(dir.path());
    let server = Served::start(&data, dir.path());
    let started = server.bearer(
        "POST",
        "/api/runs",
        &admin,
        Some(&json!({ "workflow": wf, "run_id": "ui-1" })),
    );
    assert!(
        matches!(started.status, 200 | 202),
        "{} {}",
        started.status,
        started.body
    );
    server.until("ui-1", &viewer, |r| r["status"] == "waiting_for_human");

    // The bearer token exchanged for a cookie only script cannot read, sent to the API only.
    let session = server.bearer("POST", "/api/session", &viewer, None);
    assert_eq!(session.status, 200, "{}", session.body);
    assert_eq!(session.json()["name"], "vic");
    assert_eq!(session.json()["role"], "viewer");
    let set = session.header("set-cookie").expect("a cookie").to_owned();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/api"] {
        assert!(set.contains(part), "{set}");
    }
    let cookie = set.split(';').next().expect("name=value").to_owned();
    assert!(cookie.starts_with("docket_session="), "{cookie}");
    let with_cookie = format!("Cookie: {cookie}\r\n");

    let stream = "/api/runs/ui-1/events/stream";
    let answer = server.call("GET", stream, &with_cookie, None);
    assert_eq!(answer.status, 200, "the stream takes the cookie");
    assert_eq!(
        answer.header("content-type"),
        Some("text/event-stream"),
        "{:?}",
        answer.headers
    );
    let answer = server.call(
        "GET",
        "/api/runs/ui-1/export?format=html",
        &with_cookie,
        None,
    );
    assert_eq!(answer.status, 200, "an export link takes the cookie");

    // Absent or wrong credentials on the stream: 401, naming what is wrong.
    let answer = server.call("GET", stream, "", None);
    assert_eq!(answer.status, 401);
    assert_eq!(answer.json()["error"]["where"], "header.authorization");
    let answer = server.call("GET", stream, "Cookie: docket_session=00ff\r\n", None);
    assert_eq!(answer.status, 401);
    assert_eq!(answer.json()["error"]["where"], "cookie.docket_session");
    let answer = server.call("GET", stream, "Authorization: Bearer dkt_wrong\r\n", None);
    assert_eq!(answer.status, 401);
    // A wrong bearer token is not rescued by a good cookie.
    let answer = server.call(
        "GET",
        stream,
        &format!("Authorization: Bearer dkt_wrong\r\n{with_cookie}"),
        None,
    );
    assert_eq!(answer.status, 401);

    // Every other route ignores the cookie: it can read nothing else and change nothing.
    for (method, path, body) in [
        ("GET", "/api/runs", None),
        ("GET", "/api/runs/ui-1/events", None),
        ("GET", "/api/tickets", None),
        (
            "POST",
            "/api/runs/ui-1/cancel",
            Some(json!({ "reason": "by cookie" })),
        ),
        ("POST", "/api/session", None),
    ] {
        let answer = server.call(method, path, &with_cookie, body.as_ref());
        assert_eq!(answer.status, 401, "{method} {path} with only the cookie");
    }

    // The inbox's route: the run's open ticket, with what it asks.
    let inbox = server.bearer("GET", "/api/tickets", &viewer, None).json();
    let tickets = inbox["tickets"].as_array().expect("tickets");
    assert_eq!(tickets.len(), 1, "{inbox}");
    assert_eq!(tickets[0]["run_id"], "ui-1");
    assert_eq!(tickets[0]["ticket"], "ticket-1");
    assert_eq!(tickets[0]["subject"]["type"], "proceed", "{inbox}");
    assert_eq!(tickets[0]["subject"]["agent"], "worker", "{inbox}");

    // The start form's route: the workflow file in the server's directory.
    let listed = server.bearer("GET", "/api/workflows", &admin, None).json();
    let workflows = listed["workflows"].as_array().expect("workflows");
    assert!(
        workflows.iter().any(
            |w| w["name"] == "asks" && w["path"].as_str().is_some_and(|p| p.ends_with(".toml"))
        ),
        "{listed}"
    );
    assert_eq!(
        server.bearer("GET", "/api/workflows", &viewer, None).status,
        403,
        "starting runs is the operator's"
    );

    // Signing out ends the session: its cookie is refused from then on.
    let out = server.call(
        "DELETE",
        "/api/session",
        &format!("Authorization: Bearer {viewer}\r\n{with_cookie}"),
        None,
    );
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(
        out.header("set-cookie")
            .is_some_and(|c| c.contains("Max-Age=0"))
    );
    assert_eq!(server.call("GET", stream, &with_cookie, None).status, 401);
    // Revoking the token ends the sessions made from it.
    let again = server.bearer("POST", "/api/session", &viewer, None);
    let cookie = again
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("a cookie")
        .to_owned();
    assert_eq!(
        server
            .call("GET", stream, &format!("Cookie: {cookie}\r\n"), None)
            .status,
        200
    );
    assert_eq!(code(&docket(&data, &["token", "revoke", "vic"])), 0);
    assert_eq!(
        server
            .call("GET", stream, &format!("Cookie: {cookie}\r\n"), None)
            .status,
        401
    );
}

/// Waits until `selector` matches in `tab`, for at most [`BOUND`].
fn wait_for(tab: &Tab, selector: &str) {
    browser::wait_for(tab, selector, BOUND);
}

/// Signs in on `tab` (the token entered, Enter submitting) and waits until the header
/// names who signed in.
fn sign_in(tab: &Tab, base: &str, token: &str, name: &str) {
    browser::sign_in(tab, base, token, name, BOUND);
}

/// A server over a fresh data directory in `dir`, an approver (`ana`), a viewer (`vic`),
/// an operator (`op`) and a run `run` of [`asking_workflow`] started by the operator and
/// waiting for a person.
struct WaitingRun {
    server: Served,
    approver: String,
    viewer: String,
    operator: String,
}

impl WaitingRun {
    fn start(dir: &Path, run: &str) -> Self {
        Self::start_under(dir, run, None)
    }

    /// [`WaitingRun::start`], under the bundle `policy` (TOML) instead of the workflow's
    /// own when given.
    fn start_under(dir: &Path, run: &str, policy: Option<&str>) -> Self {
        let data = dir.join("data");
        let approver = token(&data, "approver", "ana");
        let viewer = token(&data, "viewer", "vic");
        let operator = token(&data, "operator", "op");
        let wf = asking_workflow(dir);
        if let Some(policy) = policy {
            std::fs::write(dir.join("policy.toml"), policy).expect("write the bundle");
        }
        let server = Served::start(&data, dir);
        let started = server.bearer(
            "POST",
            "/api/runs",
            &operator,
            Some(&json!({ "workflow": wf, "run_id": run })),
        );
        assert!(matches!(started.status, 200 | 202), "{}", started.body);
        server.until(run, &viewer, |r| r["status"] == "waiting_for_human");
        WaitingRun {
            server,
            approver,
            viewer,
            operator,
        }
    }

    /// Headless Chromium with its profile in `dir`, and `server`'s address to open.
    fn browser_of(server: &Served, dir: &Path) -> (headless_chrome::Browser, String) {
        let browser = browser::launch(dir.join("chromium-profile"), Duration::from_secs(300), None);
        (browser, format!("http://{}/", server.addr))
    }
}

#[test]
fn a_person_approves_a_waiting_run_from_the_inbox_and_sees_it_complete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let WaitingRun {
        server,
        approver,
        viewer,
        ..
    } = WaitingRun::start(dir.path(), "inbox-1");
    if !chromium_present() {
        return;
    }
    let (browser, base) = WaitingRun::browser_of(&server, dir.path());

    // A viewer watches the run's page; the events so far are on its timeline.
    let watcher = browser.new_tab().expect("a tab");
    sign_in(&watcher, &base, &viewer, "vic");
    watcher
        .navigate_to(&format!("{base}#/runs/inbox-1"))
        .expect("the run's page");
    wait_for(&watcher, "#run-status[data-status=waiting_for_human]");
    wait_for(&watcher, "#timeline li[data-kind='human.escalated']");
    wait_for(&watcher, "#verification .badge.sound");
    wait_for(&watcher, "#live");
    // Live before the decision: the stream is open (the cookie was accepted).
    let start = Instant::now();
    while watcher
        .find_element("#live")
        .and_then(|e| e.get_inner_text())
        .map_or(true, |t| t != "(live)")
    {
        assert!(start.elapsed() < BOUND, "the run's page never went live");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        watcher
            .find_element("#timeline li[data-kind='run.completed']")
            .is_err(),
        "not completed yet"
    );

    // An approver finds the ticket in the inbox and approves it, by the keyboard.
    let inbox = browser.new_tab().expect("a tab");
    sign_in(&inbox, &base, &approver, "ana");
    inbox
        .find_element("nav a[href='#/inbox']")
        .expect("the inbox link")
        .click()
        .expect("open the inbox");
    let form = "form.ticket[data-run='inbox-1'][data-ticket='ticket-1']";
    wait_for(&inbox, form);
    let asks = inbox
        .find_element(&format!("{form} .asks"))
        .expect("what it asks")
        .get_inner_text()
        .expect("text");
    assert!(
        asks.contains("worker's remaining actions wait for review"),
        "{asks}"
    );
    inbox
        .find_element(&format!("{form} textarea[name=reason]"))
        .expect("the reason field")
        .focus()
        .expect("focus");
    browser::enter_text(&inbox, "checked from the browser");
    // The next control after the reason is the Approve button.
    inbox.press_key("Tab").expect("tab");
    let focused = inbox
        .evaluate("document.activeElement.value", false)
        .expect("evaluate")
        .value;
    assert_eq!(focused, Some(json!("approve")), "Tab reaches Approve");
    inbox.press_key("Enter").expect("approve");
    wait_for(&inbox, ".notice");
    let said = inbox
        .find_element(".notice")
        .expect("the notice")
        .get_inner_text()
        .expect("text");
    assert!(said.contains("Approved ticket-1 of inbox-1"), "{said}");

    // The watching page sees the decision and the completion arrive, without a reload.
    wait_for(&watcher, "#timeline li[data-kind='human.decided']");
    wait_for(&watcher, "#timeline li[data-kind='run.completed']");
    wait_for(&watcher, "#run-status[data-status=completed]");
    let decided = watcher
        .find_element("#timeline li[data-kind='human.decided']")
        .expect("the decision")
        .get_inner_text()
        .expect("text");
    assert!(
        decided.contains("approved by ana: checked from the browser"),
        "{decided}"
    );
    // In order, each once, as the log has them.
    let seqs = watcher
        .evaluate(
            "JSON.stringify([...document.querySelectorAll('#timeline li')].map(li => Number(li.dataset.seq)))",
            false,
        )
        .expect("evaluate")
        .value
        .and_then(|v| v.as_str().map(str::to_owned))
        .expect("the sequence numbers");
    let seqs: Vec<u64> = serde_json::from_str(&seqs).expect("numbers");

    // The log, through the API: completed, decided by the token's name.
    let run = server.until("inbox-1", &viewer, |r| r["status"] == "completed");
    let events = server
        .bearer("GET", "/api/runs/inbox-1/events", &viewer, None)
        .json();
    let events = events["events"].as_array().expect("events").clone();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "the page shows every event once, in order ({run})"
    );
    let decided = events
        .iter()
        .find(|e| e["kind"] == "human.decided")
        .expect("human.decided");
    assert_eq!(decided["payload"]["by"], "ana");
    assert_eq!(decided["payload"]["approved"], true);
    assert_eq!(decided["payload"]["reason"], "checked from the browser");

    // The inbox, reloaded, is empty.
    inbox
        .find_element("nav a[href='#/runs']")
        .expect("runs link")
        .click()
        .expect("runs");
    wait_for(&inbox, "tr[data-run='inbox-1']");
    inbox
        .find_element("nav a[href='#/inbox']")
        .expect("the inbox link")
        .click()
        .expect("open the inbox");
    wait_for(&inbox, "#inbox-empty");
}

/// The asking workflow's bundle with a domain of summaries that a person in the role
/// `editor` writes, its raw pointers redacted.
const EDITED_BUNDLE: &str = r#"
bundle = { id = "ui" }
agents = [
  { id = "external" },
  { id = "worker" },
  { id = "editor", authority = "human", write_scopes = ["summaries"] },
]
[[domains]]
id = "summaries"
max_bytes = 4096
redact = ["raw_ref"]
[interactions]
allowed = [{ from = "external", to = "worker" }, { from = "worker", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#;

/// Puts `text` into the field `selector` of `tab`.
fn fill(tab: &Tab, selector: &str, text: &str) {
    tab.find_element(selector)
        .unwrap_or_else(|e| panic!("no {selector}: {e}"))
        .focus()
        .expect("focus");
    browser::enter_text(tab, text);
}

#[test]
fn a_person_writes_a_domain_from_the_run_page_and_its_version_appears() {
    let dir = tempfile::tempdir().expect("tempdir");
    let WaitingRun {
        server,
        viewer,
        operator,
        ..
    } = WaitingRun::start_under(dir.path(), "write-1", Some(EDITED_BUNDLE));
    if !chromium_present() {
        return;
    }
    let (browser, base) = WaitingRun::browser_of(&server, dir.path());
    let tab = browser.new_tab().expect("a tab");
    sign_in(&tab, &base, &operator, "op");
    tab.navigate_to(&format!("{base}#/runs/write-1"))
        .expect("the run's page");
    wait_for(&tab, "#run-status[data-status=waiting_for_human]");
    wait_for(&tab, "form#domain-write");
    // The form is folded away in its details; open it, then fill it in.
    tab.evaluate(
        "document.getElementById('domain-write').closest('details').open = true",
        false,
    )
    .expect("open the form");

    // First in a role that may not write it: refused, said on the page, nothing recorded.
    fill(&tab, "#domain-name", "summaries");
    fill(&tab, "#domain-role", "worker");
    fill(&tab, "#domain-reason", "the thread was summarised wrongly");
    fill(
        &tab,
        "#domain-content",
        r#"{"text": "customer wants a refund", "raw_ref": "s3://raw/thread-9"}"#,
    );
    tab.find_element("form#domain-write button[type=submit]")
        .expect("the submit button")
        .click()
        .expect("submit");
    wait_for(&tab, "#domain-write + div .error");
    let refused = tab
        .evaluate(
            "document.getElementById('domain-write').nextElementSibling.innerText",
            false,
        )
        .expect("evaluate")
        .value;
    let refused = refused
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    assert!(refused.contains("worker"), "{refused}");
    let events = server
        .bearer("GET", "/api/runs/write-1/events", &viewer, None)
        .json();
    assert!(
        !events["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["kind"] == "human.wrote_domain"),
        "a refused write records nothing"
    );

    // In the editor's role: written, the version said on the page and on the timeline.
    tab.evaluate("document.getElementById('domain-role').value = ''", false)
        .expect("clear the role");
    fill(&tab, "#domain-role", "editor");
    tab.find_element("form#domain-write button[type=submit]")
        .expect("the submit button")
        .click()
        .expect("submit");
    wait_for(&tab, "#domain-write + div .notice");
    let said = tab
        .find_element("#domain-write + div .notice")
        .and_then(|e| e.get_inner_text())
        .expect("the notice");
    assert!(said.contains("Written: summaries version 1"), "{said}");
    wait_for(&tab, "#timeline li[data-kind='domain.written']");

    // The log, through the API: the person's act, then the version, redacted.
    let events = server
        .bearer("GET", "/api/runs/write-1/events", &viewer, None)
        .json();
    let events = events["events"].as_array().expect("events").clone();
    let wrote = events
        .iter()
        .find(|e| e["kind"] == "human.wrote_domain")
        .expect("human.wrote_domain");
    assert_eq!(wrote["payload"]["by"], "op");
    assert_eq!(wrote["payload"]["role"], "editor");
    assert_eq!(
        wrote["payload"]["reason"],
        "the thread was summarised wrongly"
    );
    let written = events
        .iter()
        .find(|e| e["kind"] == "domain.written")
        .expect("domain.written");
    assert_eq!(written["payload"]["version"], 1, "{written}");
    assert_eq!(
        written["payload"]["content"]["raw_ref"], "[redacted]",
        "{written}"
    );
    assert_eq!(
        written["payload"]["content"]["text"],
        "customer wants a refund"
    );
}

#[test]
fn a_person_denies_a_waiting_run_from_the_inbox_and_the_run_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let WaitingRun {
        server,
        approver,
        viewer,
        ..
    } = WaitingRun::start(dir.path(), "deny-1");
    if !chromium_present() {
        return;
    }
    let (browser, base) = WaitingRun::browser_of(&server, dir.path());
    let inbox = browser.new_tab().expect("a tab");
    sign_in(&inbox, &base, &approver, "ana");
    inbox
        .navigate_to(&format!("{base}#/inbox"))
        .expect("the inbox");
    let form = "form.ticket[data-run='deny-1'][data-ticket='ticket-1']";
    wait_for(&inbox, form);
    let deny = format!("{form} button[value=deny]");

    // Without a reason, the page refuses before asking the server, and nothing is decided.
    inbox
        .find_element(&deny)
        .expect("the Deny button")
        .click()
        .expect("deny");
    wait_for(&inbox, &format!("{form} .error"));
    let refused = inbox
        .find_element(&format!("{form} .error"))
        .expect("the refusal")
        .get_inner_text()
        .expect("text");
    assert!(
        refused.contains("A reason is required to deny"),
        "{refused}"
    );
    let run = server
        .bearer("GET", "/api/runs/deny-1", &viewer, None)
        .json();
    assert_eq!(run["status"], "waiting_for_human", "{run}");

    // With one, the run stops, blocked, the decision recorded with the token's name.
    inbox
        .find_element(&format!("{form} textarea[name=reason]"))
        .expect("the reason field")
        .focus()
        .expect("focus");
    browser::enter_text(&inbox, "not what we asked for");
    inbox
        .find_element(&deny)
        .expect("the Deny button")
        .click()
        .expect("deny");
    wait_for(&inbox, ".notice");
    let said = inbox
        .find_element(".notice")
        .expect("the notice")
        .get_inner_text()
        .expect("text");
    assert!(said.contains("Denied ticket-1 of deny-1"), "{said}");
    server.until("deny-1", &viewer, |r| r["status"] == "blocked");
    let events = server
        .bearer("GET", "/api/runs/deny-1/events", &viewer, None)
        .json();
    let decided = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["kind"] == "human.decided")
        .cloned()
        .expect("human.decided");
    assert_eq!(decided["payload"]["by"], "ana");
    assert_eq!(decided["payload"]["approved"], false);
    assert_eq!(decided["payload"]["reason"], "not what we asked for");
}

/// The Schedules page (docs/schedules.md): a schedule made through the API is listed with
/// its timing and maker; its Pause button pauses it, by the token's name, and the page
/// then offers to unpause it.
#[test]
fn a_person_pauses_a_schedule_from_the_schedules_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let operator = token(&data, "operator", "op");
    let wf = docket_tests::one_agent_workflow(dir.path(), "ui", "ui", TEST_AGENT, &["finish"]);
    let server = Served::start(&data, dir.path());
    let made = server.bearer(
        "POST",
        "/api/schedules",
        &operator,
        Some(&json!({ "name": "nightly", "workflow": wf, "cron": "0 2 * * *", "time_zone": "Europe/Paris" })),
    );
    assert_eq!(made.status, 201, "{}", made.body);
    assert_eq!(made.json()["made_by"], "op");
    if !chromium_present() {
        return;
    }
    let browser = browser::launch(
        dir.path().join("chromium-profile"),
        Duration::from_secs(300),
        None,
    );
    let base = format!("http://{}/", server.addr);
    let tab = browser.new_tab().expect("a tab");
    sign_in(&tab, &base, &operator, "op");
    tab.find_element("nav a[href='#/schedules']")
        .expect("the schedules link")
        .click()
        .expect("open the page");
    let row = "#schedules tr[data-schedule='nightly']";
    wait_for(&tab, row);
    let text = tab
        .find_element(row)
        .and_then(|e| e.get_inner_text())
        .expect("the row");
    assert!(
        text.contains("0 2 * * * (Europe/Paris)") && text.contains("op"),
        "{text}"
    );
    tab.find_element(&format!("{row} button"))
        .expect("the pause button")
        .click()
        .expect("pause");
    let start = Instant::now();
    loop {
        let s = server
            .bearer("GET", "/api/schedules/nightly", &operator, None)
            .json();
        if s["state"] == "paused" {
            assert_eq!(s["paused"]["by"], "op", "{s}");
            break;
        }
        assert!(start.elapsed() < BOUND, "not paused: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let start = Instant::now();
    while tab
        .find_element(&format!("{row} button"))
        .and_then(|e| e.get_inner_text())
        .map_or(true, |t| t != "Unpause nightly")
    {
        assert!(
            start.elapsed() < BOUND,
            "the page does not offer to unpause"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
