//! The matched route: one quota per endpoint rather than per client.

use http::request::Parts;

use super::{ClientPart, ClientSpec, Key, KeyExtractor};

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

impl Route {
    /// The key of a route: what a request and an operator's name share.
    fn key_of(route: &[u8]) -> Key {
        Key::new(route).namespaced("route")
    }
}

impl KeyExtractor for Route {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        let route = matched_route(parts).unwrap_or_else(|| parts.uri.path());
        Some(Route::key_of(route.as_bytes()))
    }

    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        ClientPart::only(client, ClientSpec::Route).map(|part| Route::key_of(part.value()))
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
