//! The web UI (docs/api.md#the-web-ui): a handful of static files compiled into the
//! binary, served under `/` and `/assets/`, that call the JSON API from the browser. No
//! framework and nothing fetched from the network, at build time or at run time; the
//! pages hold no data, so they need no token (every `/api` route still does).

use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// One embedded file.
pub struct Asset {
    /// Its path as served.
    pub path: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static str,
}

/// Every file of the UI.
pub const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_str!("../ui/index.html"),
    },
    Asset {
        path: "/assets/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../ui/app.js"),
    },
    Asset {
        path: "/assets/api.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../ui/api.js"),
    },
    Asset {
        path: "/assets/views.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../ui/views.js"),
    },
    Asset {
        path: "/assets/style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../ui/style.css"),
    },
    Asset {
        path: "/assets/favicon.svg",
        content_type: "image/svg+xml",
        body: include_str!("../ui/favicon.svg"),
    },
];

/// Scripts, styles, requests and images from this server only: the pages cannot load or
/// send anything elsewhere, nor run inline script.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

fn serve(asset: &Asset) -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        asset.body,
    )
        .into_response()
}

/// `GET /`: the UI's one page (its views are chosen by the URL's fragment).
pub(crate) async fn index() -> Response {
    ASSETS.first().map_or_else(
        || ApiError::not_found("the web UI is not built in").into_response(),
        serve,
    )
}

/// `GET /assets/{file}`.
pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    let path = format!("/assets/{file}");
    ASSETS.iter().find(|a| a.path == path).map_or_else(
        || {
            ApiError::not_found(format!("no asset {path} in the web UI"))
                .at("path")
                .into_response()
        },
        serve,
    )
}

#[cfg(test)]
mod tests {
    use super::ASSETS;
    use docket_decider::RunEvent;

    /// The quoted names of `export const KINDS = [...]` in views.js.
    fn kinds_in_views() -> Vec<String> {
        let views = ASSETS
            .iter()
            .find(|a| a.path == "/assets/views.js")
            .expect("views.js is an asset")
            .body;
        let start = views
            .find("export const KINDS = [")
            .expect("views.js declares KINDS");
        let list = &views[start..];
        let list = &list[list.find('[').expect("[") + 1..list.find("];").expect("];")];
        list.split('\'')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    /// The run page listens on the event stream for the kinds of views.js only (an
    /// `EventSource` gets named events only when it listens for the name); a kind the
    /// decider can record but the page does not name would reach it late, from a refill.
    #[test]
    fn the_page_listens_for_every_kind_the_decider_records_and_no_other() {
        let listed = kinds_in_views();
        let missing: Vec<&&str> = RunEvent::KINDS
            .iter()
            .filter(|k| !listed.iter().any(|l| l == *k))
            .collect();
        assert!(
            missing.is_empty(),
            "serve/ui/views.js KINDS misses {missing:?}"
        );
        let unknown: Vec<&String> = listed
            .iter()
            .filter(|l| !RunEvent::KINDS.contains(&l.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "serve/ui/views.js KINDS names {unknown:?}, which the decider never records"
        );
        assert_eq!(listed.len(), RunEvent::KINDS.len(), "each kind once");
    }
}
