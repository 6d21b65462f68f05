//! The five examples operated from the browser (issue 17, "Done when"): with `docket
//! serve` started from the workspace, so that the start form lists them, a person in
//! headless Chromium starts each example from the form, watches its run page, takes its
//! human step from the approvals inbox (answers the consulting agent's question, picks
//! one of the software team's conflicting outputs, approves the social campaign's DM),
//! sees the run complete live, and reads its audit trail: the verification badge,
//! decisions with the rule that made them, raw events, and the two export links (which
//! answer 200 with their content type). The log read through the API has each human step
//! with the signed-in name and the reason typed.
//!
//! With `DOCKET_UI_SHOTS=DIR` set, each step's page is saved as a PNG in DIR, to see what
//! a person sees. Without Chromium the test says it was skipped and passes, unless `CI`
//! is set.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::browser::{self, chromium_present, token};
use docket_tests::{example_agents_built, workspace_root};
use headless_chrome::Tab;
use headless_chrome::protocol::cdp::Page;
use serde_json::Value;

/// How long any one condition in the browser is waited for.
const BOUND: Duration = Duration::from_secs(90);

/// The human step an example's scenario waits for.
enum Step {
    /// None: the run completes by itself.
    Nothing,
    /// A question: answer with the option of this number (from 1).
    Answer(usize),
    /// Approve, picking the option of this number when it is a choice.
    Approve(Option<usize>),
}

struct Example {
    package: &'static str,
    workflow: &'static str,
    /// The input as the start form lists it; `None`: the workflow's own.
    input: Option<&'static str>,
    run: &'static str,
    step: Step,
}

const EXAMPLES: &[Example] = &[
    Example {
        package: "docket-example-geo",
        workflow: "examples/geo/workflow.toml",
        input: None,
        run: "geo-1",
        step: Step::Nothing,
    },
    Example {
        package: "docket-example-claims",
        workflow: "examples/claims/workflow.toml",
        input: Some("examples/claims/injury.json"),
        run: "claims-1",
        step: Step::Nothing,
    },
    Example {
        package: "docket-example-consulting",
        workflow: "examples/consulting/workflow.toml",
        input: Some("examples/consulting/unclear.json"),
        run: "consulting-1",
        step: Step::Answer(1),
    },
    Example {
        package: "docket-example-software-team",
        workflow: "examples/software-team/workflow.toml",
        input: None,
        run: "team-1",
        step: Step::Approve(Some(2)),
    },
    Example {
        package: "docket-example-social",
        workflow: "examples/social/workflow.toml",
        // Its own input: input/success_achieved.json.
        input: None,
        run: "social-1",
        step: Step::Approve(None),
    },
];

/// What the page shows, for a failure's message.
fn page_text(tab: &Tab) -> String {
    tab.evaluate("document.getElementById('view').innerText", false)
        .ok()
        .and_then(|o| o.value)
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
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

/// The value of the expression `js` in `tab` (awaited when a promise), through JSON (the
/// protocol answers arrays and objects by reference otherwise).
fn eval(tab: &Tab, js: &str) -> Value {
    let wrapped = format!("(async () => JSON.stringify(await ({js})))()");
    let text = tab
        .evaluate(&wrapped, true)
        .unwrap_or_else(|e| panic!("{js}: {e}"))
        .value;
    text.as_ref()
        .and_then(Value::as_str)
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null)
}

fn text_of(tab: &Tab, selector: &str) -> String {
    tab.find_element(selector)
        .unwrap_or_else(|e| panic!("{selector}: {e}; the page shows: {}", page_text(tab)))
        .get_inner_text()
        .expect("text")
}

/// Saves the whole page as `DIR/NAME.png` (and its text as `DIR/NAME.txt`) when `DOCKET_UI_SHOTS=DIR` is set.
fn shot(tab: &Tab, name: &str) {
    let Some(dir) = std::env::var_os("DOCKET_UI_SHOTS") else {
        return;
    };
    let png = tab
        .call_method(Page::CaptureScreenshot {
            format: Some(Page::CaptureScreenshotFormatOption::Png),
            quality: None,
            clip: None,
            from_surface: Some(true),
            capture_beyond_viewport: Some(true),
            optimize_for_speed: None,
        })
        .expect("a screenshot")
        .data;
    use base64::Engine as _;
    let png = base64::prelude::BASE64_STANDARD
        .decode(png)
        .expect("base64");
    std::fs::create_dir_all(&dir).expect("the screenshot folder");
    let dir = PathBuf::from(dir);
    std::fs::write(dir.join(format!("{name}.png")), png).expect("a PNG");
    std::fs::write(dir.join(format!("{name}.txt")), page_text(tab)).expect("the text");
}

/// Follows the link `selector` by the keyboard (focus, Enter), with `tab` in front (a
/// tab behind the others takes no input).
fn follow(tab: &Tab, selector: &str) {
    tab.activate().expect("the tab comes to the front");
    wait_for(tab, selector);
    tab.find_element(selector)
        .expect("the link")
        .focus()
        .expect("focus");
    tab.press_key("Enter").expect("follow");
}

/// Sets the `<select>` `selector` to the option of value `value`, as a person choosing it
/// (a `change` event), failing when no option has that value.
fn choose(tab: &Tab, selector: &str, value: &str) {
    let js = format!(
        "(() => {{ const s = document.querySelector({sel}); \
         if (![...s.options].some(o => o.value === {val})) return [...s.options].map(o => o.value); \
         s.value = {val}; s.dispatchEvent(new Event('change')); return true; }})()",
        sel = serde_json::to_string(selector).expect("json"),
        val = serde_json::to_string(value).expect("json"),
    );
    let got = eval(tab, &js);
    assert_eq!(got, Value::Bool(true), "{selector} offers only {got}");
}

/// Enters `text` into the field `selector` (it takes the focus first).
fn type_into(tab: &Tab, selector: &str, text: &str) {
    tab.activate().expect("the tab comes to the front");
    tab.find_element(selector)
        .unwrap_or_else(|e| panic!("{selector}: {e}"))
        .focus()
        .expect("focus");
    browser::enter_text(tab, text);
}

/// Waits until the script `js` in `tab` is `true`, for at most [`BOUND`].
fn until(tab: &Tab, js: &str, what: &str) {
    let start = Instant::now();
    while eval(tab, js) != Value::Bool(true) {
        assert!(
            start.elapsed() < BOUND,
            "{what}: not within {BOUND:?}; the page shows: {}",
            page_text(tab)
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// What the link `selector` answers when the page fetches it with its session cookie:
/// status, content type, first line, and whether the body names `needle`.
fn fetched(tab: &Tab, selector: &str, needle: &str) -> (u64, String, String, bool) {
    let js = format!(
        "(async () => {{ const a = document.querySelector({}); const r = await fetch(a.href); \
         const body = await r.text(); \
         return [r.status, r.headers.get('content-type'), body.split('\\n')[0], body.includes({})]; }})()",
        serde_json::to_string(selector).expect("json"),
        serde_json::to_string(needle).expect("json"),
    );
    let got = eval(tab, &js);
    (
        got[0].as_u64().unwrap_or(0),
        got[1].as_str().unwrap_or_default().to_owned(),
        got[2].as_str().unwrap_or_default().to_owned(),
        got[3].as_bool().unwrap_or(false),
    )
}

#[test]
fn a_person_operates_the_five_examples_from_the_browser() {
    for example in EXAMPLES {
        example_agents_built(example.package);
    }
    if !chromium_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let outbox = dir.path().join("outbox.jsonl");
    let operator = token(&data, "operator", "olga");
    let approver = token(&data, "approver", "ana");
    let (child, addr) = docket_tests::start_serve_with(
        &data,
        Some(&workspace_root()),
        &[("SOCIAL_OUTBOX", outbox.as_os_str())],
    );
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _server = Killed(child);

    let browser = browser::launch(
        dir.path().join("chromium-profile"),
        Duration::from_secs(600),
        Some((1280, 1000)),
    );
    let base = format!("http://{addr}/");
    // Olga starts runs and watches them; Ana takes the human steps from the inbox.
    let olga = browser.new_tab().expect("a tab");
    sign_in(&olga, &base, &operator, "olga");
    let ana = browser.new_tab().expect("a tab");
    sign_in(&ana, &base, &approver, "ana");

    let mut waiting_decisions = 0;
    for (n, example) in EXAMPLES.iter().enumerate() {
        let shot_name = |step: &str| format!("{n}-{}-{step}", example.run);
        // Start it from the form.
        follow(&olga, "nav a[href='#/start']");
        wait_for(&olga, "#start-workflow");
        choose(&olga, "#start-workflow", example.workflow);
        if let Some(input) = example.input {
            choose(&olga, "#start-input", input);
        }
        type_into(&olga, "#start-run-id", example.run);
        shot(&olga, &shot_name("start"));
        olga.find_element("#start button[type=submit]")
            .expect("Start")
            .click()
            .expect("start");
        let started = format!("#start-out a[href='#/runs/{}']", example.run);
        wait_for(&olga, &started);
        follow(&olga, &started);

        // Watch it: the page goes live and shows where the run stands.
        wait_for(&olga, "#run-status");
        until(
            &olga,
            "document.getElementById('live')?.innerText === '(live)'",
            "the run's page goes live",
        );
        if !matches!(example.step, Step::Nothing) {
            wait_for(&olga, "#run-status[data-status=waiting_for_human]");
            wait_for(&olga, "#timeline li[data-kind='human.escalated']");
            shot(&olga, &shot_name("waiting"));

            // Ana answers or approves it from the inbox, with a reason.
            follow(&ana, "nav a[href='#/inbox']");
            let form = format!("form.ticket[data-run='{}']", example.run);
            wait_for(&ana, &form);
            shot(&ana, &shot_name("inbox"));
            let reason = format!("decided in the browser for {}", example.run);
            let (button, did) = match example.step {
                Step::Answer(option) => {
                    ana.find_element(&format!("{form} input[type=radio][value='{option}']"))
                        .expect("the option")
                        .click()
                        .expect("choose it");
                    ("answer", "Answered")
                }
                Step::Approve(option) => {
                    if let Some(option) = option {
                        ana.find_element(&format!("{form} input[type=radio][value='{option}']"))
                            .expect("the option")
                            .click()
                            .expect("choose it");
                    }
                    ("approve", "Approved")
                }
                Step::Nothing => unreachable!(),
            };
            type_into(&ana, &format!("{form} textarea[name=reason]"), &reason);
            ana.find_element(&format!("{form} button[value={button}]"))
                .expect("the button")
                .click()
                .expect("press it");
            wait_for(&ana, ".ticket-done");
            let said = text_of(&ana, ".ticket-done");
            assert!(said.contains(did), "{said}");
            shot(&ana, &shot_name("decided"));
        }

        // It finishes, seen live on Olga's page.
        wait_for(&olga, "#timeline li[data-kind='run.completed']");
        wait_for(&olga, "#run-status[data-status=completed]");
        wait_for(&olga, "#verification .badge.sound");
        shot(&olga, &shot_name("completed"));

        // A decision that waits for a person reads as such, and is not shown as a denial.
        let review = eval(
            &olga,
            "JSON.stringify([...document.querySelectorAll(\"#timeline li[data-kind='policy.decided']\")]\
             .filter(li => li.innerText.includes('needs approval')).map(li => li.classList.contains('bad')))",
        );
        let review: Vec<bool> =
            serde_json::from_str(review.as_str().unwrap_or("[]")).expect("a list");
        assert!(!review.contains(&true), "needs approval shown as denied");
        waiting_decisions += review.len();

        // The audit trail: decisions with their rules, raw events, exports.
        let rules = eval(
            &olga,
            "[...document.querySelectorAll('#timeline li')].filter(li => /by rule \\S+/.test(li.innerText)).length",
        );
        assert!(
            rules.as_u64().unwrap_or(0) > 0,
            "no decision names its rule: {}",
            page_text(&olga)
        );
        let raw = eval(
            &olga,
            "JSON.parse(document.querySelector('#timeline li[data-kind=\"run.completed\"] details pre').textContent).kind",
        );
        assert_eq!(raw, Value::String("run.completed".into()));
        let (status, kind, first, named) = fetched(&olga, "#export-jsonl", example.run);
        assert_eq!(status, 200, "{first}");
        assert!(kind.starts_with("application/x-ndjson"), "{kind}");
        let header: Value = serde_json::from_str(&first).unwrap_or(Value::Null);
        assert_eq!(header["run"], example.run, "{first}");
        assert!(named);
        let (status, kind, first, named) = fetched(&olga, "#export-html", example.run);
        assert_eq!(status, 200, "{first}");
        assert!(kind.starts_with("text/html"), "{kind}");
        assert!(named, "the report names the run");

        // The log through the API: the human step by the signed-in name, with the reason.
        if !matches!(example.step, Step::Nothing) {
            let events = eval(
                &olga,
                &format!(
                    "(async () => {{ const t = sessionStorage.getItem('docket.token'); \
                     const r = await fetch('/api/runs/{}/events', {{ headers: {{ Authorization: 'Bearer ' + t }} }}); \
                     return (await r.json()).events.filter(e => e.kind === 'human.decided').map(e => e.payload); }})()",
                    example.run
                ),
            );
            let decided = events.as_array().expect("decisions");
            assert_eq!(decided.len(), 1, "{events}");
            assert_eq!(decided[0]["by"], "ana", "{events}");
            assert_eq!(
                decided[0]["reason"],
                format!("decided in the browser for {}", example.run),
                "{events}"
            );
        }
    }

    assert!(
        waiting_decisions > 0,
        "no example showed a decision waiting for a person"
    );

    // Ana's inbox, left open, has seen every ticket go.
    wait_for(&ana, "#inbox-empty");

    // Every run is in the list, completed.
    follow(&olga, "nav a[href='#/runs']");
    for example in EXAMPLES {
        wait_for(
            &olga,
            &format!("tr[data-run='{}'] [data-status=completed]", example.run),
        );
    }
    shot(&olga, "9-runs");

    // Two runs a page: forward to the last page and back to the first, by the links.
    let mut ids: Vec<&str> = EXAMPLES.iter().map(|e| e.run).collect();
    ids.sort_unstable();
    let pages: Vec<&[&str]> = ids.chunks(2).collect();
    eval(&olga, "location.hash = '#/runs?limit=2'");
    shows_runs(&olga, pages[0]);
    assert!(
        olga.find_element("#page-previous").is_err(),
        "the first page has no previous"
    );
    for page in &pages[1..] {
        follow(&olga, "#page-next");
        shows_runs(&olga, page);
    }
    assert!(
        olga.find_element("#page-next").is_err(),
        "the last page has no next"
    );
    shot(&olga, "9-runs-last-page");
    for page in pages[..pages.len() - 1].iter().rev() {
        follow(&olga, "#page-previous");
        shows_runs(&olga, page);
    }
    assert!(
        olga.find_element("#page-previous").is_err(),
        "back on the first page"
    );

    // The first and the last of the bundles the runs recorded, compared: tables, not JSON.
    follow(&olga, "nav a[href='#/policies']");
    wait_for(&olga, "#diff-new");
    eval(
        &olga,
        "document.getElementById('diff-new').closest('form').requestSubmit()",
    );
    wait_for(&olga, "#diff-out #diff-rules tbody tr");
    shot(&olga, "9-policies");
}

/// Waits until the run list shows exactly `runs`, in order.
fn shows_runs(tab: &Tab, runs: &[&str]) {
    let expected = serde_json::to_string(runs).expect("json");
    until(
        tab,
        &format!(
            "JSON.stringify([...document.querySelectorAll('tr[data-run]')].map(tr => tr.dataset.run)) === {}",
            serde_json::to_string(&expected).expect("json")
        ),
        &format!("the run list shows {expected}"),
    );
}
