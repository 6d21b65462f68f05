//! `docket serve`: the HTTP API, HTTP behaviour through raw TCP, the web UI and the
//! HTML report in a browser, one module per capability.

mod api;
mod browser;
mod postgres;
mod report_browser;
mod serve_http;
mod served;
mod ui_browser;
mod ui_examples;
