//! Who is the client: turning a request into the [`Key`] its quota is counted under.
//!
//! A [`KeyExtractor`] reads the request head and returns a key, or `None` when the request has
//! none (the layer's [`MissingKey`](crate::MissingKey) setting decides what happens then).
//! Built in: [`PeerIp`] (the default), [`Header`], [`Route`], [`Global`], any closure
//! `Fn(&http::request::Parts) -> Option<Key>`, and [`Both`] to combine two.
//!
//! ```
//! use redlimit::{Both, Header, Key, KeyExtractor, PeerIp, Route};
//!
//! // Per route and per client.
//! let per_route_and_ip = Both::new(Route, PeerIp);
//! // Any closure over the request head.
//! let tenant = |parts: &http::request::Parts| {
//!     parts.headers.get("x-tenant").map(|v| Key::new(v.as_bytes()))
//! };
//! ```

mod both;
mod global;
mod header;
#[allow(clippy::module_inception)]
mod key;
mod peer_ip;
mod route;

pub use both::Both;
pub use global::Global;
pub use header::Header;
pub use key::Key;
pub use peer_ip::PeerIp;
pub use route::Route;

use http::request::Parts;

/// Pulls a rate-limit [`Key`] from a request head. Pure: no I/O, no body.
///
/// Implemented for closures:
///
/// ```
/// use redlimit::{Key, KeyExtractor};
/// let by_host = |parts: &http::request::Parts| parts.uri.host().map(Key::new);
/// let (parts, _) = http::Request::get("http://example.com/").body(()).unwrap().into_parts();
/// assert_eq!(by_host.extract(&parts).unwrap().as_str(), "example.com");
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of this request, or `None` if it has none.
    fn extract(&self, parts: &Parts) -> Option<Key>;
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<Key> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Option<Key> {
        self(parts)
    }
}

/// Lets an extractor chosen at run time (`Arc<dyn KeyExtractor>`) be used as one.
impl<K: KeyExtractor + ?Sized> KeyExtractor for std::sync::Arc<K> {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        (**self).extract(parts)
    }
}
