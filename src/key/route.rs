//! The matched route: one quota per endpoint rather than per client.

use http::request::Parts;

use super::{Key, KeyExtractor};

/// Keys on the route: axum's `MatchedPath` (`/users/{id}`) when the request went through an
/// axum router, else the URI path. Combine it with a client key ([`Both`](crate::Both)) for a
/// per-client, per-endpoint quota.
///
/// ```
/// use redlimit::{KeyExtractor, Route};
/// let (parts, _) = http::Request::get("/health?x=1").body(()).unwrap().into_parts();
/// assert_eq!(Route.extract(&parts).unwrap().as_str(), "route:/health");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Route;

impl KeyExtractor for Route {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        #[cfg(feature = "axum")]
        if let Some(path) = parts.extensions.get::<axum::extract::MatchedPath>() {
            return Some(Key::new(path.as_str()).namespaced("route"));
        }
        Some(Key::new(parts.uri.path()).namespaced("route"))
    }
}
