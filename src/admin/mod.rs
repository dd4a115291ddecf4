//! The admin API over HTTP (feature `admin`): read and reset a key's state and set its
//! overrides while the service runs, on a router of its own behind a bearer token.
//!
//! [`router`] takes the [`Handle`] of the layer that serves the
//! requests (so a reset or an override also drops that layer's cached denials) and the
//! [`AdminToken`]; serve it on a listener of its own, not beside the application's routes.
//!
//! | request | answer |
//! |---|---|
//! | `GET /keys/{policy}/{key}` | `200` `{"policy", "key", "allowed", "limits": [{"name", "limit", "remaining", "reset", "retry_after"}]}`, consuming nothing |
//! | `DELETE /keys/{policy}/{key}` | `204` (`200` `{"policy", "key"}` for a named client): the key's state is gone (store and deny cache) |
//! | `PUT /overrides/{policy}/{key}` with `{"limits": ["1000/1m", ...]}` | `204` (`200` `{"policy", "key"}` for a named client): one `N/DURATION` per limit of the policy, in its order |
//! | `GET /overrides/{policy}/{key}` | `200` `{"policy", "key", "limits": [...]}`, or `404` |
//! | `DELETE /overrides/{policy}/{key}` | `204` (`200` `{"policy", "key"}` for a named client), or `404` if there was none |
//!
//! `{key}` names the client in one of two ways:
//!
//! * **As the operator knows it**: `SPEC=VALUE`, the key spec and the raw value, several
//!   parts joined with `&` in the spec's order ([`ClientName`](crate::key::ClientName)). The
//!   layer's extractor for the policy encodes it exactly as it encodes a request (hashed,
//!   grouped, namespaced: [`Handle::client_key`]); every answer's `key` is the stored text.
//!   Values are percent-decoded (`%26` for `&`, `%25` for `%`, `%2F` for `/`; `+` stays `+`).
//!
//!   | extractor | `{key}` | stored key |
//!   |---|---|---|
//!   | [`PeerIp`](crate::key::PeerIp), [`ClientIp`](crate::key::ClientIp) | `ip=203.0.113.7`, `ip=2001:db8::1` | `ip:203.0.113.7`, `ip:2001:db8::/64` |
//!   | [`Header`](crate::key::Header) | `header:x-api-key=sk_live_123` | `header:x-api-key:#<sha-256>` |
//!   | [`Query`](crate::key::Query) | `query:api_key=sk_live_123` | `query:api_key:#<sha-256>` |
//!   | [`Route`](crate::key::Route) | `route=%2Fusers%2F%7Bid%7D` | `route:/users/{id}`, encoded |
//!   | [`Global`](crate::key::Global) | `global` | `global` |
//!   | [`Subject`](crate::key::Subject), `Jwt` | `sub=user-42`, `jwt=user-42`, `jwt:tenant=acme` | `sub:user-42`, `claim:tenant:acme` |
//!   | [`Both`](crate::key::Both) | `route=%2Fsearch&header:x-api-key=sk_live_123` | `route:/search+header:x-api-key:#<sha-256>` |
//!
//!   A name no rule of the policy keys on answers `400` `bad_client`; so does a rule keyed
//!   by a closure or a [`PerLimit`](crate::key::PerLimit): give those keys by their text.
//! * **By the stored text**, as the extractor made it (`ip:203.0.113.7`, `api;1=tenant:acme`),
//!   percent-encoded.
//!
//! `reset` is Unix seconds and `retry_after` seconds (0 when a request would
//! pass now), counted as the `X-RateLimit-Reset` and `Retry-After` headers count them. Every
//! request needs `Authorization: Bearer TOKEN` (checked before anything else, so the endpoints
//! cannot be probed without it); every failure is an [`AdminError`]: a status and
//! `{"error": CODE, "message": TEXT}`. A store without the power an endpoint needs answers
//! `503` with `unsupported`.
//!
//! ```
//! use std::time::Duration;
//! use axum::body::Body;
//! use http::Request;
//! use redlimit::admin::{self, AdminToken};
//! use redlimit::store::MemoryStore;
//! use redlimit::{Limit, Policy, RateLimitLayer};
//! use tower::ServiceExt;
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let policy = Policy::new("api", [Limit::gcra(5, Duration::from_secs(1))?])?;
//! let layer = RateLimitLayer::new(MemoryStore::new(), policy);
//! let admin = admin::router(layer.handle(), AdminToken::new("s3cret-token")?);
//! // Serve `admin` on a listener of its own:
//! // axum::serve(tokio::net::TcpListener::bind("127.0.0.1:9091").await?, admin).await?;
//!
//! let request = |auth: &str| {
//!     Request::get("/keys/api/ip%3A203.0.113.7")
//!         .header("authorization", auth)
//!         .body(Body::empty())
//!         .unwrap()
//! };
//! let answer = admin.clone().oneshot(request("Bearer s3cret-token")).await.unwrap();
//! assert_eq!(answer.status(), 200);
//! let answer = admin.clone().oneshot(request("Bearer guess")).await.unwrap();
//! assert_eq!(answer.status(), 401);
//! // The same client, named as the operator knows it.
//! let named = Request::delete("/keys/api/ip=203.0.113.7")
//!     .header("authorization", "Bearer s3cret-token")
//!     .body(Body::empty())
//!     .unwrap();
//! let answer = admin.oneshot(named).await.unwrap();
//! assert_eq!(answer.status(), 200); // {"policy":"api","key":"ip:203.0.113.7"}
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```

mod error;
mod keys;
pub(crate) mod overrides;
mod target;
mod token;

pub use error::AdminError;
#[cfg(feature = "rls")]
pub(crate) use target::decode_utf8;
pub use token::AdminToken;
#[cfg(feature = "rls")]
pub(crate) use token::require;

use axum::{Router, middleware};

use crate::layer::Handle;

/// Every admin endpoint (see the [module docs](self)) for the layer `handle` steers, behind
/// `token`. Anything else answers `404` (`not_found`), after the token check.
///
/// ```
/// use std::time::Duration;
/// use redlimit::admin::{router, AdminToken};
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
/// let policy = Policy::new("api", [Limit::gcra(5, Duration::from_secs(1))?])?;
/// let layer = RateLimitLayer::new(MemoryStore::new(), policy);
/// let admin: axum::Router = router(layer.handle(), AdminToken::new("s3cret-token")?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn router(handle: Handle, token: AdminToken) -> Router {
    Router::new()
        .merge(keys::routes())
        .merge(overrides::routes())
        .fallback(|| async { AdminError::NotFound })
        .method_not_allowed_fallback(|| async { AdminError::MethodNotAllowed })
        .with_state(handle)
        .layer(middleware::from_fn_with_state(token, token::require))
}
