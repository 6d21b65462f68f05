//! What the browser tests (`ui_browser.rs`, `ui_examples.rs`, `report_browser.rs`) share:
//! Debian's Chromium, driven through the DevTools protocol, and signing in to `docket serve`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use headless_chrome::{Browser, LaunchOptions, Tab};

/// Debian's `chromium`, which `.ci/run` installs when it is missing.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Whether Chromium is here; without it, a skip (said on stderr) outside CI, a failure
/// in CI.
#[allow(clippy::print_stderr)]
#[must_use]
pub fn chromium_present() -> bool {
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{CHROMIUM} is missing and CI is set: .ci/run installs Debian's chromium"
    );
    eprintln!("skipped: {CHROMIUM} is missing (apt-get install chromium); set CI to fail instead");
    false
}

/// Headless Chromium with its profile in `profile`, closed after `idle` without a
/// command, with nothing of its own reaching the network (no sync, updates or
/// background requests), so that what a test sees comes from the page it opened.
#[must_use]
pub fn launch(profile: PathBuf, idle: Duration, window: Option<(u32, u32)>) -> Browser {
    Browser::new(LaunchOptions {
        headless: true,
        sandbox: false,
        path: Some(PathBuf::from(CHROMIUM)),
        user_data_dir: Some(profile),
        idle_browser_timeout: idle,
        window_size: window,
        args: vec![
            OsStr::new("--disable-gpu"),
            OsStr::new("--disable-quic"),
            OsStr::new("--no-first-run"),
            OsStr::new("--disable-background-networking"),
            OsStr::new("--disable-component-update"),
            OsStr::new("--disable-sync"),
        ],
        ..LaunchOptions::default()
    })
    .expect("chromium starts under the DevTools protocol")
}

/// Makes a bearer token for `data` (`ROLE` named `NAME`) with `docket token create`.
#[must_use]
pub fn token(data: &Path, role: &str, name: &str) -> String {
    let out = docket_tests::docket_on(data, &["token", "create", "--role", role, "--name", name]);
    assert_eq!(docket_tests::exit_code(&out), 0, "{out:?}");
    docket_tests::stdout_text(&out).trim().to_owned()
}

/// Waits until `selector` matches in `tab`, for at most `bound`; a failure says what the
/// page shows.
pub fn wait_for(tab: &Tab, selector: &str, bound: Duration) {
    if let Err(e) = tab.wait_for_element_with_custom_timeout(selector, bound) {
        let page = tab
            .evaluate("document.getElementById('view').innerText", false)
            .ok()
            .and_then(|o| o.value);
        panic!("no {selector} within {bound:?} ({e}); the page shows: {page:?}");
    }
}

/// Puts `text` into the focused field of `tab` as one insertion, as a paste or an input
/// method does (the field's `input` event fires). Typing key by key costs two DevTools
/// round trips a character, about a quarter of a second each.
pub fn enter_text(tab: &Tab, text: &str) {
    tab.send_character(text).expect("enter the text");
}

/// Signs in on `tab` at `base` with `token` entered in the focused token field, Enter
/// submitting, and waits, at most `bound`, until the header names `name`.
pub fn sign_in(tab: &Tab, base: &str, token: &str, name: &str, bound: Duration) {
    tab.navigate_to(base).expect("navigate");
    tab.wait_until_navigated().expect("the page loads");
    wait_for(tab, "#token", bound);
    tab.find_element("#token")
        .expect("the token field")
        .focus()
        .expect("focus");
    enter_text(tab, token);
    tab.press_key("Enter").expect("submit");
    wait_for(tab, "#who-name", bound);
    let who = tab.find_element("#who-name").expect("signed in");
    assert_eq!(who.get_inner_text().expect("text"), name);
}
