//! A tiny axum app behind a layer, driven without a socket.

use std::convert::Infallible;
use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use redlimit::RateLimitLayer;
use tower::ServiceExt;

/// An app answering `ok` on every path, behind `layer`.
pub(crate) fn app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/{*rest}", get(|| async { "ok" }))
        .layer(layer)
}

/// An app whose handler answers with its decision's source (`Store`, `FailOpen`, `Local`).
pub(crate) fn source_app(layer: RateLimitLayer) -> Router {
    let source = |d: redlimit::Decision| async move { format!("{:?}", d.source()) };
    Router::new().route("/", get(source)).layer(layer)
}

/// A GET of `path` from the peer `ip`, with extra headers.
pub(crate) fn request(path: &str, ip: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::get(path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let mut req = builder.body(Body::empty()).expect("request");
    let addr: SocketAddr = format!("{ip}:40000").parse().expect("ip");
    req.extensions_mut()
        .insert(axum::extract::ConnectInfo(addr));
    req
}

/// Sends one request through the app.
pub(crate) async fn send(app: &Router, req: Request<Body>) -> Response<Body> {
    let result: Result<_, Infallible> = app.clone().oneshot(req).await;
    result.expect("infallible")
}

/// Sends a GET `/` from `ip` and returns the status.
pub(crate) async fn status_of(app: &Router, ip: &str) -> StatusCode {
    send(app, request("/", ip, &[])).await.status()
}

/// A header's value as text ("" when absent).
pub(crate) fn header<B>(response: &Response<B>, name: &str) -> String {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().expect("ascii header").to_owned())
        .unwrap_or_default()
}

/// The whole body as text.
pub(crate) async fn body_text(response: Response<Body>) -> String {
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    String::from_utf8(bytes.to_vec()).expect("utf-8 body")
}

/// `Header::new("x-api-key")`, unwrapped.
pub(crate) fn api_key() -> redlimit::key::Header {
    redlimit::key::Header::new("x-api-key").expect("a valid header name")
}
