//! `/overrides/{policy}/{key}`: a key's override, one `N/DURATION` per limit of the policy
//! (`PUT` sets it, `GET` reads it, `DELETE` removes it), set through the layer's handle so its
//! cached denials of the key go at once.

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use http::{StatusCode, Uri};
use serde::{Deserialize, Serialize};

use super::error::AdminError;
use super::target::Target;
use crate::layer::Handle;
use crate::policy::Policy;
use crate::store::Override;

/// A body longer than this is no list of at most 16 rates.
const MAX_BODY: usize = 4096;

pub(super) fn routes() -> Router<Handle> {
    Router::new()
        .route(
            "/overrides/{policy}/{key}",
            get(read).put(set).delete(remove),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY))
}

/// `PUT`'s body: one `N/DURATION` per limit of the policy, in its order.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetBody {
    limits: Vec<String>,
}

/// `GET`'s answer.
#[derive(Serialize)]
struct OverrideBody {
    policy: String,
    key: String,
    limits: Vec<String>,
}

async fn set(
    State(handle): State<Handle>,
    uri: Uri,
    body: Result<Json<SetBody>, JsonRejection>,
) -> Result<Response, AdminError> {
    let target = Target::of(&handle, &uri)?;
    let Json(body) = body.map_err(bad_body)?;
    let subject = format!("policy `{}`", target.policy.name());
    let value = parse(&subject, &target.policy, &body.limits)?;
    handle
        .set_override(&target.policy, &target.key, value)
        .await?;
    Ok(target.done())
}

/// A body that is not `{"limits": [..]}`: 400, whether its JSON does not parse or does not
/// fit (axum tells the two apart with 400 and 422); a body too large keeps its 413, one
/// without a JSON content type its 415.
fn bad_body(rejection: JsonRejection) -> AdminError {
    let status = match rejection.status() {
        StatusCode::UNPROCESSABLE_ENTITY => StatusCode::BAD_REQUEST,
        status => status,
    };
    AdminError::BadRequest(status, rejection.body_text())
}

async fn read(State(handle): State<Handle>, uri: Uri) -> Result<Json<OverrideBody>, AdminError> {
    let Target { policy, key, .. } = Target::of(&handle, &uri)?;
    let value = handle
        .get_override(&policy, &key)
        .await?
        .ok_or(AdminError::NoOverride)?;
    Ok(Json(OverrideBody {
        policy: policy.name().to_owned(),
        key: key.to_string(),
        limits: value.to_string().lines().map(str::to_owned).collect(),
    }))
}

async fn remove(State(handle): State<Handle>, uri: Uri) -> Result<Response, AdminError> {
    let target = Target::of(&handle, &uri)?;
    match handle.remove_override(&target.policy, &target.key).await? {
        true => Ok(target.done()),
        false => Err(AdminError::NoOverride),
    }
}

/// The override `rates` give `policy` (`subject` names it in errors, for example "policy
/// `api`"): each read with the algorithm of the limit at its position, so one string is one
/// rate (a line break inside it cannot smuggle in another).
pub(crate) fn parse(
    subject: &str,
    policy: &Policy,
    rates: &[String],
) -> Result<Override, AdminError> {
    let limits = policy.limits();
    if rates.len() != limits.len() {
        return Err(AdminError::BadOverride(format!(
            "{subject} has {} limits: give one N/DURATION for each, in order (got {})",
            limits.len(),
            rates.len()
        )));
    }
    let parsed = rates
        .iter()
        .zip(limits)
        .enumerate()
        .map(|(i, (rate, limit))| {
            limit
                .parse_rate_like(rate.trim())
                .map_err(|e| AdminError::BadOverride(format!("limits[{i}]: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Override::new(policy, parsed).map_err(|e| AdminError::BadOverride(e.to_string()))
}
