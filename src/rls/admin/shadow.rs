//! `/rls/{domain}/shadow[?ENTRIES]`: shadow mode set while the service runs, for a whole
//! domain (no query) or one descriptor (`PUT` with `{"shadow": true|false}`; `GET` reads what
//! is in force; `DELETE` gives the decision back to the configuration). Kept in the store's
//! overrides: in Redis, every replica follows within its poll, and a restart keeps it.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use serde::{Deserialize, Serialize};

use super::super::RateLimitService;
use super::super::live_overrides::{
    SHADOW, descriptor_key, domain_key, flag_policy, shadow_of, shadow_value,
};
use super::target::{Entry, Target};
use crate::admin::AdminError;
use crate::key::Key;

/// `PUT`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SetBody {
    shadow: bool,
}

/// Every answer.
#[derive(Serialize)]
pub(super) struct ShadowBody {
    domain: String,
    /// Empty for the whole domain.
    descriptor: Vec<Entry>,
    /// The key the setting is stored under.
    key: String,
    /// Shadow mode in force: the setting, else the configuration's (a descriptor: its
    /// rule's `shadow_mode`; a domain: the service's `SHADOW_MODE`).
    shadow: bool,
    /// Whether it was set through this API (else the configuration decides).
    set: bool,
}

/// The key the target's shadow mode is stored under: its domain's, or its descriptor's.
fn key_of(target: &Target) -> Key {
    if target.entries.is_empty() {
        domain_key(&target.domain)
    } else {
        descriptor_key(&target.domain, &target.pairs())
    }
}

/// The answer for `target` with `set` in force (`None`: the configuration decides).
fn answer(service: &RateLimitService, target: &Target, set: Option<bool>) -> ShadowBody {
    let configured = if target.entries.is_empty() {
        service.inner.global_shadow
    } else {
        target.rule().is_ok_and(|rule| rule.shadow_mode())
    };
    ShadowBody {
        domain: target.domain.clone(),
        descriptor: target.descriptor(),
        key: key_of(target).to_string(),
        shadow: set.unwrap_or(configured),
        set: set.is_some(),
    }
}

pub(super) async fn set(
    State(service): State<RateLimitService>,
    uri: http::Uri,
    body: Result<Json<SetBody>, JsonRejection>,
) -> Result<Json<ShadowBody>, AdminError> {
    let target = Target::of(&service, &uri)?;
    if !target.entries.is_empty() {
        // A descriptor no rule counts would be set in vain: say so.
        target.rule()?;
    }
    let Json(body) = body.map_err(super::bad_body)?;
    let policy = flag_policy(SHADOW).map_err(super::internal)?;
    let value = shadow_value(body.shadow).map_err(super::internal)?;
    super::overrides(&service, "set_override")?
        .set_override(&policy, &key_of(&target), value)
        .await?;
    Ok(Json(answer(&service, &target, Some(body.shadow))))
}

pub(super) async fn read(
    State(service): State<RateLimitService>,
    uri: http::Uri,
) -> Result<Json<ShadowBody>, AdminError> {
    let target = Target::of(&service, &uri)?;
    let policy = flag_policy(SHADOW).map_err(super::internal)?;
    let set = super::overrides(&service, "get_override")?
        .get_override(&policy, &key_of(&target))
        .await?
        .and_then(|value| shadow_of(&value));
    Ok(Json(answer(&service, &target, set)))
}

pub(super) async fn remove(
    State(service): State<RateLimitService>,
    uri: http::Uri,
) -> Result<Json<ShadowBody>, AdminError> {
    let target = Target::of(&service, &uri)?;
    let policy = flag_policy(SHADOW).map_err(super::internal)?;
    match super::overrides(&service, "remove_override")?
        .remove_override(&policy, &key_of(&target))
        .await?
    {
        true => Ok(Json(answer(&service, &target, None))),
        false => Err(AdminError::NoOverride),
    }
}
