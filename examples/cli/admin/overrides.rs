//! `/overrides/{policy}/{key}`: a key's override, one `N/DURATION` per limit of the policy, one
//! per line (`PUT` sets it, `GET` reads it, `DELETE` removes it). Set through the layer, so its
//! cached denial of the key goes at once; the other replicas apply it within their poll of the
//! overrides (250 ms).

use axum::extract::rejection::{PathRejection, StringRejection};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use redlimit::store::Override;

use super::keys::target;
use super::{error, Admin};

/// A body longer than this is no list of at most 16 rates.
const MAX_BODY: usize = 4096;

pub(super) fn routes() -> Router<Admin> {
    Router::new()
        .route(
            "/overrides/{policy}/{key}",
            get(read).put(set).delete(remove),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY))
}

/// `PUT`: 204 once set; 400 with a one-line reason for a body that is not one `N/DURATION` per
/// limit of the policy (413 over 4 KiB).
async fn set(
    State(admin): State<Admin>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Result<String, StringRejection>,
) -> Response {
    let (policy, key) = match target(&admin, path) {
        Ok(target) => target,
        Err((status, message)) => return error(status, &message),
    };
    let body = match body {
        Ok(body) => body,
        Err(e) => return error(e.status(), &one_line(&e.body_text())),
    };
    let value = match Override::parse(&policy, &body) {
        Ok(value) => value,
        Err(e) => return error(StatusCode::BAD_REQUEST, &one_line(&e.to_string())),
    };
    match admin.handle.set_override(&policy, &key, value).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &format!("store: {e}")),
    }
}

/// `GET`: the override as `PUT` takes it (`text/plain`), or 404.
async fn read(
    State(admin): State<Admin>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    let (policy, key) = match target(&admin, path) {
        Ok(target) => target,
        Err((status, message)) => return error(status, &message),
    };
    match admin.handle.get_override(&policy, &key).await {
        Ok(Some(value)) => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{value}\n"),
        )
            .into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, "no override for this key"),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &format!("store: {e}")),
    }
}

/// `DELETE`: 204 once removed, 404 if there was none.
async fn remove(
    State(admin): State<Admin>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    let (policy, key) = match target(&admin, path) {
        Ok(target) => target,
        Err((status, message)) => return error(status, &message),
    };
    match admin.handle.remove_override(&policy, &key).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => error(StatusCode::NOT_FOUND, "no override for this key"),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &format!("store: {e}")),
    }
}

/// The reason on one line, however it was written.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
