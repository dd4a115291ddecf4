//! `/rls/{domain}/override?ENTRIES`: a descriptor's limits replaced while the service runs,
//! one `N/DURATION` per limit of its rule (`PUT` sets, `GET` reads, `DELETE` removes), kept in
//! the store's overrides: in Redis, every replica follows within its poll, and a restart
//! keeps them.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use serde::{Deserialize, Serialize};

use super::super::RateLimitService;
use super::super::live_overrides::{LIMITS, descriptor_key, flag_policy, limits_policy};
use super::target::{Entry, Target};
use crate::admin::AdminError;
use crate::store::Override;

/// `PUT`'s body: one `N/DURATION` per limit of the descriptor's rule, in its order.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SetBody {
    limits: Vec<String>,
}

/// Every answer: the descriptor, the key its override is stored under, the rates.
#[derive(Serialize)]
pub(super) struct OverrideBody {
    domain: String,
    descriptor: Vec<Entry>,
    key: String,
    limits: Vec<String>,
}

fn answer(target: &Target, value: &Override) -> OverrideBody {
    OverrideBody {
        domain: target.domain.clone(),
        descriptor: target.descriptor(),
        key: descriptor_key(&target.domain, &target.pairs()).to_string(),
        limits: value.to_string().lines().map(str::to_owned).collect(),
    }
}

pub(super) async fn set(
    State(service): State<RateLimitService>,
    uri: http::Uri,
    body: Result<Json<SetBody>, JsonRejection>,
) -> Result<Json<OverrideBody>, AdminError> {
    let target = Target::of(&service, &uri)?;
    let rule = target.rule()?;
    let Json(body) = body.map_err(super::bad_body)?;
    let policy = limits_policy(rule).map_err(AdminError::BadOverride)?;
    let subject = format!("the rule `{}`", rule.full_key());
    let value = crate::admin::overrides::parse(&subject, &policy, &body.limits)?;
    let key = descriptor_key(&target.domain, &target.pairs());
    super::overrides(&service, "set_override")?
        .set_override(&policy, &key, value.clone())
        .await?;
    Ok(Json(answer(&target, &value)))
}

pub(super) async fn read(
    State(service): State<RateLimitService>,
    uri: http::Uri,
) -> Result<Json<OverrideBody>, AdminError> {
    let target = Target::of(&service, &uri)?;
    target.require_entries()?;
    let key = descriptor_key(&target.domain, &target.pairs());
    let value = super::overrides(&service, "get_override")?
        .get_override(&flag_policy(LIMITS).map_err(super::internal)?, &key)
        .await?
        .ok_or(AdminError::NoOverride)?;
    Ok(Json(answer(&target, &value)))
}

pub(super) async fn remove(
    State(service): State<RateLimitService>,
    uri: http::Uri,
) -> Result<Json<OverrideBody>, AdminError> {
    let target = Target::of(&service, &uri)?;
    target.require_entries()?;
    let key = descriptor_key(&target.domain, &target.pairs());
    let store = super::overrides(&service, "remove_override")?;
    let policy = flag_policy(LIMITS).map_err(super::internal)?;
    let Some(value) = store.get_override(&policy, &key).await? else {
        return Err(AdminError::NoOverride);
    };
    match store.remove_override(&policy, &key).await? {
        true => Ok(Json(answer(&target, &value))),
        false => Err(AdminError::NoOverride),
    }
}
