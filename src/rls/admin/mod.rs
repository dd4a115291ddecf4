//! The rate limit service's admin API over HTTP (features `rls` and `admin`): a descriptor's
//! counters read and reset, its limits overridden, shadow mode turned on and off, while the
//! service runs, on a router of its own behind the same bearer token and with the same
//! errors as the layer's [`crate::admin`].
//!
//! A counter is named as an operator knows it: the domain in the path, the descriptor's
//! entries as the query, `KEY=VALUE` pairs joined with `&` in the descriptor's order
//! (percent-encoded: `%26` for `&` in a value, `%3D` for `=` in a key; `+` stays `+`).
//!
//! | request | answer |
//! |---|---|
//! | `GET /rls/{domain}/counters?ENTRIES` | `200` `{"domain", "descriptor": [{"key", "value"}], "rule", "mode", "overridden", "limits": [{"key", "name", "requests_per_unit", "unit", "limit", "remaining", "reset", "retry_after"}]}`, consuming nothing |
//! | `DELETE /rls/{domain}/counters?ENTRIES` | `200` `{"domain", "descriptor", "keys"}`: every counter of the descriptor gone from the store, and from every deny cache |
//! | `PUT /rls/{domain}/override?ENTRIES` with `{"limits": ["1000/1m", ...]}` | `200` `{"domain", "descriptor", "key", "limits"}`: one `N/DURATION` per limit of the descriptor's rule, in its order, each counted by that limit's algorithm |
//! | `GET /rls/{domain}/override?ENTRIES` | `200` as for `PUT`, or `404` `no_override` |
//! | `DELETE /rls/{domain}/override?ENTRIES` | `200` the override removed, or `404` `no_override` |
//! | `PUT /rls/{domain}/shadow[?ENTRIES]` with `{"shadow": true}` | `200` `{"domain", "descriptor", "key", "shadow", "set"}`: shadow mode on (or off) for the domain (no query) or the descriptor |
//! | `GET /rls/{domain}/shadow[?ENTRIES]` | `200` as for `PUT`: `shadow` in force, `set` whether this API set it |
//! | `DELETE /rls/{domain}/shadow[?ENTRIES]` | `200` back to the configuration's, or `404` `no_override` |
//!
//! Every answer names the keys the store keeps its things under (`key`, `keys`: a counter's
//! is `DOMAIN%00KEY%00VALUE...%00%23POSITION`, an override's the same without the position;
//! a text over 128 bytes is `#` and a digest, as [`Key`](crate::Key) encodes).
//! `reset` is Unix seconds and `retry_after` seconds, as the layer's admin API counts them;
//! a `requests_per_unit: 0` limit shows `limit` 0 (always over).
//!
//! **Across replicas.** Everything is kept in the store: a reset is told to every replica
//! through the Redis store's reset log, overrides and shadow settings are entries of its
//! overrides hash (policy names `rls#limits`, `rls#shadow`: no layer policy can have them),
//! and every replica reads both at its next poll
//! ([`override_poll`](crate::store::RedisStoreBuilder::override_poll), 250 ms by default),
//! then drops the denials its deny cache holds and applies the overrides to the next request.
//! Overrides and shadow settings survive restarts: a service just started reads them before
//! it plans its first request (within the store deadline, past it the domain's failure mode;
//! a store made with `connect` has read them already); a reload keeps them (an override that
//! no longer fits its rule, another number of limits, is ignored).
//!
//! **Semantics.** An override keeps each limit's algorithm and its counter (a descriptor that
//! used 90 of 100 and gets 1000 has 910 left); `current_limit` then shows `N` per the longest
//! unit the period is a whole number of. Shadow mode set for a descriptor makes it a shadow
//! descriptor (counted, answered OK), off makes it count as its rule says without
//! `shadow_mode`; set for a domain it is the service's `SHADOW_MODE` for that domain (every
//! request OK overall, statuses saying what would have been over). A rule with a
//! `requests_per_unit: 0` or `unlimited` limit cannot be overridden (`400` `bad_override`).
//!
//! Every request needs `Authorization: Bearer TOKEN`, checked first; every failure is an
//! [`AdminError`]: an unknown domain `404` `no_such_domain`, a descriptor no rule applies to
//! `404` `no_rule`, a query that is no descriptor `400` `bad_descriptor`, a body that is not
//! JSON or too large (4 KiB) `400` / `413` / `415`, a store without the power `503`
//! `unsupported`.
//!
//! ```
//! use axum::body::Body;
//! use http::Request;
//! use redlimit::admin::AdminToken;
//! use redlimit::rls::{admin, config::RlsConfig, RateLimitService};
//! use redlimit::store::MemoryStore;
//! use tower::ServiceExt;
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let config = RlsConfig::parse([("envoy.yaml", "
//! domain: envoy
//! descriptors:
//!   - key: remote_address
//!     rate_limit: {unit: minute, requests_per_unit: 10}
//! ")], false)?;
//! let service = RateLimitService::builder(MemoryStore::new()).config(config).build();
//! let admin = admin::router(service.clone(), AdminToken::new("s3cret-token")?);
//! let request = |method: &str, path: &str, body: &str| {
//!     Request::builder()
//!         .method(method)
//!         .uri(path)
//!         .header("authorization", "Bearer s3cret-token")
//!         .header("content-type", "application/json")
//!         .body(Body::from(body.to_owned()))
//!         .unwrap()
//! };
//! let path = "/rls/envoy/counters?remote_address=10.0.0.1";
//! let answer = admin.clone().oneshot(request("GET", path, "")).await.unwrap();
//! assert_eq!(answer.status(), 200); // {"limits": [{"limit": 10, "remaining": 10, ...}], ...}
//! let path = "/rls/envoy/override?remote_address=10.0.0.1";
//! let answer = admin.clone().oneshot(request("PUT", path, r#"{"limits": ["100/1m"]}"#)).await.unwrap();
//! assert_eq!(answer.status(), 200);
//! let answer = admin.oneshot(request("GET", "/rls/nope/counters?a=b", "")).await.unwrap();
//! assert_eq!(answer.status(), 404); // no_such_domain
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```

mod counters;
mod overrides;
mod shadow;
mod target;

use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::JsonRejection;
use axum::routing::get;
use axum::{Router, middleware};
use http::StatusCode;

use super::RateLimitService;
use crate::admin::{AdminError, AdminToken};
use crate::error::ConfigError;
use crate::store::Overrides;

/// A body longer than this is no list of at most 16 rates.
const MAX_BODY: usize = 4096;

/// Every endpoint of the [module docs](self) for `service` (a clone of the one that answers
/// Envoy, so a reset also drops its cached denials), behind `token`. Anything else answers
/// `404` (`not_found`), after the token check. Serve it on a listener of its own.
///
/// ```
/// use redlimit::admin::AdminToken;
/// use redlimit::rls::{admin, RateLimitService};
/// let service = RateLimitService::builder(redlimit::store::MemoryStore::new()).build();
/// let router: axum::Router = admin::router(service, AdminToken::new("s3cret-token")?);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
pub fn router(service: RateLimitService, token: AdminToken) -> Router {
    Router::new()
        .route(
            "/rls/{domain}/counters",
            get(counters::inspect).delete(counters::reset),
        )
        .route(
            "/rls/{domain}/override",
            get(overrides::read)
                .put(overrides::set)
                .delete(overrides::remove),
        )
        .route(
            "/rls/{domain}/shadow",
            get(shadow::read).put(shadow::set).delete(shadow::remove),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .fallback(|| async { AdminError::NotFound })
        .method_not_allowed_fallback(|| async { AdminError::MethodNotAllowed })
        .with_state(service)
        .layer(middleware::from_fn_with_state(token, crate::admin::require))
}

/// A body that is not the endpoint's JSON: 400, whether it does not parse or does not fit
/// (axum tells the two apart with 400 and 422); too large keeps its 413, one without a JSON
/// content type its 415.
fn bad_body(rejection: JsonRejection) -> AdminError {
    let status = match rejection.status() {
        StatusCode::UNPROCESSABLE_ENTITY => StatusCode::BAD_REQUEST,
        status => status,
    };
    AdminError::BadRequest(status, rejection.body_text())
}

/// The store's overrides, or `unsupported` naming `power`.
fn overrides<'a>(
    service: &'a RateLimitService,
    power: &'static str,
) -> Result<&'a dyn Overrides, AdminError> {
    service
        .inner
        .shared
        .store()
        .overrides()
        .ok_or(AdminError::Unsupported(power))
}

/// A placeholder policy that could not be made (it always can): the store's error shape.
fn internal(error: ConfigError) -> AdminError {
    AdminError::Store(error.to_string())
}
