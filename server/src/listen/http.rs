//! The HTTP listener (`PORT`, 8080): `GET /healthcheck` and `POST /json`, as
//! envoyproxy/ratelimit serves them.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::json;
use crate::config::InForce;
use crate::health::Health;

/// The largest `/json` body read: a request this large is refused before it is parsed.
const MAX_BODY: usize = 4 << 20;

/// `/healthcheck` and `/json`.
pub(crate) fn router(health: Health, service: InForce) -> Router {
    Router::new()
        .route("/healthcheck", get(healthcheck).with_state(health))
        .route(
            "/json",
            post(json_call)
                .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
                .with_state(service),
        )
}

/// `OK` while healthy; a bare 500 otherwise.
async fn healthcheck(State(health): State<Health>) -> Response {
    if health.is_healthy() {
        "OK".into_response()
    } else {
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    }
}

/// A proto3-JSON `RateLimitRequest`: 200 (within the limits), 429 (over), 500 (`UNKNOWN`),
/// and 400 for a body that is not a request or a call the service refuses — as the Go
/// service answers, a store error included (so its clients' failure handling holds).
async fn json_call(State(service): State<InForce>, body: Bytes) -> Response {
    let request = match json::request(&body) {
        Ok(request) => request,
        Err(why) => return bad_request(&why),
    };
    let response = match service.should_rate_limit(request).await {
        Ok(response) => response,
        Err(status) => return bad_request(status.message()),
    };
    let body = json::response(&response).to_string();
    (
        json::status_code(&response),
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

fn bad_request(why: &str) -> Response {
    tracing::warn!("/json: {why}");
    (StatusCode::BAD_REQUEST, format!("Bad Request: {why}\n")).into_response()
}
