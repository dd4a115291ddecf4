//! `/keys/{policy}/{key}`: a key's state without consuming anything (`GET`), and its reset
//! (`DELETE`).

use std::time::{Duration, UNIX_EPOCH};

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use http::Uri;
use serde::Serialize;

use super::error::AdminError;
use super::target::Target;
use crate::key::Key;
use crate::layer::Handle;
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

async fn inspect(State(handle): State<Handle>, uri: Uri) -> Result<Json<KeyBody>, AdminError> {
    let target = Target::of(&handle, &uri)?;
    let state = handle.inspect(&target.policy, &target.key).await?;
    Ok(Json(describe(&state, &target.key)))
}

async fn reset(State(handle): State<Handle>, uri: Uri) -> Result<Response, AdminError> {
    let target = Target::of(&handle, &uri)?;
    handle.reset(&target.policy, &target.key).await?;
    Ok(target.done())
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
