//! The error of a request the layer could not key: the sign of a server that records no peer
//! address.

use std::sync::Arc;

/// The layer could not key a request: its key extractor found no key, and under
/// [`MissingKey::PeerIp`](crate::layer::MissingKey::PeerIp) (the default) the server recorded
/// no peer address either (axum served without `into_make_service_with_connect_info`, a Unix
/// socket, a transport whose connection info the layer cannot read).
///
/// The layer then answers `500 Internal Server Error` (gRPC `INTERNAL`) and puts this value
/// in the response's extensions, for the layers outside it (logging, error reporting) to find.
/// The fix is to serve with connect info, or to choose what happens
/// ([`MissingKey::PeerIpOrAllow`](crate::layer::MissingKey::PeerIpOrAllow) lets such
/// requests through).
///
/// ```
/// use std::convert::Infallible;
/// use std::time::Duration;
/// use http::{Request, Response, StatusCode};
/// use redlimit::layer::{KeyMissing, RateLimit};
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
/// use tower::ServiceExt;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let policy = Policy::new("api", [Limit::gcra(10, Duration::from_secs(1)).unwrap()]).unwrap();
/// let layer = RateLimitLayer::new(MemoryStore::new(), policy);
/// let app = RateLimit::new(tower::service_fn(|_: Request<String>| async {
///     Ok::<_, Infallible>(Response::new(String::from("hello")))
/// }), &layer);
/// // Called without a server, the request has no peer address: the layer cannot key it.
/// let response = app.oneshot(Request::new(String::new())).await.unwrap();
/// assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
/// let missing = response.extensions().get::<KeyMissing>().unwrap();
/// assert_eq!(missing.policy(), "api");
/// assert!(missing.to_string().contains("into_make_service_with_connect_info"));
/// # });
/// /// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyMissing {
    policy: Arc<str>,
}

impl KeyMissing {
    pub(crate) fn new(policy: Arc<str>) -> Self {
        KeyMissing { policy }
    }

    /// The name of the policy of the rule that applied to the request.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use http::{Request, Response};
    /// # use redlimit::layer::{KeyMissing, RateLimit};
    /// # use redlimit::store::MemoryStore;
    /// # use redlimit::{Limit, Policy, RateLimitLayer};
    /// # use tower::ServiceExt;
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// # let policy = Policy::new("login", [Limit::gcra(1, Duration::from_secs(1)).unwrap()]).unwrap();
    /// # let app = RateLimit::new(tower::service_fn(|_: Request<String>| async {
    /// #     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// # }), &RateLimitLayer::new(MemoryStore::new(), policy));
    /// # let response = app.oneshot(Request::new(String::new())).await.unwrap();
    /// let missing = response.extensions().get::<KeyMissing>().unwrap();
    /// assert_eq!(missing.policy(), "login");
    /// # });
    /// ```
    pub fn policy(&self) -> &str {
        &self.policy
    }
}

impl std::fmt::Display for KeyMissing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no rate-limit key for policy `{}`: the key extractor found none and the server \
             recorded no peer address; serve with connect info (axum: \
             into_make_service_with_connect_info::<SocketAddr>()) or choose \
             MissingKey::PeerIpOrAllow",
            self.policy
        )
    }
}

impl std::error::Error for KeyMissing {}
