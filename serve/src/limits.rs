//! What a request may be (its body, its headers, its URI), refused in the API's own
//! words (docs/api.md#errors); and what a client is told when its request's body was not
//! read, so that it does not send its next request on a connection about to close.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;

use crate::error::ApiError;

/// Largest request body, in bytes.
pub(crate) const MAX_BODY: usize = 4 << 20;
/// Most header lines a request may have.
pub(crate) const MAX_HEADERS: usize = 100;
/// Largest size of a request's headers together, in bytes.
pub(crate) const MAX_HEADER_BYTES: usize = 64 << 10;
/// Longest path and query, in bytes.
pub(crate) const MAX_URI_BYTES: usize = 8 << 10;
/// The HTTP parser's own bounds, far above the API's so that the API's answer (in JSON)
/// comes first; a request beyond them is refused by the parser (a 431 without a body).
pub(crate) const PARSER_MAX_HEADERS: usize = 1000;
/// See [`PARSER_MAX_HEADERS`].
pub(crate) const PARSER_MAX_BUF: usize = 1 << 20;

/// The answer to a body over [`MAX_BODY`], however it was sent.
pub(crate) fn body_too_large() -> ApiError {
    ApiError::too_large(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the request body is larger than the API takes ({} MiB)",
            MAX_BODY >> 20
        ),
    )
    .at("body")
}

/// Refuses a request larger than the API takes before anything reads it: 414 for the
/// URI, 431 for the headers, 413 for a body whose `Content-Length` says so (a body sent
/// in chunks is stopped at [`MAX_BODY`] as it is read, with the same 413).
pub(crate) async fn check_size(request: Request, next: Next) -> Response {
    let uri = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if uri > MAX_URI_BYTES {
        return ApiError::too_large(
            StatusCode::URI_TOO_LONG,
            format!("the path and query are {uri} bytes; the API takes at most {MAX_URI_BYTES}"),
        )
        .at("uri")
        .into_response();
    }
    let headers = request.headers();
    if headers.len() > MAX_HEADERS {
        return ApiError::too_large(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "the request has {} header lines; the API takes at most {MAX_HEADERS}",
                headers.len()
            ),
        )
        .at("header")
        .into_response();
    }
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if bytes > MAX_HEADER_BYTES {
        return ApiError::too_large(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "the request's headers are {bytes} bytes; the API takes at most {MAX_HEADER_BYTES}"
            ),
        )
        .at("header")
        .into_response();
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return body_too_large().into_response();
    }
    next.run(request).await
}

/// Says `Connection: close` on the answer to a request whose body was not read to its
/// end (refused before it arrived: a 401, a 403, a 413), so the client opens a new
/// connection for its next request instead of losing it on this one, which the server
/// closes.
pub(crate) async fn close_if_unread(request: Request, next: Next) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let read = Arc::new(AtomicBool::new(false));
    let end = read.clone();
    let (parts, body) = request.into_parts();
    let tracked = body.into_data_stream().chain(
        futures::stream::once(async move { end.store(true, Ordering::Release) })
            .filter_map(|()| std::future::ready(None::<Result<Bytes, axum::Error>>)),
    );
    let mut response = next
        .run(Request::from_parts(parts, Body::from_stream(tracked)))
        .await;
    if !read.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
