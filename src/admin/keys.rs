//! `/keys/{policy}/{key}`: a key's state without consuming anything (`GET`), and its reset
//! (`DELETE`).

use std::time::{Duration, UNIX_EPOCH};

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use http::StatusCode;
use serde::Serialize;

use super::error::AdminError;
use crate::key::Key;
use crate::layer::Handle;
use crate::policy::Policy;
use crate::store::KeyState;

pub(super) fn routes() -> Router<Handle> {
    Router::new().route("/keys/{policy}/{key}", get(inspect).delete(reset))
}

/// A key's state as `GET /keys/..` answers it.
#[derive(Serialize)]
struct KeyBody {
    policy: String,
    key: String,
    allowed: bool,
    limits: Vec<LimitBody>,
}

/// One limit of it, counted as the rate-limit headers count it.
#[derive(Serialize)]
struct LimitBody {
    name: String,
    limit: u64,
    remaining: u64,
    /// Unix seconds.
    reset: u64,
    /// Seconds; 0 when a request would pass now.
    retry_after: u64,
}

async fn inspect(
    State(handle): State<Handle>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<KeyBody>, AdminError> {
    let (policy, key) = target(&handle, path)?;
    let state = handle.inspect(&policy, &key).await?;
    Ok(Json(describe(&state, &key)))
}

async fn reset(
    State(handle): State<Handle>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, AdminError> {
    let (policy, key) = target(&handle, path)?;
    handle.reset(&policy, &key).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The policy and key a path names, or why it names none.
pub(super) fn target(
    handle: &Handle,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(Policy, Key), AdminError> {
    let Path((policy, key)) =
        path.map_err(|e| AdminError::BadRequest(e.status(), format!("bad path: {e}")))?;
    let policy = handle
        .policy_named(&policy)
        .ok_or(AdminError::NoSuchPolicy(policy))?;
    let key = Key::from_encoded(&key).ok_or(AdminError::BadKey)?;
    Ok((policy, key))
}

fn describe(state: &KeyState, key: &Key) -> KeyBody {
    let limits = state
        .limits()
        .iter()
        .map(|limit| LimitBody {
            name: limit.limit().to_string(),
            limit: limit.limit().count(),
            remaining: limit.remaining(),
            reset: (state.evaluated_at() + limit.reset_after())
                .duration_since(UNIX_EPOCH)
                .map_or(0, ceil_secs),
            retry_after: limit.retry_after().map_or(0, |wait| ceil_secs(wait).max(1)),
        })
        .collect();
    KeyBody {
        policy: state.policy().to_owned(),
        key: key.to_string(),
        allowed: state.would_allow(),
        limits,
    }
}

/// Whole seconds, rounded up, as the headers count them.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}
