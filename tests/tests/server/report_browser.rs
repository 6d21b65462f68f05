//! The HTML report (`docket export RUN --format html`, docs/report.md) as a browser shows
//! it: a run with a refused handoff, an effect a person approved and an agent payload
//! carrying `<script>` is exported through the binary and rendered by headless Chromium
//! (Debian's `chromium`, which `.ci/run` installs); the DOM it builds must show the run,
//! its denial with its rule, the effect with its key and receipt, the person's decision
//! and the verification result, and hold no element from the agent's content.
//!
//! Without Chromium the test says it was skipped and passes, unless `CI` is set.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::browser::{CHROMIUM, chromium_present};
use docket_tests::{
    docket_bin, exit_code, geo_agents_built, geo_workflow, stdout_text, summary_run_id,
};

const AGENT: &str = env!("CARGO_BIN_EXE_effect-agent");
const LEDGER: &str = env!("CARGO_BIN_EXE_effect-ledger");
const TEST_AGENT: &str = env!("CARGO_BIN_EXE_test-agent");

/// Would change the page if it ran (it must not: it must show as text).
const SCRIPT: &str =
    "<script>document.body.setAttribute('data-pwned','1');document.title='pwned'</script>";
const IMG: &str = "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">";

/// A publisher asks for one publish needing a person's approval, then hands its result
/// to a writer, which tries to hand it back to the publisher: a handoff the bundle does
/// not allow, so the run ends blocked.
fn workflow(root: &Path) -> PathBuf {
    std::fs::write(
        root.join("bundle.toml"),
        r#"
bundle = { id = "report-browser" }
[[agents]]
id = "external"
[[agents]]
id = "publisher"
side_effects = ["publish"]
[[agents]]
id = "writer"
[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
dry_run_required = true
human_approval_required = true
[interactions]
allowed = [{ from = "external", to = "publisher" }, { from = "publisher", to = "writer" }, { from = "writer", to = "external" }]
[multi_agent_handoffs]
default_handoff_mode = "full"
blocked_context_fields = ["secret"]
"#,
    )
    .expect("bundle");
    std::fs::write(
        root.join("input.json"),
        serde_json::json!({ "topic": SCRIPT, "note": IMG, "secret": "kept-back" }).to_string(),
    )
    .expect("input");
    let path = root.join("workflow.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"report\"\npolicy = \"bundle.toml\"\nentry = \"publisher\"\ninput = \"input.json\"\n\
             [agents.publisher]\ncommand = {AGENT:?}\nargs = [\"--prefix\", \"launch\", \"--count\", \"1\", \"--lane\", \"api\", \"--to\", \"writer\"]\n\
             [agents.writer]\ncommand = {TEST_AGENT:?}\nargs = [\"handoff\", \"--to\", \"publisher\", \"--output-type\", \"review\"]\n\
             [effects.publish]\ncommand = {LEDGER:?}\nargs = [\"--ledger\", {:?}]\ntimeout_ms = 45000\n",
            root.join("ledger.tsv")
        ),
    )
    .expect("workflow");
    path
}

fn docket(data: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(docket_bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .current_dir(cwd)
        .output()
        .expect("docket runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The DOM headless Chromium builds from `page`, with nothing fetched from the network.
fn rendered(page: &Path, scratch: &Path) -> String {
    let profile = scratch.join("chromium-profile");
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    // Read while it writes: a DOM larger than the pipe's buffer would block it otherwise.
    let mut stdout = child.stdout.take().expect("chromium's stdout");
    let reader = std::thread::spawn(move || {
        let mut dom = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut dom).map(|_| dom)
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = child.try_wait().expect("chromium's status") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not render {} in 90 s", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "chromium failed: {status:?}");
    reader
        .join()
        .expect("the reader thread")
        .expect("chromium's output is UTF-8")
}

/// The part of `dom` from the element with `id` to the next section.
fn section<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the rendered page"));
    let rest = &dom[start..];
    &rest[..rest[1..].find("<section").map_or(rest.len(), |i| i + 1)]
}

#[test]
fn the_report_renders_in_chromium_with_everything_and_no_script() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let wf = workflow(dir.path());
    let wf = wf.to_str().expect("utf-8");

    let out = docket(&data, dir.path(), &["run", wf, "--run-id", "rep-1"]);
    assert_eq!(exit_code(&out), 3, "waits for a person: {}", text(&out));
    let out = docket(
        &data,
        dir.path(),
        &[
            "approve",
            "rep-1",
            "ticket-1",
            "--by",
            "ana <ops>",
            "--reason",
            "copy <b>reviewed</b>",
        ],
    );
    assert_eq!(
        exit_code(&out),
        4,
        "blocked by the denied handoff: {}",
        text(&out)
    );

    // Default: RUN.html in the current directory, and the command says so.
    let out = docket(&data, dir.path(), &["export", "rep-1", "--format", "html"]);
    assert_eq!(exit_code(&out), 0, "{}", text(&out));
    let page = dir.path().join("rep-1.html");
    assert!(
        stdout_text(&out).contains("to rep-1.html"),
        "{}",
        text(&out)
    );
    let html = std::fs::read_to_string(&page).expect("the report");
    // `--out -`: the same page on stdout.
    let out = docket(
        &data,
        dir.path(),
        &["export", "rep-1", "--format", "html", "--out", "-"],
    );
    assert_eq!(exit_code(&out), 0, "{}", text(&out));
    assert_eq!(stdout_text(&out), html);

    if !chromium_present() {
        return;
    }
    let dom = rendered(&page, dir.path());
    // The page as the browser built it: the run, its status and the blocking rule.
    assert!(dom.contains("<code id=\"run-id\">rep-1</code>"), "{dom}");
    let status = section(&dom, "status");
    assert!(status.contains("blocked by policy"), "{status}");
    // Nothing from the agents' content became an element or ran.
    let body = &dom[dom.find("<body").expect("a body")..];
    let body = &body[..body.find('>').expect("the body tag ends")];
    assert!(
        !body.contains("data-pwned"),
        "a script or handler ran: {body}"
    );
    assert!(
        dom.contains("<title>docket run rep-1</title>"),
        "the title was changed"
    );
    assert!(!dom.to_lowercase().contains("<script"), "a script element");
    assert!(!dom.contains("<img"), "an img element from the payload");
    assert!(
        dom.contains("&lt;script&gt;document.body.setAttribute"),
        "the payload shows as text"
    );
    // The denial, with its rule and reason.
    let denials = section(&dom, "denials");
    assert!(
        denials.contains("handoff writer → publisher (review)"),
        "{denials}"
    );
    assert!(denials.contains("deny_by_default"), "{denials}");
    // The effect with its idempotency key, receipt, and the person who approved it.
    let effects = section(&dom, "effects");
    assert!(effects.contains("<code>launch-1</code>"), "{effects}");
    assert!(effects.contains("applied at event"), "{effects}");
    assert!(effects.contains("post_id"), "{effects}");
    let humans = section(&dom, "humans");
    assert!(humans.contains("ana &lt;ops&gt;"), "{humans}");
    assert!(
        humans.contains("copy &lt;b&gt;reviewed&lt;/b&gt;"),
        "{humans}"
    );
    // What the handoff to the writer withheld.
    let handoffs = section(&dom, "handoffs");
    assert!(handoffs.contains("<code>secret</code>"), "{handoffs}");
    assert!(!handoffs.contains("kept-back"), "{handoffs}");
    // The verification result.
    let chain = section(&dom, "chain");
    assert!(chain.contains("sound"), "{chain}");
    assert!(section(&dom, "replay").contains("every decision reproduced"));
    // The data directory made its key with its first run: the run is sealed.
    let checkpoint = section(&dom, "checkpoint");
    assert!(
        checkpoint.contains("checked") && checkpoint.contains("/run/"),
        "{checkpoint}"
    );
}

#[test]
fn the_geo_example_report_renders_in_chromium() {
    geo_agents_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let wf = geo_workflow();
    let out = docket(&data, dir.path(), &["run", wf.to_str().expect("utf-8")]);
    assert_eq!(exit_code(&out), 0, "{}", text(&out));
    let run = summary_run_id(&out);
    let page = dir.path().join("geo.html");
    let out = docket(
        &data,
        dir.path(),
        &["export", &run, "--format", "html", "--out", "geo.html"],
    );
    assert_eq!(exit_code(&out), 0, "{}", text(&out));
    if !chromium_present() {
        return;
    }
    let dom = rendered(&page, dir.path());
    assert!(dom.contains(&format!("<code id=\"run-id\">{run}</code>")));
    assert!(section(&dom, "status").contains("completed"));
    // Every handoff of the pipeline, with its rule.
    let handoffs = section(&dom, "handoffs");
    for pair in [
        "<code>governance</code> → <code>observation</code>",
        "<code>reasoning</code> → <code>strategy</code>",
        "<code>strategy</code> → <code>governance</code>",
    ] {
        assert!(handoffs.contains(pair), "no {pair} in {handoffs}");
    }
    assert!(section(&dom, "episodes").contains("ep-1"));
    assert!(section(&dom, "chain").contains("sound"));
    assert!(section(&dom, "replay").contains("every decision reproduced"));
}

#[test]
fn exporting_an_unknown_run_or_format_says_what_is_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let out = docket(&data, dir.path(), &["export", "nope", "--format", "html"]);
    assert_eq!(exit_code(&out), 1, "{}", text(&out));
    assert!(text(&out).contains("nope"), "{}", text(&out));
    assert!(!dir.path().join("nope.html").exists());
    let out = docket(&data, dir.path(), &["export", "nope", "--format", "pdf"]);
    assert_eq!(exit_code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("html"), "{}", text(&out));
}
