//! `/keys/{policy}/{key}`: a key's state without consuming anything (`GET`), and its reset
//! (`DELETE`). `{key}` is the key text as the extractor makes it (`ip:127.0.0.1`),
//! percent-encoded in the path.

use std::time::{Duration, UNIX_EPOCH};

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use redlimit::store::KeyState;
use redlimit::{Key, Policy};
use serde_json::{json, Value};

use super::{error, Admin};

pub(super) fn routes() -> Router<Admin> {
    Router::new().route("/keys/{policy}/{key}", get(inspect).delete(reset))
}

/// `GET`: each limit's name, limit, remaining units, reset (Unix seconds) and retry-after
/// (seconds; 0 when a request would pass now), as the rate-limit headers count them.
async fn inspect(
    State(admin): State<Admin>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    let (policy, key) = match target(&admin, path) {
        Ok(target) => target,
        Err((status, message)) => return error(status, &message),
    };
    match admin.handle.inspect(&policy, &key).await {
        Ok(state) => Json(describe(&state, &key)).into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &format!("store: {e}")),
    }
}

/// `DELETE`: 204 once the key's state is gone (from the store and the layer's deny cache).
async fn reset(
    State(admin): State<Admin>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    let (policy, key) = match target(&admin, path) {
        Ok(target) => target,
        Err((status, message)) => return error(status, &message),
    };
    match admin.handle.reset(&policy, &key).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &format!("store: {e}")),
    }
}

/// The policy and key a path names, or the answer to a path that names none.
pub(super) fn target(
    admin: &Admin,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(Policy, Key), (StatusCode, String)> {
    let Path((policy, key)) =
        path.map_err(|e| (StatusCode::BAD_REQUEST, format!("bad path: {e}")))?;
    let policy = admin
        .handle
        .policy_named(&policy)
        .ok_or_else(|| (StatusCode::NOT_FOUND, format!("no policy named `{policy}`")))?;
    let key = Key::from_encoded(&key).ok_or_else(|| {
        (
            StatusCode::BAD_REQUEST,
            "bad key: expected the key's text as the extractor makes it (e.g. ip:127.0.0.1), \
             percent-encoded"
                .to_owned(),
        )
    })?;
    Ok((policy, key))
}

fn describe(state: &KeyState, key: &Key) -> Value {
    let limits: Vec<Value> = state
        .limits()
        .iter()
        .map(|limit| {
            let reset = (state.evaluated_at() + limit.reset_after())
                .duration_since(UNIX_EPOCH)
                .map_or(0, ceil_secs);
            json!({
                "name": limit.limit().to_string(),
                "limit": limit.limit().count(),
                "remaining": limit.remaining(),
                "reset": reset,
                "retry_after": limit.retry_after().map_or(0, |wait| ceil_secs(wait).max(1)),
            })
        })
        .collect();
    json!({
        "policy": state.policy(),
        "key": key.as_str(),
        "allowed": state.would_allow(),
        "limits": limits,
    })
}

/// Whole seconds, rounded up, as the headers count them.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}
