//! The rate limit service's admin API (`redlimit::rls::admin::router`) in front of real
//! stores: a descriptor's counters inspected and reset, its limits overridden, shadow mode
//! set, each seen by the `ShouldRateLimit` answers; two services on one Redis follow each
//! other's changes; hostile input gets a typed JSON answer, never a panic or a 500.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, StatusCode};
use redlimit::admin::AdminToken;
use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitResponse;
use redlimit::rls::{RateLimitService, admin};
use redlimit::store::Store;
use serde_json::Value;

use super::service::{d, req};
use crate::support::{body_text, send};

mod counters;
mod fleet;
mod hostile;

pub(super) const TOKEN: &str = "s3cret-rls-admin";
pub(super) const AUTH: &str = "Bearer s3cret-rls-admin";

/// Day-long windows: no test runs across a window's end (but one started at midnight UTC).
pub(super) const CONFIG: &str = "
domain: test
descriptors:
  - key: ip
    rate_limit: {unit: day, requests_per_unit: 2, name: per_ip}
  - key: two
    rate_limits:
      - {unit: day, requests_per_unit: 2}
      - {unit: day, requests_per_unit: 3, algorithm: gcra}
  - key: banned
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: free
    rate_limit: {unlimited: true}
";

pub(super) fn service(store: Arc<dyn Store>) -> RateLimitService {
    let config = RlsConfig::parse([("test.yaml", CONFIG)], false).expect("config");
    RateLimitService::builder(store)
        .config(config)
        .store_deadline(Duration::from_secs(5))
        .build()
}

pub(super) fn router(service: &RateLimitService) -> Router {
    admin::router(service.clone(), AdminToken::new(TOKEN).unwrap())
}

/// An admin request with `auth` (none: no header) and an optional JSON body.
pub(super) async fn call_as(
    admin: &Router,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<&str>,
) -> (StatusCode, Value) {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(auth) = auth {
        builder = builder.header("authorization", auth);
    }
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    let request = builder
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .expect("request");
    let response = send(admin, request).await;
    let status = response.status();
    let text = body_text(response).await;
    let json =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"));
    (status, json)
}

pub(super) async fn call(
    admin: &Router,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (StatusCode, Value) {
    call_as(admin, method, path, Some(AUTH), body).await
}

/// One hit of descriptor `ip=VALUE`.
pub(super) async fn hit(service: &RateLimitService, ip: &str) -> RateLimitResponse {
    service
        .should_rate_limit(req(vec![d(&[("ip", ip)])], 1))
        .await
        .expect("ShouldRateLimit")
}
