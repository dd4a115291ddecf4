//! The matched route: one quota per endpoint rather than per client.

use http::request::Parts;

use super::{Key, KeyExtractor};

/// Keys on the route: axum's `MatchedPath` (`/users/{id}`) when the request went through an
/// axum router, else the URI path. Combine it with a client key ([`Both`](super::Both)) for a
/// per-client, per-endpoint quota.
///
/// ```
/// use redlimit::key::Route;
/// use redlimit::KeyExtractor;
/// let (parts, _) = http::Request::get("/health?x=1").body(()).unwrap().into_parts();
/// assert_eq!(Route.extract(&parts).unwrap().as_str(), "route:/health");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Route;

impl KeyExtractor for Route {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        let route = matched_route(parts).unwrap_or_else(|| parts.uri.path());
        Some(Key::new(route).namespaced("route"))
    }
}

/// The route pattern axum matched (`/users/{id}`), if the request went through an axum router.
pub(crate) fn matched_route(parts: &Parts) -> Option<&str> {
    #[cfg(feature = "axum")]
    if let Some(path) = parts.extensions.get::<axum::extract::MatchedPath>() {
        return Some(path.as_str());
    }
    let _ = parts;
    None
}
