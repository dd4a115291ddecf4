//! The decision as an axum extractor: `Decision` or `Option<Decision>` as a handler argument.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use http::StatusCode;
use http::request::Parts;

use crate::decision::Decision;

/// The rejection of a handler asking for a [`Decision`] that the request does not carry.
const MISSING: &str = "no rate-limit decision for this request: redlimit's RateLimitLayer is \
                       not installed in front of this handler, or did not limit this request \
                       (take Option<Decision> where that can happen)\n";

/// The layer's [`Decision`] on this request, as a handler argument.
///
/// The layer puts its decision in the extensions of every request it lets through. Requests it
/// does not limit (allow-listed, matching no rule of a
/// [`builder_per_route`](crate::RateLimitLayer::builder_per_route) layer, without a key under
/// [`MissingKey::Allow`](crate::layer::MissingKey::Allow)) have none: there, take
/// `Option<Decision>`. A `Decision` argument without one fails the handler's extraction with
/// `500 Internal Server Error` and a text saying so. (The layer itself answers 500 only to a
/// request it cannot key on a server that records no peer address: see
/// [`KeyMissing`](crate::layer::KeyMissing).)
///
/// ```
/// use std::time::Duration;
/// use axum::{routing::get, Router};
/// use redlimit::store::MemoryStore;
/// use redlimit::{Decision, Limit, Policy, RateLimitLayer};
///
/// async fn remaining(decision: Decision) -> String {
///     format!("{:?} left", decision.remaining())
/// }
///
/// async fn maybe(decision: Option<Decision>) -> String {
///     decision.map_or("not limited".into(), |d| d.policy().to_owned())
/// }
///
/// let policy = Policy::new("api", [Limit::gcra(10, Duration::from_secs(1))?])?;
/// let app: Router = Router::new()
///     .route("/", get(remaining))
///     .route("/maybe", get(maybe))
///     .layer(RateLimitLayer::new(MemoryStore::new(), policy));
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
impl<S: Send + Sync> FromRequestParts<S> for Decision {
    type Rejection = (StatusCode, &'static str);

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Decision>()
            .cloned()
            .ok_or((StatusCode::INTERNAL_SERVER_ERROR, MISSING))
    }
}

/// The layer's [`Decision`] on this request if it made one, as a handler argument
/// (`Option<Decision>`): `None` where the layer is not installed or did not limit the request.
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
impl<S: Send + Sync> OptionalFromRequestParts<S> for Decision {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<Decision>().cloned())
    }
}
